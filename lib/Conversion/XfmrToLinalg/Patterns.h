//===- Patterns.h - xfmr to linalg lowering patterns ------------*- C++ -*-===//
//
// Part of xfmr. One populate function per op family; each file lowers its
// ops to destination-passing linalg/tensor/scf on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOLINALG_PATTERNS_H
#define XFMR_LIB_CONVERSION_XFMRTOLINALG_PATTERNS_H

#include "mlir/IR/PatternMatch.h"

namespace xfmr::lowering {

struct AttentionTiling {
  int64_t queryBlock = 16;
  int64_t keyBlock = 64;
};

/// xfmr.rms_norm, xfmr.layer_norm (Norms.cpp).
void populateNormLoweringPatterns(mlir::RewritePatternSet &patterns);
/// xfmr.rope (Rope.cpp).
void populateRopeLoweringPatterns(mlir::RewritePatternSet &patterns);
/// xfmr.linear, xfmr.gated_mlp, xfmr.embedding (MLP.cpp).
void populateMLPLoweringPatterns(mlir::RewritePatternSet &patterns, bool microKernels = true);
/// xfmr.moe (MoE.cpp).
void populateMoELoweringPatterns(mlir::RewritePatternSet &patterns);
/// xfmr.all_reduce (Collectives.cpp).
void populateCollectiveLoweringPatterns(mlir::RewritePatternSet &patterns);
/// xfmr.attention (Attention.cpp); with `fusedMaxHeadDim` > 0, f32 attention
/// with a static value head dim up to it becomes xfmr.attention_buffers.
void populateAttentionLoweringPatterns(mlir::RewritePatternSet &patterns,
                                       AttentionTiling tiling, int64_t fusedMaxHeadDim = 0);
/// xfmr.paged_attention, xfmr.kv_write (PagedAttention.cpp); with
/// `fusedMaxHeadDim` > 0, paged attention over float pools with a static head
/// dim up to it becomes xfmr.paged_attention_buffers.
void populatePagedLoweringPatterns(mlir::RewritePatternSet &patterns,
                                   AttentionTiling tiling, int64_t fusedMaxHeadDim = 0);

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_XFMRTOLINALG_PATTERNS_H
