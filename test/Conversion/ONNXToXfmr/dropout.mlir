// RUN: xfmr-opt %s --split-input-file --xfmr-raise --verify-diagnostics | FileCheck %s

// xfmr-raise first removes Dropout whose mask is unused (inference: the
// identity), so the patterns after it see through attention and MLP
// dropouts.
// CHECK-LABEL: func.func @inference_dropout(
// CHECK-NOT: onnx.Dropout
// CHECK: %[[Y:.*]] = onnx.Relu(%arg0)
// CHECK: return %[[Y]]
func.func @inference_dropout(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %none = onnx.NoValue : none
  %r = onnx.Constant() {value = dense<1.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %f = onnx.Constant() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
  %d, %m = onnx.Dropout(%x, %r, %f) : (tensor<2x16xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x16xf32>, none)
  %y = onnx.Relu(%d) : (tensor<2x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// A model exported while its module was training carries training_mode
// true: run as identity with a warning at the node (onnxruntime would
// sample a random mask on every run).
// CHECK-LABEL: func.func @training_dropout(
// CHECK-NOT: onnx.Dropout
// CHECK: return %arg0
func.func @training_dropout(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %r = onnx.Constant() {value = dense<1.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %t = onnx.Constant() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
  // expected-warning @+1 {{Dropout with training_mode true (or not a constant) runs as identity}}
  %d, %m = onnx.Dropout(%x, %r, %t) : (tensor<2x16xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x16xf32>, none)
  return %d : tensor<2x16xf32>
}

// -----

// A Dropout whose mask is used stays (the lowering computes an all-true
// mask).
// CHECK-LABEL: func.func @dropout_mask_used(
// CHECK: onnx.Dropout
func.func @dropout_mask_used(%x: tensor<2x16xf32>) -> (tensor<2x16xf32>, tensor<2x16xi1>) {
  %none = onnx.NoValue : none
  %d, %m = onnx.Dropout(%x, %none, %none) : (tensor<2x16xf32>, none, none) -> (tensor<2x16xf32>, tensor<2x16xi1>)
  return %d, %m : tensor<2x16xf32>, tensor<2x16xi1>
}
