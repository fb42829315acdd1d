//===- QuantizedMatmul8.c - int8 weights x int8 activations ---------------===//
//
// Part of xfmr.
//
// The micro-kernel behind 8-bit MatMulNBits at accuracy_level 4 (what
// `xfmr-compile --quant=int8` and `--quant=w8a8` write: one block spanning
// K, so one scale per output channel), the 8-bit sibling of
// QuantizedMatmul.c with the same activations (quantizeRows in
// lib/Conversion/ONNXToLinalg/Linear.cpp) and exact integer block sums:
//
//   C[m, n] = sum_b  sa[m, b] * sw[n, b] * (sum_i qa[m, b, i] * qw[n, b, i]
//                                           - zp[n, b] * sum_i qa[m, b, i])
//
// with qw the stored byte (0..255) and zp its zero point (128 when the model
// has none); sum_i qa is quantizeRows' row sum. The integers are exact on
// every path, so their order does not matter; the float epilogue per block,
// acc = fma(sa * sw, (float)dot, acc), is the same operations on every path.
// A row's result therefore depends on nothing but that row: not on the
// batch, the tile or the CPU (test/Unit/QuantizedMatmulTest.cpp).
//
// Layout: IREE's/oneDNN's VNNI "k-quad" panels. For each panel of 16
// columns and each block, the block's K values in quads of 4: one 64-byte
// line holds 16 columns x 4 k, which is exactly one vpdpbusd operand (16
// int32 lanes, each the sum of 4 u8 x s8 products). A row's 4 activations
// of a quad are broadcast to all 16 lanes, so a tile of R rows x P panels
// needs P weight loads and R broadcasts for R * P vpdpbusd (64 multiply-adds
// each): 12 x 32 for prefill and batched steps, 1-4 rows x 16 columns for
// decode, which streams the panels in order, once. The weights are the unsigned
// operand as stored (no sign flip of the activations, no column sums: the
// zero point is taken off with quantizeRows' row sums).
//
// CPUs without AVX512-VNNI: AVX2 on the same layout (vpmaddubsw saturates
// int16 pair sums, so |qw - 128| times the activation with qw - 128's sign,
// as in QuantizedMatmul.c), or a scalar loop with the same integers.
//
//===----------------------------------------------------------------------===//

#include "QuantizedMatmul.h"
#include "CPUCheck.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Packed layout (xfmr_uk_pack_q8; N rounded up to whole panels with zero-scale
// columns, each block of `blk` values rounded up to whole quads):
//   weights [N / 16][blocks][quads][16 columns][4] uint8, the stored bytes
//     (padding 128, i.e. 0 after the zero point);
//   scales  [N / 16][blocks][16] f32;
//   zeros   [N / 16][blocks][16] uint8 (only when the model has zero points).
enum { kPanel = XFMR_UK_Q8_COLUMNS, kQuad = 4, kLine = kPanel * kQuad };

static int64_t quadsOf(int64_t blk) { return (blk + kQuad - 1) / kQuad; }
static int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

int64_t xfmr_uk_packed_q8_bytes(int64_t n, int64_t k, int64_t blk) {
  return panelsOf(n) * (k / blk) * quadsOf(blk) * kLine;
}

/// Repacks MatMulNBits' 8-bit weights (row n of `src` at n * ld bytes:
/// blocks of `blk` values along K, k a multiple of blk), [N, blocks] scales
/// (as f32) and optional [N, blocks] zero points into the layout above. `w`
/// must hold xfmr_uk_packed_q8_bytes(n, k, blk) bytes; `sw` (and `zw`) hold
/// [N rounded up to 16, blocks] values.
void xfmr_uk_pack_q8(const uint8_t *src, int64_t ld, const float *scales, const uint8_t *zeros,
                     int64_t n, int64_t k, int64_t blk, uint8_t *w, float *sw, uint8_t *zw) {
  int64_t blocks = k / blk, quads = quadsOf(blk);
  for (int64_t p = 0; p < panelsOf(n); ++p)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t *line = w + (p * blocks + b) * quads * kLine;
      for (int64_t j = 0; j < kPanel; ++j) {
        int64_t col = p * kPanel + j, at = (p * blocks + b) * kPanel + j;
        sw[at] = col < n ? scales[col * blocks + b] : 0.0f;
        if (zw)
          zw[at] = col < n ? zeros[col * blocks + b] : 128;
        for (int64_t v = 0; v < quads * kQuad; ++v)
          line[(v / kQuad) * kLine + j * kQuad + v % kQuad] =
              col < n && v < blk ? src[col * ld + b * blk + v] : 128;
      }
    }
}

/// Quad `q` of a block's activations `x` as one int32, zeros past the
/// block's `blk` values (never read past A's row).
static inline int32_t quadAt(const int8_t *x, int64_t blk, int64_t q) {
  int32_t v = 0;
  int64_t left = blk - q * kQuad;
  memcpy(&v, x + q * kQuad, left >= kQuad ? kQuad : (size_t)left);
  return v;
}

/// One row of one panel on any CPU.
static void panelScalar(const int8_t *qa, const float *sa, const int32_t *suma, int64_t blocks,
                        int64_t blk, const uint8_t *w, const float *sw, const uint8_t *zw,
                        float out[kPanel]) {
  int64_t quads = quadsOf(blk);
  for (int j = 0; j < kPanel; ++j) {
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t *line = w + b * quads * kLine + j * kQuad;
      int32_t dot = 0;
      for (int64_t v = 0; v < blk; ++v)
        dot += qa[b * blk + v] * line[(v / kQuad) * kLine + v % kQuad];
      dot -= (zw ? zw[b * kPanel + j] : 128) * suma[b];
      // The vector paths' operations: (sa * sw) rounded, then one FMA.
      acc = fmaf(sa[b] * sw[b * kPanel + j], (float)dot, acc);
    }
    out[j] = acc;
  }
}

#if defined(__x86_64__)
enum { kPrefetchBytes = 8192 };

/// Eight int32 lanes (columns) of the quad's products: the 32 bytes are
/// columns x 4 k, `x` the row's quad in every lane. sum (qw - 128) * x,
/// exactly: |qw - 128| times x with qw - 128's sign stays within
/// vpmaddubsw's int16 pair sums.
__attribute__((target("avx2"))) static inline __m256i quad8(const uint8_t *y, __m256i x,
                                                            __m256i flip, __m256i ones) {
  __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y), flip);
  __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, ones);
}

/// One row of one panel with AVX2: sum (qw - 128) x, then
/// - (zp - 128) * sum x, the same integer as sum qw x - zp sum x.
__attribute__((target("avx2,fma"))) static void
panelAVX2(const int8_t *qa, const float *sa, const int32_t *suma, int64_t blocks, int64_t blk,
          const uint8_t *w, const float *sw, const uint8_t *zw, float out[kPanel]) {
  int64_t quads = quadsOf(blk);
  const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
  const __m256i c128 = _mm256_set1_epi32(128);
  __m256 f0 = _mm256_setzero_ps(), f1 = f0;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t *line = w + b * quads * kLine;
    __m256i d0 = _mm256_setzero_si256(), d1 = d0;
    for (int64_t q = 0; q < quads; ++q, line += kLine) {
      _mm_prefetch((const char *)line + kPrefetchBytes, _MM_HINT_T0);
      __m256i x = _mm256_set1_epi32(quadAt(qa + b * blk, blk, q));
      d0 = _mm256_add_epi32(d0, quad8(line, x, flip, ones));
      d1 = _mm256_add_epi32(d1, quad8(line + 32, x, flip, ones));
    }
    __m256i z0 = _mm256_setzero_si256(), z1 = z0;
    if (zw) {
      z0 = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zw + b * kPanel))), c128);
      z1 = _mm256_sub_epi32(
          _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zw + b * kPanel + 8))), c128);
    }
    __m256i s = _mm256_set1_epi32(suma[b]);
    d0 = _mm256_sub_epi32(d0, _mm256_mullo_epi32(z0, s));
    d1 = _mm256_sub_epi32(d1, _mm256_mullo_epi32(z1, s));
    __m256 a = _mm256_set1_ps(sa[b]);
    f0 = _mm256_fmadd_ps(_mm256_mul_ps(a, _mm256_loadu_ps(sw + b * kPanel)), _mm256_cvtepi32_ps(d0), f0);
    f1 = _mm256_fmadd_ps(_mm256_mul_ps(a, _mm256_loadu_ps(sw + b * kPanel + 8)), _mm256_cvtepi32_ps(d1), f1);
  }
  _mm256_storeu_ps(out, f0);
  _mm256_storeu_ps(out + 8, f1);
}

enum { kMaxRows = 12, kMaxPanels = 2 };

/// An int32 at any address (a quad of activations).
typedef int32_t __attribute__((aligned(1), may_alias)) UnalignedQuad;

/// One quad of R rows x P panels: P weight lines, row r's activations
/// (at x + r * lda, or v[r] when `v` is given) broadcast, R * P vpdpbusd.
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
quadVNNI(const int R, const int P, __m512i acc[][kMaxPanels], const uint8_t *line,
         int64_t panelBytes, const int8_t *x, int64_t lda, const int32_t *v) {
  __m512i wv[kMaxPanels];
  for (int p = 0; p < P; ++p) {
    wv[p] = _mm512_loadu_si512((const void *)(line + p * panelBytes));
    if (R <= 2) // decode streams the weights: keep the reads going
      _mm_prefetch((const char *)(line + p * panelBytes) + kPrefetchBytes, _MM_HINT_T0);
  }
  for (int r = 0; r < R; ++r) {
    __m512i xv = _mm512_set1_epi32(v ? v[r] : *(const UnalignedQuad *)(x + r * lda));
    for (int p = 0; p < P; ++p)
      acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], wv[p], xv);
  }
}

/// R rows x P consecutive panels with AVX512-VNNI (row r's activations at
/// qa + r * lda), row r's P * 16 results at out + r * ldo. The weights are
/// vpdpbusd's unsigned operand as stored, each row's quad the signed one,
/// broadcast; per block sum qw x - zp sum x and the float epilogue of the
/// other paths, accumulated in `out` (so only the R * P integer sums live
/// in registers).
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
tileVNNI(const int R, const int P, const int8_t *qa, int64_t lda, const float *sa,
         const int32_t *suma, int64_t ldsa, int64_t blocks, int64_t blk, const uint8_t *w,
         int64_t panelBytes, const float *sw, const uint8_t *zw, int64_t panelMeta, float *out,
         int64_t ldo) {
  int64_t quads = quadsOf(blk), full = blk / kQuad;
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i acc[kMaxRows][kMaxPanels];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p)
        acc[r][p] = _mm512_setzero_si512();
    const uint8_t *line = w + b * quads * kLine;
    const int8_t *x = qa + b * blk;
    for (int64_t q = 0; q < full; ++q, line += kLine)
      quadVNNI(R, P, acc, line, panelBytes, x + q * kQuad, lda, 0);
    if (full < quads) { // the block's last, partial quad
      int32_t v[kMaxRows];
      for (int r = 0; r < R; ++r)
        v[r] = quadAt(x + r * lda, blk, full);
      quadVNNI(R, P, acc, line, panelBytes, 0, 0, v);
    }
    for (int p = 0; p < P; ++p) {
      __m512 s = _mm512_loadu_ps(sw + p * panelMeta + b * kPanel);
      __m512i z = _mm512_set1_epi32(128);
      if (zw)
        z = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zw + p * panelMeta + b * kPanel)));
      for (int r = 0; r < R; ++r) {
        __m512i dot = _mm512_sub_epi32(acc[r][p], _mm512_mullo_epi32(z, _mm512_set1_epi32(suma[r * ldsa + b])));
        __m512 d = _mm512_mul_ps(_mm512_set1_ps(sa[r * ldsa + b]), s);
        float *o = out + r * ldo + p * kPanel;
        __m512 prev = b ? _mm512_loadu_ps(o) : _mm512_setzero_ps();
        _mm512_storeu_ps(o, _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot), prev));
      }
    }
  }
}

typedef void (*TileFn)(const int8_t *, int64_t, const float *, const int32_t *, int64_t, int64_t,
                       int64_t, const uint8_t *, int64_t, const float *, const uint8_t *, int64_t,
                       float *, int64_t);
#define XFMR_Q8_TILE(R, P)                                                                         \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"))) static void            \
  tile_##R##_##P(const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma,             \
                 int64_t ldsa, int64_t blocks, int64_t blk, const uint8_t *w, int64_t panelBytes, \
                 const float *sw, const uint8_t *zw, int64_t panelMeta, float *out, int64_t ldo) { \
    tileVNNI(R, P, qa, lda, sa, suma, ldsa, blocks, blk, w, panelBytes, sw, zw, panelMeta, out,    \
             ldo);                                                                                 \
  }
#define XFMR_Q8_ROWS(R) XFMR_Q8_TILE(R, 1) XFMR_Q8_TILE(R, 2)
XFMR_Q8_ROWS(1)
XFMR_Q8_ROWS(2)
XFMR_Q8_ROWS(3)
XFMR_Q8_ROWS(4)
XFMR_Q8_ROWS(5)
XFMR_Q8_ROWS(6)
XFMR_Q8_ROWS(7)
XFMR_Q8_ROWS(8)
XFMR_Q8_ROWS(9)
XFMR_Q8_ROWS(10)
XFMR_Q8_ROWS(11)
XFMR_Q8_ROWS(12)
#undef XFMR_Q8_ROWS
#undef XFMR_Q8_TILE

/// Tiles of up to four rows take one panel at a time (decode: the call's
/// panels are one contiguous stream, which the prefetch 8 KB ahead keeps
/// going; four panels at once were four streams 16 KB apart and decoded
/// 40% slower), larger ones two (24 of the 32 registers as accumulators for
/// twelve rows).
static const TileFn kTiles[kMaxRows][kMaxPanels] = {
    {tile_1_1, tile_1_2},   {tile_2_1, tile_2_2},   {tile_3_1, tile_3_2},   {tile_4_1, tile_4_2},
    {tile_5_1, tile_5_2},   {tile_6_1, tile_6_2},   {tile_7_1, tile_7_2},   {tile_8_1, tile_8_2},
    {tile_9_1, tile_9_2},   {tile_10_1, tile_10_2}, {tile_11_1, tile_11_2}, {tile_12_1, tile_12_2}};
#endif

/// The best path this CPU has: 2 AVX512-VNNI, 1 AVX2, 0 scalar.
static int bestLevel(void) {
#if defined(__x86_64__)
  if (xfmr_uk_has_avx512vnni())
    return 2;
  if (xfmr_uk_has_avx2())
    return 1;
#endif
  return 0;
}

void xfmr_uk_matmul_q8q8_at(int level, const int8_t *aq, const float *sa, const int32_t *suma,
                            int64_t rows, int64_t k, int64_t blk, const uint8_t *w,
                            const float *sw, const uint8_t *zw, int64_t n0, int64_t n1, float *c,
                            int64_t ldc) {
  if (level > bestLevel())
    level = bestLevel();
  int64_t blocks = k / blk, panelBytes = blocks * quadsOf(blk) * kLine,
          panelMeta = blocks * kPanel;
#if defined(__x86_64__)
  if (level == 2) {
    // Row tiles outside, panels inside: a tile's activations stay in L1
    // while the call's columns (64: 64 * K bytes) stay in L2.
    for (int64_t m = 0; m < rows; m += kMaxRows) {
      int R = rows - m < kMaxRows ? (int)(rows - m) : kMaxRows;
      int widest = R <= 4 ? 1 : 2;
      for (int64_t n = n0; n < n1;) {
        int64_t left = panelsOf(n1 - n);
        int P = left < widest ? (int)left : widest;
        int64_t p = n / kPanel;
        // Whole tiles straight into C, a last partial panel through `part`.
        int64_t width = n1 - n < P * kPanel ? n1 - n : P * kPanel;
        float part[kMaxRows * kMaxPanels * kPanel];
        int whole = width == P * kPanel;
        kTiles[R - 1][P - 1](aq + m * k, k, sa + m * blocks, suma + m * blocks, blocks, blocks,
                             blk, w + p * panelBytes, panelBytes, sw + p * panelMeta,
                             zw ? zw + p * panelMeta : 0, panelMeta,
                             whole ? c + m * ldc + n : part, whole ? ldc : P * kPanel);
        for (int r = 0; !whole && r < R; ++r)
          memcpy(c + (m + r) * ldc + n, part + r * P * kPanel, width * sizeof(float));
        n += width;
      }
    }
    return;
  }
#endif
  for (int64_t n = n0; n < n1; n += kPanel) {
    int64_t p = n / kPanel, width = n1 - n < kPanel ? n1 - n : kPanel;
    const uint8_t *wp = w + p * panelBytes;
    const float *sp = sw + p * panelMeta;
    const uint8_t *zp = zw ? zw + p * panelMeta : 0;
    for (int64_t m = 0; m < rows; ++m) {
      float out[kPanel];
#if defined(__x86_64__)
      if (level == 1)
        panelAVX2(aq + m * k, sa + m * blocks, suma + m * blocks, blocks, blk, wp, sp, zp, out);
      else
#endif
        panelScalar(aq + m * k, sa + m * blocks, suma + m * blocks, blocks, blk, wp, sp, zp, out);
      memcpy(c + m * ldc + n, out, width * sizeof(float));
    }
  }
}

/// C[m, n0:n1] for all `rows` rows (n0 a multiple of 16): `aq`, `sa`, `suma`
/// A quantized per block of `blk` (k a multiple of blk) as
/// lib/Conversion/ONNXToLinalg/Linear.cpp (quantizeRows) does; `w`, `sw`,
/// `zw` (null: zero point 128) from xfmr_uk_pack_q8. Each row's results
/// depend on that row alone.
void xfmr_uk_matmul_q8q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const uint8_t *w, const float *sw,
                         const uint8_t *zw, int64_t n0, int64_t n1, float *c, int64_t ldc) {
  xfmr_uk_matmul_q8q8_at(2, aq, sa, suma, rows, k, blk, w, sw, zw, n0, n1, c, ldc);
}
