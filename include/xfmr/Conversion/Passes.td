//===- Passes.td - xfmr conversion passes ------------------*- tablegen -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_CONVERSION_PASSES
#define XFMR_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertONNXToLinalgPass : Pass<"convert-onnx-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower onnx dialect ops to linalg, tensor, arith and math";
  let description = [{
    Rewrites every onnx op into destination-passing linalg/tensor ops on
    signless element types (ONNX's unsigned integers become signless, and the
    lowering picks unsigned arithmetic for them). Broadcasting follows ONNX's
    multidirectional rule; a dim that is dynamic on both sides is assumed
    equal and checked at run time. Operands that decide a result's rank or
    layout (axes, perm) must be constants; shape-like operands (Reshape's
    shape, Slice's starts/ends, Expand's shape, Range's bounds...) may be run
    time values.

    An op the lowering cannot handle stops the pass with one error at the
    node: `node 'name' (Op): unsupported: <reason>`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::func::FuncDialect",
  ];
  let statistics = [
    Statistic<"numConverted", "converted-ops", "onnx ops lowered">,
  ];
}


def QuantizeWeightsPass : Pass<"xfmr-quantize-weights", "mlir::ModuleOp"> {
  let summary = "Quantize constant MatMul weights: int4 blocks (MatMulNBits), int8 channels (!quant.uniform), bf16, fp8";
  let description = [{
    Weight-only int4 quantization at compile time (`xfmr-compile
    --quant=int4-gG`): every `onnx.MatMul` whose B is a constant f32
    `[K, N]` becomes `onnx.ms.MatMulNBits` (bits 4, block_size = group,
    accuracy_level 4: int8 activations in the CPU micro-kernel; when K is
    not a multiple of `group` the last block is padded, as MatMulNBits
    stores it). Per column and block of `group` values along K,
    round to nearest, asymmetric, q * scale + lo with q in [0, 15] and an f32
    scale and offset (an f32 zero point -lo / scale): the grid through 0
    (lo a whole number of scales) unless the grid of the block's extremes
    (lo = min x, scale = (max x - min x) / 15, GGUF Q4_1's) has at most a
    quarter of its squared error (Int4Block.h). The output product (a MatMul
    whose result is returned: lm_head) becomes int8 per channel, weight-only,
    as with `bits=8`. Runs before raising: MLPs stay unfused over the
    quantized products, as in onnxruntime-genai's int4 models.

    With `bits=8` (`--quant=int8`): per output channel, symmetric, scale =
    max |w[:, n]| / 127, q = clamp(round(w / scale), -127, 127), and the
    MatMul becomes `xfmr.linear` on the [K, N] int8 constant cast
    (`quant.scast`) to `!quant.uniform<i8<-127:127>:f32:1, {scales}>`: the
    scales are part of the weight's type. Weight-only: the lowering widens
    the weights inside the f32 product. With `method=smoothquant` the op
    also gets `int8_activations` (activations quantized per row at run time,
    the 8-bit integer micro-kernel). (Group-wise int4 keeps
    MatMulNBits, whose scales are tensors: a sub-channel `!quant.uniform`
    would carry K * N / group scales in the type.)

    With `bits=16` (`--quant=bf16`): each weight rounded to bfloat16 (to
    nearest, ties to even), and the MatMul becomes `xfmr.linear` on the
    bf16 weights, which its lowering widens inside the product (2 bytes per
    weight, never widened into a buffer).

    With `bits=8 float8=true` (`--quant=fp8-e4m3`): per output channel,
    scale = max |w[:, n]| / 448, q = w / scale as float8 e4m3fn (to nearest,
    ties to even, saturated), and the product is `xfmr.linear` on q followed
    by an `onnx.Mul` by the scales.

    With `method=awq` (bits=4, `--quant=int4-awq`) or `method=smoothquant`
    (bits=8, `--quant=w8a8`) and `calibration=FILE` (per-channel statistics
    of each product's input, xfmr-calibration-outputs): the products that
    share an input get one scale per input channel s (AWQ: mean|x|^alpha
    with alpha searched; SmoothQuant: max|x|^alpha / max|w|^(1-alpha)); the
    weights are multiplied by s along K before quantization and the input
    divided by s, folded into the constant multiplier that produces it (an
    RMS or layer norm's weight) where that is its only use, else an
    onnx.Mul. AWQ then clips each block's range to the ratio of least
    expected error.

    With `method=gptq` (bits=4, `--quant=int4-gptq[-gG]`) the calibration
    file also holds each input's second moment H = E[x x^T] ([K, K], the
    file's `.gram` companion): the input channels are quantized one at a
    time, each one's rounding error spread over the channels not yet
    quantized through the Cholesky factor of H^-1 (GPTQ, GPTQ.h), on the
    same 4-bit grid and storage as round to nearest. `act-order` quantizes
    the channels of largest H_kk first, with each block's grid fixed
    beforehand (static groups: MatMulNBits needs no g_idx).

    Token embedding tables (a constant f32 [V, H] read only by Gathers of
    the model's input_ids) become `xfmr.embedding` on bf16 (bits=16) or on
    int8 rows with an f32 scale per row (every 8- and 4-bit mode); `skip`
    names them too (e.g. embed_tokens). Tables tied to lm_head stay f32.
  }];
  let options = [
    Option<"group", "group", "int64_t", /*default=*/"32",
           "Values of K per scale and zero point (32, 64 or 128; bits=4)">,
    Option<"bits", "bits", "int64_t", /*default=*/"4",
           "4: int4 in blocks of `group` (asymmetric); 8: int8 per output channel "
           "(symmetric, one block spanning K); 16: bfloat16">,
    ListOption<"skip", "skip", "std::string",
               "Leave MatMuls in f32 whose ONNX node name or weight name contains one "
               "of these (e.g. lm_head)">,
    Option<"float8", "float8", "bool", /*default=*/"false",
           "With bits=8: float8 e4m3fn per output channel (scale = max |w| / 448) "
           "instead of int8">,
    Option<"method", "method", "std::string", /*default=*/"\"rtn\"",
           "rtn: round to nearest; awq (bits=4): activation-aware per-channel scales "
           "and range clipping; gptq (bits=4): second-order error feedback; "
           "smoothquant (bits=8): migrate activation outliers into the weights (all "
           "three need `calibration`)">,
    Option<"actOrder", "act-order", "bool", /*default=*/"false",
           "gptq: quantize the input channels of largest E[x_k^2] first">,
    Option<"damp", "damp", "double", /*default=*/"0.01",
           "gptq: added to H's diagonal, times its mean diagonal">,
    Option<"report", "report", "bool", /*default=*/"false",
           "gptq: print each product's output error on the calibration rows, round to "
           "nearest against GPTQ">,
    Option<"shrink", "shrink", "double", /*default=*/"0.0",
           "gptq: H's off-diagonal scaled by 1 - shrink (toward its diagonal: a "
           "second moment from few calibration rows overfits)">,
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "Activation statistics (xfmr-compile --calibration; JSON, docs/quantization.md)">,
    Option<"alpha", "alpha", "double", /*default=*/"0.5",
           "smoothquant: migration strength (s = max|x|^alpha / max|w|^(1 - alpha))">,
  ];
  let dependentDialects = ["::xfmr::XfmrDialect", "::xfmr::onnx::ONNXDialect",
                           "::mlir::arith::ArithDialect", "::mlir::quant::QuantDialect"];
  let statistics = [
    Statistic<"numQuantized", "quantized", "MatMuls quantized">,
    Statistic<"numOutputs", "outputs", "bits=4: output products (lm_head) quantized to int8 instead">,
    Statistic<"numNamed", "named", "MatMuls left in f32 because `skip` names them">,
    Statistic<"numSkipped", "skipped", "MatMuls left in f32 (B not a constant f32 [K, N])">,
    Statistic<"numFolded", "folded", "Inputs whose 1/s went into a constant multiplier (a norm's weight)">,
    Statistic<"numDivided", "divided", "Inputs divided by s with an onnx.Mul before the products">,
    Statistic<"numEmbeddings", "embeddings", "Token embedding tables quantized (bf16, or int8 rows)">,
    Statistic<"numGptqDamped", "gptq-damped", "gptq: inputs whose H needed more than `damp` to be positive definite">,
    Statistic<"numUncalibrated", "uncalibrated", "MatMuls the calibration file has no statistics for (round to nearest)">,
  ];
}

def QuantizeExpertsPass : Pass<"xfmr-quantize-experts", "mlir::ModuleOp"> {
  let summary = "Quantize xfmr.moe expert weights to bf16, int8 or fp8 e4m3 (after raising)";
  let description = [{
    The experts of a mixture-of-experts model exist as such only once
    raised, so `--quant` quantizes them here, after xfmr-raise, in the same
    modes as xfmr-quantize-weights: `bf16` (rounded to nearest even),
    `int8` (per expert and output column, symmetric, scale = max |w| / 127)
    or `fp8-e4m3` (per expert and output column, scale = max |w| / 448).
    int8 and fp8 add the op's `scales`. The router and a shared expert
    stay f32; an op whose node name contains a `skip` entry is left alone.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"int8\"", "bf16, int8 or fp8-e4m3">,
    ListOption<"skip", "skip", "std::string",
               "Leave the experts of ops whose node name contains one of these">,
  ];
  let dependentDialects = ["::xfmr::XfmrDialect", "::xfmr::onnx::ONNXDialect"];
  let statistics = [
    Statistic<"numQuantized", "quantized", "xfmr.moe ops whose experts were quantized">,
  ];
}

def CalibrationOutputsPass : Pass<"xfmr-calibration-outputs", "mlir::ModuleOp"> {
  let summary = "Return per-channel statistics of every quantizable product's input";
  let description = [{
    For activation-aware quantization (`xfmr-compile --calibration`): for
    each `onnx.MatMul` in the entry function's body whose B is a constant
    f32 `[K, N]` (the products xfmr-quantize-weights rewrites), the function
    gets more results over all of A's rows: max |a_k|, mean |a_k| and mean
    a_k^2, one after the other in one `[3K]` f32 (one result, not three: the
    entry's results become one struct LLVM carries through code
    generation); `samples` rows of A at the indices of the function's new
    argument `xfmr_calibration.rows` (`[samples]` i64, chosen by the host),
    `[samples, K]` (AWQ measures output error on them); with
    `second-moments`, A^T A summed over the rows, `[K, K]` (GPTQ's H), named
    `xfmr_calibration.<i>.channels`, `.rows`, `.gram` (only the first of the
    products that share an input returns the last two) where i is the
    MatMul's index among the module's onnx.MatMul ops in walk order. Every result has a static shape, so the calibration
    artifact's layers can be outlined like the model's. Runs where
    xfmr-quantize-weights would (after onnx-simplify-shapes), so the indices
    name the same ops.
  }];
  let options = [
    Option<"samples", "samples", "int64_t", /*default=*/"64",
           "Rows of each input returned per run (the length of the row-index argument)">,
    Option<"secondMoments", "second-moments", "bool", /*default=*/"false",
           "Also return A^T A of each input ([K, K], for GPTQ)">,
  ];
  let dependentDialects = ["::xfmr::onnx::ONNXDialect"];
  let statistics = [
    Statistic<"numMeasured", "measured", "Products whose input statistics are returned">,
  ];
}

def RaiseONNXToXfmrPass : Pass<"xfmr-raise", "mlir::ModuleOp"> {
  let summary = "Recover transformer blocks from onnx ops as xfmr ops";
  let description = [{
    Matches the subgraphs exporters emit for attention (scaled Q·Kᵀ, masks,
    softmax, ·V, GQA's repeat_kv), RMS and layer norm, rotary embedding,
    gated MLPs, mixture-of-experts blocks and token embeddings, and replaces
    each with one xfmr op. One pattern per idea; a candidate that does not
    match completely is left as it is. `report` prints, per function, how
    many of each op were formed and every candidate left unfused with the
    reason. `skip` names ops not to form (e.g. `moe`, to measure the graph's
    own lowering).
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what was formed and which candidates were left and why">,
    ListOption<"skip", "skip", "std::string",
               "Ops not to form: moe, gated_mlp">,
  ];
  let dependentDialects = ["::xfmr::XfmrDialect", "::xfmr::onnx::ONNXDialect",
                           "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numAttention", "attention", "xfmr.attention formed">,
    Statistic<"numRMSNorm", "rms-norm", "xfmr.rms_norm formed">,
    Statistic<"numLayerNorm", "layer-norm", "xfmr.layer_norm formed">,
    Statistic<"numRope", "rope", "xfmr.rope formed">,
    Statistic<"numGatedMLP", "gated-mlp", "xfmr.gated_mlp formed">,
    Statistic<"numEmbedding", "embedding", "xfmr.embedding formed">,
    Statistic<"numUnfused", "unfused", "candidates left unfused">,
  ];
}

def ConvertXfmrToLinalgPass : Pass<"convert-xfmr-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower xfmr ops to linalg, tensor, scf, arith and math";
  let description = [{
    One target-independent tiled description per op. `xfmr.attention` and
    `xfmr.paged_attention` become FlashAttention loops: query blocks times
    key blocks with an online softmax, never a sequence x sequence tensor,
    causal blocks above the diagonal skipped, grouped KV heads read in
    place. Norms compute in f32; `xfmr.kv_write` inserts into the pools.
    With `fused-attention=N` (GPU targets), f32 `xfmr.attention` whose value
    head dim is static and at most N becomes `xfmr.attention_buffers`
    between `bufferization.to_buffer` (read-only, any strides) and
    `to_tensor` of a new buffer, for the target's fused kernel.
  }];
  let options = [
    Option<"queryBlock", "query-block", "int64_t", /*default=*/"16",
           "Query rows per attention tile">,
    Option<"keyBlock", "key-block", "int64_t", /*default=*/"64",
           "Keys per attention tile">,
    Option<"microKernels", "micro-kernels", "bool", /*default=*/"true",
           "Products on constant narrow weights call the host CPU's micro-kernels "
           "(false for GPU targets: they stay linalg products the GPU passes map)">,
    Option<"fusedAttention", "fused-attention", "int64_t", /*default=*/"0",
           "For a target with a fused attention kernel: xfmr.attention on f32 "
           "with a static value head dim up to this becomes "
           "xfmr.attention_buffers (0: none)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect",
    "::mlir::scf::SCFDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect", "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect", "::mlir::LLVM::LLVMDialect",
  ];
}

def PagedKVCachePass : Pass<"xfmr-paged-kv", "mlir::ModuleOp"> {
  let summary = "Turn a raised decoder into a step function over a paged KV cache";
  let description = [{
    Rewrites the model function (after `xfmr-raise`) into the serving step
    function: the inputs become the packed tokens of a ragged batch
    (`input_ids`, `positions`, `slot_mapping`: `[T]`), the per-sequence
    `block_tables` (`[N, M]`), `context_lens` (`[N]`) and
    `query_start_loc` (`[N + 1]`), and per layer a key and a value pool
    `[num_blocks, block_size, kv_heads, head_dim]` that the function updates
    in place. Every `xfmr.attention` becomes `xfmr.kv_write` of the new
    tokens' K/V plus `xfmr.paged_attention`; the model's own mask inputs and
    subgraphs, past_key_values inputs and present outputs disappear. The
    result is `logits` for every packed token (`[T, vocab]`).

    Works on forward exports (`input_ids`, `position_ids`
    [, `attention_mask`] -> logits) and on exports with
    `past_key_values.*` / `present.*`. Positions must be a model input: a
    model that computes them from the sequence length (GPT-2's Range) is
    rejected with a message.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"16",
           "Tokens per KV-cache block">,
    Option<"kvDtype", "kv-dtype", "std::string", /*default=*/"\"auto\"",
           "Element type of the pools: auto (the model's K/V type), f32, bf16, "
           "int8 or fp8-e4m3 (both with f32 scales per token and head)">,
  ];
  let dependentDialects = ["::xfmr::XfmrDialect", "::xfmr::onnx::ONNXDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SplitPipelineStagePass : Pass<"xfmr-split-pipeline-stage", "mlir::ModuleOp"> {
  let summary = "Keep one pipeline stage's layers of a paged step function";
  let description = [{
    After xfmr-paged-kv: stage `stage` of `stages` keeps layers
    [s L / M, (s + 1) L / M) of the L attention layers (M must divide L,
    so that every stage's KV pools have the same block size in bytes and
    the replicated schedulers agree on the block count). The residual
    stream entering its first layer (after the previous layer's attention,
    the one value through which everything later reads the earlier layers) becomes an `xfmr.stage_receive` (stage > 0);
    the one entering the next stage's first layer is sent with
    `xfmr.stage_send`, whose result (the last stage's logits, broadcast)
    the function returns (stage < M - 1); the last stage broadcasts its
    logits (`xfmr.stage_broadcast`). The other layers' KV pools leave the
    function's inputs and results, and the `xfmr.kv_cache` module attribute
    counts the layers kept. An error names the layer whose later layers read
    more of the earlier ones than the residual stream.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1", "Pipeline stages">,
    Option<"stage", "stage", "int64_t", /*default=*/"0", "The stage whose layers to keep">,
  ];
  let dependentDialects = ["::xfmr::XfmrDialect", "::mlir::tensor::TensorDialect"];
}

def ShardTensorParallelPass : Pass<"xfmr-shard-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Keep one rank's shard of a tensor-parallel model (Megatron-style)";
  let description = [{
    After raising (and xfmr-paged-kv): rank `rank` of `ranks` keeps query
    heads [r Hq / N, (r + 1) Hq / N) of every attention (the query
    projection's columns, the output projection's rows), the KV heads they
    read (Hkv / N of them, or one replicated head when Hkv < N; the KV pools
    shrink to those), and 1 / N of every gated MLP's intermediate columns;
    an `xfmr.all_reduce` after each output projection and each MLP sums
    the ranks' partial results. The head dimension is followed through the
    reshapes, transposes, RoPE and bias adds between a projection and its
    attention, and narrowed in their types. Embedding, norms and the LM
    head are replicated. Every rank's code is the same; only its weights
    differ. Errors name the op that blocks the split.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1", "Ranks the model is split over">,
    Option<"rank", "rank", "int64_t", /*default=*/"0", "The rank whose shard to keep">,
  ];
  let dependentDialects = ["::xfmr::XfmrDialect", "::xfmr::onnx::ONNXDialect"];
  let statistics = [
    Statistic<"numAttention", "attention", "Attentions split by heads">,
    Statistic<"numMLP", "mlp", "Gated MLPs split by intermediate columns">,
    Statistic<"numVocabulary", "vocabulary",
              "Embeddings and LM heads split by vocabulary">,
  ];
}

def FuseElementwiseOpsPass : Pass<"xfmr-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg producers without repeating work";
  let description = [{
    MLIR's elementwise fusion (`linalg-fuse-elementwise-ops`), with one rule
    changed: a producer is fused into a consumer that reduces only if its
    value is not recomputed, i.e. the consumer reads it through a map that
    uses every loop, or the producer only converts types (an f16 weight's
    extf fused into a matrix product halves the bytes read). Without the
    rule, SiLU(gate) * up fused into the down projection evaluates exp()
    once per output column instead of once per element, and the product no
    longer has the plain multiply-add body that a BLAS call needs.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

#endif // XFMR_CONVERSION_PASSES
