//===- FuseElementwise.cpp - elementwise fusion that repeats no work ------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_FUSEELEMENTWISEOPSPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

/// Whether every op of the producer's body only converts a value's type.
bool onlyConverts(linalg::GenericOp producer) {
  return llvm::all_of(producer.getBody()->without_terminator(), [](Operation &op) {
    return isa<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp,
               arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, arith::BitcastOp>(op);
  });
}

bool shouldFuse(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  if (!producer || !producer->hasOneUse())
    return false;
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  if (!consumer || consumer.getNumReductionLoops() == 0)
    return true;
  // The fused producer body runs once per consumer iteration: that is once
  // per producer element only if the operand's map uses every loop.
  AffineMap map = consumer.getMatchingIndexingMap(fused);
  if (map.isPermutation())
    return true;
  auto generic = dyn_cast<linalg::GenericOp>(producer);
  return generic && onlyConverts(generic);
}

struct FuseElementwiseOpsPass
    : impl::FuseElementwiseOpsPassBase<FuseElementwiseOpsPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    linalg::ControlFusionFn singleUse = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return producer && producer->hasOneUse();
    };
    // The pattern set of linalg-fuse-elementwise-ops, with shouldFuse for
    // producer-consumer fusion.
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, singleUse);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, ctx);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
    ctx->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, singleUse);
    // Like upstream: a driver that stops before a fixpoint leaves valid IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns),
                                GreedyRewriteConfig().setUseTopDownTraversal());
  }
};

} // namespace
} // namespace xfmr
