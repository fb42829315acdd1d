// RUN: xfmr-opt %s --xfmr-calibration-outputs --mlir-print-debuginfo=false | FileCheck %s
// RUN: xfmr-opt %s "--xfmr-calibration-outputs=samples=4 second-moments=true" --mlir-print-debuginfo=false | FileCheck %s --check-prefix=GRAM
// RUN: not xfmr-opt %s "--xfmr-calibration-outputs=samples=0" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: xfmr-calibration-outputs: samples must be in 1..4096

// The calibration artifact of xfmr-compile --calibration: each product with
// a constant f32 [K, N] weight returns max |a|, mean |a| and mean a^2 of its
// input over every axis but the last (one [3K] result), and 64 of its rows
// spread evenly over
// them ([64, K]: AWQ's error measurements; static, so that layers outline),
// named by the product's index among
// the module's onnx.MatMul ops. Product 1 (a weight known at run time) is
// not measured; product 3 shares product 0's input, whose rows product 0
// returns already.
// The rows are picked at indices the host passes in (an argument, so that
// no layer owns them: xfmr-outline-layers passes them to each).
// CHECK-LABEL: func.func @model(
// CHECK-SAME: %arg3: tensor<64xi64> {onnx.name = "xfmr_calibration.rows"}) -> (tensor<?x?x4xf32> {onnx.name = "y"}, tensor<?x?x3xf32> {onnx.name = "z"},
// CHECK-SAME: tensor<24xf32> {onnx.name = "xfmr_calibration.0.channels"}, tensor<64x8xf32> {onnx.name = "xfmr_calibration.0.rows"},
// CHECK-SAME: tensor<12xf32> {onnx.name = "xfmr_calibration.2.channels"}, tensor<64x4xf32> {onnx.name = "xfmr_calibration.2.rows"},
// CHECK-SAME: tensor<24xf32> {onnx.name = "xfmr_calibration.3.channels"})
// CHECK: %[[Y:.*]] = onnx.MatMul(%arg0,
// CHECK: %[[AXES:.*]] = onnx.Constant() {value = dense<[0, 1]> : tensor<2xi64>}
// CHECK: %[[ABS:.*]] = onnx.Abs(%arg0)
// CHECK: %[[SQ:.*]] = onnx.Mul(%arg0, %arg0)
// CHECK: %[[MAX:.*]] = onnx.ReduceMax(%[[ABS]], %[[AXES]]) {keepdims = 0 : i64}
// CHECK: %[[MEAN:.*]] = onnx.ReduceMean(%[[ABS]], %[[AXES]]) {keepdims = 0 : i64
// CHECK: %[[MS:.*]] = onnx.ReduceMean(%[[SQ]], %[[AXES]]) {keepdims = 0 : i64
// CHECK: %[[CH:.*]] = onnx.Concat(%[[MAX]], %[[MEAN]], %[[MS]]) {axis = 0 : i64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<24xf32>
// CHECK: %[[A:.*]] = onnx.Reshape(%arg0, %{{.*}}) : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
// CHECK: %[[ROWS:.*]] = onnx.Gather(%[[A]], %arg3) : (tensor<?x8xf32>, tensor<64xi64>) -> tensor<64x8xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %{{.*}}, %{{.*}}, %[[CH]], %[[ROWS]], %{{.*}}, %{{.*}}, %{{.*}} :

// With second moments, the inputs whose rows are returned also return
// A^T A, and the new MatMuls do not shift the products' indices.
// GRAM-LABEL: func.func @model(
// GRAM-SAME: %arg3: tensor<4xi64> {onnx.name = "xfmr_calibration.rows"})
// GRAM-SAME: tensor<4x8xf32> {onnx.name = "xfmr_calibration.0.rows"}, tensor<8x8xf32> {onnx.name = "xfmr_calibration.0.gram"},
// GRAM-SAME: tensor<4x4xf32> {onnx.name = "xfmr_calibration.2.rows"}, tensor<4x4xf32> {onnx.name = "xfmr_calibration.2.gram"},
// GRAM-SAME: tensor<24xf32> {onnx.name = "xfmr_calibration.3.channels"})
// GRAM: %[[A:.*]] = onnx.Reshape(%arg0, %{{.*}}) : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
// GRAM: %[[AT:.*]] = onnx.Transpose(%[[A]]) {perm = [1, 0]} : (tensor<?x8xf32>) -> tensor<8x?xf32>
// GRAM: %[[G:.*]] = onnx.MatMul(%[[AT]], %[[A]]) : (tensor<8x?xf32>, tensor<?x8xf32>) -> tensor<8x8xf32>
func.func @model(%x: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>, %wv: tensor<8x3xf32>) -> (tensor<?x?x4xf32> {onnx.name = "y"}, tensor<?x?x3xf32> {onnx.name = "z"}) {
  %w = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 5.0]]> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %y = onnx.MatMul(%x, %w) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %z = onnx.MatMul(%v, %wv) : (tensor<?x?x8xf32>, tensor<8x3xf32>) -> tensor<?x?x3xf32>
  %w2 = onnx.Constant() {value = dense<[[1.0], [2.0], [3.0], [4.5]]> : tensor<4x1xf32>} : () -> tensor<4x1xf32>
  %u = onnx.MatMul(%y, %w2) : (tensor<?x?x4xf32>, tensor<4x1xf32>) -> tensor<?x?x1xf32>
  %t = onnx.MatMul(%x, %w) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  return %y, %z : tensor<?x?x4xf32>, tensor<?x?x3xf32>
}
