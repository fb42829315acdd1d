//===- Peak.cpp - register-only instruction throughput --------------------===//
//
// Part of xfmr.
//
// Each loop keeps 24 accumulators in registers (more than latency x ports on
// any x86 core we know; 12 for 256-bit, each fed twice) and feeds them one
// instruction each per iteration, on zeros.
// Reported: the best of five timed runs of at least minSeconds / 5 each.
//
//===----------------------------------------------------------------------===//

#include "Peak.h"

#include <chrono>
#include <cstdint>
#include <iterator>
#include <cstdio>
#include <string_view>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xfmr::bench {
namespace {

constexpr int kChains = 24;

#if defined(__x86_64__)
// One iteration: 24 instructions into registers 0-23 from registers 30 and
// 31 (ymm: 12 and 13 as sources, so that plain AVX2 encodings do; the
// accumulators then are 0-11 twice). Written in assembly so that no
// compiler keeps the accumulators in memory (GCC 12 does with intrinsics).
#define XFMR_PEAK_LOOP(TARGET, NAME, ZERO, BODY, CLOBBERS)                                        \
  __attribute__((target(TARGET), noinline)) double NAME(int64_t n) {                           \
    __asm__ volatile(ZERO ::: CLOBBERS);                                                           \
    for (int64_t i = 0; i < n; ++i)                                                                \
      __asm__ volatile(BODY ::: CLOBBERS);                                                         \
    return 0;                                                                                      \
  }
#define XFMR_ZMM_CLOBBERS                                                                          \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",        \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",   \
      "xmm21", "xmm22", "xmm23", "xmm30", "xmm31"
// Zero accumulators and sources: no denormal results (which take microcode
// assists on some cores).
#define XFMR_ZMM_ZERO "vpxord %%zmm0, %%zmm0, %%zmm0\n\tvpxord %%zmm1, %%zmm1, %%zmm1\n\tvpxord %%zmm2, %%zmm2, %%zmm2\n\tvpxord %%zmm3, %%zmm3, %%zmm3\n\tvpxord %%zmm4, %%zmm4, %%zmm4\n\tvpxord %%zmm5, %%zmm5, %%zmm5\n\tvpxord %%zmm6, %%zmm6, %%zmm6\n\tvpxord %%zmm7, %%zmm7, %%zmm7\n\tvpxord %%zmm8, %%zmm8, %%zmm8\n\tvpxord %%zmm9, %%zmm9, %%zmm9\n\tvpxord %%zmm10, %%zmm10, %%zmm10\n\tvpxord %%zmm11, %%zmm11, %%zmm11\n\tvpxord %%zmm12, %%zmm12, %%zmm12\n\tvpxord %%zmm13, %%zmm13, %%zmm13\n\tvpxord %%zmm14, %%zmm14, %%zmm14\n\tvpxord %%zmm15, %%zmm15, %%zmm15\n\tvpxord %%zmm16, %%zmm16, %%zmm16\n\tvpxord %%zmm17, %%zmm17, %%zmm17\n\tvpxord %%zmm18, %%zmm18, %%zmm18\n\tvpxord %%zmm19, %%zmm19, %%zmm19\n\tvpxord %%zmm20, %%zmm20, %%zmm20\n\tvpxord %%zmm21, %%zmm21, %%zmm21\n\tvpxord %%zmm22, %%zmm22, %%zmm22\n\tvpxord %%zmm23, %%zmm23, %%zmm23\n\t" "vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"
#define XFMR_YMM_ZERO "vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\tvpxor %%ymm2, %%ymm2, %%ymm2\n\tvpxor %%ymm3, %%ymm3, %%ymm3\n\tvpxor %%ymm4, %%ymm4, %%ymm4\n\tvpxor %%ymm5, %%ymm5, %%ymm5\n\tvpxor %%ymm6, %%ymm6, %%ymm6\n\tvpxor %%ymm7, %%ymm7, %%ymm7\n\tvpxor %%ymm8, %%ymm8, %%ymm8\n\tvpxor %%ymm9, %%ymm9, %%ymm9\n\tvpxor %%ymm10, %%ymm10, %%ymm10\n\tvpxor %%ymm11, %%ymm11, %%ymm11\n\tvpxor %%ymm12, %%ymm12, %%ymm12\n\tvpxor %%ymm13, %%ymm13, %%ymm13\n\t"
#define XFMR_YMM_CLOBBERS                                                                          \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13"

XFMR_PEAK_LOOP("avx2,fma", fma256, XFMR_YMM_ZERO,
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t",
        XFMR_YMM_CLOBBERS)
XFMR_PEAK_LOOP("avx512f", fma512, XFMR_ZMM_ZERO,
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm2\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm7\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm8\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm9\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm10\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm11\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm12\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm13\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm14\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm15\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm16\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm17\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm18\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm19\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm20\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm21\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm22\n\t"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm23\n\t",
        XFMR_ZMM_CLOBBERS)
XFMR_PEAK_LOOP("avx512f,avx512bf16", dpbf16, XFMR_ZMM_ZERO,
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm0\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm1\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm2\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm3\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm4\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm5\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm6\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm7\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm8\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm9\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm10\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm11\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm12\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm13\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm14\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm15\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm16\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm17\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm18\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm19\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm20\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm21\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm22\n\t"
        "vdpbf16ps %%zmm30, %%zmm31, %%zmm23\n\t",
        XFMR_ZMM_CLOBBERS)
XFMR_PEAK_LOOP("avx512f,avx512vnni", dpbusd, XFMR_ZMM_ZERO,
        "vpdpbusd %%zmm30, %%zmm31, %%zmm0\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm1\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm2\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm3\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm4\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm5\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm6\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm7\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm8\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm9\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm10\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm11\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm12\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm13\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm14\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm15\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm16\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm17\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm18\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm19\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm20\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm21\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm22\n\t"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm23\n\t",
        XFMR_ZMM_CLOBBERS)
#undef XFMR_PEAK_LOOP

struct Instruction {
  const char *name;
  const char *feature; // __builtin_cpu_supports name
  const char *feature2;
  int macsPerInstruction;
  double (*loop)(int64_t);
};

/// Instructions per second of `loop`: best of five runs.
double rate(double (*loop)(int64_t), double minSeconds) {
  using Clock = std::chrono::steady_clock;
  int64_t n = 1 << 16;
  volatile double sink = 0;
  // Grow n until one run takes about minSeconds / 5.
  for (;;) {
    auto t0 = Clock::now();
    sink = sink + loop(n);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= minSeconds / 5 || n >= (int64_t(1) << 40))
      break;
    n *= 2;
  }
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    sink = sink + loop(n);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    double perSecond = double(n) * kChains / s;
    best = perSecond > best ? perSecond : best;
  }
  return best;
}
#endif

} // namespace

void printPeaks(double minSeconds) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  auto has = [](const char *f) {
    if (!f)
      return true;
    // __builtin_cpu_supports needs a literal: the names we use.
    std::string_view s(f);
    if (s == "avx2")
      return bool(__builtin_cpu_supports("avx2"));
    if (s == "fma")
      return bool(__builtin_cpu_supports("fma"));
    if (s == "avx512f")
      return bool(__builtin_cpu_supports("avx512f"));
    if (s == "avx512bf16")
      return bool(__builtin_cpu_supports("avx512bf16"));
    if (s == "avx512vnni")
      return bool(__builtin_cpu_supports("avx512vnni"));
    return false;
  };
  const Instruction all[] = {
      {"vfmadd231ps ymm (f32)", "avx2", "fma", 8, fma256},
      {"vfmadd231ps zmm (f32)", "avx512f", nullptr, 16, fma512},
      {"vdpbf16ps zmm (bf16)", "avx512f", "avx512bf16", 32, dpbf16},
      {"vpdpbusd zmm (u8 x s8)", "avx512f", "avx512vnni", 64, dpbusd},
  };
  std::printf("%-26s %14s %14s %12s\n", "instruction (1 core)", "G instr/s", "G mul-add/s",
              "vs f32 FMA");
  // Measure everything first: the ratios are to 512-bit FMA where the CPU
  // has it, else to 256-bit.
  double macs[std::size(all)] = {};
  double base = 0;
  for (size_t i = 0; i < std::size(all); ++i) {
    const Instruction &in = all[i];
    if (!has(in.feature) || !has(in.feature2))
      continue;
    macs[i] = rate(in.loop, minSeconds) * in.macsPerInstruction;
    if (in.loop == fma512 || (in.loop == fma256 && base == 0))
      base = macs[i];
  }
  for (size_t i = 0; i < std::size(all); ++i) {
    const Instruction &in = all[i];
    if (macs[i] == 0) {
      std::printf("%-26s %14s\n", in.name, "(not on this CPU)");
      continue;
    }
    std::printf("%-26s %14.2f %14.1f %11.2fx\n", in.name, macs[i] / in.macsPerInstruction / 1e9,
                macs[i] / 1e9, macs[i] / base);
  }
#else
  (void)minSeconds;
  std::printf("--peak: x86-64 only\n");
#endif
}

} // namespace xfmr::bench
