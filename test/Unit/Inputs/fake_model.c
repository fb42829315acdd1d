/*===- fake_model.c - a hand-written model library for ArtifactTest -------===*
 *
 * Part of xfmr.
 *
 * Speaks abi_version 2 of docs/artifact.md like a compiled model.so, for a
 * manifest with one float32 input x of shape ["n"]. The weights are float32
 * values: weights[0] is a bias (0 when absent) and weights[1] selects how the
 * result y = 2 * x + bias comes back (0 when absent):
 *
 *   0  one output ["n"], contiguous
 *   1  one output ["n"], stored reversed: offset n - 1, stride -1
 *   2  two outputs ["n"] that are the same allocation
 *   3  one output ["n"], aligned = allocated + 16 bytes and offset 3
 *   4  one output ["n"] whose view reaches past its allocation (a bug)
 *   5  one output ["n"] that points into the weights (a bug)
 *   6  one output ["n"] broadcast from y[0] with stride 0
 *   7  one output [2, "n"]: out[j][i] = y[i] + 100 * j, returned as the
 *      transposed view (strides 1, 2) of an n x 2 buffer
 *   8  like 0, but a negative x fails run-time check 0 (status 1) after the
 *      output is allocated, as a check in a parallel loop does
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT const int32_t xfmr_abi_version = 2;

static int64_t word(const void *p) { return (int64_t)(intptr_t)p; }

/* Fills a rank-1 descriptor. */
static void setRank1(int64_t *d, void *allocated, void *aligned, int64_t offset,
                     int64_t size, int64_t stride) {
  d[0] = word(allocated);
  d[1] = word(aligned);
  d[2] = offset;
  d[3] = size;
  d[4] = stride;
}

EXPORT void xfmr_entry(void **args) {
  int64_t *out = (int64_t *)args[0];
  const int64_t *w = (const int64_t *)args[1];
  const int64_t *in = (const int64_t *)args[2];
  int64_t *status = (int64_t *)(intptr_t)((const int64_t *)args[3])[1];

  const float *weights = (const float *)(intptr_t)w[1];
  int64_t weightCount = w[3] / (int64_t)sizeof(float);
  float bias = weightCount > 0 ? weights[0] : 0.0f;
  int mode = weightCount > 1 ? (int)weights[1] : 0;

  const float *x = (const float *)(intptr_t)in[1] + in[2];
  int64_t n = in[3], stride = in[4];
  /* At least one element, so that malloc never returns null here. */
  size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);

  if (mode == 6) {
    float *y = (float *)malloc(sizeof(float));
    y[0] = n > 0 ? 2.0f * x[0] + bias : 0.0f;
    setRank1(out, y, y, 0, n, 0);
    return;
  }
  if (mode == 7) {
    float *buf = (float *)malloc(2 * bytes);
    for (int64_t i = 0; i < n; ++i) {
      buf[2 * i] = 2.0f * x[i * stride] + bias;
      buf[2 * i + 1] = buf[2 * i] + 100.0f;
    }
    out[0] = word(buf);
    out[1] = word(buf);
    out[2] = 0;
    out[3] = 2; /* sizes */
    out[4] = n;
    out[5] = 1; /* strides */
    out[6] = 2;
    return;
  }
  if (mode == 5) {
    setRank1(out, (void *)(intptr_t)w[0], (void *)(intptr_t)w[1], 0,
             n < weightCount ? n : weightCount, 1);
    return;
  }

  float *buf = (float *)malloc(bytes + 32);
  float *aligned = mode == 3 ? buf + 4 : buf;
  for (int64_t i = 0; i < n; ++i) {
    float y = 2.0f * x[i * stride] + bias;
    if (mode == 1)
      aligned[n - 1 - i] = y;
    else if (mode == 3)
      aligned[3 + i] = y;
    else
      aligned[i] = y;
  }
  if (mode == 8)
    for (int64_t i = 0; i < n; ++i)
      if (x[i * stride] < 0.0f)
        status[0] = 1;
  switch (mode) {
  case 1:
    setRank1(out, buf, aligned, n - 1, n, -1);
    break;
  case 2:
    setRank1(out, buf, aligned, 0, n, 1);
    setRank1(out + 5, buf, aligned, 0, n, 1);
    break;
  case 3:
    setRank1(out, buf, aligned, 3, n, 1);
    break;
  case 4:
    setRank1(out, buf, aligned, 1000000, n, 1);
    break;
  default:
    setRank1(out, buf, aligned, 0, n, 1);
    break;
  }
}
