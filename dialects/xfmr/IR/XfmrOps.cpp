//===- XfmrOps.cpp - xfmr dialect op verifiers ----------------------------===//
//
// Part of xfmr.
//
// Shape verifiers for the xfmr ops. Dynamic dims are always accepted: two
// dims are compared only when both are static, so partially shaped IR from
// the importer verifies. Messages name the operand, the dim and the sizes.
//
//===----------------------------------------------------------------------===//

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;

//===----------------------------------------------------------------------===//
// Verifier helpers
//===----------------------------------------------------------------------===//

/// Whether two dims may be equal at runtime: a dynamic dim matches anything.
static bool dimsCompatible(int64_t lhs, int64_t rhs) {
  return ShapedType::isDynamic(lhs) || ShapedType::isDynamic(rhs) || lhs == rhs;
}

/// "<name> must have rank <rank> <layout>, got rank <actual>".
static LogicalResult verifyRank(Operation *op, StringRef name,
                                ShapedType type, int64_t rank,
                                StringRef layout) {
  if (type.getRank() == rank)
    return success();
  return op->emitOpError() << name << " must have rank " << rank << " "
                           << layout << ", got rank " << type.getRank();
}

/// "<name> must have rank >= 1, got rank 0": ops that work on the last dim.
static LogicalResult verifyHasLastDim(Operation *op, StringRef name,
                                      ShapedType type) {
  if (type.getRank() >= 1)
    return success();
  return op->emitOpError() << name << " must have rank >= 1, got rank 0";
}

/// "<what>: <lhs> dim <i> is <m> but <rhs> dim <j> is <n>", unless the dims
/// agree or one is dynamic.
static LogicalResult verifySameDim(Operation *op, StringRef what,
                                   StringRef lhsName, ShapedType lhs,
                                   int64_t lhsDim, StringRef rhsName,
                                   ShapedType rhs, int64_t rhsDim) {
  int64_t lhsSize = lhs.getDimSize(lhsDim);
  int64_t rhsSize = rhs.getDimSize(rhsDim);
  if (dimsCompatible(lhsSize, rhsSize))
    return success();
  return op->emitOpError() << what << ": " << lhsName << " dim " << lhsDim
                           << " is " << lhsSize << " but " << rhsName << " dim "
                           << rhsDim << " is " << rhsSize;
}

/// "<name> dim <i> is <m> but <attrName> is <n>", unless the dim is dynamic
/// or equals the attribute.
static LogicalResult verifyDimIsAttr(Operation *op, StringRef name,
                                     ShapedType type, int64_t dim,
                                     StringRef attrName, int64_t value) {
  int64_t size = type.getDimSize(dim);
  if (dimsCompatible(size, value))
    return success();
  return op->emitOpError() << name << " dim " << dim << " is " << size
                           << " but " << attrName << " is " << value;
}

/// "<name> must be positive, got <n>".
static LogicalResult verifyPositive(Operation *op, StringRef name,
                                    int64_t value) {
  if (value > 0)
    return success();
  return op->emitOpError() << name << " must be positive, got " << value;
}

/// Head counts of grouped-query attention: each KV head serves a whole
/// group of query heads.
static LogicalResult verifyHeadCounts(Operation *op, int64_t numHeads,
                                      int64_t numKvHeads) {
  if (failed(verifyPositive(op, "num_heads", numHeads)) ||
      failed(verifyPositive(op, "num_kv_heads", numKvHeads)))
    return failure();
  if (numHeads % numKvHeads == 0)
    return success();
  return op->emitOpError() << "num_heads (" << numHeads
                           << ") must be a multiple of num_kv_heads ("
                           << numKvHeads << ")";
}

/// "<lhs> element type 'a' must match <rhs> element type 'b'".
static LogicalResult verifySameElementType(Operation *op, StringRef lhsName,
                                           ShapedType lhs,
                                           StringRef rhsName,
                                           ShapedType rhs) {
  if (lhs.getElementType() == rhs.getElementType())
    return success();
  return op->emitOpError() << lhsName << " element type "
                           << lhs.getElementType() << " must match " << rhsName
                           << " element type " << rhs.getElementType();
}

/// "epsilon must be non-negative": a negative epsilon can make the
/// normalization divide by zero or take the root of a negative number.
/// An attention's `softcap`: absent, or a positive finite cap.
static LogicalResult verifySoftcap(Operation *op,
                                   std::optional<APFloat> softcap) {
  if (!softcap || (!softcap->isNegative() && !softcap->isZero() &&
                   softcap->isFinite()))
    return success();
  return op->emitOpError() << "softcap must be positive and finite";
}

/// An attention's `sinks`: absent, or one finite logit per query head.
static LogicalResult verifySinks(Operation *op,
                                 std::optional<ArrayRef<float>> sinks,
                                 int64_t numHeads) {
  if (!sinks)
    return success();
  if (static_cast<int64_t>(sinks->size()) != numHeads)
    return op->emitOpError() << "has " << sinks->size()
                             << " sinks for num_heads = " << numHeads;
  if (llvm::any_of(*sinks, [](float v) { return !std::isfinite(v); }))
    return op->emitOpError() << "sinks must be finite";
  return success();
}

static LogicalResult verifyEpsilon(Operation *op, const APFloat &epsilon) {
  if (!epsilon.isNegative() && !epsilon.isNaN())
    return success();
  return op->emitOpError() << "epsilon must be non-negative";
}

/// A 1-D per-feature parameter of a norm (`weight`, `bias`) whose size is the
/// last dim of `input`.
static LogicalResult verifyNormParameter(Operation *op, RankedTensorType input,
                                         StringRef name,
                                         RankedTensorType param) {
  if (failed(verifyRank(op, name, param, 1, "[H]")))
    return failure();
  return verifySameDim(op, "normalized size mismatch", name, param, 0, "input",
                       input, input.getRank() - 1);
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// The mask broadcasts numpy-style (right-aligned) to [B, Hq, Sq, Skv].
static LogicalResult verifyAttentionMask(Operation *op,
                                         ShapedType queryType,
                                         ShapedType keyType,
                                         ShapedType maskType) {
  int64_t rank = maskType.getRank();
  if (rank < 2 || rank > 4)
    return op->emitOpError()
           << "mask must have rank 2 to 4 to broadcast to [B, Hq, Sq, Skv], "
              "got rank "
           << rank;

  struct Target {
    StringRef name;
    ShapedType type;
    int64_t dim;
  };
  const Target targets[4] = {{"query", queryType, 0},
                             {"query", queryType, 1},
                             {"query", queryType, 2},
                             {"key", keyType, 2}};
  for (int64_t i = 0; i < rank; ++i) {
    const Target &target = targets[4 - rank + i];
    int64_t size = maskType.getDimSize(i);
    int64_t targetSize = target.type.getDimSize(target.dim);
    if (size == 1 || dimsCompatible(size, targetSize))
      continue;
    return op->emitOpError()
           << "mask dim " << i << " is " << size << " but must be 1 or "
           << targetSize << " (" << target.name << " dim " << target.dim
           << ") to broadcast to [B, Hq, Sq, Skv]";
  }
  return success();
}

/// The shape rules of xfmr.attention, shared by its buffer form.
static LogicalResult verifyAttention(Operation *op, ShapedType queryType, ShapedType keyType,
                                     ShapedType valueType, ShapedType resultType,
                                     ShapedType maskType, int64_t numHeads,
                                     int64_t numKvHeads) {

  if (failed(verifyRank(op, "query", queryType, 4, "[B, Hq, Sq, D]")) ||
      failed(verifyRank(op, "key", keyType, 4, "[B, Hkv, Skv, D]")) ||
      failed(verifyRank(op, "value", valueType, 4, "[B, Hkv, Skv, Dv]")) ||
      failed(verifyRank(op, "result", resultType, 4, "[B, Hq, Sq, Dv]")))
    return failure();

  if (failed(verifyHeadCounts(op, numHeads, numKvHeads)) ||
      failed(
          verifyDimIsAttr(op, "query", queryType, 1, "num_heads", numHeads)) ||
      failed(
          verifyDimIsAttr(op, "key", keyType, 1, "num_kv_heads", numKvHeads)) ||
      failed(verifyDimIsAttr(op, "value", valueType, 1, "num_kv_heads",
                             numKvHeads)))
    return failure();

  if (failed(verifySameDim(op, "batch mismatch", "key", keyType, 0, "query",
                           queryType, 0)) ||
      failed(verifySameDim(op, "batch mismatch", "value", valueType, 0, "query",
                           queryType, 0)) ||
      failed(verifySameDim(op, "key/value length mismatch", "value", valueType,
                           2, "key", keyType, 2)) ||
      failed(verifySameDim(op, "head dim mismatch", "key", keyType, 3, "query",
                           queryType, 3)))
    return failure();

  // The result is [B, Hq, Sq] of the query and Dv of the value.
  for (int64_t dim = 0; dim < 3; ++dim)
    if (failed(verifySameDim(op, "result shape mismatch", "result", resultType,
                             dim, "query", queryType, dim)))
      return failure();
  if (failed(verifySameDim(op, "result shape mismatch", "result", resultType, 3,
                           "value", valueType, 3)) ||
      failed(
          verifySameElementType(op, "result", resultType, "query", queryType)))
    return failure();

  if (maskType)
    return verifyAttentionMask(op, queryType, keyType, maskType);
  return success();
}

LogicalResult AttentionOp::verify() {
  TypedValue<RankedTensorType> mask = getMask();
  if (failed(verifySoftcap(getOperation(), getSoftcap())) ||
      failed(verifySinks(getOperation(), getSinks(), getNumHeads())))
    return failure();
  return verifyAttention(getOperation(), getQuery().getType(), getKey().getType(),
                         getValue().getType(), getResult().getType(),
                         mask ? mask.getType() : ShapedType(), getNumHeads(), getNumKvHeads());
}

LogicalResult AttentionBuffersOp::verify() {
  Value mask = getMask();
  auto shaped = [](Value v) { return cast<ShapedType>(v.getType()); };
  return verifyAttention(getOperation(), shaped(getQuery()), shaped(getKey()),
                         shaped(getValue()), shaped(getOut()),
                         mask ? shaped(mask) : ShapedType(), getNumHeads(), getNumKvHeads());
}

//===----------------------------------------------------------------------===//
// RMSNormOp and LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  Operation *op = getOperation();
  RankedTensorType inputType = getInput().getType();
  if (failed(verifyHasLastDim(op, "input", inputType)) ||
      failed(
          verifyNormParameter(op, inputType, "weight", getWeight().getType())))
    return failure();
  return verifyEpsilon(op, getEpsilon());
}

LogicalResult LayerNormOp::verify() {
  Operation *op = getOperation();
  RankedTensorType inputType = getInput().getType();
  if (failed(verifyHasLastDim(op, "input", inputType)) ||
      failed(
          verifyNormParameter(op, inputType, "weight", getWeight().getType())))
    return failure();
  if (TypedValue<RankedTensorType> bias = getBias())
    if (failed(verifyNormParameter(op, inputType, "bias", bias.getType())))
      return failure();
  return verifyEpsilon(op, getEpsilon());
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  Operation *op = getOperation();
  RankedTensorType inputType = getInput().getType();
  RankedTensorType cosType = getCos().getType();
  RankedTensorType sinType = getSin().getType();
  if (failed(verifyRank(op, "input", inputType, 4, "[B, H, S, D]")))
    return failure();

  int64_t rotaryDim = getRotaryDimAttr().getInt();
  if (rotaryDim <= 0 || rotaryDim % 2 != 0)
    return emitOpError() << "rotary_dim must be positive and even, got "
                         << rotaryDim;
  int64_t headDim = inputType.getDimSize(3);
  if (!ShapedType::isDynamic(headDim) && rotaryDim > headDim)
    return emitOpError() << "rotary_dim is " << rotaryDim
                         << " but input dim 3 (head dim) is only " << headDim;

  // The angles are given once; sin must be laid out like cos.
  if (cosType != sinType)
    return emitOpError() << "cos and sin must have the same type, got "
                         << cosType << " and " << sinType;
  int64_t cosRank = cosType.getRank();
  if (cosRank != 2 && cosRank != 3)
    return emitOpError() << "cos must have rank 2 [S, R] or 3 [B or 1, S, R] "
                            "with R = rotary_dim / 2, got rank "
                         << cosRank;
  if (cosRank == 3) {
    int64_t batch = cosType.getDimSize(0);
    int64_t inputBatch = inputType.getDimSize(0);
    if (batch != 1 && !dimsCompatible(batch, inputBatch))
      return emitOpError() << "cos dim 0 is " << batch << " but must be 1 or "
                           << inputBatch << " (input dim 0)";
  }
  if (failed(verifySameDim(op, "sequence length mismatch", "cos", cosType,
                           cosRank - 2, "input", inputType, 2)))
    return failure();
  int64_t pairs = cosType.getDimSize(cosRank - 1);
  if (!dimsCompatible(pairs, rotaryDim / 2))
    return emitOpError() << "cos dim " << cosRank - 1 << " is " << pairs
                         << " but must be rotary_dim / 2 = " << rotaryDim / 2;
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

/// A `!quant.uniform` weight of xfmr.linear: per tensor or per output
/// channel (dim 1), symmetric, signed storage of at most 8 bits, expressed
/// in the input's element type; `int8_activations` needs 8-bit storage.
static LogicalResult verifyQuantizedWeight(LinearOp op, RankedTensorType weightType) {
  auto q = dyn_cast<quant::QuantizedType>(weightType.getElementType());
  if (!q) {
    if (op.getInt8Activations())
      return op.emitOpError("int8_activations needs a quantized (!quant.uniform) weight");
    return success();
  }
  if (!isa<quant::UniformQuantizedType, quant::UniformQuantizedPerAxisType>(q))
    return op.emitOpError("quantized weight must be !quant.uniform (per tensor or per "
                          "axis), got ")
           << q;
  if (q.getExpressedType() != op.getInput().getType().getElementType())
    return op.emitOpError("quantized weight's expressed type ")
           << q.getExpressedType() << " is not the input's element type "
           << op.getInput().getType().getElementType();
  if (!q.isSigned() || q.getStorageTypeIntegralWidth() > 8)
    return op.emitOpError("quantized weight must have signed storage of at most 8 bits, got ")
           << q.getStorageType();
  if (op.getInt8Activations() && q.getStorageTypeIntegralWidth() != 8)
    return op.emitOpError("int8_activations needs 8-bit weight storage");
  if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(q)) {
    if (axis.getQuantizedDimension() != 1)
      return op.emitOpError("per-axis quantized weight must be quantized along dim 1 "
                            "(output channels), got dim ")
             << axis.getQuantizedDimension();
    if (!weightType.isDynamicDim(1) &&
        static_cast<int64_t>(axis.getScales().size()) != weightType.getDimSize(1))
      return op.emitOpError("per-axis quantized weight has ")
             << axis.getScales().size() << " scales for " << weightType.getDimSize(1)
             << " output channels";
    if (llvm::any_of(axis.getZeroPoints(), [](int64_t z) { return z != 0; }))
      return op.emitOpError("quantized weight must be symmetric (zero points 0)");
  } else if (cast<quant::UniformQuantizedType>(q).getZeroPoint() != 0) {
    return op.emitOpError("quantized weight must be symmetric (zero point 0)");
  }
  return success();
}

LogicalResult LinearOp::verify() {
  Operation *op = getOperation();
  RankedTensorType inputType = getInput().getType();
  RankedTensorType weightType = getWeight().getType();
  RankedTensorType resultType = getResult().getType();
  if (failed(verifyHasLastDim(op, "input", inputType)) ||
      failed(verifyRank(op, "weight", weightType, 2, "[K, N]")))
    return failure();
  int64_t rank = inputType.getRank();
  if (failed(verifySameDim(op, "reduction size mismatch", "weight", weightType,
                           0, "input", inputType, rank - 1)))
    return failure();

  if (TypedValue<RankedTensorType> bias = getBias())
    if (failed(verifyRank(op, "bias", bias.getType(), 1, "[N]")) ||
        failed(verifySameDim(op, "output size mismatch", "bias", bias.getType(),
                             0, "weight", weightType, 1)))
      return failure();

  // The result is the input's [...] followed by the weight's N.
  if (resultType.getRank() != rank)
    return emitOpError() << "result must have rank " << rank
                         << " (the input's), got rank " << resultType.getRank();
  for (int64_t dim = 0; dim + 1 < rank; ++dim)
    if (failed(verifySameDim(op, "result shape mismatch", "result", resultType,
                             dim, "input", inputType, dim)))
      return failure();
  if (failed(verifySameDim(op, "result shape mismatch", "result", resultType,
                           rank - 1, "weight", weightType, 1)))
    return failure();
  if (failed(verifySameElementType(op, "result", resultType, "input", inputType)))
    return failure();
  return verifyQuantizedWeight(*this, weightType);
}

/// Gate/up/down projection weights of a gated MLP, after `expertDims`
/// leading expert dims: w_gate and w_up [H, I], w_down [I, H], with H equal to
/// dim `hiddenDim` of the input.
static LogicalResult
verifyGatedWeights(Operation *op, RankedTensorType inputType, int64_t hiddenDim,
                   RankedTensorType gateType, RankedTensorType upType,
                   RankedTensorType downType, int64_t expertDims) {
  int64_t h = expertDims, i = expertDims + 1;
  if (failed(verifySameDim(op, "hidden size mismatch", "w_gate", gateType, h,
                           "input", inputType, hiddenDim)) ||
      failed(verifySameDim(op, "hidden size mismatch", "w_up", upType, h,
                           "input", inputType, hiddenDim)) ||
      failed(verifySameDim(op, "hidden size mismatch", "w_down", downType, i,
                           "input", inputType, hiddenDim)))
    return failure();
  if (failed(verifySameDim(op, "intermediate size mismatch", "w_up", upType, i,
                           "w_gate", gateType, i)) ||
      failed(verifySameDim(op, "intermediate size mismatch", "w_down", downType,
                           h, "w_gate", gateType, i)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// GatedMLPOp
//===----------------------------------------------------------------------===//

LogicalResult GatedMLPOp::verify() {
  Operation *op = getOperation();
  RankedTensorType inputType = getInput().getType();
  RankedTensorType gateType = getWGate().getType();
  RankedTensorType upType = getWUp().getType();
  RankedTensorType downType = getWDown().getType();
  if (failed(verifyHasLastDim(op, "input", inputType)) ||
      failed(verifyRank(op, "w_gate", gateType, 2, "[H, I]")) ||
      failed(verifyRank(op, "w_up", upType, 2, "[H, I]")) ||
      failed(verifyRank(op, "w_down", downType, 2, "[I, H]")))
    return failure();

  return verifyGatedWeights(op, inputType, inputType.getRank() - 1, gateType,
                            upType, downType, /*expertDims=*/0);
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  Operation *op = getOperation();
  RankedTensorType tableType = getTable().getType();
  RankedTensorType idsType = getIds().getType();
  RankedTensorType resultType = getResult().getType();
  if (failed(verifyRank(op, "table", tableType, 2, "[V, H]")))
    return failure();

  // The result is the ids' shape followed by the table's H.
  int64_t idsRank = idsType.getRank();
  if (resultType.getRank() != idsRank + 1)
    return emitOpError() << "result must have rank " << idsRank + 1
                         << " (the ids' rank + 1), got rank "
                         << resultType.getRank();
  for (int64_t dim = 0; dim < idsRank; ++dim)
    if (failed(verifySameDim(op, "result shape mismatch", "result", resultType,
                             dim, "ids", idsType, dim)))
      return failure();
  if (failed(verifySameDim(op, "result shape mismatch", "result", resultType,
                           idsRank, "table", tableType, 1)))
    return failure();
  Type table = tableType.getElementType(), result = resultType.getElementType();
  if (Value scales = getScales()) {
    auto scalesType = cast<RankedTensorType>(scales.getType());
    if (!table.isInteger(8) || !result.isF32())
      return emitOpError() << "scales go with an i8 table and an f32 result, got "
                           << tableType << " -> " << resultType;
    if (failed(verifyRank(op, "scales", scalesType, 1, "[V]")) ||
        failed(verifySameDim(op, "scales shape mismatch", "scales", scalesType, 0, "table",
                             tableType, 0)))
      return failure();
    return success();
  }
  if (table.isInteger(8))
    return emitOpError() << "an i8 table needs scales (one per row)";
  // A narrow float table may be widened to f32 as it is read.
  if (result.isF32() && (table.isBF16() || table.isF16()))
    return success();
  return verifySameElementType(op, "result", resultType, "table", tableType);
}

//===----------------------------------------------------------------------===//
// MoEOp
//===----------------------------------------------------------------------===//

/// The routing of an xfmr.moe: its scoring, the selection bias, groups and
/// the routed scale (`experts` may be dynamic).
static LogicalResult verifyRouting(MoEOp moe, int64_t experts) {
  StringRef scoring = moe.getScoring();
  if (scoring != "softmax" && scoring != "sigmoid")
    return moe.emitOpError() << "scoring must be \"softmax\" or \"sigmoid\", got \""
                             << scoring << "\"";
  if (Value bias = moe.getSelectionBias()) {
    if (!moe.hasSigmoidScoring())
      return moe.emitOpError() << "selection_bias needs sigmoid scoring";
    auto type = cast<RankedTensorType>(bias.getType());
    if (type.getRank() != 1 || !type.getElementType().isF32() ||
        (!ShapedType::isDynamic(experts) && type.getDimSize(0) != experts))
      return moe.emitOpError() << "selection_bias must be an f32 [" << experts
                               << "] (one per expert), got " << type;
  }
  int64_t groups = moe.getGroups(), topGroups = moe.getTopGroups();
  if (groups < 1 || topGroups < 1 || topGroups > groups)
    return moe.emitOpError() << "needs 1 <= top_groups <= groups, got top_groups "
                             << topGroups << " of " << groups;
  if (groups > 1) {
    if (!moe.hasSigmoidScoring())
      return moe.emitOpError() << "group-limited routing needs sigmoid scoring";
    if (!ShapedType::isDynamic(experts) &&
        (experts % groups != 0 || moe.getTopK() > topGroups * (experts / groups)))
      return moe.emitOpError() << experts << " experts in " << groups << " groups, top "
                               << topGroups << " groups, cannot give top_k "
                               << moe.getTopK();
  }
  float scale = moe.getRoutedScale().convertToFloat();
  if (!std::isfinite(scale) || scale <= 0.0f)
    return moe.emitOpError() << "routed_scale must be finite and positive, got " << scale;
  if (Value bias = moe.getRouterBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    if (type.getRank() != 1 || type.getElementType() != moe.getRouter().getType().getElementType() ||
        (!ShapedType::isDynamic(experts) && type.getDimSize(0) != experts))
      return moe.emitOpError() << "router_bias must be [" << experts
                               << "] of the router's type, got " << type;
  }
  return success();
}

/// gpt-oss's expert biases and clamped SwiGLU.
static LogicalResult verifyExpertExtras(MoEOp moe, RankedTensorType inputType) {
  Value bg = moe.getWGateBias(), bu = moe.getWUpBias(), bd = moe.getWDownBias();
  if (!bg != !bu || !bg != !bd)
    return moe.emitOpError() << "expert biases need w_gate_bias, w_up_bias and w_down_bias";
  if (bg) {
    auto gate = moe.getWGate().getType();
    int64_t e = gate.getDimSize(0), i = gate.getDimSize(2), h = gate.getDimSize(1);
    for (auto [bias, what, cols] : {std::tuple(bg, "w_gate", i), std::tuple(bu, "w_up", i),
                                    std::tuple(bd, "w_down", h)}) {
      auto type = cast<RankedTensorType>(bias.getType());
      if (type.getRank() != 2 || type.getElementType() != inputType.getElementType() ||
          !type.hasStaticShape() || type.getDimSize(0) != e || type.getDimSize(1) != cols)
        return moe.emitOpError() << what << " bias must be [" << e << ", " << cols
                                 << "] of the input's type, got " << type;
    }
  }
  if (moe.hasClampedSwiGLU()) {
    if (moe.getActivation() != Activation::silu)
      return moe.emitOpError() << "the clamped SwiGLU needs the silu activation";
    std::optional<APFloat> limit = moe.getSwigluLimit();
    if (!limit || !(limit->convertToFloat() > 0.0f))
      return moe.emitOpError() << "the clamped SwiGLU needs a positive swiglu_limit";
  }
  return success();
}

/// The shared expert of an xfmr.moe: none, or all three weights (a gated
/// MLP on the hidden size), and an optional [H, 1] gate.
static LogicalResult verifySharedExpert(MoEOp moe, RankedTensorType inputType) {
  Operation *op = moe.getOperation();
  Value g = moe.getSharedWGate(), u = moe.getSharedWUp(), d = moe.getSharedWDown();
  if (!g && !u && !d) {
    if (moe.getSharedGate())
      return moe.emitOpError() << "shared_gate without a shared expert";
    return success();
  }
  if (!g || !u || !d)
    return moe.emitOpError() << "a shared expert needs shared_w_gate, shared_w_up and "
                                "shared_w_down";
  auto gType = cast<RankedTensorType>(g.getType()), uType = cast<RankedTensorType>(u.getType());
  auto dType = cast<RankedTensorType>(d.getType());
  if (failed(verifyRank(op, "shared_w_gate", gType, 2, "[H, Is]")) ||
      failed(verifyRank(op, "shared_w_up", uType, 2, "[H, Is]")) ||
      failed(verifyRank(op, "shared_w_down", dType, 2, "[Is, H]")) ||
      failed(verifyGatedWeights(op, inputType, 1, gType, uType, dType, /*expertDims=*/0)))
    return failure();
  if (Value gate = moe.getSharedGate()) {
    auto type = cast<RankedTensorType>(gate.getType());
    if (failed(verifyRank(op, "shared_gate", type, 2, "[H, 1]")) ||
        failed(verifySameDim(op, "hidden size mismatch", "shared_gate", type, 0, "input",
                             inputType, 1)))
      return failure();
    if (!ShapedType::isDynamic(type.getDimSize(1)) && type.getDimSize(1) != 1)
      return moe.emitOpError() << "shared_gate must be [H, 1], got " << type;
  }
  return success();
}

/// Expert weights: all of the input's type, all bf16 (f32 input), or all
/// i8 / f8E4M3FN with per-column f32 scales [E, I], [E, I], [E, H].
static LogicalResult verifyExpertQuantization(MoEOp moe, RankedTensorType inputType) {
  Type elem = moe.getWGate().getType().getElementType();
  if (moe.getWUp().getType().getElementType() != elem ||
      moe.getWDown().getType().getElementType() != elem)
    return moe.emitOpError() << "w_gate, w_up and w_down have different element types";
  bool scaled = elem.isInteger(8) || isa<Float8E4M3FNType>(elem);
  bool hasScales = static_cast<bool>(moe.getWGateScales());
  if (elem != inputType.getElementType() && !elem.isBF16() && !scaled)
    return moe.emitOpError() << "expert weights of type " << elem
                             << " are neither the input's type, bf16, i8 nor f8E4M3FN";
  if (scaled != hasScales)
    return moe.emitOpError() << (scaled ? "i8 and f8E4M3FN expert weights need scales"
                                        : "scales need i8 or f8E4M3FN expert weights");
  if (!hasScales)
    return success();
  auto gate = moe.getWGate().getType(), down = moe.getWDown().getType();
  auto check = [&](StringRef name, Value s, int64_t experts, int64_t columns) -> LogicalResult {
    auto type = cast<RankedTensorType>(s.getType());
    if (type.getRank() != 2 || type.getDimSize(0) != experts || type.getDimSize(1) != columns)
      return moe.emitOpError() << name << " must be [" << experts << ", " << columns
                               << "] (one per expert and output column), got " << type;
    return success();
  };
  return failure(failed(check("w_gate scales", moe.getWGateScales(), gate.getDimSize(0),
                              gate.getDimSize(2))) ||
                 failed(check("w_up scales", moe.getWUpScales(), gate.getDimSize(0),
                              gate.getDimSize(2))) ||
                 failed(check("w_down scales", moe.getWDownScales(), down.getDimSize(0),
                              down.getDimSize(2))));
}

LogicalResult MoEOp::verify() {
  Operation *op = getOperation();
  RankedTensorType inputType = getInput().getType();
  RankedTensorType routerType = getRouter().getType();
  RankedTensorType gateType = getWGate().getType();
  RankedTensorType upType = getWUp().getType();
  RankedTensorType downType = getWDown().getType();
  if (failed(verifyRank(op, "input", inputType, 2, "[T, H]")) ||
      failed(verifyRank(op, "router", routerType, 2, "[H, E]")) ||
      failed(verifyRank(op, "w_gate", gateType, 3, "[E, H, I]")) ||
      failed(verifyRank(op, "w_up", upType, 3, "[E, H, I]")) ||
      failed(verifyRank(op, "w_down", downType, 3, "[E, I, H]")))
    return failure();

  int64_t topK = getTopKAttr().getInt();
  if (failed(verifyPositive(op, "top_k", topK)))
    return failure();
  int64_t numExperts = routerType.getDimSize(1);
  if (!ShapedType::isDynamic(numExperts) && topK > numExperts)
    return emitOpError() << "top_k is " << topK
                         << " but router dim 1 (experts) is only "
                         << numExperts;

  if (failed(verifySameDim(op, "hidden size mismatch", "router", routerType, 0,
                           "input", inputType, 1)))
    return failure();
  if (failed(verifySameDim(op, "expert count mismatch", "w_gate", gateType, 0,
                           "router", routerType, 1)) ||
      failed(verifySameDim(op, "expert count mismatch", "w_up", upType, 0,
                           "router", routerType, 1)) ||
      failed(verifySameDim(op, "expert count mismatch", "w_down", downType, 0,
                           "router", routerType, 1)))
    return failure();
  if (failed(verifyGatedWeights(op, inputType, 1, gateType, upType, downType,
                                /*expertDims=*/1)) ||
      failed(verifyExpertQuantization(*this, inputType)))
    return failure();
  if (failed(verifyRouting(*this, numExperts)) || failed(verifyExpertExtras(*this, inputType)))
    return failure();
  return verifySharedExpert(*this, inputType);
}

//===----------------------------------------------------------------------===//
// PagedAttentionOp
//===----------------------------------------------------------------------===//

/// Quantized pools (i8 or 8-bit float) carry scales [N, block_size, Hkv] f32
/// beside them; i8 pools cannot be read without. `scales` is empty or the
/// key and the value scales.
static LogicalResult verifyKVScales(Operation *op, ShapedType keyPool,
                                    ShapedType valuePool, ValueRange scales) {
  Type element = keyPool.getElementType();
  if (valuePool.getElementType() != element)
    return op->emitOpError() << "key and value pools differ in element type (" << element
                             << " vs " << valuePool.getElementType() << ")";
  bool narrow = element.isInteger(8) ||
                (isa<FloatType>(element) && cast<FloatType>(element).getWidth() == 8);
  if (scales.empty()) {
    if (element.isInteger(8))
      return op->emitOpError() << "i8 KV pools need key and value scales";
    return success();
  }
  if (scales.size() != 2)
    return op->emitOpError() << "expects the key and the value scales, got " << scales.size()
                             << " scale operands";
  if (!narrow)
    return op->emitOpError() << "scales are for i8 or 8-bit float pools, not " << element;
  constexpr StringLiteral layout = "[num_blocks, block_size, Hkv]";
  static constexpr StringLiteral names[] = {"key scales", "value scales"};
  for (auto [i, v] : llvm::enumerate(scales)) {
    StringRef name = names[i];
    auto type = cast<ShapedType>(v.getType());
    if (failed(verifyRank(op, name, type, 3, layout)))
      return failure();
    for (int64_t d = 0; d < 3; ++d)
      if (failed(verifySameDim(op, "scale shape mismatch", name, type, d, "key_pool", keyPool, d)))
        return failure();
  }
  return success();
}

/// The shape rules of xfmr.paged_attention, shared by its buffer form.
template <typename PagedOp>
static LogicalResult verifyPagedAttention(PagedOp pagedOp, ShapedType queryType,
                                          ShapedType keyPoolType, ShapedType valuePoolType,
                                          ShapedType tablesType, ShapedType lensType,
                                          ShapedType startsType, ValueRange scales,
                                          bool latent = false) {
  Operation *op = pagedOp.getOperation();
  constexpr StringLiteral poolLayout = "[num_blocks, block_size, Hkv, D]";
  if (failed(verifyRank(op, "query", queryType, 3, "[T, Hq, D]")) ||
      failed(verifyRank(op, "key_pool", keyPoolType, 4, poolLayout)) ||
      failed(verifyRank(op, "value_pool", valuePoolType, 4, poolLayout)) ||
      failed(verifyRank(op, "block_tables", tablesType, 2,
                        "[num_seqs, max_blocks]")) ||
      failed(verifyRank(op, "context_lens", lensType, 1, "[num_seqs]")) ||
      failed(
          verifyRank(op, "query_start_loc", startsType, 1, "[num_seqs + 1]")))
    return failure();

  if (failed(verifyKVScales(op, keyPoolType, valuePoolType, scales)))
    return failure();

  int64_t numHeads = pagedOp.getNumHeads();
  int64_t numKvHeads = pagedOp.getNumKvHeads();
  int64_t blockSize = pagedOp.getBlockSize();
  if (failed(verifyHeadCounts(op, numHeads, numKvHeads)) ||
      failed(verifyPositive(op, "block_size", blockSize)))
    return failure();
  if (std::optional<uint64_t> window = pagedOp.getSlidingWindow();
      window && failed(verifyPositive(op, "sliding_window", static_cast<int64_t>(*window))))
    return failure();
  if (failed(
          verifyDimIsAttr(op, "query", queryType, 1, "num_heads", numHeads)) ||
      failed(verifyDimIsAttr(op, "key_pool", keyPoolType, 2, "num_kv_heads",
                             numKvHeads)) ||
      failed(verifyDimIsAttr(op, "value_pool", valuePoolType, 2, "num_kv_heads",
                             numKvHeads)) ||
      failed(verifyDimIsAttr(op, "key_pool", keyPoolType, 1, "block_size",
                             blockSize)) ||
      failed(verifyDimIsAttr(op, "value_pool", valuePoolType, 1, "block_size",
                             blockSize)))
    return failure();

  if (failed(verifySameDim(op, "block count mismatch", "value_pool",
                           valuePoolType, 0, "key_pool", keyPoolType, 0)))
    return failure();
  // The query is a key: D = Dk, or Dv + Dk with latent keys. Without them
  // the value pool's head size is the key's too.
  int64_t dk = keyPoolType.getDimSize(3), dv = valuePoolType.getDimSize(3);
  int64_t dq = queryType.getDimSize(2);
  if (latent) {
    if (!ShapedType::isDynamic(dk) && !ShapedType::isDynamic(dv) &&
        !dimsCompatible(dq, dk + dv))
      return op->emitOpError()
             << "head dim mismatch: a latent query has the value's and the "
                "key's head sizes together ("
             << dv << " + " << dk << "), got " << dq;
  } else if (failed(verifySameDim(op, "head dim mismatch", "key_pool", keyPoolType, 3,
                                  "query", queryType, 2)) ||
             failed(verifySameDim(op, "head dim mismatch", "value_pool", valuePoolType,
                                  3, "query", queryType, 2))) {
    return failure();
  }

  // One block table row, one length and one query range per sequence.
  if (failed(verifySameDim(op, "sequence count mismatch", "context_lens",
                           lensType, 0, "block_tables", tablesType, 0)))
    return failure();
  int64_t numSeqs = tablesType.getDimSize(0);
  if (ShapedType::isDynamic(numSeqs))
    numSeqs = lensType.getDimSize(0);
  int64_t numStarts = startsType.getDimSize(0);
  if (!ShapedType::isDynamic(numSeqs) &&
      !dimsCompatible(numStarts, numSeqs + 1))
    return op->emitOpError() << "query_start_loc dim 0 is " << numStarts
                         << " but must be num_seqs + 1 = " << numSeqs + 1;
  return success();
}

LogicalResult PagedAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                                 ValueRange operands, DictionaryAttr,
                                                 OpaqueProperties, RegionRange,
                                                 SmallVectorImpl<Type> &inferred) {
  // query [T, Hq, D], key_pool, value_pool [N, bs, Hkv, Dv], ...: the result
  // is [T, Hq, Dv] of the query's element type.
  // Operands of other ranks give the query's type, for the verifier to
  // name what is wrong.
  if (operands.size() < 3)
    return failure();
  auto query = dyn_cast<RankedTensorType>(operands[0].getType());
  auto values = dyn_cast<RankedTensorType>(operands[2].getType());
  if (!query || !values || query.getRank() != 3 || values.getRank() != 4) {
    inferred.push_back(operands[0].getType());
    return success();
  }
  inferred.push_back(query.clone(
      {query.getDimSize(0), query.getDimSize(1), values.getDimSize(3)}));
  return success();
}

LogicalResult PagedAttentionOp::verify() {
  if (failed(verifySoftcap(getOperation(), getSoftcap())) ||
      failed(verifySinks(getOperation(), getSinks(), getNumHeads())))
    return failure();
  if (failed(verifyPagedAttention(*this, getQuery().getType(), getKeyPool().getType(),
                                  getValuePool().getType(), getBlockTables().getType(),
                                  getContextLens().getType(), getQueryStartLoc().getType(),
                                  getScales(), getLatent())))
    return failure();
  RankedTensorType query = getQuery().getType(), result = getResult().getType();
  if (result.getElementType() != query.getElementType() ||
      !dimsCompatible(result.getDimSize(0), query.getDimSize(0)) ||
      !dimsCompatible(result.getDimSize(1), query.getDimSize(1)) ||
      !dimsCompatible(result.getDimSize(2), getValuePool().getType().getDimSize(3)))
    return emitOpError() << "result must be [T, Hq, Dv] of the query's element type, got "
                         << result;
  return success();
}

LogicalResult PagedAttentionBuffersOp::verify() {
  auto shaped = [](Value v) { return cast<ShapedType>(v.getType()); };
  if (failed(verifyPagedAttention(*this, shaped(getQuery()), shaped(getKeyPool()),
                                  shaped(getValuePool()), shaped(getBlockTables()),
                                  shaped(getContextLens()), shaped(getQueryStartLoc()),
                                  getScales())))
    return failure();
  if (getOut().getType().getShape() != shaped(getQuery()).getShape())
    return emitOpError() << "out must have the query's shape [T, Hq, D]";
  return success();
}

//===----------------------------------------------------------------------===//
// KVWriteOp
//===----------------------------------------------------------------------===//

LogicalResult KVWriteOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                          ValueRange operands, DictionaryAttr,
                                          OpaqueProperties, RegionRange,
                                          SmallVectorImpl<Type> &inferred) {
  // key, value, key_pool, value_pool, slot_mapping, scales...: the results
  // are the pools' and the scales' types.
  if (operands.size() < 5)
    return failure();
  inferred.push_back(operands[2].getType());
  inferred.push_back(operands[3].getType());
  for (Value scales : operands.drop_front(5))
    inferred.push_back(scales.getType());
  return success();
}

LogicalResult AllGatherOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (getRanks() < 1)
    return emitOpError("ranks must be at least 1, got ") << getRanks();
  if (in.getRank() != out.getRank() || in.getRank() == 0)
    return emitOpError("input and result must have one rank of at least 1");
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t a = in.getDimSize(d), r = out.getDimSize(d);
    if (ShapedType::isDynamic(a) || ShapedType::isDynamic(r))
      continue;
    int64_t want = d + 1 == in.getRank() ? a * getRanks() : a;
    if (r != want)
      return emitOpError("result dimension ") << d << " must be " << want << ", got " << r;
  }
  return success();
}

/// One size operand per dynamic dimension of `type`, as tensor.empty has.
static LogicalResult verifyDynamicSizes(Operation *op, RankedTensorType type,
                                        ValueRange sizes) {
  if (static_cast<int64_t>(sizes.size()) != type.getNumDynamicDims())
    return op->emitOpError("needs one size per dynamic dimension of the result (")
           << type.getNumDynamicDims() << "), got " << sizes.size();
  return success();
}

LogicalResult StageReceiveOp::verify() {
  return verifyDynamicSizes(getOperation(), getResult().getType(), getSizes());
}

LogicalResult StageSendOp::verify() {
  return verifyDynamicSizes(getOperation(), getResult().getType(), getSizes());
}

LogicalResult KVWriteOp::verify() {
  Operation *op = getOperation();
  RankedTensorType keyType = getKey().getType();
  RankedTensorType valueType = getValue().getType();
  RankedTensorType keyPoolType = getKeyPool().getType();
  RankedTensorType valuePoolType = getValuePool().getType();
  RankedTensorType slotsType = getSlotMapping().getType();
  constexpr StringLiteral poolLayout = "[num_blocks, block_size, Hkv, D]";
  if (failed(verifyRank(op, "key", keyType, 3, "[T, Hkv, D]")) ||
      failed(verifyRank(op, "value", valueType, 3, "[T, Hkv, D]")) ||
      failed(verifyRank(op, "key_pool", keyPoolType, 4, poolLayout)) ||
      failed(verifyRank(op, "value_pool", valuePoolType, 4, poolLayout)) ||
      failed(verifyRank(op, "slot_mapping", slotsType, 1, "[T]")))
    return failure();

  if (failed(verifySameDim(op, "token count mismatch", "value", valueType, 0,
                           "key", keyType, 0)) ||
      failed(verifySameDim(op, "token count mismatch", "slot_mapping",
                           slotsType, 0, "key", keyType, 0)) ||
      failed(verifySameDim(op, "head count mismatch", "value", valueType, 1,
                           "key", keyType, 1)))
    return failure();

  // Both pools are addressed by the same slots.
  if (failed(verifySameDim(op, "pool shape mismatch", "value_pool",
                           valuePoolType, 0, "key_pool", keyPoolType, 0)) ||
      failed(verifySameDim(op, "pool shape mismatch", "value_pool",
                           valuePoolType, 1, "key_pool", keyPoolType, 1)))
    return failure();

  if (failed(verifySameDim(op, "head count mismatch", "key_pool", keyPoolType,
                           2, "key", keyType, 1)) ||
      failed(verifySameDim(op, "head count mismatch", "value_pool",
                           valuePoolType, 2, "value", valueType, 1)) ||
      failed(verifySameDim(op, "head dim mismatch", "key_pool", keyPoolType, 3,
                           "key", keyType, 2)) ||
      failed(verifySameDim(op, "head dim mismatch", "value_pool", valuePoolType,
                           3, "value", valueType, 2)))
    return failure();
  return verifyKVScales(op, keyPoolType, valuePoolType, getScales());
}

//===----------------------------------------------------------------------===//
// Generated definitions
//===----------------------------------------------------------------------===//

#include "dialects/xfmr/IR/XfmrEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/xfmr/IR/XfmrOps.cpp.inc"
