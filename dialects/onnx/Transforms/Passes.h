//===- Passes.h - onnx dialect passes ---------------------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DIALECTS_ONNX_TRANSFORMS_PASSES_H
#define XFMR_DIALECTS_ONNX_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace xfmr::onnx {

#define GEN_PASS_DECL
#include "dialects/onnx/Transforms/Passes.h.inc"

/// Patterns that evaluate onnx ops whose operands are small constants and
/// fold Shape/Size (and picks of their static dims) into constants.
void populateONNXConstantFoldingPatterns(mlir::RewritePatternSet &patterns,
                                         int64_t maxElements);

/// Runs shape inference and folding over `module` to a fixpoint (the body of
/// onnx-simplify-shapes, callable from the importer and the pipelines).
mlir::LogicalResult simplifyShapes(mlir::ModuleOp module,
                                   int64_t maxElements = 4096);

#define GEN_PASS_REGISTRATION
#include "dialects/onnx/Transforms/Passes.h.inc"

} // namespace xfmr::onnx

#endif // XFMR_DIALECTS_ONNX_TRANSFORMS_PASSES_H
