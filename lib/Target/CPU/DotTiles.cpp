//===- DotTiles.cpp - register-blocked q . kT tiles ------------------------===//
//
// Part of xfmr. The kernel xfmr-tile-contractions gives a product inside a
// loop whose B is transposed, C[i, j] += sum_d A[i, d] * B[j, d], with both
// operands contiguous along d (attention's scores: query rows against the
// keys of one KV block, read in place from the pool). Both operands are
// read along d, so the sums run in vector lanes over d, not across
// columns as in the other kernels: a tile of 4 rows x 4 columns keeps 16
// accumulators of 16 lanes (8 loads per 16 FMAs per step of 16 d), and one
// butterfly of shuffles and adds turns the 16 accumulators into the 16
// sums at once (15 adds and 30 shuffles) instead of a horizontal sum each.
//
// Every C element is computed the same way wherever it lies: lanes
// d mod 16 accumulated in increasing d by FMAs, then the same tree over the
// lanes (the butterfly never mixes two accumulators). Rows or columns past
// the edge load a valid row again and are not stored. So an element's value
// depends on its row and column alone, not on the tile's size: attention
// scores do not depend on how many query rows share a tile (batch
// invariance).
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace xfmr::cpu {
namespace {

constexpr int64_t kLanes = 16, kTileRows = 4, kTileCols = 4;

class DotTile {
public:
  DotTile(OpBuilder &b, linalg::GenericOp g, const Product &p)
      : b(b), loc(g.getLoc()), p(p), a(g.getDpsInputOperand(0)->get()),
        bm(g.getDpsInputOperand(1)->get()), c(g.getDpsInitOperand(0)->get()) {
    vec = VectorType::get({kLanes}, b.getF32Type());
  }

  void build() {
    Value M = dim(c, 0), N = dim(c, 1), K = dim(a, 1);
    scf::ForOp::create(b, loc, idx(0), M, idx(kTileRows), ValueRange{},
                       [&](OpBuilder &rb, Location, Value i0, ValueRange) {
                         OpBuilder::InsertionGuard guard(b);
                         b.setInsertionPoint(rb.getInsertionBlock(), rb.getInsertionPoint());
                         scf::ForOp::create(
                             b, loc, idx(0), N, idx(kTileCols), ValueRange{},
                             [&](OpBuilder &cb, Location, Value j0, ValueRange) {
                               OpBuilder::InsertionGuard inner(b);
                               b.setInsertionPoint(cb.getInsertionBlock(), cb.getInsertionPoint());
                               tile(i0, j0, M, N, K);
                               scf::YieldOp::create(b, loc);
                             });
                         scf::YieldOp::create(b, loc);
                       });
  }

private:
  OpBuilder &b;
  Location loc;
  const Product &p;
  Value a, bm, c;
  VectorType vec;

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value dim(Value v, int64_t i) { return memref::DimOp::create(b, loc, v, i); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  /// first + i, or last when that is past it (a valid row to load again).
  Value clamped(Value first, int64_t i, Value last) {
    return arith::MinUIOp::create(b, loc, add(first, idx(i)), last);
  }

  /// Two vectors of 16 / P groups of P partial sums each -> one of twice
  /// the groups (x's, then y's) of P / 2: each group's halves added.
  Value combine(Value x, Value y, int64_t P) {
    SmallVector<int64_t> lo, hi;
    for (int64_t src = 0; src < 2; ++src)
      for (int64_t g = 0; g < kLanes / P; ++g)
        for (int64_t l = 0; l < P / 2; ++l) {
          lo.push_back(src * kLanes + g * P + l);
          hi.push_back(src * kLanes + g * P + P / 2 + l);
        }
    Value l = vector::ShuffleOp::create(b, loc, x, y, lo);
    Value h = vector::ShuffleOp::create(b, loc, x, y, hi);
    return arith::AddFOp::create(b, loc, l, h);
  }

  /// Lane t of the result: the sum of accs[t]'s lanes.
  Value butterfly(SmallVector<Value> accs) {
    for (int64_t P = kLanes; accs.size() > 1; P /= 2) {
      SmallVector<Value> next;
      for (size_t i = 0; i < accs.size(); i += 2)
        next.push_back(combine(accs[i], accs[i + 1], P));
      accs = std::move(next);
    }
    return accs.front();
  }

  void tile(Value i0, Value j0, Value M, Value N, Value K) {
    Value lastRow = arith::SubIOp::create(b, loc, M, idx(1));
    Value lastCol = arith::SubIOp::create(b, loc, N, idx(1));
    SmallVector<Value> rows, cols;
    for (int64_t r = 0; r < kTileRows; ++r)
      rows.push_back(clamped(i0, r, lastRow));
    for (int64_t j = 0; j < kTileCols; ++j)
      cols.push_back(clamped(j0, j, lastCol));
    Value zero = arith::ConstantOp::create(b, loc, vec, DenseElementsAttr::get(vec, 0.0f));
    SmallVector<Value> init(kTileRows * kTileCols, zero);
    auto loop = scf::ForOp::create(
        b, loc, idx(0), K, idx(kLanes), init,
        [&](OpBuilder &kb, Location l, Value d0, ValueRange acc) {
          SmallVector<Value> av, bv, next;
          for (Value r : rows)
            av.push_back(vector::LoadOp::create(kb, l, vec, a, operandIndices(p, p.a, 2, {}, r, d0)));
          for (Value j : cols)
            bv.push_back(
                vector::LoadOp::create(kb, l, vec, bm, operandIndices(p, p.b, 2, {}, d0, j)));
          for (int64_t r = 0; r < kTileRows; ++r)
            for (int64_t j = 0; j < kTileCols; ++j)
              next.push_back(
                  vector::FMAOp::create(kb, l, av[r], bv[j], acc[r * kTileCols + j]));
          scf::YieldOp::create(kb, l, next);
        });
    Value sums = butterfly(SmallVector<Value>(loop.getResults()));
    // C[i0 + r, j0 + j] += sums[r * 4 + j], inside C only.
    for (int64_t r = 0; r < kTileRows; ++r)
      for (int64_t j = 0; j < kTileCols; ++j) {
        Value i = add(i0, idx(r)), jj = add(j0, idx(j));
        Value inside = arith::AndIOp::create(b, loc, lt(i, M), lt(jj, N));
        auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value s = vector::ExtractOp::create(b, loc, sums, ArrayRef<int64_t>{r * kTileCols + j});
        Value old = memref::LoadOp::create(b, loc, c, ValueRange{i, jj});
        memref::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, old, s), c,
                                ValueRange{i, jj});
      }
  }
};

} // namespace

bool canTileDots(linalg::GenericOp g, const Product &p) {
  Value a = g.getDpsInputOperand(0)->get(), bm = g.getDpsInputOperand(1)->get();
  auto aType = cast<MemRefType>(a.getType());
  if (!p.outer.empty() || p.packedB || p.a.transposed || !p.b.transposed || aType.getRank() != 2)
    return false;
  int64_t k = aType.getDimSize(1);
  return !ShapedType::isDynamic(k) && k % kLanes == 0 && unitInnerStride(a) &&
         unitInnerStride(bm);
}

void tileDots(OpBuilder &b, linalg::GenericOp g, const Product &p) {
  DotTile(b, g, p).build();
  g.erase();
}

} // namespace xfmr::cpu
