//===- XfmrToLinalg.cpp - the convert-xfmr-to-linalg pass -----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "xfmr/Conversion/LoweringUtils.h"

#include "dialects/xfmr/IR/XfmrOps.h"
#include "xfmr/Conversion/Passes.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_CONVERTXFMRTOLINALGPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

struct ConvertXfmrToLinalgPass
    : impl::ConvertXfmrToLinalgPassBase<ConvertXfmrToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    if (queryBlock < 1 || keyBlock < 1) {
      getOperation().emitError("convert-xfmr-to-linalg: query-block and key-block must be >= 1");
      return signalPassFailure();
    }
    lowering::AttentionTiling tiling{queryBlock, keyBlock};
    RewritePatternSet patterns(ctx);
    lowering::populateNormLoweringPatterns(patterns);
    lowering::populateRopeLoweringPatterns(patterns);
    lowering::populateMLPLoweringPatterns(patterns, microKernels);
    lowering::populateMoELoweringPatterns(patterns);
    lowering::populateCollectiveLoweringPatterns(patterns);
    lowering::populateAttentionLoweringPatterns(patterns, tiling, fusedAttention);
    lowering::populatePagedLoweringPatterns(patterns, tiling, fusedAttention);

    ConversionTarget target(*ctx);
    target.addIllegalDialect<XfmrDialect>();
    target.addLegalOp<AttentionBuffersOp, PagedAttentionBuffersOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    ConversionConfig config;
    config.allowPatternRollback = false;
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns), config)))
      return signalPassFailure();
    lowering::mergeKernelInputs(getOperation());
  }
};

} // namespace
} // namespace xfmr
