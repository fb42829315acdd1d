// The 4-bit micro-kernel alone (runtime/ukernels/QuantizedMatmul.c), in G
// multiply-adds per second on one core, as generated code calls it: A's rows
// quantized once, then one call per 64 columns (QuantizedProducts.cpp's
// column tiles). Cases: rows 1, 16, 128 at K = 576 and 1536 (SmolLM2-135M's
// products), blocks of 32 and 128, f32 zero points; "mem" rows read the
// weights of 120 such matrices in turn (64+ MB, from memory, as decode).
//
// `bench-q4-kernel ROUNDS decode`: one decode token's products instead.
//
//   clang-22 -O3 -I. scripts/bench-q4-kernel.c runtime/ukernels/QuantizedMatmul.c \
//     runtime/ukernels/QuantizeRows.c -lm -o /tmp/bench-q4 && /tmp/bench-q4
//
// With -DXFMR_BENCH_OLD and an old copy of the kernel built with its
// symbols prefixed old_ (see docs/quantization.md), both run alternately.
// XFMR_BENCH_LEVEL=1 runs the AVX2 path (0 the scalar one).
#include "runtime/ukernels/QuantizedMatmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int64_t (*BytesFn)(int64_t, int64_t);
typedef void (*PackFn)(const uint8_t *, const float *, const float *, int64_t, int64_t, int64_t,
                       uint8_t *, float *, float *);
typedef void (*MatmulFn)(const int8_t *, const float *, const int32_t *, int64_t, int64_t, int64_t,
                         const uint8_t *, const float *, const float *, int64_t, int64_t, float *,
                         int64_t);
struct Kernel {
  const char *name;
  int columns;
  BytesFn bytes;
  PackFn pack;
  MatmulFn matmul;
};

#ifdef XFMR_BENCH_OLD
int64_t old_xfmr_uk_packed_q4_bytes(int64_t n, int64_t k);
void old_xfmr_uk_pack_q4(const uint8_t *, const float *, const float *, int64_t, int64_t, int64_t,
                         uint8_t *, float *, float *);
void old_xfmr_uk_matmul_q4q8(const int8_t *, const float *, const int32_t *, int64_t, int64_t,
                             int64_t, const uint8_t *, const float *, const float *, int64_t,
                             int64_t, float *, int64_t);
void old_xfmr_uk_matmul_q4q8_at(int, const int8_t *, const float *, const int32_t *, int64_t,
                                int64_t, int64_t, const uint8_t *, const float *, const float *,
                                int64_t, int64_t, float *, int64_t);
#endif

/// XFMR_BENCH_LEVEL=1 (AVX2) or 0 (scalar): the kernels on that path.
static int level = 2;
static void newAt(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows, int64_t k,
                  int64_t blk, const uint8_t *w, const float *sw, const float *zw, int64_t n0,
                  int64_t n1, float *c, int64_t ldc) {
  xfmr_uk_matmul_q4q8_at(level, aq, sa, suma, rows, k, blk, w, sw, zw, n0, n1, c, ldc);
}
#ifdef XFMR_BENCH_OLD
static void oldAt(const int8_t *aq, const float *sa, const int32_t *suma, int64_t rows, int64_t k,
                  int64_t blk, const uint8_t *w, const float *sw, const float *zw, int64_t n0,
                  int64_t n1, float *c, int64_t ldc) {
  old_xfmr_uk_matmul_q4q8_at(level, aq, sa, suma, rows, k, blk, w, sw, zw, n0, n1, c, ldc);
}
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); // CPU time: less noise on a shared VM
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

struct Weights {
  uint8_t *w;
  float *sw, *zw;
};

static void pack(const struct Kernel *kn, int64_t n, int64_t k, int64_t blk, unsigned seed,
                 struct Weights *out) {
  int64_t blocks = k / blk, padded = (n + 15) / 16 * 16;
  uint8_t *src = malloc(n * k / 2);
  float *s = malloc(n * blocks * sizeof(float)), *z = malloc(n * blocks * sizeof(float));
  srand(seed);
  for (int64_t i = 0; i < n * k / 2; ++i)
    src[i] = (uint8_t)rand();
  for (int64_t i = 0; i < n * blocks; ++i) {
    s[i] = 0.001f + 0.01f * (rand() % 100);
    z[i] = (float)(rand() % 16) + 0.25f;
  }
  out->w = aligned_alloc(64, (kn->bytes(n, k) + 63) / 64 * 64);
  out->sw = aligned_alloc(64, padded * blocks * sizeof(float));
  out->zw = aligned_alloc(64, padded * blocks * sizeof(float));
  kn->pack(src, s, z, n, k, blk, out->w, out->sw, out->zw);
  free(src);
  free(s);
  free(z);
}

/// Seconds per product (best of `rounds`), the weights of `copies` matrices in turn.
static double run(const struct Kernel *kn, int64_t rows, int64_t n, int64_t k, int64_t blk,
                  int copies, int rounds) {
  int64_t blocks = k / blk;
  struct Weights *ws = malloc(copies * sizeof(struct Weights));
  for (int i = 0; i < copies; ++i)
    pack(kn, n, k, blk, 7 + i, &ws[i]);
  float *a = malloc(rows * k * sizeof(float)), *c = malloc(rows * n * sizeof(float));
  for (int64_t i = 0; i < rows * k; ++i)
    a[i] = (float)(rand() % 2000 - 1000) / 500.0f;
  int8_t *aq = malloc(rows * k);
  float *sa = malloc(rows * blocks * sizeof(float));
  int32_t *suma = malloc(rows * blocks * sizeof(int32_t));
  xfmr_uk_quantize_rows(a, rows, k, blk, aq, sa, suma);
  double best = 1e9;
  int64_t iters = 1;
  for (int r = 0; r < rounds; ++r) {
    double t0 = now();
    for (int64_t it = 0; it < iters; ++it) {
      struct Weights *wt = &ws[it % copies];
      for (int64_t n0 = 0; n0 < n; n0 += 64)
        kn->matmul(aq, sa, suma, rows, k, blk, wt->w, wt->sw, wt->zw, n0,
                   n0 + 64 < n ? n0 + 64 : n, c, n);
    }
    double dt = (now() - t0) / iters;
    if (dt < best)
      best = dt;
    if ((now() - t0) < 0.05 && r == 0) { // calibrate: ~0.1 s per round
      iters = (int64_t)(0.1 / (dt > 1e-7 ? dt : 1e-7)) + 1;
      best = 1e9;
    }
  }
  for (int i = 0; i < copies; ++i) {
    free(ws[i].w);
    free(ws[i].sw);
    free(ws[i].zw);
  }
  free(ws);
  free(a);
  free(c);
  free(aq);
  free(sa);
  free(suma);
  return best;
}

/// One decode token of SmolLM2-135M's int4-g32 products (30 layers of q, k,
/// v, o, gate, up, down; 1 row, 80 MB of weights and scales from memory):
/// ms per token, best of `rounds` (after one warm-up token).
static double decodeToken(const struct Kernel *kn, int rows, int rounds) {
  enum { kLayers = 30, kProducts = 7 };
  const int64_t shapes[kProducts][2] = {{576, 576},  {576, 192},  {576, 192}, {576, 576},
                                        {576, 1536}, {576, 1536}, {1536, 576}};
  const int64_t blk = 32;
  struct Weights ws[kLayers][kProducts];
  for (int l = 0; l < kLayers; ++l)
    for (int p = 0; p < kProducts; ++p)
      pack(kn, shapes[p][1], shapes[p][0], blk, 100 * l + p, &ws[l][p]);
  float *a = malloc(rows * 1536 * sizeof(float)), *c = malloc(rows * 1536 * sizeof(float));
  for (int64_t i = 0; i < rows * 1536; ++i)
    a[i] = (float)(rand() % 2000 - 1000) / 500.0f;
  int8_t *aq = malloc(rows * 1536);
  float *sa = malloc(rows * 48 * sizeof(float));
  int32_t *suma = malloc(rows * 48 * sizeof(int32_t));
  double best = 1e9;
  for (int r = 0; r <= rounds; ++r) {
    double t0 = now();
    for (int l = 0; l < kLayers; ++l)
      for (int p = 0; p < kProducts; ++p) {
        int64_t k = shapes[p][0], n = shapes[p][1];
        xfmr_uk_quantize_rows(a, rows, k, blk, aq, sa, suma);
        for (int64_t n0 = 0; n0 < n; n0 += 64)
          kn->matmul(aq, sa, suma, rows, k, blk, ws[l][p].w, ws[l][p].sw,
                     getenv("XFMR_BENCH_NO_ZEROS") ? 0 : ws[l][p].zw, n0,
                     n0 + 64 < n ? n0 + 64 : n, c, n);
      }
    double dt = now() - t0;
    if (r > 0 && dt < best)
      best = dt;
  }
  for (int l = 0; l < kLayers; ++l)
    for (int p = 0; p < kProducts; ++p) {
      free(ws[l][p].w);
      free(ws[l][p].sw);
      free(ws[l][p].zw);
    }
  free(a);
  free(c);
  free(aq);
  free(sa);
  free(suma);
  return best * 1e3;
}

int main(int argc, char **argv) {
  struct Kernel kernels[2] = {
      {"new", XFMR_UK_Q4_COLUMNS, xfmr_uk_packed_q4_bytes, xfmr_uk_pack_q4, xfmr_uk_matmul_q4q8},
#ifdef XFMR_BENCH_OLD
      {"old", 4, old_xfmr_uk_packed_q4_bytes, old_xfmr_uk_pack_q4, old_xfmr_uk_matmul_q4q8},
#endif
  };
  if (getenv("XFMR_BENCH_LEVEL")) {
    level = atoi(getenv("XFMR_BENCH_LEVEL"));
    kernels[0].matmul = newAt;
#ifdef XFMR_BENCH_OLD
    kernels[1].matmul = oldAt;
#endif
  }
  int nk = 1;
#ifdef XFMR_BENCH_OLD
  nk = 2;
#endif
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (argc > 2 && !strcmp(argv[2], "decode")) {
    for (int round = 0; round < 3; ++round)
      for (int j = 0; j < nk; ++j)
        printf("decode token (30 layers, 1 row, g32): %s %.3f ms\n", kernels[j].name,
               decodeToken(&kernels[j], 1, rounds));
    return 0;
  }
  struct {
    int64_t rows, k, n, blk;
    int copies;
  } cases[] = {{1, 576, 1536, 32, 1},   {1, 1536, 576, 32, 1},   {16, 576, 1536, 32, 1},
               {16, 1536, 576, 32, 1},  {128, 576, 1536, 32, 1}, {128, 1536, 576, 32, 1},
               {128, 1536, 576, 128, 1}, {16, 1536, 576, 128, 1}, {1, 1536, 576, 128, 1},
               {1, 576, 1536, 32, 120}, {4, 576, 1536, 32, 120}};
  printf("%-4s %5s %5s %5s %4s %6s  %s\n", "rows", "K", "N", "blk", "mem", "kernel",
         "G MAC/s (us per product)");
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i)
    for (int j = 0; j < nk; ++j) {
      double t = run(&kernels[j], cases[i].rows, cases[i].n, cases[i].k, cases[i].blk,
                     cases[i].copies, rounds);
      double macs = (double)cases[i].rows * cases[i].k * cases[i].n;
      printf("%-4lld %5lld %5lld %5lld %4s %6s  %7.1f (%.1f)\n", (long long)cases[i].rows,
             (long long)cases[i].k, (long long)cases[i].n, (long long)cases[i].blk,
             cases[i].copies > 1 ? "yes" : "no", kernels[j].name, macs / t * 1e-9, t * 1e6);
      fflush(stdout);
    }
  return 0;
}
