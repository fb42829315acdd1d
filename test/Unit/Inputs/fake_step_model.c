/*===- fake_step_model.c - a hand-written step function for PagedKVTest ---===*
 *
 * Part of xfmr.
 *
 * Speaks abi_version 2 of docs/artifact.md like a model compiled with
 * --kv-cache=paged and one layer: inputs input_ids, positions, slot_mapping
 * [T] (int64), block_tables [N, M], context_lens [N], query_start_loc [N + 1]
 * (int32), logits_indices [N] (int64), key_cache.0 and value_cache.0
 * [num_blocks, block_size, 1, 1] (float32). It echoes what it received:
 * logits [N, 4] with row r = (input_ids[t], positions[t], slot_mapping[t],
 * context_lens[s]) for t = logits_indices[r] and the sequence s that owns
 * token t, and writes input_ids[t] into both pools at slot_mapping[t] (in
 * place, as a compiled step function writes K and V). A logits index
 * outside the packed tokens fails its run-time check 0 (status 1).
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT const int32_t xfmr_abi_version = 2;

/* The data pointer (aligned + offset) of a descriptor. */
static void *data(const int64_t *d, size_t elementSize) {
  return (char *)(intptr_t)d[1] + d[2] * (int64_t)elementSize;
}

EXPORT void xfmr_entry(void **args) {
  int64_t *out = (int64_t *)args[0];
  const int64_t *ids = (const int64_t *)args[2];
  const int64_t *pos = (const int64_t *)args[3];
  const int64_t *slots = (const int64_t *)args[4];
  const int64_t *lens = (const int64_t *)args[6];
  const int64_t *starts = (const int64_t *)args[7];
  const int64_t *rows = (const int64_t *)args[8];
  const int64_t *pools[2] = {(const int64_t *)args[9], (const int64_t *)args[10]};
  int64_t *status = (int64_t *)data((const int64_t *)args[11], 8);
  int64_t t = ids[3];
  int64_t n = lens[3];
  int64_t r = rows[3];
  const int64_t *row = (const int64_t *)data(rows, 8);
  const int64_t *id = (const int64_t *)data(ids, 8);
  const int64_t *p = (const int64_t *)data(pos, 8);
  const int64_t *slot = (const int64_t *)data(slots, 8);
  const int32_t *len = (const int32_t *)data(lens, 4);
  const int32_t *start = (const int32_t *)data(starts, 4);
  float *logits = (float *)calloc((size_t)(r > 0 ? r : 1) * 4, sizeof(float));
  for (int64_t k = 0; k < r; ++k) {
    int64_t i = row[k];
    if (i < 0 || i >= t)
      status[0] = 1;
    for (int64_t s = 0; s < n; ++s)
      if (i >= start[s] && i < start[s + 1] && i < t) {
        logits[4 * k + 0] = (float)id[i];
        logits[4 * k + 1] = (float)p[i];
        logits[4 * k + 2] = (float)slot[i];
        logits[4 * k + 3] = (float)len[s];
      }
  }
  for (int k = 0; k < 2; ++k) {
    float *pool = (float *)data(pools[k], 4);
    int64_t capacity = pools[k][3] * pools[k][4]; /* num_blocks * block_size */
    for (int64_t i = 0; i < t; ++i)
      if (slot[i] >= 0 && slot[i] < capacity)
        pool[slot[i]] = (float)id[i];
  }
  out[0] = (int64_t)(intptr_t)logits;
  out[1] = (int64_t)(intptr_t)logits;
  out[2] = 0;
  out[3] = r;
  out[4] = 4;
  out[5] = 4;
  out[6] = 1;
}
