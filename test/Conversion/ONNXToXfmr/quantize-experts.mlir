// RUN: xfmr-opt %s --split-input-file --xfmr-quantize-experts=mode=int8 | FileCheck %s --check-prefix=INT8
// RUN: xfmr-opt %s --split-input-file --xfmr-quantize-experts=mode=bf16 | FileCheck %s --check-prefix=BF16
// RUN: xfmr-opt %s --split-input-file --xfmr-quantize-experts=mode=fp8-e4m3 | FileCheck %s --check-prefix=FP8
// RUN: xfmr-opt %s --split-input-file --xfmr-quantize-experts="mode=int8 skip=layers.1,layers.0/mlp" | FileCheck %s --check-prefix=SKIP
// RUN: not xfmr-opt %s --split-input-file --xfmr-quantize-experts=mode=int3 2>&1 | FileCheck %s --check-prefix=MODE

// The experts of an xfmr.moe become narrow constants (int8 and fp8 with one
// f32 scale per expert and output column); the router and the shared
// expert stay f32. (The values are checked by the kernel's unit tests and
// test/Integration/CPU/moe-quant.test.)
// INT8-LABEL: func.func @experts(
// INT8: xfmr.moe silu %{{.*}} scales(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x2xf32>) {top_k = 1 : i64} : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xi8>, tensor<2x2x3xi8>, tensor<2x3x2xi8>
// BF16-LABEL: func.func @experts(
// BF16-NOT: scales
// BF16: xfmr.moe silu {{.*}} : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xbf16>, tensor<2x2x3xbf16>, tensor<2x3x2xbf16>
// FP8-LABEL: func.func @experts(
// FP8: xfmr.moe silu {{.*}} scales({{.*}}) {top_k = 1 : i64} : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xf8E4M3FN>, tensor<2x2x3xf8E4M3FN>, tensor<2x3x2xf8E4M3FN>
// SKIP-LABEL: func.func @experts(
// SKIP: xfmr.moe silu {{.*}} : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xf32>
// MODE: xfmr-quantize-experts: mode is bf16, int8 or fp8-e4m3, not 'int3'
func.func @experts(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %r = onnx.Constant() {value = dense<[[0.5, -0.5], [0.25, 1.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %g = onnx.Constant() {value = dense<[[[1.27, -0.5, 0.1], [0.3, 0.2, -2.54]], [[0.0, 0.0, 0.0], [0.5, 1.0, -1.0]]]> : tensor<2x2x3xf32>} : () -> tensor<2x2x3xf32>
  %u = onnx.Constant() {value = dense<[[[0.2, 0.4, 0.6], [-0.1, -0.3, 0.5]], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]> : tensor<2x2x3xf32>} : () -> tensor<2x2x3xf32>
  %d = onnx.Constant() {value = dense<[[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], [[-0.1, -0.2], [-0.3, -0.4], [-0.5, -0.6]]]> : tensor<2x3x2xf32>} : () -> tensor<2x3x2xf32>
  %y = xfmr.moe silu %x, %r, %g, %u, %d {top_k = 1 : i64}
      : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x3x2xf32>
      loc("/m/layers.0/mlp/experts/ReduceSum")
  return %y : tensor<?x2xf32>
}

// -----

// Experts already narrow (or not constants) are left alone.
// INT8-LABEL: func.func @runtime_experts(
// INT8: xfmr.moe silu {{.*}} : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xf32>
func.func @runtime_experts(%x: tensor<?x2xf32>, %g: tensor<2x2x3xf32>) -> tensor<?x2xf32> {
  %r = onnx.Constant() {value = dense<[[0.5, -0.5], [0.25, 1.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %d = onnx.Constant() {value = dense<0.5> : tensor<2x3x2xf32>} : () -> tensor<2x3x2xf32>
  %y = xfmr.moe silu %x, %r, %g, %g, %d {top_k = 1 : i64}
      : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x3x2xf32>
  return %y : tensor<?x2xf32>
}
