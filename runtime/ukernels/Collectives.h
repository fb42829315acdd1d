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

/* Pipeline stages (xfmr-compile --pipeline-parallel=M): each stage's code
 * receives the residual stream from the previous stage, sends its own to
 * the next, and the last stage broadcasts the logits to every stage. */

/// Sends `count` floats to the next stage (send) or receives them from
/// the previous one (receive), point to point.
typedef void (*xfmr_uk_stage_send_fn)(const float *data, int64_t count, void *context);
typedef void (*xfmr_uk_stage_transfer_fn)(float *data, int64_t count, void *context);

/// Installs the pipeline transport (the runtime's, over MPI): `send` and
/// `receive` between neighbouring stages, `broadcast` of the logits from
/// the last stage (its buffer is the source there, the destination on
/// every other stage).
void xfmr_uk_set_pipeline(xfmr_uk_stage_send_fn send, xfmr_uk_stage_transfer_fn receive,
                          xfmr_uk_stage_transfer_fn broadcast, void *context);

/// Called by generated code for xfmr.stage_receive, xfmr.stage_send (a send
/// then a broadcast receive) and xfmr.stage_broadcast. Without a transport
/// (a stage run in one process) they end the process with a message.
void xfmr_uk_stage_send_f32(const float *in, int64_t count);
void xfmr_uk_stage_receive_f32(float *out, int64_t count);
void xfmr_uk_stage_broadcast_f32(float *data, int64_t count);

/// Counters: [0] floats sent, [1] floats received, [2] floats broadcast
/// (the logits, counted on every stage).
void xfmr_uk_stage_stats(uint64_t out[3]);

#ifdef __cplusplus
}
#endif

#endif /* XFMR_UKERNELS_COLLECTIVES_H */
