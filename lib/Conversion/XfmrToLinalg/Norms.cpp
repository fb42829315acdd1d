//===- Norms.cpp - xfmr.rms_norm and xfmr.layer_norm to linalg ------------===//
//
// Part of xfmr.
//
// A norm reduces over the last dimension with linalg.generic into a tensor of
// one rank less, then normalizes in one elementwise linalg.generic. The
// statistics and the output are computed in f32 (f64 for f64 inputs) whatever
// the input and weight types; the result is rounded back to the input type.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {

/// 1 / sqrt(x), as two ops: libm has no rsqrtf for math.rsqrt to call.
Value reciprocalSqrt(OpBuilder &b, Location loc, Value x) {
  Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(x.getType(), 1.0));
  return arith::DivFOp::create(b, loc, one, math::SqrtOp::create(b, loc, x));
}





/// The size of the last dim of `x` as a scalar of `type`.
Value rowLength(OpBuilder &b, Location loc, Value x, FloatType type) {
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t last = xType.getRank() - 1;
  if (!xType.isDynamicDim(last))
    return floatConstant(b, loc, type, xType.getDimSize(last));
  Value n = tensor::DimOp::create(b, loc, x, last);
  Value n64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), n);
  return arith::SIToFPOp::create(b, loc, type, n64);
}

/// (d0, ..., dr-1) -> (d0, ..., dr-2): one element per row.
AffineMap rowMap(MLIRContext *ctx, int64_t rank) {
  return AffineMap::getMultiDimIdentityMap(rank, ctx).dropResult(rank - 1);
}

/// (d0, ..., dr-1) -> (dr-1): weights and biases.
AffineMap featureMap(MLIRContext *ctx, int64_t rank) {
  return AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx));
}

using ScalarFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// Sums `term(x, rows...)` over the last dim of `x` into a tensor of `acc`
/// with one element per row; `rows` are per-row tensors (earlier sums).
Value sumRows(OpBuilder &b, Location loc, Value x, ValueRange rows,
              FloatType acc, ScalarFn term) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d + 1 < rank; ++d)
    sizes.push_back(tensor::getMixedSize(b, loc, x, d));
  Value empty = tensor::EmptyOp::create(b, loc, sizes, acc);
  Value zero = floatConstant(b, loc, acc, 0.0);
  Value init = linalg::FillOp::create(b, loc, zero, empty).getResult(0);

  SmallVector<Value> ins{x};
  llvm::append_range(ins, rows);
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(rank, ctx)};
  maps.append(rows.size() + 1, rowMap(ctx, rank));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  iters.back() = utils::IteratorType::reduction;
  // The sum may be reassociated so that the row reduction vectorizes.
  auto fm = arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::reassoc);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ins, ValueRange{init}, maps,
             iters,
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value t = term(nb, nloc, args.drop_back());
               Value sum = arith::AddFOp::create(nb, nloc, args.back(), t, fm);
               linalg::YieldOp::create(nb, nloc, sum);
             })
      .getResult(0);
}

/// An elementwise generic over `x` producing `elem`: the body gets the element
/// of `x`, then the row's elements of `rows`, then the feature's of
/// `features`.
Value mapRows(OpBuilder &b, Location loc, Value x, ValueRange rows,
              ValueRange features, Type elem, ScalarFn body) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  Value init =
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, x), elem);
  SmallVector<Value> ins{x};
  llvm::append_range(ins, rows);
  llvm::append_range(ins, features);
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  SmallVector<AffineMap> maps{identity};
  maps.append(rows.size(), rowMap(ctx, rank));
  maps.append(features.size(), featureMap(ctx, rank));
  maps.push_back(identity);
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ins, ValueRange{init}, maps,
             iters,
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc,
                                       body(nb, nloc, args.drop_back()));
             })
      .getResult(0);
}

/// xfmr.rms_norm(x, w) -> x * rsqrt(sum(x²) / D + eps) * w
struct RMSNormLowering : public OpRewritePattern<RMSNormOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(RMSNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    Type elem = op.getResult().getType().getElementType();
    FloatType acc = accumulatorType(elem);
    Value n = rowLength(rewriter, loc, x, acc);
    Value eps = floatConstant(rewriter, loc, acc,
                              op.getEpsilonAttr().getValueAsDouble());

    Value sumSq = sumRows(rewriter, loc, x, {}, acc,
                          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                            Value v = convertFloat(b, l, a[0], acc);
                            return arith::MulFOp::create(b, l, v, v);
                          });
    Value y = mapRows(rewriter, loc, x, sumSq, op.getWeight(), elem,
                      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                        Value v = convertFloat(b, l, a[0], acc);
                        Value meanSq = arith::DivFOp::create(b, l, a[1], n);
                        Value inv = reciprocalSqrt(
                            b, l, arith::AddFOp::create(b, l, meanSq, eps));
                        Value w = convertFloat(b, l, a[2], acc);
                        Value r = arith::MulFOp::create(
                            b, l, arith::MulFOp::create(b, l, v, inv), w);
                        return convertFloat(b, l, r, elem);
                      });
    rewriter.replaceOp(op, y);
    return success();
  }
};

/// xfmr.layer_norm(x, w, b) -> (x - mean) * rsqrt(var + eps) * w + b, with
/// mean = sum(x) / D and var = sum((x - mean)²) / D (two passes).
struct LayerNormLowering : public OpRewritePattern<LayerNormOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    Type elem = op.getResult().getType().getElementType();
    FloatType acc = accumulatorType(elem);
    Value n = rowLength(rewriter, loc, x, acc);
    Value eps = floatConstant(rewriter, loc, acc,
                              op.getEpsilonAttr().getValueAsDouble());

    Value sum = sumRows(rewriter, loc, x, {}, acc,
                        [&](OpBuilder &b, Location l, ValueRange a) {
                          return convertFloat(b, l, a[0], acc);
                        });
    Value sumSqDev =
        sumRows(rewriter, loc, x, sum, acc,
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value mean = arith::DivFOp::create(b, l, a[1], n);
                  Value d = arith::SubFOp::create(
                      b, l, convertFloat(b, l, a[0], acc), mean);
                  return arith::MulFOp::create(b, l, d, d);
                });

    SmallVector<Value> features{op.getWeight()};
    if (Value bias = op.getBias())
      features.push_back(bias);
    Value y = mapRows(
        rewriter, loc, x, ValueRange{sum, sumSqDev}, features, elem,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value mean = arith::DivFOp::create(b, l, a[1], n);
          Value var = arith::DivFOp::create(b, l, a[2], n);
          Value inv = reciprocalSqrt(
              b, l, arith::AddFOp::create(b, l, var, eps));
          Value d =
              arith::SubFOp::create(b, l, convertFloat(b, l, a[0], acc), mean);
          Value r =
              arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, d, inv),
                                    convertFloat(b, l, a[3], acc));
          if (a.size() > 4)
            r = arith::AddFOp::create(b, l, r, convertFloat(b, l, a[4], acc));
          return convertFloat(b, l, r, elem);
        });
    rewriter.replaceOp(op, y);
    return success();
  }
};

} // namespace

void populateNormLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<RMSNormLowering, LayerNormLowering>(patterns.getContext());
}

} // namespace xfmr::lowering
