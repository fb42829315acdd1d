//===- ResourceBlobs.h - give weight data back once it is written -*- C++ -*-===//
//
// Part of xfmr. Weights live in dense_resource blobs: memory-mapped from
// the model's external data file, or on the heap when a pass made them
// (split projections, packed panels). A blob lives as long as the context
// unless something releases it; these helpers release a blob once no op
// refers to it any more, so that a compile holds one weight at a time.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SUPPORT_RESOURCEBLOBS_H
#define XFMR_SUPPORT_RESOURCEBLOBS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

namespace xfmr {

/// Counts the ops under a root that refer to each resource blob (through an
/// attribute of their own: constants), so that a blob is freed only when
/// no op refers to it any more.
class ResourceUses {
public:
  explicit ResourceUses(mlir::Operation *root) {
    root->walk([&](mlir::Operation *op) {
      for (mlir::NamedAttribute attr : op->getAttrs())
        if (auto res = llvm::dyn_cast<mlir::DenseResourceElementsAttr>(attr.getValue()))
          ++count[res.getRawHandle().getResource()];
    });
  }

  /// One op that referred to `attr` is gone; true when it was the last,
  /// and the caller may free the blob (`setBlob(AsmResourceBlob())` runs
  /// its deleter: heap memory is freed, a file mapping's pages are given
  /// back). xfmr-externalize-weights' writer does so once it is written.
  bool dropLast(mlir::DenseResourceElementsAttr attr) {
    auto it = count.find(attr.getRawHandle().getResource());
    if (it == count.end() || --it->second > 0)
      return false;
    count.erase(it);
    return true;
  }

private:
  llvm::DenseMap<mlir::DialectResourceBlobManager::BlobEntry *, int64_t> count;
};

} // namespace xfmr

#endif // XFMR_SUPPORT_RESOURCEBLOBS_H
