// RUN: xfmr-opt %s --split-input-file --xfmr-raise=report=true | FileCheck %s

// xfmr-raise on the com.microsoft ops of onnxruntime-genai's model builder,
// from its Qwen2 output (layer 0, weights replaced by splats): packed QKV
// GroupQueryAttention with rotary inside, the (Skip)SimplifiedLayerNorms.

// Packed QKV [B, S, (4 + 2 * 2) * 16] is cut into Q, K, V heads; RoPE reads
// the cos/sin caches at positions past .. past + S; K/V are the past
// concatenated with the new tokens (the present outputs); keys past
// seqlens_k[b] are masked; the attention is causal (bottom-right).
// CHECK-LABEL: xfmr-raise @gqa_packed: formed 2 rope, 1 attention; 0 candidate(s) left unfused
// CHECK: func.func @gqa_packed(
// CHECK: %[[Q:.*]] = onnx.Slice(%arg0, {{.*}} -> tensor<?x?x64xf32>
// CHECK: %[[QH:.*]] = onnx.Transpose
// CHECK: onnx.Slice(%arg0, {{.*}} -> tensor<?x?x32xf32>
// CHECK: %[[KH:.*]] = onnx.Transpose
// CHECK: onnx.Slice(%arg0, {{.*}} -> tensor<?x?x32xf32>
// CHECK: %[[VH:.*]] = onnx.Transpose
// CHECK: %[[SHAPE:.*]] = onnx.Shape(%arg1)
// CHECK: %[[PAST:.*]] = onnx.Gather(%[[SHAPE]]
// CHECK: %[[END:.*]] = onnx.Add(%[[PAST]]
// CHECK: %[[POS:.*]] = onnx.Range(%[[PAST]], %[[END]]
// CHECK: %[[COS:.*]] = onnx.Gather(%{{.*}}, %[[POS]])
// CHECK: %[[SIN:.*]] = onnx.Gather(%{{.*}}, %[[POS]])
// CHECK: %[[QR:.*]] = xfmr.rope %[[QH]], %[[COS]], %[[SIN]] {rotary_dim = 16 : i64}
// CHECK: %[[KR:.*]] = xfmr.rope %[[KH]], %[[COS]], %[[SIN]] {rotary_dim = 16 : i64}
// CHECK: %[[K:.*]] = onnx.Concat(%arg1, %[[KR]]) {axis = 2 : i64}
// CHECK: %[[V:.*]] = onnx.Concat(%arg2, %[[VH]]) {axis = 2 : i64}
// CHECK: cf.assert {{.*}}every batch row's seqlens_k + 1 must equal past + new tokens
// CHECK: cf.assert {{.*}}total_sequence_length is not past + new tokens
// CHECK: %[[KEYS:.*]] = onnx.Range(%{{.*}}, %[[END]]
// CHECK: %[[LE:.*]] = onnx.LessOrEqual(%[[KEYS]]
// CHECK: onnx.Unsqueeze(%[[LE]]
// CHECK: %[[KEEP:.*]] = onnx.Unsqueeze
// CHECK: %[[A:.*]] = xfmr.attention %[[QR]], %[[K]], %[[V]] mask %[[KEEP]] {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
// CHECK: %[[OUT:.*]] = onnx.Transpose(%[[A]]) {perm = [0, 2, 1, 3]}
// CHECK: %[[R:.*]] = onnx.Reshape(%[[OUT]]
// CHECK: return %[[R]], %[[K]], %[[V]]
func.func @gqa_packed(%qkv: tensor<?x?x128xf32>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>,
                      %seqlens: tensor<?xi32>, %total: tensor<i32>)
    -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) {
  %none = onnx.NoValue : none
  %cos = onnx.Constant() {value = dense<1.0> : tensor<256x8xf32>} : () -> tensor<256x8xf32>
  %sin = onnx.Constant() {value = dense<0.0> : tensor<256x8xf32>} : () -> tensor<256x8xf32>
  %out, %pk2, %pv2, %qk = onnx.ms.GroupQueryAttention(%qkv, %none, %none, %pk, %pv, %seqlens, %total, %cos, %sin, %none, %none, %none, %none, %none, %none, %none, %none) {do_rotary = 1 : i64, kv_num_heads = 2 : i64, num_heads = 4 : i64, rotary_interleaved = 0 : i64, scale = 2.500000e-01 : f32, softcap = 0.000000e+00 : f32} : (tensor<?x?x128xf32>, none, none, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?xi32>, tensor<i32>, tensor<256x8xf32>, tensor<256x8xf32>, none, none, none, none, none, none, none, none) -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, none)
  return %out, %pk2, %pv2 : tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
}

// -----

// local_window_size = 8 (Mistral's sliding_window as the builder writes it)
// attends to 9 keys in onnxruntime: key > position - 9, in the form
// xfmr-paged-kv keeps as the paged op's sliding window.
// CHECK-LABEL: xfmr-raise @gqa_window: formed 2 rope, 1 attention; 0 candidate(s) left unfused
// CHECK: %[[POS:.*]] = onnx.Range
// CHECK: %[[LE:.*]] = onnx.LessOrEqual
// CHECK: %[[QPOS:.*]] = onnx.Unsqueeze(%[[POS]]
// CHECK: %[[W:.*]] = onnx.Constant() {value = dense<9> : tensor<1xi64>}
// CHECK: %[[LOW:.*]] = onnx.Sub(%[[QPOS]], %[[W]])
// CHECK: %[[IN:.*]] = onnx.Greater(%{{.*}}, %[[LOW]])
// CHECK: %[[KEEP:.*]] = onnx.And(%{{.*}}, %[[IN]])
// CHECK: xfmr.attention {{.*}} mask %[[KEEP]] {causal = true
func.func @gqa_window(%qkv: tensor<?x?x128xf32>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>,
                      %seqlens: tensor<?xi32>, %total: tensor<i32>) -> tensor<?x?x64xf32> {
  %none = onnx.NoValue : none
  %cos = onnx.Constant() {value = dense<1.0> : tensor<256x8xf32>} : () -> tensor<256x8xf32>
  %sin = onnx.Constant() {value = dense<0.0> : tensor<256x8xf32>} : () -> tensor<256x8xf32>
  %out, %pk2, %pv2, %qk = onnx.ms.GroupQueryAttention(%qkv, %none, %none, %pk, %pv, %seqlens, %total, %cos, %sin, %none, %none, %none, %none, %none, %none, %none, %none) {do_rotary = 1 : i64, kv_num_heads = 2 : i64, local_window_size = 8 : i64, num_heads = 4 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x128xf32>, none, none, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?xi32>, tensor<i32>, tensor<256x8xf32>, tensor<256x8xf32>, none, none, none, none, none, none, none, none) -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, none)
  return %out : tensor<?x?x64xf32>
}

// -----

// softcap (onnxruntime caps before the causal mask, as xfmr.attention does)
// and smooth_softmax (an extra 1 in every row's denominator: sinks 0) are
// the attention's softcap and sinks; numerics: check-gqa-features.py.
// CHECK-LABEL: xfmr-raise @gqa_softcap: formed 1 attention; 0 candidate(s) left unfused
// CHECK-LABEL: func.func @gqa_softcap(
// CHECK: xfmr.attention {{.*}} {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32, sinks = array<f32: 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00>, softcap = 3.000000e+01 : f32}
// CHECK-NOT: onnx.ms.GroupQueryAttention
func.func @gqa_softcap(%qkv: tensor<?x?x128xf32>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>,
                       %seqlens: tensor<?xi32>, %total: tensor<i32>) -> tensor<?x?x64xf32> {
  %none = onnx.NoValue : none
  %out, %pk2, %pv2, %qk = onnx.ms.GroupQueryAttention(%qkv, %none, %none, %pk, %pv, %seqlens, %total, %none, %none, %none, %none, %none, %none, %none, %none, %none, %none) {kv_num_heads = 2 : i64, num_heads = 4 : i64, smooth_softmax = 1 : i64, softcap = 3.0e+01 : f32} : (tensor<?x?x128xf32>, none, none, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?xi32>, tensor<i32>, none, none, none, none, none, none, none, none, none, none) -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, none)
  return %out : tensor<?x?x64xf32>
}

// -----

// The builder of onnxruntime-genai >= 0.12 names the past's head size
// symbolically (kv_cache_dim); with K/V heads symbolic too, both are
// derived from the query (128 = (4 + 2 * 2) * 16) and asserted at run time;
// the inputs then take the static type (the signature, so the artifact's
// manifest states them), and the present output keeps the graph's type.
// CHECK-LABEL: xfmr-raise @gqa_symbolic_head_size: formed 1 attention; 0 candidate(s) left unfused
// CHECK: func.func @gqa_symbolic_head_size(%arg0: tensor<?x?x128xf32>, %arg1: tensor<?x2x?x16xf32>, %arg2: tensor<?x2x?x16xf32>, %arg3: tensor<?xi32>, %arg4: tensor<i32>) -> (tensor<?x?x64xf32>, tensor<?x?x?x?xf32>)
// CHECK: cf.assert %{{.*}}, "{{.*}}: past K/V heads must be 2 (from the query and num_heads/kv_num_heads)"
// CHECK: %[[D:.*]] = tensor.dim %arg1, %c3
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[D]], %c16
// CHECK: cf.assert %[[OK]], "{{.*}}: past head size must be 16 (from the query and num_heads/kv_num_heads)"
// CHECK: xfmr.attention
// CHECK: tensor.cast %{{.*}} : tensor<?x2x?x16xf32> to tensor<?x?x?x?xf32>
func.func @gqa_symbolic_head_size(%qkv: tensor<?x?x128xf32>, %pk: tensor<?x?x?x?xf32>,
                                  %pv: tensor<?x?x?x?xf32>, %seqlens: tensor<?xi32>,
                                  %total: tensor<i32>) -> (tensor<?x?x64xf32>, tensor<?x?x?x?xf32>) {
  %none = onnx.NoValue : none
  %out, %pk2, %pv2, %qk = onnx.ms.GroupQueryAttention(%qkv, %none, %none, %pk, %pv, %seqlens, %total, %none, %none, %none, %none, %none, %none, %none, %none, %none, %none) {kv_num_heads = 2 : i64, num_heads = 4 : i64} : (tensor<?x?x128xf32>, none, none, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xi32>, tensor<i32>, none, none, none, none, none, none, none, none, none, none) -> (tensor<?x?x64xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, none)
  return %out, %pk2 : tensor<?x?x64xf32>, tensor<?x?x?x?xf32>
}

// -----

// A static head size that differs from the query's is refused, not cast.
// CHECK-LABEL: xfmr-raise @gqa_head_size_conflict: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at onnx.ms.GroupQueryAttention {{.*}}: head sizes of query and past_key disagree
func.func @gqa_head_size_conflict(%qkv: tensor<?x?x128xf32>, %pk: tensor<?x2x?x8xf32>,
                                  %pv: tensor<?x2x?x8xf32>, %seqlens: tensor<?xi32>,
                                  %total: tensor<i32>) -> tensor<?x?x64xf32> {
  %none = onnx.NoValue : none
  %out, %pk2, %pv2, %qk = onnx.ms.GroupQueryAttention(%qkv, %none, %none, %pk, %pv, %seqlens, %total, %none, %none, %none, %none, %none, %none, %none, %none, %none, %none) {kv_num_heads = 2 : i64, num_heads = 4 : i64} : (tensor<?x?x128xf32>, none, none, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?xi32>, tensor<i32>, none, none, none, none, none, none, none, none, none, none) -> (tensor<?x?x64xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, none)
  return %out : tensor<?x?x64xf32>
}

// -----

// QK-norm weights inside the op (onnxruntime >= 1.24) are not raised yet.
// CHECK-LABEL: xfmr-raise @gqa_qk_norm: formed nothing; 1 candidate(s) left unfused
// CHECK-NEXT: unfused attention at onnx.ms.GroupQueryAttention {{.*}}: QK-norm inside GroupQueryAttention is not raised yet
func.func @gqa_qk_norm(%qkv: tensor<?x?x128xf32>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>,
                       %seqlens: tensor<?xi32>, %total: tensor<i32>, %w: tensor<16xf32>) -> tensor<?x?x64xf32> {
  %none = onnx.NoValue : none
  %out, %pk2, %pv2, %qk = onnx.ms.GroupQueryAttention(%qkv, %none, %none, %pk, %pv, %seqlens, %total, %none, %none, %none, %none, %none, %none, %none, %w, %w, %none) {kv_num_heads = 2 : i64, num_heads = 4 : i64} : (tensor<?x?x128xf32>, none, none, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?xi32>, tensor<i32>, none, none, none, none, none, none, none, tensor<16xf32>, tensor<16xf32>, none) -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, none)
  return %out : tensor<?x?x64xf32>
}

// -----

// SkipSimplifiedLayerNormalization: the residual sum (also its fourth
// output, which feeds the next layer's skip) and an RMS norm of it.
// CHECK-LABEL: xfmr-raise @skip_norm: formed 2 rms_norm; 0 candidate(s) left unfused
// CHECK: %[[N0:.*]] = xfmr.rms_norm %arg0, %{{.*}} {epsilon = 9.99999997E-7 : f32}
// CHECK: %[[SUM:.*]] = onnx.Add(%arg0, %arg1)
// CHECK: %[[N1:.*]] = xfmr.rms_norm %[[SUM]], %{{.*}} {epsilon = 9.99999997E-7 : f32}
// CHECK: return %[[N0]], %[[N1]], %[[SUM]]
func.func @skip_norm(%x: tensor<?x?x64xf32>, %y: tensor<?x?x64xf32>)
    -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %none = onnx.NoValue : none
  %w = onnx.Constant() {value = dense<1.5> : tensor<64xf32>} : () -> tensor<64xf32>
  %n, %isv = onnx.SimplifiedLayerNormalization(%x, %w) {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, none)
  %o, %mean, %isv2, %sum = onnx.ms.SkipSimplifiedLayerNormalization(%x, %y, %w, %none) {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>, none) -> (tensor<?x?x64xf32>, none, none, tensor<?x?x64xf32>)
  return %n, %o, %sum : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}
