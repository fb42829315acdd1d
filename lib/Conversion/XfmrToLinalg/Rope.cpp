//===- Rope.cpp - xfmr.rope to linalg -------------------------------------===//
//
// Part of xfmr.
//
// One linalg.generic over the output [B, H, S, D]: each feature reads its own
// element through the generic's input, and its pair partner and the pair's
// cos and sin with tensor.extract at indices computed from linalg.index.
// 16-bit inputs are rotated in f32.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {



/// xfmr.rope(x, cos, sin) -> y[i] = x[i] * cos[p] -/+ x[partner(i)] * sin[p]
/// for feature i of pair p (minus for the pair's first feature), y[i] = x[i]
/// past rotary_dim.
struct RopeLowering : public OpRewritePattern<RopeOp> {
  using Base::Base;

  LogicalResult matchAndRewrite(RopeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value x = op.getInput(), cos = op.getCos(), sin = op.getSin();
    RankedTensorType xType = op.getInput().getType();
    RankedTensorType angleType = op.getCos().getType();
    Type elem = xType.getElementType();
    FloatType acc = accumulatorType(elem);
    auto rotaryDim = static_cast<int64_t>(op.getRotaryDim());
    int64_t half = rotaryDim / 2;
    bool interleaved = op.getInterleaved();
    // Features past rotary_dim unless the head dim is known to be rotary_dim.
    bool partial = xType.isDynamicDim(3) || xType.getDimSize(3) != rotaryDim;

    // [B or 1, S, R] angles: batch index 0 where their leading dim is 1,
    // decided at run time when it is dynamic. sin is laid out like cos.
    bool perBatch = angleType.getRank() == 3;
    Value batchIsOne;
    if (perBatch && angleType.isDynamicDim(0)) {
      Value n = tensor::DimOp::create(rewriter, loc, cos, 0);
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      batchIsOne = arith::CmpIOp::create(rewriter, loc,
                                         arith::CmpIPredicate::eq, n, one);
    }
    bool broadcastBatch = perBatch && angleType.getDimSize(0) == 1;

    Value init = tensor::EmptyOp::create(
        rewriter, loc, tensor::getMixedSizes(rewriter, loc, x), elem);
    AffineMap identity = AffineMap::getMultiDimIdentityMap(4, ctx);
    SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
    auto body = [&](OpBuilder &b, Location l, ValueRange args) {
      auto index = [&](int64_t v) -> Value {
        return arith::ConstantIndexOp::create(b, l, v);
      };
      auto ult = [&](Value lhs, Value rhs) -> Value {
        return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, lhs, rhs);
      };
      Value batch = linalg::IndexOp::create(b, l, 0);
      Value head = linalg::IndexOp::create(b, l, 1);
      Value pos = linalg::IndexOp::create(b, l, 2);
      Value feature = linalg::IndexOp::create(b, l, 3);

      // Pass-through features compute with feature 0 to keep the extracts
      // in bounds; the result is discarded below.
      Value rotated, f = feature;
      if (partial) {
        rotated = ult(feature, index(rotaryDim));
        f = arith::SelectOp::create(b, l, rotated, feature, index(0));
      }
      // The pair p of feature f, its partner, and whether f is the pair's
      // first feature.
      Value pair, partner, first;
      if (interleaved) {
        pair = arith::DivUIOp::create(b, l, f, index(2));
        Value odd = arith::RemUIOp::create(b, l, f, index(2));
        first = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, odd,
                                      index(0));
        partner = arith::SelectOp::create(
            b, l, first, arith::AddIOp::create(b, l, f, index(1)),
            arith::SubIOp::create(b, l, f, index(1)));
      } else {
        first = ult(f, index(half));
        Value second = arith::SubIOp::create(b, l, f, index(half));
        pair = arith::SelectOp::create(b, l, first, f, second);
        partner = arith::SelectOp::create(
            b, l, first, arith::AddIOp::create(b, l, f, index(half)), second);
      }

      SmallVector<Value> angleIndex;
      if (batchIsOne)
        angleIndex.push_back(
            arith::SelectOp::create(b, l, batchIsOne, index(0), batch));
      else if (perBatch)
        angleIndex.push_back(broadcastBatch ? index(0) : batch);
      angleIndex.append({pos, pair});
      Value c = convertFloat(
          b, l, tensor::ExtractOp::create(b, l, cos, angleIndex), acc);
      Value s = convertFloat(
          b, l, tensor::ExtractOp::create(b, l, sin, angleIndex), acc);
      Value xi = convertFloat(b, l, args[0], acc);
      Value xp =
          convertFloat(b, l,
                       tensor::ExtractOp::create(
                           b, l, x, ValueRange{batch, head, pos, partner}),
                       acc);

      // (x1, x2) -> (x1 * cos - x2 * sin, x2 * cos + x1 * sin)
      Value xc = arith::MulFOp::create(b, l, xi, c);
      Value ps = arith::MulFOp::create(b, l, xp, s);
      Value y = arith::SelectOp::create(b, l, first,
                                        arith::SubFOp::create(b, l, xc, ps),
                                        arith::AddFOp::create(b, l, xc, ps));
      y = convertFloat(b, l, y, elem);
      if (partial)
        y = arith::SelectOp::create(b, l, rotated, y, args[0]);
      linalg::YieldOp::create(b, l, y);
    };
    Value y = linalg::GenericOp::create(
                  rewriter, loc, TypeRange{init.getType()}, ValueRange{x},
                  ValueRange{init}, ArrayRef<AffineMap>{identity, identity},
                  iters, body)
                  .getResult(0);
    rewriter.replaceOp(op, y);
    return success();
  }
};

} // namespace

void populateRopeLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<RopeLowering>(patterns.getContext());
}

} // namespace xfmr::lowering
