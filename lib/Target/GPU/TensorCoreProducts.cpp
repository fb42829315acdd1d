//===- TensorCoreProducts.cpp - f32 products on tensor cores --------------===//
//
// Part of xfmr.
//
// Every f32 product C[.., m, n] += A[.., m, k] * B[.., k, n] of the
// bufferized program (xfmr::cpu::matchProduct: A or B possibly transposed,
// outer dims shared or broadcast) becomes one kernel on tensor cores:
//
//   grid (ceil(N / 64), ceil(M / 32), outer), 128 threads = 4 warps;
//   per 32-wide step of K, the block stages A [32, 32] and B [32, 64] in
//   shared memory, split into tf32 high and low parts (x = hi + lo), and
//   each warp accumulates a 16 x 32 piece of the 32 x 64 tile with
//   WMMA m16n16k8 (wmma.mma.sync ... tf32): lo*hi + hi*lo + hi*hi, the
//   3xTF32 scheme that keeps products near f32 accuracy; finally C += tile.
//
// A step of K is the same for every row, and no split of K depends on M: a
// row's result does not depend on how many rows are computed with it (the
// batch invariance the CPU kernels keep).
//
// Integer B (weights quantized to at most 8 bits, before their scales: an
// xfmr.linear on a !quant.uniform weight) is read 1 byte per weight and
// widened as it is staged; its values are exact in tf32, so there is no lo
// part and 2 products per step (lo*hi + hi*hi).
//
// With `emulate`, the same tiles, guards and shared-memory layout run as
// host loops (threads and warps one after another, the warp's WMMA as
// scalar loops), so that everything but the tensor-core instruction itself
// is tested through the CPU lowering against onnxruntime.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/GPU/Passes.h"

#include "../CPU/Contraction.h"
#include "KernelBuilder.h"
#include "KernelName.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;

namespace xfmr::gpu {
#define GEN_PASS_DEF_TENSORCOREPRODUCTSPASS
#include "xfmr/Target/GPU/Passes.h.inc"
} // namespace xfmr::gpu

namespace xfmr::gpu {
namespace {

constexpr int64_t kBM = 32, kBN = 64, kBK = 32;
constexpr int64_t kWarps = 4, kThreads = 32 * kWarps;

class ProductKernel : KernelBuilder {
public:
  ProductKernel(OpBuilder &b, linalg::GenericOp g, const cpu::Product &p, bool emulate)
      : KernelBuilder(b, g.getLoc(), kThreads, emulate), p(p),
        a(g.getDpsInputOperand(0)->get()), bm(g.getDpsInputOperand(1)->get()),
        c(g.getDpsInitOperand(0)->get()) {}

  void build(StringRef name);

private:
  const cpu::Product &p;
  Value a, bm, c;
  Value M, N, K;
  SmallVector<Value> ivs; // C's outer dims, for this block
  Value ahi, alo, bhi, blo, tile;

  Value dim(Value v, int64_t i) { return memref::DimOp::create(b, loc, v, i); }
  unsigned rank(Value v) { return cast<MemRefType>(v.getType()).getRank(); }

  /// Indices of element (first, second) of operand `v` in the product's
  /// terms (m, k for A; k, n for B; m, n for C).
  SmallVector<Value> at(const cpu::OperandLayout &l, Value v, Value first, Value second) {
    return cpu::operandIndices(p, l, rank(v), ivs, first, second);
  }

  /// `operand`[first, second] as f32 (integers widened), or 0 outside
  /// [0, firstEnd) x [0, secondEnd).
  Value loadOrZero(const cpu::OperandLayout &l, Value v, Value first, Value firstEnd,
                   Value second, Value secondEnd) {
    return orZero(both(lt(first, firstEnd), lt(second, secondEnd)), [&]() -> Value {
      Value x = load(v, at(l, v, first, second));
      if (isa<IntegerType>(x.getType()))
        return arith::SIToFPOp::create(b, loc, b.getF32Type(), x);
      return x;
    });
  }

  void stageOperand(Value tid, const cpu::OperandLayout &l, Value v, int64_t rows, int64_t cols,
                    Value row0, Value rowEnd, Value col0, Value colEnd, Value hiBuf,
                    Value loBuf);
  void stageTiles(Value tid, Value m0, Value n0, Value k0);
  void storeTile(Value tid, Value m0, Value n0);
  void buildBlock(Value bx, Value by, Value bz, Value tid);
};

/// The [rows, cols] tile of operand `v` at (row0, col0) into shared memory
/// as tf32 hi and lo parts, zeros outside [0, rowEnd) x [0, colEnd).
void ProductKernel::stageOperand(Value tid, const cpu::OperandLayout &l, Value v, int64_t rows,
                                 int64_t cols, Value row0, Value rowEnd, Value col0,
                                 Value colEnd, Value hiBuf, Value loBuf) {
  forShare(tid, rows * cols, [&](Value i) {
    Value r = arith::DivUIOp::create(b, loc, i, idx(cols));
    Value col = arith::RemUIOp::create(b, loc, i, idx(cols));
    Value x = loadOrZero(l, v, add(row0, r), rowEnd, add(col0, col), colEnd);
    if (!loBuf) { // an integer of at most 8 bits, exact in tf32
      memref::StoreOp::create(b, loc, x, hiBuf, ValueRange{r, col});
      return;
    }
    auto [hi, lo] = splitTF32(x);
    memref::StoreOp::create(b, loc, hi, hiBuf, ValueRange{r, col});
    memref::StoreOp::create(b, loc, lo, loBuf, ValueRange{r, col});
  });
}

/// A [32, 32] and B [32, 64] of this K step into shared memory, hi and lo.
void ProductKernel::stageTiles(Value tid, Value m0, Value n0, Value k0) {
  stageOperand(tid, p.a, a, kBM, kBK, m0, M, k0, K, ahi, alo);
  // Integer B (quantized weights, 1 byte each): exact in tf32, no lo part.
  stageOperand(tid, p.b, bm, kBK, kBN, k0, K, n0, N, bhi, p.integerB ? Value() : blo);
}

/// C[m0 + r, n0 + c] += tile[r, c] inside C.
void ProductKernel::storeTile(Value tid, Value m0, Value n0) {
  forShare(tid, kBM * kBN, [&](Value i) {
    Value r = arith::DivUIOp::create(b, loc, i, idx(kBN));
    Value col = arith::RemUIOp::create(b, loc, i, idx(kBN));
    Value m = add(m0, r), n = add(n0, col);
    when(both(lt(m, M), lt(n, N)), [&] {
      SmallVector<Value> where = at(p.c, c, m, n);
      Value sum = arith::AddFOp::create(b, loc, load(c, where), load(tile, {r, col}));
      store(sum, c, where);
    });
  });
}

/// The warp's rows and columns of the block tile: warps 0 and 1 the two
/// 16-row halves of columns [0, 32), warps 2 and 3 of [32, 64).
static std::pair<Value, Value> warpOrigin(OpBuilder &b, Location loc, Value warp) {
  Value sixteen = arith::ConstantIndexOp::create(b, loc, kFrag);
  Value two = arith::ConstantIndexOp::create(b, loc, 2);
  Value row = arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, warp, two), sixteen);
  Value col = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, warp, two),
      arith::ConstantIndexOp::create(b, loc, 2 * kFrag));
  return {row, col};
}

void ProductKernel::buildBlock(Value bx, Value by, Value bz, Value tid) {
  // C's outer indices of this block (row-major over C's outer dims).
  Value rest = bz;
  ivs.assign(p.outer.size(), Value());
  for (int64_t i = static_cast<int64_t>(p.outer.size()) - 1; i >= 0; --i) {
    Value extent = dim(c, i);
    ivs[i] = i == 0 ? rest : arith::RemUIOp::create(b, loc, rest, extent).getResult();
    if (i > 0)
      rest = arith::DivUIOp::create(b, loc, rest, extent);
  }
  Value m0 = mul(by, idx(kBM)), n0 = mul(bx, idx(kBN));
  Type f32 = b.getF32Type();
  Value zero = arith::ConstantFloatOp::create(b, loc, cast<FloatType>(f32), APFloat(0.0f));

  if (emulate) {
    linalg::FillOp::create(b, loc, zero, tile);
    scf::ForOp::create(b, loc, idx(0), K, idx(kBK), ValueRange{},
                       [&](OpBuilder &, Location, Value k0, ValueRange) {
                         phase(tid, [&](Value t) { stageTiles(t, m0, n0, k0); });
                         warpPhase(tid, [&](Value warp) {
                           auto [wr, wc] = warpOrigin(b, loc, warp);
                           warpProduct({ahi, alo, wr, idx(0)},
                                       {bhi, p.integerB ? Value() : blo, idx(0), wc}, kBK, 2,
                                       tile, wr, wc, /*accumulate=*/true);
                         });
                         scf::YieldOp::create(b, loc);
                       });
    phase(tid, [&](Value t) { storeTile(t, m0, n0); });
    return;
  }

  auto cType = mlir::gpu::MMAMatrixType::get({kFrag, kFrag}, f32, "COp");
  auto aType = mlir::gpu::MMAMatrixType::get({kFrag, kFragK}, f32, "AOp");
  auto bType = mlir::gpu::MMAMatrixType::get({kFragK, kFrag}, f32, "BOp");
  Value warp = arith::DivUIOp::create(b, loc, tid, idx(32));
  auto [wr, wc] = warpOrigin(b, loc, warp);
  Value init = mlir::gpu::SubgroupMmaConstantMatrixOp::create(b, loc, cType, zero);
  auto kLoop = scf::ForOp::create(b, loc, idx(0), K, idx(kBK), ValueRange{init, init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kLoop.getBody());
    Value k0 = kLoop.getInductionVar();
    phase(tid, [&](Value t) { stageTiles(t, m0, n0, k0); });
    auto steps = scf::ForOp::create(b, loc, idx(0), idx(kBK), idx(kFragK),
                                    kLoop.getRegionIterArgs());
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(steps.getBody());
      Value kk = steps.getInductionVar();
      auto load = [&](Value buf, Type t, Value r, Value col, int64_t lead) -> Value {
        return mlir::gpu::SubgroupMmaLoadMatrixOp::create(b, loc, t, buf, ValueRange{r, col},
                                                          b.getIndexAttr(lead), UnitAttr());
      };
      Value aHi = load(ahi, aType, wr, kk, kBK), aLo = load(alo, aType, wr, kk, kBK);
      SmallVector<Value> accs;
      for (int64_t j = 0; j < 2; ++j) {
        Value col = add(wc, idx(j * kFrag));
        Value bHi = load(bhi, bType, kk, col, kBN);
        Value bLo = p.integerB ? Value() : load(blo, bType, kk, col, kBN);
        Value acc = steps.getRegionIterArgs()[j];
        // Integer B has no lo part: 2 products per step instead of 3.
        for (auto [x, y] : {std::pair{aLo, bHi}, {aHi, bLo}, {aHi, bHi}})
          if (y)
            acc = mlir::gpu::SubgroupMmaComputeOp::create(b, loc, x, y, acc, UnitAttr(),
                                                          UnitAttr());
        accs.push_back(acc);
      }
      scf::YieldOp::create(b, loc, accs);
    }
    mlir::gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, steps.getResults());
  }
  for (int64_t j = 0; j < 2; ++j)
    mlir::gpu::SubgroupMmaStoreMatrixOp::create(b, loc, kLoop.getResult(j), tile,
                                                ValueRange{wr, add(wc, idx(j * kFrag))},
                                                b.getIndexAttr(kBN), UnitAttr());
  mlir::gpu::BarrierOp::create(b, loc);
  storeTile(tid, m0, n0);
}

void ProductKernel::build(StringRef name) {
  unsigned ra = rank(a), rc = rank(c);
  M = dim(c, rc - 2);
  N = dim(c, rc - 1);
  K = dim(a, p.a.transposed ? ra - 2 : ra - 1);
  Value one = idx(1);
  Value outer = one;
  for (unsigned i = 0; i < p.outer.size(); ++i)
    outer = mul(outer, dim(c, i));
  auto blocksOf = [&](Value extent, int64_t tileSize) {
    Value n = arith::CeilDivUIOp::create(b, loc, extent, idx(tileSize));
    return arith::MaxUIOp::create(b, loc, n, one).getResult();
  };
  Value gx = blocksOf(N, kBN), gy = blocksOf(M, kBM), gz = arith::MaxUIOp::create(b, loc, outer, one);
  // A and B hi/lo staging, the output tile.
  SmallVector<SmallVector<int64_t, 2>> shapes = {{kBM, kBK}, {kBM, kBK}, {kBK, kBN}, {kBK, kBN},
                                                 {kBM, kBN}};
  grid(name, {gx, gy, gz}, shapes,
       [&](Value bx, Value by, Value bz, Value tid, ArrayRef<Value> buffers) {
         ahi = buffers[0], alo = buffers[1], bhi = buffers[2], blo = buffers[3];
         tile = buffers[4];
         buildBlock(bx, by, bz, tid);
       });
}

struct TensorCoreProductsPass : impl::TensorCoreProductsPassBase<TensorCoreProductsPass> {
  using Base::Base;

  void runOnOperation() override {
    std::vector<std::pair<linalg::GenericOp, cpu::Product>> products;
    getOperation().walk([&](linalg::GenericOp g) {
      if (!g.hasPureBufferSemantics())
        return;
      if (std::optional<cpu::Product> p = cpu::matchProduct(g, /*allowIntegerB=*/true);
          p && !p->packedB)
        products.push_back({g, *p});
    });
    unsigned index = 0;
    for (auto &[g, p] : products) {
      OpBuilder b(g);
      ProductKernel(b, g, p, emulate).build(kernelName(g.getLoc(), "mma", index++));
      g.erase();
    }
    numProducts += products.size();
  }
};

} // namespace
} // namespace xfmr::gpu
