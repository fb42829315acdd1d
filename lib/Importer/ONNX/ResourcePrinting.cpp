//===- ResourcePrinting.cpp - print modules with large weights ------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Importer/ResourcePrinting.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <list>
#include <string>
#include <vector>

namespace xfmr {

unsigned elideLargeResourceBlobs(mlir::MLIRContext *ctx, uint64_t limitChars) {
  auto &manager = mlir::DenseResourceElementsHandle::getManagerInterface(ctx).getBlobManager();
  // The printer writes a blob as "0x" + 8 hex digits of alignment + 2 per
  // byte: a blob of more than limitChars / 2 bytes is elided.
  uint64_t maxBytes = limitChars / 2;
  std::vector<std::string> large;
  manager.getBlobMap([&](const llvm::StringMap<mlir::DialectResourceBlobManager::BlobEntry> &map) {
    for (const auto &entry : map)
      if (const mlir::AsmResourceBlob *blob = entry.second.getBlob())
        if (blob->getData().size() > maxBytes)
          large.push_back(entry.first().str());
  });
  if (large.empty())
    return 0;
  // One stand-in per call, shared by its blobs and kept for the process:
  // still over the limit, so still elided.
  static std::list<std::vector<char>> standIns;
  std::vector<char> &standIn = standIns.emplace_back(maxBytes + 1, 0);
  for (const std::string &name : large)
    manager.update(name, mlir::UnmanagedAsmResourceBlob::allocateWithAlign(
                             llvm::ArrayRef<char>(standIn), alignof(uint64_t)));
  return static_cast<unsigned>(large.size());
}

} // namespace xfmr
