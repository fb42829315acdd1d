// RUN: xfmr-opt %s --split-input-file --xfmr-shard-tensor-parallel="ranks=2 rank=1" --verify-diagnostics | FileCheck %s
// RUN: not xfmr-opt %s --split-input-file --xfmr-shard-tensor-parallel="ranks=4 rank=3" 2>&1 | FileCheck %s --check-prefix=FOUR

// Rank 1 of 2 of an attention with 2 query heads and 2 KV heads of 2
// features (hidden 4): the query, key and value projections keep the
// columns of head 1 ([4, 2]), the head count in the reshape's constant
// becomes 1, the attention has 1 + 1 heads, the output projection keeps
// rows 2..3 and its partial sum is all-reduced before the residual add.
// CHECK-LABEL: func.func @attention(
// CHECK: %[[WQ:.*]] = onnx.Constant() {value = dense_resource<xfmr.tp.{{.*}}> : tensor<4x2xf32>}
// CHECK: %[[Q:.*]] = onnx.MatMul(%{{.*}}, %[[WQ]]) : (tensor<1x?x4xf32>, tensor<4x2xf32>) -> tensor<1x?x2xf32>
// CHECK: %[[SHAPE:.*]] = onnx.Constant() {value = dense<[1, -1, 1, 2]> : tensor<4xi64>}
// CHECK: onnx.Reshape(%[[Q]], %[[SHAPE]]) {{.*}} -> tensor<1x?x1x2xf32>
// CHECK: onnx.Transpose({{.*}}) {perm = [0, 2, 1, 3]} : (tensor<1x?x1x2xf32>) -> tensor<1x1x?x2xf32>
// CHECK: xfmr.attention {{.*}} {causal = true, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.707106769 : f32} : tensor<1x1x?x2xf32>, tensor<1x1x?x2xf32>, tensor<1x1x?x2xf32> -> tensor<1x1x?x2xf32>
// CHECK: onnx.Reshape({{.*}}) {{.*}} -> tensor<1x?x2xf32>
// CHECK: %[[O:.*]] = onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<1x?x2xf32>, tensor<2x4xf32>) -> tensor<1x?x4xf32>
// CHECK: %[[SUM:.*]] = xfmr.all_reduce %[[O]] : tensor<1x?x4xf32>
// CHECK: onnx.Add(%{{.*}}, %[[SUM]])
// Four ranks: one query head per rank, so the 2 heads do not split.
// FOUR: error: --tensor-parallel=4: 2 query heads do not split over 4 ranks
func.func @attention(%x: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %wq = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %wk = onnx.Constant() {value = dense<[[1.5, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %wv = onnx.Constant() {value = dense<[[2.5, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %wo = onnx.Constant() {value = dense<[[3.5, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %split = onnx.Constant() {value = dense<[1, -1, 2, 2]> : tensor<4xi64>} : () -> tensor<4xi64>
  %merge = onnx.Constant() {value = dense<[1, -1, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q0 = onnx.MatMul(%x, %wq) : (tensor<1x?x4xf32>, tensor<4x4xf32>) -> tensor<1x?x4xf32>
  %k0 = onnx.MatMul(%x, %wk) : (tensor<1x?x4xf32>, tensor<4x4xf32>) -> tensor<1x?x4xf32>
  %v0 = onnx.MatMul(%x, %wv) : (tensor<1x?x4xf32>, tensor<4x4xf32>) -> tensor<1x?x4xf32>
  %q1 = onnx.Reshape(%q0, %split) : (tensor<1x?x4xf32>, tensor<4xi64>) -> tensor<1x?x2x2xf32>
  %k1 = onnx.Reshape(%k0, %split) : (tensor<1x?x4xf32>, tensor<4xi64>) -> tensor<1x?x2x2xf32>
  %v1 = onnx.Reshape(%v0, %split) : (tensor<1x?x4xf32>, tensor<4xi64>) -> tensor<1x?x2x2xf32>
  %q = onnx.Transpose(%q1) {perm = [0, 2, 1, 3]} : (tensor<1x?x2x2xf32>) -> tensor<1x2x?x2xf32>
  %k = onnx.Transpose(%k1) {perm = [0, 2, 1, 3]} : (tensor<1x?x2x2xf32>) -> tensor<1x2x?x2xf32>
  %v = onnx.Transpose(%v1) {perm = [0, 2, 1, 3]} : (tensor<1x?x2x2xf32>) -> tensor<1x2x?x2xf32>
  %a = xfmr.attention %q, %k, %v {causal = true, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.707106769 : f32} : tensor<1x2x?x2xf32>, tensor<1x2x?x2xf32>, tensor<1x2x?x2xf32> -> tensor<1x2x?x2xf32>
  %a1 = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<1x2x?x2xf32>) -> tensor<1x?x2x2xf32>
  %a2 = onnx.Reshape(%a1, %merge) : (tensor<1x?x2x2xf32>, tensor<3xi64>) -> tensor<1x?x4xf32>
  %o = onnx.MatMul(%a2, %wo) : (tensor<1x?x4xf32>, tensor<4x4xf32>) -> tensor<1x?x4xf32>
  %y = onnx.Add(%x, %o) : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  func.return %y : tensor<1x?x4xf32>
}

// -----

// A gated MLP keeps intermediate columns [2, 4) of gate and up and those
// rows of down; its partial result is all-reduced.
// CHECK-LABEL: func.func @mlp(
// CHECK: xfmr.gated_mlp silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
// CHECK-NEXT: xfmr.all_reduce
// FOUR-LABEL: func.func @mlp(
// FOUR: xfmr.gated_mlp silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<1x2xf32>
func.func @mlp(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %g = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %u = onnx.Constant() {value = dense<[[1.5, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %d = onnx.Constant() {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %y = xfmr.gated_mlp silu %x, %g, %u, %d : tensor<?x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x2xf32>
  func.return %y : tensor<?x2xf32>
}

// -----

// A query that is not a projection by a constant weight cannot be split.
func.func @not_a_projection(%q: tensor<1x4x?x2xf32>) -> tensor<1x4x?x2xf32> {
  // expected-error @+1 {{--tensor-parallel: the query of this attention is not a projection by a constant f32 weight}}
  %a = xfmr.attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.0 : f32} : tensor<1x4x?x2xf32>, tensor<1x4x?x2xf32>, tensor<1x4x?x2xf32> -> tensor<1x4x?x2xf32>
  func.return %a : tensor<1x4x?x2xf32>
}

// -----

// The vocabulary: rank 1 of 2 keeps table rows [4, 8) and looks up id - 4
// where that is in [0, 4) (zeros elsewhere; the offset is a weight, so the
// ranks' code is the same), the ranks' rows summed; the LM head keeps
// columns [4, 8) and its logits are gathered.
// CHECK-LABEL: func.func @vocabulary(
// CHECK-DAG: %[[TABLE:.*]] = onnx.Constant() {value = dense_resource<xfmr.tp.{{.*}}> : tensor<4x4xf32>}
// CHECK-DAG: %[[OFFSET:.*]] = onnx.Constant() {value = dense_resource<xfmr.tp.vocabulary_offset> : tensor<i64>}
// CHECK: %[[LOCAL:.*]] = onnx.Sub(%{{.*}}, %[[OFFSET]])
// CHECK: onnx.GreaterOrEqual(%[[LOCAL]]
// CHECK: onnx.Less(%[[LOCAL]]
// CHECK: %[[IN:.*]] = onnx.And
// CHECK: %[[SAFE:.*]] = onnx.Where(%[[IN]], %[[LOCAL]]
// CHECK: %[[ROWS:.*]] = xfmr.embedding %[[TABLE]], %[[SAFE]] : tensor<4x4xf32>, tensor<?xi64> -> tensor<?x4xf32>
// CHECK: onnx.Cast(%[[IN]]) {to = 1 : i64}
// CHECK: %[[MASKED:.*]] = onnx.Mul(%[[ROWS]]
// CHECK: %[[E:.*]] = xfmr.all_reduce %[[MASKED]] : tensor<?x4xf32>
// CHECK: %[[L:.*]] = onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[LOGITS:.*]] = xfmr.all_gather %[[L]] {ranks = 2 : i64} : tensor<?x4xf32> -> tensor<?x8xf32>
// CHECK: return %[[E]], %[[LOGITS]]
func.func @vocabulary(%ids: tensor<?xi64>, %h: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x8xf32>) {
  %table = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0], [1.5, 2.0, 3.0, 4.0], [5.5, 6.0, 7.0, 8.0], [9.5, 10.0, 11.0, 12.0], [13.5, 14.0, 15.0, 16.0]]> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %w = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.5]]> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %e = xfmr.embedding %table, %ids : tensor<8x4xf32>, tensor<?xi64> -> tensor<?x4xf32>
  %l = onnx.MatMul(%h, %w) : (tensor<?x4xf32>, tensor<4x8xf32>) -> tensor<?x8xf32>
  func.return %e, %l : tensor<?x4xf32>, tensor<?x8xf32>
}

// -----

// An MLP left as products (StarCoder2's c_fc, bias, GELU, c_proj): the up
// projection keeps columns [4, 8) and their bias, the activation follows,
// the down projection keeps those rows and is all-reduced before its bias.
// CHECK-LABEL: func.func @ungated_mlp(
// CHECK: %[[UP:.*]] = onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[B:.*]] = onnx.Add(%[[UP]], %{{.*}}) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// CHECK: %[[G:.*]] = onnx.Gelu(%[[B]]) {{.*}}: (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[D:.*]] = onnx.MatMul(%[[G]], %{{.*}}) : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[S:.*]] = xfmr.all_reduce %[[D]]
// CHECK: onnx.Add(%[[S]], %{{.*}}) : (tensor<?x4xf32>, tensor<4xf32>)
func.func @ungated_mlp(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %w1 = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.5]]> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %b1 = onnx.Constant() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>} : () -> tensor<8xf32>
  %w2 = onnx.Constant() {value = dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.5, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %b2 = onnx.Constant() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %h = onnx.MatMul(%x, %w1) : (tensor<?x4xf32>, tensor<4x8xf32>) -> tensor<?x8xf32>
  %hb = onnx.Add(%h, %b1) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %g = onnx.Gelu(%hb) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %y = onnx.MatMul(%g, %w2) : (tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
  %yb = onnx.Add(%y, %b2) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %r = onnx.Add(%x, %yb) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  func.return %r : tensor<?x4xf32>
}
