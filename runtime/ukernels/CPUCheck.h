//===- CPUCheck.h - run-time CPU dispatch of the micro-kernels ---*- C -*-===//
//
// Part of xfmr. The micro-kernels are built for the baseline ISA and pick
// their AVX2 (or AVX-512) loops at run time, so an artifact that calls them
// needs no extra CPU feature.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_UKERNELS_CPUCHECK_H
#define XFMR_UKERNELS_CPUCHECK_H

/// Whether this CPU runs the AVX2 + FMA loops (computed once; racing first
/// calls compute the same value).
static inline int xfmr_uk_has_avx2(void) {
#if defined(__x86_64__)
  static int avx2 = -1;
  if (avx2 < 0) {
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }
  return avx2;
#else
  return 0;
#endif
}

/// Whether this CPU converts f16 to f32 in vector registers (F16C; every
/// AVX2 CPU has it, checked all the same).
static inline int xfmr_uk_has_f16c(void) {
#if defined(__x86_64__)
  static int f16c = -1;
  if (f16c < 0) {
    __builtin_cpu_init();
    f16c = __builtin_cpu_supports("f16c");
  }
  return f16c;
#else
  return 0;
#endif
}

/// Whether this CPU runs the AVX-512 tiles: AVX2 + FMA + F16C and AVX-512
/// F, BW and VL (Skylake-X and later Xeons, Zen 4 and later).
static inline int xfmr_uk_has_avx512(void) {
#if defined(__x86_64__)
  static int avx512 = -1;
  if (avx512 < 0) {
    __builtin_cpu_init();
    avx512 = xfmr_uk_has_avx2() && xfmr_uk_has_f16c() && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }
  return avx512;
#else
  return 0;
#endif
}

/// Whether this CPU also has AVX512-VNNI (vpdpbusd; Ice Lake, Zen 4 on).
static inline int xfmr_uk_has_avx512vnni(void) {
#if defined(__x86_64__)
  static int vnni = -1;
  if (vnni < 0) {
    __builtin_cpu_init();
    vnni = xfmr_uk_has_avx512() && __builtin_cpu_supports("avx512vnni");
  }
  return vnni;
#else
  return 0;
#endif
}

#endif // XFMR_UKERNELS_CPUCHECK_H
