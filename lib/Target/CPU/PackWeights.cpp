//===- PackWeights.cpp - constant weight matrices in column panels --------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"
#include "xfmr/Target/CPU/Passes.h"

#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_PACKWEIGHTSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

/// The values of an f32 constant, row-major; nothing for splats and
/// resources without data.
std::optional<std::vector<float>> floats(ElementsAttr attr) {
  int64_t n = cast<ShapedType>(attr.getType()).getNumElements();
  if (auto res = dyn_cast<DenseF32ResourceElementsAttr>(attr)) {
    std::optional<ArrayRef<float>> data = res.tryGetAsArrayRef();
    if (!data || static_cast<int64_t>(data->size()) != n)
      return std::nullopt;
    return std::vector<float>(data->begin(), data->end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense || dense.isSplat())
    return std::nullopt;
  auto values = dense.getValues<float>();
  return std::vector<float>(values.begin(), values.end());
}

/// An f32 resource blob of at least `minBytes`, with its data: packed by a
/// linalg.pack that xfmr-externalize-weights carries out as it writes it;
/// smaller ones become packed constants.
bool isLargeResource(ElementsAttr attr, int64_t minBytes) {
  auto res = dyn_cast<DenseF32ResourceElementsAttr>(attr);
  if (!res)
    return false;
  std::optional<ArrayRef<float>> data = res.tryGetAsArrayRef();
  int64_t n = cast<ShapedType>(attr.getType()).getNumElements();
  return data && static_cast<int64_t>(data->size()) == n &&
         n * static_cast<int64_t>(sizeof(float)) >= minBytes;
}

/// Bp [N / 16, K, 16] from B [K, N].
ElementsAttr pack(ArrayRef<float> b, int64_t k, int64_t n, MLIRContext *ctx) {
  int64_t panels = n / kPanelWidth;
  std::vector<float> packed(static_cast<size_t>(k * n));
  rt::packPanels(reinterpret_cast<const char *>(b.data()), k, n, sizeof(float), 0, panels,
                 reinterpret_cast<char *>(packed.data()));
  auto type = RankedTensorType::get({panels, k, kPanelWidth}, Float32Type::get(ctx));
  return DenseResourceElementsAttr::get(
      type, "xfmr_packed_weights",
      HeapAsmResourceBlob::allocateAndCopyInferAlign(ArrayRef<float>(packed)));
}

/// For B = linalg.transpose(C) of a 2-D f32 constant C (permutation [1, 0]):
/// a new constant holding C transposed, placed after C, as a resource blob.
/// A tied embedding read as the lm_head is such a B: the dynamo exporter
/// writes MatMul(x, Transpose(E)) with E also the embedding's table (the
/// TorchScript exporter folds the transpose into a second initializer).
/// Without this the product would transpose E (113 MB for SmolLM2) at every
/// step and read it unpacked. C keeps its other users.
arith::ConstantOp transposedConstant(linalg::TransposeOp t) {
  auto cst = t.getInput().getDefiningOp<arith::ConstantOp>();
  auto attr = cst ? dyn_cast<ElementsAttr>(cst.getValue()) : ElementsAttr();
  auto type = attr ? dyn_cast<RankedTensorType>(attr.getType()) : RankedTensorType();
  if (!type || type.getRank() != 2 || !type.hasStaticShape() || !type.getElementType().isF32() ||
      t.getPermutation() != ArrayRef<int64_t>{1, 0})
    return {};
  std::optional<std::vector<float>> values = floats(attr);
  if (!values)
    return {};
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
      static_cast<size_t>(rows * cols) * sizeof(float), alignof(float));
  float *out = reinterpret_cast<float *>(blob.getMutableData().data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = (*values)[static_cast<size_t>(r * cols + c)];
  auto resultType = RankedTensorType::get({cols, rows}, type.getElementType());
  std::string name = "transposed";
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr))
    name = res.getRawHandle().getKey().str() + ".T";
  OpBuilder builder(cst);
  builder.setInsertionPointAfter(cst);
  return arith::ConstantOp::create(
      builder, t.getLoc(),
      cast<TypedAttr>(DenseResourceElementsAttr::get(resultType, name, std::move(blob))));
}

struct PackWeightsPass : impl::PackWeightsPassBase<PackWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    DenseMap<Value, Value> packedOf;
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp g) {
      if (isa<func::FuncOp>(g->getParentOp()) && g.hasPureTensorSemantics())
        generics.push_back(g);
    });
    for (linalg::GenericOp g : generics) {
      std::optional<Product> p = matchProduct(g);
      if (!p || p->packedB || p->b.transposed || !p->b.outer.empty())
        continue;
      Value orig = g.getDpsInputOperand(1)->get();
      auto type = cast<RankedTensorType>(orig.getType());
      if (!type.hasStaticShape() || type.getDimSize(1) % kPanelWidth != 0)
        continue;
      Value packed = packedOf.lookup(orig);
      if (!packed) {
        Value b = orig;
        auto cst = b.getDefiningOp<arith::ConstantOp>();
        if (auto t = b.getDefiningOp<linalg::TransposeOp>()) {
          cst = transposedConstant(t);
          if (cst)
            b = cst.getResult();
        }
        auto attr = cst ? dyn_cast<ElementsAttr>(cst.getValue()) : ElementsAttr();
        if (!attr)
          continue;
        OpBuilder builder(cst);
        if (isLargeResource(attr, lazyMinBytes)) {
          builder.setInsertionPointAfter(cst);
          // Packed while xfmr-externalize-weights writes it: no copy of
          // the matrix is ever held.
          Value empty = tensor::EmptyOp::create(
              builder, cst.getLoc(),
              {type.getDimSize(1) / kPanelWidth, type.getDimSize(0), kPanelWidth},
              type.getElementType());
          packed = linalg::PackOp::create(builder, cst.getLoc(), b, empty,
                                          /*innerDimsPos=*/{1},
                                          {builder.getIndexAttr(kPanelWidth)},
                                          /*paddingValue=*/std::nullopt,
                                          /*outerDimsPerm=*/{1, 0});
        } else {
          std::optional<std::vector<float>> values = floats(attr);
          if (!values)
            continue;
          packed = arith::ConstantOp::create(
              builder, cst.getLoc(),
              cast<TypedAttr>(pack(*values, type.getDimSize(0), type.getDimSize(1), ctx)));
          if (b != orig && cst->use_empty())
            cst.erase(); // the transposed copy, now packed
        }
        packedOf[orig] = packed;
        ++numPacked;
      }
      SmallVector<AffineMap> maps = g.getIndexingMapsArray();
      maps[1] = panelMap(ctx, g.getNumLoops(), p->k, p->n);
      g.setIndexingMapsAttr(OpBuilder(g).getAffineMapArrayAttr(maps));
      g->setOperand(1, packed);
    }
    // Originals whose every product now reads the packed copy; for a
    // transpose, also its constant and init when nothing else reads them.
    SmallVector<Operation *> worklist;
    for (auto [orig, packed] : packedOf)
      worklist.push_back(orig.getDefiningOp());
    DenseSet<Operation *> originals(worklist.begin(), worklist.end()), erased;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!op || erased.contains(op) || !op->use_empty() ||
          !(originals.contains(op) || isa<arith::ConstantOp, tensor::EmptyOp>(op)))
        continue;
      for (Value v : op->getOperands())
        worklist.push_back(v.getDefiningOp());
      erased.insert(op);
      op->erase();
    }
  }
};

} // namespace
} // namespace xfmr::cpu
