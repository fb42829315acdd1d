//===- Int4Block.h - one block of 4-bit weights (round to nearest) -*- C++ -*-===//
//
// Part of xfmr. The arithmetic of `--quant=int4-gG` for one block of G
// weights along K, shared by the quantizer (QuantizeWeights.cpp) and the
// activation-aware searches that try candidate scales (ActivationAware.cpp):
//
//   lo = r * min(0, min x), hi = r * max(0, max x), scale = (hi - lo) / 15
//   zp = clamp(round(-lo / scale), 0, 15), q = clamp(round(x / scale) + zp, 0, 15)
//
// in f32 with ties to even; r = 1 is plain round to nearest, r < 1 clips
// the block's range (AWQ's clipping search).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_INT4BLOCK_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_INT4BLOCK_H

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace xfmr::quant {

/// `scale`, or 1 where it is 0 (an all-zero block: every value quantizes to
/// 0) or not finite (a non-finite weight).
inline float usableScale(float scale) {
  return scale > 0.0f && std::isfinite(scale) ? scale : 1.0f;
}

struct Int4Params {
  float scale, zp;

  /// The block's scale and zero point for values in [lo, hi] x clip.
  static Int4Params of(float lo, float hi, float clip = 1.0f) {
    float scale = usableScale((std::max(0.0f, hi) - std::min(0.0f, lo)) * clip / 15.0f);
    float zp = std::clamp(std::nearbyint(-std::min(0.0f, lo) * clip / scale), 0.0f, 15.0f);
    return {scale, zp};
  }
  /// The stored 4-bit value of `x`.
  float code(float x) const {
    float v = std::clamp(std::nearbyint(x / scale) + zp, 0.0f, 15.0f);
    return std::isfinite(v) ? v : zp;
  }
  /// What the kernel computes with for `x`.
  float roundTrip(float x) const { return (code(x) - zp) * scale; }
};

} // namespace xfmr::quant

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_INT4BLOCK_H
