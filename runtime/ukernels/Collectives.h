/*===- Collectives.h - collectives of tensor-parallel model code ----------===*
 *
 * Part of xfmr. An artifact compiled with `xfmr-compile --tensor-parallel=N`
 * runs as N MPI processes; its generated code sums the row-parallel
 * projections' partial outputs with xfmr_uk_all_reduce_f32 (one call per
 * xfmr.all_reduce). The runtime (runtime/lib/ExpertParallel.cpp) installs
 * the transport with xfmr_uk_set_collectives after MPI starts; without it
 * (one process) the sum over one rank is a copy. See docs/parallelism.md.
 *
 *===----------------------------------------------------------------------===*/

#ifndef XFMR_UKERNELS_COLLECTIVES_H
#define XFMR_UKERNELS_COLLECTIVES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// out = the sum over the ranks of every rank's `in` (`count` floats), in
/// rank order on every rank. `in` and `out` do not overlap.
typedef void (*xfmr_uk_all_reduce_fn)(const float *in, float *out, int64_t count,
                                      void *context);

/// out ([rows, ranks * cols]) = every rank's `in` ([rows, cols]) side by
/// side in rank order, on every rank.
typedef void (*xfmr_uk_all_gather_fn)(const float *in, float *out, int64_t rows, int64_t cols,
                                      void *context);

/// Installs the transport (the runtime's, over MPI) for `ranks` ranks.
void xfmr_uk_set_collectives(int64_t ranks, xfmr_uk_all_reduce_fn allReduce,
                             xfmr_uk_all_gather_fn allGather, void *context);

/// Called by generated code for each xfmr.all_reduce.
void xfmr_uk_all_reduce_f32(const float *in, float *out, int64_t count);

/// Called by generated code for each xfmr.all_gather: `in` [rows, cols],
/// `out` [rows, ranks * cols] (cols = its width in one process).
void xfmr_uk_all_gather_f32(const float *in, float *out, int64_t rows, int64_t cols);

/// Counters over every call in the process: [0] all-reduce calls, [1] the
/// floats they summed (per rank), [2] all-gather calls, [3] the floats each
/// rank contributed to them.
void xfmr_uk_collective_stats(uint64_t out[4]);

#ifdef __cplusplus
}
#endif

#endif /* XFMR_UKERNELS_COLLECTIVES_H */
