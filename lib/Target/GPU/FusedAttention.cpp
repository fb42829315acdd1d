//===- FusedAttention.cpp - FlashAttention as one tensor-core kernel ------===//
//
// Part of xfmr.
//
// Every xfmr.attention_buffers (f32 attention that convert-xfmr-to-linalg
// left on buffers for this target) becomes one kernel, FlashAttention-2
// style:
//
//   grid (ceil(Sq / 16), Hq, B), 128 threads = 4 warps; a block owns 16
//   query rows of one head and walks the keys 32 at a time (causal: only
//   up to the last key its bottom row may see) with an online softmax.
//   Per key tile:
//     S = Q·Kᵀ   Q [16, 32] and Kᵀ [32, 32] staged per 32-wide chunk of the
//                head dim as tf32 hi/lo; warp w computes the 16 x 16 block
//                w % 2 of S over half w / 2 of the chunk (WMMA, 3xTF32);
//     softmax    thread r < 16 scales, masks (the mask operand, causal,
//                keys past the end) and folds row r into the running max
//                and sum; P = exp(S - max) as tf32 hi/lo;
//     O += P·V   per 32 columns of V: warp w computes columns block w % 2
//                over key half w / 2, then O = O * alpha + both halves.
//   O [16, Dv] stays in shared memory; the block writes O / sum at the end.
//
// GQA reads KV head h / (Hq / Hkv) in place; nothing of size Sq x Skv
// exists. Every sum runs in a fixed order that does not depend on Sq or B.
// Shared memory: 20 KB + 64 * Dv bytes (36 KB at Dv = 256). With
// `emulate`, the same program runs as host loops (KernelBuilder.h).
//
// xfmr.paged_attention_buffers runs the same program over a paged KV cache
// (vLLM's layout): grid (ceil(n * G / 16), Hkv, sequences) with G = Hq /
// Hkv and n the most new tokens of a sequence (read on the host). A block owns one KV head of one sequence and 16 rows of its new
// tokens x the G query heads that share the head (row i: token i / G,
// head i % G), so each key and value is read once per group of query heads
// (a decode token fills G rows). Key j of the sequence is read through its
// block table (block j / block_size, offset j % block_size); keys after a
// row's position, and before its sliding window, are masked, and key tiles
// wholly before the window are not read. Blocks past a sequence's rows run
// no key tile. The sequence's offsets and block ids are checked as on the
// CPU (through the device check word, xfmr-gpu-map-loops) and clamped.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/Passes.h"

#include "../../Conversion/XfmrToLinalg/KVQuant.h"
#include "KernelBuilder.h"
#include "KernelName.h"

#include "dialects/xfmr/IR/XfmrOps.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include <limits>

using namespace mlir;
using xfmr::lowering::runtimeCheck;

namespace xfmr::gpu {
#define GEN_PASS_DEF_FUSEDATTENTIONPASS
#include "xfmr/Target/GPU/Passes.h.inc"
} // namespace xfmr::gpu

namespace xfmr::gpu {
namespace {

constexpr int64_t kRows = 16, kKeys = 32, kChunk = 32;
constexpr int64_t kThreads = 128;

/// The program both kernels share; where rows, keys and values come from and
/// which scores a row keeps are the subclasses' (dense and paged).
class AttentionKernel : protected KernelBuilder {
public:
  AttentionKernel(OpBuilder &b, Location loc, int64_t dv, bool emulate)
      : KernelBuilder(b, loc, kThreads, emulate), dv(dv),
        dvPadded((dv + kChunk - 1) / kChunk * kChunk) {}
  virtual ~AttentionKernel() = default;

  void build(StringRef name);

protected:
  int64_t dv, dvPadded;
  /// Set by blocks(): the head dim and the scores' scale. Set by setUp(): this
  /// block's valid rows (0 to 16) and its keys [keyBegin, keyEnd).
  Value d, scale, tq, keyBegin, keyEnd;

  /// The grid's blocks (x, y, z), built before the launch.
  virtual std::array<Value, 3> blocks() = 0;
  virtual void setUp(Value bx, Value by, Value bz) = 0;
  /// Element `col` (< d) of row r (< tq) of the query tile.
  virtual Value query(Value r, Value col) = 0;
  /// Element `col` of the key or value at position `pos` (in [keyBegin, keyEnd)).
  virtual Value key(Value pos, Value col) = 0;
  virtual Value value(Value pos, Value col) = 0;
  /// The scaled score `s` of row r (< tq) and key `pos` with the masks applied.
  virtual Value masked(Value r, Value pos, Value s) = 0;
  virtual void storeRow(Value r, Value col, Value x) = 0;

  Value dimOf(Value v, int64_t i) { return memref::DimOp::create(b, loc, v, i); }
  Value asF32(Value x) {
    return x.getType().isF32() ? x
                               : arith::ExtFOp::create(b, loc, b.getF32Type(), x).getResult();
  }
  Value negInf() { return f32(-std::numeric_limits<float>::infinity()); }
  /// -inf where `key` > `last`.
  Value hideAfter(Value key, Value last, Value s) {
    Value hidden = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, key, last);
    return arith::SelectOp::create(b, loc, hidden, negInf(), s);
  }

private:
  // Shared memory.
  Value qhi, qlo, xhi, xlo, part, phi, plo, o, rowMax, rowSum, alpha;

  struct Shared {
    SmallVector<int64_t, 2> shape;
    Value *slot;
  };
  SmallVector<Shared> sharedBuffers() {
    return {{{kRows, kChunk}, &qhi},  {{kRows, kChunk}, &qlo},  {{kChunk, kKeys}, &xhi},
            {{kChunk, kKeys}, &xlo},  {{2 * kRows, kKeys}, &part}, {{kRows, kKeys}, &phi},
            {{kRows, kKeys}, &plo},   {{kRows, dvPadded}, &o},  {{kRows}, &rowMax},
            {{kRows}, &rowSum},       {{kRows}, &alpha}};
  }

  void stageSplit(Value x, Value hiBuf, Value loBuf, ValueRange at) {
    auto [hi, lo] = splitTF32(x);
    store(hi, hiBuf, at);
    store(lo, loBuf, at);
  }

  void buildBlock(Value bx, Value by, Value bz, Value tid);
  void scores(Value tid, Value k0);
  void softmax(Value tid, Value k0);
  void accumulate(Value tid, Value k0);
};

/// xfmr.attention_buffers: [B, H, S, D] tensors.
class DenseAttention : public AttentionKernel {
public:
  DenseAttention(OpBuilder &b, AttentionBuffersOp op, bool emulate)
      : AttentionKernel(b, op.getLoc(), cast<MemRefType>(op.getOut().getType()).getDimSize(3),
                        emulate),
        op(op) {}

private:
  AttentionBuffersOp op;
  Value sq, skv, bi, h, hk, q0;
  SmallVector<Value> maskBroadcasts;

  std::array<Value, 3> blocks() override;
  void setUp(Value bx, Value by, Value bz) override;
  Value query(Value r, Value col) override {
    return load(op.getQuery(), {bi, h, add(q0, r), col});
  }
  Value key(Value pos, Value col) override { return load(op.getKey(), {bi, hk, pos, col}); }
  Value value(Value pos, Value col) override { return load(op.getValue(), {bi, hk, pos, col}); }
  Value masked(Value r, Value pos, Value s) override;
  void storeRow(Value r, Value col, Value x) override {
    store(x, op.getOut(), {bi, h, add(q0, r), col});
  }
};

/// xfmr.paged_attention_buffers: packed tokens [T, Hq, D], pools
/// [num_blocks, block_size, Hkv, D] read through the block tables.
class PagedAttention : public AttentionKernel {
public:
  PagedAttention(OpBuilder &b, PagedAttentionBuffersOp op, bool emulate)
      : AttentionKernel(b, op.getLoc(), cast<MemRefType>(op.getOut().getType()).getDimSize(2),
                        emulate),
        op(op), group(op.getNumHeads() / op.getNumKvHeads()) {}

private:
  PagedAttentionBuffersOp op;
  int64_t group;
  // Sizes, read on the host (blocks()): memref.dim inside the kernel would
  // index the descriptor's sizes through local memory.
  Value numSeqs, startsSeqs, tableSeqs, numTokens, capacity, kBlocks, vBlocks;
  Value seq, hk, first, base, row0;

  std::array<Value, 3> blocks() override;
  void setUp(Value bx, Value by, Value bz) override;
  /// Row r of the tile: token (row0 + r) / G of the sequence, query head
  /// hk * G + (row0 + r) % G.
  Value token(Value r) { return div(add(row0, r), group); }
  Value head(Value r) { return add(mul(hk, idx(group)), rem(add(row0, r), group)); }
  Value query(Value r, Value col) override {
    return load(op.getQuery(), {add(first, token(r)), head(r), col});
  }
  Value poolAt(Value pool, Value scales, Value blocks, Value pos, Value col);
  Value key(Value pos, Value col) override {
    return poolAt(op.getKeyPool(), op.getKeyScales(), kBlocks, pos, col);
  }
  Value value(Value pos, Value col) override {
    return poolAt(op.getValuePool(), op.getValueScales(), vBlocks, pos, col);
  }
  Value masked(Value r, Value pos, Value s) override;
  void storeRow(Value r, Value col, Value x) override {
    store(x, op.getOut(), {add(first, token(r)), head(r), col});
  }
  Value index(Value memref, ValueRange at) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), load(memref, at));
  }
  Value clamp(Value v, Value lo, Value hi) {
    return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, v, lo), hi);
  }
  Value le(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, x, y);
  }
};

/// The mask element for query row q0 + r and key `pos` applied to `s`
/// (xfmr.attention's rules: an i1 mask keeps, a float mask adds; dims of
/// size 1 broadcast), then causal (bottom-right aligned).
Value DenseAttention::masked(Value r, Value pos, Value s) {
  Value qi = add(q0, r);
  if (Value mask = op.getMask()) {
    int64_t rank = cast<MemRefType>(mask.getType()).getRank();
    Value full[4] = {bi, h, qi, pos};
    SmallVector<Value> at;
    for (int64_t i = 0; i < rank; ++i)
      at.push_back(arith::SelectOp::create(b, loc, maskBroadcasts[i], idx(0),
                                           full[i + 4 - rank]));
    Value m = load(mask, at);
    if (m.getType().isInteger(1))
      s = arith::SelectOp::create(b, loc, m, s, negInf());
    else
      s = arith::AddFOp::create(b, loc, s, asF32(m));
  }
  if (!op.getCausal())
    return s;
  return hideAfter(pos, add(qi, sub(skv, sq)), s);
}

std::array<Value, 3> DenseAttention::blocks() {
  Value q = op.getQuery();
  sq = dimOf(q, 2);
  d = dimOf(q, 3);
  skv = dimOf(op.getKey(), 2);
  scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  if (Value mask = op.getMask()) {
    auto type = cast<MemRefType>(mask.getType());
    for (int64_t i = 0; i < type.getRank(); ++i)
      maskBroadcasts.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                                     dimOf(mask, i), idx(1)));
  }
  Value gx = arith::MaxUIOp::create(b, loc, arith::CeilDivUIOp::create(b, loc, sq, idx(kRows)),
                                    idx(1));
  return {gx, dimOf(q, 1), dimOf(q, 0)};
}

void DenseAttention::setUp(Value bx, Value by, Value bz) {
  bi = bz;
  h = by;
  q0 = mul(bx, idx(kRows));
  tq = arith::MinSIOp::create(b, loc, idx(kRows), sub(sq, q0));
  hk = div(h, op.getNumHeads() / op.getNumKvHeads());
  keyBegin = idx(0);
  keyEnd = skv;
  if (op.getCausal()) {
    Value last = add(add(q0, tq), sub(skv, sq));
    keyEnd = arith::MaxSIOp::create(b, loc, idx(0), arith::MinSIOp::create(b, loc, last, skv));
  }
}

std::array<Value, 3> PagedAttention::blocks() {
  Value q = op.getQuery();
  d = dimOf(q, 2);
  scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  numSeqs = dimOf(op.getContextLens(), 0);
  startsSeqs = sub(dimOf(op.getQueryStartLoc(), 0), idx(1));
  tableSeqs = dimOf(op.getBlockTables(), 0);
  numTokens = dimOf(q, 0);
  capacity = mul(dimOf(op.getBlockTables(), 1), idx(op.getBlockSize()));
  kBlocks = dimOf(op.getKeyPool(), 0);
  vBlocks = dimOf(op.getValuePool(), 0);
  // Enough row tiles for the longest sequence's new tokens (the host reads
  // query_start_loc, an input it wrote): a decode step launches one tile
  // per sequence and KV head, a prefill as many as its prompt needs.
  // Malformed offsets are clamped to [0, T] here and reported by the kernel.
  auto longest = scf::ForOp::create(b, loc, idx(0), startsSeqs, idx(1), ValueRange{idx(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(longest.getBody());
    Value i = longest.getInductionVar();
    Value n = sub(index(op.getQueryStartLoc(), {add(i, idx(1))}),
                  index(op.getQueryStartLoc(), {i}));
    n = clamp(n, idx(0), numTokens);
    scf::YieldOp::create(
        b, loc, ValueRange{arith::MaxSIOp::create(b, loc, longest.getRegionIterArgs()[0], n)});
  }
  Value rows = mul(longest.getResult(0), idx(group));
  Value gx = arith::MaxUIOp::create(b, loc, arith::CeilDivUIOp::create(b, loc, rows, idx(kRows)),
                                    idx(1));
  Value seqs = arith::MaxUIOp::create(b, loc, numSeqs, idx(1));
  return {gx, idx(op.getNumKvHeads()), seqs};
}

/// The sequence's offsets checked and clamped as the CPU lowering does
/// (PagedAttention.cpp): 0 <= first <= end <= T, end - first <= context <=
/// the table's capacity; then this block's rows and keys.
void PagedAttention::setUp(Value bx, Value by, Value bz) {
  seq = bz;
  hk = by;
  Value zero = idx(0), one = idx(1);
  runtimeCheck(b, loc,
               both(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, startsSeqs, numSeqs),
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tableSeqs, numSeqs)),
               "xfmr.paged_attention: context_lens, block_tables and query_start_loc disagree "
               "on the number of sequences");
  Value seqs = arith::MinSIOp::create(b, loc, numSeqs,
                                      arith::MinSIOp::create(b, loc, startsSeqs, tableSeqs));
  // Blocks of a sequence that does not exist (the grid has at least one)
  // read nothing: their offsets are 0.
  Value active = lt(seq, seqs);
  auto readIndex = [&](Value memref, Value at) -> Value {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()}, active, true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, index(memref, {at}));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, zero);
    return ifOp.getResult(0);
  };
  first = readIndex(op.getQueryStartLoc(), seq);
  Value end = readIndex(op.getQueryStartLoc(), add(seq, one));
  Value ctx = readIndex(op.getContextLens(), seq);
  runtimeCheck(b, loc, le(zero, first), "xfmr.paged_attention: negative query_start_loc");
  runtimeCheck(b, loc, le(first, end), "xfmr.paged_attention: query_start_loc is not ascending");
  runtimeCheck(b, loc, le(end, numTokens),
               "xfmr.paged_attention: query_start_loc past the packed tokens");
  runtimeCheck(b, loc, le(end, add(first, ctx)),
               "xfmr.paged_attention: context_lens shorter than the new tokens");
  runtimeCheck(b, loc, le(ctx, capacity),
               "xfmr.paged_attention: context longer than the block table");
  first = clamp(first, zero, numTokens);
  end = clamp(end, first, numTokens);
  end = arith::MinSIOp::create(b, loc, end, add(first, capacity));
  Value n = sub(end, first);
  ctx = clamp(ctx, n, capacity);
  base = sub(ctx, n); // position of the first new token
  row0 = mul(bx, idx(kRows));
  tq = clamp(sub(mul(n, idx(group)), row0), zero, idx(kRows));
  // Keys up to the last row's position; with a window, from the first row's
  // oldest visible key. A block without rows reads none.
  Value lastPos = add(base, div(sub(add(row0, tq), one), group));
  keyEnd = arith::SelectOp::create(b, loc, lt(zero, tq),
                                   arith::MinSIOp::create(b, loc, ctx, add(lastPos, one)), zero);
  keyBegin = zero;
  if (std::optional<uint64_t> window = op.getSlidingWindow()) {
    Value oldest = sub(add(add(base, div(row0, group)), one), idx(static_cast<int64_t>(*window)));
    keyBegin = arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, oldest, zero),
                                      keyEnd);
  }
}

/// `pool`[block of pos, pos % block_size, hk, col] as f32, the block id
/// checked; a quantized pool's element widened (KVQuant.h) and times its
/// row's scale.
Value PagedAttention::poolAt(Value pool, Value scales, Value blocks, Value pos, Value col) {
  Value bs = idx(op.getBlockSize());
  Value block = index(op.getBlockTables(), {seq, arith::DivUIOp::create(b, loc, pos, bs)});
  Value inPool = both(le(idx(0), block), lt(block, blocks));
  runtimeCheck(b, loc, inPool, "xfmr.paged_attention: block id outside the KV pool");
  block = arith::SelectOp::create(b, loc, inPool, block, idx(0));
  Value offset = arith::RemUIOp::create(b, loc, pos, bs);
  Value x = load(pool, {block, offset, hk, col});
  if (!scales)
    return asF32(x);
  Value s = load(scales, {block, offset, hk});
  double factor = lowering::widenedScale(x.getType());
  if (factor != 1.0)
    s = arith::MulFOp::create(b, loc, s, f32(static_cast<float>(factor)));
  return arith::MulFOp::create(b, loc, lowering::widenKV(b, loc, x), s);
}

/// Keys after the row's position are hidden; with a sliding window W, so
/// are keys at or before position - W.
Value PagedAttention::masked(Value r, Value pos, Value s) {
  Value at = add(base, token(r));
  s = hideAfter(pos, at, s);
  if (std::optional<uint64_t> window = op.getSlidingWindow())
    s = hideAfter(at, add(pos, idx(static_cast<int64_t>(*window) - 1)), s);
  return s;
}

/// part = the two half-chunk partial sums of S = Q·Kᵀ for keys [k0, k0 + 32).
void AttentionKernel::scores(Value tid, Value k0) {
  phase(tid, [&](Value t) {
    forShare(t, 2 * kRows * kKeys, [&](Value i) {
      store(f32(0.0f), part, {div(i, kKeys), rem(i, kKeys)});
    });
  });
  loop(idx(0), d, idx(kChunk), [&](Value d0) {
    phase(tid, [&](Value t) {
      forShare(t, kRows * kChunk, [&](Value i) {
        Value r = div(i, kChunk), c = rem(i, kChunk), col = add(d0, c);
        Value x = orZero(both(lt(r, tq), lt(col, d)), [&] { return query(r, col); });
        stageSplit(x, qhi, qlo, {r, c});
      });
      // Kᵀ: consecutive threads read along a key's row, store a column.
      forShare(t, kKeys * kChunk, [&](Value i) {
        Value j = div(i, kChunk), c = rem(i, kChunk);
        Value pos = add(k0, j), col = add(d0, c);
        Value x = orZero(both(lt(pos, keyEnd), lt(col, d)), [&] { return key(pos, col); });
        stageSplit(x, xhi, xlo, {c, j});
      });
    });
    warpPhase(tid, [&](Value warp) {
      Value block = rem(warp, 2), half = mul(div(warp, 2), idx(kChunk / 2));
      Value col = mul(block, idx(kFrag));
      warpProduct({qhi, qlo, idx(0), half}, {xhi, xlo, half, col}, kChunk / 2, 1, part,
                  mul(div(warp, 2), idx(kRows)), col, /*accumulate=*/true);
    });
  });
}

/// Thread r < 16 folds row r of this key tile into the running max and sum;
/// P = exp(s - max) into phi/plo, the rescale factor into alpha.
void AttentionKernel::softmax(Value tid, Value k0) {
  Value ninf = f32(-std::numeric_limits<float>::infinity());
  phase(tid, [&](Value r) {
    when(lt(r, idx(kRows)), [&] {
      Value rowOk = lt(r, tq);
      // Pass 1: masked, scaled scores into phi; their maximum.
      auto maxLoop = scf::ForOp::create(b, loc, idx(0), idx(kKeys), idx(1),
                                        ValueRange{load(rowMax, {r})});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(maxLoop.getBody());
        Value j = maxLoop.getInductionVar();
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{b.getF32Type()},
                                      both(rowOk, lt(add(k0, j), keyEnd)), true);
        {
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          Value s = arith::AddFOp::create(b, loc, load(part, {r, j}),
                                          load(part, {add(r, idx(kRows)), j}));
          s = arith::MulFOp::create(b, loc, s, scale);
          scf::YieldOp::create(b, loc, masked(r, add(k0, j), s));
          b.setInsertionPointToStart(ifOp.elseBlock());
          scf::YieldOp::create(b, loc, ninf);
        }
        Value s = ifOp.getResult(0);
        store(s, phi, {r, j});
        scf::YieldOp::create(
            b, loc, ValueRange{arith::MaximumFOp::create(b, loc, maxLoop.getRegionIterArgs()[0], s)});
      }
      Value oldMax = load(rowMax, {r}), newMax = maxLoop.getResult(0);
      // A row that has seen no key keeps max -inf: subtract 0 instead, so
      // that its probabilities and rescale factor are exp(-inf) = 0.
      Value isInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, newMax, ninf);
      Value finite = arith::SelectOp::create(b, loc, isInf, f32(0.0f), newMax);
      // Pass 2: p = exp(s - max), split for the tensor cores; their sum.
      auto sumLoop = scf::ForOp::create(b, loc, idx(0), idx(kKeys), idx(1),
                                        ValueRange{f32(0.0f)});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(sumLoop.getBody());
        Value j = sumLoop.getInductionVar();
        Value p = math::ExpOp::create(
            b, loc, arith::SubFOp::create(b, loc, load(phi, {r, j}), finite));
        stageSplit(p, phi, plo, {r, j});
        scf::YieldOp::create(
            b, loc, ValueRange{arith::AddFOp::create(b, loc, sumLoop.getRegionIterArgs()[0], p)});
      }
      Value a = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, oldMax, finite));
      Value sum = arith::AddFOp::create(
          b, loc, arith::MulFOp::create(b, loc, load(rowSum, {r}), a), sumLoop.getResult(0));
      store(sum, rowSum, {r});
      store(newMax, rowMax, {r});
      store(a, alpha, {r});
    });
  });
}

/// O = O * alpha + P·V for keys [k0, k0 + 32), 32 columns of V at a time.
void AttentionKernel::accumulate(Value tid, Value k0) {
  loop(idx(0), idx(dvPadded), idx(kChunk), [&](Value c0) {
    phase(tid, [&](Value t) {
      forShare(t, kKeys * kChunk, [&](Value i) {
        Value j = div(i, kChunk), c = rem(i, kChunk);
        Value pos = add(k0, j), col = add(c0, c);
        Value x = orZero(both(lt(pos, keyEnd), lt(col, idx(dv))), [&] { return value(pos, col); });
        stageSplit(x, xhi, xlo, {j, c});
      });
    });
    warpPhase(tid, [&](Value warp) {
      Value half = mul(div(warp, 2), idx(kKeys / 2));
      Value col = mul(rem(warp, 2), idx(kFrag));
      warpProduct({phi, plo, idx(0), half}, {xhi, xlo, half, col}, kKeys / 2, 1, part,
                  mul(div(warp, 2), idx(kRows)), col, /*accumulate=*/false);
    });
    phase(tid, [&](Value t) {
      forShare(t, kRows * kChunk, [&](Value i) {
        Value r = div(i, kChunk), c = rem(i, kChunk);
        SmallVector<Value> at = {r, add(c0, c)};
        Value scaled = arith::MulFOp::create(b, loc, load(o, at), load(alpha, {r}));
        Value halves = arith::AddFOp::create(b, loc, load(part, {r, c}),
                                             load(part, {add(r, idx(kRows)), c}));
        store(arith::AddFOp::create(b, loc, scaled, halves), o, at);
      });
    });
  });
}

void AttentionKernel::buildBlock(Value bx, Value by, Value bz, Value tid) {
  setUp(bx, by, bz);
  phase(tid, [&](Value t) {
    forShare(t, kRows * dvPadded, [&](Value i) {
      store(f32(0.0f), o, {div(i, dvPadded), rem(i, dvPadded)});
    });
    when(lt(t, idx(kRows)), [&] {
      store(f32(-std::numeric_limits<float>::infinity()), rowMax, {t});
      store(f32(0.0f), rowSum, {t});
    });
  });
  loop(keyBegin, keyEnd, idx(kKeys), [&](Value k0) {
    scores(tid, k0);
    softmax(tid, k0);
    accumulate(tid, k0);
  });
  // out = O / sum; a row that saw no key is 0.
  phase(tid, [&](Value t) {
    forShare(t, kRows * dvPadded, [&](Value i) {
      Value r = div(i, dvPadded), c = rem(i, dvPadded);
      when(both(lt(r, tq), lt(c, idx(dv))), [&] {
        Value sum = load(rowSum, {r});
        Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, sum, f32(0.0f));
        Value x = arith::SelectOp::create(
            b, loc, seen, arith::DivFOp::create(b, loc, load(o, {r, c}), sum), f32(0.0f));
        storeRow(r, c, x);
      });
    });
  });
}

void AttentionKernel::build(StringRef name) {
  SmallVector<SmallVector<int64_t, 2>> shapes;
  for (Shared &s : sharedBuffers())
    shapes.push_back(s.shape);
  grid(name, blocks(), shapes,
       [&](Value bx, Value by, Value bz, Value tid, ArrayRef<Value> buffers) {
         for (auto [s, buffer] : llvm::zip(sharedBuffers(), buffers))
           *s.slot = buffer;
         buildBlock(bx, by, bz, tid);
       });
}

/// The kernel takes a value head dim it can keep in shared memory.
LogicalResult checkHeadDim(Operation *op, Value out, unsigned dim) {
  int64_t dv = cast<MemRefType>(out.getType()).getDimSize(dim);
  if (!ShapedType::isDynamic(dv) && dv <= kFusedAttentionMaxHeadDim)
    return success();
  return op->emitError() << "xfmr-gpu-attention: the kernel takes a static value head dim of "
                            "at most "
                         << kFusedAttentionMaxHeadDim;
}

struct FusedAttentionPass : impl::FusedAttentionPassBase<FusedAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionBuffersOp, PagedAttentionBuffersOp>(op))
        ops.push_back(op);
    });
    unsigned index = 0;
    for (Operation *op : ops) {
      OpBuilder b(op);
      std::string name = kernelName(op->getLoc(), "attn", index++);
      if (auto dense = dyn_cast<AttentionBuffersOp>(op)) {
        if (failed(checkHeadDim(op, dense.getOut(), 3)))
          return signalPassFailure();
        DenseAttention(b, dense, emulate).build(name);
      } else {
        auto paged = cast<PagedAttentionBuffersOp>(op);
        if (failed(checkHeadDim(op, paged.getOut(), 2)))
          return signalPassFailure();
        PagedAttention(b, paged, emulate).build(name);
      }
      op->erase();
    }
    numKernels += ops.size();
  }
};

} // namespace
} // namespace xfmr::gpu
