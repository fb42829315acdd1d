//===- ApproximateExp.cpp - f32 exp as vectorizable arithmetic ------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace xfmr::cpu {
#define GEN_PASS_DEF_APPROXIMATEEXPPASS
#include "xfmr/Target/CPU/Passes.h.inc"
} // namespace xfmr::cpu

namespace xfmr::cpu {
namespace {

/// math.fma and math.floor as LLVM's intrinsics (one vfmadd / vroundps),
/// which the loop vectorizer widens: convert-math-to-libm, later in the
/// pipeline, would make them calls to fmaf and floorf. The results are the
/// same (both are exact operations).
void useIntrinsics(Operation *root) {
  root->walk([](Operation *op) {
    OpBuilder b(op);
    Value repl;
    if (auto fma = dyn_cast<math::FmaOp>(op))
      repl = LLVM::FMAOp::create(b, op->getLoc(), fma.getA(), fma.getB(), fma.getC());
    else if (auto floor = dyn_cast<math::FloorOp>(op))
      repl = LLVM::FFloorOp::create(b, op->getLoc(), floor.getOperand());
    if (!repl)
      return;
    op->getResult(0).replaceAllUsesWith(repl);
    op->erase();
  });
}

struct ApproximateExpPass : impl::ApproximateExpPassBase<ApproximateExpPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Only exp: the pattern matches f32 (16-bit floats were widened to f32
    // by math-extend-to-supported-types before this pass).
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) { return name == math::ExpOp::getOperationName(); });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    useIntrinsics(getOperation());
  }
};

} // namespace
} // namespace xfmr::cpu
