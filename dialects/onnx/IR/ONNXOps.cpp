//===- ONNXOps.cpp - onnx dialect op verifiers ----------------------------===//
//
// Part of xfmr.
//
// ODS checks arity and element types of every op; the verifiers here check
// the invariants the ONNX spec states in prose (axes in range, permutations,
// split sizes, quantization parameters...). Dims are compared only where both
// sides are static; constant operands are checked when they are constants.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace xfmr::onnx;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Rank of a ranked tensor value, or -1 (unranked or `none`).
static int64_t rankOf(Value v) {
  if (auto t = dyn_cast_or_null<RankedTensorType>(v ? v.getType() : Type()))
    return t.getRank();
  return -1;
}

static int64_t dimOf(Value v, int64_t i) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getDimSize(i);
}

static bool isNone(Value v) { return !v || isa<NoneType>(v.getType()); }

/// Checks `axis` against rank r: valid is [-r, r-1], or [-r, r] when
/// `inclusiveEnd` (Flatten, Unsqueeze output rank). Unknown rank passes.
static LogicalResult checkAxis(Operation *op, StringRef name, int64_t axis,
                               int64_t rank, bool inclusiveEnd = false) {
  if (rank < 0)
    return success();
  if (rank == 0 && !inclusiveEnd)
    return op->emitOpError() << name << " needs an input of rank >= 1";
  int64_t hi = inclusiveEnd ? rank : rank - 1;
  if (axis < -rank || axis > hi)
    return op->emitOpError() << name << " " << axis << " is out of range ["
                             << -rank << ", " << hi << "] for rank " << rank;
  return success();
}

static LogicalResult checkBool(Operation *op, StringRef name, int64_t v) {
  if (v != 0 && v != 1)
    return op->emitOpError() << name << " must be 0 or 1, got " << v;
  return success();
}

static int64_t i64(uint64_t v) { return static_cast<int64_t>(v); }

/// Both dims static and different.
static bool conflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

/// Checks a list of axes (constant operand) for range and duplicates.
static LogicalResult checkAxesList(Operation *op, ArrayRef<int64_t> axes,
                                   int64_t rank) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t a : axes) {
    if (failed(checkAxis(op, "axis", a, rank)))
      return failure();
    int64_t norm = rank >= 0 && a < 0 ? a + rank : a;
    if (!seen.insert(norm).second)
      return op->emitOpError() << "axis " << a << " appears twice";
  }
  return success();
}

static LogicalResult checkSoftmaxLike(Operation *op, Value input,
                                      int64_t axis) {
  return checkAxis(op, "axis", axis, rankOf(input));
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult ArgMaxOp::verify() {
  if (failed(checkBool(*this, "keepdims", i64(getKeepdims()))) ||
      failed(checkBool(*this, "select_last_index", i64(getSelectLastIndex()))))
    return failure();
  return checkAxis(*this, "axis", i64(getAxis()), rankOf(getData()));
}

LogicalResult ArgMinOp::verify() {
  if (failed(checkBool(*this, "keepdims", i64(getKeepdims()))) ||
      failed(checkBool(*this, "select_last_index", i64(getSelectLastIndex()))))
    return failure();
  return checkAxis(*this, "axis", i64(getAxis()), rankOf(getData()));
}

LogicalResult SoftmaxOp::verify() {
  return checkSoftmaxLike(*this, getInput(), i64(getAxis()));
}
LogicalResult LogSoftmaxOp::verify() {
  return checkSoftmaxLike(*this, getInput(), i64(getAxis()));
}
LogicalResult HardmaxOp::verify() {
  return checkSoftmaxLike(*this, getInput(), i64(getAxis()));
}

LogicalResult AttentionOp::verify() {
  if (failed(checkBool(*this, "is_causal", i64(getIsCausal()))))
    return failure();
  if (i64(getQkMatmulOutputMode()) < 0 || i64(getQkMatmulOutputMode()) > 3)
    return emitOpError() << "qk_matmul_output_mode must be in [0, 3], got "
                         << i64(getQkMatmulOutputMode());
  int64_t qRank = rankOf(getQ());
  if (qRank >= 0 && qRank != 3 && qRank != 4)
    return emitOpError() << "Q must have rank 3 or 4, got " << qRank;
  auto qHeads = getQNumHeads(), kvHeads = getKvNumHeads();
  if (qRank == 3 && (!qHeads || !kvHeads))
    return emitOpError("3-D inputs need q_num_heads and kv_num_heads");
  if (qHeads && kvHeads) {
    if (i64(*qHeads) <= 0 || i64(*kvHeads) <= 0)
      return emitOpError("q_num_heads and kv_num_heads must be positive");
    if (i64(*qHeads) % i64(*kvHeads) != 0)
      return emitOpError() << "q_num_heads " << i64(*qHeads)
                           << " is not a multiple of kv_num_heads "
                           << i64(*kvHeads);
  }
  if (qRank == 4 && rankOf(getK()) == 4) {
    int64_t hq = dimOf(getQ(), 1), hk = dimOf(getK(), 1);
    if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hk) && hk != 0 &&
        hq % hk != 0)
      return emitOpError() << "query heads " << hq
                           << " are not a multiple of key heads " << hk;
    if (conflict(dimOf(getQ(), 3), dimOf(getK(), 3)))
      return emitOpError() << "Q head size " << dimOf(getQ(), 3)
                           << " differs from K head size " << dimOf(getK(), 3);
  }
  return success();
}

LogicalResult CastOp::verify() {
  int64_t to = i64(getTo());
  Type target =
      to >= 0 && to <= INT32_MAX
          ? convertONNXElementType(getContext(), static_cast<int32_t>(to))
          : Type();
  if (!target)
    return emitOpError() << "'to' names unsupported data type " << to;
  Type result = cast<TensorType>(getOutput().getType()).getElementType();
  if (result != target)
    return emitOpError() << "result element type " << result
                         << " differs from 'to' (" << target << ")";
  return checkBool(*this, "saturate", i64(getSaturate()));
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  int64_t rank = -1;
  for (Value v : getInputs()) {
    int64_t r = rankOf(v);
    if (r < 0)
      continue;
    if (rank >= 0 && r != rank)
      return emitOpError() << "inputs have different ranks " << rank << " and "
                           << r;
    rank = r;
  }
  if (rank == 0)
    return emitOpError("cannot concatenate scalars");
  if (failed(checkAxis(*this, "axis", i64(getAxis()), rank)))
    return failure();
  if (rank < 0)
    return success();
  int64_t axis = i64(getAxis()) < 0 ? i64(getAxis()) + rank : i64(getAxis());
  Value first;
  for (Value v : getInputs()) {
    if (rankOf(v) < 0)
      continue;
    if (!first) {
      first = v;
      continue;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && conflict(dimOf(first, d), dimOf(v, d)))
        return emitOpError() << "inputs disagree on dim " << d << ": "
                             << dimOf(first, d) << " vs " << dimOf(v, d);
  }
  return success();
}

LogicalResult ConstantOfShapeOp::verify() {
  if (rankOf(getInput()) >= 0 && rankOf(getInput()) != 1)
    return emitOpError("shape input must be 1-D");
  if (auto value = getValue()) {
    auto type = cast<ShapedType>(value->getType());
    if (!type.hasStaticShape() || type.getNumElements() != 1)
      return emitOpError("value must hold exactly one element");
    Type result = cast<TensorType>(getOutput().getType()).getElementType();
    if (type.getElementType() != result)
      return emitOpError() << "value element type " << type.getElementType()
                           << " differs from the result's " << result;
  }
  return success();
}

LogicalResult CumSumOp::verify() {
  if (failed(checkBool(*this, "exclusive", i64(getExclusive()))) ||
      failed(checkBool(*this, "reverse", i64(getReverse()))))
    return failure();
  int64_t axisRank = rankOf(getAxis());
  if (axisRank > 1)
    return emitOpError("axis input must be a scalar or 1-D");
  if (auto axis = getConstantInts(getAxis())) {
    if (axis->size() != 1)
      return emitOpError("axis input must hold one value");
    return checkAxis(*this, "axis", (*axis)[0], rankOf(getX()));
  }
  return success();
}

/// Shared by QuantizeLinear and DequantizeLinear: per-tensor, per-axis or
/// blocked scales; zero point shaped like the scale.
static LogicalResult verifyQuantParams(Operation *op, Value x, Value scale,
                                       Value zeroPoint, int64_t axis,
                                       int64_t blockSize, Value quantized) {
  int64_t xRank = rankOf(x), sRank = rankOf(scale);
  if (blockSize < 0)
    return op->emitOpError() << "block_size must be >= 0, got " << blockSize;
  // A 1-element 1-D scale is per-tensor, like a 0-D one.
  auto st = dyn_cast<RankedTensorType>(scale.getType());
  bool perTensor = sRank == 0 || (st && st.hasStaticShape() &&
                                  st.getNumElements() == 1 && blockSize == 0);
  if ((!perTensor || blockSize > 0) &&
      failed(checkAxis(op, "axis", axis, xRank)))
    return failure();
  if (sRank == 1 && !perTensor && blockSize == 0 && xRank >= 0) {
    int64_t a = axis < 0 ? axis + xRank : axis;
    if (conflict(dimOf(scale, 0), dimOf(x, a)))
      return op->emitOpError() << "per-axis scale has " << dimOf(scale, 0)
                               << " elements but axis " << axis << " has "
                               << dimOf(x, a) << " channels";
  }
  if (blockSize > 0 && xRank > 0 && sRank == xRank) {
    int64_t a = axis < 0 ? axis + xRank : axis;
    int64_t n = dimOf(x, a), s = dimOf(scale, a);
    if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(s) &&
        s != (n + blockSize - 1) / blockSize)
      return op->emitOpError()
             << "blocked scale has " << s << " blocks on axis " << axis
             << ", expected ceil(" << n << "/" << blockSize << ")";
  }
  // Constant scales (the usual case: quantized weights) must be usable.
  ElementsAttr scaleAttr;
  if (matchPattern(scale, m_Constant(&scaleAttr)) &&
      cast<ShapedType>(scaleAttr.getType()).getNumElements() <= (1 << 20)) {
    if (auto values = readFloatElements(scaleAttr))
      for (double s : *values)
        if (!(s > 0) || !std::isfinite(s))
          return op->emitOpError()
                 << "scale " << s << " must be positive and finite";
  }
  if (!isNone(zeroPoint)) {
    auto zt = dyn_cast<RankedTensorType>(zeroPoint.getType());
    auto st = dyn_cast<RankedTensorType>(scale.getType());
    // Same shape, except that exporters mix 0-D and 1-element 1-D tensors.
    if (zt && st && zt.getShape() != st.getShape() &&
        !(zt.hasStaticShape() && st.hasStaticShape() &&
          zt.getNumElements() == 1 && st.getNumElements() == 1))
      return op->emitOpError("zero point and scale must have the same shape");
    if (quantized && cast<TensorType>(zeroPoint.getType()).getElementType() !=
                         cast<TensorType>(quantized.getType()).getElementType())
      return op->emitOpError()
             << "zero point type "
             << cast<TensorType>(zeroPoint.getType()).getElementType()
             << " differs from the quantized type "
             << cast<TensorType>(quantized.getType()).getElementType();
    auto zpType = cast<TensorType>(zeroPoint.getType()).getElementType();
    if (zpType.isInteger(32))
      if (auto zp = getConstantInts(zeroPoint))
        if (llvm::any_of(*zp, [](int64_t v) { return v != 0; }))
          return op->emitOpError("int32 zero points must be 0");
  }
  return success();
}

LogicalResult DequantizeLinearOp::verify() {
  return verifyQuantParams(*this, getX(), getXScale(), getXZeroPoint(),
                           i64(getAxis()), i64(getBlockSize()), getX());
}

LogicalResult QuantizeLinearOp::verify() {
  if (failed(checkBool(*this, "saturate", i64(getSaturate()))))
    return failure();
  return verifyQuantParams(*this, getX(), getYScale(), getYZeroPoint(),
                           i64(getAxis()), i64(getBlockSize()), getY());
}

LogicalResult EinsumOp::verify() {
  StringRef eq = getEquation();
  std::string compact;
  for (char c : eq)
    if (c != ' ')
      compact.push_back(c);
  StringRef lhs = compact, rhs;
  size_t arrow = lhs.find("->");
  if (arrow != StringRef::npos) {
    rhs = lhs.substr(arrow + 2);
    lhs = lhs.substr(0, arrow);
    if (rhs.contains("->"))
      return emitOpError() << "equation '" << eq << "' has more than one '->'";
  }
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != getInputs().size())
    return emitOpError() << "equation '" << eq << "' has " << terms.size()
                         << " input terms for " << getInputs().size()
                         << " inputs";
  auto checkTerm = [&](StringRef term) -> FailureOr<int64_t> {
    int64_t letters = 0;
    bool ellipsis = false;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.substr(i).starts_with("...")) {
        if (ellipsis)
          return emitOpError() << "term '" << term << "' has two ellipses";
        ellipsis = true;
        i += 2;
        continue;
      }
      if (!llvm::isAlpha(term[i]))
        return emitOpError() << "equation '" << eq
                             << "' has invalid character '" << term[i] << "'";
      ++letters;
    }
    return ellipsis ? -letters - 1 : letters;
  };
  for (auto [term, input] : llvm::zip(terms, getInputs())) {
    FailureOr<int64_t> letters = checkTerm(term);
    if (failed(letters))
      return failure();
    int64_t r = rankOf(input);
    if (r < 0)
      continue;
    if (*letters >= 0 && *letters != r)
      return emitOpError() << "term '" << term << "' names " << *letters
                           << " dims but its input has rank " << r;
    if (*letters < 0 && -*letters - 1 > r)
      return emitOpError() << "term '" << term << "' names more dims than rank "
                           << r;
  }
  if (!rhs.empty() && failed(checkTerm(rhs)))
    return failure();
  return success();
}

LogicalResult ExpandOp::verify() {
  if (rankOf(getShape()) >= 0 && rankOf(getShape()) != 1)
    return emitOpError("shape input must be 1-D");
  return success();
}

LogicalResult FlattenOp::verify() {
  return checkAxis(*this, "axis", i64(getAxis()), rankOf(getInput()),
                   /*inclusiveEnd=*/true);
}

LogicalResult GatherOp::verify() {
  int64_t rank = rankOf(getData());
  if (rank == 0)
    return emitOpError("data must have rank >= 1");
  return checkAxis(*this, "axis", i64(getAxis()), rank);
}

LogicalResult GatherElementsOp::verify() {
  int64_t rank = rankOf(getData()), iRank = rankOf(getIndices());
  if (rank >= 0 && iRank >= 0 && rank != iRank)
    return emitOpError() << "indices rank " << iRank
                         << " differs from data rank " << rank;
  return checkAxis(*this, "axis", i64(getAxis()), rank);
}

LogicalResult GemmOp::verify() {
  if (failed(checkBool(*this, "transA", i64(getTransA()))) ||
      failed(checkBool(*this, "transB", i64(getTransB()))))
    return failure();
  int64_t ra = rankOf(getA()), rb = rankOf(getB());
  if ((ra >= 0 && ra != 2) || (rb >= 0 && rb != 2))
    return emitOpError("A and B must be 2-D");
  if (ra == 2 && rb == 2) {
    int64_t ka = dimOf(getA(), getTransA() ? 0 : 1);
    int64_t kb = dimOf(getB(), getTransB() ? 1 : 0);
    if (conflict(ka, kb))
      return emitOpError() << "contraction dims differ: " << ka << " vs " << kb;
  }
  return success();
}

static LogicalResult verifyNorm(Operation *op, Value x, Value scale,
                                int64_t axis) {
  int64_t rank = rankOf(x);
  if (failed(checkAxis(op, "axis", axis, rank)))
    return failure();
  int64_t sRank = rankOf(scale);
  if (rank >= 0 && sRank >= 0) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (sRank > rank - a)
      return op->emitOpError() << "scale rank " << sRank
                               << " exceeds the normalized rank " << rank - a;
  }
  return success();
}

LogicalResult LayerNormalizationOp::verify() {
  return verifyNorm(*this, getX(), getScale(), i64(getAxis()));
}

LogicalResult RMSNormalizationOp::verify() {
  return verifyNorm(*this, getX(), getScale(), i64(getAxis()));
}

LogicalResult MatMulOp::verify() {
  int64_t ra = rankOf(getA()), rb = rankOf(getB());
  if (ra == 0 || rb == 0)
    return emitOpError("operands must have rank >= 1");
  if (ra > 0 && rb > 0) {
    int64_t ka = dimOf(getA(), ra - 1);
    int64_t kb = dimOf(getB(), rb == 1 ? 0 : rb - 2);
    if (conflict(ka, kb))
      return emitOpError() << "contraction dims differ: " << ka << " vs " << kb;
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(checkBool(*this, "allowzero", i64(getAllowzero()))))
    return failure();
  if (rankOf(getShape()) >= 0 && rankOf(getShape()) != 1)
    return emitOpError("shape input must be 1-D");
  auto shape = getConstantInts(getShape());
  if (!shape)
    return success();
  int64_t inferred = 0;
  bool zero = false;
  for (int64_t d : *shape) {
    if (d < -1)
      return emitOpError() << "shape has invalid dim " << d;
    inferred += d == -1;
    zero |= d == 0;
  }
  if (inferred > 1)
    return emitOpError("shape has more than one -1");
  if (inferred && zero && getAllowzero())
    return emitOpError("shape mixes -1 with 0 while allowzero = 1");
  return success();
}

static LogicalResult verifyRotary(Operation *op, int64_t interleaved,
                                  int64_t rotaryDim,
                                  std::optional<uint64_t> heads) {
  if (failed(checkBool(op, "interleaved", interleaved)))
    return failure();
  if (rotaryDim < 0 || rotaryDim % 2 != 0)
    return op->emitOpError()
           << "rotary_embedding_dim must be even and >= 0, got " << rotaryDim;
  if (heads && i64(*heads) < 0)
    return op->emitOpError("num_heads must be >= 0");
  return success();
}

LogicalResult RotaryEmbeddingOp::verify() {
  int64_t rank = rankOf(getX());
  if (rank >= 0 && rank != 3 && rank != 4)
    return emitOpError() << "input must have rank 3 or 4, got " << rank;
  if (rank == 3 && !getNumHeads())
    return emitOpError("3-D input needs num_heads");
  return verifyRotary(*this, i64(getInterleaved()),
                      i64(getRotaryEmbeddingDim()), getNumHeads());
}

LogicalResult MsRotaryEmbeddingOp::verify() {
  return verifyRotary(*this, i64(getInterleaved().value_or(0)),
                      i64(getRotaryEmbeddingDim().value_or(0)), getNumHeads());
}

LogicalResult SplitOp::verify() {
  int64_t rank = rankOf(getInput());
  if (failed(checkAxis(*this, "axis", i64(getAxis()), rank)))
    return failure();
  int64_t nOut = getOutputs().size();
  if (auto n = getNumOutputs()) {
    if (!isNone(getSplit()))
      return emitOpError("takes either a split input or num_outputs, not both");
    if (i64(*n) != nOut)
      return emitOpError() << "num_outputs " << i64(*n) << " but the op has "
                           << nOut << " results";
  }
  auto sizes = getConstantInts(getSplit());
  if (!sizes)
    return success();
  if (static_cast<int64_t>(sizes->size()) != nOut)
    return emitOpError() << "split has " << sizes->size() << " sizes for "
                         << nOut << " outputs";
  int64_t total = 0;
  for (int64_t s : *sizes) {
    if (s < 0)
      return emitOpError() << "split size " << s << " is negative";
    total += s;
  }
  if (rank > 0) {
    int64_t a = i64(getAxis()) < 0 ? i64(getAxis()) + rank : i64(getAxis());
    int64_t dim = dimOf(getInput(), a);
    if (!ShapedType::isDynamic(dim) && dim != total)
      return emitOpError() << "split sizes sum to " << total << " but dim " << a
                           << " is " << dim;
  }
  return success();
}

LogicalResult SqueezeOp::verify() {
  if (auto axes = getConstantInts(getAxes()))
    return checkAxesList(*this, *axes, rankOf(getData()));
  return success();
}

LogicalResult UnsqueezeOp::verify() {
  auto axes = getConstantInts(getAxes());
  if (!axes)
    return success();
  int64_t rank = rankOf(getData());
  return checkAxesList(
      *this, *axes, rank < 0 ? -1 : rank + static_cast<int64_t>(axes->size()));
}

LogicalResult TopKOp::verify() {
  if (failed(checkBool(*this, "largest", i64(getLargest()))) ||
      failed(checkBool(*this, "sorted", i64(getSorted()))))
    return failure();
  if (auto k = getConstantInts(getK())) {
    if (k->size() != 1)
      return emitOpError("K must hold one value");
    if ((*k)[0] < 0)
      return emitOpError() << "K must be >= 0, got " << (*k)[0];
  }
  return checkAxis(*this, "axis", i64(getAxis()), rankOf(getX()));
}

LogicalResult TransposeOp::verify() {
  auto perm = getPerm();
  if (!perm)
    return success();
  int64_t rank = rankOf(getData());
  if (rank >= 0 && static_cast<int64_t>(perm->size()) != rank)
    return emitOpError() << "perm has " << perm->size() << " entries for rank "
                         << rank;
  int64_t n = perm->size();
  SmallVector<bool> seen(n, false);
  for (Attribute a : *perm) {
    int64_t p = cast<IntegerAttr>(a).getInt();
    if (p < 0 || p >= n || seen[p])
      return emitOpError("perm is not a permutation of [0, rank)");
    seen[p] = true;
  }
  return success();
}

LogicalResult TriluOp::verify() {
  if (failed(checkBool(*this, "upper", i64(getUpper()))))
    return failure();
  int64_t rank = rankOf(getInput());
  if (rank >= 0 && rank < 2)
    return emitOpError() << "input must have rank >= 2, got " << rank;
  return success();
}

LogicalResult MsGroupQueryAttentionOp::verify() {
  int64_t heads = i64(getNumHeads()), kvHeads = i64(getKvNumHeads());
  if (heads <= 0 || kvHeads <= 0)
    return emitOpError("num_heads and kv_num_heads must be positive");
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads " << heads
                         << " is not a multiple of kv_num_heads " << kvHeads;
  return success();
}

LogicalResult MsGatherBlockQuantizedOp::verify() {
  int64_t bits = i64(getBits()), block = i64(getBlockSize());
  Type data = getElementTypeOrSelf(getData().getType());
  bool isFloat8 = isa<FloatType>(data);
  if (data.isUnsignedInteger(8) ? bits != 2 && bits != 4 && bits != 8 : !isFloat8 && bits != 4)
    return emitOpError() << "bits " << bits << " does not fit data of type " << data;
  if (!(isFloat8 && block == 0) && (block < 16 || !llvm::isPowerOf2_64(block)))
    return emitOpError() << "block_size must be a power of 2 >= 16, got " << block;
  int64_t rank = rankOf(getData());
  if (rank >= 0 && rankOf(getScales()) >= 0 && rankOf(getScales()) != rank)
    return emitOpError() << "scales must have the data's rank " << rank;
  if (rank >= 0 && (i64(getGatherAxis()) < -rank || i64(getGatherAxis()) >= rank ||
                    i64(getQuantizeAxis()) < -rank || i64(getQuantizeAxis()) >= rank))
    return emitOpError() << "gather_axis and quantize_axis must be in [-" << rank << ", "
                         << rank << ")";
  return success();
}

LogicalResult MsMatMulNBitsOp::verify() {
  int64_t bits = i64(getBits()), block = i64(getBlockSize());
  int64_t k = i64(getK()), n = i64(getN());
  if (bits != 2 && bits != 4 && bits != 8)
    return emitOpError() << "bits must be 2, 4 or 8, got " << bits;
  if (block < 16 || !llvm::isPowerOf2_64(block))
    return emitOpError() << "block_size must be a power of 2 >= 16, got "
                         << block;
  if (k <= 0 || n <= 0)
    return emitOpError() << "K and N must be positive, got K=" << k
                         << " N=" << n;
  // The last block of a column may be partial (onnxruntime pads it).
  int64_t blocks = (k + block - 1) / block;
  if (rankOf(getB()) >= 0) {
    auto bType = cast<RankedTensorType>(getB().getType());
    int64_t blobBytes = block * bits / 8;
    bool ok3 = bType.getRank() == 3 && !conflict(bType.getDimSize(0), n) &&
               !conflict(bType.getDimSize(1), blocks) &&
               !conflict(bType.getDimSize(2), blobBytes);
    bool ok2 = bType.getRank() == 2 && !conflict(bType.getDimSize(0), n) &&
               !conflict(bType.getDimSize(1), blocks * blobBytes);
    if (!ok3 && !ok2)
      return emitOpError() << "packed weight B has type " << bType
                           << ", expected [" << n << ", " << blocks << ", "
                           << blobBytes << "]";
  }
  int64_t kDim = rankOf(getA()) > 0 ? dimOf(getA(), rankOf(getA()) - 1)
                                    : ShapedType::kDynamic;
  if (conflict(kDim, k))
    return emitOpError() << "A's last dim " << kDim << " differs from K=" << k;
  return success();
}

#define GET_OP_CLASSES
#include "dialects/onnx/IR/ONNXOps.cpp.inc"
