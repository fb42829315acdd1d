//===- MoE.h - mixture-of-experts layer over routed tokens only --*- C -*-===//
//
// Part of xfmr. The micro-kernel generated code calls for xfmr.moe with
// constant f32 weights (MoE.c describes the algorithm and the layout), the
// packing the compiler runs on those weights, and the counters the runtime
// reads (expert weight bytes read, tokens routed).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_UKERNELS_MOE_H
#define XFMR_UKERNELS_MOE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Columns per packed panel; N is rounded up to a multiple.
enum { XFMR_UK_MOE_COLUMNS = 16 };

/// `flags` of xfmr_uk_moe_f32: bit 0 renormalises the top-k scores to sum
/// 1; bits 8-15 hold the activation (xfmr's Activation: 0 silu, 1 gelu,
/// 2 gelu_tanh, 3 relu).
enum { XFMR_UK_MOE_NORMALIZE = 1, XFMR_UK_MOE_ACTIVATION_SHIFT = 8 };

/// Floats of `count` packed [K, N] matrices.
int64_t xfmr_uk_moe_packed_floats(int64_t count, int64_t k, int64_t n);
/// Packs `count` row-major [K, N] matrices (`src`, one after the other)
/// into panels of 16 columns ([count][ceil(N / 16)][K][16], zero padded).
void xfmr_uk_moe_pack(const float *src, int64_t count, int64_t k, int64_t n, float *dst);

/// out[t] = sum over the top_k experts e of token t (softmax of
/// x[t] . router, highest first) of score(t, e) * down_e(act(x[t] . gate_e)
/// * (x[t] . up_e)) for t < rows. `x` [rows, H] and `out` [rows, H]
/// row-major; `router` packed [H, E], `wg`, `wu` packed [E][H, I], `wd`
/// packed [E][I, H]. Only the experts some token of the call selected are
/// read; each token's result depends on that token alone (the same FMA
/// order per element whatever the other rows). On allocation failure the
/// outputs are NaN.
void xfmr_uk_moe_f32(const float *x, int64_t rows, int64_t h, int64_t inter, int64_t experts,
                     int64_t topK, int64_t flags, const float *router, const float *wg,
                     const float *wu, const float *wd, float *out);

/// The same with the paths capped at `level` (2 AVX-512, 1 AVX2, 0 any
/// CPU), for tests that compare them bit for bit.
void xfmr_uk_moe_f32_at(int level, const float *x, int64_t rows, int64_t h, int64_t inter,
                        int64_t experts, int64_t topK, int64_t flags, const float *router,
                        const float *wg, const float *wu, const float *wd, float *out);

/// Counters over every call in the process: [0] calls, [1] tokens,
/// [2] token-expert assignments, [3] expert weight bytes read (each
/// selected expert's three matrices once per call).
void xfmr_uk_moe_stats(uint64_t out[4]);
void xfmr_uk_moe_reset_stats(void);

#ifdef __cplusplus
}
#endif

#endif // XFMR_UKERNELS_MOE_H
