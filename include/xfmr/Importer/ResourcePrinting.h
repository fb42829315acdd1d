//===- ResourcePrinting.h - print modules with large weights -----*- C++ -*-===//
//
// Part of xfmr.
//
// MLIR's printer, asked to elide resource strings longer than N characters
// (--mlir-elide-resource-strings-if-larger=N), still renders every blob as
// hex in memory before it decides to drop it: printing a model with 1 GiB of
// memory-mapped weights touched every page and peaked near 2 GiB. Blobs that
// would be elided are swapped for a small stand-in first, so printing never
// reads the weights.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_IMPORTER_RESOURCEPRINTING_H
#define XFMR_IMPORTER_RESOURCEPRINTING_H

#include "mlir/IR/MLIRContext.h"

#include <cstdint>

namespace xfmr {

/// Replaces every builtin dense-resource blob whose hex form is longer than
/// `limitChars` by a zero blob just long enough to be elided as well. Only
/// for printing with that limit: the module's weights are gone afterwards.
/// Returns the number of blobs replaced.
unsigned elideLargeResourceBlobs(mlir::MLIRContext *ctx, uint64_t limitChars);

} // namespace xfmr

#endif // XFMR_IMPORTER_RESOURCEPRINTING_H
