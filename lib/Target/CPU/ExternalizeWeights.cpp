//===- ExternalizeWeights.cpp - constants to a memory-mapped file ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"
#include "xfmr/Support/ResourceBlobs.h"
#include "xfmr/Target/CPU/Passes.h"
#include "xfmr/Target/CPU/WeightsWriter.h"

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

/// A tensor-parallel rank's slice of a weight (xfmr-shard-tensor-parallel
/// names its blobs "xfmr.tp.*"): in the weights file whatever its size, so
/// that every rank's code is the same.
bool isRankShard(ElementsAttr attr) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  return resource && resource.getRawHandle().getKey().starts_with("xfmr.tp.");
}

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
    // Where each weight goes; the bytes are written by the weights writer
    // (on a thread with `background`), which frees each blob after its
    // last weight.
    ResourceUses uses(module);
    std::vector<WeightWrite> plan;
    DenseMap<DialectResourceBlobManager::BlobEntry *, size_t> lastReader;
    int64_t offset = 0;
    for (Weight &w : weights) {
      offset = llvm::alignTo(offset, kAlignment);
      if (!weightsFile.empty() && failed(addToPlan(w, offset, plan)))
        return signalPassFailure();
      auto res = dyn_cast<DenseResourceElementsAttr>(w.attr);
      if (res && !plan.empty())
        lastReader[res.getRawHandle().getResource()] = plan.size() - 1;
      replaceByView(w, entry.getArgument(0), offset);
      offset += w.bytes;
      // The constant goes with its last user; its blob with its last op.
      if (w.cst && w.cst->use_empty()) {
        w.cst.erase();
        if (res && !keepBlobs && uses.dropLast(res) && !plan.empty())
          plan[lastReader.lookup(res.getRawHandle().getResource())].release =
              res.getRawHandle().getResource();
      }
    }
    if (!weightsFile.empty())
      startWeightsWrite(std::move(plan), weightsFile, background);
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
      std::optional<ArrayRef<char>> data = attr ? rawBytes(attr, storage) : std::nullopt;
      if (!data || !isPanelPack(pack))
        return;
      weights.push_back({pack, cst, attr, static_cast<int64_t>(data->size())});
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
      if ((bytes < minBytes && !isRankShard(attr)) || !rawBytes(attr, storage))
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

  /// Plans `w` at `offset`, which moves up for a referenced weight the
  /// loader can map from its file without a copy (see pageCongruent).
  LogicalResult addToPlan(const Weight &w, int64_t &offset, std::vector<WeightWrite> &plan) {
    WeightWrite item;
    std::optional<ArrayRef<char>> data = rawBytes(w.attr, item.owned);
    if (!data)
      return w.op->emitError("xfmr-externalize-weights: the weight's data is gone");
    // A blob's bytes stay where they are until written; others are copied.
    bool blob = isa<DenseResourceElementsAttr>(w.attr);
    if (!blob && item.owned.empty())
      item.owned.assign(data->begin(), data->end());
    if (blob && referenceSources)
      if (std::optional<SourceLocation> at =
              MappedSources::get().find(data->data(), data->size())) {
        item.source = *at->file;
        item.sourceOffset = at->offset;
      }
    if (item.source && !isa<linalg::PackOp>(w.op))
      offset = pageCongruent(offset, item.sourceOffset, w.bytes);
    item.data = item.owned.empty() ? *data : ArrayRef<char>(item.owned);
    item.offset = offset;
    item.name = nameOf(w.op->getLoc());
    if (isa<linalg::PackOp>(w.op)) {
      auto type = cast<ShapedType>(w.attr.getType());
      item.k = type.getDimSize(0);
      item.n = type.getDimSize(1);
      item.elemBytes = elementBytes(type.getElementType());
    }
    plan.push_back(std::move(item));
    return success();
  }

  /// The first offset from `offset` on that lies at the same place in its
  /// 4 KiB page as `sourceOffset`, for a weight of 64 KiB or more whose
  /// source offset is aligned: the loader then maps its whole pages from
  /// the model's file instead of copying them. `offset` otherwise.
  static int64_t pageCongruent(int64_t offset, uint64_t sourceOffset, int64_t bytes) {
    constexpr int64_t kPage = 4096;
    if (bytes < (64 << 10) || sourceOffset % kAlignment != 0)
      return offset;
    int64_t want = static_cast<int64_t>(sourceOffset % kPage);
    return offset + ((want - offset % kPage) + kPage) % kPage;
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
