//===- MoE.h - shared pieces of the mixture-of-experts raisings -*- C++ -*-===//
//
// Part of xfmr. The exporters write a mixture-of-experts block in several
// forms (batched experts in MoE.cpp, a loop over the experts in
// MoELoop.cpp); the router, the score normalisation, the shared expert and
// building the xfmr.moe op are the same for all of them.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_MOE_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_MOE_H

#include "Match.h"

#include <array>
#include <functional>

namespace xfmr::raise::moe {

/// Looks through Reshapes between rank-2 tensors (re-flattenings of the
/// tokens).
mlir::Value stripFlattening(mlir::Value v);

/// Whether `axes` is the single constant axis `axis` of a rank-`rank` value.
bool isAxis(mlir::Value axes, int64_t axis, int64_t rank);

/// x . W as MatMul(x, W [K, N]) or Gemm(x, W [N, K], transB) without bias:
/// the constant weight and whether it is stored transposed.
struct Projection {
  mlir::Value input, weight;
  bool transposed;
};
std::optional<Projection> projection(mlir::Value v);

/// The raw bytes of a constant operand, if it is not a splat.
std::optional<llvm::ArrayRef<char>> constantBytes(mlir::Value v);

/// Whether `w` is a constant of static shape whose bytes can be re-laid out.
bool hasStaticBytes(mlir::Value w);

/// Rows [r0, r1) of each matrix of the constant [M, R, C] (or [R, C]) `w`,
/// transposed: a new [M, C, r1 - r0] (or [C, r1 - r0]) constant.
mlir::Value transposedRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value w, int64_t r0,
                           int64_t r1, llvm::StringRef name);

/// Columns first, first + step, ... (`count` of them) of the last axis of
/// the constant `w` ([..., C]): a new [..., count] constant.
mlir::Value stridedColumns(mlir::OpBuilder &b, mlir::Location loc, mlir::Value w, int64_t first,
                           int64_t step, int64_t count, llvm::StringRef name);

/// A projection's weight as a [K, N] constant (transposing a Gemm's).
mlir::Value asKN(mlir::OpBuilder &b, mlir::Location loc, const Projection &p,
                 const std::string &name);

/// The [K, N] weights of `ps` stacked into one [E, K, N] constant.
mlir::Value stackedKN(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<Projection> ps,
                      llvm::StringRef name);

/// One expert's MLP down(act(x . Wg) * (x . Wu)) with constant-weight
/// projections (MatMul or Gemm) of the same input: the form every MoE
/// raising matches per expert.
struct GatedExpert {
  Projection gate, up, down;
  Activation act;
};
std::optional<GatedExpert> gatedExpert(mlir::Value y);

/// A shared expert (Qwen-MoE, DeepSeek-V3) added to the routed sum `routed`:
/// Add(routed, [Sigmoid(x . Wsg) *] down(act(x . Wg) * (x . Wu))).
/// DeepSeek-V3 adds it after the routed sum is reshaped back to [B, S, H]
/// (`unflatten`, else null).
struct SharedExpert {
  onnx::AddOp add;
  Projection gate, up, down;
  std::optional<Projection> scale;
  Activation act;
  onnx::ReshapeOp unflatten;
};
std::optional<SharedExpert> sharedExpert(mlir::Value routed, mlir::Value x);

/// What every form agrees on once matched: the tokens [T, H], the router,
/// the experts' activation, k and whether the top-k scores are renormalised;
/// for sigmoid routing (DeepSeek-V3) also the selection bias (a constant
/// [E], or null), the groups and the groups kept; the routed scale.
struct Routing {
  mlir::Value x;
  Projection router;
  Activation act;
  int64_t topK;
  bool normalize;
  bool sigmoid = false;
  mlir::Value selectionBias;
  int64_t groups = 1, topGroups = 1;
  double routedScale = 1.0;
  /// A constant [E] added to the router's logits (gpt-oss), or null.
  mlir::Value routerBias;
};

/// Whether `v` is filled with `value`: a splat constant, ConstantOfShape
/// (whose default fill is 0), either expanded, or (for 0) a constant whose
/// bytes are all 0 (static exports store folded zeros as initializers).
bool isFill(mlir::Value v, double value);

/// The k of `topk` if it is one constant, else -1.
int64_t constantK(onnx::TopKOp topk);

/// The routing of the experts chosen by `topk` and weighted by `scores`,
/// the same in every form: a constant k (at most the experts) of the
/// largest over the last axis, `scores` TopK's values or renormalised
/// (values / ReduceSum(values, -1, keepdims)), and TopK's input a softmax
/// of the tokens times a constant router (MatMul [H, E] or Gemm [E, H]).
/// Or sigmoid routing (DeepSeek-V3): `scores` the sigmoids at the TopK's
/// indices (GatherElements), renormalised or not, and TopK's input those
/// sigmoids plus a constant bias, optionally group-limited. Either may be
/// multiplied by a constant (the routed scale).
/// Fills all but `x` and `act`; on failure `why` says which part differs.
std::optional<Routing> matchRouting(onnx::TopKOp topk, mlir::Value scores, std::string &why);

/// What gpt-oss's experts add: gate, up and down biases ([E, I], [E, I],
/// [E, H], built at the insertion point like the weights) and the clamped
/// SwiGLU's constants.
struct ExpertExtras {
  std::function<std::array<mlir::Value, 3>(mlir::OpBuilder &, mlir::Location,
                                           const std::string &base)>
      biases;
  std::optional<float> swigluLimit;
  float swigluAlpha = 1.0f, upOffset = 0.0f;
};

/// Replaces `combine` (the op whose result is the routed sum, [T, H]) and a
/// shared expert added to it by one xfmr.moe. `expertWeights` builds the
/// [E, H, I] gate, [E, H, I] up and [E, I, H] down constants at the
/// insertion point; `base` names them.
void formMoE(mlir::IRRewriter &rewriter, mlir::Operation *combine, const Routing &routing,
             llvm::function_ref<std::array<mlir::Value, 3>(mlir::OpBuilder &, mlir::Location,
                                                           const std::string &base)>
                 expertWeights,
             const ExpertExtras &extras = {});

/// The experts of a block matched one by one (the loop and the dense
/// forms): expert e's x . Wg, x . Wu and h . Wd products, in expert order.
struct ExpertProjections {
  llvm::SmallVector<Projection> gates, ups, downs;
};

/// Checks that `experts` are constants of the tokens' type with agreeing
/// [H, I] / [I, H] shapes, one per router output, and that the router is a
/// constant [H, E]; then stacks them and replaces `combine` (the routed sum
/// [T, H], of `routing.x`'s type up to a cast) by one xfmr.moe. On failure
/// nothing changes and the reason is returned.
std::optional<std::string> formPerExpertMoE(mlir::IRRewriter &rewriter,
                                            mlir::Operation *combine, const Routing &routing,
                                            const ExpertProjections &experts);

} // namespace xfmr::raise::moe

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_MOE_H
