//===- XfmrOps.td - the xfmr transformer dialect -----------*- tablegen -*-===//
//
// The compiler's own level: one op per transformer building block (attention,
// norms, rotary embedding, projections, MLPs, mixture of experts, paged KV
// cache). Imported ONNX graphs are raised to these ops by pattern; they are
// lowered to linalg or to hand-written GPU kernels from here.
//
// Every op works on ranked tensors with value semantics. Dynamic dims are
// always accepted: verifiers compare two dims only when both are static.
// Ops whose result types follow from an operand (AllTypesMatch) get
// InferTypeOpInterface from ODS, so their builders need no result type.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_XFMR_OPS
#define XFMR_XFMR_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/Properties.td"
include "mlir/Dialect/Quant/IR/QuantBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Xfmr_Dialect : Dialect {
  let name = "xfmr";
  let cppNamespace = "::xfmr";
  let summary = "Transformer building blocks";
  let description = [{
    Ops at the granularity a model author thinks in: scaled dot-product
    attention with grouped KV heads, RMS and layer norm, rotary position
    embedding, linear projections, gated MLPs, mixture of experts, and the
    paged KV cache reads and writes of a serving engine. Passes fuse and
    raise into these ops, pick kernels for them, and lower them. See
    docs/xfmr-dialect.md for layouts and the passes that use each op.
  }];
  // Quantized weights are typed with the quant dialect's types.
  let dependentDialects = ["::mlir::quant::QuantDialect"];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Xfmr_Activation : I32Enum<"Activation", "gated MLP activation", [
      I32EnumCase<"silu", 0>,      // x * sigmoid(x); SwiGLU (Llama, Mistral)
      I32EnumCase<"gelu", 1>,      // exact erf GELU; GeGLU
      I32EnumCase<"gelu_tanh", 2>, // tanh approximation of GELU (Gemma)
      I32EnumCase<"relu", 3>
    ]> {
  let cppNamespace = "::xfmr";
}

/// Stored as a property; printed as a bare keyword (`silu`) in op formats.
def Xfmr_ActivationProp : EnumProp<Xfmr_Activation>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

/// Activations and the results computed from them.
def Xfmr_FloatTensor : RankedTensorOf<[AnyFloat]>;

/// Projection weights: float, integer, or `!quant.uniform` (a quantized
/// weight whose scales are part of its type); fp8 weights are float types.
def Xfmr_WeightTensor : RankedTensorOf<[AnyInteger, AnyFloat, quant_QuantizedType]>;
/// Biases, embedding tables and expert weights: float or integer.
def Xfmr_PlainWeightTensor : RankedTensorOf<[AnyInteger, AnyFloat]>;

/// Token ids, block tables, lengths and offsets.
def Xfmr_I32Tensor : RankedTensorOf<[I32]>;
def Xfmr_IdsTensor : RankedTensorOf<[AnySignlessInteger]>;
def Xfmr_SlotTensor : RankedTensorOf<[I32, I64]>;

/// Paged KV-cache pools: float (f32, bf16, f8E4M3FN), or i8 with scales.
def Xfmr_KVPoolTensor : RankedTensorOf<[AnyFloat, I8]>;
/// Per-token, per-head scales of a quantized KV pool: [num_blocks, block_size, Hkv].
def Xfmr_ScaleTensor : RankedTensorOf<[F32]>;

/// Attention masks: i1 (true = attend) or an additive float bias.
def Xfmr_MaskTensor : RankedTensorOf<[I1, AnyFloat]>;

//===----------------------------------------------------------------------===//
// Base op
//===----------------------------------------------------------------------===//

/// Every xfmr op is a pure function of its tensors and has a verifier.
class Xfmr_Op<string mnemonic, list<Trait> traits = []>
    : Op<Xfmr_Dialect, mnemonic, !listconcat([Pure], traits)> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Xfmr_AttentionOp : Xfmr_Op<"attention"> {
  let summary = "Scaled dot-product attention with grouped KV heads";
  let description = [{
    `softmax(scale * q · kᵀ + mask) · v`, per batch and query head.

    Layouts: `query` is `[B, Hq, Sq, D]`, `key` is `[B, Hkv, Skv, D]`,
    `value` is `[B, Hkv, Skv, Dv]`, the result is `[B, Hq, Sq, Dv]` with the
    query's element type.
    `num_heads` = Hq and `num_kv_heads` = Hkv; Hq must be a multiple of Hkv
    (multi-head: equal, grouped-query: a divisor, multi-query: 1). Query head
    `h` reads KV head `h / (Hq / Hkv)`.

    The optional `mask` broadcasts (numpy rules, rank 2 to 4) to
    `[B, Hq, Sq, Skv]`: an `i1` mask keeps the scores where it is true, a
    float mask is added to the scores before the softmax. `causal` lets
    query `i` see key `j` only when `j <= i + (Skv - Sq)`, aligned to the
    bottom right as in decoding with a KV cache; it combines with `mask`.
    `scale` is usually `1 / sqrt(D)`. With `softcap` = c (Gemma-2's
    attention logit soft-capping) the scaled scores become
    `c * tanh(scores / c)` before the mask applies. With `sinks` (gpt-oss's
    attention sinks, one f32 logit per query head) each row's softmax also
    counts `exp(sinks[h])` in its denominator, a key that has no value:
    `softmax(concat(scores, sink))[..., :-1] · v`. Rows that see no key
    (and have no sink) are unspecified.

    ```mlir
    %out = xfmr.attention %q, %k, %v mask %mask
        {causal = true, num_heads = 8 : i64, num_kv_heads = 2 : i64,
         scale = 0.125 : f32}
        : tensor<2x8x16x64xf16>, tensor<2x2x16x64xf16>,
          tensor<2x2x16x64xf16>, tensor<2x1x16x16xi1>
        -> tensor<2x8x16x64xf16>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$query,
    Xfmr_FloatTensor:$key,
    Xfmr_FloatTensor:$value,
    Optional<Xfmr_MaskTensor>:$mask,
    I64Attr:$num_heads,
    I64Attr:$num_kv_heads,
    F32Attr:$scale,
    DefaultValuedAttr<BoolAttr, "false">:$causal,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<DenseF32ArrayAttr>:$sinks
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:`
    type($query) `,` type($key) `,` type($value) (`,` type($mask)^)?
    `->` type($result)
  }];
}

/// Memory effects are declared per operand (not Pure): this op writes.
def Xfmr_AttentionBuffersOp
    : Op<Xfmr_Dialect, "attention_buffers"> {
  let summary = "xfmr.attention on buffers, for a target's fused kernel";
  let description = [{
    `xfmr.attention` with the same operands, attributes and semantics, on
    strided memrefs, writing its result into `out` (`[B, Hq, Sq, Dv]`).
    `convert-xfmr-to-linalg{fused-attention=true}` creates it (between
    `bufferization.to_buffer` and `to_tensor`) for targets with a fused
    attention kernel; such a target's pass (`xfmr-gpu-attention`) replaces
    it after bufferization. Nothing lowers it otherwise.

    ```mlir
    xfmr.attention_buffers %q, %k, %v into %out
        {causal = true, num_heads = 8 : i64, num_kv_heads = 2 : i64,
         scale = 0.125 : f32}
        : memref<1x8x16x64xf32>, memref<1x2x16x64xf32>,
          memref<1x2x16x64xf32> into memref<1x8x16x64xf32>
    ```
  }];

  let arguments = (ins
    Arg<AnyStridedMemRef, "query", [MemRead]>:$query,
    Arg<AnyStridedMemRef, "key", [MemRead]>:$key,
    Arg<AnyStridedMemRef, "value", [MemRead]>:$value,
    Arg<Optional<AnyStridedMemRef>, "mask", [MemRead]>:$mask,
    Arg<AnyStridedMemRef, "result", [MemWrite]>:$out,
    I64Attr:$num_heads,
    I64Attr:$num_kv_heads,
    F32Attr:$scale,
    DefaultValuedAttr<BoolAttr, "false">:$causal
  );

  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `into` $out attr-dict `:`
    type($query) `,` type($key) `,` type($value) (`,` type($mask)^)? `into`
    type($out)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Xfmr_RMSNormOp : Xfmr_Op<"rms_norm", [AllTypesMatch<["input", "result"]>]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x², last dim) + epsilon) * weight`, computed in at least
    f32. `weight` is 1-D with the size of the last dimension of `input`; its
    element type may differ from the input's (f32 weights with bf16
    activations), the result has the input's type.

    ```mlir
    %y = xfmr.rms_norm %x, %w {epsilon = 1.0e-05 : f32}
        : tensor<2x16x64xbf16>, tensor<64xf32>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$input,
    Xfmr_FloatTensor:$weight,
    F32Attr:$epsilon
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight)
  }];
}

def Xfmr_LayerNormOp : Xfmr_Op<"layer_norm",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * weight + bias`, mean and biased
    variance over the last dimension of `input`. `weight` and the optional
    `bias` are 1-D with the size of that dimension.

    ```mlir
    %y = xfmr.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
        : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$input,
    Xfmr_FloatTensor:$weight,
    Optional<Xfmr_FloatTensor>:$bias,
    F32Attr:$epsilon
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    type($input) `,` type($weight) (`,` type($bias)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

def Xfmr_RopeOp : Xfmr_Op<"rope", [AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding";
  let description = [{
    Rotates the first `rotary_dim` features of every head of `input`
    (`[B, H, S, D]`) by per-position angles; features past `rotary_dim`
    pass through (partial rotary, as in GPT-J and Phi). `cos` and `sin` hold
    the angles' cosines and sines for the tokens' positions, `[S, R]` or
    `[B or 1, S, R]` with `R = rotary_dim / 2`, and have the same type.

    Pairs `(x1, x2)` become `(x1 * cos - x2 * sin, x2 * cos + x1 * sin)`.
    With `interleaved = false` (GPT-NeoX, Llama) pair `i` is features `i`
    and `i + R`; with `interleaved = true` (GPT-J) it is `2i` and `2i + 1`.

    ```mlir
    %y = xfmr.rope %x, %cos, %sin {rotary_dim = 64 : i64}
        : tensor<2x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$input,
    Xfmr_FloatTensor:$cos,
    Xfmr_FloatTensor:$sin,
    I64Attr:$rotary_dim,
    DefaultValuedAttr<BoolAttr, "false">:$interleaved
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:`
    type($input) `,` type($cos) `,` type($sin)
  }];
}

//===----------------------------------------------------------------------===//
// Projections and MLPs
//===----------------------------------------------------------------------===//

def Xfmr_LinearOp : Xfmr_Op<"linear"> {
  let summary = "Linear projection `x · W + b`";
  let description = [{
    `input` is `[..., K]`, `weight` is `[K, N]` (ONNX MatMul layout, the
    transpose of PyTorch's `nn.Linear.weight`), the optional `bias` is `[N]`,
    and the result is `[..., N]` with the input's element type.

    The weight (and bias) element type may differ from the input's: a float
    weight of another precision, fp8, or an integer weight that is converted
    to the input's element type.

    Quantized weights are typed with MLIR's `quant` dialect: a
    `!quant.uniform` per tensor or per output channel (quantized dimension
    1), symmetric (zero points 0), with signed integer storage of at most 8
    bits and the input's element type as expressed type. The op computes
    `x · dequantize(W)`, where `dequantize(W)[k, n] = q[k, n] * scale[n]`;
    the storage comes from a `quant.scast` of a constant. The lowering
    multiplies by the scales after the sum over K, and reads W as stored.

    `int8_activations` (only with 8-bit quantized weights) lets the lowering
    also quantize each row of `x` to int8 at run time (symmetric, one scale
    per row) and multiply in integers (VNNI where the CPU has it): W8A8 with
    dynamic per-token activation scales, what `xfmr-compile --quant=int8`
    and `--quant=w8a8` ask for.

    ```mlir
    %y = xfmr.linear %x, %w, %b
        : tensor<2x16x64xf16>, tensor<64x128xf16>, tensor<128xf16>
        -> tensor<2x16x128xf16>
    %q = quant.scast %c : tensor<64x2xi8>
        to tensor<64x2x!quant.uniform<i8<-127:127>:f32:1, {0.5, 0.25}>>
    %z = xfmr.linear %x, %q {int8_activations}
        : tensor<16x64xf32>,
          tensor<64x2x!quant.uniform<i8<-127:127>:f32:1, {0.5, 0.25}>>
        -> tensor<16x2xf32>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$input,
    Xfmr_WeightTensor:$weight,
    Optional<Xfmr_PlainWeightTensor>:$bias,
    UnitAttr:$int8_activations
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    type($input) `,` type($weight) (`,` type($bias)^)? `->` type($result)
  }];
}

def Xfmr_GatedMLPOp : Xfmr_Op<"gated_mlp",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Gated MLP `(act(x · Wg) * (x · Wu)) · Wd`";
  let description = [{
    The feed-forward block of Llama-style models (SwiGLU with `silu`,
    GeGLU with `gelu` or `gelu_tanh`). `input` is `[..., H]`, `w_gate` and
    `w_up` are `[H, I]`, `w_down` is `[I, H]`; the result has the input's
    type. Weights may be quantized as for `xfmr.linear`.

    ```mlir
    %y = xfmr.gated_mlp silu %x, %wg, %wu, %wd
        : tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>,
          tensor<256x64xf32>
    ```
  }];

  let arguments = (ins
    Xfmr_ActivationProp:$activation,
    Xfmr_FloatTensor:$input,
    Xfmr_PlainWeightTensor:$w_gate,
    Xfmr_PlainWeightTensor:$w_up,
    Xfmr_PlainWeightTensor:$w_down
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $activation $input `,` $w_gate `,` $w_up `,` $w_down attr-dict `:`
    type($input) `,` type($w_gate) `,` type($w_up) `,` type($w_down)
  }];
}

def Xfmr_EmbeddingOp : Xfmr_Op<"embedding"> {
  let summary = "Token embedding lookup";
  let description = [{
    Gathers rows of `table` (`[V, H]`) for every id in `ids` (any rank, any
    signless integer type); the result is `[..., H]` with the ids' shape
    followed by H and the table's element type. An id outside [-V, V)
    fails the call (a negative id counts from the end).

    Quantized tables (`xfmr-compile --quant`): a bf16 (or f16) table may
    give an f32 result, each value widened as it is read; an i8 table comes
    with `scales` (`[V]` f32, one per row) and gives f32 rows q * scale.
    Decode reads one row of either per token.

    ```mlir
    %h = xfmr.embedding %table, %ids
        : tensor<32000x64xf16>, tensor<2x16xi64> -> tensor<2x16x64xf16>
    %h = xfmr.embedding %q, %ids scales(%s : tensor<32000xf32>)
        : tensor<32000x64xi8>, tensor<2x16xi64> -> tensor<2x16x64xf32>
    ```
  }];

  let arguments = (ins
    RankedTensorOf<[AnyFloat, I8]>:$table,
    Xfmr_IdsTensor:$ids,
    Optional<Xfmr_ScaleTensor>:$scales
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let builders = [
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$table, "mlir::Value":$ids), [{
      build($_builder, $_state, result, table, ids, mlir::Value());
    }]>,
  ];

  let assemblyFormat = [{
    $table `,` $ids (`scales` `(` $scales^ `:` type($scales) `)`)? attr-dict `:`
    type($table) `,` type($ids) `->` type($result)
  }];
}

def Xfmr_MoEOp : Xfmr_Op<"moe", [AllTypesMatch<["input", "result"]>,
                                 AttrSizedOperandSegments]> {
  let summary = "Mixture of experts with top-k routing";
  let description = [{
    Routes every token of `input` (`[T, H]`) to `top_k` of E gated-MLP
    experts. The router scores are `softmax(x · router)` over the experts
    (`router` is `[H, E]`); the `top_k` highest are kept and, with
    `normalize_top_k`, divided by their sum (Mixtral, Qwen3). The result
    (`[T, H]`) is the score-weighted sum of the selected experts' outputs.
    Expert `e` is a gated MLP with `w_gate[e]`, `w_up[e]` (`[E, H, I]`) and
    `w_down[e]` (`[E, I, H]`) and the given `activation`.

    An optional shared expert (Qwen-MoE, DeepSeek) runs on every token and
    is added to the routed sum: a gated MLP with `shared_w_gate`,
    `shared_w_up` (`[H, Is]`) and `shared_w_down` (`[Is, H]`), scaled by
    `sigmoid(x · shared_gate)` when `shared_gate` (`[H, 1]`) is given:
    `result = routed + sigmoid(x · shared_gate) * shared(x)`.

    Sigmoid routing (DeepSeek-V3, `scoring = "sigmoid"`): the scores are
    `sigmoid(x · router)`; the experts are chosen by those scores plus the
    constant `selection_bias` (`[E]`, DeepSeek's `e_score_correction_bias`;
    zero if absent), but weighted by the scores alone. With `groups` G > 1
    the experts form G equal groups of consecutive experts, a group's score
    is the sum of its two highest choice scores, and only the experts of the
    `top_groups` highest groups can be chosen (group-limited routing). The
    selected scores, renormalised with `normalize_top_k`, are multiplied by
    `routed_scale` (DeepSeek's `routed_scaling_factor`; 1 by default) in
    either scoring.

    gpt-oss's experts: `router_bias` (`[E]`) is added to the router logits;
    `biases(bg, bu, bd)` (`[E, I]`, `[E, I]`, `[E, H]`) to each expert's
    gate, up and down products; with `swiglu_limit` L (silu only) the gate
    becomes the clamped SwiGLU `g' * sigmoid(swiglu_alpha * g') *
    (u' + up_offset)` with `g' = min(g, L)`, `u' = clamp(u, -L, L)`.

    Quantized experts (`xfmr-quantize-experts`): the expert weights may be
    bf16 (rounded, no scales) or i8 / f8E4M3FN with `scales(sg, su, sd)`,
    f32 per output column of each expert (`[E, I]`, `[E, I]`, `[E, H]`):
    expert `e`'s gate product is `(x · w_gate[e]) * sg[e]`, and so on. The
    router and a shared expert keep the input's type.

    ```mlir
    %y = xfmr.moe silu %x, %router, %wg, %wu, %wd
        {normalize_top_k = true, top_k = 2 : i64}
        : tensor<16x64xbf16>, tensor<64x8xbf16>, tensor<8x64x128xbf16>,
          tensor<8x64x128xbf16>, tensor<8x128x64xbf16>
    %z = xfmr.moe silu %x, %router, %wg, %wu, %wd
        shared(%sg, %su, %sd : tensor<64x256xf32>, tensor<64x256xf32>,
               tensor<256x64xf32>)
        shared_gate(%g : tensor<64x1xf32>) {top_k = 2 : i64}
        : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>,
          tensor<8x64x128xf32>, tensor<8x128x64xf32>
    %d = xfmr.moe silu %x, %router, %wg, %wu, %wd
        selection_bias(%bias : tensor<8xf32>)
        {groups = 4 : i64, normalize_top_k = true, routed_scale = 2.5 : f32,
         scoring = "sigmoid", top_groups = 2 : i64, top_k = 2 : i64}
        : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>,
          tensor<8x64x128xf32>, tensor<8x128x64xf32>
    %q = xfmr.moe silu %x, %router, %qg, %qu, %qd
        scales(%s1, %s2, %s3 : tensor<8x128xf32>, tensor<8x128xf32>,
               tensor<8x64xf32>) {top_k = 2 : i64}
        : tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xi8>,
          tensor<8x64x128xi8>, tensor<8x128x64xi8>
    ```
  }];

  let arguments = (ins
    Xfmr_ActivationProp:$activation,
    Xfmr_FloatTensor:$input,
    Xfmr_FloatTensor:$router,
    Xfmr_PlainWeightTensor:$w_gate,
    Xfmr_PlainWeightTensor:$w_up,
    Xfmr_PlainWeightTensor:$w_down,
    Optional<Xfmr_PlainWeightTensor>:$shared_w_gate,
    Optional<Xfmr_PlainWeightTensor>:$shared_w_up,
    Optional<Xfmr_PlainWeightTensor>:$shared_w_down,
    Optional<Xfmr_FloatTensor>:$shared_gate,
    Optional<Xfmr_ScaleTensor>:$w_gate_scales,
    Optional<Xfmr_ScaleTensor>:$w_up_scales,
    Optional<Xfmr_ScaleTensor>:$w_down_scales,
    Optional<Xfmr_FloatTensor>:$selection_bias,
    Optional<Xfmr_FloatTensor>:$router_bias,
    Optional<Xfmr_FloatTensor>:$w_gate_bias,
    Optional<Xfmr_FloatTensor>:$w_up_bias,
    Optional<Xfmr_FloatTensor>:$w_down_bias,
    I64Attr:$top_k,
    DefaultValuedAttr<BoolAttr, "false">:$normalize_top_k,
    DefaultValuedAttr<StrAttr, "\"softmax\"">:$scoring,
    DefaultValuedAttr<I64Attr, "1">:$groups,
    DefaultValuedAttr<I64Attr, "1">:$top_groups,
    DefaultValuedAttr<F32Attr, "1.0f">:$routed_scale,
    OptionalAttr<F32Attr>:$swiglu_limit,
    DefaultValuedAttr<F32Attr, "1.0f">:$swiglu_alpha,
    DefaultValuedAttr<F32Attr, "0.0f">:$up_offset
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $activation $input `,` $router `,` $w_gate `,` $w_up `,` $w_down
    (`shared` `(` $shared_w_gate^ `,` $shared_w_up `,` $shared_w_down `:`
      type($shared_w_gate) `,` type($shared_w_up) `,` type($shared_w_down) `)`)?
    (`shared_gate` `(` $shared_gate^ `:` type($shared_gate) `)`)?
    (`scales` `(` $w_gate_scales^ `,` $w_up_scales `,` $w_down_scales `:`
      type($w_gate_scales) `,` type($w_up_scales) `,` type($w_down_scales) `)`)?
    (`selection_bias` `(` $selection_bias^ `:` type($selection_bias) `)`)?
    (`router_bias` `(` $router_bias^ `:` type($router_bias) `)`)?
    (`biases` `(` $w_gate_bias^ `,` $w_up_bias `,` $w_down_bias `:`
      type($w_gate_bias) `,` type($w_up_bias) `,` type($w_down_bias) `)`)?
    attr-dict `:` type($input) `,` type($router) `,` type($w_gate) `,`
    type($w_up) `,` type($w_down)
  }];
  let extraClassDeclaration = [{
    /// Whether the scores are sigmoids (else a softmax over the experts).
    bool hasSigmoidScoring() { return getScoring() == "sigmoid"; }
    /// Whether the experts use gpt-oss's clamped SwiGLU.
    bool hasClampedSwiGLU() {
      return getSwigluLimit() || getSwigluAlpha().convertToFloat() != 1.0f ||
             getUpOffset().convertToFloat() != 0.0f;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

def Xfmr_PagedAttentionOp : Xfmr_Op<"paged_attention", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Causal attention over a paged KV cache for a ragged batch";
  let description = [{
    The serving-time form of `xfmr.attention` (vLLM's layout). The query
    tokens of all sequences are packed: `query` is `[T, Hq, D]`, and
    sequence `s` owns tokens `query_start_loc[s]` to
    `query_start_loc[s + 1]` (`[num_seqs + 1]`, cumulative, starting at 0).
    Its keys and values live in `key_pool` and `value_pool`
    (`[num_blocks, block_size, Hkv, D]`): position `p` of sequence `s` is in
    block `block_tables[s, p / block_size]` (`[num_seqs, max_blocks]`) at
    offset `p % block_size`. `context_lens[s]` (`[num_seqs]`) counts the
    sequence's cached positions including its new tokens, which
    `xfmr.kv_write` has already stored; the new tokens are the last ones,
    and each sees the positions up to its own (causal). Prefill, chunked
    prefill and decode steps are all this op. With `sliding_window` = W
    (Mistral-style local attention), the token at position `p` sees only
    positions `p - W + 1` to `p`; blocks wholly before that are not read.
    The result is `[T, Hq, Dv]` (Dv: the value pool's head size) with the
    query's element type; head grouping, `scale`, `softcap` and `sinks` are
    as in `xfmr.attention`.

    `latent` (multi-head latent attention, DeepSeek-V2/V3, with the key and
    value projections absorbed): a position's key is its value-pool entry
    followed by its key-pool entry, so the query is `[T, Hq, Dv + Dk]`. The
    value pool holds the compressed KV latent, which is also every head's
    value, and the key pool the shared RoPE key (one KV head): the cache
    stores `Dv + Dk` numbers per token and layer instead of per-head keys
    and values (`xfmr-paged-kv` forms it).

    Quantized caches: with i8 pools (or 8-bit float pools) `scales` holds
    the key and the value scales, `[num_blocks, block_size, Hkv]` f32: the
    key of position `p`, head `h` is `key_pool[..., h, :] * key_scales[..., h]`
    (what `xfmr.kv_write` stored). Each tile is widened to f32 as it is read.

    ```mlir
    %out = xfmr.paged_attention %q, %k_pool, %v_pool, %block_tables,
        %context_lens, %query_start_loc
        {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64,
         scale = 0.125 : f32}
        : tensor<?x8x64xf16>, tensor<128x16x2x64xf16>,
          tensor<128x16x2x64xf16>, tensor<4x32xi32>, tensor<4xi32>,
          tensor<5xi32>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$query,
    Xfmr_KVPoolTensor:$key_pool,
    Xfmr_KVPoolTensor:$value_pool,
    Xfmr_I32Tensor:$block_tables,
    Xfmr_I32Tensor:$context_lens,
    Xfmr_I32Tensor:$query_start_loc,
    Variadic<Xfmr_ScaleTensor>:$scales,
    I64Attr:$num_heads,
    I64Attr:$num_kv_heads,
    F32Attr:$scale,
    I64Attr:$block_size,
    OptionalAttr<I64Attr>:$sliding_window,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<DenseF32ArrayAttr>:$sinks,
    UnitAttr:$latent
  );
  let results = (outs Xfmr_FloatTensor:$result);

  let assemblyFormat = [{
    $query `,` $key_pool `,` $value_pool `,` $block_tables `,`
    $context_lens `,` $query_start_loc
    (`scales` `(` $scales^ `:` type($scales) `)`)? attr-dict `:` type($query) `,`
    type($key_pool) `,` type($value_pool) `,` type($block_tables) `,`
    type($context_lens) `,` type($query_start_loc)
  }];

  let extraClassDeclaration = [{
    /// The key pool's scales ([num_blocks, block_size, Hkv] f32) when the
    /// pools are quantized, else null.
    ::mlir::Value getKeyScales() { return getScales().empty() ? nullptr : getScales()[0]; }
    ::mlir::Value getValueScales() { return getScales().empty() ? nullptr : getScales()[1]; }
  }];
}

def Xfmr_PagedAttentionBuffersOp : Op<Xfmr_Dialect, "paged_attention_buffers"> {
  let summary = "xfmr.paged_attention on buffers, for a target's fused kernel";
  let description = [{
    `xfmr.paged_attention` on strided memrefs (quantized pools with their
    key and value scales, as there), writing its result (`[T, Hq, D]`) into
    `out`.
    `convert-xfmr-to-linalg{fused-attention=true}` creates it for targets
    with a fused paged attention kernel; such a target's pass
    (`xfmr-gpu-attention`) replaces it after bufferization.

    ```mlir
    xfmr.paged_attention_buffers %q, %kp, %vp, %tables, %lens, %starts into %out
        {block_size = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64,
         scale = 0.125 : f32}
        : memref<?x8x64xf32>, memref<128x16x2x64xf32>, memref<128x16x2x64xf32>,
          memref<4x32xi32>, memref<4xi32>, memref<5xi32> into memref<?x8x64xf32>
    ```
  }];

  let arguments = (ins
    Arg<AnyStridedMemRef, "query", [MemRead]>:$query,
    Arg<AnyStridedMemRef, "key pool", [MemRead]>:$key_pool,
    Arg<AnyStridedMemRef, "value pool", [MemRead]>:$value_pool,
    Arg<AnyStridedMemRef, "block tables", [MemRead]>:$block_tables,
    Arg<AnyStridedMemRef, "context lengths", [MemRead]>:$context_lens,
    Arg<AnyStridedMemRef, "query start offsets", [MemRead]>:$query_start_loc,
    Arg<Variadic<AnyStridedMemRef>, "key and value scales", [MemRead]>:$scales,
    Arg<AnyStridedMemRef, "result", [MemWrite]>:$out,
    I64Attr:$num_heads,
    I64Attr:$num_kv_heads,
    F32Attr:$scale,
    I64Attr:$block_size,
    OptionalAttr<I64Attr>:$sliding_window
  );

  let assemblyFormat = [{
    $query `,` $key_pool `,` $value_pool `,` $block_tables `,` $context_lens `,`
    $query_start_loc (`scales` `(` $scales^ `:` type($scales) `)`)? `into` $out attr-dict
    `:` type($query) `,` type($key_pool) `,` type($value_pool) `,` type($block_tables) `,`
    type($context_lens) `,` type($query_start_loc) `into` type($out)
  }];

  let extraClassDeclaration = [{
    ::mlir::Value getKeyScales() { return getScales().empty() ? nullptr : getScales()[0]; }
    ::mlir::Value getValueScales() { return getScales().empty() ? nullptr : getScales()[1]; }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Xfmr_AllReduceOp : Op<Xfmr_Dialect, "all_reduce",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Sum of a tensor over the ranks of a tensor-parallel run";
  let description = [{
    Every rank of an artifact compiled with `xfmr-compile
    --tensor-parallel=N` holds a partial sum (the output of a row-parallel
    projection); the result is the sum over the N ranks, the same on every
    rank. Ranks add in rank order, so the bits do not depend on timing. In
    one process the result is the input.

    Not `Pure`: it is a collective that every rank must reach in the same
    order, so it is neither removed nor moved nor merged with another.

    ```mlir
    %sum = xfmr.all_reduce %partial : tensor<?x576xf32>
    ```
  }];

  let arguments = (ins RankedTensorOf<[F32]>:$input);
  let results = (outs RankedTensorOf<[F32]>:$result);

  let assemblyFormat = [{ $input attr-dict `:` type($input) }];
}

def Xfmr_AllGatherOp : Op<Xfmr_Dialect, "all_gather"> {
  let summary = "Concatenation of a tensor's last dimension over the ranks";
  let description = [{
    Every rank of a `ranks`-way tensor-parallel run holds a slice of the
    last dimension (a vocabulary-parallel LM head's logits); the result is
    the slices of ranks 0, 1, ... concatenated along that dimension, the
    same on every rank. In one process (ranks = 1) the result is the input.

    Not `Pure`, like `xfmr.all_reduce`.

    ```mlir
    %logits = xfmr.all_gather %slice {ranks = 2 : i64}
        : tensor<?x24576xf32> -> tensor<?x49152xf32>
    ```
  }];

  let arguments = (ins RankedTensorOf<[F32]>:$input, I64Attr:$ranks);
  let results = (outs RankedTensorOf<[F32]>:$result);

  let assemblyFormat = [{ $input attr-dict `:` type($input) `->` type($result) }];
  let hasVerifier = 1;
}

def Xfmr_StageReceiveOp : Op<Xfmr_Dialect, "stage_receive"> {
  let summary = "The hidden states a pipeline stage receives from the previous one";
  let description = [{
    Stage s > 0 of an artifact compiled with `xfmr-compile
    --pipeline-parallel=M` starts from the residual stream the previous
    stage sent (`xfmr.stage_send`) instead of computing the layers before
    its own. The dynamic sizes give the result's dynamic dims (the step's
    token count), read from the stage's own inputs so that nothing of the
    earlier layers stays alive.

    Not `Pure`: a point-to-point receive that must happen once, in order.

    ```mlir
    %h = xfmr.stage_receive %tokens : tensor<1x?x576xf32>
    ```
  }];

  let arguments = (ins Variadic<Index>:$sizes);
  let results = (outs RankedTensorOf<[F32]>:$result);

  let assemblyFormat = [{ $sizes attr-dict `:` type($result) }];
  let hasVerifier = 1;
}

def Xfmr_StageSendOp : Op<Xfmr_Dialect, "stage_send"> {
  let summary = "Send the hidden states to the next pipeline stage; receive the logits";
  let description = [{
    Every stage but the last of a `--pipeline-parallel` artifact ends here:
    `hidden` (the residual stream entering the next stage's first layer)
    goes to the next stage, then the logits the last stage broadcasts
    (`xfmr.stage_broadcast`) come back as the result, so that every stage's
    step function returns the same logits. `sizes` are the result's dynamic
    dims (the rows logits_indices selects).

    Not `Pure`, like `xfmr.stage_receive`.

    ```mlir
    %logits = xfmr.stage_send %h, %rows : tensor<1x?x576xf32> -> tensor<?x49152xf32>
    ```
  }];

  let arguments = (ins RankedTensorOf<[F32]>:$hidden, Variadic<Index>:$sizes);
  let results = (outs RankedTensorOf<[F32]>:$result);

  let assemblyFormat = [{ $hidden (`,` $sizes^)? attr-dict `:` type($hidden) `->` type($result) }];
  let hasVerifier = 1;
}

def Xfmr_StageBroadcastOp : Op<Xfmr_Dialect, "stage_broadcast",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "The last pipeline stage's logits, sent to every other stage";
  let description = [{
    The last stage of a `--pipeline-parallel` artifact broadcasts its
    logits to the other stages (which wait for them in `xfmr.stage_send`)
    and returns them unchanged.

    Not `Pure`, like `xfmr.stage_receive`.

    ```mlir
    %out = xfmr.stage_broadcast %logits : tensor<?x49152xf32>
    ```
  }];

  let arguments = (ins RankedTensorOf<[F32]>:$input);
  let results = (outs RankedTensorOf<[F32]>:$result);

  let assemblyFormat = [{ $input attr-dict `:` type($input) }];
}

def Xfmr_KVWriteOp : Xfmr_Op<"kv_write", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "Store new keys and values into the paged KV cache";
  let description = [{
    Writes token `t` of `key` and `value` (`[T, Hkv, D]`) into slot
    `slot_mapping[t]` (`[T]`, i32 or i64) of `key_pool` and `value_pool`
    (`[num_blocks, block_size, Hkv, D]`), where slot
    `block * block_size + offset` names offset `offset` of block `block`;
    a negative slot skips the token (padding). Values are converted to the
    pools' element type (e.g. bf16 caches). The results are the updated
    pools: value semantics here, in place after bufferization.

    Quantized caches (`--kv-dtype=int8|fp8-e4m3`): `scales` holds the key
    and the value scales (`[num_blocks, block_size, Hkv]` f32). Each
    token's head vector is stored as `round(x / s)` with `s = max|x| / 127`
    (i8 pools) or `max|x| / 448` (f8E4M3FN pools, round to nearest even,
    saturating), and `s` goes to the scale pool; an all-zero vector has
    scale 0. The results are the updated pools, then the updated scales.

    ```mlir
    %k_pool2, %v_pool2 = xfmr.kv_write %k, %v into %k_pool, %v_pool
        at %slots
        : tensor<?x2x64xf16>, tensor<?x2x64xf16>, tensor<128x16x2x64xf16>,
          tensor<128x16x2x64xf16>, tensor<?xi64>
    ```
  }];

  let arguments = (ins
    Xfmr_FloatTensor:$key,
    Xfmr_FloatTensor:$value,
    Xfmr_KVPoolTensor:$key_pool,
    Xfmr_KVPoolTensor:$value_pool,
    Xfmr_SlotTensor:$slot_mapping,
    Variadic<Xfmr_ScaleTensor>:$scales
  );
  let results = (outs
    Xfmr_KVPoolTensor:$new_key_pool,
    Xfmr_KVPoolTensor:$new_value_pool,
    Variadic<Xfmr_ScaleTensor>:$new_scales
  );

  let assemblyFormat = [{
    $key `,` $value `into` $key_pool `,` $value_pool
    (`scales` `(` $scales^ `:` type($scales) `)`)? `at` $slot_mapping
    attr-dict `:` type($key) `,` type($value) `,` type($key_pool) `,`
    type($value_pool) `,` type($slot_mapping)
  }];

  let extraClassDeclaration = [{
    /// The key and the value scales of an int8/fp8 cache, else null.
    ::mlir::Value getKeyScales() { return getScales().empty() ? nullptr : getScales()[0]; }
    ::mlir::Value getValueScales() { return getScales().empty() ? nullptr : getScales()[1]; }
  }];
}

#endif // XFMR_XFMR_OPS
