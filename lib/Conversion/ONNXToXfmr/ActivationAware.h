//===- ActivationAware.h - per-channel scales from activations -*- C++ -*-===//
//
// Part of xfmr. The scale searches of `--quant=int4-awq` and `--quant=w8a8`
// (ActivationAware.cpp). Both return s [K]: the weights are multiplied by
// s_k along K and the products' shared input divided by it, so the f32
// product is unchanged and the quantizer sees weights whose important input
// channels are larger (AWQ) or activations whose outlier channels are
// smaller (SmoothQuant).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_ONNXTOXFMR_ACTIVATIONAWARE_H
#define XFMR_LIB_CONVERSION_ONNXTOXFMR_ACTIVATIONAWARE_H

#include "xfmr/Conversion/Calibration.h"

#include "llvm/ADT/ArrayRef.h"

#include <vector>

namespace xfmr::quant {

/// One product of a group that shares an input: its row-major [K, N] f32
/// weight.
struct ProductWeight {
  const float *w;
  int64_t n;
};

/// AWQ (Lin et al., 2024): s = mean|x|^alpha / sqrt(max * min), alpha
/// from {0, 0.05, ..., 1} chosen to minimise, over the group, the output
/// error on the calibration rows the statistics sampled,
///   sum_rows sum_n (x . (W_n - Q(W_n s) / s))^2
/// (n over up to 128 evenly spaced columns of each product), with Q the
/// int4 round trip in blocks of `group` along K. Without samples, the
/// expectation for uncorrelated channels, sum_k E[x_k^2] sum_n (W_kn -
/// Q(W_kn s_k) / s_k)^2 (a poor guide: channels are correlated). alpha = 0
/// is s = 1, plain round to nearest, so the chosen scales are never worse
/// by the measure.
std::vector<float> awqScales(llvm::ArrayRef<ProductWeight> products, int64_t k,
                             const ChannelStats &stats, int64_t group);

/// SmoothQuant (Xiao et al., 2023): s_k = max|x_k|^alpha / max_n |W_kn|^(1 -
/// alpha) (maxima over the group), at least 1e-5.
std::vector<float> smoothQuantScales(llvm::ArrayRef<ProductWeight> products, int64_t k,
                                     const ChannelStats &stats, float alpha);

/// AWQ's clipping search for one block of `group` weights (stride `stride`
/// apart): the range ratio in {1, 0.95, ..., 0.5} whose int4 round trip
/// has the least sum_i importance_i (w_i - Q(w_i))^2.
float bestClip(const float *w, int64_t stride, int64_t group, const float *importance);

} // namespace xfmr::quant

#endif // XFMR_LIB_CONVERSION_ONNXTOXFMR_ACTIVATIONAWARE_H
