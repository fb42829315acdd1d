// RUN: xfmr-opt %s --convert-onnx-to-linalg --split-input-file -verify-diagnostics | FileCheck %s

// Broadcasting Add: the rank-1 operand is read through a projected map.
// CHECK-LABEL: func @add_bcast
// CHECK: linalg.generic {indexing_maps = [#map, #map1, #map]
// CHECK: arith.addf
func.func @add_bcast(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = onnx.Add(%a, %b) : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Unsigned integers become signless with unsigned arithmetic.
// CHECK-LABEL: func @div_unsigned
// CHECK-SAME: tensor<4xi8>
// CHECK: arith.divui
func.func @div_unsigned(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xui8> {
  %0 = onnx.Div(%a, %b) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}

// -----

// MatMul: one contraction; loops ordered k, m, n so the innermost walks rows
// of the weights; the float sum may be reassociated.
// CHECK-LABEL: func @matmul
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel", "parallel"]
// CHECK: arith.addf {{.*}} fastmath<reassoc,contract>
func.func @matmul(%a: tensor<2x8xf32>, %b: tensor<8x16xf32>) -> tensor<2x16xf32> {
  %0 = onnx.MatMul(%a, %b) : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// A dynamic extent that may be 1 at run time: checked, then either the
// mapped generic or a gather that clamps size-1 dims.
// CHECK-LABEL: func @dynamic_bcast
// CHECK: cf.assert {{.*}} "broadcast: incompatible extents
// CHECK: scf.if
// CHECK: linalg.generic
// CHECK: } else {
// CHECK: tensor.extract
func.func @dynamic_bcast(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = onnx.Mul(%a, %b) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Reductions keep dims through tensor.expand_shape.
// CHECK-LABEL: func @reduce_mean
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: tensor.expand_shape
// CHECK: arith.divf
func.func @reduce_mean(%a: tensor<3x5xf32>) -> tensor<3x1xf32> {
  %axes = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %0 = onnx.ReduceMean(%a, %axes) : (tensor<3x5xf32>, tensor<1xi64>) -> tensor<3x1xf32>
  return %0 : tensor<3x1xf32>
}

// -----

// Operands that decide the result's layout must be constants.
func.func @runtime_axes(%a: tensor<3x5xf32>, %axes: tensor<1xi64>) -> tensor<3x1xf32> {
  // expected-error @+1 {{op 'ReduceSum': unsupported: axes must be a constant}}
  %0 = onnx.ReduceSum(%a, %axes) : (tensor<3x5xf32>, tensor<1xi64>) -> tensor<3x1xf32>
  return %0 : tensor<3x1xf32>
}

// -----

// An op without a lowering names the node.
func.func @no_lowering(%a: tensor<f32>) -> tensor<0x?xi64> {
  // expected-error @unknown {{node 'nz' (NonZero): unsupported: scalar input}}
  %0 = onnx.NonZero(%a) : (tensor<f32>) -> tensor<0x?xi64> loc("nz"("NonZero"))
  return %0 : tensor<0x?xi64>
}
