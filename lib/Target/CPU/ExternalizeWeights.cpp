//===- ExternalizeWeights.cpp - constants to a memory-mapped file ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_EXTERNALIZEWEIGHTSPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

constexpr int64_t kAlignment = 64;

/// The bytes of `attr` as the runtime lays them out (one byte per bool).
std::optional<std::vector<char>> rawBytes(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  int64_t n = type.getNumElements();
  Type elem = type.getElementType();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    ArrayRef<char> data = blob->getData();
    return std::vector<char>(data.begin(), data.end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense || dense.isSplat())
    return std::nullopt;
  if (elem.isInteger(1)) {
    std::vector<char> out;
    out.reserve(n);
    for (bool v : dense.getValues<bool>())
      out.push_back(v ? 1 : 0);
    return out;
  }
  ArrayRef<char> data = dense.getRawData();
  return std::vector<char>(data.begin(), data.end());
}

struct ExternalizeWeightsPass
    : impl::ExternalizeWeightsPassBase<ExternalizeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp entry;
    for (auto f : module.getOps<func::FuncOp>())
      if (f.isPublic() && !f.isExternal())
        entry = f;
    if (!entry) {
      module.emitError("xfmr-externalize-weights: no public function");
      return signalPassFailure();
    }
    SmallVector<std::pair<arith::ConstantOp, std::vector<char>>> moved;
    entry.walk([&](arith::ConstantOp c) {
      auto attr = dyn_cast<ElementsAttr>(c.getValue());
      if (!attr)
        return;
      auto type = cast<ShapedType>(attr.getType());
      Type elem = type.getElementType();
      if (!elem.isIntOrFloat())
        return;
      int64_t bytes = type.getNumElements() *
                      std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
      if (bytes < minBytes)
        return;
      auto data = rawBytes(attr);
      if (!data || static_cast<int64_t>(data->size()) != bytes)
        return;
      moved.emplace_back(c, std::move(*data));
    });

    MLIRContext *ctx = &getContext();
    auto bufType = MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8));
    if (failed(entry.insertArgument(0, bufType,
                                    DictionaryAttr::get(ctx, {NamedAttribute(
                                        StringAttr::get(ctx, "xfmr.weights"),
                                        UnitAttr::get(ctx))}),
                                    entry.getLoc()))) {
      entry.emitError("cannot add the weights argument");
      return signalPassFailure();
    }
    Value buffer = entry.getArgument(0);
    std::string tmp = weightsFile + ".tmp";
    std::unique_ptr<llvm::raw_fd_ostream> os;
    if (!weightsFile.empty()) {
      std::error_code ec;
      os = std::make_unique<llvm::raw_fd_ostream>(tmp, ec);
      if (ec) {
        module.emitError() << "cannot write '" << tmp << "': " << ec.message();
        return signalPassFailure();
      }
    }
    int64_t offset = 0;
    for (auto &[c, data] : moved) {
      offset = llvm::alignTo(offset, kAlignment);
      if (os) {
        os->seek(offset);
        os->write(data.data(), data.size());
      }
      OpBuilder b(c);
      auto tensorType = cast<RankedTensorType>(c.getType());
      auto memType = MemRefType::get(tensorType.getShape(), tensorType.getElementType());
      Value off = arith::ConstantIndexOp::create(b, c.getLoc(), offset);
      Value view = memref::ViewOp::create(b, c.getLoc(), memType, buffer, off,
                                          ValueRange{});
      auto t = bufferization::ToTensorOp::create(b, c.getLoc(), tensorType, view,
                                                 /*restrict=*/true,
                                                 /*writable=*/false);
      c.replaceAllUsesWith(t.getResult());
      c.erase();
      offset += data.size();
    }
    if (os) {
      os->close();
      if (os->has_error()) {
        module.emitError() << "cannot write '" << tmp << "': "
                           << os->error().message();
        os->clear_error();
        return signalPassFailure();
      }
      if (std::error_code ec = llvm::sys::fs::rename(tmp, weightsFile)) {
        module.emitError() << "cannot write '" << weightsFile << "': " << ec.message();
        return signalPassFailure();
      }
    }
    Builder b(ctx);
    module->setAttr("xfmr.weights",
                    b.getDictionaryAttr({b.getNamedAttr("count", b.getI64IntegerAttr(moved.size())),
                                         b.getNamedAttr("size", b.getI64IntegerAttr(offset))}));
    numWeights = moved.size();
  }
};

} // namespace
} // namespace xfmr::cpu
