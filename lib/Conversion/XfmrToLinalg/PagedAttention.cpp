//===- PagedAttention.cpp - lowering of the paged KV cache ops ------------===//
//
// Part of xfmr.
//
// xfmr.kv_write: one insert per token into its slot of the pools (in place
// after bufferization when the pools are writable function arguments);
// int8/fp8 pools get the token's quantized head vectors and their scales
// (KVQuant.h).
// xfmr.paged_attention: FlashAttention over the blocks of each sequence's
// block table: per sequence, KV head (together with every query head that
// shares it) and block of `queryBlock` new tokens, one key tile per KV-cache
// block with an online softmax; keys past a token's own position (and, with
// a sliding window W, keys at or before position - W) are masked, and blocks
// wholly outside those bounds are never read. Block ids, slots and the packed-token offsets are checked
// at run time (cf.assert) before any read or write.
//
//===----------------------------------------------------------------------===//

#include "KVQuant.h"
#include "Patterns.h"
#include "TileBuilder.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

/// Element `indices` of an integer tensor as an index.
Value loadIndex(OpBuilder &b, Location loc, Value t, ValueRange indices) {
  Value v = tensor::ExtractOp::create(b, loc, t, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}
/// `v` clamped into [lo, hi].
Value clamp(OpBuilder &b, Location loc, Value v, Value lo, Value hi) {
  return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, v, lo), hi);
}
Value cmp(OpBuilder &b, Location loc, arith::CmpIPredicate p, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, p, x, y);
}

/// [rows, D] from a [T, H, D] tensor at (start, head) or from a pool
/// [N, bs, H, D] at (block, start, head).
Value slice2D(OpBuilder &b, Location loc, Value t, ArrayRef<OpFoldResult> offsets,
              ArrayRef<OpFoldResult> sizes) {
  auto type = cast<RankedTensorType>(t.getType());
  auto resultType = RankedTensorType::get(
      {ShapedType::kDynamic, type.getDimSize(type.getRank() - 1)}, type.getElementType());
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, resultType, t, offsets, sizes, strides);
}

/// The [tq, rep, D] slice of q [T, H, D] at `offsets`, as [tq * rep, D].
Value groupRows(OpBuilder &b, Location loc, Value q, ArrayRef<OpFoldResult> offsets,
                ArrayRef<OpFoldResult> sizes) {
  auto type = cast<RankedTensorType>(q.getType());
  std::optional<int64_t> rep = getConstantIntValue(sizes[1]);
  auto sliceType = RankedTensorType::get(
      {ShapedType::kDynamic, rep.value_or(ShapedType::kDynamic), type.getDimSize(2)},
      type.getElementType());
  SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
  Value slice = tensor::ExtractSliceOp::create(b, loc, sliceType, q, offsets, sizes, strides);
  return tensor::CollapseShapeOp::create(b, loc, slice,
                                         ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}

/// [tq * rep, Dv] back to [tq, rep, Dv].
Value ungroupRows(OpBuilder &b, Location loc, Value tile, Value tq, int64_t rep) {
  auto type = cast<RankedTensorType>(tile.getType());
  auto resultType = RankedTensorType::get({ShapedType::kDynamic, rep, type.getDimSize(1)},
                                          type.getElementType());
  SmallVector<OpFoldResult> shape{tq, b.getIndexAttr(rep),
                                  tensor::getMixedSize(b, loc, tile, 1)};
  return tensor::ExpandShapeOp::create(b, loc, resultType, tile,
                                       ArrayRef<ReassociationIndices>{{0, 1}, {2}}, shape);
}

/// Latent keys (xfmr.paged_attention's `latent`): each row of the value
/// tile [rows, Dv] followed by the same row of the key tile [rows, Dk].
Value latentKeys(OpBuilder &b, Location loc, Value vTile, Value kTile) {
  auto vType = cast<RankedTensorType>(vTile.getType());
  auto kType = cast<RankedTensorType>(kTile.getType());
  int64_t dv = vType.getDimSize(1), dk = kType.getDimSize(1);
  OpFoldResult rows = tensor::getMixedSize(b, loc, vTile, 0);
  OpFoldResult vCols = tensor::getMixedSize(b, loc, vTile, 1);
  OpFoldResult kCols = tensor::getMixedSize(b, loc, kTile, 1);
  OpFoldResult cols =
      ShapedType::isDynamic(dv) || ShapedType::isDynamic(dk)
          ? OpFoldResult(arith::AddIOp::create(b, loc, dimValue(b, loc, vTile, 1),
                                               dimValue(b, loc, kTile, 1))
                             .getResult())
          : OpFoldResult(b.getIndexAttr(dv + dk));
  Value keys = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{rows, cols},
                                       vType.getElementType());
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  keys = tensor::InsertSliceOp::create(b, loc, vTile, keys, {zero, zero}, {rows, vCols},
                                       {one, one});
  return tensor::InsertSliceOp::create(b, loc, kTile, keys, {zero, vCols}, {rows, kCols},
                                       {one, one});
}

/// A quantized tile [rows, D] (i8 or f8E4M3FN) with its rows' scales
/// [rows] as the f32 values it stands for.
Value dequantizedTile(OpBuilder &b, Location loc, Value tile, Value rowScales) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(tile.getType());
  Value init = tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, tile), b.getF32Type());
  double widened = widenedScale(type.getElementType());
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  SmallVector<utils::IteratorType> its(2, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{tile, rowScales}, init,
             ArrayRef<AffineMap>{id, row, id}, its,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value s = a[1];
               if (widened != 1.0)
                 s = arith::MulFOp::create(
                     nb, l, s,
                     arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(widened)).getResult());
               linalg::YieldOp::create(nb, l,
                                       arith::MulFOp::create(nb, l, widenKV(nb, l, a[0]), s)
                                           .getResult());
             })
      .getResult(0);
}

/// `row` converted to `element` (a no-op when it already has that type).
Value convertTo(OpBuilder &b, Location loc, Value row, Type element) {
  auto type = cast<RankedTensorType>(row.getType());
  if (type.getElementType() == element)
    return row;
  Value init = tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, row), element);
  auto id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> its(type.getRank(), utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, init.getType(), row, init, ArrayRef<AffineMap>{id, id}, its,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               linalg::YieldOp::create(nb, l, convertFloat(nb, l, a[0], element));
             })
      .getResult(0);
}

struct LowerKVWrite : OpRewritePattern<KVWriteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(KVWriteOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto poolType = cast<RankedTensorType>(op.getKeyPool().getType());
    int64_t blockSize = poolType.getDimSize(1);
    Value zero = indexConstant(rewriter, loc, 0), one = indexConstant(rewriter, loc, 1);
    Value tokens = dimValue(rewriter, loc, op.getKey(), 0);
    Value capacity = arith::MulIOp::create(rewriter, loc, dimValue(rewriter, loc, op.getKeyPool(), 0),
                                           indexConstant(rewriter, loc, blockSize));
    // key, value[, key scales, value scales]: the loop's carried values.
    SmallVector<Value, 4> pools{op.getKeyPool(), op.getValuePool()};
    pools.append(op.getScales().begin(), op.getScales().end());
    bool scaled = pools.size() == 4;
    auto loop = scf::ForOp::create(
        rewriter, loc, zero, tokens, one, pools,
        [&](OpBuilder &b, Location l, Value t, ValueRange pools) {
          Value slot = tensor::ExtractOp::create(b, l, op.getSlotMapping(), t);
          Value zeroSlot = arith::ConstantOp::create(b, l, b.getZeroAttr(slot.getType()));
          Value write = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, slot, zeroSlot);
          auto ifOp = scf::IfOp::create(
              b, l, write,
              [&](OpBuilder &bt, Location lt) {
                Value s = arith::IndexCastOp::create(bt, lt, bt.getIndexType(), slot);
                Value inPool = cmp(bt, lt, arith::CmpIPredicate::slt, s, capacity);
                runtimeCheck(bt, lt, inPool, "xfmr.kv_write: slot past the end of the KV pool");
                // Past the end, the write goes to slot 0 of block 0 (the
                // call fails anyway) instead of outside the pool.
                s = arith::SelectOp::create(bt, lt, inPool, s, zero);
                Value bs = indexConstant(bt, lt, blockSize);
                Value block = arith::DivUIOp::create(bt, lt, s, bs);
                Value offset = arith::RemUIOp::create(bt, lt, s, bs);
                SmallVector<Value> updated(pools.begin(), pools.end());
                SmallVector<Value, 2> sources{op.getKey(), op.getValue()};
                for (auto [i, src] : llvm::enumerate(sources)) {
                  OpFoldResult o = bt.getIndexAttr(1), z = bt.getIndexAttr(0);
                  OpFoldResult h = tensor::getMixedSize(bt, lt, src, 1);
                  OpFoldResult d = tensor::getMixedSize(bt, lt, src, 2);
                  auto srcType = cast<RankedTensorType>(src.getType());
                  auto rowType = RankedTensorType::get({srcType.getDimSize(1), srcType.getDimSize(2)},
                                                       srcType.getElementType());
                  Value row = tensor::ExtractSliceOp::create(bt, lt, rowType, src, {t, z, z},
                                                             {o, h, d}, {o, o, o});
                  Type element = cast<RankedTensorType>(pools[i].getType()).getElementType();
                  if (scaled) {
                    // One scale per head, beside the token's slot.
                    QuantizedRow q = quantizeHeads(bt, lt, row, element);
                    row = q.values;
                    updated[2 + i] = tensor::InsertSliceOp::create(
                        bt, lt, q.scales, pools[2 + i], {block, offset, z}, {o, o, h}, {o, o, o});
                  } else {
                    row = convertTo(bt, lt, row, element);
                  }
                  updated[i] = tensor::InsertSliceOp::create(
                      bt, lt, row, pools[i], {block, offset, z, z}, {o, o, h, d}, {o, o, o, o});
                }
                scf::YieldOp::create(bt, lt, updated);
              },
              [&](OpBuilder &be, Location le) { scf::YieldOp::create(be, le, pools); });
          scf::YieldOp::create(b, l, ifOp.getResults());
        });
    rewriter.replaceOp(op, loop.getResults());
    return success();
  }
};

struct LowerPagedAttention : OpRewritePattern<PagedAttentionOp> {
  LowerPagedAttention(MLIRContext *ctx, AttentionTiling tiling)
      : OpRewritePattern(ctx), tiling(tiling) {}

  /// What every loop level reads: the op's operands and attributes and the
  /// index constants, built once before the loops.
  struct Operands {
    Value q, kPool, vPool, kScales, vScales, tables, lens, starts;
    int64_t rep;
    double scale;
    bool latent;
    std::optional<uint64_t> slidingWindow;
    std::optional<llvm::APFloat> softcap;
    Value zero, one, bs, group, numTokens, numBlocks, maxBlocks, qBlock, window, sinkTable;
    OpFoldResult d, dv;
  };

  /// One sequence's new tokens: rows [first, first + n) of the packed
  /// tokens, at positions [base, ctx) of its context.
  struct Sequence {
    Value first, n, ctx, base;
  };

  /// One query tile: `tq` tokens from row `row0` (position `pos0`) with the
  /// `rep` query heads from `h0` that share KV head `hk`, keys up to `kvEnd`.
  struct QueryTile {
    Value s, hk, h0, tq, row0, pos0, kvEnd, qTile;
  };

  /// The sequences all three of context_lens, block_tables and
  /// query_start_loc describe (they must agree: the manifest's "seqs" and
  /// "seqs_plus_one" are separate symbols, so this is not checked before
  /// the call).
  static Value sequenceCount(PatternRewriter &rewriter, Location loc, const Operands &o) {
    Value numSeqs = dimValue(rewriter, loc, o.lens, 0);
    Value startsSeqs =
        arith::SubIOp::create(rewriter, loc, dimValue(rewriter, loc, o.starts, 0), o.one);
    Value tableSeqs = dimValue(rewriter, loc, o.tables, 0);
    runtimeCheck(rewriter, loc,
                 arith::AndIOp::create(
                     rewriter, loc, cmp(rewriter, loc, arith::CmpIPredicate::eq, startsSeqs, numSeqs),
                     cmp(rewriter, loc, arith::CmpIPredicate::eq, tableSeqs, numSeqs)),
                 "xfmr.paged_attention: context_lens, block_tables and query_start_loc disagree "
                 "on the number of sequences");
    return arith::MaxSIOp::create(
        rewriter, loc, o.zero,
        arith::MinSIOp::create(rewriter, loc, numSeqs,
                               arith::MinSIOp::create(rewriter, loc, startsSeqs, tableSeqs)));
  }

  /// Sequence `s`'s rows and positions, checked; clamped so that
  /// 0 <= first <= end <= tokens and end - first <= ctx <= the table's
  /// capacity (the call fails after a failed check, but the loops still
  /// run: this keeps every query row and table entry they read in bounds).
  static Sequence sequenceAt(OpBuilder &b, Location l, const Operands &o, Value s) {
    Value first = loadIndex(b, l, o.starts, s);
    Value end = loadIndex(b, l, o.starts, arith::AddIOp::create(b, l, s, o.one).getResult());
    Value ctx = loadIndex(b, l, o.lens, s);
    auto check = [&](Value lhs, Value rhs, const char *message) {
      runtimeCheck(b, l, cmp(b, l, arith::CmpIPredicate::sle, lhs, rhs), message);
    };
    check(o.zero, first, "xfmr.paged_attention: negative query_start_loc");
    check(first, end, "xfmr.paged_attention: query_start_loc is not ascending");
    check(end, o.numTokens, "xfmr.paged_attention: query_start_loc past the packed tokens");
    check(end, arith::AddIOp::create(b, l, first, ctx),
          "xfmr.paged_attention: context_lens shorter than the new tokens");
    Value capacity = arith::MulIOp::create(b, l, o.maxBlocks, o.bs);
    check(ctx, capacity, "xfmr.paged_attention: context longer than the block table");
    first = clamp(b, l, first, o.zero, o.numTokens);
    end = clamp(b, l, end, first, o.numTokens);
    end = arith::MinSIOp::create(b, l, end, arith::AddIOp::create(b, l, first, capacity));
    Value n = arith::SubIOp::create(b, l, end, first);
    ctx = clamp(b, l, ctx, n, capacity);
    Value base = arith::SubIOp::create(b, l, ctx, n); // position of the first new token
    return {first, n, ctx, base};
  }

  /// The online-softmax step of query tile `t` over KV-cache block `kb` of
  /// its sequence (one key tile), from state `st`.
  static SoftmaxState blockStep(OpBuilder &b, Location l, const Operands &o, const QueryTile &t,
                                Value kb, ValueRange st) {
    OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
    Value block = loadIndex(b, l, o.tables, {t.s, kb});
    Value inPool = arith::AndIOp::create(b, l, cmp(b, l, arith::CmpIPredicate::sle, o.zero, block),
                                         cmp(b, l, arith::CmpIPredicate::slt, block, o.numBlocks));
    runtimeCheck(b, l, inPool, "xfmr.paged_attention: block id outside the KV pool");
    block = arith::SelectOp::create(b, l, inPool, block, o.zero);
    Value k0 = arith::MulIOp::create(b, l, kb, o.bs);
    Value tk = arith::MinSIOp::create(b, l, o.bs, arith::SubIOp::create(b, l, t.kvEnd, k0));
    Value kTile = slice2D(b, l, o.kPool, {block, z, t.hk, z}, {one, tk, one, o.d});
    Value vTile = slice2D(b, l, o.vPool, {block, z, t.hk, z}, {one, tk, one, o.dv});
    // Quantized pools: the tiles' rows' scales; the products widen the
    // tiles in registers.
    Value kRowScales, vRowScales;
    if (o.kScales) {
      auto column = RankedTensorType::get({ShapedType::kDynamic}, b.getF32Type());
      auto scalesAt = [&](Value pool) -> Value {
        return tensor::ExtractSliceOp::create(b, l, column, pool,
                                              ArrayRef<OpFoldResult>{block, z, t.hk},
                                              ArrayRef<OpFoldResult>{one, tk, one},
                                              ArrayRef<OpFoldResult>{one, one, one});
      };
      kRowScales = scalesAt(o.kScales);
      vRowScales = scalesAt(o.vScales);
    }
    // Latent keys: the value tile and the key tile side by side; quantized
    // halves (each with its own scales) are widened to f32 first.
    if (o.latent && o.kScales) {
      // One statement each: the IR's order must not depend on the compiler.
      Value latents = dequantizedTile(b, l, vTile, vRowScales);
      Value ropeKeys = dequantizedTile(b, l, kTile, kRowScales);
      kTile = latentKeys(b, l, latents, ropeKeys);
      kRowScales = nullptr;
    } else if (o.latent) {
      kTile = latentKeys(b, l, vTile, kTile);
    }
    auto maskFn = [&](OpBuilder &nb, Location nl, Value i, Value j, Value score) -> Value {
      Value token = arith::DivUIOp::create(nb, nl, i, indexConstant(nb, nl, o.rep));
      Value pos = arith::AddIOp::create(nb, nl, t.pos0, token);
      Value key = arith::AddIOp::create(nb, nl, k0, j);
      score = softcapScore(nb, nl, score, o.softcap);
      score = hideAfter(nb, nl, key, pos, score);
      if (!o.window)
        return score;
      // pos > key + W - 1 (key <= pos - W): outside the window.
      Value lastSeen = arith::AddIOp::create(
          nb, nl, key, indexConstant(nb, nl, static_cast<int64_t>(*o.slidingWindow) - 1));
      return hideAfter(nb, nl, pos, lastSeen, score);
    };
    Value scores = scoreTile(b, l, t.qTile, kTile, o.scale, maskFn, kRowScales);
    return softmaxStep(b, l, SoftmaxState{st[0], st[1], st[2]}, scores, vTile, vRowScales);
  }

  /// Query tile `t` attended over its sequence's blocks, written into `acc`
  /// (the result so far).
  static Value attendTile(OpBuilder &b, Location l, const Operands &o, const QueryTile &t,
                          Value acc, Type element) {
    OpFoldResult one = b.getIndexAttr(1), z = b.getIndexAttr(0);
    Value blocks = arith::CeilDivUIOp::create(b, l, t.kvEnd, o.bs);
    // With a sliding window, the tile's first row sees nothing before
    // pos0 - W + 1: earlier blocks are skipped (decode reads about
    // W / block_size blocks).
    Value firstBlock = o.zero;
    if (o.window) {
      Value oldest =
          arith::SubIOp::create(b, l, arith::AddIOp::create(b, l, t.pos0, o.one), o.window);
      oldest = arith::MaxSIOp::create(b, l, oldest, o.zero);
      firstBlock = arith::DivUIOp::create(b, l, oldest, o.bs);
    }
    Value rows = arith::MulIOp::create(b, l, t.tq, o.group);
    SoftmaxState init = initialState(b, l, rows, o.dv);
    if (o.sinkTable) // row i is query head h0 + i % rep
      init = withSinks(b, l, init, [&](OpBuilder &nb, Location nl, Value i) {
        Value h = arith::AddIOp::create(
            nb, nl, t.h0, arith::RemUIOp::create(nb, nl, i, indexConstant(nb, nl, o.rep)));
        return tensor::ExtractOp::create(nb, nl, o.sinkTable, ValueRange{h});
      });
    auto blockLoop = scf::ForOp::create(
        b, l, firstBlock, blocks, o.one, ValueRange{init.max, init.sum, init.acc},
        [&](OpBuilder &b4, Location l4, Value kb, ValueRange st) {
          SoftmaxState next = blockStep(b4, l4, o, t, kb, st);
          scf::YieldOp::create(b4, l4, ValueRange{next.max, next.sum, next.acc});
        });
    SoftmaxState done{blockLoop.getResult(0), blockLoop.getResult(1), blockLoop.getResult(2)};
    Value tile = finishTile(b, l, done, element);
    Value heads3 = ungroupRows(b, l, tile, t.tq, o.rep);
    return tensor::InsertSliceOp::create(b, l, heads3, acc, {t.row0, t.h0, z},
                                         {t.tq, b.getIndexAttr(o.rep), o.dv}, {one, one, one});
  }

  Operands operandsOf(PagedAttentionOp op, PatternRewriter &rewriter) const {
    Location loc = op.getLoc();
    Operands o;
    o.q = op.getQuery();
    o.kPool = op.getKeyPool();
    o.vPool = op.getValuePool();
    o.kScales = op.getKeyScales();
    o.vScales = op.getValueScales();
    o.tables = op.getBlockTables();
    o.lens = op.getContextLens();
    o.starts = op.getQueryStartLoc();
    o.rep = op.getNumHeads() / op.getNumKvHeads();
    o.scale = op.getScale().convertToDouble();
    // Latent keys are the value followed by the key-pool entry: the query
    // has both widths, the key pool only its own.
    o.latent = op.getLatent();
    o.slidingWindow = op.getSlidingWindow();
    o.softcap = op.getSoftcap();
    o.zero = indexConstant(rewriter, loc, 0);
    o.one = indexConstant(rewriter, loc, 1);
    o.bs = indexConstant(rewriter, loc, op.getBlockSize());
    o.group = indexConstant(rewriter, loc, o.rep);
    o.numTokens = dimValue(rewriter, loc, o.q, 0);
    o.numBlocks = dimValue(rewriter, loc, o.kPool, 0);
    o.maxBlocks = dimValue(rewriter, loc, o.tables, 1);
    o.d = tensor::getMixedSize(rewriter, loc, o.latent ? o.kPool : o.q, o.latent ? 3 : 2);
    o.dv = tensor::getMixedSize(rewriter, loc, o.vPool, 3);
    o.qBlock = indexConstant(rewriter, loc, tiling.queryBlock);
    o.window = o.slidingWindow
                   ? indexConstant(rewriter, loc, static_cast<int64_t>(*o.slidingWindow))
                   : Value();
    o.sinkTable = sinksConstant(rewriter, loc, op.getSinks());
    return o;
  }

  LogicalResult matchAndRewrite(PagedAttentionOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Operands o = operandsOf(op, rewriter);
    Value numSeqs = sequenceCount(rewriter, loc, o);
    Value kvHeads = indexConstant(rewriter, loc, op.getNumKvHeads());
    Type element = op.getResult().getType().getElementType();
    Value out = tensor::EmptyOp::create(
        rewriter, loc,
        ArrayRef<OpFoldResult>{tensor::getMixedSize(rewriter, loc, o.q, 0),
                               tensor::getMixedSize(rewriter, loc, o.q, 1), o.dv},
        element);
    // Per sequence, one KV head at a time with all `rep` query heads that
    // share it (GQA/MQA: each K/V tile is read once for the whole group, and
    // a decode token's tile has rep rows instead of one), per block of
    // queryBlock new tokens.
    auto seqLoop = scf::ForOp::create(
        rewriter, loc, o.zero, numSeqs, o.one, ValueRange{out},
        [&](OpBuilder &b1, Location l1, Value s, ValueRange a1) {
          Sequence seq = sequenceAt(b1, l1, o, s);
          auto headLoop = scf::ForOp::create(
              b1, l1, o.zero, kvHeads, o.one, a1,
              [&](OpBuilder &b2, Location l2, Value hk, ValueRange a2) {
                Value h0 = arith::MulIOp::create(b2, l2, hk, o.group);
                auto queryLoop = scf::ForOp::create(
                    b2, l2, o.zero, seq.n, o.qBlock, a2,
                    [&](OpBuilder &b3, Location l3, Value q0, ValueRange a3) {
                      QueryTile t{s, hk, h0};
                      t.tq = arith::MinSIOp::create(b3, l3, o.qBlock,
                                                    arith::SubIOp::create(b3, l3, seq.n, q0));
                      t.row0 = arith::AddIOp::create(b3, l3, seq.first, q0);
                      // [tq, rep, D] -> [tq * rep, D]: row i is token i / rep.
                      t.qTile = groupRows(b3, l3, o.q, {t.row0, h0, b3.getIndexAttr(0)},
                                          {t.tq, b3.getIndexAttr(o.rep),
                                           tensor::getMixedSize(b3, l3, o.q, 2)});
                      t.pos0 = arith::AddIOp::create(b3, l3, seq.base, q0);
                      t.kvEnd = arith::MinSIOp::create(
                          b3, l3, seq.ctx, arith::AddIOp::create(b3, l3, t.pos0, t.tq));
                      scf::YieldOp::create(b3, l3, attendTile(b3, l3, o, t, a3[0], element));
                    });
                scf::YieldOp::create(b2, l2, queryLoop.getResults());
              });
          scf::YieldOp::create(b1, l1, headLoop.getResults());
        });
    // Sequences write disjoint rows of the result and only read the pools:
    // the CPU backend may run them on several cores (xfmr-parallelize-loops).
    seqLoop->setAttr("xfmr.independent_iterations", rewriter.getUnitAttr());
    rewriter.replaceOp(op, seqLoop.getResults());
    return success();
  }

  AttentionTiling tiling;
};

/// For a target with a fused attention kernel: xfmr.paged_attention with an
/// f32 query and a static head dim of at most `maxHeadDim` (any pools:
/// float, or int8/fp8 with their scales) becomes xfmr.paged_attention_buffers on the operands'
/// buffers into a new buffer (as AttentionToBuffers in Attention.cpp).
struct PagedAttentionToBuffers : OpRewritePattern<PagedAttentionOp> {
  PagedAttentionToBuffers(MLIRContext *ctx, int64_t maxHeadDim)
      : OpRewritePattern(ctx, /*benefit=*/2), maxHeadDim(maxHeadDim) {}

  LogicalResult matchAndRewrite(PagedAttentionOp op, PatternRewriter &rewriter) const override {
    auto resultType = op.getResult().getType();
    int64_t d = resultType.getDimSize(2);
    if (!resultType.getElementType().isF32() || ShapedType::isDynamic(d) || d > maxHeadDim)
      return rewriter.notifyMatchFailure(op, "not an f32 query with a head dim the kernel takes");
    if (op.getSoftcap() || op.getSinks() || op.getLatent()) // the fused kernels have none
      return rewriter.notifyMatchFailure(op, "soft-capped scores, sinks or latent keys");
    Location loc = op.getLoc();
    auto buffer = [&](Value t) { return readOnlyBuffer(rewriter, loc, t); };
    // One statement each: the IR's order must not depend on the compiler.
    Value q = buffer(op.getQuery());
    Value kPool = buffer(op.getKeyPool());
    Value vPool = buffer(op.getValuePool());
    Value tables = buffer(op.getBlockTables());
    Value lens = buffer(op.getContextLens());
    Value starts = buffer(op.getQueryStartLoc());
    SmallVector<Value, 2> scales;
    for (Value v : op.getScales())
      scales.push_back(buffer(v));
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < resultType.getRank(); ++i)
      if (resultType.isDynamicDim(i))
        sizes.push_back(dimValue(rewriter, loc, op.getQuery(), i));
    Value out = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(resultType.getShape(), resultType.getElementType()), sizes);
    PagedAttentionBuffersOp::create(rewriter, loc, q, kPool, vPool, tables, lens, starts, scales, out,
                                    op.getNumHeadsAttr(), op.getNumKvHeadsAttr(),
                                    op.getScaleAttr(), op.getBlockSizeAttr(),
                                    op.getSlidingWindowAttr());
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(op, resultType, out,
                                                           /*restrict=*/true, /*writable=*/true);
    return success();
  }

  int64_t maxHeadDim;
};

} // namespace

void populatePagedLoweringPatterns(RewritePatternSet &patterns, AttentionTiling tiling,
                                   int64_t fusedMaxHeadDim) {
  patterns.add<LowerKVWrite>(patterns.getContext());
  patterns.add<LowerPagedAttention>(patterns.getContext(), tiling);
  if (fusedMaxHeadDim > 0)
    patterns.add<PagedAttentionToBuffers>(patterns.getContext(), fusedMaxHeadDim);
}

} // namespace xfmr::lowering
