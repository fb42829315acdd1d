// RUN: xfmr-opt %s --split-input-file --xfmr-paged-kv=block-size=8 --verify-diagnostics | FileCheck %s

// Exports without a position_ids input compute positions from the sequence
// (Hugging Face's cache_position = arange(past, past + S), GPT-2's
// arange(0, S), or cumsum(attention_mask) - 1). In the step function the
// graph runs on T packed tokens with no past and a ones mask, so these are
// 0..T-1 and the pass substitutes the step's `positions` for them.

// arange(0, S) with S read from the embeddings' shape (transformers 5).
// CHECK-LABEL: func.func @range_positions(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["tokens"], onnx.name = "input_ids"}
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["tokens"], onnx.name = "positions"}
// CHECK-NOT: onnx.Range
// CHECK: %[[ROW:.*]] = onnx.Unsqueeze(%[[POS]],
// CHECK: onnx.Cast(%[[ROW]])
// CHECK: xfmr.paged_attention
func.func @range_positions(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                           %mask: tensor<?x?xi64> {onnx.name = "attention_mask"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h0 = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %axis2 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %hs = onnx.Shape(%h0) : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %len = onnx.Gather(%hs, %one) : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %range = onnx.Range(%zero, %len, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %row = onnx.Unsqueeze(%range, %axis0) : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %posf = onnx.Cast(%row) {to = 1 : i64} : (tensor<1x?xi64>) -> tensor<1x?xf32>
  %pos3 = onnx.Unsqueeze(%posf, %axis2) : (tensor<1x?xf32>, tensor<1xi64>) -> tensor<1x?x1xf32>
  %h = onnx.Add(%h0, %pos3) : (tensor<?x?x8xf32>, tensor<1x?x1xf32>) -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %m = onnx.Cast(%mask) {to = 1 : i64} : (tensor<?x?xi64>) -> tensor<?x?xf32>
  %a = xfmr.attention %q, %q, %q mask %m
      {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x?xf32>
      -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// cumsum(attention_mask, -1) - 1: the running count of the (ones) mask is
// positions + 1.
// CHECK-LABEL: func.func @cumsum_positions(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["tokens"], onnx.name = "input_ids"}
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["tokens"], onnx.name = "positions"}
// CHECK-NOT: onnx.CumSum
// CHECK: %[[ROW:.*]] = onnx.Unsqueeze(%[[POS]],
// CHECK: %[[COUNT:.*]] = onnx.Add(%[[ROW]], %{{.*}}) : (tensor<1x?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
// CHECK: onnx.Sub(%{{.*}}
// CHECK: xfmr.paged_attention
func.func @cumsum_positions(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                            %mask: tensor<?x?xi64> {onnx.name = "attention_mask"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h0 = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %last = onnx.Constant() {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %axis2 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %count = onnx.CumSum(%mask, %last) : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %pos = onnx.Sub(%count, %one) : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %posf = onnx.Cast(%pos) {to = 1 : i64} : (tensor<?x?xi64>) -> tensor<?x?xf32>
  %pos3 = onnx.Unsqueeze(%posf, %axis2) : (tensor<?x?xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %h = onnx.Add(%h0, %pos3) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %a = xfmr.attention %q, %q, %q
      {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
      -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// arange(1, S + 1) is not the step's positions: refused, naming the node.
func.func @shifted_range(%ids: tensor<?x?xi64> {onnx.name = "input_ids"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h0 = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %axis2 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %hs = onnx.Shape(%h0) : (tensor<?x?x8xf32>) -> tensor<3xi64>
  %len = onnx.Gather(%hs, %one) : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %end = onnx.Add(%len, %one) : (tensor<i64>, tensor<i64>) -> tensor<i64>
  // expected-error @+1 {{derives positions from the sequence in a form that cannot be proven to be the step's positions (a Range that is not 0..T-1}}
  %range = onnx.Range(%one, %end, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %row = onnx.Unsqueeze(%range, %axis0) : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %posf = onnx.Cast(%row) {to = 1 : i64} : (tensor<1x?xi64>) -> tensor<1x?xf32>
  %pos3 = onnx.Unsqueeze(%posf, %axis2) : (tensor<1x?xf32>, tensor<1xi64>) -> tensor<1x?x1xf32>
  %h = onnx.Add(%h0, %pos3) : (tensor<?x?x8xf32>, tensor<1x?x1xf32>) -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %a = xfmr.attention %q, %q, %q
      {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
      -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
