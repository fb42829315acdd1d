//===- QuantizedMatmul.h - int4/int8 weights x int8 activations -*- C -*-===//
//
// Part of xfmr.
//
// The micro-kernels generated code calls for MatMulNBits at accuracy_level 4
// (4-bit weights: QuantizedMatmul.c, 8-bit: QuantizedMatmul8.c, which
// describe the layouts), the activations' int8 quantization they read
// (QuantizeRows.c), and the packing the compiler runs on the constant
// weights.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_UKERNELS_QUANTIZEDMATMUL_H
#define XFMR_UKERNELS_QUANTIZEDMATMUL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Rows [rows, K] of f32 activations quantized to int8 per block of `blk`
/// as onnxruntime's MLAS does: q [rows, Kp], scale and sum [rows, Kp / blk]
/// with Kp = K rounded up to a whole block, the last block's missing values
/// 0 (QuantizeRows.c); the kernels then take Kp as their K.
void xfmr_uk_quantize_rows(const float *a, int64_t rows, int64_t k, int64_t blk, int8_t *aq,
                           float *scale, int32_t *sum);

/// Columns per panel of the 4-bit kernel (16 columns x 8 k per 64-byte
/// line, two VNNI operands); N is rounded up to a multiple.
enum { XFMR_UK_Q4_COLUMNS = 16 };

int64_t xfmr_uk_packed_q4_bytes(int64_t n, int64_t k);
void xfmr_uk_pack_q4(const uint8_t *src, const float *scales, const float *zeros, int64_t n,
                     int64_t k, int64_t blk, uint8_t *w, float *sw, float *zw);
void xfmr_uk_matmul_q4q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const uint8_t *w, const float *sw,
                         const float *zw, int64_t n0, int64_t n1, float *c, int64_t ldc);
/// xfmr_uk_matmul_q4q8 on a given path, capped by what the CPU has (tests
/// compare them): 0 scalar, 1 AVX2, 2 AVX512-VNNI.
void xfmr_uk_matmul_q4q8_at(int level, const int8_t *aq, const float *sa, const int32_t *suma,
                            int64_t rows, int64_t k, int64_t blk, const uint8_t *w,
                            const float *sw, const float *zw, int64_t n0, int64_t n1, float *c,
                            int64_t ldc);

/// Columns per panel of the 8-bit kernel (16 columns x 4 k per 64-byte
/// line, VNNI's operand); N is rounded up to a multiple.
enum { XFMR_UK_Q8_COLUMNS = 16 };

int64_t xfmr_uk_packed_q8_bytes(int64_t n, int64_t k, int64_t blk);
void xfmr_uk_pack_q8(const uint8_t *src, int64_t ld, const float *scales, const uint8_t *zeros,
                     int64_t n, int64_t k, int64_t blk, uint8_t *w, float *sw, uint8_t *zw);
void xfmr_uk_matmul_q8q8(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows,
                         int64_t k, int64_t blk, const uint8_t *w, const float *sw,
                         const uint8_t *zw, int64_t n0, int64_t n1, float *c, int64_t ldc);
/// xfmr_uk_matmul_q8q8 on a given path, capped by what the CPU has (tests
/// compare them): 0 scalar, 1 AVX2, 2 AVX512-VNNI.
void xfmr_uk_matmul_q8q8_at(int level, const int8_t *aq, const float *sa, const int32_t *suma,
                            int64_t rows, int64_t k, int64_t blk, const uint8_t *w,
                            const float *sw, const uint8_t *zw, int64_t n0, int64_t n1, float *c,
                            int64_t ldc);

#ifdef __cplusplus
}
#endif

#endif // XFMR_UKERNELS_QUANTIZEDMATMUL_H
