// RUN: xfmr-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of every xfmr op. Each starts from a valid op
// and breaks one thing; the comment says which invariant it protects.

// The query must carry batch, heads, length and head dim.
func.func @attention_query_rank(%q: tensor<8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op query must have rank 4 [B, Hq, Sq, D], got rank 3}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The key must be 4-D like the query.
func.func @attention_key_rank(%q: tensor<2x8x16x64xf32>, %k: tensor<2x16x64xf32>,
                              %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op key must have rank 4 [B, Hkv, Skv, D], got rank 3}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The value must be 4-D like the query.
func.func @attention_value_rank(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                %v: tensor<1x2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op value must have rank 4 [B, Hkv, Skv, Dv], got rank 5}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<1x2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The result keeps the query's 4-D layout.
func.func @attention_result_rank(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                 %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op result must have rank 4 [B, Hq, Sq, Dv], got rank 3}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16xf32>
  return
}

// -----

// A head count of zero is meaningless.
func.func @attention_zero_heads(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op num_heads must be positive, got 0}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 0 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Negative KV head counts are rejected, not wrapped to unsigned.
func.func @attention_negative_kv_heads(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                       %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op num_kv_heads must be positive, got -2}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = -2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Every KV head must serve a whole group of query heads.
func.func @attention_heads_not_grouped(%q: tensor<2x8x16x64xf32>, %k: tensor<2x3x16x64xf32>,
                                       %v: tensor<2x3x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op num_heads (8) must be a multiple of num_kv_heads (3)}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 3 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x3x16x64xf32>,
        tensor<2x3x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The query's head dim 1 must agree with num_heads.
func.func @attention_query_heads(%q: tensor<2x4x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                 %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op query dim 1 is 4 but num_heads is 8}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x4x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x4x16x64xf32>
  return
}

// -----

// The key's head dim 1 must agree with num_kv_heads.
func.func @attention_key_heads(%q: tensor<2x8x16x64xf32>, %k: tensor<2x4x16x64xf32>,
                               %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op key dim 1 is 4 but num_kv_heads is 2}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x4x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The value's head dim 1 must agree with num_kv_heads.
func.func @attention_value_heads(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                 %v: tensor<2x4x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op value dim 1 is 4 but num_kv_heads is 2}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x4x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Query and key must have the same batch.
func.func @attention_key_batch(%q: tensor<2x8x16x64xf32>, %k: tensor<3x2x16x64xf32>,
                               %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op batch mismatch: key dim 0 is 3 but query dim 0 is 2}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<3x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Query and value must have the same batch.
func.func @attention_value_batch(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                 %v: tensor<3x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op batch mismatch: value dim 0 is 3 but query dim 0 is 2}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<3x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Every key needs a value: Skv must agree.
func.func @attention_kv_length(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                               %v: tensor<2x2x8x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op key/value length mismatch: value dim 2 is 8 but key dim 2 is 16}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x8x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// q · kᵀ contracts D: query and key head dims must agree.
func.func @attention_head_dim(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x32xf32>,
                              %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op head dim mismatch: key dim 3 is 32 but query dim 3 is 64}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x32xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The result has one row per query position.
func.func @attention_result_length(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                   %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op result shape mismatch: result dim 2 is 8 but query dim 2 is 16}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x8x64xf32>
  return
}

// -----

// The result's last dim is the value head dim Dv.
func.func @attention_result_value_dim(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                      %v: tensor<2x2x16x32xf32>) {
  // expected-error @+1 {{'xfmr.attention' op result shape mismatch: result dim 3 is 64 but value dim 3 is 32}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x32xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// The result has the query's element type.
func.func @attention_result_element_type(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                         %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op result element type 'f16' must match query element type 'f32'}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf16>
  return
}

// -----

// A rank-1 mask cannot cover the [Sq, Skv] score plane.
func.func @attention_mask_rank(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                               %v: tensor<2x2x16x64xf32>, %mask: tensor<16xi1>) {
  // expected-error @+1 {{'xfmr.attention' op mask must have rank 2 to 4 to broadcast to [B, Hq, Sq, Skv], got rank 1}}
  %0 = xfmr.attention %q, %k, %v mask %mask
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<16xi1> -> tensor<2x8x16x64xf32>
  return
}

// -----

// A rank-4 mask's dim 1 broadcasts against the query heads.
func.func @attention_mask_heads(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                %v: tensor<2x2x16x64xf32>, %mask: tensor<2x4x16x16xi1>) {
  // expected-error @+1 {{'xfmr.attention' op mask dim 1 is 4 but must be 1 or 8 (query dim 1) to broadcast to [B, Hq, Sq, Skv]}}
  %0 = xfmr.attention %q, %k, %v mask %mask
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x4x16x16xi1> -> tensor<2x8x16x64xf32>
  return
}

// -----

// A rank-2 mask is right-aligned: its last dim is Skv (key dim 2).
func.func @attention_mask_key_length(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                     %v: tensor<2x2x16x64xf32>, %mask: tensor<16x15xf32>) {
  // expected-error @+1 {{'xfmr.attention' op mask dim 1 is 15 but must be 1 or 16 (key dim 2) to broadcast to [B, Hq, Sq, Skv]}}
  %0 = xfmr.attention %q, %k, %v mask %mask
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<16x15xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Masks are i1 (keep) or an additive float bias, not integers.
func.func @attention_mask_element_type(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                       %v: tensor<2x2x16x64xf32>, %mask: tensor<16x16xi32>) {
  // expected-error @+1 {{'xfmr.attention' op operand #3 must be ranked tensor of 1-bit signless integer or floating-point values, but got 'tensor<16x16xi32>'}}
  %0 = xfmr.attention %q, %k, %v mask %mask
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<16x16xi32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// There is no last dim to normalize in a 0-D tensor.
func.func @rms_norm_scalar_input(%x: tensor<f32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.rms_norm' op input must have rank >= 1, got rank 0}}
  %0 = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<f32>, tensor<64xf32>
  return
}

// -----

// The weight is one scale per feature.
func.func @rms_norm_weight_rank(%x: tensor<4x64xf32>, %w: tensor<1x64xf32>) {
  // expected-error @+1 {{'xfmr.rms_norm' op weight must have rank 1 [H], got rank 2}}
  %0 = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<4x64xf32>, tensor<1x64xf32>
  return
}

// -----

// The weight scales the last dim of the input.
func.func @rms_norm_weight_size(%x: tensor<4x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'xfmr.rms_norm' op normalized size mismatch: weight dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<4x64xf32>, tensor<32xf32>
  return
}

// -----

// A negative epsilon can take the root of a negative number.
func.func @rms_norm_negative_epsilon(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.rms_norm' op epsilon must be non-negative}}
  %0 = xfmr.rms_norm %x, %w {epsilon = -1.0 : f32} : tensor<4x64xf32>, tensor<64xf32>
  return
}

// -----

// Norms compute on floats.
func.func @rms_norm_integer_input(%x: tensor<4x64xi32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.rms_norm' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<4x64xi32>'}}
  %0 = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<4x64xi32>, tensor<64xf32>
  return
}

// -----

// The result has the input's type (generic form to spell a different one).
func.func @rms_norm_result_type(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.rms_norm' op failed to verify that all of {input, result} have same type}}
  %0 = "xfmr.rms_norm"(%x, %w) <{epsilon = 1.0e-05 : f32}>
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf16>
  return
}

// -----

// There is no last dim to normalize in a 0-D tensor.
func.func @layer_norm_scalar_input(%x: tensor<f32>, %w: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op input must have rank >= 1, got rank 0}}
  %0 = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : tensor<f32>, tensor<64xf32>, tensor<64xf32>
  return
}

// -----

// The weight is one scale per feature.
func.func @layer_norm_weight_rank(%x: tensor<4x64xf32>, %w: tensor<1x64xf32>,
                                  %b: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op weight must have rank 1 [H], got rank 2}}
  %0 = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : tensor<4x64xf32>, tensor<1x64xf32>, tensor<64xf32>
  return
}

// -----

// The weight scales the last dim of the input.
func.func @layer_norm_weight_size(%x: tensor<4x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op normalized size mismatch: weight dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.layer_norm %x, %w {epsilon = 1.0e-05 : f32}
      : tensor<4x64xf32>, tensor<32xf32>
  return
}

// -----

// The bias is one offset per feature.
func.func @layer_norm_bias_rank(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %b: tensor<f32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op bias must have rank 1 [H], got rank 0}}
  %0 = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : tensor<4x64xf32>, tensor<64xf32>, tensor<f32>
  return
}

// -----

// The bias shifts the last dim of the input.
func.func @layer_norm_bias_size(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op normalized size mismatch: bias dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : tensor<4x64xf32>, tensor<64xf32>, tensor<32xf32>
  return
}

// -----

// A negative epsilon can take the root of a negative number.
func.func @layer_norm_negative_epsilon(%x: tensor<4x64xf32>, %w: tensor<64xf32>,
                                       %b: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op epsilon must be non-negative}}
  %0 = xfmr.layer_norm %x, %w, %b {epsilon = -1.0e-05 : f32}
      : tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>
  return
}

// -----

// The result has the input's type (generic form to spell a different one).
func.func @layer_norm_result_type(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.layer_norm' op failed to verify that all of {input, result} have same type}}
  %0 = "xfmr.layer_norm"(%x, %w) <{epsilon = 1.0e-05 : f32}>
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x32xf32>
  return
}

// -----

// RoPE works on [B, H, S, D] activations.
func.func @rope_input_rank(%x: tensor<8x16x64xf32>, %cos: tensor<16x32xf32>,
                           %sin: tensor<16x32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op input must have rank 4 [B, H, S, D], got rank 3}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return
}

// -----

// Features rotate in pairs.
func.func @rope_odd_rotary_dim(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x32xf32>,
                               %sin: tensor<16x32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op rotary_dim must be positive and even, got 7}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 7 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return
}

// -----

// A rotation of no features is not a rotary embedding.
func.func @rope_zero_rotary_dim(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x32xf32>,
                                %sin: tensor<16x32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op rotary_dim must be positive and even, got 0}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 0 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
  return
}

// -----

// Only features that exist can rotate.
func.func @rope_rotary_dim_too_large(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x64xf32>,
                                     %sin: tensor<16x64xf32>) {
  // expected-error @+1 {{'xfmr.rope' op rotary_dim is 128 but input dim 3 (head dim) is only 64}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 128 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
  return
}

// -----

// cos and sin describe the same angles.
func.func @rope_cos_sin_types(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x32xf32>,
                              %sin: tensor<16x16xf32>) {
  // expected-error @+1 {{'xfmr.rope' op cos and sin must have the same type, got 'tensor<16x32xf32>' and 'tensor<16x16xf32>'}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x16xf32>
  return
}

// -----

// The tables are [S, R] or [B or 1, S, R].
func.func @rope_cos_rank(%x: tensor<2x8x16x64xf32>, %cos: tensor<32xf32>,
                         %sin: tensor<32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op cos must have rank 2 [S, R] or 3 [B or 1, S, R] with R = rotary_dim / 2, got rank 1}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<32xf32>, tensor<32xf32>
  return
}

// -----

// 3-D tables are per batch element or shared (1).
func.func @rope_cos_batch(%x: tensor<2x8x16x64xf32>, %cos: tensor<3x16x32xf32>,
                          %sin: tensor<3x16x32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op cos dim 0 is 3 but must be 1 or 2 (input dim 0)}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<3x16x32xf32>, tensor<3x16x32xf32>
  return
}

// -----

// One angle row per position of the input.
func.func @rope_cos_length(%x: tensor<2x8x16x64xf32>, %cos: tensor<8x32xf32>,
                           %sin: tensor<8x32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op sequence length mismatch: cos dim 0 is 8 but input dim 2 is 16}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<8x32xf32>, tensor<8x32xf32>
  return
}

// -----

// One angle per rotated pair.
func.func @rope_cos_pairs(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x16xf32>,
                          %sin: tensor<16x16xf32>) {
  // expected-error @+1 {{'xfmr.rope' op cos dim 1 is 16 but must be rotary_dim / 2 = 32}}
  %0 = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
      : tensor<2x8x16x64xf32>, tensor<16x16xf32>, tensor<16x16xf32>
  return
}

// -----

// The result has the input's type (generic form to spell a different one).
func.func @rope_result_type(%x: tensor<2x8x16x64xf32>, %cos: tensor<16x32xf32>,
                            %sin: tensor<16x32xf32>) {
  // expected-error @+1 {{'xfmr.rope' op failed to verify that all of {input, result} have same type}}
  %0 = "xfmr.rope"(%x, %cos, %sin) <{rotary_dim = 64 : i64}>
      : (tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<2x8x16x64xf16>
  return
}

// -----

// There is no K dim to contract in a 0-D input.
func.func @linear_scalar_input(%x: tensor<f16>, %w: tensor<64x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op input must have rank >= 1, got rank 0}}
  %0 = xfmr.linear %x, %w
      : tensor<f16>, tensor<64x128xf16> -> tensor<4x128xf16>
  return
}

// -----

// The weight is a [K, N] matrix.
func.func @linear_weight_rank(%x: tensor<4x64xf16>, %w: tensor<64xf16>) {
  // expected-error @+1 {{'xfmr.linear' op weight must have rank 2 [K, N], got rank 1}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<64xf16> -> tensor<4x128xf16>
  return
}

// -----

// Only uniform quantization has the scales the kernels multiply by.
func.func @linear_quant_not_uniform(%x: tensor<4x2xf32>, %w: tensor<2x2x!quant.any<i8:f32>>) {
  // expected-error @+1 {{'xfmr.linear' op quantized weight must be !quant.uniform (per tensor or per axis), got '!quant.any<i8:f32>'}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf32>, tensor<2x2x!quant.any<i8:f32>> -> tensor<4x2xf32>
  return
}

// -----

// A quantized weight's scales are per output channel: quantized along dim 1.
func.func @linear_quant_axis(%x: tensor<4x2xf32>, %w: tensor<2x2x!quant.uniform<i8:f32:0, {0.5, 0.25}>>) {
  // expected-error @+1 {{'xfmr.linear' op per-axis quantized weight must be quantized along dim 1 (output channels), got dim 0}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf32>, tensor<2x2x!quant.uniform<i8:f32:0, {0.5, 0.25}>> -> tensor<4x2xf32>
  return
}

// -----

// One scale per output channel.
func.func @linear_quant_scales(%x: tensor<4x2xf32>, %w: tensor<2x3x!quant.uniform<i8:f32:1, {0.5, 0.25}>>) {
  // expected-error @+1 {{'xfmr.linear' op per-axis quantized weight has 2 scales for 3 output channels}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf32>, tensor<2x3x!quant.uniform<i8:f32:1, {0.5, 0.25}>> -> tensor<4x3xf32>
  return
}

// -----

// Per-channel weights are symmetric too: no channel may have a zero point.
func.func @linear_quant_axis_zero_point(%x: tensor<4x2xf32>, %w: tensor<2x2x!quant.uniform<i8:f32:1, {0.5, 0.25:3}>>) {
  // expected-error @+1 {{'xfmr.linear' op quantized weight must be symmetric (zero points 0)}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf32>, tensor<2x2x!quant.uniform<i8:f32:1, {0.5, 0.25:3}>> -> tensor<4x2xf32>
  return
}

// -----

// Quantized weights are symmetric: the lowering multiplies by the scale
// after the sum and subtracts no zero point.
func.func @linear_quant_zero_point(%x: tensor<4x2xf32>, %w: tensor<2x2x!quant.uniform<i8:f32, 0.5:3>>) {
  // expected-error @+1 {{'xfmr.linear' op quantized weight must be symmetric (zero point 0)}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf32>, tensor<2x2x!quant.uniform<i8:f32, 0.5:3>> -> tensor<4x2xf32>
  return
}

// -----

// The dequantized weight is in the input's element type.
func.func @linear_quant_expressed(%x: tensor<4x2xf16>, %w: tensor<2x2x!quant.uniform<i8:f32, 0.5>>) {
  // expected-error @+1 {{'xfmr.linear' op quantized weight's expressed type 'f32' is not the input's element type 'f16'}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf16>, tensor<2x2x!quant.uniform<i8:f32, 0.5>> -> tensor<4x2xf16>
  return
}

// -----

// Unsigned storage would need a zero point; the kernels read signed bytes.
func.func @linear_quant_unsigned(%x: tensor<4x2xf32>, %w: tensor<2x2x!quant.uniform<u8:f32, 0.5>>) {
  // expected-error @+1 {{'xfmr.linear' op quantized weight must have signed storage of at most 8 bits, got 'i8'}}
  %0 = xfmr.linear %x, %w
      : tensor<4x2xf32>, tensor<2x2x!quant.uniform<u8:f32, 0.5>> -> tensor<4x2xf32>
  return
}

// -----

// int8_activations multiplies int8 rows by 8-bit weights.
func.func @linear_int8_activations_float(%x: tensor<4x2xf32>, %w: tensor<2x2xf32>) {
  // expected-error @+1 {{'xfmr.linear' op int8_activations needs a quantized (!quant.uniform) weight}}
  %0 = xfmr.linear %x, %w {int8_activations}
      : tensor<4x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @linear_int8_activations_i4(%x: tensor<4x2xf32>, %w: tensor<2x2x!quant.uniform<i4:f32, 0.5>>) {
  // expected-error @+1 {{'xfmr.linear' op int8_activations needs 8-bit weight storage}}
  %0 = xfmr.linear %x, %w {int8_activations}
      : tensor<4x2xf32>, tensor<2x2x!quant.uniform<i4:f32, 0.5>> -> tensor<4x2xf32>
  return
}

// -----

// x · W contracts the input's last dim with the weight's dim 0.
func.func @linear_reduction_size(%x: tensor<4x64xf16>, %w: tensor<32x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op reduction size mismatch: weight dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<32x128xf16> -> tensor<4x128xf16>
  return
}

// -----

// The bias is one value per output feature.
func.func @linear_bias_rank(%x: tensor<4x64xf16>, %w: tensor<64x128xf16>,
                            %b: tensor<1x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op bias must have rank 1 [N], got rank 2}}
  %0 = xfmr.linear %x, %w, %b
      : tensor<4x64xf16>, tensor<64x128xf16>, tensor<1x128xf16> -> tensor<4x128xf16>
  return
}

// -----

// The bias is added to each of the N outputs.
func.func @linear_bias_size(%x: tensor<4x64xf16>, %w: tensor<64x128xf16>, %b: tensor<64xf16>) {
  // expected-error @+1 {{'xfmr.linear' op output size mismatch: bias dim 0 is 64 but weight dim 1 is 128}}
  %0 = xfmr.linear %x, %w, %b
      : tensor<4x64xf16>, tensor<64x128xf16>, tensor<64xf16> -> tensor<4x128xf16>
  return
}

// -----

// The result keeps the input's leading dims.
func.func @linear_result_rank(%x: tensor<4x64xf16>, %w: tensor<64x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op result must have rank 2 (the input's), got rank 3}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<64x128xf16> -> tensor<1x4x128xf16>
  return
}

// -----

// The result keeps the input's leading dims.
func.func @linear_result_leading_dims(%x: tensor<4x64xf16>, %w: tensor<64x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op result shape mismatch: result dim 0 is 8 but input dim 0 is 4}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
  return
}

// -----

// The result's last dim is the weight's N.
func.func @linear_result_output_dim(%x: tensor<4x64xf16>, %w: tensor<64x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op result shape mismatch: result dim 1 is 64 but weight dim 1 is 128}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<64x128xf16> -> tensor<4x64xf16>
  return
}

// -----

// The result has the input's element type, whatever the weight's.
func.func @linear_result_element_type(%x: tensor<4x64xf16>, %w: tensor<64x128xf16>) {
  // expected-error @+1 {{'xfmr.linear' op result element type 'f32' must match input element type 'f16'}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<64x128xf16> -> tensor<4x128xf32>
  return
}

// -----

// Weights are integers or floats, not indices.
func.func @linear_index_weight(%x: tensor<4x64xf16>, %w: tensor<64x128xindex>) {
  // expected-error @+1 {{'xfmr.linear' op operand #1 must be ranked tensor of integer or floating-point or quantized type values, but got 'tensor<64x128xindex>'}}
  %0 = xfmr.linear %x, %w
      : tensor<4x64xf16>, tensor<64x128xindex> -> tensor<4x128xf16>
  return
}

// -----

// There is no hidden dim in a 0-D input.
func.func @gated_mlp_scalar_input(%x: tensor<f32>, %wg: tensor<64x256xf32>,
                                  %wu: tensor<64x256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op input must have rank >= 1, got rank 0}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<f32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<256x64xf32>
  return
}

// -----

// The gate projection is an [H, I] matrix.
func.func @gated_mlp_gate_rank(%x: tensor<4x64xf32>, %wg: tensor<64x256x1xf32>,
                               %wu: tensor<64x256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op w_gate must have rank 2 [H, I], got rank 3}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256x1xf32>, tensor<64x256xf32>, tensor<256x64xf32>
  return
}

// -----

// The up projection is an [H, I] matrix.
func.func @gated_mlp_up_rank(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                             %wu: tensor<256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op w_up must have rank 2 [H, I], got rank 1}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<256xf32>, tensor<256x64xf32>
  return
}

// -----

// The down projection is an [I, H] matrix.
func.func @gated_mlp_down_rank(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                               %wu: tensor<64x256xf32>, %wd: tensor<256xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op w_down must have rank 2 [I, H], got rank 1}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<256xf32>
  return
}

// -----

// The gate projection contracts the input's hidden dim.
func.func @gated_mlp_gate_hidden(%x: tensor<4x64xf32>, %wg: tensor<32x256xf32>,
                                 %wu: tensor<64x256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op hidden size mismatch: w_gate dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<32x256xf32>, tensor<64x256xf32>, tensor<256x64xf32>
  return
}

// -----

// The up projection contracts the input's hidden dim.
func.func @gated_mlp_up_hidden(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                               %wu: tensor<32x256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op hidden size mismatch: w_up dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<32x256xf32>, tensor<256x64xf32>
  return
}

// -----

// The down projection maps back to the hidden size.
func.func @gated_mlp_down_hidden(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                                 %wu: tensor<64x256xf32>, %wd: tensor<256x32xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op hidden size mismatch: w_down dim 1 is 32 but input dim 1 is 64}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<256x32xf32>
  return
}

// -----

// Gate and up are multiplied elementwise: same I.
func.func @gated_mlp_up_intermediate(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                                     %wu: tensor<64x128xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op intermediate size mismatch: w_up dim 1 is 128 but w_gate dim 1 is 256}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<64x128xf32>, tensor<256x64xf32>
  return
}

// -----

// The down projection contracts I.
func.func @gated_mlp_down_intermediate(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                                       %wu: tensor<64x256xf32>, %wd: tensor<128x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op intermediate size mismatch: w_down dim 0 is 128 but w_gate dim 1 is 256}}
  %0 = xfmr.gated_mlp silu %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<128x64xf32>
  return
}

// -----

// Only the enum's activations parse; the parser reports the keyword and then
// the property.
func.func @gated_mlp_unknown_activation(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                                        %wu: tensor<64x256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+2 {{expected one of [silu, gelu, gelu_tanh, relu] for gated MLP activation, got: swish}}
  // expected-error @+1 {{invalid value for property activation, expected gated MLP activation}}
  %0 = xfmr.gated_mlp swish %x, %wg, %wu, %wd
      : tensor<4x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<256x64xf32>
  return
}

// -----

// The result has the input's type (generic form to spell a different one).
func.func @gated_mlp_result_type(%x: tensor<4x64xf32>, %wg: tensor<64x256xf32>,
                                 %wu: tensor<64x256xf32>, %wd: tensor<256x64xf32>) {
  // expected-error @+1 {{'xfmr.gated_mlp' op failed to verify that all of {input, result} have same type}}
  %0 = "xfmr.gated_mlp"(%x, %wg, %wu, %wd) <{activation = 0 : i32}>
      : (tensor<4x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>, tensor<256x64xf32>)
      -> tensor<4x64xf16>
  return
}

// -----

// The table is [V, H].
func.func @embedding_table_rank(%table: tensor<64xf16>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'xfmr.embedding' op table must have rank 2 [V, H], got rank 1}}
  %0 = xfmr.embedding %table, %ids : tensor<64xf16>, tensor<2x16xi64> -> tensor<2x16x64xf16>
  return
}

// -----

// Each id becomes one row: the result is the ids' shape plus H.
func.func @embedding_result_rank(%table: tensor<100x64xf16>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'xfmr.embedding' op result must have rank 3 (the ids' rank + 1), got rank 2}}
  %0 = xfmr.embedding %table, %ids : tensor<100x64xf16>, tensor<2x16xi64> -> tensor<2x64xf16>
  return
}

// -----

// The result's leading dims are the ids' shape.
func.func @embedding_result_ids_shape(%table: tensor<100x64xf16>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'xfmr.embedding' op result shape mismatch: result dim 1 is 8 but ids dim 1 is 16}}
  %0 = xfmr.embedding %table, %ids : tensor<100x64xf16>, tensor<2x16xi64> -> tensor<2x8x64xf16>
  return
}

// -----

// The result's last dim is the table's H.
func.func @embedding_result_hidden(%table: tensor<100x64xf16>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'xfmr.embedding' op result shape mismatch: result dim 2 is 32 but table dim 1 is 64}}
  %0 = xfmr.embedding %table, %ids : tensor<100x64xf16>, tensor<2x16xi64> -> tensor<2x16x32xf16>
  return
}

// -----

// Rows are copied, or a 16-bit table widened to f32; nothing narrower.
func.func @embedding_result_element_type(%table: tensor<100x64xf32>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'xfmr.embedding' op result element type 'f16' must match table element type 'f32'}}
  %0 = xfmr.embedding %table, %ids : tensor<100x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf16>
  return
}

// -----

// An int8 table is scaled row by row.
func.func @embedding_int8_without_scales(%table: tensor<100x64xi8>, %ids: tensor<2x16xi64>) {
  // expected-error @+1 {{'xfmr.embedding' op an i8 table needs scales (one per row)}}
  %0 = xfmr.embedding %table, %ids : tensor<100x64xi8>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  return
}

// -----

func.func @embedding_scales_of_float_table(%table: tensor<100x64xf32>, %ids: tensor<2x16xi64>, %s: tensor<100xf32>) {
  // expected-error @+1 {{'xfmr.embedding' op scales go with an i8 table and an f32 result, got 'tensor<100x64xf32>' -> 'tensor<2x16x64xf32>'}}
  %0 = xfmr.embedding %table, %ids scales(%s : tensor<100xf32>) : tensor<100x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  return
}

// -----

func.func @embedding_scales_per_row(%table: tensor<100x64xi8>, %ids: tensor<2x16xi64>, %s: tensor<64xf32>) {
  // expected-error @+1 {{'xfmr.embedding' op scales shape mismatch: scales dim 0 is 64 but table dim 0 is 100}}
  %0 = xfmr.embedding %table, %ids scales(%s : tensor<64xf32>) : tensor<100x64xi8>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  return
}

// -----

// Ids index the table: they must be integers.
func.func @embedding_float_ids(%table: tensor<100x64xf16>, %ids: tensor<2x16xf32>) {
  // expected-error @+1 {{'xfmr.embedding' op operand #1 must be ranked tensor of signless integer values, but got 'tensor<2x16xf32>'}}
  %0 = xfmr.embedding %table, %ids : tensor<100x64xf16>, tensor<2x16xf32> -> tensor<2x16x64xf16>
  return
}

// -----

// MoE routes a flat list of tokens.
func.func @moe_input_rank(%x: tensor<2x16x64xf32>, %router: tensor<64x8xf32>,
                          %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                          %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op input must have rank 2 [T, H], got rank 3}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<2x16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// int8 experts carry their scales.
func.func @moe_i8_without_scales(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                                 %wg: tensor<8x64x128xi8>, %wu: tensor<8x64x128xi8>,
                                 %wd: tensor<8x128x64xi8>) {
  // expected-error @+1 {{'xfmr.moe' op i8 and f8E4M3FN expert weights need scales}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xi8>, tensor<8x64x128xi8>,
        tensor<8x128x64xi8>
  return
}

// -----

// One scale per expert and output column.
func.func @moe_scale_shape(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xi8>, %wu: tensor<8x64x128xi8>,
                           %wd: tensor<8x128x64xi8>, %s1: tensor<8x128xf32>,
                           %s3: tensor<8x128xf32>) {
  // expected-error @+1 {{'xfmr.moe' op w_down scales must be [8, 64] (one per expert and output column), got 'tensor<8x128xf32>'}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd
      scales(%s1, %s1, %s3 : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>) {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xi8>, tensor<8x64x128xi8>,
        tensor<8x128x64xi8>
  return
}

// -----

// All three expert weights share one element type.
func.func @moe_mixed_types(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xbf16>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op w_gate, w_up and w_down have different element types}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xbf16>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert weights are the input's type, bf16 (rounded) or 8-bit with scales;
// no kernel reads f16 experts under an f32 input.
func.func @moe_f16_experts(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xf16>, %wu: tensor<8x64x128xf16>,
                           %wd: tensor<8x128x64xf16>) {
  // expected-error @+1 {{'xfmr.moe' op expert weights of type 'f16' are neither the input's type, bf16, i8 nor f8E4M3FN}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf16>, tensor<8x64x128xf16>,
        tensor<8x128x64xf16>
  return
}

// -----

// Scales dequantize 8-bit experts; on float experts nothing would read them.
func.func @moe_scales_on_float(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                               %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                               %wd: tensor<8x128x64xf32>, %s1: tensor<8x128xf32>,
                               %s3: tensor<8x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op scales need i8 or f8E4M3FN expert weights}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd
      scales(%s1, %s1, %s3 : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x64xf32>) {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The router is an [H, E] matrix.
func.func @moe_router_rank(%x: tensor<16x64xf32>, %router: tensor<64xf32>,
                           %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op router must have rank 2 [H, E], got rank 1}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert weights are stacked over E.
func.func @moe_gate_rank(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                         %wg: tensor<64x128xf32>, %wu: tensor<8x64x128xf32>,
                         %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op w_gate must have rank 3 [E, H, I], got rank 2}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert weights are stacked over E.
func.func @moe_up_rank(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                       %wg: tensor<8x64x128xf32>, %wu: tensor<64x128xf32>,
                       %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op w_up must have rank 3 [E, H, I], got rank 2}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert weights are stacked over E.
func.func @moe_down_rank(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                         %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                         %wd: tensor<128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op w_down must have rank 3 [E, I, H], got rank 2}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<128x64xf32>
  return
}

// -----

// Every token goes to at least one expert.
func.func @moe_zero_top_k(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                          %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                          %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op top_k must be positive, got 0}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 0 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// A token cannot pick more experts than exist.
func.func @moe_top_k_too_large(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                               %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                               %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op top_k is 16 but router dim 1 (experts) is only 8}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 16 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The router contracts the hidden dim.
func.func @moe_router_hidden(%x: tensor<16x64xf32>, %router: tensor<32x8xf32>,
                             %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                             %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op hidden size mismatch: router dim 0 is 32 but input dim 1 is 64}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<32x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert gate projections contract the hidden dim.
func.func @moe_gate_hidden(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x32x128xf32>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op hidden size mismatch: w_gate dim 1 is 32 but input dim 1 is 64}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x32x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert up projections contract the hidden dim.
func.func @moe_up_hidden(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                         %wg: tensor<8x64x128xf32>, %wu: tensor<8x32x128xf32>,
                         %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op hidden size mismatch: w_up dim 1 is 32 but input dim 1 is 64}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x32x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Expert down projections map back to the hidden size.
func.func @moe_down_hidden(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x32xf32>) {
  // expected-error @+1 {{'xfmr.moe' op hidden size mismatch: w_down dim 2 is 32 but input dim 1 is 64}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x32xf32>
  return
}

// -----

// One gate projection per routed expert.
func.func @moe_gate_experts(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                            %wg: tensor<4x64x128xf32>, %wu: tensor<8x64x128xf32>,
                            %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op expert count mismatch: w_gate dim 0 is 4 but router dim 1 is 8}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<4x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// One up projection per routed expert.
func.func @moe_up_experts(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                          %wg: tensor<8x64x128xf32>, %wu: tensor<4x64x128xf32>,
                          %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op expert count mismatch: w_up dim 0 is 4 but router dim 1 is 8}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<4x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// One down projection per routed expert.
func.func @moe_down_experts(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                            %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                            %wd: tensor<4x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op expert count mismatch: w_down dim 0 is 4 but router dim 1 is 8}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<4x128x64xf32>
  return
}

// -----

// Gate and up are multiplied elementwise: same I.
func.func @moe_up_intermediate(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                               %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x64xf32>,
                               %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op intermediate size mismatch: w_up dim 2 is 64 but w_gate dim 2 is 128}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x64xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The down projection contracts I.
func.func @moe_down_intermediate(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                                 %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                                 %wd: tensor<8x64x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op intermediate size mismatch: w_down dim 1 is 64 but w_gate dim 2 is 128}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x64x64xf32>
  return
}

// -----

// The result has the input's type (generic form to spell a different one).
func.func @moe_result_type(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op failed to verify that all of {input, result} have same type}}
  %0 = "xfmr.moe"(%x, %router, %wg, %wu, %wd) <{activation = 0 : i32, top_k = 2 : i64,
                                                operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}>
      : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
         tensor<8x128x64xf32>) -> tensor<16x32xf32>
  return
}

// -----

// Packed queries are [T, Hq, D].
func.func @paged_attention_query_rank(%q: tensor<10x512xf32>, %kp: tensor<128x16x2x64xf32>,
                                      %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                      %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op query must have rank 3 [T, Hq, D], got rank 2}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x512xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// A sliding window holds at least one key (the token's own).
func.func @paged_attention_window(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                  %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                  %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op sliding_window must be positive, got 0}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32,
       sliding_window = 0 : i64}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The key pool is a stack of blocks.
func.func @paged_attention_key_pool_rank(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x128xf32>,
                                         %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                         %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op key_pool must have rank 4 [num_blocks, block_size, Hkv, D], got rank 3}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x128xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The value pool is a stack of blocks.
func.func @paged_attention_value_pool_rank(%q: tensor<10x8x64xf32>,
                                           %kp: tensor<128x16x2x64xf32>,
                                           %vp: tensor<128x16x128xf32>, %bt: tensor<4x32xi32>,
                                           %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op value_pool must have rank 4 [num_blocks, block_size, Hkv, D], got rank 3}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x128xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// One row of block ids per sequence.
func.func @paged_attention_block_tables_rank(%q: tensor<10x8x64xf32>,
                                             %kp: tensor<128x16x2x64xf32>,
                                             %vp: tensor<128x16x2x64xf32>, %bt: tensor<128xi32>,
                                             %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op block_tables must have rank 2 [num_seqs, max_blocks], got rank 1}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<128xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// One length per sequence.
func.func @paged_attention_context_lens_rank(%q: tensor<10x8x64xf32>,
                                             %kp: tensor<128x16x2x64xf32>,
                                             %vp: tensor<128x16x2x64xf32>,
                                             %bt: tensor<4x32xi32>, %cl: tensor<4x1xi32>,
                                             %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op context_lens must have rank 1 [num_seqs], got rank 2}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4x1xi32>, tensor<5xi32>
  return
}

// -----

// Query offsets are a flat cumulative list.
func.func @paged_attention_query_start_loc_rank(%q: tensor<10x8x64xf32>,
                                                %kp: tensor<128x16x2x64xf32>,
                                                %vp: tensor<128x16x2x64xf32>,
                                                %bt: tensor<4x32xi32>, %cl: tensor<4xi32>,
                                                %qsl: tensor<5x1xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op query_start_loc must have rank 1 [num_seqs + 1], got rank 2}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5x1xi32>
  return
}

// -----

// A head count of zero is meaningless.
func.func @paged_attention_zero_heads(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                      %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                      %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op num_heads must be positive, got 0}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 0 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// A KV head count of zero is meaningless.
func.func @paged_attention_zero_kv_heads(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                         %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                         %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op num_kv_heads must be positive, got 0}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 0 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// Every KV head must serve a whole group of query heads.
func.func @paged_attention_heads_not_grouped(%q: tensor<10x8x64xf32>,
                                             %kp: tensor<128x16x3x64xf32>,
                                             %vp: tensor<128x16x3x64xf32>,
                                             %bt: tensor<4x32xi32>, %cl: tensor<4xi32>,
                                             %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op num_heads (8) must be a multiple of num_kv_heads (3)}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 3 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x3x64xf32>, tensor<128x16x3x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// Positions map to blocks by division by block_size.
func.func @paged_attention_zero_block_size(%q: tensor<10x8x64xf32>,
                                           %kp: tensor<128x16x2x64xf32>,
                                           %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                           %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op block_size must be positive, got 0}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 0 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The query's dim 1 must agree with num_heads.
func.func @paged_attention_query_heads(%q: tensor<10x4x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                       %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                       %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op query dim 1 is 4 but num_heads is 8}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x4x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The key pool's dim 2 must agree with num_kv_heads.
func.func @paged_attention_key_pool_heads(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x4x64xf32>,
                                          %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                          %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op key_pool dim 2 is 4 but num_kv_heads is 2}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x4x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The value pool's dim 2 must agree with num_kv_heads.
func.func @paged_attention_value_pool_heads(%q: tensor<10x8x64xf32>,
                                            %kp: tensor<128x16x2x64xf32>,
                                            %vp: tensor<128x16x4x64xf32>, %bt: tensor<4x32xi32>,
                                            %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op value_pool dim 2 is 4 but num_kv_heads is 2}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x4x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The key pool's dim 1 is the block size.
func.func @paged_attention_key_pool_block_size(%q: tensor<10x8x64xf32>,
                                               %kp: tensor<128x32x2x64xf32>,
                                               %vp: tensor<128x16x2x64xf32>,
                                               %bt: tensor<4x32xi32>, %cl: tensor<4xi32>,
                                               %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op key_pool dim 1 is 32 but block_size is 16}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x32x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The value pool's dim 1 is the block size.
func.func @paged_attention_value_pool_block_size(%q: tensor<10x8x64xf32>,
                                                 %kp: tensor<128x16x2x64xf32>,
                                                 %vp: tensor<128x32x2x64xf32>,
                                                 %bt: tensor<4x32xi32>, %cl: tensor<4xi32>,
                                                 %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op value_pool dim 1 is 32 but block_size is 16}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x32x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// Block ids index both pools.
func.func @paged_attention_block_count(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                       %vp: tensor<64x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                       %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op block count mismatch: value_pool dim 0 is 64 but key_pool dim 0 is 128}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<64x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// q · kᵀ contracts D.
func.func @paged_attention_key_head_dim(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x32xf32>,
                                        %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                        %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op head dim mismatch: key_pool dim 3 is 32 but query dim 2 is 64}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x32xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The result has the query's type, so Dv = D.
func.func @paged_attention_value_head_dim(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                          %vp: tensor<128x16x2x32xf32>, %bt: tensor<4x32xi32>,
                                          %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op head dim mismatch: value_pool dim 3 is 32 but query dim 2 is 64}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x32xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// One context length per block table row.
func.func @paged_attention_sequence_count(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                          %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                          %cl: tensor<3xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op sequence count mismatch: context_lens dim 0 is 3 but block_tables dim 0 is 4}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<3xi32>, tensor<5xi32>
  return
}

// -----

// num_seqs sequences need num_seqs + 1 offsets.
func.func @paged_attention_query_start_loc_size(%q: tensor<10x8x64xf32>,
                                                %kp: tensor<128x16x2x64xf32>,
                                                %vp: tensor<128x16x2x64xf32>,
                                                %bt: tensor<4x32xi32>, %cl: tensor<4xi32>,
                                                %qsl: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op query_start_loc dim 0 is 4 but must be num_seqs + 1 = 5}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<4xi32>
  return
}

// -----

// num_seqs comes from context_lens when the block tables' dim 0 is dynamic.
func.func @paged_attention_query_start_loc_size_from_lens(%q: tensor<10x8x64xf32>,
                                                          %kp: tensor<128x16x2x64xf32>,
                                                          %vp: tensor<128x16x2x64xf32>,
                                                          %bt: tensor<?x32xi32>,
                                                          %cl: tensor<4xi32>,
                                                          %qsl: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op query_start_loc dim 0 is 4 but must be num_seqs + 1 = 5}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<?x32xi32>,
        tensor<4xi32>, tensor<4xi32>
  return
}

// -----

// Block tables are i32, as the kernels read them.
func.func @paged_attention_i64_block_tables(%q: tensor<10x8x64xf32>,
                                            %kp: tensor<128x16x2x64xf32>,
                                            %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi64>,
                                            %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op operand #3 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4x32xi64>'}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi64>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// The result is [T, Hq, Dv] (generic form to spell a different one).
func.func @paged_attention_result_type(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                       %vp: tensor<128x16x2x64xf32>, %bt: tensor<4x32xi32>,
                                       %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op result must be [T, Hq, Dv] of the query's element type, got 'tensor<10x8x32xf32>'}}
  %0 = "xfmr.paged_attention"(%q, %kp, %vp, %bt, %cl, %qsl)
      <{block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}>
      : (tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>, tensor<4x32xi32>,
         tensor<4xi32>, tensor<5xi32>) -> tensor<10x8x32xf32>
  return
}

// -----

// New keys are [T, Hkv, D].
func.func @kv_write_key_rank(%k: tensor<4x128xf32>, %v: tensor<4x2x64xf32>,
                             %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                             %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op key must have rank 3 [T, Hkv, D], got rank 2}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x128xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<4xi64>
  return
}

// -----

// New values are [T, Hkv, D].
func.func @kv_write_value_rank(%k: tensor<4x2x64xf32>, %v: tensor<4x128xf32>,
                               %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                               %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op value must have rank 3 [T, Hkv, D], got rank 2}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x128xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<4xi64>
  return
}

// -----

// The key pool is a stack of blocks.
func.func @kv_write_key_pool_rank(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                  %kp: tensor<128x16x128xf32>, %vp: tensor<128x16x2x64xf32>,
                                  %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op key_pool must have rank 4 [num_blocks, block_size, Hkv, D], got rank 3}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x128xf32>, tensor<128x16x2x64xf32>,
        tensor<4xi64>
  return
}

// -----

// The value pool is a stack of blocks.
func.func @kv_write_value_pool_rank(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                    %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x128xf32>,
                                    %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op value_pool must have rank 4 [num_blocks, block_size, Hkv, D], got rank 3}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x128xf32>,
        tensor<4xi64>
  return
}

// -----

// One slot per token.
func.func @kv_write_slot_mapping_rank(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                      %kp: tensor<128x16x2x64xf32>,
                                      %vp: tensor<128x16x2x64xf32>, %s: tensor<4x1xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op slot_mapping must have rank 1 [T], got rank 2}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x2x64xf32>, tensor<4x1xi64>
  return
}

// -----

// Keys and values come in pairs, one per token.
func.func @kv_write_value_tokens(%k: tensor<4x2x64xf32>, %v: tensor<3x2x64xf32>,
                                 %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                                 %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op token count mismatch: value dim 0 is 3 but key dim 0 is 4}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<3x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x2x64xf32>, tensor<4xi64>
  return
}

// -----

// Every token needs a slot.
func.func @kv_write_slot_tokens(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                                %s: tensor<3xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op token count mismatch: slot_mapping dim 0 is 3 but key dim 0 is 4}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x2x64xf32>, tensor<3xi64>
  return
}

// -----

// Keys and values have the same KV heads.
func.func @kv_write_value_heads(%k: tensor<4x2x64xf32>, %v: tensor<4x1x64xf32>,
                                %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                                %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op head count mismatch: value dim 1 is 1 but key dim 1 is 2}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x1x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x2x64xf32>, tensor<4xi64>
  return
}

// -----

// A slot addresses the same block in both pools.
func.func @kv_write_pool_blocks(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                %kp: tensor<128x16x2x64xf32>, %vp: tensor<64x16x2x64xf32>,
                                %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op pool shape mismatch: value_pool dim 0 is 64 but key_pool dim 0 is 128}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>, tensor<64x16x2x64xf32>,
        tensor<4xi64>
  return
}

// -----

// A slot is block * block_size + offset in both pools.
func.func @kv_write_pool_block_size(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                    %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x32x2x64xf32>,
                                    %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op pool shape mismatch: value_pool dim 1 is 32 but key_pool dim 1 is 16}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x32x2x64xf32>, tensor<4xi64>
  return
}

// -----

// The key pool stores every KV head of a token.
func.func @kv_write_key_pool_heads(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                   %kp: tensor<128x16x4x64xf32>, %vp: tensor<128x16x2x64xf32>,
                                   %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op head count mismatch: key_pool dim 2 is 4 but key dim 1 is 2}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x4x64xf32>,
        tensor<128x16x2x64xf32>, tensor<4xi64>
  return
}

// -----

// The value pool stores every KV head of a token.
func.func @kv_write_value_pool_heads(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                     %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x4x64xf32>,
                                     %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op head count mismatch: value_pool dim 2 is 4 but value dim 1 is 2}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x4x64xf32>, tensor<4xi64>
  return
}

// -----

// Key rows are stored whole.
func.func @kv_write_key_pool_head_dim(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                      %kp: tensor<128x16x2x32xf32>,
                                      %vp: tensor<128x16x2x64xf32>, %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op head dim mismatch: key_pool dim 3 is 32 but key dim 2 is 64}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x32xf32>,
        tensor<128x16x2x64xf32>, tensor<4xi64>
  return
}

// -----

// Value rows are stored whole.
func.func @kv_write_value_pool_head_dim(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                        %kp: tensor<128x16x2x64xf32>,
                                        %vp: tensor<128x16x2x32xf32>, %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op head dim mismatch: value_pool dim 3 is 32 but value dim 2 is 64}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x2x32xf32>, tensor<4xi64>
  return
}

// -----

// Slots are i32 or i64.
func.func @kv_write_i16_slots(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                              %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                              %s: tensor<4xi16>) {
  // expected-error @+1 {{'xfmr.kv_write' op operand #4 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi16>'}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<128x16x2x64xf32>, tensor<4xi16>
  return
}

// -----

// The updated key pool has the key pool's type (generic form to spell a
// different one).
func.func @kv_write_new_key_pool_type(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                      %kp: tensor<128x16x2x64xf32>,
                                      %vp: tensor<128x16x2x64xf32>, %s: tensor<4xi64>) {
  // expected-error @+2 {{'xfmr.kv_write' op inferred type(s)}}
  // expected-error @+1 {{'xfmr.kv_write' op failed to infer returned types}}
  %0:2 = "xfmr.kv_write"(%k, %v, %kp, %vp, %s)
      : (tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>,
         tensor<4xi64>) -> (tensor<128x16x2x64xf16>, tensor<128x16x2x64xf32>)
  return
}

// -----

// The updated value pool has the value pool's type (generic form to spell a
// different one).
func.func @kv_write_new_value_pool_type(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                        %kp: tensor<128x16x2x64xf32>,
                                        %vp: tensor<128x16x2x64xf32>, %s: tensor<4xi64>) {
  // expected-error @+2 {{'xfmr.kv_write' op inferred type(s)}}
  // expected-error @+1 {{'xfmr.kv_write' op failed to infer returned types}}
  %0:2 = "xfmr.kv_write"(%k, %v, %kp, %vp, %s)
      : (tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>,
         tensor<4xi64>) -> (tensor<128x16x2x64xf32>, tensor<128x16x2x64xf16>)
  return
}

// -----

// An i8 cache cannot be read without its scales.
func.func @kv_write_i8_without_scales(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                      %kp: tensor<128x16x2x64xi8>,
                                      %vp: tensor<128x16x2x64xi8>, %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op i8 KV pools need key and value scales}}
  %0:2 = xfmr.kv_write %k, %v into %kp, %vp at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xi8>, tensor<128x16x2x64xi8>,
        tensor<4xi64>
  return
}

// -----

// Scales are for 8-bit pools only.
func.func @kv_write_scales_on_f32(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                  %kp: tensor<128x16x2x64xf32>, %vp: tensor<128x16x2x64xf32>,
                                  %ks: tensor<128x16x2xf32>, %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op scales are for i8 or 8-bit float pools, not 'f32'}}
  %0:4 = xfmr.kv_write %k, %v into %kp, %vp scales(%ks, %ks : tensor<128x16x2xf32>, tensor<128x16x2xf32>) at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xf32>,
        tensor<4xi64>
  return
}

// -----

// One scale per slot and KV head: [num_blocks, block_size, Hkv].
func.func @kv_write_scale_shape(%k: tensor<4x2x64xf32>, %v: tensor<4x2x64xf32>,
                                %kp: tensor<128x16x2x64xi8>, %vp: tensor<128x16x2x64xi8>,
                                %ks: tensor<128x16x4xf32>, %s: tensor<4xi64>) {
  // expected-error @+1 {{'xfmr.kv_write' op scale shape mismatch: key scales dim 2 is 4 but key_pool dim 2 is 2}}
  %0:4 = xfmr.kv_write %k, %v into %kp, %vp scales(%ks, %ks : tensor<128x16x4xf32>, tensor<128x16x4xf32>) at %s
      : tensor<4x2x64xf32>, tensor<4x2x64xf32>, tensor<128x16x2x64xi8>, tensor<128x16x2x64xi8>,
        tensor<4xi64>
  return
}

// -----

// Both scales or none.
func.func @paged_attention_one_scale(%q: tensor<4x4x64xf32>, %kp: tensor<128x16x2x64xf8E4M3FN>,
                                     %vp: tensor<128x16x2x64xf8E4M3FN>,
                                     %ks: tensor<128x16x2xf32>, %t: tensor<1x8xi32>,
                                     %l: tensor<1xi32>, %st: tensor<2xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op expects the key and the value scales, got 1 scale operands}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %t, %l, %st scales(%ks : tensor<128x16x2xf32>)
      {block_size = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<4x4x64xf32>, tensor<128x16x2x64xf8E4M3FN>, tensor<128x16x2x64xf8E4M3FN>,
        tensor<1x8xi32>, tensor<1xi32>, tensor<2xi32>
  return
}

// -----

// One element type for both pools: the kernels read keys and values alike.
func.func @paged_attention_pool_types(%q: tensor<10x8x64xf32>, %kp: tensor<128x16x2x64xf32>,
                                      %vp: tensor<128x16x2x64xbf16>, %bt: tensor<4x32xi32>,
                                      %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op key and value pools differ in element type ('f32' vs 'bf16')}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : tensor<10x8x64xf32>, tensor<128x16x2x64xf32>, tensor<128x16x2x64xbf16>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// A shared expert needs all three weights.
func.func @moe_shared_incomplete(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                                 %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                                 %wd: tensor<8x128x64xf32>, %sg: tensor<64x32xf32>) {
  // expected-error @+1 {{'xfmr.moe' op a shared expert needs shared_w_gate, shared_w_up and shared_w_down}}
  %0 = "xfmr.moe"(%x, %router, %wg, %wu, %wd, %sg) <{activation = 0 : i32, top_k = 2 : i64,
                                                     operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}>
      : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
         tensor<8x128x64xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  return
}

// -----

// The shared gate is [H, 1].
func.func @moe_shared_gate_shape(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                                 %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                                 %wd: tensor<8x128x64xf32>, %sg: tensor<64x32xf32>,
                                 %su: tensor<64x32xf32>, %sd: tensor<32x64xf32>,
                                 %g: tensor<64x2xf32>) {
  // expected-error @+1 {{'xfmr.moe' op shared_gate must be [H, 1], got 'tensor<64x2xf32>'}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd
      shared(%sg, %su, %sd : tensor<64x32xf32>, tensor<64x32xf32>, tensor<32x64xf32>)
      shared_gate(%g : tensor<64x2xf32>) {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The shared gate scales the shared expert; without one it gates nothing.
func.func @moe_shared_gate_alone(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                                 %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                                 %wd: tensor<8x128x64xf32>, %g: tensor<64x1xf32>) {
  // expected-error @+1 {{'xfmr.moe' op shared_gate without a shared expert}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd shared_gate(%g : tensor<64x1xf32>)
      {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The buffer form has xfmr.attention's shape rules.
func.func @attention_buffers_result_dim(%q: memref<1x4x8x64xf32>, %k: memref<1x2x8x64xf32>,
                                        %v: memref<1x2x8x32xf32>, %out: memref<1x4x8x64xf32>) {
  // expected-error @+1 {{'xfmr.attention_buffers' op result shape mismatch}}
  xfmr.attention_buffers %q, %k, %v into %out
      {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32}
      : memref<1x4x8x64xf32>, memref<1x2x8x64xf32>, memref<1x2x8x32xf32> into memref<1x4x8x64xf32>
  return
}

// -----

// The buffer form writes one output row per query row.
func.func @paged_attention_buffers_out_shape(%q: memref<10x4x16xf32>, %kp: memref<8x4x2x16xf32>,
                                             %vp: memref<8x4x2x16xf32>, %bt: memref<2x4xi32>,
                                             %cl: memref<2xi32>, %qsl: memref<3xi32>,
                                             %out: memref<8x4x16xf32>) {
  // expected-error @+1 {{'xfmr.paged_attention_buffers' op out must have the query's shape [T, Hq, D]}}
  xfmr.paged_attention_buffers %q, %kp, %vp, %bt, %cl, %qsl into %out
      {block_size = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32}
      : memref<10x4x16xf32>, memref<8x4x2x16xf32>, memref<8x4x2x16xf32>, memref<2x4xi32>,
        memref<2xi32>, memref<3xi32> into memref<8x4x16xf32>
  return
}

// -----

// A soft-cap of zero would divide by zero.
func.func @attention_zero_softcap(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                  %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op softcap must be positive and finite}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32, softcap = 0.0 : f32}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Attention sinks are one logit per query head.
func.func @attention_sinks_count(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>,
                                 %v: tensor<2x2x16x64xf32>) {
  // expected-error @+1 {{'xfmr.attention' op has 2 sinks for num_heads = 8}}
  %0 = xfmr.attention %q, %k, %v
      {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f32, sinks = array<f32: 1.0, 2.0>}
      : tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
        tensor<2x2x16x64xf32> -> tensor<2x8x16x64xf32>
  return
}

// -----

// Routing: the scoring is softmax or sigmoid.
func.func @moe_scoring(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                       %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                       %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op scoring must be "softmax" or "sigmoid", got "relu"}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {scoring = "relu", top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// A selection bias chooses among sigmoid scores only.
func.func @moe_bias_softmax(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                            %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                            %wd: tensor<8x128x64xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'xfmr.moe' op selection_bias needs sigmoid scoring}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd selection_bias(%b : tensor<8xf32>) {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// One selection bias per expert.
func.func @moe_bias_shape(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                          %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                          %wd: tensor<8x128x64xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'xfmr.moe' op selection_bias must be an f32 [8] (one per expert), got 'tensor<4xf32>'}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd selection_bias(%b : tensor<4xf32>)
      {scoring = "sigmoid", top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The groups split the experts evenly and the kept groups hold top_k.
func.func @moe_groups(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                      %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                      %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op 8 experts in 4 groups, top 1 groups, cannot give top_k 3}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd
      {groups = 4 : i64, scoring = "sigmoid", top_groups = 1 : i64, top_k = 3 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// Group-limited routing is DeepSeek-V3's, over sigmoid scores.
func.func @moe_groups_softmax(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                              %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                              %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op group-limited routing needs sigmoid scoring}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {groups = 4 : i64, top_groups = 2 : i64, top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

func.func @moe_routed_scale(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                            %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                            %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op routed_scale must be finite and positive, got 0}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {routed_scale = 0.0 : f32, top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// gpt-oss's expert biases come as a set of three of the right shapes.
func.func @moe_bias_shapes(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x64xf32>, %bg: tensor<8x128xf32>,
                           %bd: tensor<8x128xf32>) {
  // expected-error @+1 {{'xfmr.moe' op w_down bias must be [8, 64] of the input's type, got 'tensor<8x128xf32>'}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd
      biases(%bg, %bg, %bd : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>) {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// The clamped SwiGLU is a SiLU variant with a limit.
func.func @moe_clamped_gelu(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                            %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                            %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op the clamped SwiGLU needs the silu activation}}
  %0 = xfmr.moe gelu %x, %router, %wg, %wu, %wd {swiglu_limit = 7.0 : f32, top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

func.func @moe_clamped_no_limit(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                                %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                                %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'xfmr.moe' op the clamped SwiGLU needs a positive swiglu_limit}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd {swiglu_alpha = 1.702 : f32, top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

func.func @moe_router_bias(%x: tensor<16x64xf32>, %router: tensor<64x8xf32>,
                           %wg: tensor<8x64x128xf32>, %wu: tensor<8x64x128xf32>,
                           %wd: tensor<8x128x64xf32>, %rb: tensor<4xf32>) {
  // expected-error @+1 {{'xfmr.moe' op router_bias must be [8] of the router's type, got 'tensor<4xf32>'}}
  %0 = xfmr.moe silu %x, %router, %wg, %wu, %wd router_bias(%rb : tensor<4xf32>) {top_k = 2 : i64}
      : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x64x128xf32>,
        tensor<8x128x64xf32>
  return
}

// -----

// A latent query is [latent ; RoPE key]: the value's and the key's head
// sizes together.
func.func @paged_attention_latent_width(%q: tensor<10x4x16xf32>, %kp: tensor<128x16x1x4xf32>,
                                        %vp: tensor<128x16x1x16xf32>, %bt: tensor<4x32xi32>,
                                        %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op head dim mismatch: a latent query has the value's and the key's head sizes together (16 + 4), got 16}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, latent, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.125 : f32}
      : tensor<10x4x16xf32>, tensor<128x16x1x4xf32>, tensor<128x16x1x16xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}

// -----

// Different key and value sizes need latent keys: a plain query is a key.
func.func @paged_attention_value_size(%q: tensor<10x4x4xf32>, %kp: tensor<128x16x1x4xf32>,
                                      %vp: tensor<128x16x1x16xf32>, %bt: tensor<4x32xi32>,
                                      %cl: tensor<4xi32>, %qsl: tensor<5xi32>) {
  // expected-error @+1 {{'xfmr.paged_attention' op head dim mismatch}}
  %0 = xfmr.paged_attention %q, %kp, %vp, %bt, %cl, %qsl
      {block_size = 16 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.125 : f32}
      : tensor<10x4x4xf32>, tensor<128x16x1x4xf32>, tensor<128x16x1x16xf32>, tensor<4x32xi32>,
        tensor<4xi32>, tensor<5xi32>
  return
}


// -----

func.func @all_gather_width(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'xfmr.all_gather' op result dimension 1 must be 128, got 96}}
  %0 = xfmr.all_gather %x {ranks = 2 : i64} : tensor<?x64xf32> -> tensor<?x96xf32>
  return
}

// -----

func.func @all_gather_no_ranks(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'xfmr.all_gather' op ranks must be at least 1, got 0}}
  %0 = xfmr.all_gather %x {ranks = 0 : i64} : tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @all_gather_rank_change(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'xfmr.all_gather' op input and result must have one rank of at least 1}}
  %0 = xfmr.all_gather %x {ranks = 2 : i64} : tensor<?x64xf32> -> tensor<128xf32>
  return
}

// -----

func.func @stage_receive_sizes(%t: index) {
  // expected-error @+1 {{'xfmr.stage_receive' op needs one size per dynamic dimension of the result (2), got 1}}
  %0 = xfmr.stage_receive %t : tensor<?x?x64xf32>
  return
}

// -----

func.func @stage_send_sizes(%h: tensor<1x?x64xf32>, %r: index) {
  // expected-error @+1 {{'xfmr.stage_send' op needs one size per dynamic dimension of the result (0), got 1}}
  %0 = xfmr.stage_send %h, %r : tensor<1x?x64xf32> -> tensor<4x100xf32>
  return
}
