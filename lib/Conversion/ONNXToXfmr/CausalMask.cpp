//===- CausalMask.cpp - recognise exporter-built causal masks -------------===//
//
// Part of xfmr.
//
// Exporters build the causal mask as a [B, 1, Sq, Skv] tensor in the graph;
// the attention op has a `causal` flag instead, which lets the kernel skip
// the tiles above the diagonal and removes the S x S tensor. Two families:
//
// GPT-2: Where(keep, scores, lowest) with keep = bias[:, :, r0 : r0 + Sq, :Skv]
//   of a constant lower-triangular bool buffer: keep[i, j] = j <= r0 + i.
//
// Hugging Face _prepare_4d_causal_attention_mask_with_cache_position
// (Llama, Mistral, Mixtral... in transformers 4.4x):
//   C  = Trilu(full(min), k=1) * (Range(0, T) > Range(p0, p1)[:, None])
//        (Mixtral: without the Trilu; static shapes: folded constants)
//   E  = Expand(C[None, None])
//   Es = E[..., :L];  U = Where(Es + attention_mask[:, None, None, :] == 0, min, Es)
//   M  = ScatterND(E, grid(Es), U)[..., :Skv]
// C[i, j] = min exactly when j > p0 + i (p0 >= 0: the Trilu condition j > i
// is implied), and the ScatterND writes U over E's first L columns (its
// indices are the identity grid: Range(0, n_k) laid along axis k). So M is
// masked where j > p0 + i or attention_mask[b, j] == 0.
//
// Both become `causal = true` (bottom-right aligned: key j visible to query
// i when j <= i + Skv - Sq) plus, for HF, a [B, 1, 1, L] padding bias. What
// the structure cannot show (p0 = r0 = Skv - Sq, L = Skv) is checked at run
// time. Rows that see no key at all (a query at a left-padded position)
// were a uniform average over all keys and are now over the visible ones:
// the op leaves such rows unspecified.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

bool isAxis(Value axes, int64_t axis, int64_t rank) {
  auto v = constantInts(axes);
  return v && v->size() == 1 && ((*v)[0] == axis || (*v)[0] + rank == axis);
}

bool unitSteps(onnx::SliceOp slice) {
  return isa<NoneType>(slice.getSteps().getType()) ||
         constantInts(slice.getSteps()) == SmallVector<int64_t>{1};
}

/// `x[..., start : end]` on axis `axis` with unit steps: returns x.
Value sliceOnAxis(Value v, int64_t axis, Value &start, Value &end) {
  auto slice = def<onnx::SliceOp>(v);
  if (!slice || !isAxis(slice.getAxes(), axis, rankOf(slice.getData())) || !unitSteps(slice))
    return nullptr;
  start = slice.getStarts();
  end = slice.getEnds();
  return slice.getData();
}

bool isZeros(Value v) {
  auto c = constantInts(v);
  return c && llvm::all_of(*c, [](int64_t x) { return x == 0; });
}

/// The value of a constant whose elements are all equal (splat, or a
/// resource blob of one repeated value).
std::optional<double> uniformValue(Value v) {
  if (auto s = scalarValue(v))
    return s;
  auto values = floatValues(v);
  if (!values || values->empty() ||
      llvm::any_of(*values, [&](float x) { return x != values->front(); }))
    return std::nullopt;
  return values->front();
}

/// Range(0, n, 1).
Value rangeFromZero(Value v) {
  auto range = def<onnx::RangeOp>(v);
  if (!range || !isScalar(range.getStart(), 0) || !isScalar(range.getDelta(), 1))
    return nullptr;
  return range.getLimit();
}

/// Unsqueeze(x, [axis]) -> x.
Value unsqueezed(Value v, int64_t axis) {
  auto u = def<onnx::UnsqueezeOp>(v);
  auto axes = u ? constantInts(u.getAxes()) : std::nullopt;
  if (!axes || axes->size() != 1 ||
      ((*axes)[0] != axis && (*axes)[0] + rankOf(u.getExpanded()) != axis))
    return nullptr;
  return u.getData();
}

/// Gather(Shape(of), k) -> whether it is.
bool isDimOf(Value v, Value of, int64_t k) {
  auto gather = def<onnx::GatherOp>(v);
  auto shape = gather ? def<onnx::ShapeOp>(gather.getData()) : onnx::ShapeOp();
  return shape && shape.getData() == of && !shape.getEndAttr() && shape.getStart() == 0 &&
         isScalar(gather.getIndices(), static_cast<double>(k));
}

/// Index component k of ScatterND indices: Unsqueeze(Expand(g, .), -1) with
/// g the values 0.. laid along axis k of a rank-4 grid.
bool isGridComponent(Value v, int64_t k, Value e, Value columns) {
  auto expand = def<onnx::ExpandOp>(unsqueezed(v, 4));
  if (!expand)
    return false;
  Value g = expand.getInput();
  if (k == 3) {
    Value start, end;
    Value range = sliceOnAxis(g, 0, start, end);
    return range && isZeros(start) && end == columns && isDimOf(rangeFromZero(range), e, 3);
  }
  auto reshape = def<onnx::ReshapeOp>(g);
  auto shape = reshape ? constantInts(reshape.getShape()) : std::nullopt;
  SmallVector<int64_t> want{-1};
  want.append(3 - k, 1);
  return shape && *shape == want && isDimOf(rangeFromZero(reshape.getData()), e, k);
}

struct HFMask {
  Value attentionMask; ///< [B, L] integer
  Value positionStart; ///< p0, a scalar
  Value columns;       ///< L, a 1-element tensor
};

/// A folded selector: a constant [S, T] float matrix of 1 where
/// j > p0 + i and 0 elsewhere, for one p0 >= 0 (with `masked`: a masking fill
/// there, i.e. C itself); returns p0 as a constant.
Value constantSelectorStart(Value sel, OpBuilder &b, bool masked = false) {
  auto type = dyn_cast<RankedTensorType>(sel.getType());
  std::optional<SmallVector<float>> f = floatValues(sel);
  if (!type || type.getRank() < 2 || !type.hasStaticShape() || !f ||
      type.getNumElements() != type.getDimSize(type.getRank() - 2) *
                                   type.getDimSize(type.getRank() - 1))
    return nullptr; // [S, T], or [1, 1, S, T] for a folded E
  int64_t rows = type.getDimSize(type.getRank() - 2), cols = type.getDimSize(type.getRank() - 1);
  const SmallVector<float> &values = *f;
  // p0 from row 0: the first column holding 1, minus one.
  int64_t first = cols;
  auto isSet = [&](float x) { return masked ? isMaskingFill(x) : x == 1.0f; };
  for (int64_t j = 0; j < cols; ++j)
    if (isSet(values[j])) {
      first = j;
      break;
    }
  int64_t p0 = first - 1;
  if (p0 < 0)
    return nullptr;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (isSet(values[i * cols + j]) != (j > p0 + i) ||
          (!isSet(values[i * cols + j]) && values[i * cols + j] != 0.0f))
        return nullptr;
  auto scalar = RankedTensorType::get({}, b.getI64Type());
  return onnx::ConstantOp::create(b, sel.getLoc(), scalar,
                                  DenseElementsAttr::get(scalar, b.getI64IntegerAttr(p0)),
                                  nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
}

/// Whether the constant int64 [n0, n1, n2, n3, 4] indices are the identity
/// grid (idx[b, h, i, j] = (b, h, i, j)) over E's first three dims and L
/// (a constant) columns.
bool isConstantGrid(Value idx, Value e, Value columns) {
  auto type = dyn_cast<RankedTensorType>(idx.getType());
  auto eType = cast<RankedTensorType>(e.getType());
  auto l = constantInts(columns);
  if (!type || type.getRank() != 5 || !type.hasStaticShape() || type.getDimSize(4) != 4 || !l ||
      l->size() != 1 || !eType.hasStaticShape() || type.getDimSize(3) != (*l)[0])
    return false;
  for (int64_t k = 0; k < 3; ++k)
    if (type.getDimSize(k) != eType.getDimSize(k))
      return false;
  auto values = constantInts(idx);
  if (!values)
    return false;
  int64_t at = 0;
  for (int64_t b0 = 0; b0 < type.getDimSize(0); ++b0)
    for (int64_t b1 = 0; b1 < type.getDimSize(1); ++b1)
      for (int64_t b2 = 0; b2 < type.getDimSize(2); ++b2)
        for (int64_t b3 = 0; b3 < type.getDimSize(3); ++b3, at += 4)
          if ((*values)[at] != b0 || (*values)[at + 1] != b1 || (*values)[at + 2] != b2 ||
              (*values)[at + 3] != b3)
            return false;
  return true;
}

/// C = Trilu(full(min), k=1) * Cast(Range(0, T) > Range(p0, p1)[:, None]).
Value causalRowStart(Value c, OpBuilder &b) {
  if (Value start = constantSelectorStart(c, b, /*masked=*/true))
    return start; // C folded to a constant (static shapes, no Trilu)
  auto mul = def<onnx::MulOp>(c);
  if (!mul)
    return nullptr;
  for (auto [tri, sel] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())}) {
    // The Trilu (Llama) may be absent (Mixtral): with it, min is kept where
    // j > i, implied by j > p0 + i for p0 >= 0.
    Value fullValue = tri;
    if (auto trilu = def<onnx::TriluOp>(tri)) {
      if (trilu.getUpper() != 1 || !isScalar(trilu.getK(), 1))
        continue;
      fullValue = trilu.getInput();
    }
    auto full = def<onnx::ConstantOfShapeOp>(fullValue);
    auto value = full && full.getValue() ? dyn_cast<DenseElementsAttr>(*full.getValue())
                                         : DenseElementsAttr();
    std::optional<double> fill =
        value && value.isSplat() && isa<FloatType>(value.getElementType())
            ? std::optional<double>(value.getSplatValue<APFloat>().convertToDouble())
            : uniformValue(fullValue); // a folded full(): a constant
    if (!fill || !isMaskingFill(*fill))
      continue;
    if (Value start = constantSelectorStart(sel, b))
      return start;
    auto cast = def<onnx::CastOp>(sel);
    auto greater = cast ? def<onnx::GreaterOp>(cast.getInput()) : onnx::GreaterOp();
    if (!greater || !rangeFromZero(greater.getA()))
      continue;
    auto rows = def<onnx::ReshapeOp>(greater.getB());
    auto shape = rows ? constantInts(rows.getShape()) : std::nullopt;
    auto range = rows ? def<onnx::RangeOp>(rows.getData()) : onnx::RangeOp();
    if (!shape || *shape != SmallVector<int64_t>{-1, 1} || !range ||
        !isScalar(range.getDelta(), 1))
      continue;
    return range.getStart();
  }
  return nullptr;
}

FailureOr<HFMask> matchHFMask(Value mask, OpBuilder &b) {
  Value x = mask, start, end;
  if (Value sliced = sliceOnAxis(x, 3, start, end); sliced && isZeros(start))
    x = sliced;
  auto scatter = def<onnx::ScatterNDOp>(x);
  if (!scatter || scatter.getReduction() != "none")
    return failure();
  Value e = scatter.getData();
  // E = Expand(C[None, None]).
  auto expandE = def<onnx::ExpandOp>(e);
  Value c = expandE ? unsqueezed(unsqueezed(expandE.getInput(), 1), 0) : Value();
  Value p0 = c ? causalRowStart(c, b) : constantSelectorStart(e, b, /*masked=*/true);
  if (!p0)
    return failure();
  // Updates: Where(Es + am == 0, min, Es) through Expand/Reshape to its own shape.
  Value u = scatter.getUpdates();
  while (isa_and_nonnull<onnx::ReshapeOp, onnx::ExpandOp>(u.getDefiningOp()))
    u = u.getDefiningOp()->getOperand(0);
  auto where = def<onnx::WhereOp>(u);
  if (!where || !scalarValue(where.getX()) || !isMaskingFill(*scalarValue(where.getX())))
    return failure();
  Value es = where.getY();
  Value columns;
  if (sliceOnAxis(es, 3, start, columns) != e || !isZeros(start))
    return failure();
  auto equal = def<onnx::EqualOp>(where.getCondition());
  if (!equal || !isScalar(equal.getB(), 0))
    return failure();
  auto add = def<onnx::AddOp>(equal.getA());
  Value padding = add ? otherOperand(add, es) : Value();
  auto cast = def<onnx::CastOp>(padding);
  Value am = cast ? unsqueezed(unsqueezed(cast.getInput(), 2), 1) : Value();
  if (!am || rankOf(am) != 2 || !isa<IntegerType>(elementTypeOf(am)))
    return failure();
  // Indices: the identity grid over Es.
  if (!isConstantGrid(scatter.getIndices(), e, columns)) {
    auto concat = def<onnx::ConcatOp>(scatter.getIndices());
    if (!concat || concat.getInputs().size() != 4)
      return failure();
    for (int64_t k = 0; k < 4; ++k)
      if (!isGridComponent(concat.getInputs()[k], k, e, columns))
        return failure();
  }
  return HFMask{am, p0, columns};
}

/// The values of a constant bool tensor (inline or resource blob).
std::optional<SmallVector<bool>> boolValues(Value v) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.getElementType().isInteger(1))
    return std::nullopt;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return llvm::to_vector(dense.getValues<bool>());
  if (auto blob = dyn_cast<DenseBoolResourceElementsAttr>(attr))
    if (auto data = blob.tryGetAsArrayRef();
        data && static_cast<int64_t>(data->size()) == attr.getNumElements())
      return SmallVector<bool>(data->begin(), data->end());
  return std::nullopt;
}

/// Whether the constant bool [1, 1, P, P] buffer is lower triangular.
bool isLowerTriangular(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() != 4 || !type.hasStaticShape() || type.getDimSize(0) != 1 ||
      type.getDimSize(1) != 1)
    return false;
  auto values = boolValues(v);
  if (!values)
    return false;
  int64_t rows = type.getDimSize(2), cols = type.getDimSize(3);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if ((*values)[r * cols + c] != (c <= r))
        return false;
  return true;
}

/// Asserts at run time that the first element of the integer tensor `v`
/// equals `expected` (an index).
void assertEquals(OpBuilder &b, Location loc, Value v, Value expected, const Twine &what) {
  SmallVector<Value> zeros(rankOf(v), arith::ConstantIndexOp::create(b, loc, 0));
  Value x = tensor::ExtractOp::create(b, loc, v, zeros);
  Value e = arith::IndexCastOp::create(b, loc, x.getType(), expected);
  Value same = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, e);
  cf::AssertOp::create(b, loc, same, what.str());
}

/// Skv - Sq of the attention.
Value keyOffset(OpBuilder &b, Location loc, AttentionOp op) {
  Value skv = tensor::DimOp::create(b, loc, op.getKey(), 2);
  Value sq = tensor::DimOp::create(b, loc, op.getQuery(), 2);
  return arith::SubIOp::create(b, loc, skv, sq);
}

} // namespace

std::optional<Value> causalKeepOffset(Value keep, int64_t sq, int64_t skv) {
  // A folded window (static shapes): the constant itself is the causal
  // pattern for these lengths; nothing is left to check at run time.
  auto type = dyn_cast<RankedTensorType>(keep.getType());
  if (type && type.getRank() == 4 && type.hasStaticShape() && type.getDimSize(0) == 1 &&
      type.getDimSize(1) == 1 && type.getDimSize(2) == sq && type.getDimSize(3) == skv &&
      !ShapedType::isDynamic(sq) && !ShapedType::isDynamic(skv)) {
    if (auto values = boolValues(keep)) {
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j)
          if ((*values)[i * skv + j] != (j <= i + skv - sq))
            return std::nullopt;
      return Value();
    }
  }
  // keep = bias[:, :, r0 : r1, :][..., 0 : c1] (either slice first).
  Value rowStart, rowEnd, colStart, colEnd;
  Value inner = sliceOnAxis(keep, 3, colStart, colEnd);
  Value base = inner ? sliceOnAxis(inner, 2, rowStart, rowEnd) : Value();
  if (!base) {
    inner = sliceOnAxis(keep, 2, rowStart, rowEnd);
    base = inner ? sliceOnAxis(inner, 3, colStart, colEnd) : Value();
  }
  if (!base || !isZeros(colStart) || !isLowerTriangular(base))
    return std::nullopt;
  return rowStart;
}

void assertCausalOffset(OpBuilder &b, Location loc, AttentionOp op, Value rowStart,
                        const Twine &what) {
  assertEquals(b, loc, rowStart, keyOffset(b, loc, op), what);
}

bool raiseCausalMask(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto op = cast<AttentionOp>(anchor);
  Value mask = op.getMask();
  if (!mask || op.getCausal() || !isa<FloatType>(elementTypeOf(mask)))
    return false;
  rewriter.setInsertionPoint(op);
  auto hf = matchHFMask(mask, rewriter);
  if (failed(hf)) {
    // A candidate: a mask assembled with ScatterND, as HF does.
    auto slice = def<onnx::SliceOp>(mask);
    if (def<onnx::ScatterNDOp>(slice ? slice.getData() : mask))
      log.unfused(anchor, "causal_mask",
                  "the mask is not Hugging Face's causal + padding construction");
    return false;
  }
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  std::string where = nodeName(op);
  assertEquals(rewriter, loc, hf->positionStart, keyOffset(rewriter, loc, op),
               where + ": the causal mask's first position is not the key/query length "
                       "difference");
  assertEquals(rewriter, loc, hf->columns, tensor::DimOp::create(rewriter, loc, op.getKey(), 2),
               where + ": attention_mask does not cover every key");
  // bias[b, 0, 0, j] = attention_mask[b, j] == 0 ? lowest : 0
  Type scoreType = elementTypeOf(mask);
  auto amType = cast<RankedTensorType>(hf->attentionMask.getType());
  auto scalarInt = RankedTensorType::get({}, amType.getElementType());
  Value zero = onnx::ConstantOp::create(
      rewriter, loc, scalarInt, DenseElementsAttr::get(scalarInt, rewriter.getIntegerAttr(
                                                                    scalarInt.getElementType(), 0)),
      nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  Value padded = onnx::EqualOp::create(
      rewriter, loc, amType.clone(rewriter.getI1Type()), hf->attentionMask, zero);
  auto scalar = RankedTensorType::get({}, scoreType);
  double lowest = -APFloat::getLargest(cast<FloatType>(scoreType).getFloatSemantics())
                       .convertToDouble();
  Value bias = onnx::WhereOp::create(rewriter, loc, amType.clone(scoreType), padded,
                                     floatConstant(rewriter, loc, scalar, lowest),
                                     floatConstant(rewriter, loc, scalar, 0.0));
  bias = unsqueeze(rewriter, loc, unsqueeze(rewriter, loc, bias, 1), 1);
  rewriter.modifyOpInPlace(op, [&] {
    op.getMaskMutable().assign(bias);
    op.setCausal(true);
  });
  log.formed("causal_mask");
  return true;
}

} // namespace xfmr::raise
