//===- QuantizedMatmul8.c - int8 weights x int8 activations ---------------===//
//
// Part of xfmr.
//
// The micro-kernel behind 8-bit MatMulNBits at accuracy_level 4 (what
// `xfmr-compile --quant=int8` writes: one block spanning K, so one scale per
// output channel), the 8-bit sibling of QuantizedMatmul.c with the same
// activations (quantizeRows in lib/Conversion/ONNXToLinalg/Linear.cpp) and
// the same exact integer block sums:
//
//   C[m, n] = sum_b  sa[m, b] * sw[n, b] * (sum_i qa[m, b, i] * (qw[n, b, i] - 128)
//                                           - (zp[n, b] - 128) * sum_i qa[m, b, i])
//
// with qw the stored byte (zero point 128 when the model has none). The
// packed weights hold qw - 128 as int8. vpmaddubsw multiplies unsigned by
// signed bytes and saturates each pair sum to int16: a stored byte (up to
// 255) times an activation (up to 127) can overflow it, |qw - 128| (up to
// 128) cannot, so the AVX2 loop multiplies |w| by the activation carrying
// w's sign (vpsignb) and sums exactly.
//
// Plain C with no run-time dependency, built into libxfmr_ukernels.a; the
// AVX2 path is chosen at run time, the scalar path gives the same integers
// on any CPU. With AVX512-VNNI, whole tiles of four rows (prefill, batched
// steps) go through groupVNNI4: vpdpbusd on unsigned activations, the same
// integers and the same float epilogue as the AVX2 path.
//
//===----------------------------------------------------------------------===//

#include "QuantizedMatmul.h"
#include "CPUCheck.h"

#include <math.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Packed weight layout (xfmr_uk_pack_q8; kColumns = 4 columns per group, N
// rounded up to a whole group with zero columns, each block of `blk` values
// rounded up to whole 32-value chunks with zeros):
//   weights [N / 4][blocks][chunks][4 columns][32] int8 (stored byte - 128),
//     so a decode step reads each group's weights as one stream and one
//     chunk of activations serves four 32-byte column loads;
//   scales  [N / 4][blocks][4] f32;
//   zeros   [N / 4][blocks][4] uint8 (only when the model has zero points).
enum { kChunk = 32, kColumns = XFMR_UK_Q8_COLUMNS };

static int64_t chunksOf(int64_t blk) { return (blk + kChunk - 1) / kChunk; }

int64_t xfmr_uk_packed_q8_bytes(int64_t n, int64_t k, int64_t blk) {
  return (n + kColumns - 1) / kColumns * kColumns * (k / blk) * chunksOf(blk) * kChunk;
}

/// Repacks MatMulNBits' 8-bit weights (row n of `src` at n * ld bytes:
/// blocks of `blk` values along K, k a multiple of blk), [N, blocks] scales
/// (as f32) and optional [N, blocks] zero points into the layout above. `w`
/// must hold xfmr_uk_packed_q8_bytes(n, k, blk) bytes; `sw` (and `zw`) round
/// N up to 4.
void xfmr_uk_pack_q8(const uint8_t *src, int64_t ld, const float *scales, const uint8_t *zeros,
                     int64_t n, int64_t k, int64_t blk, int8_t *w, float *sw, uint8_t *zw) {
  int64_t blocks = k / blk, chunks = chunksOf(blk), groups = (n + kColumns - 1) / kColumns;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t j = 0; j < kColumns; ++j) {
        int64_t col = g * kColumns + j;
        int64_t at = (g * blocks + b) * kColumns + j;
        sw[at] = col < n ? scales[col * blocks + b] : 0.0f;
        if (zw)
          zw[at] = col < n ? zeros[col * blocks + b] : 128;
        for (int64_t c = 0; c < chunks; ++c) {
          int8_t *out = w + (((g * blocks + b) * chunks + c) * kColumns + j) * kChunk;
          for (int64_t i = 0; i < kChunk; ++i) {
            int64_t v = c * kChunk + i;
            // Padding (past the block or N) is 0: it adds nothing.
            out[i] = col < n && v < blk ? (int8_t)(src[col * ld + b * blk + v] - 128) : 0;
          }
        }
      }
}

/// One row of one column group on any CPU: exact integer block sums.
static void groupScalar(const int8_t *qa, const float *sa, const int32_t *suma, int64_t k,
                        int64_t blk, const int8_t *w, const float *sw, const uint8_t *zw,
                        float out[kColumns]) {
  int64_t blocks = k / blk, chunks = chunksOf(blk);
  for (int j = 0; j < kColumns; ++j) {
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t dot = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        const int8_t *y = w + ((b * chunks + c) * kColumns + j) * kChunk;
        const int8_t *x = qa + b * blk + c * kChunk;
        int64_t len = blk - c * kChunk < kChunk ? blk - c * kChunk : kChunk;
        for (int64_t i = 0; i < len; ++i)
          dot += x[i] * y[i];
      }
      if (zw)
        dot -= (zw[b * kColumns + j] - 128) * suma[b];
      // The AVX2 path's operations: (sa * sw) rounded, then one FMA, so
      // every CPU computes the same bits.
      acc = fmaf(sa[b] * sw[b * kColumns + j], (float)dot, acc);
    }
    out[j] = acc;
  }
}

#if defined(__x86_64__)
enum { kPrefetchBytes = 8192 };

/// The 32 activations of chunk `c` of a block: in place, or copied into
/// `tail` with zeros after the block's end (never read past A's row).
__attribute__((target("avx2"))) static inline __m256i loadChunk(const int8_t *x, int64_t blk,
                                                                int64_t c, int8_t tail[kChunk]) {
  int64_t left = blk - c * kChunk;
  if (left >= kChunk)
    return _mm256_loadu_si256((const __m256i *)(x + c * kChunk));
  for (int64_t i = 0; i < kChunk; ++i)
    tail[i] = i < left ? x[c * kChunk + i] : 0;
  return _mm256_loadu_si256((const __m256i *)tail);
}

/// Eight int32 lanes of x * y summed in pairs of pairs, exactly: |y| times
/// x with y's sign stays within vpmaddubsw's int16 pair sums.
__attribute__((target("avx2"))) static inline __m256i dot4(__m256i x, const int8_t *y,
                                                           __m256i ones) {
  __m256i w = _mm256_loadu_si256((const __m256i *)y);
  __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, ones);
}

/// One row of one column group with AVX2: per 32-value chunk one
/// activation load and four column loads (one 128-byte stretch of the
/// stream); the integer lanes of the four columns are summed per block.
__attribute__((target("avx2,fma"))) static void
groupAVX2(const int8_t *qa, const float *sa, const int32_t *suma, int64_t k, int64_t blk,
          const int8_t *w, const float *sw, const uint8_t *zw, float out[kColumns]) {
  int64_t blocks = k / blk, chunks = chunksOf(blk);
  const __m256i ones = _mm256_set1_epi16(1);
  int8_t tail[kChunk];
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i d0 = _mm256_setzero_si256(), d1 = d0, d2 = d0, d3 = d0;
    for (int64_t c = 0; c < chunks; ++c) {
      __m256i x = loadChunk(qa + b * blk, blk, c, tail);
      const int8_t *y = w + (b * chunks + c) * kColumns * kChunk;
      // As in QuantizedMatmul.c, decode streams the weights once and
      // prefetching keeps the reads going: 64 chunks (8 KB) ahead, both of
      // the chunk's lines (streaming a 64 MB matrix on the 2-core EPYC
      // here: 3-10% faster than 2 KB ahead).
      _mm_prefetch((const char *)y + kPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch((const char *)y + kPrefetchBytes + 64, _MM_HINT_T0);
      d0 = _mm256_add_epi32(d0, dot4(x, y, ones));
      d1 = _mm256_add_epi32(d1, dot4(x, y + kChunk, ones));
      d2 = _mm256_add_epi32(d2, dot4(x, y + 2 * kChunk, ones));
      d3 = _mm256_add_epi32(d3, dot4(x, y + 3 * kChunk, ones));
    }
    // Per 128-bit half [d0, d1, d2, d3] partial sums, then both halves.
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(d0, d1), _mm256_hadd_epi32(d2, d3));
    __m128i dot = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    if (zw) {
      int32_t packed;
      __builtin_memcpy(&packed, zw + b * kColumns, 4);
      __m128i z = _mm_sub_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(packed)), _mm_set1_epi32(128));
      dot = _mm_sub_epi32(dot, _mm_mullo_epi32(z, _mm_set1_epi32(suma[b])));
    }
    __m128 d = _mm_mul_ps(_mm_set1_ps(sa[b]), _mm_loadu_ps(sw + b * kColumns));
    acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(dot), acc);
  }
  _mm_storeu_ps(out, acc);
}

enum { kTileRows = 4 };

/// The four column sums of one 256-bit half pair: lanes 0-7 are column j,
/// lanes 8-15 column j + 1.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m128i
columnPairSums(__m512i lo, __m512i hi) {
  // [j | j+1] and [j+2 | j+3] halves -> four sums (exact int32 adds).
  __m256i a0 = _mm512_castsi512_si256(lo), a1 = _mm512_extracti64x4_epi64(lo, 1);
  __m256i b0 = _mm512_castsi512_si256(hi), b1 = _mm512_extracti64x4_epi64(hi, 1);
  __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(b0, b1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/// Four rows of `G` (1 or 2) adjacent column groups with AVX512-VNNI
/// (prefill and batched steps): each 128-byte chunk of a group's weights is
/// loaded once for the four rows as two zmm (columns j, j+1 and j+2, j+3),
/// each row's 32 activations are broadcast to both halves once for all G
/// groups and made unsigned (x + 128, by flipping the sign bit) for
/// vpdpbusd, which sums four u8 x s8 products into int32 without
/// saturation. sum (x + 128) w - 128 sum w is the same integer as
/// groupAVX2's, and the float epilogue is groupAVX2's operation for
/// operation, so a row's result does not depend on which path or tile
/// computed it.
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline void
rowsVNNI(int G, const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma,
         int64_t ldsa, int64_t k, int64_t blk, const int8_t *w, int64_t groupBytes,
         const float *sw, const uint8_t *zw, float out[kTileRows][2 * kColumns]) {
  int64_t blocks = k / blk, chunks = chunksOf(blk);
  const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
  int8_t tail[kChunk];
  __m128 acc[kTileRows][2];
  for (int r = 0; r < kTileRows; ++r)
    acc[r][0] = acc[r][1] = _mm_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i lo[kTileRows][2], hi[kTileRows][2], wsumLo[2], wsumHi[2];
    for (int g = 0; g < G; ++g) {
      wsumLo[g] = wsumHi[g] = _mm512_setzero_si512();
      for (int r = 0; r < kTileRows; ++r)
        lo[r][g] = hi[r][g] = _mm512_setzero_si512();
    }
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i w01[2], w23[2];
      for (int g = 0; g < G; ++g) {
        const int8_t *y = w + g * groupBytes + (b * chunks + c) * kColumns * kChunk;
        w01[g] = _mm512_loadu_si512((const void *)y);
        w23[g] = _mm512_loadu_si512((const void *)(y + 2 * kChunk));
        wsumLo[g] = _mm512_dpbusd_epi32(wsumLo[g], ones, w01[g]);
        wsumHi[g] = _mm512_dpbusd_epi32(wsumHi[g], ones, w23[g]);
      }
      for (int r = 0; r < kTileRows; ++r) {
        __m256i x = loadChunk(qa + r * lda + b * blk, blk, c, tail);
        __m512i xu = _mm512_xor_si512(_mm512_broadcast_i64x4(x), flip);
        for (int g = 0; g < G; ++g) {
          lo[r][g] = _mm512_dpbusd_epi32(lo[r][g], xu, w01[g]);
          hi[r][g] = _mm512_dpbusd_epi32(hi[r][g], xu, w23[g]);
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      const float *swg = sw + g * blocks * kColumns;
      __m128i wsum = _mm_slli_epi32(columnPairSums(wsumLo[g], wsumHi[g]), 7); // 128 * sum w
      __m128 d0 = _mm_loadu_ps(swg + b * kColumns);
      __m128i z = _mm_setzero_si128();
      if (zw) {
        int32_t packed;
        __builtin_memcpy(&packed, zw + g * blocks * kColumns + b * kColumns, 4);
        z = _mm_sub_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(packed)), _mm_set1_epi32(128));
      }
      for (int r = 0; r < kTileRows; ++r) {
        __m128i dot = _mm_sub_epi32(columnPairSums(lo[r][g], hi[r][g]), wsum);
        if (zw)
          dot = _mm_sub_epi32(dot, _mm_mullo_epi32(z, _mm_set1_epi32(suma[r * ldsa + b])));
        __m128 d = _mm_mul_ps(_mm_set1_ps(sa[r * ldsa + b]), d0);
        acc[r][g] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(dot), acc[r][g]);
      }
    }
  }
  for (int r = 0; r < kTileRows; ++r)
    for (int g = 0; g < G; ++g)
      _mm_storeu_ps(out[r] + g * kColumns, acc[r][g]);
}

/// One and two column groups (4 or 8 columns) of four rows.
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"))) static void
tileVNNI1(const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma, int64_t ldsa,
          int64_t k, int64_t blk, const int8_t *w, int64_t groupBytes, const float *sw,
          const uint8_t *zw, float out[kTileRows][2 * kColumns]) {
  rowsVNNI(1, qa, lda, sa, suma, ldsa, k, blk, w, groupBytes, sw, zw, out);
}
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"))) static void
tileVNNI2(const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma, int64_t ldsa,
          int64_t k, int64_t blk, const int8_t *w, int64_t groupBytes, const float *sw,
          const uint8_t *zw, float out[kTileRows][2 * kColumns]) {
  rowsVNNI(2, qa, lda, sa, suma, ldsa, k, blk, w, groupBytes, sw, zw, out);
}
#endif

/// C[m, n0:n1] for all `rows` rows (n0 a multiple of 4): `aq`, `sa`, `suma`
/// A quantized per block of `blk` (k a multiple of blk) as
/// lib/Conversion/ONNXToLinalg/Linear.cpp (quantizeRows) does; `w`, `sw`,
/// `zw` (null: zero point 128) from xfmr_uk_pack_q8. Each row's results
/// depend on that row alone.
void xfmr_uk_matmul_q8q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const int8_t *w, const float *sw,
                         const uint8_t *zw, int64_t n0, int64_t n1, float *c, int64_t ldc) {
  int64_t blocks = k / blk, groupBytes = xfmr_uk_packed_q8_bytes(kColumns, k, blk);
  void (*group)(const int8_t *, const float *, const int32_t *, int64_t, int64_t, const int8_t *,
                const float *, const uint8_t *, float *) = groupScalar;
#if defined(__x86_64__)
  if (xfmr_uk_has_avx2())
    group = groupAVX2;
#endif
  int vnni = 0;
#if defined(__x86_64__)
  vnni = rows >= kTileRows && xfmr_uk_has_avx512vnni();
  // Whole tiles of four rows by eight columns (two groups; four at the
  // end) share each weight and activation load; the remaining rows go one
  // by one below (the same result either way).
  int64_t tiled = vnni ? rows / kTileRows * kTileRows : 0;
  for (int64_t n = n0; vnni && n < n1;) {
    int64_t g = n / kColumns;
    int G = n + kColumns < n1 ? 2 : 1;
    for (int64_t m = 0; m < tiled; m += kTileRows) {
      float out[kTileRows][2 * kColumns];
      (G == 2 ? tileVNNI2 : tileVNNI1)(aq + m * k, k, sa + m * blocks, suma + m * blocks, blocks,
                                       k, blk, w + g * groupBytes, groupBytes,
                                       sw + g * blocks * kColumns,
                                       zw ? zw + g * blocks * kColumns : 0, out);
      for (int r = 0; r < kTileRows; ++r)
        for (int j = 0; j < G * kColumns && n + j < n1; ++j)
          c[(m + r) * ldc + n + j] = out[r][j];
    }
    n += G * kColumns;
  }
#else
  int64_t tiled = 0;
#endif
  for (int64_t n = n0; n < n1; n += kColumns) {
    int64_t g = n / kColumns;
    const int8_t *wg = w + g * groupBytes;
    const float *sg = sw + g * blocks * kColumns;
    const uint8_t *zg = zw ? zw + g * blocks * kColumns : 0;
    int64_t m = tiled;
    for (; m < rows; ++m) {
      float out[kColumns];
      group(aq + m * k, sa + m * blocks, suma + m * blocks, k, blk, wg, sg, zg, out);
      for (int j = 0; j < kColumns && n + j < n1; ++j)
        c[m * ldc + n + j] = out[j];
    }
  }
}
