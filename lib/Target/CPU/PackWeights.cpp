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
      Value b = g.getDpsInputOperand(1)->get();
      auto type = cast<RankedTensorType>(b.getType());
      if (!type.hasStaticShape() || type.getDimSize(1) % kPanelWidth != 0)
        continue;
      Value packed = packedOf.lookup(b);
      if (!packed) {
        auto cst = b.getDefiningOp<arith::ConstantOp>();
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
        }
        packedOf[b] = packed;
        ++numPacked;
      }
      SmallVector<AffineMap> maps = g.getIndexingMapsArray();
      maps[1] = panelMap(ctx, g.getNumLoops(), p->k, p->n);
      g.setIndexingMapsAttr(OpBuilder(g).getAffineMapArrayAttr(maps));
      g->setOperand(1, packed);
    }
    // Originals whose every product now reads the packed copy.
    for (auto [orig, packed] : packedOf)
      if (orig.use_empty())
        orig.getDefiningOp()->erase();
  }
};

} // namespace
} // namespace xfmr::cpu
