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
/// 1; bit 1 scores the experts by sigmoids instead of a softmax; bit 2
/// replaces act(g) * u by gpt-oss's clamped SwiGLU; bits 3-5 say which
/// biases the constants buffer holds; bits 8-15 hold the activation
/// (xfmr's Activation: 0 silu, 1 gelu, 2 gelu_tanh, 3 relu); bits 16-23
/// the expert groups G and bits 24-31 the groups kept (group-limited
/// routing; 0 or 1 group: none).
enum {
  XFMR_UK_MOE_NORMALIZE = 1,
  XFMR_UK_MOE_SIGMOID = 2,
  XFMR_UK_MOE_CLAMPED_SWIGLU = 4,
  XFMR_UK_MOE_ROUTER_BIAS = 8,
  XFMR_UK_MOE_SELECTION_BIAS = 16,
  XFMR_UK_MOE_EXPERT_BIASES = 32,
  XFMR_UK_MOE_ACTIVATION_SHIFT = 8,
  XFMR_UK_MOE_GROUPS_SHIFT = 16,
  XFMR_UK_MOE_TOP_GROUPS_SHIFT = 24,
  XFMR_UK_MOE_MAX_GROUPS = 255
};

/// A layer's constants beyond its weights, one f32 buffer built at compile
/// time (null: the defaults, no biases): [0] the routed scale (1), [1] the
/// SwiGLU alpha (1), [2] its limit (inf), [3] the offset added to the
/// clamped up product (0); then, as the flags say, the router bias [E]
/// (added to the logits), the selection bias [E] (sigmoid routing: added
/// to the scores that choose, not to those that weight), and the experts'
/// gate, up and down biases [E][I], [E][I], [E][H] (added to each
/// product). Clamped SwiGLU: g' = min(g, limit), u' = clamp(u, -limit,
/// limit), act = g' * sigmoid(alpha * g') * (u' + offset).
enum { XFMR_UK_MOE_CONSTANTS_HEADER = 4 };
int64_t xfmr_uk_moe_constants_floats(int64_t flags, int64_t experts, int64_t h,
                                     int64_t inter);

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
/// Sigmoid scoring (DeepSeek-V3): the scores are sigmoid(x[t] . router);
/// experts are chosen by score + selection bias but weighted by the score;
/// with G groups (flags) a group's choice score is the sum of its two
/// highest, and only the experts of the top groups can be chosen. The
/// selected scores (renormalised with the flag) are multiplied by the
/// routed scale in either scoring. `constants`: see above (may be null).
void xfmr_uk_moe_f32(const float *x, int64_t rows, int64_t h, int64_t inter, int64_t experts,
                     int64_t topK, int64_t flags, const float *router, const float *wg,
                     const float *wu, const float *wd, const float *constants, float *out);

/// Expert weight formats of xfmr_uk_moe_narrow.
enum { XFMR_UK_MOE_F32 = 0, XFMR_UK_MOE_BF16 = 1, XFMR_UK_MOE_I8 = 2, XFMR_UK_MOE_FP8 = 3 };
/// xfmr_uk_moe_f32 with quantized experts (xfmr-compile --quant): `wg`,
/// `wu`, `wd` hold the E matrices one after the other, each packed by
/// xfmr_uk_pack_narrow (MatmulNarrow.h) in `format` (bf16, int8 or fp8
/// e4m3), widened exactly inside the products; `sg`, `su` ([E][I]) and `sd`
/// ([E][H]) scale the products' columns (int8, fp8; null for bf16). The
/// router stays f32. The same routing, order of additions and per-token
/// independence as xfmr_uk_moe_f32.
void xfmr_uk_moe_narrow(const float *x, int64_t rows, int64_t h, int64_t inter,
                        int64_t experts, int64_t topK, int64_t flags, int64_t format,
                        const float *router, const uint8_t *wg, const uint8_t *wu,
                        const uint8_t *wd, const float *sg, const float *su, const float *sd,
                        const float *constants, float *out);
/// The same with the paths capped at `level` (2 AVX-512, 1 AVX2, 0 any
/// CPU), for tests that compare them bit for bit.
void xfmr_uk_moe_f32_at(int level, const float *x, int64_t rows, int64_t h, int64_t inter,
                        int64_t experts, int64_t topK, int64_t flags, const float *router,
                        const float *wg, const float *wu, const float *wd,
                        const float *constants, float *out);

/// The shared expert of an xfmr.moe, added to `out` (the routed sum) for
/// t < rows: out[t] += s_t * down(act(x[t] . gate) * (x[t] . up)) with
/// s_t = sigmoid(x[t] . scale) (`scale` packed [H, 1]) or 1 (null). `wg`,
/// `wu` packed [H, I], `wd` packed [I, H]. Per-token results as above.
void xfmr_uk_moe_shared_f32(const float *x, int64_t rows, int64_t h, int64_t inter,
                            int64_t activation, const float *wg, const float *wu,
                            const float *wd, const float *scale, float *out);

/// Expert parallelism (xfmr-compile --expert-parallel=N): the runtime tells
/// the model library which rank it is. Rank r of N owns experts
/// [r * E / N, (r + 1) * E / N) of every layer; a call then computes only
/// the owned experts' terms of each token (every rank routes every token)
/// and xfmr_uk_moe_combine sums the ranks' partial outputs with `combine`
/// (an all-reduce; the runtime's, over MPI). With top_k <= 2 the sum has
/// at most two non-zero terms, so the result has the bits of one process.
/// Rank 0 of 1 (the default) computes everything and combines nothing.
typedef void (*xfmr_uk_moe_combine_fn)(float *data, int64_t count, void *context);
void xfmr_uk_moe_set_partition(int64_t rank, int64_t ranks, xfmr_uk_moe_combine_fn combine,
                               void *context);
/// Called by generated code once per layer after its calls: all-reduces
/// `count` floats of `out` across the ranks (nothing with one rank).
void xfmr_uk_moe_combine(float *out, int64_t count);

/// Counters over every call in the process: [0] calls, [1] tokens,
/// [2] token-expert assignments, [3] expert weight bytes read (each
/// selected expert's three matrices once per call), [4] the bytes of all
/// experts of those calls' layers (what a dense lowering reads).
void xfmr_uk_moe_stats(uint64_t out[5]);
/// Load statistics: the tokens routed to each expert of each MoE layer
/// (the (token, slot) pairs, so top_k per token), over every call since the
/// last reset. Layers are numbered in the order they first ran (up to 1024);
/// xfmr_uk_moe_expert_tokens fills up to `capacity` counts of `layer` and
/// returns its number of experts (0 for no such layer).
int64_t xfmr_uk_moe_load_layers(void);
int64_t xfmr_uk_moe_expert_tokens(int64_t layer, uint64_t *out, int64_t capacity);
/// Zeroes the counters above and the load statistics.
void xfmr_uk_moe_reset_stats(void);

#ifdef __cplusplus
}
#endif

#endif // XFMR_UKERNELS_MOE_H
