//===- Attention.cpp - FlashAttention lowering of xfmr.attention ----------===//
//
// Part of xfmr.
//
// For every batch, query head and block of `queryBlock` query rows, loops
// over blocks of `keyBlock` keys with an online softmax (TileBuilder.h).
// Extra memory is one tile of scores plus the running state: O(S), never
// Sq x Skv. With `causal`, the key loop stops at the last key the block's
// bottom row may see, so tiles above the diagonal are never computed.
// Query head h reads KV head h / (Hq / Hkv) in place (no repeated K/V).
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "TileBuilder.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
Value minIndex(OpBuilder &b, Location loc, Value a, Value c) {
  return arith::MinSIOp::create(b, loc, a, c);
}

/// [tq or tk, D] slice of a [B, H, S, D] tensor at (batch, head, start).
Value rowsOf(OpBuilder &b, Location loc, Value t, Value batch, Value head, Value start,
             Value rows) {
  auto type = cast<RankedTensorType>(t.getType());
  OpFoldResult one = b.getIndexAttr(1);
  OpFoldResult d = tensor::getMixedSize(b, loc, t, 3);
  auto resultType = RankedTensorType::get({ShapedType::kDynamic, type.getDimSize(3)},
                                          type.getElementType());
  return tensor::ExtractSliceOp::create(b, loc, resultType, t,
                                        {batch, head, start, b.getIndexAttr(0)},
                                        {one, one, rows, d}, {one, one, one, one});
}

struct LowerAttention : OpRewritePattern<AttentionOp> {
  LowerAttention(MLIRContext *ctx, AttentionTiling tiling)
      : OpRewritePattern(ctx), tiling(tiling) {}

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value q = op.getQuery(), k = op.getKey(), v = op.getValue(), mask = op.getMask();
    auto resultType = op.getResult().getType();
    int64_t rep = op.getNumHeads() / op.getNumKvHeads();
    double scale = op.getScale().convertToDouble();
    bool causal = op.getCausal();

    Value zero = indexConstant(rewriter, loc, 0), one = indexConstant(rewriter, loc, 1);
    Value batch = dimValue(rewriter, loc, q, 0), heads = dimValue(rewriter, loc, q, 1);
    Value sq = dimValue(rewriter, loc, q, 2), skv = dimValue(rewriter, loc, k, 2);
    OpFoldResult dv = tensor::getMixedSize(rewriter, loc, v, 3);
    Value offset = arith::SubIOp::create(rewriter, loc, skv, sq); // bottom-right alignment
    // Mask dims that are 1 (statically or at run time) broadcast.
    SmallVector<Value> maskBroadcasts;
    if (mask)
      for (int64_t d = 0; d < rankOf(mask); ++d) {
        int64_t size = cast<RankedTensorType>(mask.getType()).getDimSize(d);
        if (size == 1)
          maskBroadcasts.push_back(arith::ConstantIntOp::create(rewriter, loc, 1, 1));
        else if (!ShapedType::isDynamic(size))
          maskBroadcasts.push_back(arith::ConstantIntOp::create(rewriter, loc, 0, 1));
        else
          maskBroadcasts.push_back(arith::CmpIOp::create(
              rewriter, loc, arith::CmpIPredicate::eq, dimValue(rewriter, loc, mask, d), one));
      }
    Value qBlock = indexConstant(rewriter, loc, tiling.queryBlock);
    Value kBlock = indexConstant(rewriter, loc, tiling.keyBlock);
    SmallVector<OpFoldResult> outSizes;
    for (int64_t i = 0; i < 4; ++i)
      outSizes.push_back(tensor::getMixedSize(rewriter, loc, i == 3 ? v : q, i));
    Value out = tensor::EmptyOp::create(rewriter, loc, outSizes, resultType.getElementType());
    Value sinkTable = sinksConstant(rewriter, loc, op.getSinks());

    auto batchLoop = scf::ForOp::create(
        rewriter, loc, zero, batch, one, ValueRange{out},
        [&](OpBuilder &b1, Location l1, Value bi, ValueRange a1) {
          auto headLoop = scf::ForOp::create(
              b1, l1, zero, heads, one, a1,
              [&](OpBuilder &b2, Location l2, Value h, ValueRange a2) {
                Value hk = arith::DivUIOp::create(b2, l2, h, indexConstant(b2, l2, rep));
                auto queryLoop = scf::ForOp::create(
                    b2, l2, zero, sq, qBlock, a2,
                    [&](OpBuilder &b3, Location l3, Value q0, ValueRange a3) {
                      Value tq = minIndex(b3, l3, qBlock,
                                          arith::SubIOp::create(b3, l3, sq, q0));
                      Value qTile = rowsOf(b3, l3, q, bi, h, q0, tq);
                      Value kvEnd = skv;
                      if (causal) {
                        Value last = arith::AddIOp::create(
                            b3, l3, arith::AddIOp::create(b3, l3, q0, tq), offset);
                        kvEnd = arith::MaxSIOp::create(b3, l3, zero,
                                                       minIndex(b3, l3, last, skv));
                      }
                      SoftmaxState init = initialState(b3, l3, tq, dv);
                      if (sinkTable) // every row of the tile is head h
                        init = withSinks(b3, l3, init, [&](OpBuilder &nb, Location nl, Value) {
                          return tensor::ExtractOp::create(nb, nl, sinkTable, ValueRange{h});
                        });
                      auto keyLoop = scf::ForOp::create(
                          b3, l3, zero, kvEnd, kBlock,
                          ValueRange{init.max, init.sum, init.acc},
                          [&](OpBuilder &b4, Location l4, Value k0, ValueRange st) {
                            Value tk = minIndex(b4, l4, kBlock,
                                                arith::SubIOp::create(b4, l4, kvEnd, k0));
                            Value kTile = rowsOf(b4, l4, k, bi, hk, k0, tk);
                            Value vTile = rowsOf(b4, l4, v, bi, hk, k0, tk);
                            auto maskFn = [&](OpBuilder &nb, Location nl, Value i, Value j,
                                              Value s) -> Value {
                              Value qi = arith::AddIOp::create(nb, nl, q0, i);
                              Value kj = arith::AddIOp::create(nb, nl, k0, j);
                              s = softcapScore(nb, nl, s, op.getSoftcap());
                              if (mask)
                                s = applyMask(nb, nl, mask, maskBroadcasts, {bi, h, qi, kj}, s);
                              if (!causal)
                                return s;
                              return hideAfter(nb, nl, kj,
                                               arith::AddIOp::create(nb, nl, qi, offset), s);
                            };
                            Value scores = scoreTile(b4, l4, qTile, kTile, scale, maskFn);
                            SoftmaxState next = softmaxStep(
                                b4, l4, SoftmaxState{st[0], st[1], st[2]}, scores, vTile);
                            scf::YieldOp::create(b4, l4,
                                                 ValueRange{next.max, next.sum, next.acc});
                          });
                      SoftmaxState done{keyLoop.getResult(0), keyLoop.getResult(1),
                                        keyLoop.getResult(2)};
                      Value tile = finishTile(b3, l3, done, resultType.getElementType());
                      OpFoldResult o = b3.getIndexAttr(1);
                      Value updated = tensor::InsertSliceOp::create(
                          b3, l3, tile, a3[0], {bi, h, q0, b3.getIndexAttr(0)},
                          {o, o, tq, dv}, {o, o, o, o});
                      scf::YieldOp::create(b3, l3, updated);
                    });
                scf::YieldOp::create(b2, l2, queryLoop.getResults());
              });
          scf::YieldOp::create(b1, l1, headLoop.getResults());
        });
    rewriter.replaceOp(op, batchLoop.getResults());
    return success();
  }

  /// The score with the mask element for full index (b, h, i, j) applied;
  /// the mask broadcasts from the right, size-1 dims read index 0.
  static Value applyMask(OpBuilder &b, Location loc, Value mask, ArrayRef<Value> broadcasts,
                         ArrayRef<Value> full, Value s) {
    int64_t rank = rankOf(mask);
    SmallVector<Value> indices;
    for (int64_t d = 0; d < rank; ++d)
      indices.push_back(
          arith::SelectOp::create(b, loc, broadcasts[d], indexConstant(b, loc, 0), full[d + 4 - rank]));
    Value m = tensor::ExtractOp::create(b, loc, mask, indices);
    if (m.getType().isInteger(1)) {
      Value ninf = arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
      return arith::SelectOp::create(b, loc, m, s, ninf);
    }
    return arith::AddFOp::create(b, loc, s, convertFloat(b, loc, m, b.getF32Type()));
  }

  AttentionTiling tiling;
};

/// For a target with a fused attention kernel: xfmr.attention on f32 with
/// a static value head dim of at most `maxHeadDim` becomes
/// xfmr.attention_buffers on the operands' buffers (any strides: views are
/// read in place) into a new buffer, which the target's pass replaces with
/// its kernel after bufferization.
struct AttentionToBuffers : OpRewritePattern<AttentionOp> {
  AttentionToBuffers(MLIRContext *ctx, int64_t maxHeadDim)
      : OpRewritePattern(ctx, /*benefit=*/2), maxHeadDim(maxHeadDim) {}

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    auto resultType = op.getResult().getType();
    int64_t dv = resultType.getDimSize(3);
    auto isF32 = [](Value v) { return cast<ShapedType>(v.getType()).getElementType().isF32(); };
    if (!isF32(op.getQuery()) || !isF32(op.getKey()) || !isF32(op.getValue()) ||
        ShapedType::isDynamic(dv) || dv > maxHeadDim)
      return rewriter.notifyMatchFailure(op, "not f32 with a static head dim the kernel takes");
    if (op.getSoftcap() || op.getSinks()) // the fused kernels have neither
      return rewriter.notifyMatchFailure(op, "soft-capped scores or sinks");
    Location loc = op.getLoc();
    auto buffer = [&](Value t) { return readOnlyBuffer(rewriter, loc, t); };
    // One statement each: the IR's order must not depend on the compiler's
    // order of evaluating arguments.
    Value q = buffer(op.getQuery());
    Value k = buffer(op.getKey());
    Value v = buffer(op.getValue());
    Value mask = op.getMask() ? buffer(op.getMask()) : Value();
    SmallVector<Value> sizes;
    for (int64_t d = 0; d < 4; ++d)
      if (resultType.isDynamicDim(d))
        sizes.push_back(dimValue(rewriter, loc, op.getQuery(), d));
    auto outType = MemRefType::get(resultType.getShape(), resultType.getElementType());
    Value out = memref::AllocOp::create(rewriter, loc, outType, sizes);
    AttentionBuffersOp::create(rewriter, loc, q, k, v, mask, out, op.getNumHeadsAttr(),
                               op.getNumKvHeadsAttr(), op.getScaleAttr(), op.getCausalAttr());
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(op, resultType, out,
                                                           /*restrict=*/true,
                                                           /*writable=*/true);
    return success();
  }

  int64_t maxHeadDim;
};

} // namespace

void populateAttentionLoweringPatterns(RewritePatternSet &patterns, AttentionTiling tiling,
                                       int64_t fusedMaxHeadDim) {
  patterns.add<LowerAttention>(patterns.getContext(), tiling);
  if (fusedMaxHeadDim > 0)
    patterns.add<AttentionToBuffers>(patterns.getContext(), fusedMaxHeadDim);
}

} // namespace xfmr::lowering
