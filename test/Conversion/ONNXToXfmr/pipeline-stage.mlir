// RUN: xfmr-opt %s --split-input-file --xfmr-split-pipeline-stage="stages=2 stage=0" --verify-diagnostics | FileCheck %s --check-prefix=FIRST
// RUN: xfmr-opt %s --split-input-file --xfmr-split-pipeline-stage="stages=2 stage=1" --verify-diagnostics | FileCheck %s --check-prefix=LAST
// RUN: not xfmr-opt %s --split-input-file --xfmr-split-pipeline-stage="stages=4 stage=3" 2>&1 | FileCheck %s --check-prefix=FOUR

// A paged step function of 2 layers (hidden 2, one head of 2): stage 0
// keeps the embedding and layer 0, sends the residual stream entering layer
// 1 (the input of its norm) and returns the logits the last stage
// broadcasts; stage 1 receives that stream, keeps layer 1, the final norm
// and the LM head, and broadcasts the logits. Each keeps its own layer's
// pools (renumbered as results), and the module's kv_cache counts 1 layer.
// FIRST: xfmr.kv_cache = {{{.*}}num_layers = 1 : i64}, xfmr.pipeline_stage = {first_layer = 0 : i64, layers = 1 : i64, stage = 0 : i64, stages = 2 : i64}
// FIRST-LABEL: func.func @step(
// FIRST-SAME: onnx.name = "key_cache.0", xfmr.kv_pool}
// FIRST-SAME: onnx.name = "value_cache.0", xfmr.kv_pool})
// FIRST-SAME: {xfmr.kv_pool = 7 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 8 : i64})
// FIRST-NOT: key_cache.1
// FIRST: xfmr.embedding
// FIRST: %[[H1:.*]] = onnx.Add
// FIRST-NOT: xfmr.rms_norm
// FIRST-NOT: cf.assert
// FIRST: %[[ROWS:.*]] = tensor.dim %arg6, %c0
// FIRST: %[[LOGITS:.*]] = xfmr.stage_send %[[H1]], %[[ROWS]] : tensor<1x?x2xf32> -> tensor<?x3xf32>
// FIRST-NEXT: return %[[LOGITS]], %{{.*}}, %{{.*}} : tensor<?x3xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>
// LAST: xfmr.kv_cache = {{{.*}}num_layers = 1 : i64}, xfmr.pipeline_stage = {first_layer = 1 : i64, layers = 1 : i64, stage = 1 : i64, stages = 2 : i64}
// LAST-LABEL: func.func @step(
// LAST-NOT: key_cache.0
// LAST: %[[T:.*]] = tensor.dim %arg0, %c0
// LAST: %[[H:.*]] = xfmr.stage_receive %[[T]] : tensor<1x?x2xf32>
// LAST-NOT: xfmr.embedding
// LAST: xfmr.rms_norm %[[H]]
// LAST: cf.assert %{{.*}}, "layer 1's tokens"
// LAST: xfmr.kv_write {{.*}} into %arg7, %arg8
// LAST: %[[OUT:.*]] = xfmr.stage_broadcast %{{.*}} : tensor<?x3xf32>
// LAST-NEXT: return %[[OUT]]
// Four stages of 2 layers do not split evenly.
// FOUR: error: --pipeline-parallel=4: 2 layers do not split evenly over 4 stages
module attributes {xfmr.kv_cache = {block_size = 4 : i64, dtype = "f32", head_dim = 2 : i64, num_kv_heads = 1 : i64, num_layers = 2 : i64}} {
func.func @step(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %pos: tensor<?xi64> {onnx.name = "positions"}, %slots: tensor<?xi64> {onnx.name = "slot_mapping"}, %bt: tensor<?x?xi32> {onnx.name = "block_tables"}, %cl: tensor<?xi32> {onnx.name = "context_lens"}, %qsl: tensor<?xi32> {onnx.name = "query_start_loc"}, %li: tensor<?xi64> {onnx.name = "logits_indices"}, %k0: tensor<?x4x1x2xf32> {onnx.name = "key_cache.0", xfmr.kv_pool}, %v0: tensor<?x4x1x2xf32> {onnx.name = "value_cache.0", xfmr.kv_pool}, %k1: tensor<?x4x1x2xf32> {onnx.name = "key_cache.1", xfmr.kv_pool}, %v1: tensor<?x4x1x2xf32> {onnx.name = "value_cache.1", xfmr.kv_pool}) -> (tensor<?x3xf32> {onnx.name = "logits"}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 7 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 8 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 9 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 10 : i64}) {
  %table = onnx.Constant() {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %w = onnx.Constant() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %wq = onnx.Constant() {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %wlm = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %heads = onnx.Constant() {value = dense<[-1, 1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %rows = onnx.Constant() {value = dense<[1, -1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %flat = onnx.Constant() {value = dense<[-1, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %ids2 = onnx.Reshape(%ids, %rows) : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x?xi64>
  %h0 = xfmr.embedding %table, %ids2 : tensor<3x2xf32>, tensor<1x?xi64> -> tensor<1x?x2xf32>
  // Layer 0.
  %n0 = xfmr.rms_norm %h0, %w {epsilon = 1.0E-6 : f32} : tensor<1x?x2xf32>, tensor<2xf32>
  %q0 = onnx.MatMul(%n0, %wq) : (tensor<1x?x2xf32>, tensor<2x2xf32>) -> tensor<1x?x2xf32>
  %r0 = onnx.Reshape(%q0, %heads) : (tensor<1x?x2xf32>, tensor<3xi64>) -> tensor<?x1x2xf32>
  %nk0, %nv0 = xfmr.kv_write %r0, %r0 into %k0, %v0 at %slots : tensor<?x1x2xf32>, tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?xi64>
  %a0 = xfmr.paged_attention %r0, %nk0, %nv0, %bt, %cl, %qsl {block_size = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.707106769 : f32} : tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o0 = onnx.Reshape(%a0, %rows) : (tensor<?x1x2xf32>, tensor<3xi64>) -> tensor<1x?x2xf32>
  %h1 = onnx.Add(%h0, %o0) : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2xf32>
  // Layer 1.
  %n1 = xfmr.rms_norm %h1, %w {epsilon = 1.0E-6 : f32} : tensor<1x?x2xf32>, tensor<2xf32>
  %q1 = onnx.MatMul(%n1, %wq) : (tensor<1x?x2xf32>, tensor<2x2xf32>) -> tensor<1x?x2xf32>
  // Layer 1's check on its query (onnxruntime-genai's GroupQueryAttention
  // lowers to such): stage 0 drops it, stage 1 keeps it.
  %c1 = arith.constant 1 : index
  %t1 = tensor.dim %q1, %c1 : tensor<1x?x2xf32>
  %c0 = arith.constant 0 : index
  %t0 = tensor.dim %ids, %c0 : tensor<?xi64>
  %same = arith.cmpi eq, %t1, %t0 : index
  cf.assert %same, "layer 1's tokens"
  %r1 = onnx.Reshape(%q1, %heads) : (tensor<1x?x2xf32>, tensor<3xi64>) -> tensor<?x1x2xf32>
  %nk1, %nv1 = xfmr.kv_write %r1, %r1 into %k1, %v1 at %slots : tensor<?x1x2xf32>, tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?xi64>
  %a1 = xfmr.paged_attention %r1, %nk1, %nv1, %bt, %cl, %qsl {block_size = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.707106769 : f32} : tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o1 = onnx.Reshape(%a1, %rows) : (tensor<?x1x2xf32>, tensor<3xi64>) -> tensor<1x?x2xf32>
  %h2 = onnx.Add(%h1, %o1) : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2xf32>
  // Final norm, LM head.
  %n2 = xfmr.rms_norm %h2, %w {epsilon = 1.0E-6 : f32} : tensor<1x?x2xf32>, tensor<2xf32>
  %l = onnx.MatMul(%n2, %wlm) : (tensor<1x?x2xf32>, tensor<2x3xf32>) -> tensor<1x?x3xf32>
  %logits = onnx.Reshape(%l, %flat) : (tensor<1x?x3xf32>, tensor<2xi64>) -> tensor<?x3xf32>
  func.return %logits, %nk0, %nv0, %nk1, %nv1 : tensor<?x3xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>
}
}

// -----

// Layer 1 reads layer 0's attention output besides the residual stream:
// no single value carries layer 0 into layer 1, for either stage, and the
// error names both. (What depends only on the step's inputs, such as RoPE
// tables, does not count: each stage recomputes it.)
module attributes {xfmr.kv_cache = {block_size = 4 : i64, dtype = "f32", head_dim = 2 : i64, num_kv_heads = 1 : i64, num_layers = 2 : i64}} {
func.func @skip(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %pos: tensor<?xi64> {onnx.name = "positions"}, %slots: tensor<?xi64> {onnx.name = "slot_mapping"}, %bt: tensor<?x?xi32> {onnx.name = "block_tables"}, %cl: tensor<?xi32> {onnx.name = "context_lens"}, %qsl: tensor<?xi32> {onnx.name = "query_start_loc"}, %li: tensor<?xi64> {onnx.name = "logits_indices"}, %k0: tensor<?x4x1x2xf32> {onnx.name = "key_cache.0", xfmr.kv_pool}, %v0: tensor<?x4x1x2xf32> {onnx.name = "value_cache.0", xfmr.kv_pool}, %k1: tensor<?x4x1x2xf32> {onnx.name = "key_cache.1", xfmr.kv_pool}, %v1: tensor<?x4x1x2xf32> {onnx.name = "value_cache.1", xfmr.kv_pool}) -> (tensor<?x2xf32> {onnx.name = "logits"}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 7 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 8 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 9 : i64}, tensor<?x4x1x2xf32> {xfmr.kv_pool = 10 : i64}) {
  %table = onnx.Constant() {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %w = onnx.Constant() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %wq = onnx.Constant() {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %heads = onnx.Constant() {value = dense<[-1, 1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %rows = onnx.Constant() {value = dense<[1, -1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %flat = onnx.Constant() {value = dense<[-1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %ids2 = onnx.Reshape(%ids, %rows) : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x?xi64>
  %h0 = xfmr.embedding %table, %ids2 : tensor<3x2xf32>, tensor<1x?xi64> -> tensor<1x?x2xf32>
  %n0 = xfmr.rms_norm %h0, %w {epsilon = 1.0E-6 : f32} : tensor<1x?x2xf32>, tensor<2xf32>
  %q0 = onnx.MatMul(%n0, %wq) : (tensor<1x?x2xf32>, tensor<2x2xf32>) -> tensor<1x?x2xf32>
  %r0 = onnx.Reshape(%q0, %heads) : (tensor<1x?x2xf32>, tensor<3xi64>) -> tensor<?x1x2xf32>
  %nk0, %nv0 = xfmr.kv_write %r0, %r0 into %k0, %v0 at %slots : tensor<?x1x2xf32>, tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?xi64>
  %a0 = xfmr.paged_attention %r0, %nk0, %nv0, %bt, %cl, %qsl {block_size = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.707106769 : f32} : tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o0 = onnx.Reshape(%a0, %rows) : (tensor<?x1x2xf32>, tensor<3xi64>) -> tensor<1x?x2xf32>
  %h1 = onnx.Add(%h0, %o0) : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2xf32>
  %n1 = xfmr.rms_norm %h1, %w {epsilon = 1.0E-6 : f32} : tensor<1x?x2xf32>, tensor<2xf32>
  %q1 = onnx.MatMul(%n1, %wq) : (tensor<1x?x2xf32>, tensor<2x2xf32>) -> tensor<1x?x2xf32>
  %r1 = onnx.Reshape(%q1, %heads) : (tensor<1x?x2xf32>, tensor<3xi64>) -> tensor<?x1x2xf32>
  %nk1, %nv1 = xfmr.kv_write %r1, %a0 into %k1, %v1 at %slots : tensor<?x1x2xf32>, tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?xi64>
  // expected-error @+1 {{--pipeline-parallel: no single [1, tokens, hidden] f32 value carries layer 0 into layer 1 (a residual stream to send between stages)}}
  %a1 = xfmr.paged_attention %r1, %nk1, %nv1, %bt, %cl, %qsl {block_size = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.707106769 : f32} : tensor<?x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o1 = onnx.Reshape(%a1, %rows) : (tensor<?x1x2xf32>, tensor<3xi64>) -> tensor<1x?x2xf32>
  %h2 = onnx.Add(%h1, %o1) : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2xf32>
  %logits = onnx.Reshape(%h2, %flat) : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
  func.return %logits, %nk0, %nv0, %nk1, %nv1 : tensor<?x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>, tensor<?x4x1x2xf32>
}
}
