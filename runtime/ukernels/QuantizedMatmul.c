//===- QuantizedMatmul.c - int4 weights x int8 activations ----------------===//
//
// Part of xfmr.
//
// The micro-kernels behind MatMulNBits at accuracy_level 4 (onnxruntime's
// "int8 compute"): activations are quantized to int8 per block of K, the
// 4-bit weights stay packed as the model stores them, and each block's dot
// product is an exact integer sum scaled once:
//
//   C[m, n] = sum_b  sa[m, b] * sw[n, b] * (sum_i qa[m, b, i] * qw[n, b, i]
//                                           - zp[n, b] * sum_i qa[m, b, i])
//
// Decode reads each weight byte once per token; the AVX2 loop unpacks a
// block's 32 nibbles into one register and multiplies it with the block's
// 32 int8 activations in two instructions (vpmaddubsw, vpmaddwd), four
// columns at a time so one activation load serves four weight streams, and
// up to four rows at a time so one unpacked chunk serves four rows.
//
// With AVX512-VNNI (Ice Lake, Sapphire Rapids, Zen 4 on) one 64-byte line
// of four columns' nibbles is vpdpbusd's operand as packed: tiles of up to
// 4 rows x 8 columns for prefill and batched steps, 1-2 rows x 4 columns
// for decode (one sequential stream of weights, as the AVX2 loop). Its
// int32 lanes hold the same partial sums as the AVX2 loop's and its float
// epilogue is the same operations, so both paths give the same bits, and
// a row's result depends on that row alone: not on the batch, the tile or
// the column split (test/Unit/QuantizedMatmulTest.cpp).
//
// This file is built into libxfmr_ukernels.a and linked into every
// artifact whose code calls it (lib/Target/CPU/ObjectEmitter.cpp). It is
// plain C with no run-time dependency; the vector path is chosen at run
// time, the scalar path gives the same integers on any CPU (its float
// rounding differs in the last bits).
//
//===----------------------------------------------------------------------===//

#include "QuantizedMatmul.h"
#include "CPUCheck.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Packed weight layout (xfmr_uk_pack_q4; kColumns = 4 columns per group,
// N rounded up to a whole group with zero columns):
//   weights [N / 4][blocks][blk / 32][4 columns][16 bytes]: byte i of a
//     column's 16 holds q[32c + i] (low nibble) and q[32c + 16 + i] (high),
//     so one 64-byte line is one 32-value chunk of four columns and the low
//     and high nibbles meet activations [0, 16) and [16, 32) in order;
//   scales  [N / 4][blocks][4] f32;
//   zeros   [N / 4][blocks][4] f32 (only when the model has zero points;
//     a float, so a block's grid q * scale + lo need not hold 0: GGUF
//     Q4_1's, what xfmr-quantize-weights writes).
enum { kChunk = 32, kColumns = XFMR_UK_Q4_COLUMNS };

int64_t xfmr_uk_packed_q4_bytes(int64_t n, int64_t k) {
  return (n + kColumns - 1) / kColumns * kColumns * (k / 2);
}

/// Repacks MatMulNBits' [N, blocks, blk / 2] 4-bit weights (k even in the
/// low nibble), [N, blocks] scales (as f32) and optional [N, blocks] zero
/// points (as f32) into the layout above. `w` must hold
/// xfmr_uk_packed_q4_bytes(n, k) bytes; `sw` (and `zw`) round N up to 4.
void xfmr_uk_pack_q4(const uint8_t *src, const float *scales, const float *zeros, int64_t n,
                     int64_t k, int64_t blk, uint8_t *w, float *sw, float *zw) {
  int64_t blocks = k / blk, groups = (n + kColumns - 1) / kColumns;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t j = 0; j < kColumns; ++j) {
        int64_t col = g * kColumns + j;
        int64_t at = (g * blocks + b) * kColumns + j;
        sw[at] = col < n ? scales[col * blocks + b] : 0.0f;
        if (zw)
          zw[at] = col < n ? zeros[col * blocks + b] : 8.0f;
        for (int64_t c = 0; c < blk / kChunk; ++c) {
          uint8_t *out = w + (((g * blocks + b) * (blk / kChunk) + c) * kColumns + j) * 16;
          for (int64_t i = 0; i < 16; ++i) {
            if (col >= n) {
              out[i] = 0x88; // q = zero point 8 with scale 0: contributes 0
              continue;
            }
            const uint8_t *in = src + col * (k / 2) + b * (blk / 2);
            int64_t lo = c * kChunk + i, hi = lo + 16;
            uint8_t ql = (in[lo / 2] >> (4 * (lo % 2))) & 0xF;
            uint8_t qh = (in[hi / 2] >> (4 * (hi % 2))) & 0xF;
            out[i] = (uint8_t)(ql | (qh << 4));
          }
        }
      }
}

/// One row of one column group on any CPU: exact integer block sums.
static void groupScalar(const int8_t *qa, const float *sa, const int32_t *suma, int64_t k,
                        int64_t blk, const uint8_t *w, const float *sw, const float *zw,
                        float out[kColumns]) {
  int64_t blocks = k / blk, chunks = blk / kChunk;
  for (int j = 0; j < kColumns; ++j) {
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t dot = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        const uint8_t *y = w + ((b * chunks + c) * kColumns + j) * 16;
        const int8_t *x = qa + b * blk + c * kChunk;
        for (int i = 0; i < 16; ++i)
          dot += x[i] * (y[i] & 0x0F) + x[i + 16] * (y[i] >> 4);
      }
      float z = zw ? zw[b * kColumns + j] : 8.0f;
      acc += sa[b] * sw[b * kColumns + j] * ((float)dot - z * (float)suma[b]);
    }
    out[j] = acc;
  }
}

#if defined(__x86_64__)
// Row tiles of up to kMaxRows rows; tiles of more than kDecodeRows rows
// take kTileGroups groups at once, fewer one group (decode streams the
// weights from memory: two or four groups side by side read it at half
// the rate of one sequential stream, measured on this layout).
enum { kPrefetchBytes = 2048, kMaxRows = 4, kTileGroups = 2, kDecodeRows = 2 };

/// R rows of one column group with AVX2 (row r's activations at qa + r *
/// lda, its four results at out + r * ldo): per 32-value chunk, two 32-byte
/// loads hold four columns' nibbles, unpacked once for all R rows; columns
/// (0, 1) and (2, 3) share a register, so each vpmaddubsw serves two
/// columns. Each row's operations are the same for every R.
__attribute__((target("avx2,fma"), always_inline)) static inline void
groupAVX2(const int R, const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma,
          int64_t ldsa, int64_t blocks, int64_t blk, const uint8_t *w, const float *sw,
          const float *zw, float *out, int64_t ldo) {
  int64_t chunks = blk / kChunk;
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  // Lane i of a block's int32 sums belongs to column i / 4 (of the pair).
  const __m256i pairLanes = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i pairLanes2 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  const __m128 eight = _mm_set1_ps(8.0f);
  __m256 acc01[kMaxRows], acc23[kMaxRows];
  __m128 corr[kMaxRows];
  for (int r = 0; r < R; ++r) {
    acc01[r] = acc23[r] = _mm256_setzero_ps();
    corr[r] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i dot01[kMaxRows], dot23[kMaxRows];
    for (int r = 0; r < R; ++r)
      dot01[r] = dot23[r] = _mm256_setzero_si256();
    for (int64_t c = 0; c < chunks; ++c) {
      const uint8_t *y = w + (b * chunks + c) * kColumns * 16;
      // Decode streams the weights from memory once: the hardware
      // prefetcher alone left the loop at 0.65 of the read bandwidth here
      // (measured on a 16 MB matrix), 32 lines ahead at 0.95.
      _mm_prefetch((const char *)y + kPrefetchBytes, _MM_HINT_T0);
      __m256i y01 = _mm256_loadu_si256((const __m256i *)y);
      __m256i y23 = _mm256_loadu_si256((const __m256i *)(y + 32));
      __m256i lo01 = _mm256_and_si256(y01, low);
      __m256i hi01 = _mm256_and_si256(_mm256_srli_epi16(y01, 4), low);
      __m256i lo23 = _mm256_and_si256(y23, low);
      __m256i hi23 = _mm256_and_si256(_mm256_srli_epi16(y23, 4), low);
      for (int r = 0; r < R; ++r) {
        const int8_t *x = qa + r * lda + b * blk + c * kChunk;
        __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x));
        __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 16)));
        __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(lo01, xlo),
                                       _mm256_maddubs_epi16(hi01, xhi));
        __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(lo23, xlo),
                                       _mm256_maddubs_epi16(hi23, xhi));
        dot01[r] = _mm256_add_epi32(dot01[r], _mm256_madd_epi16(p01, ones));
        dot23[r] = _mm256_add_epi32(dot23[r], _mm256_madd_epi16(p23, ones));
      }
    }
    _mm_prefetch((const char *)(sw + b * kColumns) + kPrefetchBytes / 4, _MM_HINT_T0);
    __m128 s = _mm_loadu_ps(sw + b * kColumns);
    __m128 z = zw ? _mm_loadu_ps(zw + b * kColumns) : eight;
    for (int r = 0; r < R; ++r) {
      __m128 d = _mm_mul_ps(s, _mm_set1_ps(sa[r * ldsa + b]));
      __m256 d4 = _mm256_insertf128_ps(_mm256_castps128_ps256(d), d, 1);
      acc01[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot01[r]),
                                 _mm256_permutevar8x32_ps(d4, pairLanes), acc01[r]);
      acc23[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot23[r]),
                                 _mm256_permutevar8x32_ps(d4, pairLanes2), acc23[r]);
      corr[r] = _mm_fmadd_ps(_mm_mul_ps(d, z), _mm_set1_ps((float)suma[r * ldsa + b]), corr[r]);
    }
  }
  // Each column's four lanes: (0, 1) in acc01, (2, 3) in acc23.
  for (int r = 0; r < R; ++r) {
    float lanes01[8], lanes23[8], cr[4];
    _mm256_storeu_ps(lanes01, acc01[r]);
    _mm256_storeu_ps(lanes23, acc23[r]);
    _mm_storeu_ps(cr, corr[r]);
    float *o = out + r * ldo;
    o[0] = (lanes01[0] + lanes01[1]) + (lanes01[2] + lanes01[3]) - cr[0];
    o[1] = (lanes01[4] + lanes01[5]) + (lanes01[6] + lanes01[7]) - cr[1];
    o[2] = (lanes23[0] + lanes23[1]) + (lanes23[2] + lanes23[3]) - cr[2];
    o[3] = (lanes23[4] + lanes23[5]) + (lanes23[6] + lanes23[7]) - cr[3];
  }
}

typedef void (*GroupFn)(const int8_t *, int64_t, const float *, const int32_t *, int64_t, int64_t,
                        int64_t, const uint8_t *, const float *, const float *, float *, int64_t);
#define XFMR_Q4_GROUP(R)                                                                           \
  __attribute__((target("avx2,fma"))) static void groupAVX2_##R(                                   \
      const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma, int64_t ldsa,           \
      int64_t blocks, int64_t blk, const uint8_t *w, const float *sw, const float *zw, float *out, \
      int64_t ldo) {                                                                               \
    groupAVX2(R, qa, lda, sa, suma, ldsa, blocks, blk, w, sw, zw, out, ldo);                       \
  }
XFMR_Q4_GROUP(1)
XFMR_Q4_GROUP(2)
XFMR_Q4_GROUP(3)
XFMR_Q4_GROUP(4)
#undef XFMR_Q4_GROUP
static const GroupFn kGroupsAVX2[kMaxRows] = {groupAVX2_1, groupAVX2_2, groupAVX2_3, groupAVX2_4};

#define XFMR_VNNI "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"

/// R rows x G consecutive column groups with AVX512-VNNI (row r's
/// activations at qa + r * lda, its G * 4 results at out + r * ldo). One
/// 64-byte line is one 32-value chunk of a group: its low nibbles
/// (vpdpbusd's unsigned operand) meet the row's activations [0, 16)
/// broadcast to the four 128-bit lanes, the high ones [16, 32), so a chunk
/// of the tile is G loads and R * G * 2 vpdpbusd. Lane i of a group's sums
/// holds bytes 4 (i % 4) .. + 3 of column i / 4, the same integers as
/// groupAVX2's lanes, and the float epilogue is groupAVX2's operations lane
/// by lane: the results are the AVX2 path's bits in every tile shape.
__attribute__((target(XFMR_VNNI), always_inline)) static inline void
tileVNNI(const int R, const int G, const int8_t *qa, int64_t lda, const float *sa,
         const int32_t *suma, int64_t ldsa, int64_t blocks, int64_t blk, const uint8_t *w,
         int64_t groupBytes, const float *sw, const float *zw, int64_t groupMeta, float *out,
         int64_t ldo) {
  int64_t chunks = blk / kChunk;
  const __m512i low = _mm512_set1_epi8(0x0F);
  // Lane i of a group's sums belongs to column i / 4; groups 2p and 2p + 1
  // share a 256-bit register of scales and corrections (fewer registers).
  const __m512i columnLanes[2] = {
      _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
      _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  const int P = (G + 1) / 2;
  __m512 acc[kMaxRows][kTileGroups];
  __m256 corr[kMaxRows][kTileGroups / 2];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g)
      acc[r][g] = _mm512_setzero_ps();
    for (int p = 0; p < P; ++p)
      corr[r][p] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i dot[kMaxRows][kTileGroups];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g)
        dot[r][g] = _mm512_setzero_si512();
    const uint8_t *line = w + b * chunks * kColumns * 16;
    const int8_t *x = qa + b * blk;
    for (int64_t c = 0; c < chunks; ++c, line += kColumns * 16, x += kChunk) {
      __m512i lo[kTileGroups], hi[kTileGroups];
      for (int g = 0; g < G; ++g) {
        const uint8_t *y = line + g * groupBytes;
        if (R <= kDecodeRows) // one stream (G = 1), as groupAVX2
          _mm_prefetch((const char *)y + kPrefetchBytes, _MM_HINT_T0);
        __m512i v = _mm512_loadu_si512((const void *)y);
        lo[g] = _mm512_and_si512(v, low);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
      for (int r = 0; r < R; ++r) {
        __m512i xlo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x + r * lda)));
        __m512i xhi =
            _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x + r * lda + 16)));
        for (int g = 0; g < G; ++g) {
          dot[r][g] = _mm512_dpbusd_epi32(dot[r][g], lo[g], xlo);
          dot[r][g] = _mm512_dpbusd_epi32(dot[r][g], hi[g], xhi);
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      const float *s = sw + 2 * p * groupMeta + b * kColumns;
      const float *z = zw ? zw + 2 * p * groupMeta + b * kColumns : 0;
      if (R <= kDecodeRows)
        _mm_prefetch((const char *)s + kPrefetchBytes / 4, _MM_HINT_T0);
      int pair = 2 * p + 1 < G;
      __m256 s8 = _mm256_castps128_ps256(_mm_loadu_ps(s));
      s8 = _mm256_insertf128_ps(s8, pair ? _mm_loadu_ps(s + groupMeta) : _mm_setzero_ps(), 1);
      __m256 z8 = _mm256_set1_ps(8.0f);
      if (z) {
        z8 = _mm256_castps128_ps256(_mm_loadu_ps(z));
        z8 = _mm256_insertf128_ps(z8, pair ? _mm_loadu_ps(z + groupMeta) : _mm_setzero_ps(), 1);
      }
      for (int r = 0; r < R; ++r) {
        __m256 d = _mm256_mul_ps(s8, _mm256_set1_ps(sa[r * ldsa + b]));
        for (int h = 0; h < 2 && 2 * p + h < G; ++h) {
          __m512 d16 = _mm512_permutexvar_ps(columnLanes[h], _mm512_castps256_ps512(d));
          acc[r][2 * p + h] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][2 * p + h]), d16, acc[r][2 * p + h]);
        }
        corr[r][p] = _mm256_fmadd_ps(_mm256_mul_ps(d, z8),
                                     _mm256_set1_ps((float)suma[r * ldsa + b]), corr[r][p]);
      }
    }
  }
  // groupAVX2's (l0 + l1) + (l2 + l3) - corr per column.
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) {
      __m512 a = acc[r][g];
      a = _mm512_add_ps(a, _mm512_permute_ps(a, 0xB1));   // (l0 + l1) in lanes 0 and 2
      a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4E));   // + (l2 + l3) in lane 0
      __m512 sums = _mm512_permutexvar_ps(
          _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), a);
      __m128 cr = g % 2 ? _mm256_extractf128_ps(corr[r][g / 2], 1)
                        : _mm256_castps256_ps128(corr[r][g / 2]);
      _mm_storeu_ps(out + r * ldo + g * kColumns, _mm_sub_ps(_mm512_castps512_ps128(sums), cr));
    }
}

typedef void (*TileFn)(const int8_t *, int64_t, const float *, const int32_t *, int64_t, int64_t,
                       int64_t, const uint8_t *, int64_t, const float *, const float *, int64_t,
                       float *, int64_t);
#define XFMR_Q4_TILE(R, G)                                                                         \
  __attribute__((target(XFMR_VNNI))) static void tile_##R##_##G(                                   \
      const int8_t *qa, int64_t lda, const float *sa, const int32_t *suma, int64_t ldsa,           \
      int64_t blocks, int64_t blk, const uint8_t *w, int64_t groupBytes, const float *sw,          \
      const float *zw, int64_t groupMeta, float *out, int64_t ldo) {                               \
    tileVNNI(R, G, qa, lda, sa, suma, ldsa, blocks, blk, w, groupBytes, sw, zw, groupMeta, out,    \
             ldo);                                                                                 \
  }
#define XFMR_Q4_ROWS(R) XFMR_Q4_TILE(R, 1) XFMR_Q4_TILE(R, 2)
XFMR_Q4_ROWS(1)
XFMR_Q4_ROWS(2)
XFMR_Q4_ROWS(3)
XFMR_Q4_ROWS(4)
#undef XFMR_Q4_ROWS
#undef XFMR_Q4_TILE
static const TileFn kTilesVNNI[kMaxRows][kTileGroups] = {
    {tile_1_1, tile_1_2}, {tile_2_1, tile_2_2}, {tile_3_1, tile_3_2}, {tile_4_1, tile_4_2}};
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
  int64_t blocks = k / blk, groupBytes = blocks * kColumns * (blk / 2),
          groupMeta = blocks * kColumns;
#if defined(__x86_64__)
  if (level == 2) {
    // Row tiles outside, column tiles inside: a tile's activations stay in
    // L1 while the call's columns (64: 32 * K bytes) stay in L1 or L2.
    enum { kWidth = kTileGroups * kColumns };
    for (int64_t m = 0; m < rows; m += kMaxRows) {
      int R = rows - m < kMaxRows ? (int)(rows - m) : kMaxRows;
      int widest = R <= kDecodeRows ? 1 : kTileGroups;
      for (int64_t n = n0; n < n1;) {
        int64_t g = n / kColumns, left = (n1 - n + kColumns - 1) / kColumns;
        int G = left < widest ? (int)left : widest;
        int64_t width = n1 - n < G * kColumns ? n1 - n : G * kColumns;
        // Whole tiles straight into C, a last partial group through `part`.
        float part[kMaxRows * kWidth];
        int whole = width == G * kColumns;
        kTilesVNNI[R - 1][G - 1](aq + m * k, k, sa + m * blocks, suma + m * blocks, blocks, blocks,
                                 blk, w + g * groupBytes, groupBytes, sw + g * groupMeta,
                                 zw ? zw + g * groupMeta : 0, groupMeta,
                                 whole ? c + m * ldc + n : part, whole ? ldc : kWidth);
        for (int r = 0; !whole && r < R; ++r)
          memcpy(c + (m + r) * ldc + n, part + r * kWidth, width * sizeof(float));
        n += width;
      }
    }
    return;
  }
#endif
  for (int64_t n = n0; n < n1; n += kColumns) {
    int64_t g = n / kColumns, width = n1 - n < kColumns ? n1 - n : kColumns;
    const uint8_t *wg = w + g * groupBytes;
    const float *sg = sw + g * groupMeta;
    const float *zg = zw ? zw + g * groupMeta : 0;
    for (int64_t m = 0; m < rows;) {
      float out[kMaxRows * kColumns];
      int R = 1;
#if defined(__x86_64__)
      if (level == 1) {
        // Up to four rows share each unpacked chunk of the group.
        R = rows - m < kMaxRows ? (int)(rows - m) : kMaxRows;
        kGroupsAVX2[R - 1](aq + m * k, k, sa + m * blocks, suma + m * blocks, blocks, blocks, blk,
                           wg, sg, zg, out, kColumns);
      } else
#endif
        groupScalar(aq + m * k, sa + m * blocks, suma + m * blocks, k, blk, wg, sg, zg, out);
      for (int r = 0; r < R; ++r)
        memcpy(c + (m + r) * ldc + n, out + r * kColumns, width * sizeof(float));
      m += R;
    }
  }
}

/// C[m, n0:n1] for all `rows` rows (n0 a multiple of 4) on the best path
/// this CPU has: `aq`, `sa`, `suma` A quantized as
/// lib/Conversion/ONNXToLinalg/Linear.cpp (quantizeRows) does; `w`, `sw`,
/// `zw` (null: zero point 8) from xfmr_uk_pack_q4. `blk` is a multiple of
/// 32. Each row's results depend on that row alone (on one path).
void xfmr_uk_matmul_q4q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const uint8_t *w, const float *sw,
                         const float *zw, int64_t n0, int64_t n1, float *c, int64_t ldc) {
  xfmr_uk_matmul_q4q8_at(2, aq, sa, suma, rows, k, blk, w, sw, zw, n0, n1, c, ldc);
}
