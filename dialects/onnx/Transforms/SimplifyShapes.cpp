//===- SimplifyShapes.cpp - shape inference + shape-arithmetic folding ----===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/DebugLog.h"

#define DEBUG_TYPE "onnx-simplify-shapes"

namespace xfmr::onnx {
#define GEN_PASS_DEF_ONNXSIMPLIFYSHAPESPASS
#include "dialects/onnx/Transforms/Passes.h.inc"
} // namespace xfmr::onnx

using namespace mlir;
using namespace xfmr::onnx;

namespace {
/// Makes every function's result types match what its return op returns, so
/// refinements reach the signature.
void syncFunctionResultTypes(ModuleOp module) {
  module.walk([&](func::FuncOp func) {
    if (func.isExternal() || !SymbolTable::symbolKnownUseEmpty(func, module))
      return;
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    auto type = func.getFunctionType();
    if (TypeRange(ret.getOperandTypes()) == type.getResults())
      return;
    func.setFunctionType(FunctionType::get(func.getContext(), type.getInputs(),
                                           ret.getOperandTypes()));
  });
}

/// Runs inference over all ops in program order; returns how many result
/// types changed.
int64_t inferAll(ModuleOp module) {
  int64_t changed = 0;
  module.walk([&](Operation *op) { changed += inferResultTypes(op); });
  return changed;
}

struct Counters {
  int64_t folded = 0, shapes = 0, refined = 0;
};

LogicalResult runSimplify(ModuleOp module, int64_t maxElements,
                          Counters &counters) {
  MLIRContext *ctx = module.getContext();
  RewritePatternSet patterns(ctx);
  populateONNXConstantFoldingPatterns(patterns, maxElements);
  FrozenRewritePatternSet frozen(std::move(patterns));

  auto countOps = [&](StringRef name) {
    int64_t n = 0;
    module.walk(
        [&](Operation *op) { n += op->getName().getStringRef() == name; });
    return n;
  };
  auto countAll = [&] {
    int64_t n = 0;
    module.walk(
        [&](Operation *op) { n += isa<ONNXDialect>(op->getDialect()); });
    return n;
  };
  int64_t shapesBefore = countOps("onnx.Shape") + countOps("onnx.Size");
  int64_t opsBefore = countAll();
  // Folding exposes static shapes and refined shapes expose folds; a handful
  // of rounds reaches the fixpoint on real exports. Bounded against bad input.
  for (int round = 0; round < 32; ++round) {
    int64_t refined = inferAll(module);
    counters.refined += refined;
    bool changed = false;
    GreedyRewriteConfig config;
    config.setMaxIterations(8);
    if (failed(applyPatternsGreedily(module, frozen, config, &changed)))
      LDBG() << "greedy rewrite did not converge in round " << round;
    LDBG() << "round " << round << ": refined " << refined << ", changed "
           << changed;
    // Exporters recompute Shape(x) for every use; merging the copies lets
    // the folds above see one value.
    IRRewriter rewriter(ctx);
    DominanceInfo dominance(module);
    bool cseChanged = false;
    mlir::eliminateCommonSubExpressions(rewriter, dominance, module,
                                        &cseChanged);
    if (!changed && refined == 0 && !cseChanged)
      break;
  }
  syncFunctionResultTypes(module);
  counters.shapes =
      shapesBefore - (countOps("onnx.Shape") + countOps("onnx.Size"));
  counters.folded = opsBefore - countAll();
  return success();
}

struct ONNXSimplifyShapesPass
    : xfmr::onnx::impl::ONNXSimplifyShapesPassBase<ONNXSimplifyShapesPass> {
  using Base::Base;
  void runOnOperation() override {
    Counters counters;
    if (failed(runSimplify(getOperation(), maxFoldElements, counters)))
      return signalPassFailure();
    numFolded += counters.folded;
    numShapesFolded += counters.shapes;
    numTypesRefined += counters.refined;
  }
};
} // namespace

LogicalResult xfmr::onnx::simplifyShapes(ModuleOp module, int64_t maxElements) {
  Counters counters;
  return runSimplify(module, maxElements, counters);
}
