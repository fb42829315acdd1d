//===- Contraction.cpp - f32 matrix products in bufferized linalg ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cstring>
#include <vector>

using namespace mlir;

namespace xfmr::cpu {
namespace {

/// Matches an operand whose map is (outer..., row, col) or (outer..., col,
/// row), every outer result being one of C's outer loop dims.
std::optional<OperandLayout> matchOperand(AffineMap map, unsigned row,
                                          unsigned col,
                                          ArrayRef<unsigned> outerDims) {
  unsigned rank = map.getNumResults();
  if (rank < 2 || !map.isProjectedPermutation())
    return std::nullopt;
  OperandLayout layout;
  unsigned r0 = map.getDimPosition(rank - 2), r1 = map.getDimPosition(rank - 1);
  if (r0 == row && r1 == col)
    layout.transposed = false;
  else if (r0 == col && r1 == row)
    layout.transposed = true;
  else
    return std::nullopt;
  for (unsigned i = 0; i + 2 < rank; ++i) {
    unsigned d = map.getDimPosition(i);
    if (!llvm::is_contained(outerDims, d))
      return std::nullopt;
    layout.outer.push_back({d, i});
  }
  return layout;
}

/// The body is exactly `yield out + in0 * in1` (either operand order):
/// isaContractionOpInterface also accepts bodies that transform the inputs
/// before multiplying, which sgemm would not compute.
/// Whether `g`'s body is exactly `out + in0 * in1`, or with `integerB`
/// `out + in0 * sitofp(in1)`.
bool isMultiplyAdd(linalg::GenericOp g, bool integerB) {
  Block *body = g.getBody();
  if (body->getOperations().size() != (integerB ? 4u : 3u))
    return false;
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  auto isArg = [&](Value v, unsigned i) { return v == body->getArgument(i); };
  auto isB = [&](Value v) {
    if (!integerB)
      return isArg(v, 1);
    auto widen = v.getDefiningOp<arith::SIToFPOp>();
    return widen && isArg(widen.getIn(), 1);
  };
  auto both = [](Value x, Value y, auto pred0, auto pred1) {
    return (pred0(x) && pred1(y)) || (pred0(y) && pred1(x));
  };
  auto mul = add.getLhs().getDefiningOp<arith::MulFOp>();
  if (!mul)
    mul = add.getRhs().getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  return both(add.getLhs(), add.getRhs(), [&](Value v) { return isArg(v, 2); },
              [&](Value v) { return v == mul.getResult(); }) &&
         both(mul.getLhs(), mul.getRhs(), [&](Value v) { return isArg(v, 0); }, isB);
}

/// B's map in the packed panel layout: (n floordiv 16, k, n mod 16).
bool isPanelMap(AffineMap map, unsigned k, unsigned n) {
  if (map.getNumResults() != 3)
    return false;
  MLIRContext *ctx = map.getContext();
  AffineExpr dn = getAffineDimExpr(n, ctx), dk = getAffineDimExpr(k, ctx);
  return map.getResult(0) == dn.floorDiv(kPanelWidth) && map.getResult(1) == dk &&
         map.getResult(2) == dn % kPanelWidth;
}

} // namespace

AffineMap panelMap(MLIRContext *ctx, unsigned numDims, unsigned k, unsigned n) {
  AffineExpr dn = getAffineDimExpr(n, ctx), dk = getAffineDimExpr(k, ctx);
  return AffineMap::get(numDims, 0, {dn.floorDiv(kPanelWidth), dk, dn % kPanelWidth}, ctx);
}

void forEachPanelChunk(ArrayRef<char> b, int64_t k, int64_t n, int64_t elemBytes,
                       function_ref<void(ArrayRef<char>)> chunk) {
  constexpr int64_t kGroup = 64; // panels per chunk: 4 KiB of an f32 row
  int64_t panels = n / kPanelWidth;
  std::vector<char> staging;
  for (int64_t first = 0; first < panels; first += kGroup) {
    int64_t count = std::min(kGroup, panels - first);
    staging.resize(static_cast<size_t>(count * k * kPanelWidth * elemBytes));
    rt::packPanels(b.data(), k, n, elemBytes, first, count, staging.data());
    chunk(staging);
  }
}

bool isPanelPack(linalg::PackOp pack) {
  auto source = dyn_cast<RankedTensorType>(pack.getSource().getType());
  return source && source.getRank() == 2 && source.hasStaticShape() &&
         source.getDimSize(1) % kPanelWidth == 0 && !pack.getPaddingValue() &&
         pack.getInnerDimsPos() == ArrayRef<int64_t>{1} &&
         pack.getStaticInnerTiles() == ArrayRef<int64_t>{kPanelWidth} &&
         pack.getOuterDimsPerm() == ArrayRef<int64_t>{1, 0};
}

bool unitInnerStride(Value v) {
  auto t = cast<MemRefType>(v.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(t.getStridesAndOffset(strides, offset)) && !strides.empty() &&
         strides.back() == 1;
}

SmallVector<Value> operandIndices(const Product &p, const OperandLayout &l, unsigned rank,
                                  ValueRange outerIvs, Value first, Value second) {
  SmallVector<Value> indices(rank);
  for (auto [loopDim, memDim] : l.outer)
    indices[memDim] = outerIvs[llvm::find(p.outer, loopDim) - p.outer.begin()];
  indices[rank - 2] = l.transposed ? second : first;
  indices[rank - 1] = l.transposed ? first : second;
  return indices;
}

std::optional<Product> matchProduct(linalg::GenericOp g, bool allowIntegerB) {
  bool buffers = g.hasPureBufferSemantics();
  if ((!buffers && !g.hasPureTensorSemantics()) || g.getNumDpsInputs() != 2 ||
      g.getNumDpsInits() != 1)
    return std::nullopt;
  // B of signless integers of at most 8 bits (exact in tf32 and f32).
  auto bType = dyn_cast<ShapedType>(g.getDpsInputOperand(1)->get().getType());
  bool integerB = allowIntegerB && bType && bType.getElementType().isSignlessInteger() &&
                  bType.getElementTypeBitWidth() <= 8;
  if (!isMultiplyAdd(g, integerB))
    return std::nullopt;
  for (OpOperand &o : g->getOpOperands()) {
    auto t = dyn_cast<ShapedType>(o.get().getType());
    if (!t || (!t.getElementType().isF32() && !(integerB && &o == g.getDpsInputOperand(1))))
      return std::nullopt;
  }
  if (g.getNumReductionLoops() != 1)
    return std::nullopt;
  AffineMap mc = g.getMatchingIndexingMap(g.getDpsInitOperand(0));
  unsigned rank = mc.getNumResults();
  if (rank < 2 || !mc.isProjectedPermutation())
    return std::nullopt;
  Product p;
  p.integerB = integerB;
  p.m = mc.getDimPosition(rank - 2);
  p.n = mc.getDimPosition(rank - 1);
  for (unsigned i = 0; i + 2 < rank; ++i)
    p.outer.push_back(mc.getDimPosition(i));
  SmallVector<unsigned> reductions;
  g.getReductionDims(reductions);
  p.k = reductions.front();
  auto a = matchOperand(g.getMatchingIndexingMap(g.getDpsInputOperand(0)),
                        p.m, p.k, p.outer);
  AffineMap mb = g.getMatchingIndexingMap(g.getDpsInputOperand(1));
  auto b = matchOperand(mb, p.k, p.n, p.outer);
  if (!b && isPanelMap(mb, p.k, p.n)) {
    b = OperandLayout{};
    p.packedB = true;
  }
  auto c = matchOperand(mc, p.m, p.n, p.outer);
  if (!a || !b || !c || c->transposed)
    return std::nullopt;
  p.a = *a;
  p.b = *b;
  p.c = *c;
  return p;
}


} // namespace xfmr::cpu
