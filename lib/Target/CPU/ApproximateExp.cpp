//===- ApproximateExp.cpp - f32 exp as vectorizable arithmetic ------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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

struct ApproximateExpPass : impl::ApproximateExpPassBase<ApproximateExpPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Only exp: the pattern matches f32 (16-bit floats were widened to f32
    // by math-extend-to-supported-types before this pass).
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) { return name == math::ExpOp::getOperationName(); });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace xfmr::cpu
