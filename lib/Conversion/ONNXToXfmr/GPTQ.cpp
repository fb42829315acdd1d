//===- GPTQ.cpp - 4-bit weights with second-order error feedback ----------===//
//
// Part of xfmr. See GPTQ.h. The linear algebra is LAPACK's (dpotrf, dpotri)
// and BLAS's (sgemm), from OpenBLAS, which the artifacts link already.
//
//===----------------------------------------------------------------------===//

#include "GPTQ.h"

#include "ActivationAware.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>

extern "C" {
// LAPACK (column-major; OpenBLAS). A symmetric matrix is its own transpose,
// so row-major H goes in as it is.
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info);
}

namespace xfmr::quant {

namespace {

/// Channels per batch of lazy updates (GPTQ's blocksize).
constexpr int64_t kBatch = 128;

/// In place: the column-major upper Cholesky factor R of `a` (a = R^T R).
bool choleskyUpper(std::vector<double> &a, int n) {
  int info = 0;
  dpotrf_("U", &n, a.data(), &n, &info);
  return info == 0;
}

/// U (row-major, upper) with H^-1 = U^T U for the damped, reordered H in
/// `a` (destroyed); false if H is not positive definite.
bool inverseFactor(std::vector<double> &a, int n, std::vector<float> &u) {
  int info = 0;
  if (!choleskyUpper(a, n))
    return false;
  dpotri_("U", &n, a.data(), &n, &info); // H^-1, upper triangle (all dpotrf "U" reads)
  if (info != 0)
    return false;
  if (!choleskyUpper(a, n))
    return false;
  // Column-major upper R(i, j), i <= j, is a[i + j n]: row-major u[i][j].
  u.assign(static_cast<size_t>(n) * n, 0.0f);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= j; ++i)
      u[static_cast<size_t>(i) * n + j] = static_cast<float>(a[i + static_cast<size_t>(j) * n]);
  return true;
}

/// The grid of each column's block `b` of `w` ([K, N], rows = channels in
/// order).
void fitBlock(const float *w, int64_t n, int64_t b, Int4Weights &q) {
  int64_t blocks = q.blocks();
  for (int64_t col = 0; col < n; ++col)
    q.params[col * blocks + b] = Int4Params::fit(w + b * q.group * n + col, n, q.rowsOf(b));
}

} // namespace

std::optional<GptqHessian> gptqHessian(const float *gram, int64_t k, bool actOrder, double damp,
                                       double shrink, std::string &error) {
  GptqHessian h;
  h.k = k;
  h.dead.assign(k, false);
  double mean = 0;
  for (int64_t i = 0; i < k; ++i) {
    h.dead[i] = !(gram[i * k + i] > 0.0f);
    mean += h.dead[i] ? 1.0 : gram[i * k + i];
  }
  mean /= static_cast<double>(k);
  h.order.resize(k);
  std::iota(h.order.begin(), h.order.end(), 0);
  if (actOrder)
    std::stable_sort(h.order.begin(), h.order.end(), [&](int64_t a, int64_t b) {
      return gram[a * k + a] > gram[b * k + b];
    });
  int n = static_cast<int>(k);
  for (int attempt = 0; attempt < 5; ++attempt, damp *= 10) {
    std::vector<double> a(static_cast<size_t>(k) * k);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        int64_t r = h.order[i], c = h.order[j];
        double v = h.dead[r] || h.dead[c] ? 0.0 : gram[r * k + c];
        if (i == j)
          v = (h.dead[r] ? 1.0 : v) + damp * mean;
        else
          v *= 1.0 - shrink;
        a[i * k + j] = v;
      }
    if (inverseFactor(a, n, h.u)) {
      h.damping = damp;
      return h;
    }
  }
  error = "the calibration activations' second moment (" + std::to_string(k) + " x " +
          std::to_string(k) + ") is not positive definite even damped by " +
          std::to_string(damp / 10) + " x its mean diagonal";
  return std::nullopt;
}

Int4Weights gptqQuantize(const float *w0, int64_t k, int64_t n, int64_t group,
                         const GptqHessian &h) {
  Int4Weights q{k, n, group};
  int64_t blocks = q.blocks();
  q.params.resize(n * blocks);
  q.codes.assign(k * n, 0);
  std::vector<float> w(w0, w0 + k * n);
  for (int64_t r = 0; r < k; ++r)
    if (h.dead[r])
      std::fill_n(&w[r * n], n, 0.0f);
  bool reordered = !std::is_sorted(h.order.begin(), h.order.end());
  if (reordered) // static groups: grids from the weights before any feedback
    for (int64_t b = 0; b < blocks; ++b)
      fitBlock(w.data(), n, b, q);
  // Work on the rows in quantization order: wp[i] is channel order[i].
  std::vector<float> wp(k * n), err(kBatch * n);
  for (int64_t i = 0; i < k; ++i)
    std::copy_n(&w[h.order[i] * n], n, &wp[i * n]);
  for (int64_t i1 = 0; i1 < k; i1 += kBatch) {
    int64_t i2 = std::min(k, i1 + kBatch);
    for (int64_t i = i1; i < i2; ++i) {
      int64_t channel = h.order[i], b = channel / group;
      // The block's grids from its current (fed-back) weights: unreordered,
      // wp's rows are the channels in order.
      if (!reordered && channel % group == 0)
        fitBlock(wp.data(), n, b, q);
      float d = h.u[i * k + i];
      float *row = &wp[i * n], *e = &err[(i - i1) * n];
      for (int64_t col = 0; col < n; ++col) {
        const Int4Params &p = q.params[col * blocks + b];
        float code = p.code(row[col]);
        q.codes[channel * n + col] = static_cast<uint8_t>(code);
        e[col] = (row[col] - (code * p.scale + p.lo)) / d;
      }
      for (int64_t j = i + 1; j < i2; ++j) {
        float f = h.u[i * k + j];
        float *target = &wp[j * n];
        for (int64_t col = 0; col < n; ++col)
          target[col] -= f * e[col];
      }
    }
    if (i2 < k) // wp[i2:] -= U[i1:i2, i2:]^T err
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(k - i2),
                  static_cast<int>(n), static_cast<int>(i2 - i1), -1.0f, &h.u[i1 * k + i2],
                  static_cast<int>(k), err.data(), static_cast<int>(n), 1.0f, &wp[i2 * n],
                  static_cast<int>(n));
  }
  return q;
}

Int4Weights roundToNearest(const float *w, int64_t k, int64_t n, int64_t group,
                           const float *importance) {
  Int4Weights q{k, n, group};
  int64_t blocks = q.blocks();
  q.params.resize(n * blocks);
  q.codes.assign(k * n, 0);
  for (int64_t col = 0; col < n; ++col)
    for (int64_t b = 0; b < blocks; ++b) {
      const float *block = w + b * group * n + col;
      const float *imp = importance ? importance + b * group : nullptr;
      int64_t rows = q.rowsOf(b);
      float clip = imp ? bestClip(block, n, rows, imp) : 1.0f;
      Int4Params p = Int4Params::fit(block, n, rows, clip, imp);
      q.params[col * blocks + b] = p;
      for (int64_t i = 0; i < rows; ++i)
        q.codes[(b * group + i) * n + col] = static_cast<uint8_t>(p.code(block[i * n]));
    }
  return q;
}

double relativeOutputError(const float *w, const Int4Weights &q, const float *gram) {
  int64_t k = q.k, n = q.n, blocks = q.blocks();
  std::vector<float> delta(k * n);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t col = 0; col < n; ++col) {
      const Int4Params &p = q.params[col * blocks + r / q.group];
      delta[r * n + col] = w[r * n + col] - (q.codes[r * n + col] * p.scale + p.lo);
    }
  // tr(D^T H D) = sum (H D) .* D, and the same for W.
  std::vector<float> hd(k * n), hw(k * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(k), static_cast<int>(n),
              static_cast<int>(k), 1.0f, gram, static_cast<int>(k), delta.data(),
              static_cast<int>(n), 0.0f, hd.data(), static_cast<int>(n));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(k), static_cast<int>(n),
              static_cast<int>(k), 1.0f, gram, static_cast<int>(k), w, static_cast<int>(n), 0.0f,
              hw.data(), static_cast<int>(n));
  double num = 0, den = 0;
  for (int64_t i = 0; i < k * n; ++i) {
    num += static_cast<double>(hd[i]) * delta[i];
    den += static_cast<double>(hw[i]) * w[i];
  }
  return den > 0 ? num / den : 0.0;
}

} // namespace xfmr::quant
