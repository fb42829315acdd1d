//===- DecodeBytes.h - bytes a decode step reads, for --report ---*- C++ -*-===//
//
// Part of xfmr. Decode is bound by memory bandwidth: a step reads every
// weight once (an embedding table only one row per token) and, per
// sequence, its whole KV cache. xfmr-compile --report prints these sums for
// the precision the weights and the KV pools were compiled to, so that the
// effect of --quant on bytes per token is known before anything runs.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_PIPELINES_DECODEBYTES_H
#define XFMR_PIPELINES_DECODEBYTES_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace xfmr {

struct DecodeBytes {
  /// Every constant of at least the weights file's threshold.
  int64_t weights = 0;
  int64_t weightTensors = 0;
  /// Of those, tables only xfmr.embedding reads (a row per token).
  int64_t embeddingTables = 0;
  int64_t embeddingRow = 0;
  /// Of those, expert weights only xfmr.moe reads, and the bytes of them
  /// one token reads (its top_k of E experts per layer).
  int64_t expertWeights = 0;
  double expertPerToken = 0;
  /// The MoE layers' experts and top_k (the first layer's; 0: no MoE).
  int64_t experts = 0, topK = 0;
  /// The experts' element type when quantized (bf16, i8, f8E4M3FN), else
  /// empty.
  std::string expertType;
  /// Bytes of K and V one token adds to the paged cache over all layers
  /// (0: not a step function).
  int64_t kvPerToken = 0;
  int64_t kvLayers = 0, kvHeads = 0, headDim = 0, kvElementBytes = 0;
  /// The value pools' head size where it differs from the keys' (latent
  /// attention: the compressed latent beside the RoPE key), else 0.
  int64_t valueHeadDim = 0;
  /// Latent attention's pools (xfmr.kv_cache's "latent").
  bool kvLatent = false;
  /// Bytes of the per-token, per-head scales of int8/fp8 pools (in kvPerToken).
  int64_t kvScaleBytes = 0;
  /// The pools' element type as the manifest names it (f32, bf16, int8, fp8-e4m3).
  std::string kvDtype;

  /// Bytes one sequence's decode step reads with `context` cached tokens.
  int64_t perToken(int64_t context) const {
    return weights - embeddingTables + embeddingRow - expertWeights +
           static_cast<int64_t>(expertPerToken) + context * kvPerToken;
  }
};

/// Sums what a decode step of `module` (raised: xfmr ops, onnx.Constant
/// weights) reads; constants under `minBytes` are code, not weights.
DecodeBytes measureDecodeBytes(mlir::ModuleOp module, int64_t minBytes);

/// The --report lines for `bytes`.
void printDecodeBytes(const DecodeBytes &bytes, llvm::raw_ostream &os);

} // namespace xfmr

#endif // XFMR_PIPELINES_DECODEBYTES_H
