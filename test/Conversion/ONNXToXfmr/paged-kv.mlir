// RUN: xfmr-opt %s --split-input-file --xfmr-paged-kv=block-size=8 --verify-diagnostics | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-paged-kv="block-size=8 kv-dtype=int8" --verify-diagnostics | FileCheck %s --check-prefix=INT8
// RUN: xfmr-opt %s --split-input-file --xfmr-paged-kv="block-size=8 kv-dtype=fp8-e4m3" --verify-diagnostics | FileCheck %s --check-prefix=FP8

// --kv-dtype=int8 / fp8-e4m3: per layer the key and value pools hold i8 or
// f8E4M3FN, followed by their f32 scales [num_blocks, block_size, Hkv];
// kv_write updates all four, paged_attention reads the scales beside the
// pools, and all four are returned.
// INT8: module attributes {xfmr.kv_cache = {block_size = 8 : i64, dtype = "int8", head_dim = 4 : i64, num_kv_heads = 1 : i64, num_layers = 1 : i64}}
// INT8-LABEL: func.func @main(
// INT8-SAME: %[[KP:[a-z0-9]+]]: tensor<?x8x1x4xi8> {{.*}}onnx.name = "key_cache.0", xfmr.kv_pool}
// INT8-SAME: %[[VP:[a-z0-9]+]]: tensor<?x8x1x4xi8> {{.*}}onnx.name = "value_cache.0", xfmr.kv_pool}
// INT8-SAME: %[[KS:[a-z0-9]+]]: tensor<?x8x1xf32> {onnx.dim_params = ["num_blocks", "", ""], onnx.name = "key_scale.0", xfmr.kv_pool}
// INT8-SAME: %[[VS:[a-z0-9]+]]: tensor<?x8x1xf32> {{.*}}onnx.name = "value_scale.0", xfmr.kv_pool}
// INT8: %[[NK:.*]], %[[NV:.*]], %[[NS:.*]]:2 = xfmr.kv_write %{{.*}}, %{{.*}} into %[[KP]], %[[VP]] scales(%[[KS]], %[[VS]] : tensor<?x8x1xf32>, tensor<?x8x1xf32>) at
// INT8: xfmr.paged_attention %{{.*}}, %[[NK]], %[[NV]], %{{.*}}, %{{.*}}, %{{.*}} scales(%[[NS]]#0, %[[NS]]#1 : tensor<?x8x1xf32>, tensor<?x8x1xf32>)
// INT8: return %{{.*}}, %[[NK]], %[[NV]], %[[NS]]#0, %[[NS]]#1 :
// FP8: dtype = "fp8-e4m3"
// FP8: tensor<?x8x1x4xf8E4M3FN> {{.*}}onnx.name = "key_cache.0"
// FP8: xfmr.kv_write {{.*}} scales(

// A one-layer decoder after xfmr-raise: the step function takes packed
// tokens, their positions and slots, the per-sequence tables and one key and
// one value pool per layer; the mask input, its subgraph and the attention
// are replaced by kv_write + paged_attention; the lm_head runs only on the
// rows logits_indices selects (each sequence's last token) and the updated
// pools are returned for in-place bufferization.
// CHECK: module attributes {xfmr.kv_cache = {block_size = 8 : i64, dtype = "f32", head_dim = 4 : i64, num_kv_heads = 1 : i64, num_layers = 1 : i64}}
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["tokens"], onnx.name = "input_ids"}
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["tokens"], onnx.name = "positions"}
// CHECK-SAME: %[[SLOTS:[a-z0-9]+]]: tensor<?xi64> {{.*}}onnx.name = "slot_mapping"
// CHECK-SAME: %[[TABLES:[a-z0-9]+]]: tensor<?x?xi32> {{.*}}onnx.name = "block_tables"
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: tensor<?xi32> {{.*}}onnx.name = "context_lens"
// CHECK-SAME: %[[STARTS:[a-z0-9]+]]: tensor<?xi32> {{.*}}onnx.name = "query_start_loc"
// CHECK-SAME: %[[ROWS:[a-z0-9]+]]: tensor<?xi64> {onnx.dim_params = ["outputs"], onnx.name = "logits_indices"}
// CHECK-SAME: %[[KP:[a-z0-9]+]]: tensor<?x8x1x4xf32> {onnx.dim_params = ["num_blocks", "", "", ""], onnx.name = "key_cache.0", xfmr.kv_pool}
// CHECK-SAME: %[[VP:[a-z0-9]+]]: tensor<?x8x1x4xf32> {{.*}}onnx.name = "value_cache.0", xfmr.kv_pool}
// CHECK-SAME: -> (tensor<?x16xf32> {onnx.dim_params = ["outputs", ""], onnx.name = "logits"},
// CHECK-SAME: tensor<?x8x1x4xf32> {onnx.name = "key_cache.0", xfmr.kv_pool = 7 : i64}
// CHECK-NOT: onnx.Softmax
// CHECK-NOT: xfmr.attention
// CHECK: %[[K2:.*]], %[[V2:.*]] = xfmr.kv_write %{{.*}}, %{{.*}} into %[[KP]], %[[VP]] at %[[SLOTS]] : tensor<?x1x4xf32>, tensor<?x1x4xf32>
// CHECK: xfmr.paged_attention %{{.*}}, %[[K2]], %[[V2]], %[[TABLES]], %[[LENS]], %[[STARTS]] {block_size = 8 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : tensor<?x2x4xf32>
// CHECK: %[[PICKED:.*]] = onnx.Gather(%{{.*}}, %[[ROWS]]) {axis = 1 : i64} : (tensor<?x?x8xf32>, tensor<?xi64>) -> tensor<?x?x8xf32>
// CHECK: onnx.MatMul(%[[PICKED]], %{{.*}}) : (tensor<?x?x8xf32>, tensor<8x16xf32>)
// CHECK: return %{{.*}}, %[[K2]], %[[V2]] : tensor<?x16xf32>, tensor<?x8x1x4xf32>, tensor<?x8x1x4xf32>
func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
                %pos: tensor<?x?xi64> {onnx.name = "position_ids"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvshape = onnx.Constant() {value = dense<[0, 0, 1, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvw = onnx.Constant() {value = dense<0.25> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %kv = onnx.MatMul(%h, %kvw) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = onnx.Reshape(%kv, %kvshape) : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = onnx.Transpose(%k3) {perm = [0, 2, 1, 3]} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %m = onnx.Cast(%mask) {to = 1 : i64} : (tensor<?x?xi64>) -> tensor<?x?xf32>
  %a = xfmr.attention %q, %k, %k mask %m
      {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x?xf32>
      -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// A past input whose K/V heads and head size are symbolic (dim_params)
// takes them from the new tokens its Concat(past, new) appends, also through
// TorchScript's one-input Concat of the past: the pools are [?, 8, 1, 4].
// CHECK-LABEL: func.func @symbolic_past(
// CHECK-SAME: tensor<?x8x1x4xf32> {{.*}}onnx.name = "key_cache.0", xfmr.kv_pool}
// CHECK: xfmr.kv_write
// CHECK: xfmr.paged_attention
func.func @symbolic_past(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                         %pos: tensor<?x?xi64> {onnx.name = "position_ids"},
                         %past: tensor<?x?x?x?xf32> {onnx.name = "past_key_values.0.key"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvshape = onnx.Constant() {value = dense<[0, 0, 1, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvw = onnx.Constant() {value = dense<0.25> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %kv = onnx.MatMul(%h, %kvw) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = onnx.Reshape(%kv, %kvshape) : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %knew = onnx.Transpose(%k3) {perm = [0, 2, 1, 3]} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %past1 = onnx.Concat(%past) {axis = -2 : i64} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %k = onnx.Concat(%past1, %knew) {axis = -2 : i64} : (tensor<?x?x?x?xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %a = xfmr.attention %q, %k, %k {causal = true, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// A symbolic past that nothing fixes is refused.
// expected-error @+1 {{has a dynamic head size}}
func.func @unknown_past(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                        %pos: tensor<?x?xi64> {onnx.name = "position_ids"},
                        %past: tensor<?x?x?x?xf32> {onnx.name = "past_key_values.0.key"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %a = xfmr.attention %q, %past, %past {causal = true, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32> -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// expected-error @+1 {{no xfmr.attention in the model: run xfmr-raise first}}
func.func @not_raised(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                      %pos: tensor<?x?xi64> {onnx.name = "position_ids"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x16xf32>} : () -> tensor<16x16xf32>
  %h = xfmr.embedding %table, %ids : tensor<16x16xf32>, tensor<?x?xi64> -> tensor<?x?x16xf32>
  return %h : tensor<?x?x16xf32>
}

// -----

// negative_mixed_kv_heads: the manifest records one KV head count and head
// size for every layer's pools (the loader checks each against it), so a
// layer whose KV heads differ from layer 0's is refused by name instead of
// compiling an artifact that would not load.
func.func @negative_mixed_kv_heads(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                                   %pos: tensor<?x?xi64> {onnx.name = "position_ids"})
    -> (tensor<?x?x8xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %h4 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%h4) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %kvshape = onnx.Constant() {value = dense<[0, 0, 1, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvw = onnx.Constant() {value = dense<0.25> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %kv = onnx.MatMul(%h, %kvw) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %kv4 = onnx.Reshape(%kv, %kvshape) : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k1 = onnx.Transpose(%kv4) {perm = [0, 2, 1, 3]} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %a1 = xfmr.attention %q, %k1, %k1
      {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x2x?x4xf32>
  // expected-error-re @+1 {{xfmr-paged-kv: layer 1 (xfmr.attention at {{.*}}): its key cache would hold 2 KV heads of size 4 ({{[a-z0-9A-Z]+}}) where layer 0's key cache holds 1 KV heads of size 4 ({{[a-z0-9A-Z]+}})}}
  %a2 = xfmr.attention %a1, %q, %q
      {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32}
      : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a2) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return %o : tensor<?x?x8xf32>
}

// -----

// A soft-capped attention (Gemma-2) with sinks (gpt-oss) keeps its cap and
// its sinks in the paged form.
// CHECK: xfmr.paged_attention {{.*}} {block_size = 8 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f32, sinks = array<f32: 5.000000e-01, -1.000000e+00>, softcap = 2.000000e-01 : f32}
func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
                %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
                %pos: tensor<?x?xi64> {onnx.name = "position_ids"})
    -> (tensor<?x?x16xf32> {onnx.name = "logits"}) {
  %table = onnx.Constant() {value = dense<0.5> : tensor<16x8xf32>} : () -> tensor<16x8xf32>
  %h = xfmr.embedding %table, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %shape = onnx.Constant() {value = dense<[0, 0, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvshape = onnx.Constant() {value = dense<[0, 0, 1, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %kvw = onnx.Constant() {value = dense<0.25> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
  %kv = onnx.MatMul(%h, %kvw) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %q3 = onnx.Reshape(%h, %shape) : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = onnx.Transpose(%q3) {perm = [0, 2, 1, 3]} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k3 = onnx.Reshape(%kv, %kvshape) : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = onnx.Transpose(%k3) {perm = [0, 2, 1, 3]} : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %m = onnx.Cast(%mask) {to = 1 : i64} : (tensor<?x?xi64>) -> tensor<?x?xf32>
  %a = xfmr.attention %q, %k, %k mask %m
      {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f32, softcap = 0.2 : f32, sinks = array<f32: 0.5, -1.0>}
      : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x?xf32>
      -> tensor<?x2x?x4xf32>
  %at = onnx.Transpose(%a) {perm = [0, 2, 1, 3]} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %flat = onnx.Constant() {value = dense<[0, 0, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%at, %flat) : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %w = onnx.Constant() {value = dense<0.125> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
  %logits = onnx.MatMul(%o, %w) : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
