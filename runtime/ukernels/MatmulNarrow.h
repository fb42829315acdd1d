//===- MatmulNarrow.h - f32 activations x bf16 / fp8 weights -----*- C -*-===//
//
// Part of xfmr. The micro-kernels generated code calls for xfmr.linear with
// constant bf16 or fp8 (e4m3fn) weights (MatmulNarrow.c describes the
// layout), and the packing the compiler runs on those weights.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_UKERNELS_MATMULNARROW_H
#define XFMR_UKERNELS_MATMULNARROW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Columns per packed panel; N is rounded up to a multiple.
enum { XFMR_UK_NARROW_COLUMNS = 16 };

/// Bytes of packed [K, N] weights of `elemBytes` (2: bf16, 1: fp8, int8) each.
int64_t xfmr_uk_packed_narrow_bytes(int64_t n, int64_t k, int64_t elemBytes);
/// Packs row-major [K, N] weights `src` into `w`
/// (xfmr_uk_packed_narrow_bytes(n, k, elemBytes) bytes).
void xfmr_uk_pack_narrow(const uint8_t *src, int64_t k, int64_t n, int64_t elemBytes,
                         uint8_t *w);
/// C[m, n0:n1] = A[m, :] . W[:, n0:n1] for m < rows: `a` row-major [rows, K],
/// `w` packed (bf16, fp8 e4m3fn or int8 elements), `c` rows ldc floats apart; n0 a
/// multiple of 16. Each row's results depend on that row alone.
void xfmr_uk_matmul_f32bf16(const float *a, int64_t rows, int64_t k, const uint8_t *w,
                            int64_t n0, int64_t n1, float *c, int64_t ldc);
void xfmr_uk_matmul_f32fp8(const float *a, int64_t rows, int64_t k, const uint8_t *w,
                           int64_t n0, int64_t n1, float *c, int64_t ldc);
void xfmr_uk_matmul_f32i8(const float *a, int64_t rows, int64_t k, const uint8_t *w, int64_t n0,
                          int64_t n1, float *c, int64_t ldc);

#ifdef __cplusplus
}
#endif

#endif // XFMR_UKERNELS_MATMULNARROW_H
