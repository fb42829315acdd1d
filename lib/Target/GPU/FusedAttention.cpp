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
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/Passes.h"

#include "KernelBuilder.h"
#include "KernelName.h"

#include "dialects/xfmr/IR/XfmrOps.h"

#include <limits>

using namespace mlir;

namespace xfmr::gpu {
#define GEN_PASS_DEF_FUSEDATTENTIONPASS
#include "xfmr/Target/GPU/Passes.h.inc"
} // namespace xfmr::gpu

namespace xfmr::gpu {
namespace {

constexpr int64_t kRows = 16, kKeys = 32, kChunk = 32;
constexpr int64_t kThreads = 128;

class AttentionKernel : KernelBuilder {
public:
  AttentionKernel(OpBuilder &b, AttentionBuffersOp op, bool emulate)
      : KernelBuilder(b, op.getLoc(), kThreads, emulate), op(op),
        dv(cast<MemRefType>(op.getOut().getType()).getDimSize(3)),
        dvPadded((dv + kChunk - 1) / kChunk * kChunk) {}

  void build(StringRef name);

private:
  AttentionBuffersOp op;
  int64_t dv, dvPadded;
  // Sizes and this block's position.
  Value sq, skv, d, bi, h, hk, q0, tq, kvEnd;
  SmallVector<Value> maskBroadcasts;
  // Shared memory.
  Value qhi, qlo, xhi, xlo, part, phi, plo, o, rowMax, rowSum, alpha;

  struct Shared {
    SmallVector<int64_t> shape;
    Value *slot;
  };
  SmallVector<Shared> sharedBuffers() {
    return {{{kRows, kChunk}, &qhi},  {{kRows, kChunk}, &qlo},  {{kChunk, kKeys}, &xhi},
            {{kChunk, kKeys}, &xlo},  {{2 * kRows, kKeys}, &part}, {{kRows, kKeys}, &phi},
            {{kRows, kKeys}, &plo},   {{kRows, dvPadded}, &o},  {{kRows}, &rowMax},
            {{kRows}, &rowSum},       {{kRows}, &alpha}};
  }

  Value dimOf(Value v, int64_t i) { return memref::DimOp::create(b, loc, v, i); }
  void stageSplit(Value x, Value hiBuf, Value loBuf, ValueRange at) {
    auto [hi, lo] = splitTF32(x);
    store(hi, hiBuf, at);
    store(lo, loBuf, at);
  }

  void buildBlock(Value bx, Value by, Value bz, Value tid);
  void scores(Value tid, Value k0);
  void softmax(Value tid, Value k0);
  void accumulate(Value tid, Value k0);
  Value maskedScore(Value r, Value j, Value k0, Value s);
};

/// The mask element for query row q0 + r and key k0 + j applied to `s`
/// (xfmr.attention's rules: an i1 mask keeps, a float mask adds; dims of
/// size 1 broadcast), then causal.
Value AttentionKernel::maskedScore(Value r, Value j, Value k0, Value s) {
  Value qi = add(q0, r), kj = add(k0, j);
  if (Value mask = op.getMask()) {
    int64_t rank = cast<MemRefType>(mask.getType()).getRank();
    Value full[4] = {bi, h, qi, kj};
    SmallVector<Value> at;
    for (int64_t i = 0; i < rank; ++i)
      at.push_back(arith::SelectOp::create(b, loc, maskBroadcasts[i], idx(0),
                                           full[i + 4 - rank]));
    Value m = load(mask, at);
    if (m.getType().isInteger(1))
      s = arith::SelectOp::create(b, loc, m, s, f32(-std::numeric_limits<float>::infinity()));
    else
      s = arith::AddFOp::create(b, loc, s,
                                m.getType().isF32() ? m
                                                    : arith::ExtFOp::create(b, loc, b.getF32Type(), m)
                                                          .getResult());
  }
  if (!op.getCausal())
    return s;
  Value last = add(qi, sub(skv, sq)); // bottom-right aligned
  Value hidden = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, kj, last);
  return arith::SelectOp::create(b, loc, hidden, f32(-std::numeric_limits<float>::infinity()), s);
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
        Value r = div(i, kChunk), c = rem(i, kChunk);
        Value row = add(q0, r), col = add(d0, c);
        Value x = orZero(both(lt(row, sq), lt(col, d)),
                         [&] { return load(op.getQuery(), {bi, h, row, col}); });
        stageSplit(x, qhi, qlo, {r, c});
      });
      // Kᵀ: consecutive threads read along a key's row, store a column.
      forShare(t, kKeys * kChunk, [&](Value i) {
        Value key = div(i, kChunk), c = rem(i, kChunk);
        Value row = add(k0, key), col = add(d0, c);
        Value x = orZero(both(lt(row, kvEnd), lt(col, d)),
                         [&] { return load(op.getKey(), {bi, hk, row, col}); });
        stageSplit(x, xhi, xlo, {c, key});
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
      Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
      Value rowOk = lt(r, tq);
      // Pass 1: masked, scaled scores into phi; their maximum.
      auto maxLoop = scf::ForOp::create(b, loc, idx(0), idx(kKeys), idx(1),
                                        ValueRange{load(rowMax, {r})});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(maxLoop.getBody());
        Value j = maxLoop.getInductionVar();
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{b.getF32Type()},
                                      both(rowOk, lt(add(k0, j), kvEnd)), true);
        {
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          Value s = arith::AddFOp::create(b, loc, load(part, {r, j}),
                                          load(part, {add(r, idx(kRows)), j}));
          s = arith::MulFOp::create(b, loc, s, scale);
          scf::YieldOp::create(b, loc, maskedScore(r, j, k0, s));
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
        Value key = div(i, kChunk), c = rem(i, kChunk);
        Value row = add(k0, key), col = add(c0, c);
        Value x = orZero(both(lt(row, kvEnd), lt(col, idx(dv))),
                         [&] { return load(op.getValue(), {bi, hk, row, col}); });
        stageSplit(x, xhi, xlo, {key, c});
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
  bi = bz;
  h = by;
  q0 = mul(bx, idx(kRows));
  tq = arith::MinSIOp::create(b, loc, idx(kRows), sub(sq, q0));
  int64_t rep = op.getNumHeads() / op.getNumKvHeads();
  hk = div(h, rep);
  kvEnd = skv;
  if (op.getCausal()) {
    Value last = add(add(q0, tq), sub(skv, sq));
    kvEnd = arith::MaxSIOp::create(b, loc, idx(0), arith::MinSIOp::create(b, loc, last, skv));
  }
  phase(tid, [&](Value t) {
    forShare(t, kRows * dvPadded, [&](Value i) {
      store(f32(0.0f), o, {div(i, dvPadded), rem(i, dvPadded)});
    });
    when(lt(t, idx(kRows)), [&] {
      store(f32(-std::numeric_limits<float>::infinity()), rowMax, {t});
      store(f32(0.0f), rowSum, {t});
    });
  });
  loop(idx(0), kvEnd, idx(kKeys), [&](Value k0) {
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
        store(x, op.getOut(), {bi, h, add(q0, r), c});
      });
    });
  });
}

void AttentionKernel::build(StringRef name) {
  Value q = op.getQuery();
  sq = dimOf(q, 2);
  d = dimOf(q, 3);
  skv = dimOf(op.getKey(), 2);
  if (Value mask = op.getMask()) {
    auto type = cast<MemRefType>(mask.getType());
    for (int64_t i = 0; i < type.getRank(); ++i)
      maskBroadcasts.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                                     dimOf(mask, i), idx(1)));
  }
  Value one = idx(1);
  Value gx = arith::MaxUIOp::create(b, loc, arith::CeilDivUIOp::create(b, loc, sq, idx(kRows)),
                                    one);
  Value gy = dimOf(q, 1), gz = dimOf(q, 0);
  MLIRContext *ctx = b.getContext();
  Type f32Type = b.getF32Type();

  if (emulate) {
    // Shared memory as heap buffers, the blocks one after another.
    SmallVector<Value> buffers;
    for (Shared &s : sharedBuffers()) {
      *s.slot = memref::AllocOp::create(b, loc, MemRefType::get(s.shape, f32Type));
      buffers.push_back(*s.slot);
    }
    OpBuilder::InsertionGuard guard(b);
    for (Value buf : buffers)
      memref::DeallocOp::create(b, loc, buf);
    b.setInsertionPoint(buffers.back().getDefiningOp()->getNextNode());
    SmallVector<Value> iv;
    for (Value extent : {gz, gy, gx}) {
      auto forOp = scf::ForOp::create(b, loc, idx(0), extent, one);
      b.setInsertionPointToStart(forOp.getBody());
      iv.push_back(forOp.getInductionVar());
    }
    buildBlock(iv[2], iv[1], iv[0], Value());
    return;
  }

  auto wg = mlir::gpu::AddressSpaceAttr::get(ctx, mlir::gpu::AddressSpace::Workgroup);
  SmallVector<Type> shared;
  for (Shared &s : sharedBuffers())
    shared.push_back(MemRefType::get(s.shape, f32Type, MemRefLayoutAttrInterface(), wg));
  auto launch = mlir::gpu::LaunchOp::create(
      b, loc, gx, gy, gz, idx(kThreads), one, one, nullptr, nullptr, {}, shared, {}, nullptr,
      nullptr, nullptr, FlatSymbolRefAttr::get(ctx, "xfmr_kernels"),
      FlatSymbolRefAttr::get(ctx, name));
  Block &body = launch.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&body);
  mlir::gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&body);
  for (auto [s, arg] : llvm::zip(sharedBuffers(), launch.getWorkgroupAttributions()))
    *s.slot = arg;
  buildBlock(launch.getBlockIds().x, launch.getBlockIds().y, launch.getBlockIds().z,
             launch.getThreadIds().x);
}

struct FusedAttentionPass : impl::FusedAttentionPassBase<FusedAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AttentionBuffersOp> ops;
    getOperation().walk([&](AttentionBuffersOp a) { ops.push_back(a); });
    unsigned index = 0;
    for (AttentionBuffersOp a : ops) {
      int64_t dv = cast<MemRefType>(a.getOut().getType()).getDimSize(3);
      if (ShapedType::isDynamic(dv) || dv > kFusedAttentionMaxHeadDim) {
        a.emitError() << "xfmr-gpu-attention: the kernel takes a static value head dim of at "
                         "most "
                      << kFusedAttentionMaxHeadDim;
        return signalPassFailure();
      }
      OpBuilder b(a);
      AttentionKernel(b, a, emulate).build(kernelName(a.getLoc(), "attn", index++));
      a.erase();
    }
    numKernels += ops.size();
  }
};

} // namespace
} // namespace xfmr::gpu
