//===- MatmulBF16.c - f32 activations x bfloat16 weights -----------------===//
//
// Part of xfmr.
//
// The micro-kernel behind xfmr.linear with constant bf16 weights (what
// `xfmr-compile --quant=bf16` writes): C[m, n] = sum_k A[m, k] * W[k, n] in
// f32, each weight widened exactly (bf16 is the top half of an f32).
//
// Decode reads every weight once per token, so the layout is the order a
// step reads them: panels of 16 columns, [N / 16][K][16] bf16 (N rounded up
// with zero columns), one contiguous stream of K * 32 bytes per panel. A
// tile of rows x panels keeps its sums in registers for the whole K:
//   - up to 4 rows over one panel (prefill, batched decode: each weight
//     load serves 4 rows),
//   - 1 to 3 rows over two panels (one row: four independent FMA chains,
//     enough to keep up with the memory stream).
// Every C[m, n] is the same FMA chain over k = 0 .. K-1 from 0 whatever the
// tile, the number of rows or the CPU (the scalar path uses fmaf), so a
// row's results do not depend on the batch it is in.
//
// Plain C with no run-time dependency, built into libxfmr_ukernels.a; the
// AVX2 path is chosen at run time.
//
//===----------------------------------------------------------------------===//

#include "MatmulBF16.h"
#include "CPUCheck.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { kPanel = XFMR_UK_BF16_COLUMNS };

static int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

int64_t xfmr_uk_packed_bf16_bytes(int64_t n, int64_t k) {
  return panelsOf(n) * kPanel * k * (int64_t)sizeof(uint16_t);
}

void xfmr_uk_pack_bf16(const uint16_t *src, int64_t k, int64_t n, uint16_t *w) {
  for (int64_t p = 0; p < panelsOf(n); ++p)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < kPanel; ++j) {
        int64_t col = p * kPanel + j;
        w[(p * k + i) * kPanel + j] = col < n ? src[i * n + col] : 0;
      }
}

static float widen(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/// One row, one panel, any CPU: out[j] = sum_k a[k] * w[k][j], FMA chain.
static void panelScalar(const float *a, int64_t k, const uint16_t *w, float out[kPanel]) {
  for (int j = 0; j < kPanel; ++j) {
    float acc = 0.0f;
    for (int64_t i = 0; i < k; ++i)
      acc = fmaf(a[i], widen(w[i * kPanel + j]), acc);
    out[j] = acc;
  }
}

/// Stores a row's 16 (or `cols` < 16) sums.
static void storeRow(float *c, const float *sums, int64_t cols) {
  memcpy(c, sums, (size_t)cols * sizeof(float));
}

#if defined(__x86_64__)
enum { kPrefetchBytes = 4096 };

/// Eight bf16 as f32.
__attribute__((target("avx2"))) static inline __m256 widen8(const uint16_t *p) {
  __m128i h = _mm_loadu_si128((const __m128i *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/// R rows (1..4) over one panel.
__attribute__((target("avx2,fma"), always_inline)) static inline void
rowsPanel(const float *a, int64_t lda, int R, int64_t k, const uint16_t *w, float *c, int64_t ldc,
          int64_t cols) {
  __m256 acc[4][2];
  for (int r = 0; r < 4; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const uint16_t *wi = w + i * kPanel;
    _mm_prefetch((const char *)wi + kPrefetchBytes, _MM_HINT_T0);
    __m256 w0 = widen8(wi), w1 = widen8(wi + 8);
    for (int r = 0; r < R; ++r) {
      __m256 x = _mm256_broadcast_ss(a + r * lda + i);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float sums[kPanel];
    _mm256_storeu_ps(sums, acc[r][0]);
    _mm256_storeu_ps(sums + 8, acc[r][1]);
    storeRow(c + r * ldc, sums, cols);
  }
}

/// R rows (1..3) over two panels (w0: the first, w1: the next).
__attribute__((target("avx2,fma"), always_inline)) static inline void
rowsTwoPanels(const float *a, int64_t lda, int R, int64_t k, const uint16_t *w0,
              const uint16_t *w1, float *c, int64_t ldc, int64_t cols1) {
  __m256 acc[3][4];
  for (int r = 0; r < 3; ++r)
    acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const uint16_t *p0 = w0 + i * kPanel, *p1 = w1 + i * kPanel;
    _mm_prefetch((const char *)p0 + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch((const char *)p1 + kPrefetchBytes, _MM_HINT_T0);
    __m256 v0 = widen8(p0), v1 = widen8(p0 + 8), v2 = widen8(p1), v3 = widen8(p1 + 8);
    for (int r = 0; r < R; ++r) {
      __m256 x = _mm256_broadcast_ss(a + r * lda + i);
      acc[r][0] = _mm256_fmadd_ps(x, v0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, v1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(x, v2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(x, v3, acc[r][3]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float sums[2 * kPanel];
    _mm256_storeu_ps(sums, acc[r][0]);
    _mm256_storeu_ps(sums + 8, acc[r][1]);
    _mm256_storeu_ps(sums + 16, acc[r][2]);
    _mm256_storeu_ps(sums + 24, acc[r][3]);
    storeRow(c + r * ldc, sums, kPanel + cols1);
  }
}

/// C[:, n0:n1] with AVX2 (n0 a multiple of 16).
__attribute__((target("avx2,fma"))) static void
matmulAVX2(const float *a, int64_t rows, int64_t k, const uint16_t *w, int64_t n0, int64_t n1,
           float *c, int64_t ldc) {
  int64_t m = 0;
  // Groups of 4 rows, one panel at a time.
  for (; m + 4 <= rows; m += 4)
    for (int64_t n = n0; n < n1; n += kPanel) {
      const uint16_t *wp = w + (n / kPanel) * k * kPanel;
      int64_t cols = n1 - n < kPanel ? n1 - n : kPanel;
      rowsPanel(a + m * k, k, 4, k, wp, c + m * ldc + n, ldc, cols);
    }
  // The last 1-3 rows, two panels at a time.
  int64_t left = rows - m;
  if (!left)
    return;
  int64_t n = n0;
  for (; n + kPanel < n1; n += 2 * kPanel) {
    const uint16_t *wp = w + (n / kPanel) * k * kPanel;
    int64_t cols1 = n1 - n - kPanel < kPanel ? n1 - n - kPanel : kPanel;
    if (left == 1)
      rowsTwoPanels(a + m * k, k, 1, k, wp, wp + k * kPanel, c + m * ldc + n, ldc, cols1);
    else if (left == 2)
      rowsTwoPanels(a + m * k, k, 2, k, wp, wp + k * kPanel, c + m * ldc + n, ldc, cols1);
    else
      rowsTwoPanels(a + m * k, k, 3, k, wp, wp + k * kPanel, c + m * ldc + n, ldc, cols1);
  }
  if (n < n1) {
    const uint16_t *wp = w + (n / kPanel) * k * kPanel;
    if (left == 1)
      rowsPanel(a + m * k, k, 1, k, wp, c + m * ldc + n, ldc, n1 - n);
    else if (left == 2)
      rowsPanel(a + m * k, k, 2, k, wp, c + m * ldc + n, ldc, n1 - n);
    else
      rowsPanel(a + m * k, k, 3, k, wp, c + m * ldc + n, ldc, n1 - n);
  }
}
#endif

void xfmr_uk_matmul_f32bf16(const float *a, int64_t rows, int64_t k, const uint16_t *w,
                            int64_t n0, int64_t n1, float *c, int64_t ldc) {
#if defined(__x86_64__)
  if (xfmr_uk_has_avx2()) {
    matmulAVX2(a, rows, k, w, n0, n1, c, ldc);
    return;
  }
#endif
  for (int64_t n = n0; n < n1; n += kPanel) {
    const uint16_t *wp = w + (n / kPanel) * k * kPanel;
    int64_t cols = n1 - n < kPanel ? n1 - n : kPanel;
    for (int64_t m = 0; m < rows; ++m) {
      float sums[kPanel];
      panelScalar(a + m * k, k, wp, sums);
      storeRow(c + m * ldc + n, sums, cols);
    }
  }
}
