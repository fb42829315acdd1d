//===- Rope.cpp - raise rotary position embeddings ------------------------===//
//
// Part of xfmr.
//
// The GPT-NeoX/Llama form that Hugging Face exports:
//   x * cos + rotate_half(x) * sin,
//   rotate_half(x) = Concat(Neg(x[..., R:]), x[..., :R], axis=-1)
// with cos/sin = Unsqueeze(Cos/Sin(Concat(f, f, -1)) [* scaling], 1), where
// f = positions x inverse frequencies ([B, S, R]). The op takes the angle
// tables once ([B, S, R]), so the pass proves the two halves are equal by
// finding Concat(f, f) and rebuilds Cos(f) and Sin(f). Older exports gather
// rows of constant cos/sin caches by position ids
// (Gather(Slice(cache, 0:S), position_ids)): there the halves are compared
// value by value and the op gets the first halves of the caches.
//
// gpt-oss's form rotates the two halves with half-width tables:
//   Concat(x1 * cos - x2 * sin, x2 * cos + x1 * sin, axis=-1),
//   x1, x2 = Split(x, 2, -1) | Slice(x, 0:R), Slice(x, R:2R),
// with cos/sin = Unsqueeze(Cos/Sin(f) [* scaling], 1) (Casts allowed).
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

/// `x[..., begin:end]` on the last axis (steps absent or 1); returns x.
Value sliceOfLastAxis(Value v, int64_t &begin, int64_t &end) {
  auto slice = def<onnx::SliceOp>(v);
  if (!slice)
    return nullptr;
  int64_t rank = rankOf(slice.getData());
  auto starts = constantInts(slice.getStarts());
  auto ends = constantInts(slice.getEnds());
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1)
    return nullptr;
  if (!isa<NoneType>(slice.getAxes().getType()) && !isLastAxisOnly(slice.getAxes(), rank))
    return nullptr;
  if (isa<NoneType>(slice.getAxes().getType()) && rank != 1)
    return nullptr;
  if (!isa<NoneType>(slice.getSteps().getType())) {
    auto steps = constantInts(slice.getSteps());
    if (!steps || steps->size() != 1 || (*steps)[0] != 1)
      return nullptr;
  }
  int64_t size = dimOf(slice.getData(), -1);
  if (ShapedType::isDynamic(size)) {
    // A rotary width shape inference left dynamic: the split reshape's
    // (raiseRope asserts it at run time).
    auto derived = splitDim(slice.getData(), rank - 1);
    if (!derived)
      return nullptr;
    size = *derived;
  }
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  begin = clampIndex((*starts)[0]);
  end = clampIndex((*ends)[0]);
  return slice.getData();
}

/// For a cos or sin table as the attention input sees it ([B|1, 1, S, 2R]),
/// the angle function applied to `f` ([B|1, S, R]) and its scaling.
struct AngleTable {
  Value freqs;                    ///< Cos/Sin(Concat(freqs, freqs)) form
  std::optional<double> scaling;
  DenseElementsAttr halfCache;    ///< constant cache form: cache[:, :R]
  Value positions;
};

/// Gather(Slice(cache, [0], [n], [0])?, positions) of a constant [P, 2R]
/// f32 cache whose two halves are equal.
FailureOr<AngleTable> matchCachedTable(Value v) {
  auto gather = def<onnx::GatherOp>(v);
  if (!gather || gather.getAxis() != 0)
    return failure();
  Value cache = gather.getData();
  if (auto slice = def<onnx::SliceOp>(cache)) {
    auto starts = constantInts(slice.getStarts());
    auto axes = constantInts(slice.getAxes());
    bool unitSteps = isa<NoneType>(slice.getSteps().getType()) ||
                     constantInts(slice.getSteps()) == SmallVector<int64_t>{1};
    if (!starts || *starts != SmallVector<int64_t>{0} || !axes ||
        *axes != SmallVector<int64_t>{0} || !unitSteps)
      return failure();
    cache = slice.getData();
  }
  auto type = dyn_cast<RankedTensorType>(cache.getType());
  if (!type || type.getRank() != 2 || !type.hasStaticShape() || type.getDimSize(1) % 2)
    return failure();
  auto values = floatValues(cache);
  if (!values)
    return failure();
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1), half = width / 2;
  SmallVector<float> first;
  first.reserve(rows * half);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < half; ++c) {
      float a = (*values)[r * width + c], b = (*values)[r * width + c + half];
      if (a != b)
        return failure();
      first.push_back(a);
    }
  AngleTable t;
  t.halfCache = DenseElementsAttr::get(
      RankedTensorType::get({rows, half}, type.getElementType()), ArrayRef<float>(first));
  t.positions = gather.getIndices();
  return t;
}
/// The table Unsqueeze(T, 1) with T = [Mul(scaling)] TrigOp(g): with
/// `doubled`, g = Concat(f, f, -1) (or T rows of a constant cache with equal
/// halves), else g = f, the half-width angles themselves (gpt-oss).
template <typename TrigOp>
FailureOr<AngleTable> matchAngleTable(Value table, bool doubled = true) {
  auto unsq = def<onnx::UnsqueezeOp>(table);
  auto axes = unsq ? constantInts(unsq.getAxes()) : std::nullopt;
  if (!axes || axes->size() != 1 || (*axes)[0] != 1)
    return failure();
  Value v = unsq.getData();
  if (auto cached = matchCachedTable(v); doubled && succeeded(cached))
    return cached;
  if (!doubled)
    v = stripCasts(v);
  AngleTable result;
  if (auto mul = def<onnx::MulOp>(v)) {
    for (Value side : {mul.getA(), mul.getB()})
      if (auto s = scalarValue(side)) {
        result.scaling = *s;
        v = otherOperand(mul, side);
      }
    if (!result.scaling)
      return failure();
  }
  auto trig = def<TrigOp>(doubled ? v : stripCasts(v));
  if (trig && !doubled) {
    result.freqs = trig.getInput();
    return result;
  }
  auto concat = trig ? def<onnx::ConcatOp>(trig.getInput()) : onnx::ConcatOp();
  if (!concat || concat.getInputs().size() != 2 ||
      concat.getInputs()[0] != concat.getInputs()[1] ||
      !isLastAxis(concat.getAxis(), rankOf(concat.getConcatResult())))
    return failure();
  result.freqs = concat.getInputs()[0];
  return result;
}

template <typename TrigOp>
Value buildTable(OpBuilder &b, Location loc, const AngleTable &t) {
  if (t.halfCache) {
    Value cache = onnx::ConstantOp::create(b, loc, t.halfCache.getType(), t.halfCache, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr);
    auto posType = cast<RankedTensorType>(t.positions.getType());
    SmallVector<int64_t> shape(posType.getShape());
    shape.push_back(t.halfCache.getType().getDimSize(1));
    return onnx::GatherOp::create(b, loc, RankedTensorType::get(shape, t.halfCache.getElementType()),
                                  cache, t.positions, b.getI64IntegerAttr(0));
  }
  Value v = TrigOp::create(b, loc, t.freqs.getType(), t.freqs);
  if (t.scaling && *t.scaling != 1.0) {
    auto scalar = RankedTensorType::get({}, elementTypeOf(v));
    v = onnx::MulOp::create(b, loc, v.getType(), v,
                            floatConstant(b, loc, scalar, *t.scaling));
  }
  return v;
}

/// Replaces `old` by xfmr.rope of `x` (head dim `d`) over the tables,
/// built before `before`.
void formRope(IRRewriter &rewriter, Operation *before, Value x, int64_t d,
              const AngleTable &cosTable, const AngleTable &sinTable, Value old) {
  Location loc = before->getLoc();
  rewriter.setInsertionPoint(before);
  Value cosR = buildTable<onnx::CosOp>(rewriter, loc, cosTable);
  Value sinR = buildTable<onnx::SinOp>(rewriter, loc, sinTable);
  Value result = RopeOp::create(rewriter, loc, x, cosR, sinR, rewriter.getI64IntegerAttr(d),
                                rewriter.getBoolAttr(false));
  if (result.getType() != old.getType())
    result = tensor::CastOp::create(rewriter, loc, old.getType(), result);
  rewriter.replaceAllUsesWith(old, result);
}

/// `v` as one half of the last axis of x: Split(x, 2 equal parts, -1)
/// result `which`, or Slice(x, [0, R) or [R, 2R)) -> x and which half.
std::optional<std::pair<Value, int>> halfOf(Value v) {
  if (auto split = def<onnx::SplitOp>(v)) {
    Value x = split.getInput();
    if (split->getNumResults() != 2 || !isLastAxis(split.getAxis(), rankOf(x)))
      return std::nullopt;
    if (!isa<NoneType>(split.getSplit().getType())) {
      auto sizes = constantInts(split.getSplit());
      if (!sizes || sizes->size() != 2 || (*sizes)[0] != (*sizes)[1])
        return std::nullopt;
    }
    return std::pair(x, static_cast<int>(cast<OpResult>(v).getResultNumber()));
  }
  int64_t begin, end;
  Value x = sliceOfLastAxis(v, begin, end);
  int64_t d = x ? dimOf(x, -1) : 0;
  if (!x || d % 2 || end - begin != d / 2 || (begin != 0 && begin != d / 2))
    return std::nullopt;
  return std::pair(x, begin == 0 ? 0 : 1);
}

/// Mul(a, other) or Mul(other, a) -> other.
Value timesWhat(Value v, Value a) {
  auto mul = def<onnx::MulOp>(v);
  if (!mul || (mul.getA() != a && mul.getB() != a))
    return nullptr;
  return mul.getA() == a ? mul.getB() : mul.getA();
}

} // namespace

bool raiseHalvesRope(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto concat = cast<onnx::ConcatOp>(anchor);
  if (concat.getInputs().size() != 2)
    return false;
  auto sub = def<onnx::SubOp>(concat.getInputs()[0]);
  auto add = def<onnx::AddOp>(concat.getInputs()[1]);
  if (!sub || !add || !isLastAxis(concat.getAxis(), rankOf(concat.getConcatResult())))
    return false;
  // sub = x1 * cos - x2 * sin
  Value x, x1, x2, cos, sin;
  for (auto mulCos = def<onnx::MulOp>(sub.getA()); mulCos;) {
    for (Value a : {mulCos.getA(), mulCos.getB()})
      if (auto h = halfOf(a); h && h->second == 0) {
        x = h->first;
        x1 = a;
        cos = otherOperand(mulCos, a);
      }
    break;
  }
  for (auto mulSin = def<onnx::MulOp>(sub.getB()); mulSin && x;) {
    for (Value a : {mulSin.getA(), mulSin.getB()})
      if (auto h = halfOf(a); h && h->first == x && h->second == 1) {
        x2 = a;
        sin = otherOperand(mulSin, a);
      }
    break;
  }
  if (!x2)
    return false;
  // add = x2 * cos + x1 * sin, either order.
  bool matches = false;
  for (auto [p, q] : {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())})
    matches |= timesWhat(p, x2) == cos && timesWhat(q, x1) == sin;
  if (!matches)
    return false;
  if (rankOf(x) != 4) {
    log.unfused(anchor, "rope", "input is not [batch, heads, sequence, head_dim]");
    return false;
  }
  int64_t d = dimOf(x, -1), half = d / 2;
  auto cosTable = matchAngleTable<onnx::CosOp>(cos, /*doubled=*/false);
  auto sinTable = matchAngleTable<onnx::SinOp>(sin, /*doubled=*/false);
  if (failed(cosTable) || failed(sinTable) || cosTable->freqs != sinTable->freqs ||
      cosTable->scaling != sinTable->scaling || rankOf(cosTable->freqs) != 3 ||
      dimOf(cosTable->freqs, -1) != half) {
    log.unfused(anchor, "rope", "cos/sin are not Unsqueeze(Cos/Sin(f) [* scaling], 1) of "
                                "[batch, sequence, head_dim / 2] angles");
    return false;
  }
  formRope(rewriter, concat, x, d, *cosTable, *sinTable, concat.getConcatResult());
  log.formed("rope");
  return true;
}

bool raiseRope(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto concat = cast<onnx::ConcatOp>(anchor);
  // Candidates: Concat(Neg(slice), slice) on the last axis.
  if (concat.getInputs().size() != 2 || !def<onnx::NegOp>(concat.getInputs()[0]))
    return false;
  int64_t hiBegin, hiEnd, loBegin, loEnd;
  Value x = sliceOfLastAxis(def<onnx::NegOp>(concat.getInputs()[0]).getX(), hiBegin, hiEnd);
  Value x2 = sliceOfLastAxis(concat.getInputs()[1], loBegin, loEnd);
  if (!x || x != x2 || !isLastAxis(concat.getAxis(), rankOf(x)))
    return false;
  SmallVector<int64_t> xShape = splitShape(x, {rankOf(x) - 1});
  int64_t d = xShape.back();
  int64_t half = d / 2;
  if (loBegin != 0 || loEnd != half || hiBegin != half || hiEnd != d || d % 2) {
    log.unfused(anchor, "rope", "rotate_half does not split the last axis in halves "
                                "(partial rotary is not raised yet)");
    return false;
  }
  if (rankOf(x) != 4) {
    log.unfused(anchor, "rope", "input is not [batch, heads, sequence, head_dim]");
    return false;
  }
  Value rotated = concat.getConcatResult();
  auto mulSin = soleUserOf<onnx::MulOp>(rotated);
  auto add = mulSin ? soleUserOf<onnx::AddOp>(mulSin.getC()) : onnx::AddOp();
  auto mulCos = add ? def<onnx::MulOp>(otherOperand(add, mulSin.getC())) : onnx::MulOp();
  Value sin = mulSin ? otherOperand(mulSin, rotated) : Value();
  Value cos = mulCos ? otherOperand(mulCos, x) : Value();
  if (!sin || !cos) {
    log.unfused(anchor, "rope", "not of the form x * cos + rotate_half(x) * sin");
    return false;
  }
  auto cosTable = matchAngleTable<onnx::CosOp>(cos);
  auto sinTable = matchAngleTable<onnx::SinOp>(sin);
  if (failed(cosTable) || failed(sinTable) || cosTable->freqs != sinTable->freqs ||
      cosTable->positions != sinTable->positions) {
    log.unfused(anchor, "rope", "cos/sin are neither Unsqueeze(Cos/Sin(Concat(f, f)), 1) "
                                "nor rows of constant caches with equal halves");
    return false;
  }
  Value freqs = cosTable->freqs ? cosTable->freqs : cosTable->positions;
  if (cosTable->freqs ? (rankOf(freqs) != 3 || dimOf(freqs, -1) != half)
                      : (rankOf(freqs) != 2 ||
                         cosTable->halfCache.getType().getDimSize(1) != half)) {
    log.unfused(anchor, "rope", "angles are not [batch, sequence, head_dim / 2]");
    return false;
  }
  rewriter.setInsertionPoint(add);
  x = withStaticDims(rewriter, add.getLoc(), x, xShape, nodeName(anchor) + ": the rotated axis");
  formRope(rewriter, add, x, d, *cosTable, *sinTable, add.getC());
  log.formed("rope");
  return true;
}

} // namespace xfmr::raise
