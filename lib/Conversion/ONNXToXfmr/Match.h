//===- Match.h - helpers for raising onnx subgraphs to xfmr ops -*- C++ -*-===//
//
// Part of xfmr. Small predicates and builders shared by the raising
// patterns, and the log that `xfmr-raise{report}` prints.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_MATCH_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_MATCH_H

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/xfmr/IR/XfmrOps.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/MapVector.h"

#include <optional>
#include <string>

namespace xfmr::raise {

/// What a run of the raising pass formed and what it left, for `report`.
class RaiseLog {
public:
  void formed(llvm::StringRef kind) { ++counts[kind]; }
  /// A candidate subgraph (found at `anchor`) that was left as onnx ops.
  void unfused(mlir::Operation *anchor, llvm::StringRef kind,
               const llvm::Twine &reason);
  int64_t count(llvm::StringRef kind) const {
    auto it = counts.find(kind);
    return it == counts.end() ? 0 : it->second;
  }
  size_t numUnfused() const { return left.size(); }
  void print(llvm::raw_ostream &os, llvm::StringRef function) const;

private:
  llvm::MapVector<llvm::StringRef, int64_t> counts;
  std::vector<std::string> left;
};

/// Every raising entry point: try to form one op from the subgraph found at
/// `anchor`; on success the replaced ops are left dead for the caller to
/// erase. Returns whether an op was formed.
using Raiser = bool (*)(mlir::Operation *anchor, mlir::IRRewriter &rewriter,
                        RaiseLog &log);

bool splitFusedProjection(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// MatMulNBits with g_idx (GPTQ act-order) -> the same product over rows
/// sorted by group, A's columns gathered alike (ActOrder.cpp).
bool reorderActOrder(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseDequantizedProjection(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseEmbedding(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseLayerNorm(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseDecomposedLayerNorm(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseRMSNorm(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseRope(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// gpt-oss's rotary form: the two halves rotated with half-width tables.
bool raiseHalvesRope(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseGatedMLP(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// Hugging Face's batched-experts MoE block -> xfmr.moe (MoE.cpp).
bool raiseMoE(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// A loop over the experts (transformers 4.x, unrolled) -> xfmr.moe
/// (MoELoop.cpp).
bool raiseMoELoop(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// Every expert on every token times a routing coefficient or zero, summed
/// (the dense form) -> xfmr.moe (MoEDense.cpp).
bool raiseMoEDense(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseAttention(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
bool raiseAttention23(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// onnxruntime's SimplifiedLayerNormalization and com.microsoft
/// SkipSimplifiedLayerNormalization -> (add +) xfmr.rms_norm (Norms.cpp).
bool raiseSimplifiedNorm(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// com.microsoft GroupQueryAttention -> rope + concat + xfmr.attention
/// (GroupQueryAttention.cpp).
bool raiseGroupQueryAttention(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);
/// xfmr.attention with Hugging Face's causal + padding mask: causal = true and
/// a [B, 1, 1, L] padding bias (CausalMask.cpp).
bool raiseCausalMask(mlir::Operation *, mlir::IRRewriter &, RaiseLog &);

/// A keep mask that is a window of a constant lower-triangular bool buffer
/// (GPT-2's `bias`): returns the window's first row r0, so that
/// keep[i, j] = j <= r0 + i, to be checked against Skv - Sq at run time; a
/// null Value when the mask is a constant already equal to the causal
/// pattern for the static lengths sq, skv (CausalMask.cpp).
std::optional<mlir::Value> causalKeepOffset(mlir::Value keep, int64_t sq, int64_t skv);
/// Asserts at run time that the row start equals Skv - Sq of `op`.
void assertCausalOffset(mlir::OpBuilder &b, mlir::Location loc, AttentionOp op,
                        mlir::Value rowStart, const llvm::Twine &what);

//===----------------------------------------------------------------------===//
// Predicates
//===----------------------------------------------------------------------===//

template <typename OpTy>
OpTy def(mlir::Value v) {
  return v ? v.getDefiningOp<OpTy>() : OpTy();
}

/// The only user of `v`, if it has exactly one use.
mlir::Operation *soleUser(mlir::Value v);
template <typename OpTy>
OpTy soleUserOf(mlir::Value v) {
  return llvm::dyn_cast_or_null<OpTy>(soleUser(v));
}

/// The operand of a binary op that is not `v` (null if `v` is not one).
mlir::Value otherOperand(mlir::Operation *binary, mlir::Value v);

/// The largest fill value that masks a softmax score. Softmax computes
/// exp(s - max) in f32 (every xfmr attention kernel does, also for 16-bit
/// inputs, and so does onnxruntime), and exp(x) is exactly 0 in f32 for
/// x < -103.98 (below half the smallest denormal, 2^-149). A score replaced by
/// a fill f, or with f added, therefore contributes exactly 0 whenever the
/// row keeps a score above f + 104: for f = -1e4 (GPT-2's `masked_bias`, and
/// many ONNX files) any kept score above -9896, which attention rows meet
/// (q·k·scale of that size would saturate the softmax of any trained model).
/// The op skips such positions, so both agree bit for bit on every row that
/// keeps a key; rows that keep none are padding (see the causal mask notes).
constexpr double kMaskingFill = -1e4;
inline bool isMaskingFill(double fill) { return fill <= kMaskingFill; }

/// The value of a constant scalar expression (a splat constant, or
/// Add/Sub/Mul/Div/Pow/Sqrt/Cast/Reshape of such), if it is one.
std::optional<double> scalarValue(mlir::Value v);
/// `v` through Casts.
mlir::Value stripCasts(mlir::Value v);
bool isScalar(mlir::Value v, double expected);

/// The integers of a constant int tensor (inline or an i64 resource blob).
std::optional<llvm::SmallVector<int64_t>> constantInts(mlir::Value v);
/// The values of a constant f32 tensor (inline or resource blob).
std::optional<llvm::SmallVector<float>> floatValues(mlir::Value v);

int64_t rankOf(mlir::Value v);
int64_t dimOf(mlir::Value v, int64_t dim); ///< negative dims count from the end
mlir::Type elementTypeOf(mlir::Value v);
bool isConstant(mlir::Value v);

/// Whether `axes` (a constant operand, or none meaning all) is exactly the
/// last axis of a rank-`rank` tensor.
bool isLastAxisOnly(mlir::Value axes, int64_t rank);
bool isLastAxis(int64_t axis, int64_t rank);

/// Human-readable name of the node an op came from.
std::string nodeName(mlir::Operation *op);

//===----------------------------------------------------------------------===//
// Symbolic dimensions
//===----------------------------------------------------------------------===//

/// The static value the graph gives dim `i` of `v` where shape inference
/// leaves it dynamic: the dim comes (through ops that pass dims on) from the
/// one unknown entry of a Reshape that splits its input's static last axis
/// N into [..., x, d...] with static d's, so x = N / prod(d). A dynamo export
/// without value_info writes `view(B, S, -1, head_size)` with B and S read
/// from another input than the one the hidden states came from; a model
/// whose leading entries are not the input's leading dims gets another x at
/// run time, which withStaticDims' assertion reports.
std::optional<int64_t> splitDim(mlir::Value v, int64_t i);
/// `v` with the dynamic dims of `shape`'s static ones asserted at run time
/// (cf.assert naming `what` and the dim) and cast to `shape`.
mlir::Value withStaticDims(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                           llvm::ArrayRef<int64_t> shape, const std::string &what);
/// The same with each assertion's message from `message(axis, want)`.
mlir::Value withStaticDims(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                           llvm::ArrayRef<int64_t> shape,
                           llvm::function_ref<std::string(int64_t, int64_t)> message);
/// The shape of `v` with its dynamic dims among `dims` replaced by their
/// splitDim values where there is one.
llvm::SmallVector<int64_t> splitShape(mlir::Value v, llvm::ArrayRef<int64_t> dims);
/// Same element type and rank, dims equal where both are static.
bool sameUpToDynamic(mlir::Type a, mlir::Type b);
/// `v` as `type` (a tensor.cast where they differ).
mlir::Value castTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Type type);
/// Where dynamic dim `i` of `v` comes from, for a report: "input
/// 'past_key_values.0.key' dim 1 ('kv_heads')", "dim 2 of node 'x'
/// (Reshape)".
std::string describeDim(mlir::Value v, int64_t i);

/// Returns g and the activation if `v` is act(g): SiLU, GELU (erf or
/// tanh, as Gelu or spelled out) or ReLU (MLP.cpp).
std::optional<std::pair<mlir::Value, Activation>> matchActivation(mlir::Value v);

/// The raw bytes of a constant (dense or resource blob), if not a splat.
std::optional<llvm::ArrayRef<char>> rawBytes(mlir::ElementsAttr attr);

/// The values of `v` if it is a constant f32 matrix with a static shape
/// (dense and not a splat, or a resource blob).
std::optional<llvm::ArrayRef<float>> constantMatrix(mlir::Value v);

/// The f32 [K, N] constant weight of `mm` (A f32 too), or nothing: the
/// products xfmr-quantize-weights rewrites.
std::optional<llvm::ArrayRef<float>> constantWeight(onnx::MatMulOp mm);

/// The ONNX node name of `op` and the resource name of its weight `w`.
llvm::SmallVector<std::string> namesOf(mlir::Operation *op, mlir::Value w);

//===----------------------------------------------------------------------===//
// Builders of onnx ops (for operand adaptation)
//===----------------------------------------------------------------------===//

/// An onnx.Constant holding `value` (dense or a resource blob).
mlir::Value makeConstant(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::ElementsAttr value);
/// An onnx.Constant of `shape` x `element` holding a copy of `bytes`
/// (row-major) as a resource blob named `name`, 64-byte aligned.
mlir::Value blobConstant(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<int64_t> shape,
                         mlir::Type element, llvm::ArrayRef<char> bytes, llvm::StringRef name);
mlir::Value i64Constant(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<int64_t> values);
/// An ONNX attention's `softcap` (onnxruntime's GroupQueryAttention, ONNX
/// Attention-23: applied when > 0, before the mask) as xfmr.attention's; null
/// when it caps nothing.
mlir::FloatAttr positiveSoftcap(mlir::OpBuilder &b, std::optional<llvm::APFloat> cap);
mlir::Value floatConstant(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::RankedTensorType type, double value);
mlir::Value transpose(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                      llvm::ArrayRef<int64_t> perm);
mlir::Value unsqueeze(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                      int64_t axis);
mlir::Value squeeze(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                    int64_t axis);
/// Elements [from, from + n) of the last axis of `x`.
mlir::Value sliceLast(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, int64_t from,
                      int64_t n);

} // namespace xfmr::raise

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_MATCH_H
