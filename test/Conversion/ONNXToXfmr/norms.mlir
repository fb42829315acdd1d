// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on normalizations: Llama's decomposed RMS norm, the ONNX
// RMSNormalization and LayerNormalization ops, and layer norm decomposed
// as torch exports it below opset 17; then cases where one detail must stop
// the match.

// Llama RMS norm, the input_layernorm of llama_gqa_static.onnx:
// w * (x * 1 / sqrt(mean(x^2, -1) + 1e-6)), weight on the left.
// CHECK-LABEL: xfmr-raise @llama_rms_norm: formed 1 rms_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_rms_norm(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>
// CHECK-NOT: onnx.ReduceMean
// CHECK: %[[Y:.*]] = xfmr.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32} : tensor<1x8x64xf32>, tensor<64xf32>
// CHECK-NOT: onnx.ReduceMean
// CHECK-NOT: onnx.Sqrt
// CHECK-NOT: onnx.Mul
// CHECK: return %[[Y]]
func.func @llama_rms_norm(%42: tensor<1x8x64xf32>, %26: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %10 = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %11 = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %12 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %14 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %67 = onnx.Pow(%42, %11) : (tensor<1x8x64xf32>, tensor<f32>) -> tensor<1x8x64xf32>
  %68 = onnx.ReduceMean(%67, %14) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x8x1xf32>
  %69 = onnx.Add(%68, %10) : (tensor<1x8x1xf32>, tensor<f32>) -> tensor<1x8x1xf32>
  %70 = onnx.Sqrt(%69) : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32>
  %71 = onnx.Div(%12, %70) : (tensor<f32>, tensor<1x8x1xf32>) -> tensor<1x8x1xf32>
  %72 = onnx.Mul(%42, %71) : (tensor<1x8x64xf32>, tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %73 = onnx.Mul(%26, %72) : (tensor<64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  return %73 : tensor<1x8x64xf32>
}

// -----

// The dynamic-shape Llama export (llama_gqa.onnx) with its constant
// all-ones weight: the same op on [?, ?, 64].
// CHECK-LABEL: xfmr-raise @llama_rms_norm_dynamic: formed 1 rms_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_rms_norm_dynamic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?x64xf32>
// CHECK: %[[W:.*]] = onnx.Constant() {value = dense<1.000000e+00> : tensor<64xf32>}
// CHECK: %[[Y:.*]] = xfmr.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32} : tensor<?x?x64xf32>, tensor<64xf32>
// CHECK-NOT: onnx.ReduceMean
// CHECK: return %[[Y]]
func.func @llama_rms_norm_dynamic(%47: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %10 = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %11 = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %12 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %24 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %31 = onnx.Constant() {value = dense<1.000000e+00> : tensor<64xf32>} : () -> tensor<64xf32>
  %129 = onnx.Pow(%47, %11) : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %130 = onnx.ReduceMean(%129, %24) : (tensor<?x?x64xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %131 = onnx.Add(%130, %10) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %132 = onnx.Sqrt(%131) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %133 = onnx.Div(%12, %132) : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %134 = onnx.Mul(%47, %133) : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %135 = onnx.Mul(%31, %134) : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %135 : tensor<?x?x64xf32>
}

// -----

// T5-style (written by hand): Mul(x, x) for the square, Reciprocal for the
// inverse, weight on the right.
// CHECK-LABEL: xfmr-raise @t5_rms_norm_reciprocal: formed 1 rms_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @t5_rms_norm_reciprocal(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x5x32xf32>, %[[W:[a-z0-9]+]]: tensor<32xf32>
// CHECK: %[[Y:.*]] = xfmr.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32} : tensor<2x5x32xf32>, tensor<32xf32>
// CHECK-NOT: onnx.Reciprocal
// CHECK: return %[[Y]]
func.func @t5_rms_norm_reciprocal(%x: tensor<2x5x32xf32>, %w: tensor<32xf32>) -> tensor<2x5x32xf32> {
  %eps = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %axes = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %sq = onnx.Mul(%x, %x) : (tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> tensor<2x5x32xf32>
  %mean = onnx.ReduceMean(%sq, %axes) : (tensor<2x5x32xf32>, tensor<1xi64>) -> tensor<2x5x1xf32>
  %add = onnx.Add(%mean, %eps) : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %sqrt = onnx.Sqrt(%add) : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %inv = onnx.Reciprocal(%sqrt) : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %n = onnx.Mul(%x, %inv) : (tensor<2x5x32xf32>, tensor<2x5x1xf32>) -> tensor<2x5x32xf32>
  %y = onnx.Mul(%n, %w) : (tensor<2x5x32xf32>, tensor<32xf32>) -> tensor<2x5x32xf32>
  return %y : tensor<2x5x32xf32>
}

// -----

// ONNX RMSNormalization-23 over the last axis.
// CHECK-LABEL: xfmr-raise @rms_normalization_op: formed 1 rms_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @rms_normalization_op(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>
// CHECK: %[[Y:.*]] = xfmr.rms_norm %[[X]], %[[W]] {epsilon = 9.99999974E-6 : f32} : tensor<1x8x64xf32>, tensor<64xf32>
// CHECK-NOT: onnx.RMSNormalization
// CHECK: return %[[Y]]
func.func @rms_normalization_op(%x: tensor<1x8x64xf32>, %w: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %y = onnx.RMSNormalization(%x, %w) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// -----

// GPT-2's ln_1 (gpt2_static.onnx): LayerNormalization-17 with unused Mean
// and InvStdDev outputs.
// CHECK-LABEL: xfmr-raise @gpt2_layer_norm: formed 1 layer_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gpt2_layer_norm(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>
// CHECK: %[[Y:.*]] = xfmr.layer_norm %[[X]], %[[W]], %[[B]] {epsilon = 9.99999974E-6 : f32} : tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK-NOT: onnx.LayerNormalization
// CHECK: return %[[Y]]
func.func @gpt2_layer_norm(%40: tensor<1x8x64xf32>, %24: tensor<64xf32>, %25: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %Y, %Mean, %InvStdDev = onnx.LayerNormalization(%40, %24, %25) : (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<1x8x64xf32>, none, none)
  return %Y : tensor<1x8x64xf32>
}

// -----

// LayerNormalization without a bias: the op has no bias operand.
// CHECK-LABEL: xfmr-raise @layer_norm_no_bias: formed 1 layer_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @layer_norm_no_bias(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x32xf32>, %[[W:[a-z0-9]+]]: tensor<32xf32>
// CHECK: %[[Y:.*]] = xfmr.layer_norm %[[X]], %[[W]] {epsilon = 9.99999974E-6 : f32} : tensor<4x32xf32>, tensor<32xf32>{{$}}
// CHECK: return %[[Y]]
func.func @layer_norm_no_bias(%x: tensor<4x32xf32>, %w: tensor<32xf32>) -> tensor<4x32xf32> {
  %none = onnx.NoValue : none
  %Y, %Mean, %InvStdDev = onnx.LayerNormalization(%x, %w, %none) : (tensor<4x32xf32>, tensor<32xf32>, none) -> (tensor<4x32xf32>, none, none)
  return %Y : tensor<4x32xf32>
}

// -----

// Layer norm as torch decomposes it below opset 17 (written by hand):
// ((x - mean) / sqrt(mean((x - mean)^2) + eps)) * w + b, all over -1.
// CHECK-LABEL: xfmr-raise @decomposed_layer_norm: formed 1 layer_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @decomposed_layer_norm(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>
// CHECK-NOT: onnx.ReduceMean
// CHECK: %[[Y:.*]] = xfmr.layer_norm %[[X]], %[[W]], %[[B]] {epsilon = 9.99999974E-6 : f32} : tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK-NOT: onnx.ReduceMean
// CHECK-NOT: onnx.Sub
// CHECK-NOT: onnx.Div
// CHECK-NOT: onnx.Add
// CHECK: return %[[Y]]
func.func @decomposed_layer_norm(%x: tensor<1x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant() {value = dense<9.99999974E-6> : tensor<f32>} : () -> tensor<f32>
  %mean = onnx.ReduceMean(%x, %axes) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x8x1xf32>
  %c = onnx.Sub(%x, %mean) : (tensor<1x8x64xf32>, tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %sq = onnx.Pow(%c, %two) : (tensor<1x8x64xf32>, tensor<f32>) -> tensor<1x8x64xf32>
  %var = onnx.ReduceMean(%sq, %axes) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x8x1xf32>
  %ve = onnx.Add(%var, %eps) : (tensor<1x8x1xf32>, tensor<f32>) -> tensor<1x8x1xf32>
  %sd = onnx.Sqrt(%ve) : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32>
  %n = onnx.Div(%c, %sd) : (tensor<1x8x64xf32>, tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %s = onnx.Mul(%n, %w) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %y = onnx.Add(%s, %b) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// -----

// The Llama RMS norm reducing axis 1 (the sequence) instead of the hidden
// axis: the mean of squares is over the wrong axis.
// CHECK-LABEL: xfmr-raise @negative_rms_norm_axis: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rms_norm at node '/m/model/layers.0/input_layernorm/ReduceMean' (ReduceMean): mean of squares is not over the last axis with keepdims
// CHECK-LABEL: func.func @negative_rms_norm_axis(
// CHECK-NOT: xfmr.rms_norm
// CHECK: onnx.ReduceMean
func.func @negative_rms_norm_axis(%42: tensor<1x8x64xf32>, %26: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %10 = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %11 = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %12 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %14 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %67 = onnx.Pow(%42, %11) : (tensor<1x8x64xf32>, tensor<f32>) -> tensor<1x8x64xf32>
  %68 = onnx.ReduceMean(%67, %14) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x1x64xf32> loc("/m/model/layers.0/input_layernorm/ReduceMean"("ReduceMean"))
  %69 = onnx.Add(%68, %10) : (tensor<1x1x64xf32>, tensor<f32>) -> tensor<1x1x64xf32>
  %70 = onnx.Sqrt(%69) : (tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
  %71 = onnx.Div(%12, %70) : (tensor<f32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
  %72 = onnx.Mul(%42, %71) : (tensor<1x8x64xf32>, tensor<1x1x64xf32>) -> tensor<1x8x64xf32>
  %73 = onnx.Mul(%26, %72) : (tensor<64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  return %73 : tensor<1x8x64xf32>
}

// -----

// keepdims = 0: the mean cannot broadcast back against x as the pattern
// assumes.
// CHECK-LABEL: xfmr-raise @negative_rms_norm_no_keepdims: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rms_norm at node 'mean' (ReduceMean): mean of squares is not over the last axis with keepdims
// CHECK-LABEL: func.func @negative_rms_norm_no_keepdims(
// CHECK-NOT: xfmr.rms_norm
// CHECK: onnx.ReduceMean
func.func @negative_rms_norm_no_keepdims(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %eps = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %shape = onnx.Constant() {value = dense<[8, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %sq = onnx.Pow(%x, %two) : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %mean = onnx.ReduceMean(%sq, %axes) {keepdims = 0 : i64} : (tensor<8x64xf32>, tensor<1xi64>) -> tensor<8xf32> loc("mean"("ReduceMean"))
  %add = onnx.Add(%mean, %eps) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %sqrt = onnx.Sqrt(%add) : (tensor<8xf32>) -> tensor<8xf32>
  %col = onnx.Reshape(%sqrt, %shape) : (tensor<8xf32>, tensor<2xi64>) -> tensor<8x1xf32>
  %n = onnx.Div(%x, %col) : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %y = onnx.Mul(%n, %w) : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// No epsilon: sqrt(mean(x^2)) directly.
// CHECK-LABEL: xfmr-raise @negative_rms_norm_no_epsilon: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rms_norm at node 'mean' (ReduceMean): mean of squares is not followed by `+ epsilon`
// CHECK-LABEL: func.func @negative_rms_norm_no_epsilon(
// CHECK-NOT: xfmr.rms_norm
// CHECK: onnx.ReduceMean
func.func @negative_rms_norm_no_epsilon(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %sq = onnx.Pow(%x, %two) : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %mean = onnx.ReduceMean(%sq, %axes) : (tensor<8x64xf32>, tensor<1xi64>) -> tensor<8x1xf32> loc("mean"("ReduceMean"))
  %sqrt = onnx.Sqrt(%mean) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %n = onnx.Div(%x, %sqrt) : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  return %n : tensor<8x64xf32>
}

// -----

// The inverse RMS of x scales another tensor.
// CHECK-LABEL: xfmr-raise @negative_rms_norm_scales_other: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rms_norm at node 'mean' (ReduceMean): the inverse RMS does not scale the normalized input
// CHECK-LABEL: func.func @negative_rms_norm_scales_other(
// CHECK-NOT: xfmr.rms_norm
// CHECK: onnx.ReduceMean
func.func @negative_rms_norm_scales_other(%x: tensor<8x64xf32>, %z: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %eps = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %sq = onnx.Pow(%x, %two) : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %mean = onnx.ReduceMean(%sq, %axes) : (tensor<8x64xf32>, tensor<1xi64>) -> tensor<8x1xf32> loc("mean"("ReduceMean"))
  %add = onnx.Add(%mean, %eps) : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %sqrt = onnx.Sqrt(%add) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %inv = onnx.Div(%one, %sqrt) : (tensor<f32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %n = onnx.Mul(%z, %inv) : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  return %n : tensor<8x64xf32>
}

// -----

// RMSNormalization from axis 1 of [1, 8, 64]: normalizes over [8, 64].
// CHECK-LABEL: xfmr-raise @negative_rms_normalization_axis: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused rms_norm at node 'rms' (RMSNormalization): normalizes over more than the last axis
// CHECK-LABEL: func.func @negative_rms_normalization_axis(
// CHECK-NOT: xfmr.rms_norm
// CHECK: onnx.RMSNormalization
func.func @negative_rms_normalization_axis(%x: tensor<1x8x64xf32>, %w: tensor<8x64xf32>) -> tensor<1x8x64xf32> {
  %y = onnx.RMSNormalization(%x, %w) {axis = 1 : i64} : (tensor<1x8x64xf32>, tensor<8x64xf32>) -> tensor<1x8x64xf32> loc("rms"("RMSNormalization"))
  return %y : tensor<1x8x64xf32>
}

// -----

// LayerNormalization from axis 1 of [1, 8, 64] (torch's LayerNorm over the
// last two dims).
// CHECK-LABEL: xfmr-raise @negative_layer_norm_axis: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused layer_norm at node 'ln' (LayerNormalization): normalizes over more than the last axis
// CHECK-LABEL: func.func @negative_layer_norm_axis(
// CHECK-NOT: xfmr.layer_norm
// CHECK: onnx.LayerNormalization
func.func @negative_layer_norm_axis(%x: tensor<1x8x64xf32>, %w: tensor<8x64xf32>, %b: tensor<8x64xf32>) -> tensor<1x8x64xf32> {
  %Y, %Mean, %InvStdDev = onnx.LayerNormalization(%x, %w, %b) {axis = 1 : i64} : (tensor<1x8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) -> (tensor<1x8x64xf32>, none, none) loc("ln"("LayerNormalization"))
  return %Y : tensor<1x8x64xf32>
}

// -----

// LayerNormalization whose Mean output is used (training graphs): the op
// does not produce it.
// CHECK-LABEL: xfmr-raise @negative_layer_norm_mean_used: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused layer_norm at node 'ln' (LayerNormalization): Mean or InvStdDev output is used
// CHECK-LABEL: func.func @negative_layer_norm_mean_used(
// CHECK-NOT: xfmr.layer_norm
// CHECK: onnx.LayerNormalization
func.func @negative_layer_norm_mean_used(%x: tensor<1x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<1x8x64xf32>, tensor<1x8x1xf32>) {
  %Y, %Mean, %InvStdDev = onnx.LayerNormalization(%x, %w, %b) : (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<1x8x64xf32>, tensor<1x8x1xf32>, none) loc("ln"("LayerNormalization"))
  return %Y, %Mean : tensor<1x8x64xf32>, tensor<1x8x1xf32>
}

// -----

// The decomposed layer norm with the centring mean over axis 1: x - mean
// over the sequence is not a layer norm. The variance (over -1) is still a
// mean of squares, which is then an RMS norm of the centred input.
// CHECK-LABEL: xfmr-raise @negative_decomposed_layer_norm_mean_axis: formed 1 rms_norm; 1 candidate(s) left unfused
// CHECK-NEXT: unfused layer_norm at node 'mean' (ReduceMean): mean is not over the last axis with keepdims
// CHECK-LABEL: func.func @negative_decomposed_layer_norm_mean_axis(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>
// CHECK-NOT: xfmr.layer_norm
// CHECK: %[[MEAN:.*]] = onnx.ReduceMean(%[[X]], %{{.*}}) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x1x64xf32>
// CHECK: %[[C:.*]] = onnx.Sub(%[[X]], %[[MEAN]])
// CHECK: %[[N:.*]] = xfmr.rms_norm %[[C]], %[[W]] {epsilon = 9.99999974E-6 : f32}
// CHECK: onnx.Add(%[[N]], %[[B]])
func.func @negative_decomposed_layer_norm_mean_axis(%x: tensor<1x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %axis1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant() {value = dense<9.99999974E-6> : tensor<f32>} : () -> tensor<f32>
  %mean = onnx.ReduceMean(%x, %axis1) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x1x64xf32> loc("mean"("ReduceMean"))
  %c = onnx.Sub(%x, %mean) : (tensor<1x8x64xf32>, tensor<1x1x64xf32>) -> tensor<1x8x64xf32>
  %sq = onnx.Pow(%c, %two) : (tensor<1x8x64xf32>, tensor<f32>) -> tensor<1x8x64xf32>
  %var = onnx.ReduceMean(%sq, %axes) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x8x1xf32>
  %ve = onnx.Add(%var, %eps) : (tensor<1x8x1xf32>, tensor<f32>) -> tensor<1x8x1xf32>
  %sd = onnx.Sqrt(%ve) : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32>
  %n = onnx.Div(%c, %sd) : (tensor<1x8x64xf32>, tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %s = onnx.Mul(%n, %w) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %y = onnx.Add(%s, %b) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// -----

// The decomposed layer norm with the variance over axis 1: neither a layer
// norm nor an RMS norm over the hidden axis.
// CHECK-LABEL: xfmr-raise @negative_decomposed_layer_norm_variance_axis: formed nothing; 2 candidate(s) left unfused
// CHECK-NEXT: unfused layer_norm at node 'mean' (ReduceMean): no variance over the last axis of the centred input
// CHECK-NEXT: unfused rms_norm at node 'var' (ReduceMean): mean of squares is not over the last axis with keepdims
// CHECK-LABEL: func.func @negative_decomposed_layer_norm_variance_axis(
// CHECK-NOT: xfmr.layer_norm
// CHECK-NOT: xfmr.rms_norm
// CHECK: onnx.ReduceMean
func.func @negative_decomposed_layer_norm_variance_axis(%x: tensor<1x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %axis1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %eps = onnx.Constant() {value = dense<9.99999974E-6> : tensor<f32>} : () -> tensor<f32>
  %mean = onnx.ReduceMean(%x, %axes) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x8x1xf32> loc("mean"("ReduceMean"))
  %c = onnx.Sub(%x, %mean) : (tensor<1x8x64xf32>, tensor<1x8x1xf32>) -> tensor<1x8x64xf32>
  %sq = onnx.Pow(%c, %two) : (tensor<1x8x64xf32>, tensor<f32>) -> tensor<1x8x64xf32>
  %var = onnx.ReduceMean(%sq, %axis1) : (tensor<1x8x64xf32>, tensor<1xi64>) -> tensor<1x1x64xf32> loc("var"("ReduceMean"))
  %ve = onnx.Add(%var, %eps) : (tensor<1x1x64xf32>, tensor<f32>) -> tensor<1x1x64xf32>
  %sd = onnx.Sqrt(%ve) : (tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
  %n = onnx.Div(%c, %sd) : (tensor<1x8x64xf32>, tensor<1x1x64xf32>) -> tensor<1x8x64xf32>
  %s = onnx.Mul(%n, %w) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %y = onnx.Add(%s, %b) : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// -----

// QK-norm over a head size that shape inference left dynamic (the input of
// a reshape it could not infer): the [8] weight fixes the normalized axis,
// asserted at run time; users keep the dynamic type through a cast. The
// input is a function argument here, so it takes the static type (the
// manifest then states the 8 too).
// CHECK-LABEL: xfmr-raise @rms_norm_symbolic_width: formed 1 rms_norm; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @rms_norm_symbolic_width(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?x?x8xf32>
// CHECK: %[[D:.*]] = tensor.dim %[[X]], %c3
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[D]], %c8
// CHECK: cf.assert %[[OK]], "node 'mean' (ReduceMean): the normalized axis: dim 3 must be 8 (derived at compile time)"
// CHECK: %[[Y:.*]] = xfmr.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999997E-7 : f32} : tensor<?x?x?x8xf32>, tensor<8xf32>
// CHECK: %[[R:.*]] = tensor.cast %[[Y]] : tensor<?x?x?x8xf32> to tensor<?x?x?x?xf32>
// CHECK: return %[[R]]
func.func @rms_norm_symbolic_width(%x: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %w = onnx.Constant() {value = dense<1.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %eps = onnx.Constant() {value = dense<9.99999997E-7> : tensor<f32>} : () -> tensor<f32>
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %last = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %sq = onnx.Pow(%x, %two) : (tensor<?x?x?x?xf32>, tensor<f32>) -> tensor<?x?x?x?xf32>
  %m = onnx.ReduceMean(%sq, %last) : (tensor<?x?x?x?xf32>, tensor<1xi64>) -> tensor<?x?x?x1xf32> loc("mean"("ReduceMean"))
  %a = onnx.Add(%m, %eps) : (tensor<?x?x?x1xf32>, tensor<f32>) -> tensor<?x?x?x1xf32>
  %s = onnx.Sqrt(%a) : (tensor<?x?x?x1xf32>) -> tensor<?x?x?x1xf32>
  %r = onnx.Reciprocal(%s) : (tensor<?x?x?x1xf32>) -> tensor<?x?x?x1xf32>
  %n = onnx.Mul(%x, %r) : (tensor<?x?x?x?xf32>, tensor<?x?x?x1xf32>) -> tensor<?x?x?x?xf32>
  %y = onnx.Mul(%w, %n) : (tensor<8xf32>, tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  return %y : tensor<?x?x?x?xf32>
}
