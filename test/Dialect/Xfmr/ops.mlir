// RUN: xfmr-opt %s -split-input-file -verify-each | xfmr-opt -split-input-file | FileCheck %s

// Round trip of every xfmr op through its custom assembly format: the first
// xfmr-opt parses and verifies, the second parses the printed form again.

// Grouped-query attention (8 query heads over 2 KV heads) with an i1 mask
// broadcast over heads, and causal: every attribute is printed.
// CHECK-LABEL: func.func @attention_gqa_causal_mask(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x8x16x64xf16>, %[[K:[a-z0-9]+]]: tensor<2x2x16x64xf16>, %[[V:[a-z0-9]+]]: tensor<2x2x16x64xf16>, %[[MASK:[a-z0-9]+]]: tensor<2x1x16x16xi1>
// CHECK: %[[OUT:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] mask %[[MASK]]
// CHECK-SAME: {causal = true, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : tensor<2x8x16x64xf16>, tensor<2x2x16x64xf16>, tensor<2x2x16x64xf16>, tensor<2x1x16x16xi1> -> tensor<2x8x16x64xf16>
// CHECK: return %[[OUT]]
func.func @attention_gqa_causal_mask(%q: tensor<2x8x16x64xf16>, %k: tensor<2x2x16x64xf16>,
                                     %v: tensor<2x2x16x64xf16>, %mask: tensor<2x1x16x16xi1>)
    -> tensor<2x8x16x64xf16> {
  %out = xfmr.attention %q, %k, %v mask %mask
      {causal = true, num_heads = 8 : i64, num_kv_heads = 2 : i64,
       scale = 0.125 : f32}
      : tensor<2x8x16x64xf16>, tensor<2x2x16x64xf16>,
        tensor<2x2x16x64xf16>, tensor<2x1x16x16xi1>
      -> tensor<2x8x16x64xf16>
  return %out : tensor<2x8x16x64xf16>
}

// -----

// Multi-head attention with dynamic batch and lengths and a value head dim
// (32) different from the query/key head dim (64); no mask, and
// causal = false is the default, so it is not printed.
// CHECK-LABEL: func.func @attention_dynamic_value_dim(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x4x?x64xf32>, %[[K:[a-z0-9]+]]: tensor<?x4x?x64xf32>, %[[V:[a-z0-9]+]]: tensor<?x4x?x32xf32>
// CHECK: xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>, tensor<?x4x?x32xf32> -> tensor<?x4x?x32xf32>
func.func @attention_dynamic_value_dim(%q: tensor<?x4x?x64xf32>, %k: tensor<?x4x?x64xf32>,
                                       %v: tensor<?x4x?x32xf32>) -> tensor<?x4x?x32xf32> {
  %out = xfmr.attention %q, %k, %v
      {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64,
       scale = 0.125 : f32}
      : tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>, tensor<?x4x?x32xf32>
      -> tensor<?x4x?x32xf32>
  return %out : tensor<?x4x?x32xf32>
}

// -----

// Multi-query decode step: one query token, one KV head, and a rank-2
// additive float mask [Sq, Skv] broadcast over batch and heads.
// CHECK-LABEL: func.func @attention_mqa_decode_additive_mask(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x8x1x64xbf16>, %[[K:[a-z0-9]+]]: tensor<1x1x128x64xbf16>, %[[V:[a-z0-9]+]]: tensor<1x1x128x64xbf16>, %[[MASK:[a-z0-9]+]]: tensor<1x128xf32>
// CHECK: xfmr.attention %[[Q]], %[[K]], %[[V]] mask %[[MASK]] {num_heads = 8 : i64, num_kv_heads = 1 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : tensor<1x8x1x64xbf16>, tensor<1x1x128x64xbf16>, tensor<1x1x128x64xbf16>, tensor<1x128xf32> -> tensor<1x8x1x64xbf16>
func.func @attention_mqa_decode_additive_mask(%q: tensor<1x8x1x64xbf16>,
                                              %k: tensor<1x1x128x64xbf16>,
                                              %v: tensor<1x1x128x64xbf16>,
                                              %mask: tensor<1x128xf32>)
    -> tensor<1x8x1x64xbf16> {
  %out = xfmr.attention %q, %k, %v mask %mask
      {num_heads = 8 : i64, num_kv_heads = 1 : i64, scale = 0.125 : f32}
      : tensor<1x8x1x64xbf16>, tensor<1x1x128x64xbf16>,
        tensor<1x1x128x64xbf16>, tensor<1x128xf32>
      -> tensor<1x8x1x64xbf16>
  return %out : tensor<1x8x1x64xbf16>
}

// -----

// RMS norm with f32 weights on bf16 activations (mixed precision is allowed);
// the result type is inferred from the input.
// CHECK-LABEL: func.func @rms_norm_mixed_precision(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xbf16>, %[[W:[a-z0-9]+]]: tensor<64xf32>
// CHECK: %[[Y:.*]] = xfmr.rms_norm %[[X]], %[[W]] {epsilon = {{[0-9.eE+-]+}} : f32} : tensor<2x16x64xbf16>, tensor<64xf32>
// CHECK: return %[[Y]]
func.func @rms_norm_mixed_precision(%x: tensor<2x16x64xbf16>, %w: tensor<64xf32>)
    -> tensor<2x16x64xbf16> {
  %y = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32}
      : tensor<2x16x64xbf16>, tensor<64xf32>
  return %y : tensor<2x16x64xbf16>
}

// -----

// Fully dynamic shapes verify: sizes are only compared when static.
// CHECK-LABEL: func.func @rms_norm_dynamic(
// CHECK: xfmr.rms_norm %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {epsilon = {{[0-9.eE+-]+}} : f32} : tensor<?x?xf16>, tensor<?xf16>
func.func @rms_norm_dynamic(%x: tensor<?x?xf16>, %w: tensor<?xf16>) -> tensor<?x?xf16> {
  %y = xfmr.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : tensor<?x?xf16>, tensor<?xf16>
  return %y : tensor<?x?xf16>
}

// -----

// Layer norm with the optional bias.
// CHECK-LABEL: func.func @layer_norm_bias(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[B:[a-z0-9]+]]: tensor<64xf32>
// CHECK: xfmr.layer_norm %[[X]], %[[W]], %[[B]] {epsilon = {{[0-9.eE+-]+}} : f32} : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
func.func @layer_norm_bias(%x: tensor<2x16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> tensor<2x16x64xf32> {
  %y = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Layer norm without bias: the optional operand and its type are absent.
// CHECK-LABEL: func.func @layer_norm_no_bias(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x768xf16>, %[[W:[a-z0-9]+]]: tensor<768xf16>
// CHECK: xfmr.layer_norm %[[X]], %[[W]] {epsilon = {{[0-9.eE+-]+}} : f32} : tensor<?x768xf16>, tensor<768xf16>{{$}}
func.func @layer_norm_no_bias(%x: tensor<?x768xf16>, %w: tensor<768xf16>) -> tensor<?x768xf16> {
  %y = xfmr.layer_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x768xf16>, tensor<768xf16>
  return %y : tensor<?x768xf16>
}

// -----

// Llama-style (half-split) rotary embedding over the whole head with 2-D
// [S, D/2] tables; interleaved = false is the default and is not printed.
// CHECK-LABEL: func.func @rope_full(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x16x64xf32>, %[[COS:[a-z0-9]+]]: tensor<16x32xf32>, %[[SIN:[a-z0-9]+]]: tensor<16x32xf32>
// CHECK: xfmr.rope %[[X]], %[[COS]], %[[SIN]] {rotary_dim = 64 : i64} : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
func.func @rope_full(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x32xf32>, %sin: tensor<16x32xf32>)
    -> tensor<2x8x16x64xf32> {
  %y = xfmr.rope %x, %cos, %sin {interleaved = false, rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return %y : tensor<2x8x16x64xf32>
}

// -----

// GPT-J-style interleaved, partial rotary (32 of 64 features) with 3-D
// [1, S, R] tables shared by the batch.
// CHECK-LABEL: func.func @rope_interleaved_partial(
// CHECK: xfmr.rope %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {interleaved = true, rotary_dim = 32 : i64} : tensor<2x8x16x64xf16>, tensor<1x16x16xf16>, tensor<1x16x16xf16>
func.func @rope_interleaved_partial(%x: tensor<2x8x16x64xf16>, %cos: tensor<1x16x16xf16>,
                                    %sin: tensor<1x16x16xf16>) -> tensor<2x8x16x64xf16> {
  %y = xfmr.rope %x, %cos, %sin {interleaved = true, rotary_dim = 32 : i64}
      : tensor<2x8x16x64xf16>, tensor<1x16x16xf16>, tensor<1x16x16xf16>
  return %y : tensor<2x8x16x64xf16>
}

// -----

// Per-batch position tables [B, S, R] (e.g. left-padded batches) and a
// dynamic sequence length.
// CHECK-LABEL: func.func @rope_per_batch_dynamic(
// CHECK: xfmr.rope %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {rotary_dim = 128 : i64} : tensor<4x32x?x128xbf16>, tensor<4x?x64xf32>, tensor<4x?x64xf32>
func.func @rope_per_batch_dynamic(%x: tensor<4x32x?x128xbf16>, %cos: tensor<4x?x64xf32>,
                                  %sin: tensor<4x?x64xf32>) -> tensor<4x32x?x128xbf16> {
  %y = xfmr.rope %x, %cos, %sin {rotary_dim = 128 : i64}
      : tensor<4x32x?x128xbf16>, tensor<4x?x64xf32>, tensor<4x?x64xf32>
  return %y : tensor<4x32x?x128xbf16>
}

// -----

// Linear with bias on a rank-3 input.
// CHECK-LABEL: func.func @linear_bias(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf16>, %[[W:[a-z0-9]+]]: tensor<64x128xf16>, %[[B:[a-z0-9]+]]: tensor<128xf16>
// CHECK: %[[Y:.*]] = xfmr.linear %[[X]], %[[W]], %[[B]] : tensor<2x16x64xf16>, tensor<64x128xf16>, tensor<128xf16> -> tensor<2x16x128xf16>
// CHECK: return %[[Y]]
func.func @linear_bias(%x: tensor<2x16x64xf16>, %w: tensor<64x128xf16>, %b: tensor<128xf16>)
    -> tensor<2x16x128xf16> {
  %y = xfmr.linear %x, %w, %b
      : tensor<2x16x64xf16>, tensor<64x128xf16>, tensor<128xf16>
      -> tensor<2x16x128xf16>
  return %y : tensor<2x16x128xf16>
}

// -----

// Linear without bias, with weights of other element types than the input:
// int8, int4 and fp8 (quantized weights), dynamic token count.
// CHECK-LABEL: func.func @linear_quantized_weights(
// CHECK: xfmr.linear %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xf16>, tensor<64x128xi8> -> tensor<?x128xf16>
// CHECK: xfmr.linear %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xf16>, tensor<64x128xi4> -> tensor<?x128xf16>
// CHECK: xfmr.linear %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xf16>, tensor<64x128xf8E4M3FN> -> tensor<?x128xf16>
func.func @linear_quantized_weights(%x: tensor<?x64xf16>, %w8: tensor<64x128xi8>,
                                    %w4: tensor<64x128xi4>, %wf8: tensor<64x128xf8E4M3FN>)
    -> (tensor<?x128xf16>, tensor<?x128xf16>, tensor<?x128xf16>) {
  %0 = xfmr.linear %x, %w8 : tensor<?x64xf16>, tensor<64x128xi8> -> tensor<?x128xf16>
  %1 = xfmr.linear %x, %w4 : tensor<?x64xf16>, tensor<64x128xi4> -> tensor<?x128xf16>
  %2 = xfmr.linear %x, %wf8 : tensor<?x64xf16>, tensor<64x128xf8E4M3FN> -> tensor<?x128xf16>
  return %0, %1, %2 : tensor<?x128xf16>, tensor<?x128xf16>, tensor<?x128xf16>
}

// -----

// SwiGLU MLP; the activation is a bare keyword before the operands.
// CHECK-LABEL: func.func @gated_mlp_silu(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16x64xf32>, %[[WG:[a-z0-9]+]]: tensor<64x256xf32>, %[[WU:[a-z0-9]+]]: tensor<64x256xf32>, %[[WD:[a-z0-9]+]]: tensor<256x64xf32>
// CHECK: %[[Y:.*]] = xfmr.gated_mlp silu %[[X]], %[[WG]], %[[WU]], %[[WD]] : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<256x64xf32>
// CHECK: return %[[Y]]
func.func @gated_mlp_silu(%x: tensor<2x16x64xf32>, %wg: tensor<64x256xf32>, %wu: tensor<64x256xf32>,
                          %wd: tensor<256x64xf32>) -> tensor<2x16x64xf32> {
  %y = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>,
        tensor<256x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Every other activation, on dynamic token counts with int8 weights.
// CHECK-LABEL: func.func @gated_mlp_activations(
// CHECK: xfmr.gated_mlp gelu %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xbf16>, tensor<64x256xi8>, tensor<64x256xi8>, tensor<256x64xi8>
// CHECK: xfmr.gated_mlp gelu_tanh %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xbf16>, tensor<64x256xi8>, tensor<64x256xi8>, tensor<256x64xi8>
// CHECK: xfmr.gated_mlp relu %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xbf16>, tensor<64x256xi8>, tensor<64x256xi8>, tensor<256x64xi8>
func.func @gated_mlp_activations(%x: tensor<?x64xbf16>, %wg: tensor<64x256xi8>,
                                 %wu: tensor<64x256xi8>, %wd: tensor<256x64xi8>)
    -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %0 = xfmr.gated_mlp gelu %x, %wg, %wu, %wd
      : tensor<?x64xbf16>, tensor<64x256xi8>, tensor<64x256xi8>, tensor<256x64xi8>
  %1 = xfmr.gated_mlp gelu_tanh %x, %wg, %wu, %wd
      : tensor<?x64xbf16>, tensor<64x256xi8>, tensor<64x256xi8>, tensor<256x64xi8>
  %2 = xfmr.gated_mlp relu %x, %wg, %wu, %wd
      : tensor<?x64xbf16>, tensor<64x256xi8>, tensor<64x256xi8>, tensor<256x64xi8>
  return %0, %1, %2 : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x64xbf16>
}

// -----

// Embedding lookup of a [B, S] batch of i64 ids.
// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %[[TABLE:[a-z0-9]+]]: tensor<32000x64xf16>, %[[IDS:[a-z0-9]+]]: tensor<2x16xi64>
// CHECK: %[[H:.*]] = xfmr.embedding %[[TABLE]], %[[IDS]] : tensor<32000x64xf16>, tensor<2x16xi64> -> tensor<2x16x64xf16>
// CHECK: return %[[H]]
func.func @embedding(%table: tensor<32000x64xf16>, %ids: tensor<2x16xi64>) -> tensor<2x16x64xf16> {
  %h = xfmr.embedding %table, %ids
      : tensor<32000x64xf16>, tensor<2x16xi64> -> tensor<2x16x64xf16>
  return %h : tensor<2x16x64xf16>
}

// -----

// Embedding of a flat, dynamic list of i32 ids (a packed serving batch).
// CHECK-LABEL: func.func @embedding_packed_i32(
// CHECK: xfmr.embedding %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
func.func @embedding_packed_i32(%table: tensor<?x64xf32>, %ids: tensor<?xi32>) -> tensor<?x64xf32> {
  %h = xfmr.embedding %table, %ids : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}

// -----

// DeepSeek-V3-style MoE: sigmoid scores chosen with a bias among the best 2
// of 4 groups, renormalised, times 2.5.
// CHECK-LABEL: func.func @moe_sigmoid_groups(
// CHECK: xfmr.moe silu %{{.*}} selection_bias(%{{.*}} : tensor<8xf32>) {groups = 4 : i64, normalize_top_k = true, routed_scale = 2.500000e+00 : f32, scoring = "sigmoid", top_groups = 2 : i64, top_k = 2 : i64}
func.func @moe_sigmoid_groups(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                              %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                              %wd: tensor<8x128x64xf32>, %b: tensor<8xf32>) -> tensor<16x64xf32> {
  %y = xfmr.moe silu %x, %router, %wg, %wu, %wd selection_bias(%b : tensor<8xf32>)
      {groups = 4 : i64, normalize_top_k = true, routed_scale = 2.5 : f32, scoring = "sigmoid",
       top_groups = 2 : i64, top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// gpt-oss-style MoE: a router bias, expert biases, the clamped SwiGLU.
// CHECK-LABEL: func.func @moe_gpt_oss(
// CHECK: xfmr.moe silu %{{.*}} router_bias(%{{.*}} : tensor<8xf32>) biases(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x64xf32>) {normalize_top_k = true, swiglu_alpha = 1.702000e+00 : f32, swiglu_limit = 7.000000e+00 : f32, top_k = 2 : i64, up_offset = 1.000000e+00 : f32}
func.func @moe_gpt_oss(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                       %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                       %wd: tensor<8x128x64xf32>, %rb: tensor<8xf32>, %bg: tensor<8x128xf32>,
                       %bu: tensor<8x128xf32>, %bd: tensor<8x64xf32>) -> tensor<16x64xf32> {
  %y = xfmr.moe silu %x, %router, %wg, %wu, %wd router_bias(%rb : tensor<8xf32>)
      biases(%bg, %bu, %bd : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x64xf32>)
      {normalize_top_k = true, swiglu_alpha = 1.702 : f32, swiglu_limit = 7.0 : f32,
       top_k = 2 : i64, up_offset = 1.0 : f32}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Mixtral-style MoE: 8 experts, top-2, renormalized top-k scores.
// CHECK-LABEL: func.func @moe_top2(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<16x64xbf16>, %[[R:[a-z0-9]+]]: tensor<64x8xbf16>, %[[WG:[a-z0-9]+]]: tensor<8x64x128xbf16>, %[[WU:[a-z0-9]+]]: tensor<8x64x128xbf16>, %[[WD:[a-z0-9]+]]: tensor<8x128x64xbf16>
// CHECK: %[[Y:.*]] = xfmr.moe silu %[[X]], %[[R]], %[[WG]], %[[WU]], %[[WD]] {normalize_top_k = true, top_k = 2 : i64}
// CHECK-SAME: : tensor<16x64xbf16>, tensor<64x8xbf16>, tensor<8x64x128xbf16>, tensor<8x64x128xbf16>, tensor<8x128x64xbf16>
// CHECK: return %[[Y]]
func.func @moe_top2(%x: tensor<16x64xbf16>, %router: tensor<64x8xbf16>, %wg: tensor<8x64x128xbf16>,
                    %wu: tensor<8x64x128xbf16>, %wd: tensor<8x128x64xbf16>) -> tensor<16x64xbf16> {
  %y = xfmr.moe silu %x, %router, %wg, %wu, %wd
      {normalize_top_k = true, top_k = 2 : i64}
      : tensor<16x64xbf16>, tensor<64x8xbf16>, tensor<8x64x128xbf16>,
        tensor<8x64x128xbf16>, tensor<8x128x64xbf16>
  return %y : tensor<16x64xbf16>
}

// -----

// Qwen-MoE style: a shared expert with a sigmoid gate beside the routed ones.
// CHECK-LABEL: func.func @moe_shared(
// CHECK: xfmr.moe silu %{{.*}} shared(%{{.*}}, %{{.*}}, %{{.*}} : tensor<64x96xf32>, tensor<64x96xf32>, tensor<96x64xf32>) shared_gate(%{{.*}} : tensor<64x1xf32>) {top_k = 2 : i64} : tensor<?x64xf32>, tensor<64x8xf32>
func.func @moe_shared(%x: tensor<?x64xf32>, %router: tensor<64x8xf32>, %wg: tensor<8x64x32xf32>,
                      %wu: tensor<8x64x32xf32>, %wd: tensor<8x32x64xf32>, %sg: tensor<64x96xf32>,
                      %su: tensor<64x96xf32>, %sd: tensor<96x64xf32>,
                      %g: tensor<64x1xf32>) -> tensor<?x64xf32> {
  %y = xfmr.moe silu %x, %router, %wg, %wu, %wd
      shared(%sg, %su, %sd : tensor<64x96xf32>, tensor<64x96xf32>, tensor<96x64xf32>)
      shared_gate(%g : tensor<64x1xf32>) {top_k = 2 : i64}
      : tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x64x32xf32>,
        tensor<8x32x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Quantized experts: int8 with per-column scales, bf16 without.
// CHECK-LABEL: func.func @moe_quantized(
// CHECK: xfmr.moe silu %{{.*}} scales(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x64xf32>) {top_k = 2 : i64} : tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xi8>, tensor<8x64x32xi8>, tensor<8x32x64xi8>
// CHECK: xfmr.moe silu %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {top_k = 2 : i64} : tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xbf16>
func.func @moe_quantized(%x: tensor<?x64xf32>, %router: tensor<64x8xf32>, %qg: tensor<8x64x32xi8>,
                         %qu: tensor<8x64x32xi8>, %qd: tensor<8x32x64xi8>, %s1: tensor<8x32xf32>,
                         %s2: tensor<8x32xf32>, %s3: tensor<8x64xf32>, %bg: tensor<8x64x32xbf16>,
                         %bu: tensor<8x64x32xbf16>, %bd: tensor<8x32x64xbf16>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %y = xfmr.moe silu %x, %router, %qg, %qu, %qd
      scales(%s1, %s2, %s3 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x64xf32>) {top_k = 2 : i64}
      : tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xi8>, tensor<8x64x32xi8>,
        tensor<8x32x64xi8>
  %z = xfmr.moe silu %x, %router, %bg, %bu, %bd {top_k = 2 : i64}
      : tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xbf16>, tensor<8x64x32xbf16>,
        tensor<8x32x64xbf16>
  return %y, %z : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// MoE with dynamic tokens and experts; normalize_top_k = false is the
// default and is not printed.
// CHECK-LABEL: func.func @moe_dynamic(
// CHECK: xfmr.moe gelu %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {top_k = 4 : i64} : tensor<?x64xf32>, tensor<64x?xf32>, tensor<?x64x32xf32>, tensor<?x64x32xf32>, tensor<?x32x64xf32>
func.func @moe_dynamic(%x: tensor<?x64xf32>, %router: tensor<64x?xf32>, %wg: tensor<?x64x32xf32>,
                       %wu: tensor<?x64x32xf32>, %wd: tensor<?x32x64xf32>) -> tensor<?x64xf32> {
  %y = xfmr.moe gelu %x, %router, %wg, %wu, %wd {normalize_top_k = false, top_k = 4 : i64}
      : tensor<?x64xf32>, tensor<64x?xf32>, tensor<?x64x32xf32>,
        tensor<?x64x32xf32>, tensor<?x32x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Paged attention over a ragged batch of 4 sequences (T dynamic), GQA 8/2,
// 16-token blocks.
// CHECK-LABEL: func.func @paged_attention(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x8x64xf16>, %[[KP:[a-z0-9]+]]: tensor<128x16x2x64xf16>, %[[VP:[a-z0-9]+]]: tensor<128x16x2x64xf16>, %[[BT:[a-z0-9]+]]: tensor<4x32xi32>, %[[CL:[a-z0-9]+]]: tensor<4xi32>, %[[QSL:[a-z0-9]+]]: tensor<5xi32>
// CHECK: %[[OUT:.*]] = xfmr.paged_attention %[[Q]], %[[KP]], %[[VP]], %[[BT]], %[[CL]], %[[QSL]]
// CHECK-SAME: {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : tensor<?x8x64xf16>, tensor<128x16x2x64xf16>, tensor<128x16x2x64xf16>, tensor<4x32xi32>, tensor<4xi32>, tensor<5xi32>
// CHECK: return %[[OUT]]
func.func @paged_attention(%q: tensor<?x8x64xf16>, %k_pool: tensor<128x16x2x64xf16>,
                           %v_pool: tensor<128x16x2x64xf16>, %block_tables: tensor<4x32xi32>,
                           %context_lens: tensor<4xi32>, %query_start_loc: tensor<5xi32>)
    -> tensor<?x8x64xf16> {
  %out = xfmr.paged_attention %q, %k_pool, %v_pool, %block_tables,
      %context_lens, %query_start_loc
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64,
       scale = 0.125 : f32}
      : tensor<?x8x64xf16>, tensor<128x16x2x64xf16>,
        tensor<128x16x2x64xf16>, tensor<4x32xi32>, tensor<4xi32>,
        tensor<5xi32>
  return %out : tensor<?x8x64xf16>
}

// -----

// Paged attention with a dynamic number of sequences and blocks: nothing to
// compare, so it verifies.
// CHECK-LABEL: func.func @paged_attention_dynamic(
// CHECK: xfmr.paged_attention
// CHECK-SAME: {block_size = 32 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : tensor<?x4x64xf32>, tensor<?x32x4x64xf32>, tensor<?x32x4x64xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
func.func @paged_attention_dynamic(%q: tensor<?x4x64xf32>, %k_pool: tensor<?x32x4x64xf32>,
                                   %v_pool: tensor<?x32x4x64xf32>, %block_tables: tensor<?x?xi32>,
                                   %context_lens: tensor<?xi32>, %query_start_loc: tensor<?xi32>)
    -> tensor<?x4x64xf32> {
  %out = xfmr.paged_attention %q, %k_pool, %v_pool, %block_tables,
      %context_lens, %query_start_loc
      {block_size = 32 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64,
       scale = 0.125 : f32}
      : tensor<?x4x64xf32>, tensor<?x32x4x64xf32>, tensor<?x32x4x64xf32>,
        tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %out : tensor<?x4x64xf32>
}

// -----

// KV cache write with i64 slots and a dynamic token count; the results are
// the updated pools with the pools' types, named after the ODS results.
// CHECK-LABEL: func.func @kv_write(
// CHECK-SAME: %[[K:[a-z0-9]+]]: tensor<?x2x64xf16>, %[[V:[a-z0-9]+]]: tensor<?x2x64xf16>, %[[KP:[a-z0-9]+]]: tensor<128x16x2x64xf16>, %[[VP:[a-z0-9]+]]: tensor<128x16x2x64xf16>, %[[SLOTS:[a-z0-9]+]]: tensor<?xi64>
// CHECK: %[[NEW_KP:.*]], %[[NEW_VP:.*]] = xfmr.kv_write %[[K]], %[[V]] into %[[KP]], %[[VP]] at %[[SLOTS]]
// CHECK-SAME: : tensor<?x2x64xf16>, tensor<?x2x64xf16>, tensor<128x16x2x64xf16>, tensor<128x16x2x64xf16>, tensor<?xi64>
// CHECK: return %[[NEW_KP]], %[[NEW_VP]]
func.func @kv_write(%k: tensor<?x2x64xf16>, %v: tensor<?x2x64xf16>,
                    %k_pool: tensor<128x16x2x64xf16>, %v_pool: tensor<128x16x2x64xf16>,
                    %slots: tensor<?xi64>)
    -> (tensor<128x16x2x64xf16>, tensor<128x16x2x64xf16>) {
  %k_pool2, %v_pool2 = xfmr.kv_write %k, %v into %k_pool, %v_pool at %slots
      : tensor<?x2x64xf16>, tensor<?x2x64xf16>, tensor<128x16x2x64xf16>,
        tensor<128x16x2x64xf16>, tensor<?xi64>
  return %k_pool2, %v_pool2 : tensor<128x16x2x64xf16>, tensor<128x16x2x64xf16>
}

// -----

// KV cache write into fp8 pools with i32 slots, and a value head dim (32)
// different from the key head dim (64).
// CHECK-LABEL: func.func @kv_write_fp8_i32_slots(
// CHECK: xfmr.kv_write %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} into %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} at %{{[a-z0-9_]+}}
// CHECK-SAME: : tensor<4x2x64xbf16>, tensor<4x2x32xbf16>, tensor<64x16x2x64xf8E4M3FN>, tensor<64x16x2x32xf8E4M3FN>, tensor<4xi32>
func.func @kv_write_fp8_i32_slots(%k: tensor<4x2x64xbf16>, %v: tensor<4x2x32xbf16>,
                                  %k_pool: tensor<64x16x2x64xf8E4M3FN>,
                                  %v_pool: tensor<64x16x2x32xf8E4M3FN>, %slots: tensor<4xi32>)
    -> (tensor<64x16x2x64xf8E4M3FN>, tensor<64x16x2x32xf8E4M3FN>) {
  %k_pool2, %v_pool2 = xfmr.kv_write %k, %v into %k_pool, %v_pool at %slots
      : tensor<4x2x64xbf16>, tensor<4x2x32xbf16>, tensor<64x16x2x64xf8E4M3FN>,
        tensor<64x16x2x32xf8E4M3FN>, tensor<4xi32>
  return %k_pool2, %v_pool2 : tensor<64x16x2x64xf8E4M3FN>, tensor<64x16x2x32xf8E4M3FN>
}

// -----

// The buffer form a target's fused kernel replaces: strided views in, the
// result written into `out`.
// CHECK-LABEL: func.func @attention_buffers(
// CHECK: xfmr.attention_buffers %arg0, %arg1, %arg2 mask %arg3 into %arg4
// CHECK-SAME: {causal = true, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 1.250000e-01 : f32}
// CHECK-SAME: : memref<1x4x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x64xf32>, memref<1x1x?x32xf32>, memref<?x?xi1> into memref<1x4x?x32xf32>
func.func @attention_buffers(%q: memref<1x4x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                             %k: memref<1x1x?x64xf32>, %v: memref<1x1x?x32xf32>,
                             %mask: memref<?x?xi1>, %out: memref<1x4x?x32xf32>) {
  xfmr.attention_buffers %q, %k, %v mask %mask into %out
      {causal = true, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.125 : f32}
      : memref<1x4x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x64xf32>,
        memref<1x1x?x32xf32>, memref<?x?xi1> into memref<1x4x?x32xf32>
  return
}

// -----

// Paged attention on buffers; int8 pools bring their key and value scales.
// CHECK-LABEL: func.func @paged_attention_buffers(
// CHECK: xfmr.paged_attention_buffers %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 scales(%arg6, %arg7 : memref<8x4x2xf32>, memref<8x4x2xf32>) into %arg8
// CHECK-SAME: {block_size = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32, sliding_window = 16 : i64}
// CHECK-SAME: : memref<?x4x16xf32>, memref<8x4x2x16xi8>, memref<8x4x2x16xi8>, memref<2x4xi32>, memref<2xi32>, memref<3xi32> into memref<?x4x16xf32>
func.func @paged_attention_buffers(%q: memref<?x4x16xf32>, %kp: memref<8x4x2x16xi8>,
                                   %vp: memref<8x4x2x16xi8>, %tables: memref<2x4xi32>,
                                   %lens: memref<2xi32>, %starts: memref<3xi32>,
                                   %ks: memref<8x4x2xf32>, %vs: memref<8x4x2xf32>,
                                   %out: memref<?x4x16xf32>) {
  xfmr.paged_attention_buffers %q, %kp, %vp, %tables, %lens, %starts
      scales(%ks, %vs : memref<8x4x2xf32>, memref<8x4x2xf32>) into %out
      {block_size = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32,
       sliding_window = 16 : i64}
      : memref<?x4x16xf32>, memref<8x4x2x16xi8>, memref<8x4x2x16xi8>, memref<2x4xi32>,
        memref<2xi32>, memref<3xi32> into memref<?x4x16xf32>
  return
}

// CHECK-LABEL: func @all_reduce
// CHECK: xfmr.all_reduce %{{.*}} : tensor<?x32xf32>
func.func @all_reduce(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %y = xfmr.all_reduce %x : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func @all_gather
// CHECK: xfmr.all_gather %{{.*}} {ranks = 2 : i64} : tensor<?x64xf32> -> tensor<?x128xf32>
func.func @all_gather(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %y = xfmr.all_gather %x {ranks = 2 : i64} : tensor<?x64xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// CHECK-LABEL: func @pipeline_stage
// CHECK: %[[H:.*]] = xfmr.stage_receive %{{.*}} : tensor<1x?x64xf32>
// CHECK: %[[L:.*]] = xfmr.stage_send %[[H]], %{{.*}} : tensor<1x?x64xf32> -> tensor<?x100xf32>
// CHECK: xfmr.stage_broadcast %[[L]] : tensor<?x100xf32>
func.func @pipeline_stage(%tokens: index, %rows: index) -> tensor<?x100xf32> {
  %h = xfmr.stage_receive %tokens : tensor<1x?x64xf32>
  %l = xfmr.stage_send %h, %rows : tensor<1x?x64xf32> -> tensor<?x100xf32>
  %b = xfmr.stage_broadcast %l : tensor<?x100xf32>
  return %b : tensor<?x100xf32>
}
