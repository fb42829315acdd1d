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
// columns at a time so one activation load serves four weight streams.
//
// This file is built into libxfmr_ukernels.a and linked into every
// artifact whose code calls it (lib/Target/CPU/ObjectEmitter.cpp). It is
// plain C with no run-time dependency; the AVX2 path is chosen at
// run time, the scalar path gives the same integers on any CPU.
//
//===----------------------------------------------------------------------===//

#include "QuantizedMatmul.h"
#include "CPUCheck.h"

#include <stdint.h>

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
enum { kPrefetchBytes = 2048 };

/// One row of one column group with AVX2: per 32-value chunk, two 32-byte
/// loads hold four columns' nibbles; columns (0, 1) and (2, 3) share a
/// register, so each vpmaddubsw serves two columns.
__attribute__((target("avx2,fma"))) static void
groupAVX2(const int8_t *qa, const float *sa, const int32_t *suma, int64_t k, int64_t blk,
          const uint8_t *w, const float *sw, const float *zw, float out[kColumns]) {
  int64_t blocks = k / blk, chunks = blk / kChunk;
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  // Lane i of a block's int32 sums belongs to column i / 4 (of the pair).
  const __m256i pairLanes = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i pairLanes2 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  __m256 acc01 = _mm256_setzero_ps(), acc23 = _mm256_setzero_ps();
  __m128 corr = _mm_setzero_ps();
  const __m128 eight = _mm_set1_ps(8.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i dot01 = _mm256_setzero_si256(), dot23 = _mm256_setzero_si256();
    for (int64_t c = 0; c < chunks; ++c) {
      const int8_t *x = qa + b * blk + c * kChunk;
      __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x));
      __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 16)));
      const uint8_t *y = w + (b * chunks + c) * kColumns * 16;
      // Decode streams the weights from memory once: the hardware
      // prefetcher alone left the loop at 0.65 of the read bandwidth here
      // (measured on a 16 MB matrix), 32 lines ahead at 0.95.
      _mm_prefetch((const char *)y + kPrefetchBytes, _MM_HINT_T0);
      __m256i y01 = _mm256_loadu_si256((const __m256i *)y);
      __m256i y23 = _mm256_loadu_si256((const __m256i *)(y + 32));
      __m256i p01 = _mm256_add_epi16(
          _mm256_maddubs_epi16(_mm256_and_si256(y01, low), xlo),
          _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(y01, 4), low), xhi));
      __m256i p23 = _mm256_add_epi16(
          _mm256_maddubs_epi16(_mm256_and_si256(y23, low), xlo),
          _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(y23, 4), low), xhi));
      dot01 = _mm256_add_epi32(dot01, _mm256_madd_epi16(p01, ones));
      dot23 = _mm256_add_epi32(dot23, _mm256_madd_epi16(p23, ones));
    }
    _mm_prefetch((const char *)(sw + b * kColumns) + kPrefetchBytes / 4, _MM_HINT_T0);
    __m128 d = _mm_mul_ps(_mm_loadu_ps(sw + b * kColumns), _mm_set1_ps(sa[b]));
    __m256 d4 = _mm256_castps128_ps256(d);
    d4 = _mm256_insertf128_ps(d4, d, 1);
    acc01 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot01), _mm256_permutevar8x32_ps(d4, pairLanes),
                            acc01);
    acc23 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot23), _mm256_permutevar8x32_ps(d4, pairLanes2),
                            acc23);
    __m128 z = zw ? _mm_loadu_ps(zw + b * kColumns) : eight;
    corr = _mm_fmadd_ps(_mm_mul_ps(d, z), _mm_set1_ps((float)suma[b]), corr);
  }
  // Each column's four lanes: (0, 1) in acc01, (2, 3) in acc23.
  float lanes01[8], lanes23[8];
  _mm256_storeu_ps(lanes01, acc01);
  _mm256_storeu_ps(lanes23, acc23);
  float cr[4];
  _mm_storeu_ps(cr, corr);
  out[0] = (lanes01[0] + lanes01[1]) + (lanes01[2] + lanes01[3]) - cr[0];
  out[1] = (lanes01[4] + lanes01[5]) + (lanes01[6] + lanes01[7]) - cr[1];
  out[2] = (lanes23[0] + lanes23[1]) + (lanes23[2] + lanes23[3]) - cr[2];
  out[3] = (lanes23[4] + lanes23[5]) + (lanes23[6] + lanes23[7]) - cr[3];
}
#endif

/// C[m, n0:n1] for all `rows` rows (n0 a multiple of 4): `aq`, `sa`, `suma`
/// A quantized as lib/Conversion/ONNXToLinalg/Linear.cpp (quantizeRows)
/// does; `w`, `sw`, `zw` (null: zero point 8) from
/// xfmr_uk_pack_q4. `blk` is a multiple of 32.
void xfmr_uk_matmul_q4q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const uint8_t *w, const float *sw,
                         const float *zw, int64_t n0, int64_t n1, float *c, int64_t ldc) {
  int64_t blocks = k / blk;
  void (*group)(const int8_t *, const float *, const int32_t *, int64_t, int64_t,
                const uint8_t *, const float *, const float *, float *) = groupScalar;
#if defined(__x86_64__)
  if (xfmr_uk_has_avx2())
    group = groupAVX2;
#endif
  for (int64_t n = n0; n < n1; n += kColumns) {
    int64_t g = n / kColumns;
    const uint8_t *wg = w + g * blocks * kColumns * (blk / 2);
    const float *sg = sw + g * blocks * kColumns;
    const float *zg = zw ? zw + g * blocks * kColumns : 0;
    for (int64_t m = 0; m < rows; ++m) {
      float out[kColumns];
      group(aq + m * k, sa + m * blocks, suma + m * blocks, k, blk, wg, sg, zg, out);
      for (int j = 0; j < kColumns && n + j < n1; ++j)
        c[m * ldc + n + j] = out[j];
    }
  }
}
