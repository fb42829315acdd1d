//===- StepPositions.h - a step function's positions for derived ones -----===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_STEPPOSITIONS_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_STEPPOSITIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace xfmr::raise {

class RaiseLog;

/// In a paged step function (batch 1, T packed tokens, no past, ones mask),
/// replaces the graph's own positions (Range(0, T), CumSum of the ones mask)
/// with `positions` ([T]). `tDims` are (value, dim) pairs known to be T.
/// Fails, naming the node, on a live Range/CumSum over T of another form.
mlir::LogicalResult substituteStepPositions(mlir::func::FuncOp f,
                                            llvm::ArrayRef<std::pair<mlir::Value, int64_t>> tDims,
                                            mlir::Value positions, RaiseLog *log = nullptr);

} // namespace xfmr::raise

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_STEPPOSITIONS_H
