//===- SplitProjections.cpp - fused projections into one per consumer -----===//
//
// Part of xfmr.
//
// Phi-3 (and GPT-NeoX-style fused attention, Falcon, many ONNX files) compute
// several projections with one product and cut the result apart:
//   qkv = x · W_qkv;  q = qkv[..., :a];  k = qkv[..., a:b];  v = qkv[..., b:]
//   gu  = x · W_gu;   gate, up = Split(gu, 2, axis=-1)
// A MatMul with a constant 2-D weight whose every user cuts its last axis
// into column ranges (Slice with constant bounds and unit step, or Split) is
// replaced by one MatMul per range on the matching columns of the weight.
// The bytes read are the same; the pieces then look like separate
// projections, which the attention and gated-MLP patterns recognise. The
// column blocks are copied into new constants; the fused weight dies.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

/// A cut of the product's last axis: result `value` holds columns [begin, end).
struct Cut {
  Value value;
  int64_t begin, end;
};

/// Columns [begin, end) of a [rows, cols] constant as a new constant.
Value columnsOf(OpBuilder &b, Location loc, ElementsAttr w, StringRef name, int64_t begin,
                int64_t end) {
  auto type = cast<RankedTensorType>(w.getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  auto pieceType = RankedTensorType::get({rows, end - begin}, type.getElementType());
  if (auto dense = dyn_cast<DenseElementsAttr>(w); dense && dense.isSplat())
    return makeConstant(b, loc, dense.resizeSplat(pieceType));
  unsigned bytes = type.getElementTypeBitWidth() / 8;
  ArrayRef<char> raw = *rawBytes(w);
  std::vector<char> piece;
  piece.reserve(rows * (end - begin) * bytes);
  for (int64_t r = 0; r < rows; ++r) {
    const char *row = raw.data() + (r * cols + begin) * bytes;
    piece.insert(piece.end(), row, row + (end - begin) * bytes);
  }
  return blobConstant(b, loc, pieceType.getShape(), type.getElementType(), piece,
                      (name + ".cols" + Twine(begin) + "_" + Twine(end)).str());
}

/// The column range a user cuts from the product, or failure.
LogicalResult cutsOf(Operation *user, int64_t rank, int64_t cols, SmallVectorImpl<Cut> &cuts) {
  if (auto slice = dyn_cast<onnx::SliceOp>(user)) {
    auto starts = constantInts(slice.getStarts()), ends = constantInts(slice.getEnds());
    auto axes = constantInts(slice.getAxes());
    auto steps = isa<NoneType>(slice.getSteps().getType()) ? std::optional(SmallVector<int64_t>{1})
                                                           : constantInts(slice.getSteps());
    if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 ||
        axes->size() != 1 || steps->size() != 1 || (*steps)[0] != 1 ||
        !isLastAxis((*axes)[0], rank))
      return failure();
    auto clampIdx = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + cols : i, 0, cols); };
    int64_t b = clampIdx((*starts)[0]), e = clampIdx((*ends)[0]);
    if (e <= b)
      return failure();
    cuts.push_back({slice.getOutput(), b, e});
    return success();
  }
  if (auto split = dyn_cast<onnx::SplitOp>(user)) {
    if (!isLastAxis(split.getAxis(), rank))
      return failure();
    int64_t begin = 0;
    for (Value piece : split->getResults()) {
      int64_t n = dimOf(piece, -1);
      if (ShapedType::isDynamic(n))
        return failure();
      cuts.push_back({piece, begin, begin + n});
      begin += n;
    }
    return success(begin == cols);
  }
  return failure();
}

} // namespace

bool splitFusedProjection(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto mm = cast<onnx::MatMulOp>(anchor);
  ElementsAttr w;
  Value y = mm.getY();
  if (rankOf(mm.getB()) != 2 || rankOf(y) < 2 || !matchPattern(mm.getB(), m_Constant(&w)) ||
      y.use_empty())
    return false;
  auto wType = cast<RankedTensorType>(w.getType());
  if (!wType.hasStaticShape() || wType.getElementTypeBitWidth() % 8 != 0 ||
      (!rawBytes(w) && !(isa<DenseElementsAttr>(w) && cast<DenseElementsAttr>(w).isSplat())))
    return false;
  int64_t rank = rankOf(y), cols = wType.getDimSize(1);
  SmallVector<Cut> cuts;
  for (Operation *user : y.getUsers())
    if (failed(cutsOf(user, rank, cols, cuts)))
      return false;
  if (cuts.size() < 2)
    return false; // one slice of a product is not a fused projection
  std::string name = "fused";
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(w))
    name = resource.getRawHandle().getKey().str();
  rewriter.setInsertionPoint(mm);
  for (const Cut &cut : cuts) {
    Value piece = columnsOf(rewriter, mm.getLoc(), w, name, cut.begin, cut.end);
    SmallVector<int64_t> shape(cast<RankedTensorType>(y.getType()).getShape());
    shape.back() = cut.end - cut.begin;
    auto type = RankedTensorType::get(shape, elementTypeOf(y));
    Value product = onnx::MatMulOp::create(rewriter, mm.getLoc(), type, mm.getA(), piece);
    if (product.getType() != cut.value.getType())
      product = tensor::CastOp::create(rewriter, mm.getLoc(), cut.value.getType(), product);
    rewriter.replaceAllUsesWith(cut.value, product);
  }
  log.formed("split_projection");
  return true;
}

} // namespace xfmr::raise
