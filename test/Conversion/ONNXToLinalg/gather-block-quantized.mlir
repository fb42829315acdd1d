// RUN: xfmr-opt %s --convert-onnx-to-linalg --split-input-file --verify-diagnostics | FileCheck %s

// com.microsoft GatherBlockQuantized as onnxruntime-genai's model builder
// writes a 4-bit embedding table (shared with the lm_head's MatMulNBits):
// uint8 data [V, C / 2], blocks of 32 along the last axis, scales [V,
// C / 32], no zero points (8). One element per output position reads the
// gathered row's byte, its nibble and its block's scale: only the gathered
// rows are read, and an index out of range is a run-time error.
// CHECK-LABEL: func.func @gbq_int4(
// CHECK: linalg.generic
// CHECK:   %[[ID:.*]] = tensor.extract %arg0[
// CHECK:   cf.assert %{{.*}}, "GatherBlockQuantized: index out of range
// CHECK:   %[[BYTE:.*]] = tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<16x32xi8>
// CHECK:   arith.extui %[[BYTE]] : i8 to i32
// CHECK:   arith.shrui
// CHECK:   arith.andi %{{.*}}, %c15_i32
// CHECK:   tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<16x2xf32>
// CHECK:   arith.subi %{{.*}}, %c8_i32
// CHECK:   arith.sitofp
// CHECK:   arith.mulf
// CHECK: -> tensor<?x?x64xf32>
func.func @gbq_int4(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %data = onnx.Constant() {value = dense<17> : tensor<16x32xui8>} : () -> tensor<16x32xui8>
  %scales = onnx.Constant() {value = dense<0.5> : tensor<16x2xf32>} : () -> tensor<16x2xf32>
  %none = onnx.NoValue : none
  %y = onnx.ms.GatherBlockQuantized(%data, %ids, %scales, %none) {bits = 4 : i64, block_size = 32 : i64, gather_axis = 0 : i64, quantize_axis = 1 : i64} : (tensor<16x32xui8>, tensor<?x?xi64>, tensor<16x2xf32>, none) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// int4-typed data (not uint8) is reported unsupported: 4-bit tensors have no
// lowering (the builder writes uint8).
func.func @gbq_signed_int4(%data: tensor<16x64xi4>, %ids: tensor<?xi64>) -> tensor<?x64xf32> {
  %scales = onnx.Constant() {value = dense<0.5> : tensor<16x2xf32>} : () -> tensor<16x2xf32>
  %none = onnx.NoValue : none
  // expected-error @+1 {{unsupported: type tensor<16x64xi4>}}
  %y = onnx.ms.GatherBlockQuantized(%data, %ids, %scales, %none) {bits = 4 : i64, block_size = 32 : i64, gather_axis = 0 : i64, quantize_axis = 1 : i64} : (tensor<16x64xi4>, tensor<?xi64>, tensor<16x2xf32>, none) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
