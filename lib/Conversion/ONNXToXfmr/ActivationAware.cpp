//===- ActivationAware.cpp - AWQ and SmoothQuant scale searches -----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "ActivationAware.h"

#include "Int4Block.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xfmr::quant {

namespace {

/// delta_i = w_i - Q(w_i s_i) / s_i for one column's block of `group`
/// weights `stride` apart (Q: the int4 round trip of the scaled block),
/// written `outStride` apart.
void blockDelta(const float *w, int64_t stride, int64_t group, const float *s, float *delta,
                int64_t outStride) {
  std::vector<float> x(group);
  for (int64_t i = 0; i < group; ++i)
    x[i] = w[i * stride] * s[i];
  Int4Params q = Int4Params::fit(x.data(), 1, group);
  for (int64_t i = 0; i < group; ++i)
    delta[i * outStride] = w[i * stride] - q.roundTrip(x[i]) / s[i];
}

/// The group's error for scales `s` without sampled rows: sum over every
/// column and k of E[x_k^2] delta_k^2.
double groupError(llvm::ArrayRef<ProductWeight> products, int64_t k, int64_t group,
                  const std::vector<float> &s, const std::vector<float> &importance) {
  double error = 0;
  std::vector<float> delta(k);
  for (const ProductWeight &p : products)
    for (int64_t col = 0; col < p.n; ++col) {
      for (int64_t b = 0; b < k; b += group)
        blockDelta(p.w + b * p.n + col, p.n, std::min(group, k - b), s.data() + b,
                   delta.data() + b, 1);
      for (int64_t i = 0; i < k; ++i)
        error += static_cast<double>(importance[i]) * delta[i] * delta[i];
    }
  return error;
}

/// Columns of each product the sampled-row error looks at (evenly spaced):
/// the error is an estimate either way, and this bounds the search's cost.
constexpr int64_t kSearchColumns = 128;

/// sum over sampled rows x and (a subset of) columns n of
/// (x . (W_n - Q(W_n s) / s))^2: the products' output error on the
/// calibration rows AWQ measures. The rows times the weight errors is a
/// [rows, K] x [K, columns] product, looped so the innermost loop runs
/// along the columns (vectorizable without reassociating a sum).
double sampledError(llvm::ArrayRef<ProductWeight> products, int64_t k, int64_t group,
                    const std::vector<float> &s, const ChannelStats &stats) {
  const float *x = stats.samples.data();
  double error = 0;
  std::vector<float> delta, out;
  for (const ProductWeight &p : products) {
    int64_t stride = std::max<int64_t>(1, p.n / kSearchColumns);
    int64_t cols = (p.n + stride - 1) / stride;
    delta.assign(k * cols, 0.0f); // [K, cols]
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t b = 0; b < k; b += group)
        blockDelta(p.w + b * p.n + c * stride, p.n, std::min(group, k - b), s.data() + b,
                   delta.data() + b * cols + c, cols);
    out.assign(cols, 0.0f);
    for (int64_t r = 0; r < stats.sampleRows; ++r) {
      std::fill(out.begin(), out.end(), 0.0f);
      const float *row = x + r * k;
      for (int64_t i = 0; i < k; ++i) {
        float xi = row[i];
        const float *d = delta.data() + i * cols;
        for (int64_t c = 0; c < cols; ++c)
          out[c] += xi * d[c];
      }
      for (float e : out)
        error += static_cast<double>(e) * e;
    }
  }
  return error;
}

} // namespace

std::vector<float> awqScales(llvm::ArrayRef<ProductWeight> products, int64_t k,
                             const ChannelStats &stats, int64_t group) {
  std::vector<float> best(k, 1.0f), s(k);
  double bestError = std::numeric_limits<double>::infinity();
  for (int step = 0; step <= 20; ++step) {
    float a = step / 20.0f;
    float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
      s[i] = std::max(std::pow(stats.meanAbs[i], a), 1e-4f);
      lo = std::min(lo, s[i]);
      hi = std::max(hi, s[i]);
    }
    float norm = std::sqrt(lo * hi);
    for (float &x : s)
      x = std::isfinite(x / norm) && x / norm > 0 ? x / norm : 1.0f;
    double error = stats.sampleRows > 0 ? sampledError(products, k, group, s, stats)
                                         : groupError(products, k, group, s, stats.meanSquare);
    if (error < bestError) {
      bestError = error;
      best = s;
    }
  }
  return best;
}

std::vector<float> smoothQuantScales(llvm::ArrayRef<ProductWeight> products, int64_t k,
                                     const ChannelStats &stats, float alpha) {
  std::vector<float> s(k);
  for (int64_t i = 0; i < k; ++i) {
    float wmax = 0.0f;
    for (const ProductWeight &p : products)
      for (int64_t col = 0; col < p.n; ++col)
        wmax = std::max(wmax, std::fabs(p.w[i * p.n + col]));
    float v = std::pow(stats.maxAbs[i], alpha) / std::pow(std::max(wmax, 1e-5f), 1.0f - alpha);
    s[i] = std::isfinite(v) ? std::max(v, 1e-5f) : 1.0f;
  }
  return s;
}

float bestClip(const float *w, int64_t stride, int64_t group, const float *importance) {
  std::vector<float> x(group);
  for (int64_t i = 0; i < group; ++i)
    x[i] = w[i * stride];
  float best = 1.0f;
  double bestError = std::numeric_limits<double>::infinity();
  for (int step = 0; step <= 10; ++step) {
    float clip = 1.0f - step * 0.05f;
    Int4Params p = Int4Params::fit(x.data(), 1, group, clip, importance);
    double error = p.error(x.data(), 1, group, importance);
    if (error < bestError) {
      bestError = error;
      best = clip;
    }
  }
  return best;
}

} // namespace xfmr::quant
