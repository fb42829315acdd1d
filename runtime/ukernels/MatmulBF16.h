//===- MatmulBF16.h - f32 activations x bfloat16 weights ---------*- C -*-===//
//
// Part of xfmr. The micro-kernel generated code calls for xfmr.linear with
// constant bf16 weights (MatmulBF16.c describes the layout), and the packing
// the compiler runs on those weights.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_UKERNELS_MATMULBF16_H
#define XFMR_UKERNELS_MATMULBF16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Columns per packed panel; N is rounded up to a multiple.
enum { XFMR_UK_BF16_COLUMNS = 16 };

/// Bytes of the packed [K, N] weights.
int64_t xfmr_uk_packed_bf16_bytes(int64_t n, int64_t k);
/// Packs row-major [K, N] bf16 weights `src` into `w`
/// (xfmr_uk_packed_bf16_bytes(n, k) bytes).
void xfmr_uk_pack_bf16(const uint16_t *src, int64_t k, int64_t n, uint16_t *w);
/// C[m, n0:n1] = A[m, :] . W[:, n0:n1] for m < rows: `a` row-major [rows, K],
/// `w` packed, `c` rows ldc floats apart; n0 a multiple of 16. Each row's
/// results depend on that row alone.
void xfmr_uk_matmul_f32bf16(const float *a, int64_t rows, int64_t k, const uint16_t *w,
                            int64_t n0, int64_t n1, float *c, int64_t ldc);

#ifdef __cplusplus
}
#endif

#endif // XFMR_UKERNELS_MATMULBF16_H
