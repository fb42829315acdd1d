//===- MatmulNarrow.c - f32 activations x bf16 / fp8 weights -------------===//
//
// Part of xfmr.
//
// The micro-kernels behind xfmr.linear with constant narrow weights (what
// `xfmr-compile --quant=bf16` and `--quant=fp8-e4m3` write, and int8
// weights behind a DequantizeLinear in onnxruntime's QDQ models):
// C[m, n] = sum_k A[m, k] * W[k, n] in f32, each weight widened exactly
// inside the loop:
//   bf16         the top half of an f32;
//   fp8 e4m3fn   sign, 4 exponent bits (bias 7), 3 mantissa bits, no
//                infinities: normal values by moving the fields into an
//                f32 and rebiasing the exponent, subnormals (exponent 0) as
//                mantissa * 2^-9 (the scalar path; the AVX2 path goes
//                through f16, see widen16); NaN (S.1111.111) is not
//                expected (the quantizer saturates at +-448);
//   int8         the integer (every int8 is an exact f32).
// (per-channel scales are applied to the product by the caller.)
//
// Decode reads every weight once per token, so the layout is the order a
// step reads them: panels of 16 columns, [N / 16][K][16] elements (N rounded
// up with zero columns), one contiguous stream of K * 16 elements per
// panel (bf16 stores columns j and j + 8 side by side, see slotOf). A
// tile of rows x panels keeps its sums in registers for the whole K:
//   - up to 4 rows over one panel (prefill, batched decode: each weight
//     load serves 4 rows),
//   - one row over four panels (eight independent FMA chains, so that a
//     decode step keeps up with the memory stream), 1 to 3 rows over two.
//   - with AVX-512, twelve rows over one panel (one zmm accumulator per row).
// Every C[m, n] is the same FMA chain over k = 0 .. K-1 from 0 whatever the
// tile, the number of rows or the CPU (the scalar path uses fmaf), so a
// row's results do not depend on the batch it is in.
//
// Plain C with no run-time dependency, built into libxfmr_ukernels.a; the
// AVX2 path is chosen at run time.
//
//===----------------------------------------------------------------------===//

#include "MatmulNarrow.h"
#include "CPUCheck.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { kPanel = XFMR_UK_NARROW_COLUMNS };

static int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

/// Element formats.
enum Format { kBF16, kFP8, kI8 };

static inline int64_t bytesOf(enum Format fmt) { return fmt == kBF16 ? 2 : 1; }

int64_t xfmr_uk_packed_narrow_bytes(int64_t n, int64_t k, int64_t elemBytes) {
  return panelsOf(n) * kPanel * k * elemBytes;
}

/// Where column j of a panel row is stored. bf16 pairs column j with column
/// j + 8 in one 32-bit word (j low, j + 8 high): a word shifted left by 16
/// is column j's f32, the word with its low half cleared column j + 8's, so
/// eight columns widen with one shift or one and, no shuffle.
static int64_t slotOf(int64_t j, int64_t elemBytes) {
  if (elemBytes != 2)
    return j;
  return j < kPanel / 2 ? 2 * j : 2 * (j - kPanel / 2) + 1;
}

void xfmr_uk_pack_narrow(const uint8_t *src, int64_t k, int64_t n, int64_t elemBytes,
                         uint8_t *w) {
  for (int64_t p = 0; p < panelsOf(n); ++p)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < kPanel; ++j) {
        int64_t col = p * kPanel + j;
        uint8_t *out = w + ((p * k + i) * kPanel + slotOf(j, elemBytes)) * elemBytes;
        if (col < n)
          memcpy(out, src + (i * n + col) * elemBytes, (size_t)elemBytes);
        else
          memset(out, 0, (size_t)elemBytes);
      }
}

static float fromBits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/// Element `i` of a panel row, widened exactly.
static float widen(const uint8_t *w, int64_t i, enum Format fmt) {
  if (fmt == kBF16) {
    uint16_t h;
    memcpy(&h, w + 2 * i, 2);
    return fromBits((uint32_t)h << 16);
  }
  if (fmt == kI8)
    return (float)(int8_t)w[i];
  uint32_t b = w[i], mag = b & 0x7F;
  float v = mag < 8 ? (float)mag * 0x1p-9f : fromBits((mag << 20) + (120u << 23));
  return b & 0x80 ? -v : v;
}

/// One row, one panel, any CPU: out[j] = sum_k a[k] * w[k][j], FMA chain.
static void panelScalar(const float *a, int64_t k, const uint8_t *w, enum Format fmt,
                        float out[kPanel]) {
  for (int j = 0; j < kPanel; ++j) {
    float acc = 0.0f;
    for (int64_t i = 0; i < k; ++i)
      acc = fmaf(a[i], widen(w, i * kPanel + slotOf(j, bytesOf(fmt)), fmt), acc);
    out[j] = acc;
  }
}

/// Stores a row's 16 (or `cols` < 16) sums.
static void storeRow(float *c, const float *sums, int64_t cols) {
  memcpy(c, sums, (size_t)cols * sizeof(float));
}

#if defined(__x86_64__)
enum { kPrefetchBytes = 4096 };

/// Sixteen elements (from element `i` of `p`) as f32: lo gets 0..7, hi
/// 8..15. fp8 goes through f16 (F16C): the byte sign-extended to 16 bits
/// and shifted left by 7 puts its sign at bit 15 and its exponent and
/// mantissa at bits 13..7, the f16 of value w / 256 exactly (subnormals
/// included; e4m3's bias 7 against f16's 15), so the fp8 sums come out
/// divided by 2^8 (undone exactly at the store: scaling by a power of two
/// commutes with every rounding of the FMA chain).
__attribute__((target("avx2,f16c"), always_inline)) static inline void
widen16(const uint8_t *p, int64_t i, enum Format fmt, __m256 *lo, __m256 *hi) {
  if (fmt == kBF16) { // columns j and j + 8 share a word (see slotOf)
    __m256i h = _mm256_loadu_si256((const __m256i *)(p + 2 * i));
    *lo = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    *hi = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32((int)0xFFFF0000u)));
    return;
  }
  if (fmt == kI8) {
    __m128i b = _mm_loadu_si128((const __m128i *)(p + i));
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
    return;
  }
  __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + i)));
  w = _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16((short)0xBF80));
  *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(w));
  *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(w, 1));
}

/// The factor widen16's values are off by (see there).
static inline float unscale(enum Format fmt) { return fmt == kFP8 ? 256.0f : 1.0f; }

/// R rows (1..4) over one panel.
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
rowsPanel(const float *a, int64_t lda, int R, int64_t k, const uint8_t *w, enum Format fmt,
          float *c, int64_t ldc, int64_t cols) {
  __m256 acc[4][2];
  for (int r = 0; r < 4; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const uint8_t *wi = w + i * kPanel * bytesOf(fmt);
    _mm_prefetch((const char *)wi + kPrefetchBytes, _MM_HINT_T0);
    __m256 w0, w1;
    widen16(wi, 0, fmt, &w0, &w1);
    for (int r = 0; r < R; ++r) {
      __m256 x = _mm256_broadcast_ss(a + r * lda + i);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  __m256 u = _mm256_set1_ps(unscale(fmt));
  for (int r = 0; r < R; ++r) {
    float sums[kPanel];
    _mm256_storeu_ps(sums, _mm256_mul_ps(acc[r][0], u));
    _mm256_storeu_ps(sums + 8, _mm256_mul_ps(acc[r][1], u));
    storeRow(c + r * ldc, sums, cols);
  }
}

/// R rows (1..3) over two panels (w0: the first, w1: the next).
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
rowsTwoPanels(const float *a, int64_t lda, int R, int64_t k, const uint8_t *w0,
              const uint8_t *w1, enum Format fmt, float *c, int64_t ldc, int64_t cols1) {
  __m256 acc[3][4];
  for (int r = 0; r < 3; ++r)
    acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const uint8_t *p0 = w0 + i * kPanel * bytesOf(fmt), *p1 = w1 + i * kPanel * bytesOf(fmt);
    _mm_prefetch((const char *)p0 + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch((const char *)p1 + kPrefetchBytes, _MM_HINT_T0);
    __m256 v0, v1, v2, v3;
    widen16(p0, 0, fmt, &v0, &v1);
    widen16(p1, 0, fmt, &v2, &v3);
    for (int r = 0; r < R; ++r) {
      __m256 x = _mm256_broadcast_ss(a + r * lda + i);
      acc[r][0] = _mm256_fmadd_ps(x, v0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, v1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(x, v2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(x, v3, acc[r][3]);
    }
  }
  __m256 u = _mm256_set1_ps(unscale(fmt));
  for (int r = 0; r < R; ++r) {
    float sums[2 * kPanel];
    _mm256_storeu_ps(sums, _mm256_mul_ps(acc[r][0], u));
    _mm256_storeu_ps(sums + 8, _mm256_mul_ps(acc[r][1], u));
    _mm256_storeu_ps(sums + 16, _mm256_mul_ps(acc[r][2], u));
    _mm256_storeu_ps(sums + 24, _mm256_mul_ps(acc[r][3], u));
    storeRow(c + r * ldc, sums, kPanel + cols1);
  }
}

/// One row over four whole panels (w: the first; the others follow):
/// eight independent FMA chains, so that one row's decode keeps up with the
/// memory stream.
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
rowFourPanels(const float *a, int64_t k, const uint8_t *w, enum Format fmt, float *c) {
  int64_t panelBytes = k * kPanel * bytesOf(fmt);
  __m256 acc[8];
  for (int j = 0; j < 8; ++j)
    acc[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    __m256 x = _mm256_broadcast_ss(a + i);
    for (int p = 0; p < 4; ++p) {
      const uint8_t *wp = w + p * panelBytes + i * kPanel * bytesOf(fmt);
      _mm_prefetch((const char *)wp + kPrefetchBytes, _MM_HINT_T0);
      __m256 lo, hi;
      widen16(wp, 0, fmt, &lo, &hi);
      acc[2 * p] = _mm256_fmadd_ps(x, lo, acc[2 * p]);
      acc[2 * p + 1] = _mm256_fmadd_ps(x, hi, acc[2 * p + 1]);
    }
  }
  __m256 u = _mm256_set1_ps(unscale(fmt));
  for (int j = 0; j < 8; ++j)
    _mm256_storeu_ps(c + 8 * j, _mm256_mul_ps(acc[j], u));
}

enum { kRows512 = 12 };

/// widen16 into one zmm (elements 0..15 of the panel row at `p`).
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) static inline __m512
widen16x512(const uint8_t *p, enum Format fmt) {
  if (fmt == kBF16) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    __m256i lo = _mm256_slli_epi32(h, 16);
    __m256i hi = _mm256_and_si256(h, _mm256_set1_epi32((int)0xFFFF0000u));
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
  }
  if (fmt == kI8)
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
  __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
  h = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16((short)0xBF80));
  return _mm512_cvtph_ps(h);
}

/// Twelve rows over P (1 or 2) panels with AVX-512 (prefill, batched
/// steps): one 16-wide accumulator per row and panel, each widened panel row
/// serving twelve broadcast FMAs (two panels: 24 accumulators, two loads and
/// twelve broadcasts per 24 FMAs, like the f32 kernels). Each C[m, n] is the
/// same FMA chain as in rowsPanel.
__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"), always_inline)) static inline void
rowsPanels512(const int P, const float *a, int64_t lda, int64_t k, const uint8_t *w,
              int64_t panelBytes, enum Format fmt, float *c, int64_t ldc, int64_t cols) {
  __m512 acc[kRows512][2];
  for (int r = 0; r < kRows512; ++r)
    for (int p = 0; p < P; ++p)
      acc[r][p] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    __m512 v[2];
    for (int p = 0; p < P; ++p) {
      const uint8_t *wi = w + p * panelBytes + i * kPanel * bytesOf(fmt);
      _mm_prefetch((const char *)wi + kPrefetchBytes, _MM_HINT_T0);
      v[p] = widen16x512(wi, fmt);
    }
    for (int r = 0; r < kRows512; ++r) {
      __m512 x = _mm512_set1_ps(a[r * lda + i]);
      for (int p = 0; p < P; ++p)
        acc[r][p] = _mm512_fmadd_ps(x, v[p], acc[r][p]);
    }
  }
  __m512 u = _mm512_set1_ps(unscale(fmt));
  for (int r = 0; r < kRows512; ++r)
    for (int p = 0; p < P; ++p) {
      float sums[kPanel];
      int64_t left = cols - p * kPanel;
      _mm512_storeu_ps(sums, _mm512_mul_ps(acc[r][p], u));
      storeRow(c + r * ldc + p * kPanel, sums, left < kPanel ? left : kPanel);
    }
}

/// rowsPanels512 for `fmt` and P, each compiled with its own constants.
__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"))) static void
rowsPanels512For(enum Format fmt, int P, const float *a, int64_t lda, int64_t k,
                 const uint8_t *w, int64_t panelBytes, float *c, int64_t ldc, int64_t cols) {
#define XFMR_NARROW_TILE(F)                                                                        \
  case F:                                                                                          \
    if (P == 2)                                                                                    \
      rowsPanels512(2, a, lda, k, w, panelBytes, F, c, ldc, cols);                                 \
    else                                                                                           \
      rowsPanels512(1, a, lda, k, w, panelBytes, F, c, ldc, cols);                                 \
    return;
  switch (fmt) {
    XFMR_NARROW_TILE(kBF16)
    XFMR_NARROW_TILE(kFP8)
    XFMR_NARROW_TILE(kI8)
  }
#undef XFMR_NARROW_TILE
}

/// Whole groups of twelve rows of C[:, n0:n1], two panels at a time;
/// returns the rows done.
__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"))) static int64_t
rows512(enum Format fmt, const float *a, int64_t rows, int64_t k, const uint8_t *w, int64_t n0,
        int64_t n1, float *c, int64_t ldc) {
  int64_t panelBytes = k * kPanel * bytesOf(fmt), m = 0;
  for (; m + kRows512 <= rows; m += kRows512)
    for (int64_t n = n0; n < n1;) {
      int P = n + kPanel < n1 ? 2 : 1;
      int64_t cols = n1 - n < P * kPanel ? n1 - n : P * kPanel;
      rowsPanels512For(fmt, P, a + m * k, k, k, w + (n / kPanel) * panelBytes, panelBytes,
                       c + m * ldc + n, ldc, cols);
      n += cols;
    }
  return m;
}

/// C[:, n0:n1] with AVX2 (n0 a multiple of 16); inlined per format.
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
matmulAVX2(const float *a, int64_t rows, int64_t k, const uint8_t *w, enum Format fmt, int64_t n0,
           int64_t n1, float *c, int64_t ldc) {
  int64_t panelBytes = k * kPanel * bytesOf(fmt);
  int64_t m = 0;
  // Groups of 4 rows, one panel at a time.
  for (; m + 4 <= rows; m += 4)
    for (int64_t n = n0; n < n1; n += kPanel) {
      int64_t cols = n1 - n < kPanel ? n1 - n : kPanel;
      rowsPanel(a + m * k, k, 4, k, w + (n / kPanel) * panelBytes, fmt, c + m * ldc + n, ldc,
                cols);
    }
  // The last 1-3 rows, two panels at a time.
  int64_t left = rows - m;
  if (!left)
    return;
  int64_t n = n0;
  if (left == 1) // four whole panels at a time
    for (; n + 4 * kPanel <= n1; n += 4 * kPanel)
      rowFourPanels(a + m * k, k, w + (n / kPanel) * panelBytes, fmt, c + m * ldc + n);
  for (; n + kPanel < n1; n += 2 * kPanel) {
    const uint8_t *wp = w + (n / kPanel) * panelBytes;
    int64_t cols1 = n1 - n - kPanel < kPanel ? n1 - n - kPanel : kPanel;
    if (left == 1)
      rowsTwoPanels(a + m * k, k, 1, k, wp, wp + panelBytes, fmt, c + m * ldc + n, ldc, cols1);
    else if (left == 2)
      rowsTwoPanels(a + m * k, k, 2, k, wp, wp + panelBytes, fmt, c + m * ldc + n, ldc, cols1);
    else
      rowsTwoPanels(a + m * k, k, 3, k, wp, wp + panelBytes, fmt, c + m * ldc + n, ldc, cols1);
  }
  if (n < n1) {
    const uint8_t *wp = w + (n / kPanel) * panelBytes;
    if (left == 1)
      rowsPanel(a + m * k, k, 1, k, wp, fmt, c + m * ldc + n, ldc, n1 - n);
    else if (left == 2)
      rowsPanel(a + m * k, k, 2, k, wp, fmt, c + m * ldc + n, ldc, n1 - n);
    else
      rowsPanel(a + m * k, k, 3, k, wp, fmt, c + m * ldc + n, ldc, n1 - n);
  }
}

/// matmulAVX2 for `fmt`, each format compiled with its own constant.
__attribute__((target("avx2,fma,f16c"))) static void
matmulAVX2For(enum Format fmt, const float *a, int64_t rows, int64_t k, const uint8_t *w,
              int64_t n0, int64_t n1, float *c, int64_t ldc) {
  switch (fmt) {
  case kBF16:
    matmulAVX2(a, rows, k, w, kBF16, n0, n1, c, ldc);
    return;
  case kFP8:
    matmulAVX2(a, rows, k, w, kFP8, n0, n1, c, ldc);
    return;
  case kI8:
    matmulAVX2(a, rows, k, w, kI8, n0, n1, c, ldc);
    return;
  }
}
#endif

static void matmulScalar(const float *a, int64_t rows, int64_t k, const uint8_t *w,
                         enum Format fmt, int64_t n0, int64_t n1, float *c, int64_t ldc) {
  for (int64_t n = n0; n < n1; n += kPanel) {
    const uint8_t *wp = w + (n / kPanel) * k * kPanel * bytesOf(fmt);
    int64_t cols = n1 - n < kPanel ? n1 - n : kPanel;
    for (int64_t m = 0; m < rows; ++m) {
      float sums[kPanel];
      panelScalar(a + m * k, k, wp, fmt, sums);
      storeRow(c + m * ldc + n, sums, cols);
    }
  }
}

/// C[:, n0:n1] in `fmt`: AVX2 (+FMA, F16C) where the CPU has it, else the
/// scalar loop with the same results.
static void matmulNarrow(enum Format fmt, const float *a, int64_t rows, int64_t k,
                         const uint8_t *w, int64_t n0, int64_t n1, float *c, int64_t ldc) {
#if defined(__x86_64__)
  if (xfmr_uk_has_avx2() && xfmr_uk_has_f16c()) {
    // Whole groups of twelve rows with AVX-512 where the CPU has it, the
    // rest with AVX2: the same FMA chains, so the same bits.
    int64_t done = rows >= kRows512 && xfmr_uk_has_avx512() ? rows512(fmt, a, rows, k, w, n0, n1, c, ldc)
                                                   : 0;
    if (done < rows)
      matmulAVX2For(fmt, a + done * k, rows - done, k, w, n0, n1, c + done * ldc, ldc);
    return;
  }
#endif
  matmulScalar(a, rows, k, w, fmt, n0, n1, c, ldc);
}

void xfmr_uk_matmul_f32bf16(const float *a, int64_t rows, int64_t k, const uint8_t *w,
                            int64_t n0, int64_t n1, float *c, int64_t ldc) {
  matmulNarrow(kBF16, a, rows, k, w, n0, n1, c, ldc);
}

void xfmr_uk_matmul_f32fp8(const float *a, int64_t rows, int64_t k, const uint8_t *w,
                           int64_t n0, int64_t n1, float *c, int64_t ldc) {
  matmulNarrow(kFP8, a, rows, k, w, n0, n1, c, ldc);
}

void xfmr_uk_matmul_f32i8(const float *a, int64_t rows, int64_t k, const uint8_t *w, int64_t n0,
                          int64_t n1, float *c, int64_t ldc) {
  matmulNarrow(kI8, a, rows, k, w, n0, n1, c, ldc);
}
