//===- Reductions.cpp - reductions and normalizations to linalg -----------===//
//
// Part of xfmr.
//
// Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, LayerNormalization,
// RMSNormalization and CumSum. Reductions of 16-bit floats accumulate in f32.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <type_traits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

Type accumulatorType(Type t) {
  if (auto f = dyn_cast<FloatType>(t); f && f.getWidth() < 32)
    return Float32Type::get(t.getContext());
  return t;
}

/// Reassociation from the kept dims to the keepdims shape: each reduced dim
/// joins the group of the kept dim before it (leading ones the first group).
SmallVector<ReassociationIndices> keepDimsGroups(ArrayRef<bool> reduced) {
  int64_t kept = llvm::count(reduced, false);
  SmallVector<ReassociationIndices> groups(kept);
  if (kept == 0)
    return groups;
  int64_t g = -1;
  for (auto [d, r] : llvm::enumerate(reduced)) {
    if (!r)
      ++g;
    groups[std::max<int64_t>(g, 0)].push_back(d);
  }
  return groups;
}

/// The iteration space of a reduction of `x` over the dims set in `reduced`:
/// the kept dims (shape, sizes, map into the loops) and the keepdims shape.
struct ReductionSpace {
  SmallVector<int64_t> keptShape, keepShape;
  SmallVector<OpFoldResult> keptSizes;
  AffineMap keptMap;
  SmallVector<utils::IteratorType> iters;
  SmallVector<ReassociationIndices> groups;
};

ReductionSpace reductionSpace(OpBuilder &b, Location loc, Value x,
                              ArrayRef<bool> reduced) {
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  ReductionSpace s;
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      s.keepShape.push_back(1);
      s.iters.push_back(utils::IteratorType::reduction);
      continue;
    }
    s.keepShape.push_back(xType.getDimSize(d));
    s.keptShape.push_back(xType.getDimSize(d));
    s.keptSizes.push_back(tensor::getMixedSize(b, loc, x, d));
    outExprs.push_back(getAffineDimExpr(d, b.getContext()));
    s.iters.push_back(utils::IteratorType::parallel);
  }
  s.keptMap = AffineMap::get(rank, 0, outExprs, b.getContext());
  s.groups = keepDimsGroups(reduced);
  return s;
}

/// `kept` (a reduction result over `s`) with the reduced dims back as size 1.
Value expandToKeepDims(OpBuilder &b, Location loc, Value kept,
                       const ReductionSpace &s) {
  auto type = RankedTensorType::get(
      s.keepShape, cast<RankedTensorType>(kept.getType()).getElementType());
  return tensor::ExpandShapeOp::create(b, loc, type, kept, s.groups);
}

/// `x` reduced over the dims set in `reduced` (result keeps them as size 1).
/// Each element goes through `pre` and is folded into the accumulator with
/// `combine`, starting from `init`.
struct Reduction {
  std::function<Value(OpBuilder &, Location, Value /*x*/)> pre;
  std::function<Value(OpBuilder &, Location, Value /*acc*/, Value /*x*/)> combine;
  Value init;
  Type accType;
};

Value reduceKeepDims(OpBuilder &b, Location loc, Value x,
                     ArrayRef<bool> reduced, const Reduction &r) {
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  ReductionSpace space = reductionSpace(b, loc, x, reduced);
  auto keptType = RankedTensorType::get(space.keptShape, r.accType);
  Value init = filledTensor(b, loc, keptType, space.keptSizes, r.init);
  SmallVector<AffineMap> maps{
      AffineMap::getMultiDimIdentityMap(rank, b.getContext()), space.keptMap};
  Value red =
      linalg::GenericOp::create(
          b, loc, TypeRange{keptType}, ValueRange{x}, ValueRange{init}, maps,
          space.iters,
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            Value v = r.pre ? r.pre(nb, nloc, args[0]) : args[0];
            linalg::YieldOp::create(nb, nloc, r.combine(nb, nloc, args[1], v));
          })
          .getResult(0);
  return expandToKeepDims(b, loc, red, space);
}

Value addAcc(OpBuilder &b, Location loc, Value acc, Value x) {
  return isa<FloatType>(acc.getType())
             ? arith::AddFOp::create(b, loc, acc, x).getResult()
             : arith::AddIOp::create(b, loc, acc, x).getResult();
}

Value mulAcc(OpBuilder &b, Location loc, Value acc, Value x) {
  return isa<FloatType>(acc.getType())
             ? arith::MulFOp::create(b, loc, acc, x).getResult()
             : arith::MulIOp::create(b, loc, acc, x).getResult();
}

Value maxAcc(OpBuilder &b, Location loc, Value acc, Value x, bool uns) {
  if (isa<FloatType>(acc.getType()))
    return arith::MaximumFOp::create(b, loc, acc, x);
  return uns ? arith::MaxUIOp::create(b, loc, acc, x).getResult()
             : arith::MaxSIOp::create(b, loc, acc, x).getResult();
}

Value minAcc(OpBuilder &b, Location loc, Value acc, Value x, bool uns) {
  if (isa<FloatType>(acc.getType()))
    return arith::MinimumFOp::create(b, loc, acc, x);
  return uns ? arith::MinUIOp::create(b, loc, acc, x).getResult()
             : arith::MinSIOp::create(b, loc, acc, x).getResult();
}

/// Number of elements in the reduced dims of `x`, as a scalar of `type`.
Value reducedCount(OpBuilder &b, Location loc, Value x, ArrayRef<bool> reduced,
                   Type type) {
  Value n = arith::ConstantIndexOp::create(b, loc, 1);
  for (auto [d, r] : llvm::enumerate(reduced))
    if (r)
      n = arith::MulIOp::create(b, loc, n, dimValue(b, loc, x, d));
  Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), n);
  return castScalar(b, loc, i64, b.getI64Type(), type);
}

/// Elementwise `body` over tensors of the same rank, broadcasting size-1 dims,
/// with the shape of `like`.
Value mapLike(OpBuilder &b, Location loc, Value like, Type elem,
              ValueRange operands, const ScalarBody &body) {
  auto likeType = cast<RankedTensorType>(like.getType());
  auto type = likeType.clone(elem);
  SmallVector<OpFoldResult> sizes = mixedSizes(b, loc, like);
  return buildElementwise(b, loc, type, operands, body,
                          ArrayRef<OpFoldResult>(sizes));
}

/// Drops the size-1 reduced dims of a keepdims tensor when !keepdims.
Value finishReduction(OpBuilder &b, Location loc, Value keep,
                      RankedTensorType resultType, ArrayRef<bool> reduced) {
  auto keepType = cast<RankedTensorType>(keep.getType());
  if (keepType.getRank() != resultType.getRank()) {
    SmallVector<int64_t> shape;
    for (auto [d, r] : llvm::enumerate(reduced))
      if (!r)
        shape.push_back(keepType.getDimSize(d));
    keep = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get(shape, keepType.getElementType()), keep,
        keepDimsGroups(reduced));
  }
  if (keep.getType() != resultType)
    keep = tensor::CastOp::create(b, loc, resultType, keep);
  return keep;
}

Value castTensor(OpBuilder &b, Location loc, Value t, Type from, Type to) {
  if (from == to)
    return t;
  return mapLike(b, loc, t, to, t, [&](OpBuilder &nb, Location l, ValueRange a) {
    return castScalar(nb, l, a[0], from, to);
  });
}

//===----------------------------------------------------------------------===//
// Reduce*
//===----------------------------------------------------------------------===//

/// What a Reduce* op computes.
enum class ReduceKind {
  Sum,
  Mean,
  Max,
  Min,
  Prod,
  L1,
  L2,
  LogSum,
  LogSumExp,
  SumSquare
};

/// Reduces the input over the constant axes (the operand, or before opset 18
/// the attribute), keeping or dropping the reduced dims as the result type
/// says; integers accumulate in i64, f16/bf16 in f32.
LogicalResult lowerReduction(Operation *op, ReduceKind kind,
                             bool noopWithEmptyAxes, ValueRange operands,
                             ConversionPatternRewriter &rewriter,
                             UnsupportedLog &log, RankedTensorType resultType);

template <typename OpTy> struct ReduceLowering : ONNXOpLowering<OpTy> {
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;

  ReduceLowering(const TypeConverter &converter, MLIRContext *ctx,
                 UnsupportedLog &log, ReduceKind kind)
      : ONNXOpLowering<OpTy>(converter, ctx, log), kind(kind) {}

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    return lowerReduction(op, kind, op.getNoopWithEmptyAxes(),
                          adaptor.getOperands(), rewriter, this->log,
                          this->resultType(op));
  }

private:
  ReduceKind kind;
};

LogicalResult lowerReduction(Operation *op, ReduceKind kind,
                             bool noopWithEmptyAxes, ValueRange operands,
                             ConversionPatternRewriter &rewriter,
                             UnsupportedLog &log, RankedTensorType resultType) {
  auto unsupported = [&](const Twine &why) {
    return recordUnsupported(log, op, why);
  };
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  if (!xType)
    return unsupported("input of unknown rank");
  int64_t rank = xType.getRank();
  std::optional<SmallVector<int64_t>> axes;
  if (operands.size() > 1 && !isNone(operands[1])) {
    axes = constantInts(operands[1], op->getOperand(1));
    if (!axes)
      return unsupported("axes must be a constant");
  } else {
    // Before opset 18 (13 for ReduceSum) the axes were an attribute, which
    // the generated op (the latest schema) has no accessor for.
    axes = intsAttr(op, "axes");
  }
  SmallVector<bool> reduced(rank, false);
  if (!axes || axes->empty()) {
    if (noopWithEmptyAxes) {
      rewriter.replaceOp(op,
                         tensor::CastOp::create(rewriter, loc, resultType, x));
      return success();
    }
    reduced.assign(rank, true);
  } else {
    for (int64_t a : *axes) {
      auto n = normalizeAxis(a, rank);
      if (!n)
        return unsupported("axis out of range");
      reduced[*n] = true;
    }
  }
  Type orig = elementType(op->getOperand(0));
  Type elem = xType.getElementType();
  bool uns = isUnsignedInt(orig);
  bool fp = isFloat(elem);
  Type acc = accumulatorType(elem);
  Type accOrig = acc == elem ? orig : acc;
  if (!fp && (kind == ReduceKind::L2 || kind == ReduceKind::LogSum ||
              kind == ReduceKind::LogSumExp || kind == ReduceKind::Mean))
    return unsupported("integer " + op->getName().stripDialect());
  Value xa = castTensor(rewriter, loc, x, orig, accOrig);

  auto sum = [&](std::function<Value(OpBuilder &, Location, Value)> pre) {
    Reduction r{pre, addAcc, scalarConstant(rewriter, loc, acc, 0), acc};
    return reduceKeepDims(rewriter, loc, xa, reduced, r);
  };
  Value keep;
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean:
  case ReduceKind::LogSum:
    keep = sum(nullptr);
    break;
  case ReduceKind::SumSquare:
  case ReduceKind::L2:
    keep = sum([&](OpBuilder &b, Location l, Value v) { return mulAcc(b, l, v, v); });
    break;
  case ReduceKind::L1:
    keep = sum([&](OpBuilder &b, Location l, Value v) -> Value {
      if (fp)
        return math::AbsFOp::create(b, l, v);
      return uns ? v : math::AbsIOp::create(b, l, v).getResult();
    });
    break;
  case ReduceKind::Prod: {
    Reduction r{nullptr, mulAcc, scalarConstant(rewriter, loc, acc, 1), acc};
    keep = reduceKeepDims(rewriter, loc, xa, reduced, r);
    break;
  }
  case ReduceKind::Max:
  case ReduceKind::Min: {
    bool isMax = kind == ReduceKind::Max;
    Reduction r{nullptr,
                [&](OpBuilder &b, Location l, Value a, Value v) {
                  return isMax ? maxAcc(b, l, a, v, uns) : minAcc(b, l, a, v, uns);
                },
                isMax ? lowestValue(rewriter, loc, acc, uns)
                      : highestValue(rewriter, loc, acc, uns),
                acc};
    keep = reduceKeepDims(rewriter, loc, xa, reduced, r);
    break;
  }
  case ReduceKind::LogSumExp: {
    Reduction mr{nullptr,
                 [](OpBuilder &b, Location l, Value a, Value v) -> Value {
                   return arith::MaximumFOp::create(b, l, a, v);
                 },
                 lowestValue(rewriter, loc, acc, false), acc};
    Value m = reduceKeepDims(rewriter, loc, xa, reduced, mr);
    // A max of -inf (empty or all -inf) would give NaN below: shift by 0.
    Value mSafe = mapLike(rewriter, loc, m, acc, m,
                          [](OpBuilder &b, Location l, ValueRange a) -> Value {
                            Value inf = lowestValue(b, l, a[0].getType(), false);
                            Value isInf = arith::CmpFOp::create(
                                b, l, arith::CmpFPredicate::OEQ, a[0], inf);
                            return arith::SelectOp::create(
                                b, l, isInf, scalarConstant(b, l, a[0].getType(), 0),
                                a[0]);
                          });
    Value e = mapLike(rewriter, loc, xa, acc, ValueRange{xa, mSafe},
                      [](OpBuilder &b, Location l, ValueRange a) -> Value {
                        return math::ExpOp::create(
                            b, l, arith::SubFOp::create(b, l, a[0], a[1]));
                      });
    Reduction sr{nullptr, addAcc, scalarConstant(rewriter, loc, acc, 0), acc};
    Value s = reduceKeepDims(rewriter, loc, e, reduced, sr);
    keep = mapLike(rewriter, loc, s, acc, ValueRange{s, mSafe},
                   [](OpBuilder &b, Location l, ValueRange a) -> Value {
                     return arith::AddFOp::create(
                         b, l, math::LogOp::create(b, l, a[0]), a[1]);
                   });
    break;
  }
  }
  if (kind == ReduceKind::Mean) {
    Value n = reducedCount(rewriter, loc, x, reduced, acc);
    keep = mapLike(rewriter, loc, keep, acc, keep,
                   [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                     return arith::DivFOp::create(b, l, a[0], n);
                   });
  } else if (kind == ReduceKind::L2 || kind == ReduceKind::LogSum) {
    bool l2 = kind == ReduceKind::L2;
    keep = mapLike(rewriter, loc, keep, acc, keep,
                   [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                     return l2 ? math::SqrtOp::create(b, l, a[0]).getResult()
                               : math::LogOp::create(b, l, a[0]).getResult();
                   });
  }
  keep = castTensor(rewriter, loc, keep, accOrig, orig);
  rewriter.replaceOp(op,
                     finishReduction(rewriter, loc, keep, resultType, reduced));
  return success();
}

//===----------------------------------------------------------------------===//
// ArgMax / ArgMin
//===----------------------------------------------------------------------===//

/// Index (i64, keepdims shape) of the max (min) along `axis`.
Value argExtreme(OpBuilder &b, Location loc, Value x, int64_t axis, bool isMax,
                 bool last, bool uns) {
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  Type elem = xType.getElementType();
  SmallVector<bool> reduced(rank, false);
  reduced[axis] = true;
  ReductionSpace space = reductionSpace(b, loc, x, reduced);
  ArrayRef<int64_t> keptShape = space.keptShape;
  ArrayRef<OpFoldResult> keptSizes = space.keptSizes;
  auto valType = RankedTensorType::get(keptShape, elem);
  auto idxType = RankedTensorType::get(keptShape, b.getI64Type());
  Value valInit = filledTensor(b, loc, valType, keptSizes,
                               isMax ? lowestValue(b, loc, elem, uns)
                                     : highestValue(b, loc, elem, uns));
  Value idxInit = filledTensor(b, loc, idxType, keptSizes,
                               scalarConstant(b, loc, b.getI64Type(), -1));
  AffineMap out = space.keptMap;
  SmallVector<AffineMap> maps{
      AffineMap::getMultiDimIdentityMap(rank, b.getContext()), out, out};
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{valType, idxType}, ValueRange{x},
      ValueRange{valInit, idxInit}, maps, space.iters,
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value v = a[0], best = a[1], bestIdx = a[2];
        Value i = arith::IndexCastOp::create(
            nb, l, nb.getI64Type(), linalg::IndexOp::create(nb, l, axis));
        Value better;
        if (isa<FloatType>(elem))
          better = arith::CmpFOp::create(
              nb, l,
              isMax ? (last ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OGT)
                    : (last ? arith::CmpFPredicate::OLE : arith::CmpFPredicate::OLT),
              v, best);
        else {
          using P = arith::CmpIPredicate;
          P p = isMax ? (last ? (uns ? P::uge : P::sge) : (uns ? P::ugt : P::sgt))
                      : (last ? (uns ? P::ule : P::sle) : (uns ? P::ult : P::slt));
          better = arith::CmpIOp::create(nb, l, p, v, best);
        }
        // The first element always wins (covers all -inf / NaN rows).
        Value first = arith::CmpIOp::create(
            nb, l, arith::CmpIPredicate::slt, bestIdx,
            scalarConstant(nb, l, nb.getI64Type(), 0));
        better = arith::OrIOp::create(nb, l, better, first);
        linalg::YieldOp::create(
            nb, l,
            ValueRange{arith::SelectOp::create(nb, l, better, v, best),
                       arith::SelectOp::create(nb, l, better, i, bestIdx)});
      });
  return expandToKeepDims(b, loc, generic.getResult(1), space);
}

/// ArgMax / ArgMin: argExtreme along the axis, kept or dropped.
template <typename OpTy> struct ArgLowering : ONNXOpLowering<OpTy> {
  using ONNXOpLowering<OpTy>::ONNXOpLowering;
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;
  static constexpr bool isMax = std::is_same_v<OpTy, onnx::ArgMaxOp>;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getData();
    auto xType = cast<RankedTensorType>(data.getType());
    int64_t axisAttr = op.getAxis();
    auto axis = normalizeAxis(axisAttr, xType.getRank());
    if (!axis || xType.getRank() == 0)
      return this->unsupported(op, "axis out of range");
    Value keep = argExtreme(rewriter, op->getLoc(), data, *axis, isMax,
                            op.getSelectLastIndex() != 0,
                            isUnsignedInt(elementType(op.getData())));
    SmallVector<bool> reduced(xType.getRank(), false);
    reduced[*axis] = true;
    rewriter.replaceOp(op, finishReduction(rewriter, op->getLoc(), keep,
                                           this->resultType(op), reduced));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Softmax family
//===----------------------------------------------------------------------===//

/// What a Softmax-family op computes.
enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

/// Softmax, LogSoftmax and Hardmax over `axisAttr` (null: the default of
/// the model's opset; before opset 13 the axis flattens the dims after it).
LogicalResult lowerSoftmax(Operation *op, SoftmaxKind kind,
                           IntegerAttr axisAttr, Value x,
                           ConversionPatternRewriter &rewriter,
                           UnsupportedLog &log);

template <typename OpTy> struct SoftmaxLowering : ONNXOpLowering<OpTy> {
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;

  SoftmaxLowering(const TypeConverter &converter, MLIRContext *ctx,
                  UnsupportedLog &log, SoftmaxKind kind)
      : ONNXOpLowering<OpTy>(converter, ctx, log), kind(kind) {}

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    return lowerSoftmax(op, kind, op.getAxisAttr(), adaptor.getInput(),
                        rewriter, this->log);
  }

private:
  SoftmaxKind kind;
};

LogicalResult lowerSoftmax(Operation *op, SoftmaxKind kind,
                           IntegerAttr axisAttr, Value x,
                           ConversionPatternRewriter &rewriter,
                           UnsupportedLog &log) {
  auto unsupported = [&](Operation *op, const Twine &why) {
    return recordUnsupported(log, op, why);
  };
  Location loc = op->getLoc();
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  Type elem = xType.getElementType();
  if (!isFloat(elem))
    return unsupported(op, "non-float input");
  bool legacy = defaultOpset(op) < 13;
  int64_t axisValue =
      axisAttr ? axisAttr.getValue().getSExtValue() : (legacy ? 1 : -1);
  auto axis = normalizeAxis(axisValue, rank);
  if (!axis)
    return unsupported(op, "axis out of range");
  SmallVector<bool> reduced(rank, false);
  for (int64_t d = *axis; d < (legacy ? rank : *axis + 1); ++d)
    reduced[d] = true;
  if (kind == SoftmaxKind::Hardmax) {
    if (legacy && *axis != rank - 1)
      return unsupported(op, "Hardmax before opset 13 on a non-last axis");
    Value idx = argExtreme(rewriter, loc, x, *axis, true, false, false);
    int64_t ax = *axis;
    Value r = mapLike(rewriter, loc, x, elem, ValueRange{idx},
                      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                        Value i = arith::IndexCastOp::create(
                            b, l, b.getI64Type(), linalg::IndexOp::create(b, l, ax));
                        Value hit = arith::CmpIOp::create(
                            b, l, arith::CmpIPredicate::eq, i, a[0]);
                        return arith::SelectOp::create(
                            b, l, hit, scalarConstant(b, l, elem, 1),
                            scalarConstant(b, l, elem, 0));
                      });
    rewriter.replaceOp(op, r);
    return success();
  }
  Type acc = accumulatorType(elem);
  Value xa = castTensor(rewriter, loc, x, elem, acc);
  Reduction mr{nullptr,
               [](OpBuilder &b, Location l, Value a, Value v) -> Value {
                 return arith::MaximumFOp::create(b, l, a, v);
               },
               lowestValue(rewriter, loc, acc, false), acc};
  Value m = reduceKeepDims(rewriter, loc, xa, reduced, mr);
  Value shifted = mapLike(rewriter, loc, xa, acc, ValueRange{xa, m},
                          [](OpBuilder &b, Location l, ValueRange a) -> Value {
                            return arith::SubFOp::create(b, l, a[0], a[1]);
                          });
  Reduction sr{[](OpBuilder &b, Location l, Value v) -> Value {
                 return math::ExpOp::create(b, l, v);
               },
               addAcc, scalarConstant(rewriter, loc, acc, 0), acc};
  Value s = reduceKeepDims(rewriter, loc, shifted, reduced, sr);
  bool isLog = kind == SoftmaxKind::LogSoftmax;
  Value r = mapLike(rewriter, loc, xa, elem, ValueRange{shifted, s},
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      Value v =
                          isLog ? arith::SubFOp::create(
                                      b, l, a[0], math::LogOp::create(b, l, a[1]))
                                      .getResult()
                                : arith::DivFOp::create(
                                      b, l, math::ExpOp::create(b, l, a[0]), a[1])
                                      .getResult();
                      return castScalar(b, l, v, acc, elem);
                    });
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormalization, RMSNormalization
//===----------------------------------------------------------------------===//

/// The attributes of a normalization op (LayerNormalization, or an RMS one
/// when `rms`: no mean, no bias).
struct NormAttrs {
  bool rms;
  int64_t axis;
  float epsilon;
  /// Whether statistics are computed in f32 (LayerNormalization's
  /// stash_type = 1).
  bool stashF32;
};

/// y = (x - mean) / sqrt(var + epsilon) * scale + bias over the dims from
/// `axis` on (no mean, no bias for the RMS ops); the mean and 1/stddev as
/// the optional extra results.
LogicalResult lowerNorm(Operation *op, const NormAttrs &attrs,
                        ValueRange operands,
                        ConversionPatternRewriter &rewriter,
                        const TypeConverter &converter, UnsupportedLog &log);

template <typename OpTy> struct NormLowering : ONNXOpLowering<OpTy> {
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;
  static constexpr bool isLayerNorm =
      std::is_same_v<OpTy, onnx::LayerNormalizationOp>;

  using ONNXOpLowering<OpTy>::ONNXOpLowering;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    NormAttrs attrs{/*rms=*/!isLayerNorm, static_cast<int64_t>(op.getAxis()),
                    op.getEpsilon().convertToFloat(),
                    /*stashF32=*/!isLayerNorm || op.getStashType() == 1};
    return lowerNorm(op, attrs, adaptor.getOperands(), rewriter,
                     *this->getTypeConverter(), this->log);
  }
};

LogicalResult lowerNorm(Operation *op, const NormAttrs &attrs,
                        ValueRange operands,
                        ConversionPatternRewriter &rewriter,
                        const TypeConverter &converter, UnsupportedLog &log) {
  auto unsupported = [&](Operation *op, const Twine &why) {
    return recordUnsupported(log, op, why);
  };
  auto resultType = [&](Operation *op, unsigned i) {
    return dyn_cast_or_null<RankedTensorType>(
        converter.convertType(op->getResult(i).getType()));
  };
  Location loc = op->getLoc();
  Value x = operands[0];
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  Type elem = xType.getElementType();
  if (!isFloat(elem))
    return unsupported(op, "non-float input");
  auto axis = normalizeAxis(attrs.axis, rank);
  if (!axis)
    return unsupported(op, "axis out of range");
  bool rms = attrs.rms;
  Value scale = operands[1];
  Value bias = !rms && operands.size() > 2 && !isNone(operands[2]) ? operands[2]
                                                                     : Value();
  for (Value v : {scale, bias})
    if (v && cast<RankedTensorType>(v.getType()).getRank() > rank)
      return unsupported(op, "scale/bias of higher rank than the input");
  SmallVector<bool> reduced(rank, false);
  for (int64_t d = *axis; d < rank; ++d)
    reduced[d] = true;
  Type acc = accumulatorType(elem);
  if (!attrs.stashF32)
    acc = elem;
  float epsV = attrs.epsilon;
  Value xa = castTensor(rewriter, loc, x, elem, acc);
  Value n = reducedCount(rewriter, loc, x, reduced, acc);
  Reduction sumR{nullptr, addAcc, scalarConstant(rewriter, loc, acc, 0), acc};
  Value centered = xa, mean;
  if (!rms) {
    Value s = reduceKeepDims(rewriter, loc, xa, reduced, sumR);
    mean = mapLike(rewriter, loc, s, acc, s,
                   [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                     return arith::DivFOp::create(b, l, a[0], n);
                   });
    centered = mapLike(rewriter, loc, xa, acc, ValueRange{xa, mean},
                       [](OpBuilder &b, Location l, ValueRange a) -> Value {
                         return arith::SubFOp::create(b, l, a[0], a[1]);
                       });
  }
  Reduction sqR{[](OpBuilder &b, Location l, Value v) -> Value {
                  return arith::MulFOp::create(b, l, v, v);
                },
                addAcc, scalarConstant(rewriter, loc, acc, 0), acc};
  Value ss = reduceKeepDims(rewriter, loc, centered, reduced, sqR);
  Value inv = mapLike(rewriter, loc, ss, acc, ss,
                      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                        Value var = arith::DivFOp::create(b, l, a[0], n);
                        Value e = scalarConstant(b, l, acc, epsV);
                        // 1/sqrt: libm has no rsqrtf.
                        return arith::DivFOp::create(
                            b, l, scalarConstant(b, l, acc, 1),
                            math::SqrtOp::create(
                                b, l, arith::AddFOp::create(b, l, var, e)));
                      });
  SmallVector<Value> ins{centered, inv, scale};
  if (bias)
    ins.push_back(bias);
  Value y = mapLike(rewriter, loc, x, elem, ins,
                    [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                      Value v = arith::MulFOp::create(b, l, a[0], a[1]);
                      v = castScalar(b, l, v, acc, elem);
                      v = arith::MulFOp::create(b, l, v, a[2]);
                      if (a.size() > 3)
                        v = arith::AddFOp::create(b, l, v, a[3]);
                      return v;
                    });
  SmallVector<Value> results{y};
  for (unsigned i = 1; i < op->getNumResults(); ++i) {
    RankedTensorType t = resultType(op, i);
    if (!t) {
      results.push_back(rewriter.getRemappedValue(op->getResult(i)));
      continue;
    }
    Value v = i == 1 && mean ? mean : inv;
    if (rms && i == 1)
      return unsupported(op,
                         "extra outputs of " + op->getName().stripDialect());
    v = castTensor(rewriter, loc, v, acc, t.getElementType());
    if (v.getType() != t)
      v = tensor::CastOp::create(rewriter, loc, t, v);
    results.push_back(v);
  }
  rewriter.replaceOp(op, results);
  return success();
}

//===----------------------------------------------------------------------===//
// CumSum
//===----------------------------------------------------------------------===//

/// CumSum along a constant axis: a generic with a reduction loop that adds
/// the elements before (after, when reversed) each position.
struct CumSumLowering : ONNXOpLowering<onnx::CumSumOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::CumSumOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult CumSumLowering::lower(onnx::CumSumOp op, OpAdaptor adaptor,
                                    ConversionPatternRewriter &rewriter) const {
  Location loc = op->getLoc();
  Value x = adaptor.getX();
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  auto axisC = constantInts(adaptor.getAxis(), op.getAxis());
  if (!axisC || axisC->size() != 1)
    return unsupported(op, "axis must be a constant");
  auto axis = normalizeAxis((*axisC)[0], rank);
  if (!axis)
    return unsupported(op, "axis out of range");
  bool exclusive = op.getExclusive(), reverse = op.getReverse();
  Type elem = xType.getElementType();
  MLIRContext *ctx = rewriter.getContext();
  // out[..i..] = sum over j of x[..j..] where j <= i (or <, >=, > ...).
  int64_t loops = rank + 1;
  SmallVector<AffineExpr> inExprs, outExprs;
  for (int64_t d = 0; d < rank; ++d) {
    outExprs.push_back(getAffineDimExpr(d, ctx));
    inExprs.push_back(getAffineDimExpr(d == *axis ? rank : d, ctx));
  }
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  Value init = filledTensor(rewriter, loc, xType, mixedSizes(rewriter, loc, x),
                            scalarConstant(rewriter, loc, elem, 0));
  int64_t ax = *axis;
  auto generic = linalg::GenericOp::create(
      rewriter, loc, TypeRange{xType}, ValueRange{x}, ValueRange{init},
      SmallVector<AffineMap>{AffineMap::get(loops, 0, inExprs, ctx),
                             AffineMap::get(loops, 0, outExprs, ctx)},
      iters, [&](OpBuilder &b, Location l, ValueRange a) {
        Value i = linalg::IndexOp::create(b, l, ax);
        Value j = linalg::IndexOp::create(b, l, rank);
        using P = arith::CmpIPredicate;
        P p = reverse ? (exclusive ? P::ugt : P::uge) : (exclusive ? P::ult : P::ule);
        Value take = arith::CmpIOp::create(b, l, p, j, i);
        Value v = arith::SelectOp::create(b, l, take, a[0],
                                          scalarConstant(b, l, elem, 0));
        linalg::YieldOp::create(b, l, addAcc(b, l, a[1], v));
      });
  rewriter.replaceOp(op, generic.getResult(0));
  return success();
}

} // namespace

void populateReductionPatterns(RewritePatternSet &patterns,
                               const TypeConverter &converter,
                               UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<ReduceLowering<onnx::ReduceSumOp>>(converter, ctx, log,
                                                  ReduceKind::Sum);
  patterns.add<ReduceLowering<onnx::ReduceMeanOp>>(converter, ctx, log,
                                                   ReduceKind::Mean);
  patterns.add<ReduceLowering<onnx::ReduceMaxOp>>(converter, ctx, log,
                                                  ReduceKind::Max);
  patterns.add<ReduceLowering<onnx::ReduceMinOp>>(converter, ctx, log,
                                                  ReduceKind::Min);
  patterns.add<ReduceLowering<onnx::ReduceProdOp>>(converter, ctx, log,
                                                   ReduceKind::Prod);
  patterns.add<ReduceLowering<onnx::ReduceL1Op>>(converter, ctx, log,
                                                 ReduceKind::L1);
  patterns.add<ReduceLowering<onnx::ReduceL2Op>>(converter, ctx, log,
                                                 ReduceKind::L2);
  patterns.add<ReduceLowering<onnx::ReduceLogSumOp>>(converter, ctx, log,
                                                     ReduceKind::LogSum);
  patterns.add<ReduceLowering<onnx::ReduceLogSumExpOp>>(converter, ctx, log,
                                                        ReduceKind::LogSumExp);
  patterns.add<ReduceLowering<onnx::ReduceSumSquareOp>>(converter, ctx, log,
                                                        ReduceKind::SumSquare);
  patterns.add<ArgLowering<onnx::ArgMaxOp>, ArgLowering<onnx::ArgMinOp>>(
      converter, ctx, log);
  patterns.add<SoftmaxLowering<onnx::SoftmaxOp>>(converter, ctx, log,
                                                 SoftmaxKind::Softmax);
  patterns.add<SoftmaxLowering<onnx::LogSoftmaxOp>>(converter, ctx, log,
                                                    SoftmaxKind::LogSoftmax);
  patterns.add<SoftmaxLowering<onnx::HardmaxOp>>(converter, ctx, log,
                                                 SoftmaxKind::Hardmax);
  patterns
      .add<NormLowering<onnx::LayerNormalizationOp>,
           NormLowering<onnx::RMSNormalizationOp>,
           NormLowering<onnx::SimplifiedLayerNormalizationOp>, CumSumLowering>(
          converter, ctx, log);
}

} // namespace xfmr::lowering
