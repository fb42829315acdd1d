//===- ModelSummary.h - human-readable summary of an imported model -*- C++
//-*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_IMPORTER_MODELSUMMARY_H
#define XFMR_IMPORTER_MODELSUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace xfmr {

/// Prints what an imported module holds: opsets, inputs and outputs with
/// symbolic dims, weight count and bytes, and op counts by type.
void printModelSummary(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace xfmr

#endif // XFMR_IMPORTER_MODELSUMMARY_H
