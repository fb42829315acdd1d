// RUN: xfmr-opt %s --convert-onnx-to-linalg --split-input-file --verify-diagnostics | FileCheck %s

// DequantizeLinear per output channel (axis 1 of [K, N] int8 weights, as
// quantize_static writes them): scale and zero point [N] broadcast as
// [1, N]; y = (x - zp) * scale in f32.
// CHECK-LABEL: func.func @dequantize_per_channel(
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [1, 4] : tensor<4xf32> into tensor<1x4xf32>
// CHECK: linalg.generic
// CHECK: arith.sitofp
// CHECK: arith.subf
// CHECK: arith.mulf
func.func @dequantize_per_channel(%x: tensor<3x4xi8>, %s: tensor<4xf32>, %z: tensor<4xi8>) -> tensor<3x4xf32> {
  %y = "onnx.DequantizeLinear"(%x, %s, %z) {axis = 1 : i64} : (tensor<3x4xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// QuantizeLinear to uint8 per tensor: round half to even, add the zero
// point, saturate to [0, 255].
// CHECK-LABEL: func.func @quantize_u8(
// CHECK: arith.divf
// CHECK: math.roundeven
// CHECK: arith.addf
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.minimumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.fptoui %{{.*}} : f32 to i8
func.func @quantize_u8(%x: tensor<?x8xf32>, %s: tensor<f32>, %z: tensor<ui8>) -> tensor<?x8xui8> {
  %y = "onnx.QuantizeLinear"(%x, %s, %z) : (tensor<?x8xf32>, tensor<f32>, tensor<ui8>) -> tensor<?x8xui8>
  return %y : tensor<?x8xui8>
}

// -----

// DynamicQuantizeLinear: min and max over every element (starting from 0),
// then the scale, the zero point and the uint8 values.
// CHECK-LABEL: func.func @dynamic_quantize(
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK: arith.minimumf
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK: arith.maximumf
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8xi8>, tensor<f32>, tensor<i8>
func.func @dynamic_quantize(%x: tensor<?x8xf32>) -> (tensor<?x8xui8>, tensor<f32>, tensor<ui8>) {
  %y:3 = "onnx.DynamicQuantizeLinear"(%x) : (tensor<?x8xf32>) -> (tensor<?x8xui8>, tensor<f32>, tensor<ui8>)
  return %y#0, %y#1, %y#2 : tensor<?x8xui8>, tensor<f32>, tensor<ui8>
}

// -----

// Blocked scales (opset 21) are reported, not miscomputed.
func.func @dequantize_blocked(%x: tensor<4x8xi8>, %s: tensor<4x2xf32>) -> tensor<4x8xf32> {
  %none = onnx.NoValue : none
  // expected-error @+1 {{blocked quantization (block_size) is not supported}}
  %y = "onnx.DequantizeLinear"(%x, %s, %none) {axis = 1 : i64, block_size = 4 : i64} : (tensor<4x8xi8>, tensor<4x2xf32>, none) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
