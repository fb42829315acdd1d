//===- QuantizeRows.c - f32 activations to int8 per block ------------------===//
//
// Part of xfmr.
//
// The activations of the accuracy_level-4 products (xfmr_uk_matmul_q4q8,
// xfmr_uk_matmul_q8q8), quantized as onnxruntime's MLAS does
// (QuantizeARow_CompInt8): per block of `blk` values of a row,
//   amax = max |a|, q = roundeven(a * (127 / amax)) (0 when amax is 0),
//   scale = amax / 127, sum = sum q.
// Every path computes the same IEEE operations (one multiply, one rounding
// to nearest even), so the same bytes: a row's quantization depends on
// that row alone. The generated code this replaces (linalg reductions
// lowered to scalar loops) took a fifth of an int8 prefill.
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

/// One block on any CPU.
static void blockScalar(const float *x, int64_t blk, int8_t *q, float *scale, int32_t *sum) {
  float amax = 0.0f;
  for (int64_t i = 0; i < blk; ++i)
    amax = fmaxf(amax, fabsf(x[i]));
  float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32_t total = 0;
  for (int64_t i = 0; i < blk; ++i) {
    int32_t v = (int32_t)nearbyintf(x[i] * inv);
    q[i] = (int8_t)v;
    total += v;
  }
  *scale = amax / 127.0f;
  *sum = total;
}

#if defined(__x86_64__)
/// One block with AVX-512: 16 values at a time, the tail masked.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
blockAVX512(const float *x, int64_t blk, int8_t *q, float *scale, int32_t *sum) {
  const __m512i absMask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512 m = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= blk; i += 16)
    m = _mm512_max_ps(m, _mm512_castsi512_ps(_mm512_and_si512(
                             _mm512_castps_si512(_mm512_loadu_ps(x + i)), absMask)));
  __mmask16 tail = (__mmask16)((1u << (blk - i)) - 1);
  if (tail)
    m = _mm512_max_ps(m, _mm512_castsi512_ps(_mm512_and_si512(
                             _mm512_castps_si512(_mm512_maskz_loadu_ps(tail, x + i)), absMask)));
  float amax = _mm512_reduce_max_ps(m);
  float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
  __m512 vinv = _mm512_set1_ps(inv);
  __m512i total = _mm512_setzero_si512();
  for (i = 0; i + 16 <= blk; i += 16) {
    // vcvtps2dq rounds to nearest even (the default MXCSR mode).
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
    _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(v));
    total = _mm512_add_epi32(total, v);
  }
  if (tail) {
    __m512i v = _mm512_maskz_cvtps_epi32(tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vinv));
    _mm_mask_storeu_epi8(q + i, tail, _mm512_cvtepi32_epi8(v));
    total = _mm512_add_epi32(total, v);
  }
  *scale = amax / 127.0f;
  *sum = _mm512_reduce_add_epi32(total);
}
#endif

void xfmr_uk_quantize_rows(const float *a, int64_t rows, int64_t k, int64_t blk, int8_t *aq,
                           float *scale, int32_t *sum) {
  int64_t blocks = (k + blk - 1) / blk, kp = blocks * blk;
  void (*block)(const float *, int64_t, int8_t *, float *, int32_t *) = blockScalar;
#if defined(__x86_64__)
  if (xfmr_uk_has_avx512())
    block = blockAVX512;
#endif
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      // The last block may be partial: its missing values are zeros, which
      // change neither the block's maximum nor its sum.
      int64_t count = k - b * blk < blk ? k - b * blk : blk;
      int8_t *q = aq + r * kp + b * blk;
      block(a + r * k + b * blk, count, q, scale + r * blocks + b, sum + r * blocks + b);
      memset(q + count, 0, (size_t)(blk - count));
    }
}
