//===- Raise.cpp - the xfmr-raise pass ------------------------------------===//
//
// Part of xfmr.
//
// Runs the raising patterns in a fixed order (products on dequantized
// int8 weights, fused projections cut into
// one product per piece, norms, rotary embeddings,
// embeddings, MLPs, attention: later patterns see the ops earlier ones
// formed as plain operands; rotary embeddings take their cos/sin cache
// lookups before the embedding pattern could), each over its anchors, and
// erases what became dead in between so a replaced subgraph is never
// matched twice.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_RAISEONNXTOXFMRPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;

template <typename AnchorOp>
void runRaiser(func::FuncOp func, Raiser raiser, IRRewriter &rewriter, RaiseLog &log) {
  SmallVector<Operation *> anchors;
  func.walk([&](AnchorOp op) { anchors.push_back(op); });
  for (Operation *anchor : anchors)
    raiser(anchor, rewriter, log);
  // Replaced subgraphs (and operand adaptors of failed attempts) are dead.
  (void)runRegionDCE(rewriter, func->getRegions());
}

struct RaiseONNXToXfmrPass : impl::RaiseONNXToXfmrPassBase<RaiseONNXToXfmrPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      IRRewriter rewriter(&getContext());
      RaiseLog log;
      runRaiser<onnx::MatMulOp>(func, raiseDequantizedProjection, rewriter, log);
      runRaiser<onnx::MatMulOp>(func, splitFusedProjection, rewriter, log);
      runRaiser<onnx::LayerNormalizationOp>(func, raiseLayerNorm, rewriter, log);
      runRaiser<onnx::ReduceMeanOp>(func, raiseDecomposedLayerNorm, rewriter, log);
      runRaiser<onnx::RMSNormalizationOp>(func, raiseRMSNorm, rewriter, log);
      runRaiser<onnx::SimplifiedLayerNormalizationOp>(func, raiseSimplifiedNorm, rewriter, log);
      runRaiser<onnx::MsSkipSimplifiedLayerNormalizationOp>(func, raiseSimplifiedNorm, rewriter,
                                                            log);
      runRaiser<onnx::ReduceMeanOp>(func, raiseRMSNorm, rewriter, log);
      runRaiser<onnx::ConcatOp>(func, raiseRope, rewriter, log);
      runRaiser<onnx::GatherOp>(func, raiseEmbedding, rewriter, log);
      if (!llvm::is_contained(skip, "moe")) {
        runRaiser<onnx::ReduceSumOp>(func, raiseMoE, rewriter, log);
        runRaiser<onnx::AddOp>(func, raiseMoELoop, rewriter, log);
        runRaiser<onnx::ScatterElementsOp>(func, raiseMoELoop, rewriter, log);
      }
      if (!llvm::is_contained(skip, "gated_mlp"))
        runRaiser<onnx::MatMulOp>(func, raiseGatedMLP, rewriter, log);
      runRaiser<onnx::SoftmaxOp>(func, raiseAttention, rewriter, log);
      runRaiser<onnx::AttentionOp>(func, raiseAttention23, rewriter, log);
      runRaiser<onnx::MsGroupQueryAttentionOp>(func, raiseGroupQueryAttention, rewriter, log);
      runRaiser<AttentionOp>(func, raiseCausalMask, rewriter, log);
      numAttention += log.count("attention");
      numRMSNorm += log.count("rms_norm");
      numLayerNorm += log.count("layer_norm");
      numRope += log.count("rope");
      numGatedMLP += log.count("gated_mlp");
      numEmbedding += log.count("embedding");
      numUnfused += log.numUnfused();
      if (report)
        log.print(llvm::outs(), func.getSymName());
    }
  }
};

} // namespace
} // namespace xfmr
