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
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// Dropout whose mask is unused is its input at inference: removed first so
/// that attention and MLP patterns see through it. training_mode true (a
/// model exported while its module was training) is warned about, naming
/// the node (onnxruntime would sample a random mask).
bool dropInferenceDropout(Operation *anchor, IRRewriter &rewriter, RaiseLog &) {
  auto dropout = cast<onnx::DropoutOp>(anchor);
  if (!dropout.getMask().use_empty() || dropout.getData().getType() != dropout.getOutput().getType())
    return false;
  Value training = dropout.getTrainingMode();
  std::optional<double> mode =
      isa<NoneType>(training.getType()) ? std::optional<double>(0.0) : scalarValue(training);
  if (!mode || *mode != 0.0)
    dropout.emitWarning("Dropout with training_mode true (or not a constant) runs as identity, "
                        "as in inference: the model was probably exported in training mode");
  rewriter.replaceAllUsesWith(dropout.getOutput(), dropout.getData());
  rewriter.eraseOp(dropout);
  return true;
}

/// Arguments whose every cast agrees on a more static type take that type.
/// A raising that derives a symbolic dimension of an input (the head size
/// onnxruntime-genai >= 0.12 names kv_cache_dim) asserts it at run time and
/// casts the input to the static type; the signature then states it, so the
/// artifact's manifest and the runtime see the dimension too.
void refineArgumentTypes(func::FuncOp func) {
  bool changed = false;
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.hasStaticShape())
      continue;
    RankedTensorType refined;
    bool agree = true;
    for (Operation *user : arg.getUsers()) {
      auto cast = dyn_cast<tensor::CastOp>(user);
      auto to = cast ? dyn_cast<RankedTensorType>(cast.getType()) : RankedTensorType();
      if (!to || to.getRank() != type.getRank() || to.getElementType() != type.getElementType())
        continue;
      if (refined && refined != to)
        agree = false;
      refined = to;
    }
    if (!refined || !agree)
      continue;
    // Only the dims the argument leaves dynamic are taken from the cast.
    SmallVector<int64_t> shape(type.getShape());
    bool narrower = false;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d) && !refined.isDynamicDim(d)) {
        shape[d] = refined.getDimSize(d);
        narrower = true;
      }
    if (!narrower)
      continue;
    arg.setType(type.clone(shape));
    for (Operation *user : llvm::make_early_inc_range(arg.getUsers()))
      if (auto cast = dyn_cast<tensor::CastOp>(user); cast && cast.getType() == arg.getType()) {
        cast.getResult().replaceAllUsesWith(arg);
        cast.erase();
      }
    changed = true;
  }
  if (changed)
    func.setType(FunctionType::get(func.getContext(),
                                   func.front().getArgumentTypes(),
                                   func.getFunctionType().getResults()));
}

struct RaiseONNXToXfmrPass : impl::RaiseONNXToXfmrPassBase<RaiseONNXToXfmrPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      IRRewriter rewriter(&getContext());
      RaiseLog log;
      runRaiser<onnx::DropoutOp>(func, dropInferenceDropout, rewriter, log);
      runRaiser<onnx::MsMatMulNBitsOp>(func, reorderActOrder, rewriter, log);
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
      runRaiser<onnx::ConcatOp>(func, raiseHalvesRope, rewriter, log);
      // Before embeddings: TorchScript gathers gpt-oss's [E, N] expert
      // biases with Gather, which would otherwise read as embedding tables.
      if (!llvm::is_contained(skip, "moe")) {
        runRaiser<onnx::ReduceSumOp>(func, raiseMoE, rewriter, log);
        runRaiser<onnx::AddOp>(func, raiseMoELoop, rewriter, log);
        runRaiser<onnx::ScatterElementsOp>(func, raiseMoELoop, rewriter, log);
        runRaiser<onnx::AddOp>(func, raiseMoEDense, rewriter, log);
      }
      runRaiser<onnx::GatherOp>(func, raiseEmbedding, rewriter, log);
      if (!llvm::is_contained(skip, "gated_mlp"))
        runRaiser<onnx::MatMulOp>(func, raiseGatedMLP, rewriter, log);
      runRaiser<onnx::SoftmaxOp>(func, raiseAttention, rewriter, log);
      runRaiser<onnx::AttentionOp>(func, raiseAttention23, rewriter, log);
      runRaiser<onnx::MsGroupQueryAttentionOp>(func, raiseGroupQueryAttention, rewriter, log);
      runRaiser<AttentionOp>(func, raiseCausalMask, rewriter, log);
      refineArgumentTypes(func);
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
