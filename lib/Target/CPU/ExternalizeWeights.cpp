//===- ExternalizeWeights.cpp - constants to a memory-mapped file ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"
#include "xfmr/Support/Progress.h"
#include "xfmr/Support/ResourceBlobs.h"
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

/// Bytes per element as the runtime lays them out (one byte per bool).
int64_t elementBytes(Type elem) {
  return std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
}

/// The bytes of `attr` as the runtime lays them out, without a copy where
/// the attribute holds them so (`storage` keeps converted bools).
std::optional<ArrayRef<char>> rawBytes(ElementsAttr attr, std::vector<char> &storage) {
  auto type = cast<ShapedType>(attr.getType());
  int64_t bytes = type.getNumElements() * elementBytes(type.getElementType());
  std::optional<ArrayRef<char>> data;
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    if (AsmResourceBlob *blob = res.getRawHandle().getBlob())
      data = blob->getData();
  } else if (auto dense = dyn_cast<DenseElementsAttr>(attr); dense && !dense.isSplat()) {
    if (type.getElementType().isInteger(1)) {
      storage.clear();
      for (bool v : dense.getValues<bool>())
        storage.push_back(v ? 1 : 0);
      data = ArrayRef<char>(storage);
    } else {
      data = dense.getRawData();
    }
  }
  if (!data || static_cast<int64_t>(data->size()) != bytes)
    return std::nullopt;
  return data;
}

/// The tensor a weight's location names ("" when none).
std::string nameOf(Location loc) {
  std::string name;
  loc->walk([&](Location part) {
    if (auto named = dyn_cast<NameLoc>(part)) {
      name = named.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

/// A weight to move: a constant, or the panel packing of one.
struct Weight {
  Operation *op;       // arith.constant or linalg.pack
  arith::ConstantOp cst;
  ElementsAttr attr;
  int64_t bytes;
};

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
    SmallVector<Weight> weights = collect(entry);
    if (failed(insertWeightsArgument(entry)))
      return signalPassFailure();
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
    ResourceUses uses(module);
    int64_t offset = 0, written = 0, total = 0;
    for (const Weight &w : weights)
      total += w.bytes;
    for (auto [i, w] : llvm::enumerate(weights)) {
      offset = llvm::alignTo(offset, kAlignment);
      if (os && failed(write(w, offset, *os)))
        return signalPassFailure();
      written += w.bytes;
      if (os)
        reportProgress({"writing weights", nameOf(w.op->getLoc()), static_cast<int64_t>(i) + 1,
                        static_cast<int64_t>(weights.size()), written, total});
      replaceByView(w, entry.getArgument(0), offset);
      offset += w.bytes;
      // The constant goes with its last user; its blob with its last op.
      if (w.cst && w.cst->use_empty()) {
        auto res = dyn_cast<DenseResourceElementsAttr>(w.attr);
        w.cst.erase();
        if (res)
          uses.drop(res);
      }
    }
    if (os) {
      os->close();
      if (os->has_error()) {
        module.emitError() << "cannot write '" << tmp << "': " << os->error().message();
        os->clear_error();
        return signalPassFailure();
      }
      if (std::error_code ec = llvm::sys::fs::rename(tmp, weightsFile)) {
        module.emitError() << "cannot write '" << weightsFile << "': " << ec.message();
        return signalPassFailure();
      }
    }
    Builder b(&getContext());
    module->setAttr("xfmr.weights",
                    b.getDictionaryAttr({b.getNamedAttr("count", b.getI64IntegerAttr(weights.size())),
                                         b.getNamedAttr("size", b.getI64IntegerAttr(offset))}));
    numWeights = weights.size();
  }

  /// Panel packings first (their constant may have other users that move
  /// too), then constants of at least min-bytes.
  SmallVector<Weight> collect(func::FuncOp entry) {
    SmallVector<Weight> weights;
    std::vector<char> storage;
    entry.walk([&](linalg::PackOp pack) {
      auto cst = pack.getSource().getDefiningOp<arith::ConstantOp>();
      auto attr = cst ? dyn_cast<ElementsAttr>(cst.getValue()) : ElementsAttr();
      if (!attr || !isPanelPack(pack) || !rawBytes(attr, storage))
        return;
      weights.push_back({pack, cst, attr, static_cast<int64_t>(rawBytes(attr, storage)->size())});
    });
    entry.walk([&](arith::ConstantOp c) {
      auto attr = dyn_cast<ElementsAttr>(c.getValue());
      if (!attr)
        return;
      auto type = cast<ShapedType>(attr.getType());
      Type elem = type.getElementType();
      if (!elem.isIntOrFloat())
        return;
      int64_t bytes = type.getNumElements() * elementBytes(elem);
      if (bytes < minBytes || !rawBytes(attr, storage))
        return;
      // Used only by packings, it is written packed only.
      if (llvm::all_of(c->getUsers(), [](Operation *user) {
            auto pack = dyn_cast<linalg::PackOp>(user);
            return pack && isPanelPack(pack);
          }) && !c->use_empty())
        return;
      weights.push_back({c, c, attr, bytes});
    });
    return weights;
  }

  LogicalResult insertWeightsArgument(func::FuncOp entry) {
    MLIRContext *ctx = &getContext();
    auto bufType = MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8));
    if (failed(entry.insertArgument(
            0, bufType,
            DictionaryAttr::get(ctx, {NamedAttribute(StringAttr::get(ctx, "xfmr.weights"),
                                                     UnitAttr::get(ctx))}),
            entry.getLoc()))) {
      entry.emitError("cannot add the weights argument");
      return failure();
    }
    return success();
  }

  LogicalResult write(const Weight &w, int64_t offset, llvm::raw_fd_ostream &os) {
    std::vector<char> storage;
    std::optional<ArrayRef<char>> data = rawBytes(w.attr, storage);
    if (!data)
      return w.op->emitError("xfmr-externalize-weights: the weight's data is gone");
    os.seek(offset);
    if (auto pack = dyn_cast<linalg::PackOp>(w.op)) {
      auto type = cast<ShapedType>(w.attr.getType());
      forEachPanelChunk(*data, type.getDimSize(0), type.getDimSize(1),
                        elementBytes(type.getElementType()),
                        [&](ArrayRef<char> chunk) { os.write(chunk.data(), chunk.size()); });
    } else {
      os.write(data->data(), data->size());
    }
    return success();
  }

  /// `w`'s result becomes a read-only view of the weights argument.
  void replaceByView(Weight &w, Value buffer, int64_t offset) {
    OpBuilder b(w.op);
    Location loc = w.op->getLoc();
    auto tensorType = cast<RankedTensorType>(w.op->getResult(0).getType());
    auto memType = MemRefType::get(tensorType.getShape(), tensorType.getElementType());
    Value off = arith::ConstantIndexOp::create(b, loc, offset);
    Value view = memref::ViewOp::create(b, loc, memType, buffer, off, ValueRange{});
    auto t = bufferization::ToTensorOp::create(b, loc, tensorType, view, /*restrict=*/true,
                                               /*writable=*/false);
    w.op->getResult(0).replaceAllUsesWith(t.getResult());
    if (auto pack = dyn_cast<linalg::PackOp>(w.op)) {
      Value dest = pack.getDest();
      pack.erase();
      if (Operation *empty = dest.getDefiningOp(); empty && empty->use_empty())
        empty->erase();
    }
  }
};

} // namespace
} // namespace xfmr::cpu
