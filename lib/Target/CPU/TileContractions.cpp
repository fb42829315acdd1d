//===- TileContractions.cpp - register-blocked, batch-invariant products --===//
//
// Part of xfmr.
//
// The generated loop of a product (loops batch, k, m, n; n vectorized)
// reads each row of B once per k and is at memory bandwidth for one row,
// which is what decode needs. With many rows (prefill, batched decode) it
// reloads and stores C for every k and runs far below the FMA units' rate.
// The kernel here keeps a 6x16 block of C in twelve 8-wide vector registers
// for the whole k loop (the classic AVX2 register block: 12 accumulators,
// 2 loads of B, one broadcast of A), panel by panel of 16 columns so the
// panel of B stays in cache across all row blocks; on AVX-512 a 12x32 block
// of two panels in 24 16-wide registers (two loads of B and twelve
// broadcasts per 24 multiply-adds; MLAS's AVX-512 SGEMM block).
//
// It computes every element with the same operations in the same order as
// the loop it replaces, so results are bit-identical for any number of rows:
// see the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"
#include "xfmr/Target/CPU/Passes.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_TILECONTRACTIONSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr int64_t kCols = kPanelWidth;

/// Whether `g` sits inside a loop (attention's tiles) rather than directly
/// in a function: the loop around it is what the cores share.
bool insideLoop(linalg::GenericOp g) { return !isa<func::FuncOp>(g->getParentOp()); }

class KernelBuilder {
public:
  /// `lanes` f32 per register: 8 (AVX2; blocks of 6 rows, two registers
  /// per row) or 16 (AVX-512; blocks of 12 rows, one register per row).
  KernelBuilder(OpBuilder &b, Location loc, linalg::GenericOp g, const Product &p, int64_t lanes)
      : b(b), loc(loc), p(p), a(g.getDpsInputOperand(0)->get()),
        bm(g.getDpsInputOperand(1)->get()), c(g.getDpsInitOperand(0)->get()),
        nested(insideLoop(g)), kLanes(lanes), kRows(lanes == 16 ? 12 : 6) {
    contract = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::contract);
    vecType = VectorType::get({kLanes}, b.getF32Type());
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value dim(Value v, int64_t i) { return memref::DimOp::create(b, loc, v, i); }
  unsigned rank(Value v) { return cast<MemRefType>(v.getType()).getRank(); }

  /// Indices of element (first, second) of an unpacked operand, `first`
  /// being its row in the product's terms (m for A and C, k for B). Creates
  /// no ops, so it may be called inside the k loop.
  SmallVector<Value> at(const OperandLayout &l, Value v, Value first, Value second) {
    return operandIndices(p, l, rank(v), ivs, first, second);
  }

  /// Rows [m0, m0 + rows) x columns [n0, n0 + 16 * panels): C's values
  /// loaded into registers, one multiply-add per k, stored back.
  void microTile(OpBuilder &ob, int64_t rows, int64_t panels, Value m0, Value n0, Value K) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ob.getInsertionBlock(), ob.getInsertionPoint());
    SmallVector<Value> rowIdx, colIdx;
    for (int64_t i = 0; i < rows; ++i)
      rowIdx.push_back(i ? arith::AddIOp::create(b, loc, m0, idx(i)).getResult() : m0);
    for (int64_t h = 0; h < panels * kCols / kLanes; ++h)
      colIdx.push_back(h ? arith::AddIOp::create(b, loc, n0, idx(h * kLanes)).getResult() : n0);
    // B's k-th row of this tile's h-th register: Bp[n0 / 16 + panel, k,
    // lane] when packed, else B[.., k, n0 + h * lanes]; everything but k is
    // computed once, here.
    SmallVector<Value> panelIdx, laneIdx;
    if (p.packedB) {
      Value first = arith::DivUIOp::create(b, loc, n0, idx(kPanelWidth));
      for (int64_t h = 0; h < (int64_t)colIdx.size(); ++h) {
        int64_t panel = h * kLanes / kPanelWidth;
        panelIdx.push_back(panel ? arith::AddIOp::create(b, loc, first, idx(panel)).getResult()
                                 : first);
        laneIdx.push_back(idx(h * kLanes % kPanelWidth));
      }
    }
    auto bRowAt = [&](Value k, unsigned h) -> SmallVector<Value> {
      if (p.packedB)
        return {panelIdx[h], k, laneIdx[h]};
      return at(p.b, bm, k, colIdx[h]);
    };
    SmallVector<Value> init;
    for (Value m : rowIdx)
      for (Value n : colIdx)
        init.push_back(vector::LoadOp::create(b, loc, vecType, c, at(p.c, c, m, n)));
    auto loop = scf::ForOp::create(
        b, loc, idx(0), K, idx(1), init,
        [&](OpBuilder &kb, Location l, Value k, ValueRange acc) {
          SmallVector<Value> bRow;
          for (unsigned h = 0; h < colIdx.size(); ++h)
            bRow.push_back(vector::LoadOp::create(kb, l, vecType, bm, bRowAt(k, h)));
          SmallVector<Value> next;
          for (auto [i, m] : llvm::enumerate(rowIdx)) {
            Value s = memref::LoadOp::create(kb, l, a, at(p.a, a, m, k));
            Value broadcast = vector::BroadcastOp::create(kb, l, vecType, s);
            for (auto [h, bv] : llvm::enumerate(bRow)) {
              // The loop's body, `out + in0 * in1`, on 8 columns at once.
              Value prod = arith::MulFOp::create(kb, l, broadcast, bv, contract);
              next.push_back(
                  arith::AddFOp::create(kb, l, acc[i * colIdx.size() + h], prod, contract));
            }
          }
          scf::YieldOp::create(kb, l, next);
        });
    unsigned r = 0;
    for (Value m : rowIdx)
      for (Value n : colIdx)
        vector::StoreOp::create(b, loc, loop.getResult(r++), c, at(p.c, c, m, n));
  }

  /// For every outer index and tile of `panels` panels of columns
  /// [0, nEnd) (nEnd a multiple of 16 * panels): blocks of kRows rows, then
  /// one block of the remaining rows, while the tile's panels of B are in
  /// cache.
  void kernels(Value M, Value nEnd, Value K, int64_t panels) {
    OpBuilder::InsertionGuard guard(b);
    Value mFull = arith::SubIOp::create(b, loc, M, arith::RemUIOp::create(b, loc, M, idx(kRows)));
    for (unsigned i = 0; i < p.outer.size(); ++i) {
      auto loop = scf::ForOp::create(b, loc, idx(0), dim(c, i), idx(1));
      b.setInsertionPointToStart(loop.getBody());
      ivs.push_back(loop.getInductionVar());
    }
    // Tiles are independent: with xfmr-compile --parallel each core takes
    // a share (convert-scf-to-openmp); a tile is computed by one thread, so
    // results do not depend on the number of threads either. A product
    // inside a loop (an attention tile: the loop around it is what runs on
    // several cores) walks its tiles in order.
    Value n0;
    if (nested) {
      auto tiles = scf::ForOp::create(b, loc, idx(0), nEnd, idx(kCols * panels));
      b.setInsertionPointToStart(tiles.getBody());
      n0 = tiles.getInductionVar();
    } else {
      auto tiles = scf::ParallelOp::create(b, loc, ValueRange{idx(0)}, ValueRange{nEnd},
                                           ValueRange{idx(kCols * panels)});
      b.setInsertionPointToStart(tiles.getBody());
      n0 = tiles.getInductionVars()[0];
    }
    scf::ForOp::create(b, loc, idx(0), mFull, idx(kRows), ValueRange{},
                       [&](OpBuilder &rb, Location, Value m0, ValueRange) {
                         microTile(rb, kRows, panels, m0, n0, K);
                         scf::YieldOp::create(rb, loc);
                       });
    // The last M % kRows rows as one block of that many rows: a single-row
    // kernel has two accumulator chains and waits on FMA latency.
    Value rest = arith::SubIOp::create(b, loc, M, mFull);
    SmallVector<int64_t> cases;
    for (int64_t r = 1; r < kRows; ++r)
      cases.push_back(r);
    auto sw = scf::IndexSwitchOp::create(b, loc, TypeRange{}, rest, cases, cases.size());
    for (auto [i, r] : llvm::enumerate(cases)) {
      Block &block = sw.getCaseRegions()[i].emplaceBlock();
      OpBuilder cb = OpBuilder::atBlockEnd(&block);
      microTile(cb, r, panels, mFull, n0, K);
      scf::YieldOp::create(cb, loc);
    }
    OpBuilder db = OpBuilder::atBlockEnd(&sw.getDefaultRegion().emplaceBlock());
    scf::YieldOp::create(db, loc);
  }

  /// Panels per tile: two on AVX-512 when the columns are a static multiple
  /// of 32 (twelve rows by 32 columns in 24 zmm accumulators: two loads of B
  /// and twelve broadcasts per 24 multiply-adds, where one panel needs 13
  /// loads per 12), else one.
  int64_t panelsPerTile(int64_t n) const {
    return kLanes == 16 && !ShapedType::isDynamic(n) && n % (2 * kCols) == 0 ? 2 : 1;
  }

  /// Replaces `g`. A packed B: the kernels for every row (its N is a
  /// multiple of 16). Otherwise, from kRows rows on, the kernels on the full
  /// column panels plus the loop on the remaining columns, and the loop
  /// below kRows (it streams B's rows, which beats strided panel reads). A
  /// product inside a loop (attention's p · v: a few rows by one KV block,
  /// every operand in L1) takes the kernels from one row on.
  void build(linalg::GenericOp g) {
    unsigned ra = rank(a), rc = rank(c);
    Value M = dim(c, rc - 2), N = dim(c, rc - 1);
    Value K = dim(a, p.a.transposed ? ra - 2 : ra - 1);
    int64_t staticN = cast<MemRefType>(c.getType()).getShape()[rc - 1];
    if (p.packedB) {
      kernels(M, N, K, panelsPerTile(staticN));
      g.erase();
      return;
    }
    if (!nested) {
      Value enough = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, M, idx(kRows));
      auto ifOp = scf::IfOp::create(b, loc, enough, /*withElseRegion=*/true);
      b.setInsertionPointToStart(ifOp.elseBlock());
      b.clone(*g.getOperation());
      b.setInsertionPointToStart(ifOp.thenBlock());
    }
    Value nFull = arith::SubIOp::create(b, loc, N, arith::RemUIOp::create(b, loc, N, idx(kCols)));
    kernels(M, nFull, K, panelsPerTile(staticN));
    if (!ShapedType::isDynamic(staticN) && staticN % kCols == 0) {
      g.erase(); // whole panels only
      return;
    }
    // Columns past the last full panel: the loop on those columns.
    Value rest = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, nFull, N);
    auto restIf = scf::IfOp::create(b, loc, rest, /*withElseRegion=*/false);
    b.setInsertionPointToStart(restIf.thenBlock());
    Value width = arith::SubIOp::create(b, loc, N, nFull);
    auto columns = [&](Value v, unsigned nDim) -> Value {
      SmallVector<OpFoldResult> offsets(rank(v), b.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes = memref::getMixedSizes(b, loc, v);
      SmallVector<OpFoldResult> strides(rank(v), b.getIndexAttr(1));
      offsets[nDim] = nFull;
      sizes[nDim] = width;
      return memref::SubViewOp::create(b, loc, v, offsets, sizes, strides);
    };
    Value bRest = columns(bm, rank(bm) - 1), cRest = columns(c, rc - 1);
    Operation *tail = b.clone(*g.getOperation());
    tail->setOperand(1, bRest);
    tail->setOperand(2, cRest);
    g.erase();
  }

private:
  OpBuilder &b;
  Location loc;
  const Product &p;
  Value a, bm, c;
  /// Inside a loop (not directly in a function): tiles in order, kernels
  /// for any number of rows.
  bool nested;
  SmallVector<Value> ivs;
  arith::FastMathFlagsAttr contract;
  VectorType vecType;
  const int64_t kLanes, kRows;
};

struct TileContractionsPass : impl::TileContractionsPassBase<TileContractionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (lanes != 8 && lanes != 16) {
      getOperation().emitError("xfmr-tile-contractions: lanes must be 8 or 16");
      return signalPassFailure();
    }
    std::vector<std::pair<linalg::GenericOp, Product>> products, dots;
    getOperation().walk([&](linalg::GenericOp g) {
      if (!g.hasPureBufferSemantics())
        return;
      auto p = matchProduct(g);
      if (p && insideLoop(g) && canTileDots(g, *p)) {
        dots.push_back({g, *p});
        return;
      }
      if (!p || p->b.transposed || !unitInnerStride(g.getDpsInputOperand(1)->get()) ||
          !unitInnerStride(g.getDpsInitOperand(0)->get()))
        return;
      products.push_back({g, *p});
    });
    for (auto &[g, p] : products) {
      OpBuilder b(g);
      KernelBuilder(b, g.getLoc(), g, p, lanes).build(g);
    }
    for (auto &[g, p] : dots) {
      OpBuilder b(g);
      tileDots(b, g, p);
    }
    numTiled += products.size() + dots.size();
  }
};

} // namespace
} // namespace xfmr::cpu
