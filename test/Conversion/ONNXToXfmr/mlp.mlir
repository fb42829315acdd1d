// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on gated MLPs, down(act(gate(x)) * up(x)), and on token
// embeddings, Gather(constant table, ids): Llama's SiLU MLP and GPT-2's
// embeddings from real exports, GELU variants written by hand; then cases
// where one detail must stop the match.

// Llama, layer 0 mlp of llama_gqa_static.onnx: g * Sigmoid(g) as SiLU.
// CHECK-LABEL: xfmr-raise @llama_silu_mlp: formed 1 gated_mlp; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_silu_mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[WG:[a-z0-9]+]]: tensor<64x128xf32>, %[[WU:[a-z0-9]+]]: tensor<64x128xf32>, %[[WD:[a-z0-9]+]]: tensor<128x64xf32>
// CHECK-NOT: onnx.MatMul
// CHECK: %[[Y:.*]] = xfmr.gated_mlp silu %[[X]], %[[WG]], %[[WU]], %[[WD]] : tensor<1x8x64xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<128x64xf32>
// CHECK-NOT: onnx.MatMul
// CHECK-NOT: onnx.Sigmoid
// CHECK-NOT: onnx.Mul
// CHECK: return %[[Y]]
func.func @llama_silu_mlp(%122: tensor<1x8x64xf32>, %31: tensor<64x128xf32>, %32: tensor<64x128xf32>,
                          %33: tensor<128x64xf32>) -> tensor<1x8x64xf32> {
  %123 = onnx.MatMul(%122, %31) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %124 = onnx.Sigmoid(%123) : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %125 = onnx.Mul(%123, %124) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %126 = onnx.MatMul(%122, %32) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %127 = onnx.Mul(%125, %126) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %128 = onnx.MatMul(%127, %33) : (tensor<1x8x128xf32>, tensor<128x64xf32>) -> tensor<1x8x64xf32>
  return %128 : tensor<1x8x64xf32>
}

// -----

// GELU (erf) gated MLP as torch exports nn.GELU() below opset 20 (written
// by hand): 0.5 * g * (1 + Erf(g / sqrt(2))), the up projection on the
// left of the product.
// CHECK-LABEL: xfmr-raise @gelu_erf_mlp: formed 1 gated_mlp; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gelu_erf_mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x64xf32>, %[[WG:[a-z0-9]+]]: tensor<64x128xf32>, %[[WU:[a-z0-9]+]]: tensor<64x128xf32>, %[[WD:[a-z0-9]+]]: tensor<128x64xf32>
// CHECK: %[[Y:.*]] = xfmr.gated_mlp gelu %[[X]], %[[WG]], %[[WU]], %[[WD]] : tensor<2x8x64xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<128x64xf32>
// CHECK-NOT: onnx.Erf
// CHECK-NOT: onnx.MatMul
// CHECK: return %[[Y]]
func.func @gelu_erf_mlp(%x: tensor<2x8x64xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                        %wd: tensor<128x64xf32>) -> tensor<2x8x64xf32> {
  %sqrt2 = onnx.Constant() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %half = onnx.Constant() {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %g = onnx.MatMul(%x, %wg) : (tensor<2x8x64xf32>, tensor<64x128xf32>) -> tensor<2x8x128xf32>
  %d = onnx.Div(%g, %sqrt2) : (tensor<2x8x128xf32>, tensor<f32>) -> tensor<2x8x128xf32>
  %e = onnx.Erf(%d) : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %e1 = onnx.Add(%e, %one) : (tensor<2x8x128xf32>, tensor<f32>) -> tensor<2x8x128xf32>
  %ge = onnx.Mul(%g, %e1) : (tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %act = onnx.Mul(%ge, %half) : (tensor<2x8x128xf32>, tensor<f32>) -> tensor<2x8x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<2x8x64xf32>, tensor<64x128xf32>) -> tensor<2x8x128xf32>
  %p = onnx.Mul(%u, %act) : (tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<2x8x128xf32>, tensor<128x64xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// Gelu-20 with approximate = "tanh" as the gate's activation.
// CHECK-LABEL: xfmr-raise @gelu20_tanh_mlp: formed 1 gated_mlp; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gelu20_tanh_mlp(
// CHECK: xfmr.gated_mlp gelu_tanh
// CHECK-NOT: onnx.Gelu
func.func @gelu20_tanh_mlp(%x: tensor<4x64xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                           %wd: tensor<128x64xf32>) -> tensor<4x64xf32> {
  %g = onnx.MatMul(%x, %wg) : (tensor<4x64xf32>, tensor<64x128xf32>) -> tensor<4x128xf32>
  %a = onnx.Gelu(%g) {approximate = "tanh"} : (tensor<4x128xf32>) -> tensor<4x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<4x64xf32>, tensor<64x128xf32>) -> tensor<4x128xf32>
  %p = onnx.Mul(%a, %u) : (tensor<4x128xf32>, tensor<4x128xf32>) -> tensor<4x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<4x128xf32>, tensor<128x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Llama's token embedding (llama_gqa_static.onnx, a small table here).
// CHECK-LABEL: xfmr-raise @llama_embedding: formed 1 embedding; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @llama_embedding(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<1x8xi64>
// CHECK: %[[T:.*]] = onnx.Constant() {value = dense<{{.*}}> : tensor<6x4xf32>}
// CHECK: %[[E:.*]] = xfmr.embedding %[[T]], %[[IDS]] : tensor<6x4xf32>, tensor<1x8xi64> -> tensor<1x8x4xf32>
// CHECK-NOT: onnx.Gather
// CHECK: return %[[E]]
func.func @llama_embedding(%arg0: tensor<1x8xi64>) -> tensor<1x8x4xf32> {
  %25 = onnx.Constant() {value = dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [-0.1, -0.2, -0.3, -0.4], [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]]> : tensor<6x4xf32>} : () -> tensor<6x4xf32>
  %42 = onnx.Gather(%25, %arg0) : (tensor<6x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  return %42 : tensor<1x8x4xf32>
}

// -----

// GPT-2's token and position embeddings (gpt2_static.onnx, small tables):
// the ids through a Reshape, the positions a constant; both lookups become
// embeddings and their sum stays.
// CHECK-LABEL: xfmr-raise @gpt2_embeddings: formed 2 embedding; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gpt2_embeddings(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<1x8xi64>
// CHECK-DAG: %[[POS:.*]] = onnx.Constant() {value = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}
// CHECK-DAG: %[[WTE:.*]] = onnx.Constant() {value = dense<{{.*}}> : tensor<5x2xf32>}
// CHECK-DAG: %[[WPE:.*]] = onnx.Constant() {value = dense<{{.*}}> : tensor<8x2xf32>}
// CHECK: %[[R:.*]] = onnx.Reshape(%[[IDS]], %{{.*}})
// CHECK: %[[TOK:.*]] = xfmr.embedding %[[WTE]], %[[R]] : tensor<5x2xf32>, tensor<1x8xi64> -> tensor<1x8x2xf32>
// CHECK: %[[P:.*]] = xfmr.embedding %[[WPE]], %[[POS]] : tensor<8x2xf32>, tensor<1x8xi64> -> tensor<1x8x2xf32>
// CHECK: %[[SUM:.*]] = onnx.Add(%[[TOK]], %[[P]])
// CHECK-NOT: onnx.Gather
// CHECK: return %[[SUM]]
func.func @gpt2_embeddings(%arg0: tensor<1x8xi64>) -> tensor<1x8x2xf32> {
  %20 = onnx.Constant() {value = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>} : () -> tensor<1x8xi64>
  %21 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %22 = onnx.Constant() {value = dense<[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8], [0.9, 1.0]]> : tensor<5x2xf32>} : () -> tensor<5x2xf32>
  %23 = onnx.Constant() {value = dense<[[0.0, 0.0], [0.01, 0.02], [0.02, 0.04], [0.03, 0.06], [0.04, 0.08], [0.05, 0.1], [0.06, 0.12], [0.07, 0.14]]> : tensor<8x2xf32>} : () -> tensor<8x2xf32>
  %37 = onnx.Reshape(%arg0, %21) : (tensor<1x8xi64>, tensor<2xi64>) -> tensor<1x8xi64>
  %38 = onnx.Gather(%22, %37) : (tensor<5x2xf32>, tensor<1x8xi64>) -> tensor<1x8x2xf32>
  %39 = onnx.Gather(%23, %20) : (tensor<8x2xf32>, tensor<1x8xi64>) -> tensor<1x8x2xf32>
  %40 = onnx.Add(%38, %39) : (tensor<1x8x2xf32>, tensor<1x8x2xf32>) -> tensor<1x8x2xf32>
  return %40 : tensor<1x8x2xf32>
}

// -----

// The Llama MLP with the up projection reading another tensor (say the
// residual before the norm): not one MLP of one input.
// CHECK-LABEL: xfmr-raise @negative_gate_up_inputs_differ: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused gated_mlp at node '/m/model/layers.0/mlp/down_proj/MatMul' (MatMul): gate and up projections do not share the input or have no 2-D weights
// CHECK-LABEL: func.func @negative_gate_up_inputs_differ(
// CHECK-NOT: xfmr.gated_mlp
// CHECK: onnx.Sigmoid
func.func @negative_gate_up_inputs_differ(%122: tensor<1x8x64xf32>, %115: tensor<1x8x64xf32>, %31: tensor<64x128xf32>,
                                          %32: tensor<64x128xf32>, %33: tensor<128x64xf32>) -> tensor<1x8x64xf32> {
  %123 = onnx.MatMul(%122, %31) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %124 = onnx.Sigmoid(%123) : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %125 = onnx.Mul(%123, %124) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %126 = onnx.MatMul(%115, %32) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %127 = onnx.Mul(%125, %126) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %128 = onnx.MatMul(%127, %33) : (tensor<1x8x128xf32>, tensor<128x64xf32>) -> tensor<1x8x64xf32> loc("/m/model/layers.0/mlp/down_proj/MatMul"("MatMul"))
  return %128 : tensor<1x8x64xf32>
}

// -----

// g * Sigmoid(u): the sigmoid is of the up projection, not of g, so the
// gate is not SiLU (this is a GLU with swapped roles, not an op form).
// CHECK-LABEL: xfmr-raise @negative_sigmoid_of_other: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused gated_mlp at node 'down' (MatMul): the gate's activation is not SiLU, GELU or ReLU of a projection
// CHECK-LABEL: func.func @negative_sigmoid_of_other(
// CHECK-NOT: xfmr.gated_mlp
// CHECK: onnx.Sigmoid
func.func @negative_sigmoid_of_other(%x: tensor<1x8x64xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                                     %wd: tensor<128x64xf32>) -> tensor<1x8x64xf32> {
  %g = onnx.MatMul(%x, %wg) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %s = onnx.Sigmoid(%u) : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %p = onnx.Mul(%g, %s) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<1x8x128xf32>, tensor<128x64xf32>) -> tensor<1x8x64xf32> loc("down"("MatMul"))
  return %y : tensor<1x8x64xf32>
}

// -----

// GELU (erf) with g / 2 inside the Erf instead of g / sqrt(2): not GELU.
// CHECK-LABEL: xfmr-raise @negative_gelu_wrong_constant: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused gated_mlp at node 'down' (MatMul): the gate's activation is not SiLU, GELU or ReLU of a projection
// CHECK-LABEL: func.func @negative_gelu_wrong_constant(
// CHECK-NOT: xfmr.gated_mlp
// CHECK: onnx.Erf
func.func @negative_gelu_wrong_constant(%x: tensor<2x8x64xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                                        %wd: tensor<128x64xf32>) -> tensor<2x8x64xf32> {
  %two = onnx.Constant() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %one = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %half = onnx.Constant() {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %g = onnx.MatMul(%x, %wg) : (tensor<2x8x64xf32>, tensor<64x128xf32>) -> tensor<2x8x128xf32>
  %d = onnx.Div(%g, %two) : (tensor<2x8x128xf32>, tensor<f32>) -> tensor<2x8x128xf32>
  %e = onnx.Erf(%d) : (tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %e1 = onnx.Add(%e, %one) : (tensor<2x8x128xf32>, tensor<f32>) -> tensor<2x8x128xf32>
  %ge = onnx.Mul(%g, %e1) : (tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %act = onnx.Mul(%ge, %half) : (tensor<2x8x128xf32>, tensor<f32>) -> tensor<2x8x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<2x8x64xf32>, tensor<64x128xf32>) -> tensor<2x8x128xf32>
  %p = onnx.Mul(%u, %act) : (tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<2x8x128xf32>, tensor<128x64xf32>) -> tensor<2x8x64xf32> loc("down"("MatMul"))
  return %y : tensor<2x8x64xf32>
}

// -----

// The down projection leaves the hidden size (64 -> 128 -> 32): the op's
// result has the input's type.
// CHECK-LABEL: xfmr-raise @negative_output_width: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused gated_mlp at node 'down' (MatMul): output shape differs from the input's
// CHECK-LABEL: func.func @negative_output_width(
// CHECK-NOT: xfmr.gated_mlp
// CHECK: onnx.Sigmoid
func.func @negative_output_width(%x: tensor<1x8x64xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                                 %wd: tensor<128x32xf32>) -> tensor<1x8x32xf32> {
  %g = onnx.MatMul(%x, %wg) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %s = onnx.Sigmoid(%g) : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %a = onnx.Mul(%g, %s) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %p = onnx.Mul(%a, %u) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<1x8x128xf32>, tensor<128x32xf32>) -> tensor<1x8x32xf32> loc("down"("MatMul"))
  return %y : tensor<1x8x32xf32>
}

// -----

// torch TransformerEncoder's feed-forward (transformer_encoder_static.onnx):
// Relu with biases and no gate. Not a gated MLP, and not a candidate.
// CHECK-LABEL: xfmr-raise @negative_ungated_mlp: formed nothing; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @negative_ungated_mlp(
// CHECK-NOT: xfmr.gated_mlp
// CHECK: onnx.Relu
func.func @negative_ungated_mlp(%Y: tensor<1x8x64xf32>, %17: tensor<64x128xf32>, %13: tensor<128xf32>,
                                %18: tensor<128x64xf32>, %14: tensor<64xf32>) -> tensor<1x8x64xf32> {
  %41 = onnx.MatMul(%Y, %17) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %42 = onnx.Add(%13, %41) : (tensor<128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %43 = onnx.Relu(%42) : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %44 = onnx.MatMul(%43, %18) : (tensor<1x8x128xf32>, tensor<128x64xf32>) -> tensor<1x8x64xf32>
  %45 = onnx.Add(%14, %44) : (tensor<64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  return %45 : tensor<1x8x64xf32>
}

// -----

// Gather along axis 1 of a constant [6, 4] table picks columns, not token
// rows.
// CHECK-LABEL: xfmr-raise @negative_embedding_axis1: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused embedding at node 'gather' (Gather): gathers along the hidden axis
// CHECK-LABEL: func.func @negative_embedding_axis1(
// CHECK-NOT: xfmr.embedding
// CHECK: onnx.Gather(%{{.*}}, %{{.*}}) {axis = 1 : i64}
func.func @negative_embedding_axis1(%ids: tensor<1x2xi64>) -> tensor<6x1x2xf32> {
  %t = onnx.Constant() {value = dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [-0.1, -0.2, -0.3, -0.4], [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]]> : tensor<6x4xf32>} : () -> tensor<6x4xf32>
  %g = onnx.Gather(%t, %ids) {axis = 1 : i64} : (tensor<6x4xf32>, tensor<1x2xi64>) -> tensor<6x1x2xf32> loc("gather"("Gather"))
  return %g : tensor<6x1x2xf32>
}

// -----

// A table that is a run-time input (tied or streamed weights) is not an
// embedding the pass can name, and not a candidate.
// CHECK-LABEL: xfmr-raise @negative_embedding_runtime_table: formed nothing; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @negative_embedding_runtime_table(
// CHECK-NOT: xfmr.embedding
// CHECK: onnx.Gather
func.func @negative_embedding_runtime_table(%t: tensor<6x4xf32>, %ids: tensor<1x8xi64>) -> tensor<1x8x4xf32> {
  %g = onnx.Gather(%t, %ids) : (tensor<6x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  return %g : tensor<1x8x4xf32>
}

// -----

// Gather of rows of a constant integer table (a lookup of token types, say):
// not float embeddings.
// CHECK-LABEL: xfmr-raise @negative_embedding_int_table: formed nothing; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @negative_embedding_int_table(
// CHECK-NOT: xfmr.embedding
// CHECK: onnx.Gather
func.func @negative_embedding_int_table(%ids: tensor<3xi64>) -> tensor<3x2xi64> {
  %t = onnx.Constant() {value = dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>} : () -> tensor<3x2xi64>
  %g = onnx.Gather(%t, %ids) : (tensor<3x2xi64>, tensor<3xi64>) -> tensor<3x2xi64>
  return %g : tensor<3x2xi64>
}

// -----

// GELU (tanh) with the exact op sequence of GPT-2's new_gelu in
// gpt2_static.onnx, put in a gated MLP (written by hand: GPT-2 itself is
// not gated).
// CHECK-LABEL: xfmr-raise @gelu_tanh_mlp: formed 1 gated_mlp; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gelu_tanh_mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x64xf32>, %[[WG:[a-z0-9]+]]: tensor<64x128xf32>, %[[WU:[a-z0-9]+]]: tensor<64x128xf32>, %[[WD:[a-z0-9]+]]: tensor<128x64xf32>
// CHECK: %[[Y:.*]] = xfmr.gated_mlp gelu_tanh %[[X]], %[[WG]], %[[WU]], %[[WD]]
// CHECK-NOT: onnx.Tanh
// CHECK: return %[[Y]]
func.func @gelu_tanh_mlp(%x: tensor<1x8x64xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                         %wd: tensor<128x64xf32>) -> tensor<1x8x64xf32> {
  %3 = onnx.Constant() {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
  %4 = onnx.Constant() {value = dense<4.471500e-02> : tensor<f32>} : () -> tensor<f32>
  %5 = onnx.Constant() {value = dense<3.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %9 = onnx.Constant() {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %16 = onnx.Constant() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %73 = onnx.MatMul(%x, %wg) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %74 = onnx.Mul(%73, %9) : (tensor<1x8x128xf32>, tensor<f32>) -> tensor<1x8x128xf32>
  %75 = onnx.Pow(%73, %5) : (tensor<1x8x128xf32>, tensor<f32>) -> tensor<1x8x128xf32>
  %76 = onnx.Mul(%75, %4) : (tensor<1x8x128xf32>, tensor<f32>) -> tensor<1x8x128xf32>
  %77 = onnx.Add(%73, %76) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %78 = onnx.Mul(%77, %3) : (tensor<1x8x128xf32>, tensor<f32>) -> tensor<1x8x128xf32>
  %79 = onnx.Tanh(%78) : (tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %80 = onnx.Add(%79, %16) : (tensor<1x8x128xf32>, tensor<f32>) -> tensor<1x8x128xf32>
  %81 = onnx.Mul(%74, %80) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<1x8x64xf32>, tensor<64x128xf32>) -> tensor<1x8x128xf32>
  %p = onnx.Mul(%81, %u) : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<1x8x128xf32>, tensor<128x64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// -----

// A hidden size shape inference left dynamic: the projections' K (64) fixes
// it, asserted at run time; the argument takes the static type.
// CHECK-LABEL: func.func @silu_mlp_symbolic_hidden(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x?x64xf32>
// CHECK: cf.assert {{.*}}"node 'down' (MatMul): the hidden size: dim 2 must be 64 (derived at compile time)"
// CHECK: %[[Y:.*]] = xfmr.gated_mlp silu %[[X]], {{.*}} : tensor<?x?x64xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<128x64xf32>
// CHECK: return %[[Y]]
func.func @silu_mlp_symbolic_hidden(%x: tensor<?x?x?xf32>, %wg: tensor<64x128xf32>, %wu: tensor<64x128xf32>,
                                    %wd: tensor<128x64xf32>) -> tensor<?x?x64xf32> {
  %g = onnx.MatMul(%x, %wg) : (tensor<?x?x?xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %s = onnx.Sigmoid(%g) : (tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %a = onnx.Mul(%g, %s) : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %u = onnx.MatMul(%x, %wu) : (tensor<?x?x?xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %p = onnx.Mul(%a, %u) : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %y = onnx.MatMul(%p, %wd) : (tensor<?x?x128xf32>, tensor<128x64xf32>) -> tensor<?x?x64xf32> loc("down"("MatMul"))
  return %y : tensor<?x?x64xf32>
}
