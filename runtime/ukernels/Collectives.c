/*===- Collectives.c - collectives of tensor-parallel model code ----------===*
 *
 * Part of xfmr. See Collectives.h.
 *
 *===----------------------------------------------------------------------===*/

#include "Collectives.h"

#include <string.h>

static int64_t gRanks = 1;
static xfmr_uk_all_reduce_fn gAllReduce;
static xfmr_uk_all_gather_fn gAllGather;
static void *gContext;
static uint64_t gCalls, gFloats, gGathers, gGathered;

void xfmr_uk_set_collectives(int64_t ranks, xfmr_uk_all_reduce_fn allReduce,
                             xfmr_uk_all_gather_fn allGather, void *context) {
  gRanks = ranks < 1 ? 1 : ranks;
  gAllReduce = allReduce;
  gAllGather = allGather;
  gContext = context;
}

void xfmr_uk_all_reduce_f32(const float *in, float *out, int64_t count) {
  __atomic_fetch_add(&gCalls, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&gFloats, (uint64_t)count, __ATOMIC_RELAXED);
  if (gRanks > 1 && gAllReduce) {
    gAllReduce(in, out, count, gContext);
    return;
  }
  if (count > 0)
    memcpy(out, in, (size_t)count * sizeof(float));
}

void xfmr_uk_all_gather_f32(const float *in, float *out, int64_t rows, int64_t cols) {
  __atomic_fetch_add(&gGathers, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&gGathered, (uint64_t)(rows * cols), __ATOMIC_RELAXED);
  if (gRanks > 1 && gAllGather) {
    gAllGather(in, out, rows, cols, gContext);
    return;
  }
  if (rows * cols > 0)
    memcpy(out, in, (size_t)(rows * cols) * sizeof(float));
}

void xfmr_uk_collective_stats(uint64_t out[4]) {
  out[0] = __atomic_load_n(&gCalls, __ATOMIC_RELAXED);
  out[1] = __atomic_load_n(&gFloats, __ATOMIC_RELAXED);
  out[2] = __atomic_load_n(&gGathers, __ATOMIC_RELAXED);
  out[3] = __atomic_load_n(&gGathered, __ATOMIC_RELAXED);
}
