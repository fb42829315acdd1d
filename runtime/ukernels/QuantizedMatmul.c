//===- QuantizedMatmul.c - int4 weights x int8 activations ----------------===//
//
// Part of xfmr.
//
// The micro-kernels behind MatMulNBits at accuracy_level 4 (onnxruntime's
// "int8 compute"): activations are quantized to int8 per block of K, the
// 4-bit weights are repacked at compile time, and each block's dot product
// is an exact integer sum scaled once:
//
//   C[m, n] = sum_b  sa[m, b] * sw[n, b] * (sum_i qa[m, b, i] * qw[n, b, i]
//                                           - zp[n, b] * sum_i qa[m, b, i])
//
// Layout: the 8-bit kernel's (QuantizedMatmul8.c) VNNI panels with two
// nibbles per byte. For each panel of 16 columns and each block, the
// block's K values in groups of 8: one 64-byte line holds 16 columns x 8 k,
// byte i of a column's 4 the values 8o + i (low nibble) and 8o + 4 + i
// (high). The line's low nibbles (one vpand) are one vpdpbusd operand for
// the row's activations [8o, 8o + 4) broadcast to the 16 lanes, its high
// nibbles (vpsrlw, vpand) the next one for [8o + 4, 8o + 8): each int32
// lane holds one column's sum, no lanes to add. A tile of R rows x P panels
// loads P lines per 8 k for R * P * 2 vpdpbusd: 6 rows x 32 columns for
// prefill and batched steps, up to 4 rows x 16 columns for decode (one
// contiguous stream of the call's panels, prefetched ahead); the integer
// and the float sums stay in registers.
//
// The float epilogue per block, the same operations on every path (VNNI,
// AVX2, scalar) and in every tile, so a row's result depends on that row
// alone, not on the batch, the tile, the column split or the CPU
// (test/Unit/QuantizedMatmulTest.cpp):
//   without zero points (zp 8):  acc = fma(sa * sw, (float)(dot - 8 suma), acc)
//   with (f32) zero points:      acc = fma(sa * sw, (float)dot, acc)
//                                acc = fma(-(sa * (float)suma), sw * zp, acc)
// with dot = sum qa * qw exact in int32 and sw * zp rounded once when
// packing (the zeros array holds it).
//
// This file is built into libxfmr_ukernels.a and linked into every
// artifact whose code calls it (lib/Target/CPU/ObjectEmitter.cpp). It is
// plain C with no run-time dependency; the vector path is chosen at run
// time.
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

// Packed layout (xfmr_uk_pack_q4; N rounded up to whole panels with
// zero-scale columns; blk a multiple of 32):
//   weights [N / 16][blocks][blk / 8][16 columns][4 bytes]: byte i of a
//     column's 4 in line o holds q[8o + i] (low nibble) and q[8o + 4 + i]
//     (high);
//   scales  [N / 16][blocks][16] f32;
//   zeros   [N / 16][blocks][16] f32: scale * zero point (only when the
//     model has zero points; a float, so a block's grid q * scale + lo need
//     not hold 0: GGUF Q4_1's, what xfmr-quantize-weights writes).
enum { kPanel = XFMR_UK_Q4_COLUMNS, kOct = 8, kLine = 64 };

static int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

int64_t xfmr_uk_packed_q4_bytes(int64_t n, int64_t k) { return panelsOf(n) * kPanel * (k / 2); }

/// Repacks MatMulNBits' [N, blocks, blk / 2] 4-bit weights (k even in the
/// low nibble), [N, blocks] scales (as f32) and optional [N, blocks] zero
/// points (as f32) into the layout above. `w` must hold
/// xfmr_uk_packed_q4_bytes(n, k) bytes; `sw` (and `zw`) round N up to 16.
void xfmr_uk_pack_q4(const uint8_t *src, const float *scales, const float *zeros, int64_t n,
                     int64_t k, int64_t blk, uint8_t *w, float *sw, float *zw) {
  int64_t blocks = k / blk, lines = blk / kOct;
  for (int64_t p = 0; p < panelsOf(n); ++p)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t j = 0; j < kPanel; ++j) {
        int64_t col = p * kPanel + j, at = (p * blocks + b) * kPanel + j;
        float s = col < n ? scales[col * blocks + b] : 0.0f;
        sw[at] = s;
        if (zw)
          zw[at] = col < n ? s * zeros[col * blocks + b] : 0.0f;
        const uint8_t *in = src + col * (k / 2);
        for (int64_t o = 0; o < lines; ++o) {
          uint8_t *out = w + ((p * blocks + b) * lines + o) * kLine + j * 4;
          for (int64_t i = 0; i < 4; ++i) {
            if (col >= n) {
              out[i] = 0; // scale 0: contributes 0
              continue;
            }
            int64_t lo = b * blk + o * kOct + i, hi = lo + 4;
            uint8_t ql = (in[lo / 2] >> (4 * (lo % 2))) & 0xF;
            uint8_t qh = (in[hi / 2] >> (4 * (hi % 2))) & 0xF;
            out[i] = (uint8_t)(ql | (qh << 4));
          }
        }
      }
}

/// The epilogue of one block of one row and column (see the file comment).
static inline float blockEpilogue(float acc, int32_t dot, float sa, int32_t suma, float s,
                                  const float *sz) {
  if (!sz)
    return fmaf(sa * s, (float)(dot - 8 * suma), acc);
  return fmaf(-(sa * (float)suma), *sz, fmaf(sa * s, (float)dot, acc));
}

/// One row of one panel on any CPU.
static void panelScalar(const int8_t *qa, const float *sa, const int32_t *suma, int64_t blocks,
                        int64_t blk, const uint8_t *w, const float *sw, const float *zw,
                        float out[kPanel]) {
  int64_t lines = blk / kOct;
  for (int j = 0; j < kPanel; ++j) {
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t dot = 0;
      for (int64_t o = 0; o < lines; ++o) {
        const uint8_t *y = w + (b * lines + o) * kLine + j * 4;
        const int8_t *x = qa + b * blk + o * kOct;
        for (int i = 0; i < 4; ++i)
          dot += x[i] * (y[i] & 0x0F) + x[i + 4] * (y[i] >> 4);
      }
      acc = blockEpilogue(acc, dot, sa[b], suma[b], sw[b * kPanel + j],
                          zw ? zw + b * kPanel + j : 0);
    }
    out[j] = acc;
  }
}

#if defined(__x86_64__)
/// Decode streams the weights from memory once: prefetched this far ahead
/// (2, 4 and 8 KB alike, 16 KB slower). The scales and zeros (64 bytes
/// each per 8 * blk weight bytes) are left to the hardware prefetcher:
/// prefetching them too made a decode token's products 7-10% slower
/// (scripts/bench-q4-kernel.c ROUNDS decode), perhaps the L1's miss
/// buffers taken by prefetches.
enum { kPrefetchBytes = 4096 };

/// An int32 at any address (four activations).
typedef int32_t __attribute__((aligned(1), may_alias)) UnalignedQuad;

enum { kAVX2Rows = 4 };

/// R rows of H half panels (8 columns each, bytes [32h, 32h + 32) of each
/// line) with AVX2: per line the low and high nibbles (unpacked once for the
/// R rows) times the row's two quads with vpmaddubsw (int16 pair sums of at
/// most 2 * 15 * 127), added in int16 over a 32-value chunk (8 products,
/// at most 30480), then vpmaddwd to the eight columns' int32 sums: the same
/// integers as the VNNI lanes, and the same float epilogue. Decode (one
/// row) takes both halves in one pass over the lines, more rows one half
/// at a time (16 registers).
__attribute__((target("avx2,fma"), always_inline)) static inline void
halvesAVX2(const int R, const int H, const int8_t *qa, int64_t lda, const float *sa,
           const int32_t *suma, int64_t ldsa, int64_t blocks, int64_t blk, const uint8_t *w,
           const float *sw, const float *zw, float *out, int64_t ldo) {
  int64_t lines = blk / kOct;
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[kAVX2Rows][2];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h)
      acc[r][h] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i dot[kAVX2Rows][2];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h)
        dot[r][h] = zw ? _mm256_setzero_si256() : _mm256_set1_epi32(-8 * suma[r * ldsa + b]);
    const uint8_t *line = w + b * lines * kLine;
    const int8_t *x = qa + b * blk;
    for (int64_t o = 0; o < lines; o += 4) { // one 32-value chunk
      __m256i part[kAVX2Rows][2];
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h)
          part[r][h] = _mm256_setzero_si256();
      for (int u = 0; u < 4; ++u) {
        const uint8_t *y = line + (o + u) * kLine;
        if (R <= 2)
          _mm_prefetch((const char *)y + kPrefetchBytes, _MM_HINT_T0);
        for (int h = 0; h < H; ++h) {
          __m256i v = _mm256_loadu_si256((const __m256i *)(y + 32 * h));
          __m256i lo = _mm256_and_si256(v, low);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
          for (int r = 0; r < R; ++r) {
            const int8_t *xr = x + r * lda + (o + u) * kOct;
            __m256i xl = _mm256_set1_epi32(*(const UnalignedQuad *)xr);
            __m256i xh = _mm256_set1_epi32(*(const UnalignedQuad *)(xr + 4));
            part[r][h] = _mm256_add_epi16(part[r][h], _mm256_maddubs_epi16(lo, xl));
            part[r][h] = _mm256_add_epi16(part[r][h], _mm256_maddubs_epi16(hi, xh));
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h)
          dot[r][h] = _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(part[r][h], ones));
    }
    for (int h = 0; h < H; ++h) {
      __m256 s = _mm256_loadu_ps(sw + b * kPanel + 8 * h);
      __m256 sz = zw ? _mm256_loadu_ps(zw + b * kPanel + 8 * h) : s;
      for (int r = 0; r < R; ++r) {
        float a = sa[r * ldsa + b];
        __m256 d = _mm256_mul_ps(s, _mm256_set1_ps(a));
        acc[r][h] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot[r][h]), acc[r][h]);
        if (zw)
          acc[r][h] =
              _mm256_fnmadd_ps(_mm256_set1_ps(a * (float)suma[r * ldsa + b]), sz, acc[r][h]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h)
      _mm256_storeu_ps(out + r * ldo + 8 * h, acc[r][h]);
}

typedef void (*HalvesFn)(const int8_t *, int64_t, const float *, const int32_t *, int64_t,
                         int64_t, int64_t, const uint8_t *, const float *, const float *, float *,
                         int64_t);
#define XFMR_Q4_HALVES(R, H)                                                                       \
  __attribute__((target("avx2,fma"))) static void halvesAVX2_##R##_##H(                            \
      const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma, int64_t ldsa,           \
      int64_t blocks, int64_t blk, const uint8_t *w, const float *sw, const float *zw, float *out, \
      int64_t ldo) {                                                                               \
    halvesAVX2(R, H, qa, lda, sa, suma, ldsa, blocks, blk, w, sw, zw, out, ldo);                   \
  }
XFMR_Q4_HALVES(1, 2)
XFMR_Q4_HALVES(2, 1)
XFMR_Q4_HALVES(3, 1)
XFMR_Q4_HALVES(4, 1)
#undef XFMR_Q4_HALVES
/// Per row count: the function and the half panels it takes.
static const HalvesFn kHalvesAVX2[kAVX2Rows] = {halvesAVX2_1_2, halvesAVX2_2_1, halvesAVX2_3_1,
                                                halvesAVX2_4_1};

#define XFMR_VNNI "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"

/// Prefill tiles: up to 6 rows x 2 panels, 12 integer and 12 float sums
/// in registers (12 rows x 2 panels, the 8-bit kernel's tile, kept the
/// float sums in C and ran at 105-111 against 155-158 G multiply-adds/s
/// at blocks of 32; 12 x 1 with registers 127-134, 8 x 1 150-155). Tiles
/// of up to kDecodeRows rows take one panel (decode: the call's panels are
/// one contiguous stream, prefetched ahead).
enum { kMaxRows = 6, kMaxPanels = 2, kDecodeRows = 4 };

/// R rows x P consecutive panels with AVX512-VNNI (row r's activations at
/// qa + r * lda, its P * 16 results at out + r * ldo). Per line of 8 k: P
/// loads, each line's low and high nibbles, each row's two quads
/// broadcast, R * P * 2 vpdpbusd; per block the epilogue of the file
/// comment. On Zen 4 the float operations take the same pipes as
/// vpdpbusd: at blocks of 32 the epilogue's 3-4 per 8 vpdpbusd bound the
/// tile to about two thirds of vpdpbusd's peak.
__attribute__((target(XFMR_VNNI), always_inline)) static inline void
tileVNNI(const int R, const int P, const int8_t *qa, int64_t lda, const float *sa,
         const int32_t *suma, int64_t ldsa, int64_t blocks, int64_t blk, const uint8_t *w,
         int64_t panelBytes, const float *sw, const float *zw, int64_t panelMeta, float *out,
         int64_t ldo) {
  int64_t lines = blk / kOct;
  const int decode = R <= kDecodeRows && P == 1;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 facc[kMaxRows][kMaxPanels];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      facc[r][p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    // Decode tiles sum each block's low and high nibbles in two chains of
    // vpdpbusd (their latency, not the memory, bounded one chain).
    __m512i acc[kMaxRows][kMaxPanels], accHi[kDecodeRows];
    for (int r = 0; r < R; ++r) {
      __m512i init = zw ? _mm512_setzero_si512() : _mm512_set1_epi32(-8 * suma[r * ldsa + b]);
      for (int p = 0; p < P; ++p)
        acc[r][p] = init;
      if (decode)
        accHi[r] = _mm512_setzero_si512();
    }
    const uint8_t *line = w + b * lines * kLine;
    const int8_t *x = qa + b * blk;
    for (int64_t o = 0; o < lines; ++o, line += kLine, x += kOct) {
      __m512i lo[kMaxPanels], hi[kMaxPanels];
      for (int p = 0; p < P; ++p) {
        const uint8_t *y = line + p * panelBytes;
        if (R <= kDecodeRows) // decode streams the weights: keep the reads going
          _mm_prefetch((const char *)y + kPrefetchBytes, _MM_HINT_T0);
        __m512i v = _mm512_loadu_si512((const void *)y);
        lo[p] = _mm512_and_si512(v, low);
        hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
      for (int r = 0; r < R; ++r) {
        __m512i xl = _mm512_set1_epi32(*(const UnalignedQuad *)(x + r * lda));
        __m512i xh = _mm512_set1_epi32(*(const UnalignedQuad *)(x + r * lda + 4));
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], lo[p], xl);
          if (decode)
            accHi[r] = _mm512_dpbusd_epi32(accHi[r], hi[p], xh);
          else
            acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], hi[p], xh);
        }
      }
    }
    for (int r = 0; r < R && decode; ++r)
      acc[r][0] = _mm512_add_epi32(acc[r][0], accHi[r]);
    for (int r = 0; r < R; ++r) {
      float a = sa[r * ldsa + b];
      __m512 ab = _mm512_set1_ps(a);
      __m512 asz = _mm512_set1_ps(zw ? a * (float)suma[r * ldsa + b] : 0.0f);
      for (int p = 0; p < P; ++p) {
        __m512 d = _mm512_mul_ps(_mm512_loadu_ps(sw + p * panelMeta + b * kPanel), ab);
        __m512 f = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(acc[r][p]), facc[r][p]);
        if (zw)
          f = _mm512_fnmadd_ps(asz, _mm512_loadu_ps(zw + p * panelMeta + b * kPanel), f);
        facc[r][p] = f;
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      _mm512_storeu_ps(out + r * ldo + p * kPanel, facc[r][p]);
}

typedef void (*TileFn)(const int8_t *, int64_t, const float *, const int32_t *, int64_t, int64_t,
                       int64_t, const uint8_t *, int64_t, const float *, const float *, int64_t,
                       float *, int64_t);
#define XFMR_Q4_TILE(R, P)                                                                         \
  __attribute__((target(XFMR_VNNI))) static void tile_##R##_##P(                                   \
      const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma, int64_t ldsa,           \
      int64_t blocks, int64_t blk, const uint8_t *w, int64_t panelBytes, const float *sw,          \
      const float *zw, int64_t panelMeta, float *out, int64_t ldo) {                               \
    tileVNNI(R, P, qa, lda, sa, suma, ldsa, blocks, blk, w, panelBytes, sw, zw, panelMeta, out,    \
             ldo);                                                                                 \
  }
#define XFMR_Q4_ROWS(R) XFMR_Q4_TILE(R, 1) XFMR_Q4_TILE(R, 2)
XFMR_Q4_ROWS(1)
XFMR_Q4_ROWS(2)
XFMR_Q4_ROWS(3)
XFMR_Q4_ROWS(4)
XFMR_Q4_ROWS(5)
XFMR_Q4_ROWS(6)
#undef XFMR_Q4_ROWS
#undef XFMR_Q4_TILE

static const TileFn kTilesVNNI[kMaxRows][kMaxPanels] = {
    {tile_1_1, tile_1_2}, {tile_2_1, tile_2_2}, {tile_3_1, tile_3_2},
    {tile_4_1, tile_4_2}, {tile_5_1, tile_5_2}, {tile_6_1, tile_6_2}};
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

void xfmr_uk_matmul_q4q8_at(int level, const int8_t *aq, const float *sa, const int32_t *suma,
                            int64_t rows, int64_t k, int64_t blk, const uint8_t *w,
                            const float *sw, const float *zw, int64_t n0, int64_t n1, float *c,
                            int64_t ldc) {
  if (level > bestLevel())
    level = bestLevel();
  int64_t blocks = k / blk, panelBytes = blocks * blk / 2 * kPanel,
          panelMeta = blocks * kPanel;
  if (n1 <= n0 || rows <= 0)
    return;
#if defined(__x86_64__)
  if (level == 2) {
    // Row tiles outside, panels inside: a tile's activations stay in L1
    // while the call's columns (64: 32 * K bytes) stay in L2. Tiles are
    // whole panels; one that C does not take whole (N's last panel, or a
    // call whose n0 or n1 is inside a panel) goes through `part`.
    for (int64_t m = 0; m < rows; m += kMaxRows) {
      int R = rows - m < kMaxRows ? (int)(rows - m) : kMaxRows;
      int widest = R <= kDecodeRows ? 1 : kMaxPanels;
      for (int64_t p = n0 / kPanel, pEnd = panelsOf(n1); p < pEnd;) {
        int P = pEnd - p < widest ? (int)(pEnd - p) : widest;
        int64_t t0 = p * kPanel, t1 = t0 + P * kPanel;
        int64_t c0 = t0 < n0 ? n0 : t0, c1 = t1 > n1 ? n1 : t1;
        float part[kMaxRows * kMaxPanels * kPanel];
        int whole = c0 == t0 && c1 == t1;
        kTilesVNNI[R - 1][P - 1](aq + m * k, k, sa + m * blocks, suma + m * blocks, blocks, blocks,
                                 blk, w + p * panelBytes, panelBytes, sw + p * panelMeta,
                                 zw ? zw + p * panelMeta : 0, panelMeta,
                                 whole ? c + m * ldc + t0 : part, whole ? ldc : P * kPanel);
        for (int r = 0; !whole && r < R; ++r)
          memcpy(c + (m + r) * ldc + c0, part + r * P * kPanel + (c0 - t0),
                 (c1 - c0) * sizeof(float));
        p += P;
      }
    }
    return;
  }
#endif
  for (int64_t p = n0 / kPanel, pEnd = panelsOf(n1); p < pEnd; ++p) {
    int64_t t0 = p * kPanel, t1 = t0 + kPanel;
    int64_t c0 = t0 < n0 ? n0 : t0, c1 = t1 > n1 ? n1 : t1;
    const uint8_t *wp = w + p * panelBytes;
    const float *sp = sw + p * panelMeta;
    const float *zp = zw ? zw + p * panelMeta : 0;
    for (int64_t m = 0; m < rows;) {
      float out[kPanel * 4];
      int R = 1;
#if defined(__x86_64__)
      if (level == 1) {
        // Up to four rows share each unpacked line, a half panel at a time
        // (one row: the whole panel in one pass).
        R = rows - m < kAVX2Rows ? (int)(rows - m) : kAVX2Rows;
        for (int h = 0; h < (R == 1 ? 1 : 2); ++h)
          kHalvesAVX2[R - 1](aq + m * k, k, sa + m * blocks, suma + m * blocks, blocks, blocks,
                             blk, wp + h * 32, sp + h * 8, zp ? zp + h * 8 : 0, out + h * 8,
                             kPanel);
      } else
#endif
        panelScalar(aq + m * k, sa + m * blocks, suma + m * blocks, blocks, blk, wp, sp, zp, out);
      for (int r = 0; r < R; ++r)
        memcpy(c + (m + r) * ldc + c0, out + r * kPanel + (c0 - t0), (c1 - c0) * sizeof(float));
      m += R;
    }
  }
}

/// C[m, n0:n1] for all `rows` rows on the best path this CPU has: `aq`,
/// `sa`, `suma` A quantized as lib/Conversion/ONNXToLinalg/Linear.cpp
/// (quantizeRows) does; `w`, `sw`, `zw` (null: zero point 8) from
/// xfmr_uk_pack_q4. `blk` is a multiple of 32. Each row's results depend on
/// that row alone.
void xfmr_uk_matmul_q4q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const uint8_t *w, const float *sw,
                         const float *zw, int64_t n0, int64_t n1, float *c, int64_t ldc) {
  xfmr_uk_matmul_q4q8_at(2, aq, sa, suma, rows, k, blk, w, sw, zw, n0, n1, c, ldc);
}
