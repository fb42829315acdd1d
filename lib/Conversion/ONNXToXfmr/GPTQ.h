//===- GPTQ.h - 4-bit weights with second-order error feedback --*- C++ -*-===//
//
// Part of xfmr. `--quant=int4-gptq[-gG]` (Frantar et al., "GPTQ: Accurate
// Post-Training Quantization for Generative Pre-trained Transformers",
// 2023): a product's input channels are quantized one at a time and the
// rounding error of each is spread over the channels not yet quantized,
// weighted by the inverse of H = E[x x^T] (the calibration activations'
// second moment), so that the product's output on those activations moves
// as little as possible. Same grid and storage as round to nearest
// (Int4Block.h, MatMulNBits): only which code each weight gets changes.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_GPTQ_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_GPTQ_H

#include "Int4Block.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::quant {

/// 4-bit weights of a [K, N] product in blocks of `group` along K (the
/// last block partial when K is not a multiple, as MatMulNBits allows):
/// the grid of each column's blocks and each weight's code.
struct Int4Weights {
  int64_t k = 0, n = 0, group = 0;
  std::vector<Int4Params> params; ///< [N, blocks()]
  std::vector<uint8_t> codes;     ///< [K, N], values 0..15

  int64_t blocks() const { return (k + group - 1) / group; }
  /// The rows of K in block `b`.
  int64_t rowsOf(int64_t b) const { return std::min(group, k - b * group); }
};

/// What GPTQ needs of one input's H, computed once for the products that
/// share it (q/k/v, gate/up).
struct GptqHessian {
  int64_t k = 0;
  /// U, [K, K] row-major, upper triangular: the Cholesky factor of H^-1
  /// (H^-1 = U^T U), in quantization order.
  std::vector<float> u;
  /// Quantization order: order[i] is the input channel quantized i-th
  /// (descending H_kk with act-order, else 0..K-1).
  std::vector<int64_t> order;
  /// Channels that no calibration row reached (H_kk = 0): their weights
  /// multiply zeros, so they are quantized as 0.
  std::vector<bool> dead;
  double damping = 0; ///< added to H's diagonal, relative to its mean
};

/// U and the order for `gram` (E[x x^T], [K, K] row-major, symmetric).
/// H is first shrunk toward its diagonal, (1 - shrink) H + shrink diag(H)
/// (a covariance estimated from fewer rows than GPTQ's 128 x 2048 tokens
/// overfits: on SmolLM2's down projections, K = 1536 and 2,048 calibration
/// tokens, plain GPTQ cut the calibration rows' output error 3.5x but
/// held-out text's only 1.2x; shrink 0.4 with act-order, 1.8x), then
/// damped by `damp` x mean(diag H) on the diagonal (GPTQ's percdamp, 0.01),
/// more (x10, up to 4 times) if H is still not positive definite.
/// std::nullopt, with `error`, if it never is.
std::optional<GptqHessian> gptqHessian(const float *gram, int64_t k, bool actOrder, double damp,
                                       double shrink, std::string &error);

/// GPTQ of the row-major [K, N] f32 weight `w` in blocks of `group` along K. Block grids come from the weights as error
/// feedback has changed them when the block's first channel is reached;
/// with act-order (h.order not the identity) they are fixed first, from
/// the original weights ("static groups"), so blocks stay contiguous in K
/// and the MatMulNBits layout holds without a g_idx. Channels are done in
/// batches of 128: inside one, each channel's error updates the batch's
/// remaining channels; the later channels get the batch's errors in one
/// product (OpenBLAS sgemm).
Int4Weights gptqQuantize(const float *w, int64_t k, int64_t n, int64_t group,
                         const GptqHessian &h);

/// Round to nearest in the same form (for comparison and for the products
/// calibration did not reach): Int4Params::fit per block, clipped by
/// bestClip when `importance` ([K]) is given.
Int4Weights roundToNearest(const float *w, int64_t k, int64_t n, int64_t group,
                           const float *importance = nullptr);

/// tr((W - Q)^T H (W - Q)) / tr(W^T H W): the output's squared error on
/// the calibration activations relative to the output's energy
/// (`gram` = E[x x^T], [K, K]).
double relativeOutputError(const float *w, const Int4Weights &q, const float *gram);

} // namespace xfmr::quant

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_GPTQ_H
