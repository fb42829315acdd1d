/*===- Collectives.c - collectives of tensor-parallel model code ----------===*
 *
 * Part of xfmr. See Collectives.h.
 *
 *===----------------------------------------------------------------------===*/

#include "Collectives.h"

#include <stdio.h>
#include <stdlib.h>
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

static xfmr_uk_stage_send_fn gSend;
static xfmr_uk_stage_transfer_fn gReceive, gBroadcast;
static void *gStageContext;
static uint64_t gSent, gReceived, gBroadcasted;

void xfmr_uk_set_pipeline(xfmr_uk_stage_send_fn send, xfmr_uk_stage_transfer_fn receive,
                          xfmr_uk_stage_transfer_fn broadcast, void *context) {
  gSend = send;
  gReceive = receive;
  gBroadcast = broadcast;
  gStageContext = context;
}

static void needPipeline(int installed) {
  if (installed)
    return;
  fprintf(stderr, "xfmr: a pipeline stage ran without its other stages (a "
                  "--pipeline-parallel artifact runs under mpirun)\n");
  abort();
}

void xfmr_uk_stage_send_f32(const float *in, int64_t count) {
  needPipeline(gSend != 0);
  __atomic_fetch_add(&gSent, (uint64_t)count, __ATOMIC_RELAXED);
  gSend(in, count, gStageContext);
}

void xfmr_uk_stage_receive_f32(float *out, int64_t count) {
  needPipeline(gReceive != 0);
  __atomic_fetch_add(&gReceived, (uint64_t)count, __ATOMIC_RELAXED);
  gReceive(out, count, gStageContext);
}

void xfmr_uk_stage_broadcast_f32(float *data, int64_t count) {
  needPipeline(gBroadcast != 0);
  __atomic_fetch_add(&gBroadcasted, (uint64_t)count, __ATOMIC_RELAXED);
  gBroadcast(data, count, gStageContext);
}

void xfmr_uk_stage_stats(uint64_t out[3]) {
  out[0] = __atomic_load_n(&gSent, __ATOMIC_RELAXED);
  out[1] = __atomic_load_n(&gReceived, __ATOMIC_RELAXED);
  out[2] = __atomic_load_n(&gBroadcasted, __ATOMIC_RELAXED);
}
