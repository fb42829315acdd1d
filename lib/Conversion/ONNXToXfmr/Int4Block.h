//===- Int4Block.h - one block of 4-bit weights (round to nearest) -*- C++ -*-===//
//
// Part of xfmr. The arithmetic of `--quant=int4-gG` for one block of G
// weights along K, shared by the quantizer (QuantizeWeights.cpp) and the
// activation-aware searches that try candidate scales (ActivationAware.cpp).
// Two grids q * scale + lo, q in [0, 15], are tried per block:
//
//   ends:  lo = r * min x, hi = r * max x, scale = (hi - lo) / 15
//   zero:  lo' = r * min(0, min x), hi' = r * max(0, max x),
//          scale = (hi' - lo') / 15, lo = -clamp(round(-lo' / scale), 0, 15) * scale
//   q = clamp(round((x - lo) / scale), 0, 15)
//
// in f32 with ties to even; r = 1 is plain round to nearest, r < 1 clips
// the block's range (AWQ's clipping search). "zero" holds 0 exactly (the
// integer zero point of onnxruntime's quantizer, and what this did alone
// until issue 42); "ends" puts levels on the block's extremes, as GGUF's
// Q4_1 (d * q + m), and is taken where its squared error is at most a
// quarter of "zero"'s: a block that already lies on a 4-bit grid. SmolLM2's
// weights come from a Q4_1 file (blocks of 32): with "zero" alone g32
// moved nearly every weight by up to scale / 2 (+31% perplexity); with
// this every one comes back exactly. Plain least squared error per block
// is not the right choice: on SmolLM2's g128 down projections it takes
// "ends" for 60% of the blocks and measures +10% against "zero"'s +5.7%.
// MatMulNBits stores the offset as a float zero point zp = -lo / scale:
// (q - zp) * scale.
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
  float scale, lo;

  /// The "ends" grid for values in [lo, hi] x clip.
  static Int4Params ends(float lo, float hi, float clip = 1.0f) {
    lo *= clip;
    hi *= clip;
    if (!std::isfinite(lo) || !std::isfinite(hi))
      return {1.0f, 0.0f};
    return {usableScale((hi - lo) / 15.0f), lo};
  }
  /// The "zero" grid for values in [lo, hi] x clip.
  static Int4Params zero(float lo, float hi, float clip = 1.0f) {
    float scale = usableScale((std::max(0.0f, hi) - std::min(0.0f, lo)) * clip / 15.0f);
    float zp = std::clamp(std::nearbyint(-std::min(0.0f, lo) * clip / scale), 0.0f, 15.0f);
    if (!std::isfinite(zp))
      zp = 0.0f;
    return {scale, -zp * scale};
  }
  /// The grid for the `group` values `x[i * stride]`, range times `clip`:
  /// "ends" where its squared error (weighted by `importance`, if given) is
  /// at most a quarter of "zero"'s (the block already lies on a 4-bit grid
  /// of its extremes, or nearly), else "zero".
  static Int4Params fit(const float *x, int64_t stride, int64_t group, float clip = 1.0f,
                        const float *importance = nullptr) {
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < group; ++i) {
      lo = std::min(lo, x[i * stride]);
      hi = std::max(hi, x[i * stride]);
    }
    Int4Params a = ends(lo, hi, clip), b = zero(lo, hi, clip);
    return 4.0 * a.error(x, stride, group, importance) <= b.error(x, stride, group, importance) ? a
                                                                                                : b;
  }
  /// sum_i importance_i (x_i - roundTrip(x_i))^2 (importance 1 if null).
  double error(const float *x, int64_t stride, int64_t group, const float *importance) const {
    double e = 0;
    for (int64_t i = 0; i < group; ++i) {
      double d = static_cast<double>(x[i * stride]) - roundTrip(x[i * stride]);
      e += (importance ? importance[i] : 1.0) * d * d;
    }
    return e;
  }
  /// The stored 4-bit value of `x`.
  float code(float x) const {
    float v = std::clamp(std::nearbyint((x - lo) / scale), 0.0f, 15.0f);
    return std::isfinite(v) ? v : 0.0f;
  }
  /// MatMulNBits' zero point: (q - zp) * scale = q * scale + lo.
  float zp() const { return -lo / scale; }
  /// What the kernel computes with for `x`.
  float roundTrip(float x) const { return code(x) * scale + lo; }
};

} // namespace xfmr::quant

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_INT4BLOCK_H
