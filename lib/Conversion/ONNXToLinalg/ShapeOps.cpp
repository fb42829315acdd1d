//===- ShapeOps.cpp - data movement onnx ops to tensor/linalg -------------===//
//
// Part of xfmr.
//
// Constant, Reshape/Flatten/Squeeze/Unsqueeze (tensor.reshape with run-time
// extents), Transpose, Concat, Split, Slice, Expand, Tile, Pad, Shape, Size,
// ConstantOfShape, Range.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {

/// Element `i` of a rank-0/1 integer tensor as an index (constants fold).
Value extractIndex(OpBuilder &b, Location loc, Value t, int64_t i, bool uns = false) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<Value> at;
  if (type.getRank() == 1)
    at.push_back(indexConstant(b, loc, i));
  Value v = tensor::ExtractOp::create(b, loc, t, at);
  return toIndex(b, loc, v, uns);
}

Value numElements(OpBuilder &b, Location loc, Value x, int64_t from = 0,
                  int64_t to = -1) {
  auto t = cast<RankedTensorType>(x.getType());
  if (to < 0)
    to = t.getRank();
  Value n = indexConstant(b, loc, 1);
  for (int64_t d = from; d < to; ++d)
    n = arith::MulIOp::create(b, loc, n, dimValue(b, loc, x, d));
  return n;
}

/// A tensor-valued Constant -> arith.constant (the attribute retyped to the
/// signless result type).
struct ConstantLowering : ONNXOpLowering<onnx::ConstantOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ConstantOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
  /// float8 e4m3fn constants: xfmr-quantize-weights' fp8 weights, which only
  /// the product's micro-kernel reads.
  bool allowsFloat8() const override { return true; }
};

LogicalResult
ConstantLowering::lower(onnx::ConstantOp op, OpAdaptor adaptor,
                        ConversionPatternRewriter &rewriter) const {
  ElementsAttr attr = op.getValueAttr();
  RankedTensorType type = resultType(op);
  if (!attr || !type)
    return unsupported(op, "Constant without a tensor value");
  TypedAttr value;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    value = dense.getType() == type ? dense : dense.bitcast(type.getElementType());
  else if (auto res = dyn_cast<DenseResourceElementsAttr>(attr))
    value = DenseResourceElementsAttr::get(type, res.getRawHandle());
  else
    return unsupported(op, "Constant encoding");
  if (cast<ShapedType>(value.getType()).getShape() != type.getShape())
    return unsupported(op, "Constant shape differs from its result");
  rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, value);
  return success();
}

//===----------------------------------------------------------------------===//
// Reshape family
//===----------------------------------------------------------------------===//

/// Replaces `op` by `x` reshaped to extents `sizes`.
LogicalResult finishReshape(Operation *op, Value x, RankedTensorType type,
                            ArrayRef<Value> sizes,
                            ConversionPatternRewriter &rewriter,
                            UnsupportedLog &log) {
  if (static_cast<int64_t>(sizes.size()) != type.getRank())
    return recordUnsupported(log, op,
                             "result rank disagrees with the computed shape");
  rewriter.replaceOp(op, reshapeTo(rewriter, op->getLoc(), x, type, sizes));
  return success();
}

/// Reshape to a shape tensor: one path for constant and run-time shapes
/// (constants fold later).
struct ReshapeLowering : ONNXOpLowering<onnx::ReshapeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ReshapeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
ReshapeLowering::lower(onnx::ReshapeOp op, OpAdaptor adaptor,
                       ConversionPatternRewriter &rewriter) const {
  Location loc = op->getLoc();
  Value x = adaptor.getData(), shape = adaptor.getShape();
  RankedTensorType type = resultType(op);
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  auto sType = cast<RankedTensorType>(shape.getType());
  if (!sType.hasStaticShape() || sType.getRank() != 1 ||
      sType.getDimSize(0) != type.getRank())
    return unsupported(op, "shape of unknown length");
  // 0 copies the input extent unless allowzero; -1 takes what is left.
  bool allowZero = op.getAllowzero();
  Value zero = indexConstant(rewriter, loc, 0),
        one = indexConstant(rewriter, loc, 1);
  auto isNegative = [&](Value v) {
    return arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, v,
                                 zero);
  };
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    Value s = extractIndex(rewriter, loc, shape, i);
    if (!allowZero && i < rank) {
      Value isZero = arith::CmpIOp::create(rewriter, loc,
                                           arith::CmpIPredicate::eq, s, zero);
      s = arith::SelectOp::create(rewriter, loc, isZero,
                                  dimValue(rewriter, loc, x, i), s);
    }
    sizes.push_back(s);
  }
  Value total = numElements(rewriter, loc, x);
  Value known = one;
  for (Value s : sizes)
    known = arith::MulIOp::create(
        rewriter, loc, known,
        arith::SelectOp::create(rewriter, loc, isNegative(s), one, s));
  Value rest = arith::DivSIOp::create(
      rewriter, loc, total, arith::MaxSIOp::create(rewriter, loc, known, one));
  for (Value &s : sizes)
    s = arith::SelectOp::create(rewriter, loc, isNegative(s), rest, s);
  Value product = indexConstant(rewriter, loc, 1);
  for (Value s : sizes)
    product = arith::MulIOp::create(rewriter, loc, product, s);
  runtimeCheck(rewriter, loc,
               arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                     product, total),
               "Reshape: element count changes");
  return finishReshape(op, x, type, sizes, rewriter, log);
}

/// Flatten at `axis` -> a rank-2 reshape.
struct FlattenLowering : ONNXOpLowering<onnx::FlattenOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::FlattenOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op->getLoc();
    Value x = adaptor.getInput();
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    int64_t axis = op.getAxis();
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis > rank)
      return unsupported(op, "axis out of range");
    SmallVector<Value> sizes{numElements(rewriter, loc, x, 0, axis),
                             numElements(rewriter, loc, x, axis)};
    return finishReshape(op, x, resultType(op), sizes, rewriter, log);
  }
};

/// The axes of a Squeeze or Unsqueeze: the constant operand, or before
/// opset 13 the attribute (which the generated op, the latest schema, has
/// no accessor for). Fails if the operand is not a constant.
FailureOr<std::optional<SmallVector<int64_t>>>
squeezeAxes(Operation *op, Value converted, Value original) {
  if (isNone(converted))
    return intsAttr(op, "axes");
  auto axes = constantInts(converted, original);
  if (!axes)
    return failure();
  return axes;
}

/// Squeeze: drops the listed dims (all size-1 dims when none are listed).
struct SqueezeLowering : ONNXOpLowering<onnx::SqueezeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::SqueezeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
SqueezeLowering::lower(onnx::SqueezeOp op, OpAdaptor adaptor,
                       ConversionPatternRewriter &rewriter) const {
  Location loc = op->getLoc();
  Value x = adaptor.getData();
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  auto axes = squeezeAxes(op, adaptor.getAxes(), op.getAxes());
  if (failed(axes))
    return unsupported(op, "axes must be a constant");
  SmallVector<bool> drop(rank, false);
  if (!*axes || (*axes)->empty()) {
    for (int64_t d = 0; d < rank; ++d)
      drop[d] = xType.getDimSize(d) == 1;
  } else {
    for (int64_t a : **axes) {
      auto n = normalizeAxis(a, rank);
      if (!n)
        return unsupported(op, "axis out of range");
      drop[*n] = true;
    }
  }
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d])
      sizes.push_back(dimValue(rewriter, loc, x, d));
  return finishReshape(op, x, resultType(op), sizes, rewriter, log);
}

/// Unsqueeze: inserts size-1 dims at the listed positions of the result.
struct UnsqueezeLowering : ONNXOpLowering<onnx::UnsqueezeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::UnsqueezeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
UnsqueezeLowering::lower(onnx::UnsqueezeOp op, OpAdaptor adaptor,
                         ConversionPatternRewriter &rewriter) const {
  Location loc = op->getLoc();
  Value x = adaptor.getData();
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  auto axes = squeezeAxes(op, adaptor.getAxes(), op.getAxes());
  if (failed(axes))
    return unsupported(op, "axes must be a constant");
  if (!*axes)
    return unsupported(op, "Unsqueeze without axes");
  int64_t outRank = rank + (*axes)->size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : **axes) {
    auto n = normalizeAxis(a, outRank);
    if (!n)
      return unsupported(op, "axis out of range");
    inserted[*n] = true;
  }
  SmallVector<Value> sizes;
  int64_t j = 0;
  for (int64_t d = 0; d < outRank; ++d)
    sizes.push_back(inserted[d] ? indexConstant(rewriter, loc, 1)
                                : dimValue(rewriter, loc, x, j++));
  return finishReshape(op, x, resultType(op), sizes, rewriter, log);
}

struct TransposeLowering : ONNXOpLowering<onnx::TransposeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::TransposeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
TransposeLowering::lower(onnx::TransposeOp op, OpAdaptor adaptor,
                         ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> perm;
  if (std::optional<ArrayAttr> p = op.getPerm())
    for (Attribute a : *p)
      perm.push_back(cast<IntegerAttr>(a).getInt());
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank)
    return unsupported(op, "perm length differs from the rank");
  SmallVector<OpFoldResult> sizes;
  for (int64_t p : perm)
    sizes.push_back(tensor::getMixedSize(rewriter, loc, x, p));
  Value init = emptyTensor(rewriter, loc, resultType(op), sizes);
  rewriter.replaceOp(
      op, linalg::TransposeOp::create(rewriter, loc, x, init, perm).getResult()[0]);
  return success();
}

struct ConcatLowering : ONNXOpLowering<onnx::ConcatOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ConcatOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult ConcatLowering::lower(onnx::ConcatOp op, OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType type = resultType(op);
  int64_t rank = type.getRank();
  int64_t axisAttr = op.getAxis();
  auto axis = normalizeAxis(axisAttr, rank);
  if (!axis)
    return unsupported(op, "axis out of range");
  SmallVector<OpFoldResult> sizes = mixedSizes(rewriter, loc, operands[0]);
  Value total = indexConstant(rewriter, loc, 0);
  for (Value v : operands)
    total = arith::AddIOp::create(rewriter, loc, total, dimValue(rewriter, loc, v, *axis));
  sizes[*axis] = total;
  Value result = emptyTensor(rewriter, loc, type, sizes);
  Value offset = indexConstant(rewriter, loc, 0);
  for (Value v : operands) {
    SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
    offsets[*axis] = offset;
    SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
    result = tensor::InsertSliceOp::create(rewriter, loc, v, result, offsets,
                                           mixedSizes(rewriter, loc, v), strides);
    offset = arith::AddIOp::create(rewriter, loc, offset,
                                   dimValue(rewriter, loc, v, *axis));
  }
  rewriter.replaceOp(op, result);
  return success();
}

struct SplitLowering : ONNXOpLowering<onnx::SplitOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::SplitOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult SplitLowering::lower(onnx::SplitOp op, OpAdaptor adaptor,
                                   ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  int64_t axisAttr = op.getAxis();
  auto axis = normalizeAxis(axisAttr, rank);
  if (!axis)
    return unsupported(op, "axis out of range");
  int64_t n = op->getNumResults();
  Value dim = dimValue(rewriter, loc, x, *axis);
  SmallVector<Value> lengths;
  if (operands.size() > 1 && !isNone(operands[1])) {
    auto split = constantInts(operands[1], op->getOperand(1));
    if (!split)
      return unsupported(op, "split must be a constant");
    for (int64_t s : *split)
      lengths.push_back(indexConstant(rewriter, loc, s));
  } else {
    // Equal chunks of ceil(dim / n); the last one may be smaller.
    Value chunk = arith::CeilDivSIOp::create(rewriter, loc, dim, indexConstant(rewriter, loc, n));
    for (int64_t i = 0; i < n; ++i) {
      Value start = arith::MulIOp::create(rewriter, loc, chunk, indexConstant(rewriter, loc, i));
      Value left = arith::SubIOp::create(rewriter, loc, dim, start);
      lengths.push_back(arith::MinSIOp::create(rewriter, loc, chunk, left));
    }
  }
  if (static_cast<int64_t>(lengths.size()) != n)
    return unsupported(op, "split count differs from the outputs");
  SmallVector<Value> results;
  Value offset = indexConstant(rewriter, loc, 0);
  for (int64_t i = 0; i < n; ++i) {
    SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
    offsets[*axis] = offset;
    SmallVector<OpFoldResult> sizes = mixedSizes(rewriter, loc, x);
    sizes[*axis] = lengths[i];
    SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
    Value s = tensor::ExtractSliceOp::create(rewriter, loc, x, offsets, sizes, strides);
    if (s.getType() != resultType(op, i))
      s = tensor::CastOp::create(rewriter, loc, resultType(op, i), s);
    results.push_back(s);
    offset = arith::AddIOp::create(rewriter, loc, offset, lengths[i]);
  }
  rewriter.replaceOp(op, results);
  return success();
}

//===----------------------------------------------------------------------===//
// Slice: starts/ends/steps may be run-time values; axes decide at run time
// which dims they apply to when they are too.
//===----------------------------------------------------------------------===//

struct SliceLowering : ONNXOpLowering<onnx::SliceOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::SliceOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult SliceLowering::lower(onnx::SliceOp op, OpAdaptor adaptor,
                                   ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  auto startsType = cast<RankedTensorType>(operands[1].getType());
  if (!startsType.hasStaticShape())
    return unsupported(op, "starts of unknown length");
  int64_t n = startsType.getDimSize(0);
  bool hasAxes = operands.size() > 3 && !isNone(operands[3]);
  bool hasSteps = operands.size() > 4 && !isNone(operands[4]);
  auto constAxes = hasAxes ? constantInts(operands[3], op->getOperand(3))
                           : std::optional<SmallVector<int64_t>>();
  bool uns = false;
  // Per dim: start, size, step (index values; constants fold).
  SmallVector<Value> start(rank), size(rank), step(rank), dims(rank);
  for (int64_t d = 0; d < rank; ++d) {
    dims[d] = dimValue(rewriter, loc, x, d);
    start[d] = indexConstant(rewriter, loc, 0);
    size[d] = dims[d];
    step[d] = indexConstant(rewriter, loc, 1);
  }
  Value zero = indexConstant(rewriter, loc, 0), one = indexConstant(rewriter, loc, 1);
  auto clamp = [&](Value v, Value lo, Value hi) -> Value {
    return arith::MinSIOp::create(rewriter, loc,
                                  arith::MaxSIOp::create(rewriter, loc, v, lo), hi);
  };
  // ONNX stores INT64_MAX-like ends; clamp before index arithmetic.
  auto clampBig = [&](Value v) {
    return clamp(v, indexConstant(rewriter, loc, -(int64_t(1) << 62)),
                 indexConstant(rewriter, loc, int64_t(1) << 62));
  };
  for (int64_t j = 0; j < n; ++j) {
    Value s = clampBig(extractIndex(rewriter, loc, operands[1], j, uns));
    Value e = clampBig(extractIndex(rewriter, loc, operands[2], j, uns));
    Value st = hasSteps ? extractIndex(rewriter, loc, operands[4], j) : one;
    for (int64_t d = 0; d < rank; ++d) {
      Value applies;
      if (!hasAxes) {
        if (d != j)
          continue;
      } else if (constAxes) {
        auto a = normalizeAxis((*constAxes)[j], rank);
        if (!a)
          return unsupported(op, "axis out of range");
        if (*a != d)
          continue;
      } else {
        Value a = extractIndex(rewriter, loc, operands[3], j);
        Value aN = arith::SelectOp::create(
            rewriter, loc,
            arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, a, zero),
            arith::AddIOp::create(rewriter, loc, a, indexConstant(rewriter, loc, rank)), a);
        applies = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, aN,
                                        indexConstant(rewriter, loc, d));
      }
      Value dim = dims[d];
      Value neg = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, st, zero);
      auto wrap = [&](Value v) -> Value {
        Value isNeg = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, v, zero);
        return arith::SelectOp::create(rewriter, loc, isNeg,
                                       arith::AddIOp::create(rewriter, loc, v, dim), v);
      };
      Value dimM1 = arith::SubIOp::create(rewriter, loc, dim, one);
      Value sPos = clamp(wrap(s), zero, dim);
      Value ePos = clamp(wrap(e), zero, dim);
      Value sNeg = clamp(wrap(s), zero, dimM1);
      Value eNeg = clamp(wrap(e), indexConstant(rewriter, loc, -1), dimM1);
      Value sv = arith::SelectOp::create(rewriter, loc, neg, sNeg, sPos);
      Value ev = arith::SelectOp::create(rewriter, loc, neg, eNeg, ePos);
      // size = max(0, ceil((e - s) / step))
      Value diff = arith::SubIOp::create(rewriter, loc, ev, sv);
      Value sz = arith::CeilDivSIOp::create(rewriter, loc, diff, st);
      sz = arith::MaxSIOp::create(rewriter, loc, sz, zero);
      if (applies) {
        sv = arith::SelectOp::create(rewriter, loc, applies, sv, start[d]);
        sz = arith::SelectOp::create(rewriter, loc, applies, sz, size[d]);
        Value stv = arith::SelectOp::create(rewriter, loc, applies, st, step[d]);
        step[d] = stv;
      } else {
        step[d] = st;
      }
      start[d] = sv;
      size[d] = sz;
    }
  }
  RankedTensorType type = resultType(op);
  SmallVector<OpFoldResult> sizes(size.begin(), size.end());
  bool positive = true;
  for (Value st : step) {
    auto c = getConstantIntValue(st);
    positive &= c && *c > 0;
  }
  Value r;
  if (positive) {
    SmallVector<OpFoldResult> offsets(start.begin(), start.end());
    SmallVector<OpFoldResult> strides(step.begin(), step.end());
    auto sliceType = tensor::ExtractSliceOp::inferResultType(
        xType, SmallVector<int64_t>(rank, ShapedType::kDynamic));
    r = tensor::ExtractSliceOp::create(rewriter, loc,
                                       cast<RankedTensorType>(sliceType), x,
                                       offsets, sizes, strides);
    r = tensor::CastOp::create(rewriter, loc, type, r);
  } else {
    r = buildIndexed(rewriter, loc, type, sizes,
                     [&](OpBuilder &b, Location l, ValueRange out) -> Value {
                       SmallVector<Value> in;
                       for (int64_t d = 0; d < rank; ++d)
                         in.push_back(arith::AddIOp::create(
                             b, l, start[d], arith::MulIOp::create(b, l, out[d], step[d])));
                       return tensor::ExtractOp::create(b, l, x, in);
                     });
  }
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Expand, Tile, Pad
//===----------------------------------------------------------------------===//

struct ExpandLowering : ONNXOpLowering<onnx::ExpandOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ExpandOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult ExpandLowering::lower(onnx::ExpandOp op, OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = cast<RankedTensorType>(x.getType());
  RankedTensorType type = resultType(op);
  int64_t rank = type.getRank();
  auto sType = cast<RankedTensorType>(operands[1].getType());
  if (!sType.hasStaticShape())
    return unsupported(op, "shape of unknown length");
  int64_t n = sType.getDimSize(0);
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t j = d - (rank - xType.getRank());
    int64_t k = d - (rank - n);
    // ONNX Expand broadcasts both ways: the extent that is not 1.
    if (j >= 0 && !xType.isDynamicDim(j) && xType.getDimSize(j) != 1) {
      sizes.push_back(rewriter.getIndexAttr(xType.getDimSize(j)));
      continue;
    }
    if (k < 0) {
      sizes.push_back(tensor::getMixedSize(rewriter, loc, x, j));
      continue;
    }
    Value s = extractIndex(rewriter, loc, operands[1], k);
    if (j >= 0 && xType.isDynamicDim(j)) {
      // The extent that is not 1 (0 included: not the larger one).
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      Value isOne = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, s, one);
      s = arith::SelectOp::create(rewriter, loc, isOne, dimValue(rewriter, loc, x, j), s);
    }
    sizes.push_back(s);
  }
  Value r = buildElementwise(
      rewriter, loc, type, x,
      [](OpBuilder &, Location, ValueRange a) { return a[0]; },
      ArrayRef<OpFoldResult>(sizes));
  rewriter.replaceOp(op, r);
  return success();
}

struct TileLowering : ONNXOpLowering<onnx::TileOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::TileOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult TileLowering::lower(onnx::TileOp op, OpAdaptor adaptor,
                                  ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<OpFoldResult> sizes;
  SmallVector<Value> dims;
  for (int64_t d = 0; d < rank; ++d) {
    dims.push_back(dimValue(rewriter, loc, x, d));
    sizes.push_back(arith::MulIOp::create(rewriter, loc, dims[d],
                                          extractIndex(rewriter, loc, operands[1], d))
                        .getResult());
  }
  Value r = buildIndexed(rewriter, loc, resultType(op), sizes,
                         [&](OpBuilder &b, Location l, ValueRange out) -> Value {
                           SmallVector<Value> in;
                           for (int64_t d = 0; d < rank; ++d)
                             in.push_back(arith::RemUIOp::create(b, l, out[d], dims[d]));
                           return tensor::ExtractOp::create(b, l, x, in);
                         });
  rewriter.replaceOp(op, r);
  return success();
}

struct PadLowering : ONNXOpLowering<onnx::PadOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::PadOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult PadLowering::lower(onnx::PadOp op, OpAdaptor adaptor,
                                 ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  StringRef mode = op.getMode();
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return unsupported(op, "Pad mode " + mode);
  auto pads = constantInts(operands[1], op->getOperand(1));
  if (!pads)
    return unsupported(op, "pads must be a constant");
  SmallVector<int64_t> axes;
  if (operands.size() > 3 && !isNone(operands[3])) {
    auto a = constantInts(operands[3], op->getOperand(3));
    if (!a)
      return unsupported(op, "axes must be a constant");
    for (int64_t v : *a) {
      auto nv = normalizeAxis(v, rank);
      if (!nv)
        return unsupported(op, "axis out of range");
      axes.push_back(*nv);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads->size() != 2 * axes.size())
    return unsupported(op, "pads length");
  SmallVector<int64_t> before(rank, 0), after(rank, 0);
  for (auto [i, a] : llvm::enumerate(axes)) {
    before[a] = (*pads)[i];
    after[a] = (*pads)[i + axes.size()];
  }
  Value padValue;
  Type elem = xType.getElementType();
  if (operands.size() > 2 && !isNone(operands[2])) {
    auto vt = cast<RankedTensorType>(operands[2].getType());
    SmallVector<Value> at(vt.getRank(), indexConstant(rewriter, loc, 0));
    padValue = tensor::ExtractOp::create(rewriter, loc, operands[2], at);
  } else {
    padValue = scalarConstant(rewriter, loc, elem, 0);
  }
  SmallVector<Value> dims;
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    dims.push_back(dimValue(rewriter, loc, x, d));
    sizes.push_back(arith::AddIOp::create(rewriter, loc, dims[d],
                                          indexConstant(rewriter, loc, before[d] + after[d]))
                        .getResult());
  }
  Value r = buildIndexed(
      rewriter, loc, resultType(op), sizes,
      [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        Value inside = arith::ConstantOp::create(b, l, b.getBoolAttr(true));
        SmallVector<Value> in;
        Value zero = indexConstant(b, l, 0), one = indexConstant(b, l, 1);
        for (int64_t d = 0; d < rank; ++d) {
          Value i = arith::SubIOp::create(b, l, out[d], indexConstant(b, l, before[d]));
          Value last = arith::SubIOp::create(b, l, dims[d], one);
          Value lo = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i, zero);
          Value hi = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, i, last);
          if (mode == "reflect") {
            // Reflect about the edges (no repeat of the edge element).
            Value neg = arith::SubIOp::create(b, l, zero, i);
            Value over = arith::SubIOp::create(
                b, l, arith::MulIOp::create(b, l, last, indexConstant(b, l, 2)), i);
            i = arith::SelectOp::create(b, l, lo, neg, i);
            i = arith::SelectOp::create(b, l, hi, over, i);
          }
          inside = arith::AndIOp::create(
              b, l, inside,
              arith::XOrIOp::create(b, l, arith::OrIOp::create(b, l, lo, hi),
                                    arith::ConstantOp::create(b, l, b.getBoolAttr(true))));
          in.push_back(arith::MinSIOp::create(
              b, l, arith::MaxSIOp::create(b, l, i, zero), last));
        }
        Value v = tensor::ExtractOp::create(b, l, x, in);
        if (mode != "constant")
          return v;
        return arith::SelectOp::create(b, l, inside, v, padValue);
      });
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Shape, Size, ConstantOfShape, Range
//===----------------------------------------------------------------------===//

/// Size -> the product of the extents, as a 0-D i64 tensor.
struct SizeLowering : ONNXOpLowering<onnx::SizeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::SizeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op->getLoc();
    Value n = arith::IndexCastOp::create(
        rewriter, loc, rewriter.getI64Type(),
        numElements(rewriter, loc, adaptor.getData()));
    rewriter.replaceOp(op, tensor::FromElementsOp::create(
                               rewriter, loc, resultType(op), ValueRange{n}));
    return success();
  }
};

/// Shape -> the extents from `start` to `end` as an i64 tensor.
struct ShapeLowering : ONNXOpLowering<onnx::ShapeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ShapeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult ShapeLowering::lower(onnx::ShapeOp op, OpAdaptor adaptor,
                                   ConversionPatternRewriter &rewriter) const {
  Location loc = op->getLoc();
  Value x = adaptor.getData();
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  auto i64 = [&](Value v) {
    return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(), v);
  };
  int64_t start = op.getStart();
  int64_t end = op.getEnd() ? static_cast<int64_t>(*op.getEnd()) : rank;
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  SmallVector<Value> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(i64(dimValue(rewriter, loc, x, d)));
  RankedTensorType type = resultType(op);
  if (dims.empty()) {
    rewriter.replaceOp(op, emptyTensor(rewriter, loc, type, {rewriter.getIndexAttr(0)}));
    return success();
  }
  rewriter.replaceOp(op, tensor::FromElementsOp::create(rewriter, loc, type, dims));
  return success();
}

struct ConstantOfShapeLowering : ONNXOpLowering<onnx::ConstantOfShapeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ConstantOfShapeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult
ConstantOfShapeLowering::lower(onnx::ConstantOfShapeOp op, OpAdaptor adaptor,
                               ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType type = resultType(op);
  Type elem = type.getElementType();
  Value fill = scalarConstant(rewriter, loc, elem, 0);
  if (auto v = dyn_cast_or_null<DenseElementsAttr>(op.getValueAttr())) {
    if (v.getNumElements() != 1)
      return unsupported(op, "value with more than one element");
    auto first = *v.getValues<Attribute>().begin();
    if (auto f = dyn_cast<FloatAttr>(first))
      fill = arith::ConstantOp::create(rewriter, loc, elem,
                                       rewriter.getFloatAttr(elem, f.getValueAsDouble()));
    else if (auto i = dyn_cast<IntegerAttr>(first))
      fill = arith::ConstantOp::create(rewriter, loc, elem,
                                       rewriter.getIntegerAttr(elem, i.getValue()));
    else
      return unsupported(op, "value type");
  }
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(extractIndex(rewriter, loc, operands[0], d));
  rewriter.replaceOp(op, filledTensor(rewriter, loc, type, sizes, fill));
  return success();
}

struct RangeLowering : ONNXOpLowering<onnx::RangeOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::RangeOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult RangeLowering::lower(onnx::RangeOp op, OpAdaptor adaptor,
                                   ConversionPatternRewriter &rewriter) const {
  ValueRange operands = adaptor.getOperands();
  Location loc = op->getLoc();
  RankedTensorType type = resultType(op);
  Type elem = type.getElementType();
  auto scalar = [&](Value t) {
    return tensor::ExtractOp::create(rewriter, loc, t, ValueRange{}).getResult();
  };
  if (cast<RankedTensorType>(operands[0].getType()).getRank() != 0)
    return unsupported(op, "non-scalar bounds");
  Value start = scalar(operands[0]), limit = scalar(operands[1]),
        delta = scalar(operands[2]);
  Value count;
  if (isa<FloatType>(elem)) {
    Type f64 = rewriter.getF64Type();
    Value s = castScalar(rewriter, loc, start, elem, f64);
    Value l = castScalar(rewriter, loc, limit, elem, f64);
    Value d = castScalar(rewriter, loc, delta, elem, f64);
    Value c = math::CeilOp::create(
        rewriter, loc,
        arith::DivFOp::create(rewriter, loc, arith::SubFOp::create(rewriter, loc, l, s), d));
    count = toIndex(rewriter, loc,
                    arith::FPToSIOp::create(rewriter, loc, rewriter.getI64Type(), c));
  } else {
    Value s = toIndex(rewriter, loc, start), l = toIndex(rewriter, loc, limit),
          d = toIndex(rewriter, loc, delta);
    count = arith::CeilDivSIOp::create(rewriter, loc,
                                       arith::SubIOp::create(rewriter, loc, l, s), d);
  }
  count = arith::MaxSIOp::create(rewriter, loc, count, indexConstant(rewriter, loc, 0));
  Value r = buildIndexed(
      rewriter, loc, type, {count},
      [&](OpBuilder &b, Location l, ValueRange out) -> Value {
        Value i = arith::IndexCastOp::create(b, l, b.getI64Type(), out[0]);
        Value iv = castScalar(b, l, i, b.getI64Type(), elem);
        if (isa<FloatType>(elem))
          return arith::AddFOp::create(b, l, start,
                                       arith::MulFOp::create(b, l, iv, delta));
        return arith::AddIOp::create(b, l, start, arith::MulIOp::create(b, l, iv, delta));
      });
  rewriter.replaceOp(op, r);
  return success();
}

} // namespace

void populateShapePatterns(RewritePatternSet &patterns,
                           const TypeConverter &converter, UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<ConstantLowering>(converter, ctx, log);
  patterns.add<ReshapeLowering, FlattenLowering, SqueezeLowering,
               UnsqueezeLowering>(converter, ctx, log);
  patterns.add<TransposeLowering>(converter, ctx, log);
  patterns.add<ConcatLowering>(converter, ctx, log);
  patterns.add<SplitLowering>(converter, ctx, log);
  patterns.add<SliceLowering>(converter, ctx, log);
  patterns.add<ExpandLowering>(converter, ctx, log);
  patterns.add<TileLowering>(converter, ctx, log);
  patterns.add<PadLowering>(converter, ctx, log);
  patterns.add<ShapeLowering, SizeLowering>(converter, ctx, log);
  patterns.add<ConstantOfShapeLowering>(converter, ctx, log);
  patterns.add<RangeLowering>(converter, ctx, log);
}

} // namespace xfmr::lowering
