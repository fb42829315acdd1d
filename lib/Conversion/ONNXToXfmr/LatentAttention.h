//===- LatentAttention.h - DeepSeek's latent attention -----------*- C++
//-*-===//
//
// Part of xfmr. Recognises the expanded form of multi-head latent attention
// around an xfmr.attention and builds its absorbed form for the paged KV
// cache (xfmr-paged-kv); see LatentAttention.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_LATENTATTENTION_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_LATENTATTENTION_H

#include "Match.h"

namespace xfmr::raise {

/// An xfmr.attention whose per-head keys and values are expanded from a
/// cached latent: key = [latent · Wk_h ; rope key], value = latent · Wv_h.
struct LatentAttention {
  mlir::Value latent;  ///< [B, 1, S, r], the whole context's latents
  mlir::Value ropeKey; ///< [B, 1, S, dr], the whole context's RoPE keys
  mlir::Value weight;  ///< kv_b_proj [r, H * (dn + dv)], constant
  int64_t rank = 0, noPe = 0, valueDim = 0, ropeDim = 0; ///< r, dn, dv, dr
};

/// `op`'s latent form, when its key and value are built as transformers'
/// DeepseekV3Attention builds them (by either torch exporter).
std::optional<LatentAttention> matchLatentAttention(AttentionOp op);

/// The absorbed query [T, H, r + dr] of `query` [T, H, dn + dr].
mlir::Value absorbQuery(mlir::OpBuilder &b, mlir::Location loc,
                        const LatentAttention &mla, mlir::Value query);
/// Attention over latents [T, H, r] projected to the heads' values [T, H, dv].
mlir::Value expandOutput(mlir::OpBuilder &b, mlir::Location loc,
                         const LatentAttention &mla, mlir::Value out);

} // namespace xfmr::raise

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_LATENTATTENTION_H
