//===- Peak.cpp - register-only instruction throughput --------------------===//
//
// Part of xfmr.
//
// Each loop keeps 24 accumulators in registers (more than latency x ports on
// any x86 core we know; 12 for 256-bit, each fed twice) and feeds them one
// instruction each per iteration, on zeros. Written in assembly (the
// assembler's .irp repeats an instruction over registers) so that no
// compiler keeps the accumulators in memory (GCC 12 does with intrinsics).
// Reported: the best of five timed runs of at least minSeconds / 5 each.
//
//===----------------------------------------------------------------------===//

#include "Peak.h"
#include "xfmr/runtime/CPUFeatures.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

namespace xfmr::bench {
namespace {

#if defined(__x86_64__)
constexpr int kChains = 24;

/// `INS` (with \r for the register number) once per register of REGS.
#define XFMR_EACH(REGS, INS) ".irp r," REGS "\n\t" INS "\n\t.endr\n\t"
#define XFMR_ZMM_ACC "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23"
#define XFMR_YMM_ACC "0,1,2,3,4,5,6,7,8,9,10,11"
#define XFMR_ZMM_CLOBBERS                                                                          \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",        \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",   \
      "xmm21", "xmm22", "xmm23", "xmm30", "xmm31"
#define XFMR_YMM_CLOBBERS                                                                          \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",        \
      "xmm11", "xmm12", "xmm13"

/// Zeroes the accumulators and the sources (no denormal results, which
/// take microcode assists on some cores), then runs n iterations of 24
/// instructions `INS` into accumulator \r from sources 30 and 31 (ymm: 12
/// and 13, so that plain AVX2 encodings do).
#define XFMR_ZMM_LOOP(TARGET, NAME, INS)                                                           \
  __attribute__((target(TARGET), noinline)) void NAME(int64_t n) {                             \
    __asm__ volatile(XFMR_EACH(XFMR_ZMM_ACC ",30,31", "vpxord %%zmm\\r, %%zmm\\r, %%zmm\\r")       \
                     ::: XFMR_ZMM_CLOBBERS);                                                       \
    for (int64_t i = 0; i < n; ++i)                                                                \
      __asm__ volatile(XFMR_EACH(XFMR_ZMM_ACC, INS " %%zmm30, %%zmm31, %%zmm\\r")                  \
                       ::: XFMR_ZMM_CLOBBERS);                                                     \
  }
XFMR_ZMM_LOOP("avx512f", fma512, "vfmadd231ps")
XFMR_ZMM_LOOP("avx512f,avx512bf16", dpbf16, "vdpbf16ps")
XFMR_ZMM_LOOP("avx512f,avx512vnni", dpbusd, "vpdpbusd")
#undef XFMR_ZMM_LOOP

__attribute__((target("avx2,fma"), noinline)) void fma256(int64_t n) {
  __asm__ volatile(XFMR_EACH(XFMR_YMM_ACC ",12,13", "vpxor %%ymm\\r, %%ymm\\r, %%ymm\\r")
                   ::: XFMR_YMM_CLOBBERS);
  for (int64_t i = 0; i < n; ++i)
    __asm__ volatile(XFMR_EACH(XFMR_YMM_ACC "," XFMR_YMM_ACC,
                               "vfmadd231ps %%ymm12, %%ymm13, %%ymm\\r")
                     ::: XFMR_YMM_CLOBBERS);
}

struct Instruction {
  const char *name;
  std::vector<std::string> features; // CPUFeatures.h names
  int macsPerInstruction;
  void (*loop)(int64_t);
};

/// Instructions per second of `loop`: best of five runs.
double rate(void (*loop)(int64_t), double minSeconds) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [&](int64_t n) {
    auto t0 = Clock::now();
    loop(n);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Grow n until one run takes about minSeconds / 5.
  int64_t n = 1 << 16;
  while (seconds(n) < minSeconds / 5 && n < (int64_t(1) << 40))
    n *= 2;
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    double perSecond = double(n) * kChains / seconds(n);
    best = perSecond > best ? perSecond : best;
  }
  return best;
}
#endif

} // namespace

void printPeaks(double minSeconds) {
#if defined(__x86_64__)
  const Instruction all[] = {
      {"vfmadd231ps ymm (f32)", {"avx2", "fma"}, 8, fma256},
      {"vfmadd231ps zmm (f32)", {"avx512f"}, 16, fma512},
      {"vdpbf16ps zmm (bf16)", {"avx512f", "avx512bf16"}, 32, dpbf16},
      {"vpdpbusd zmm (u8 x s8)", {"avx512f", "avx512vnni"}, 64, dpbusd},
  };
  std::printf("%-26s %14s %14s %12s\n", "instruction (1 core)", "G instr/s", "G mul-add/s",
              "vs f32 FMA");
  // Measure everything first: the ratios are to 512-bit FMA where the CPU
  // has it, else to 256-bit.
  double macs[std::size(all)] = {};
  double base = 0;
  for (size_t i = 0; i < std::size(all); ++i) {
    if (!rt::missingCPUFeatures(all[i].features).empty())
      continue;
    macs[i] = rate(all[i].loop, minSeconds) * all[i].macsPerInstruction;
    if (all[i].loop == fma512 || base == 0)
      base = macs[i];
  }
  for (size_t i = 0; i < std::size(all); ++i) {
    const Instruction &in = all[i];
    if (macs[i] == 0)
      std::printf("%-26s %14s\n", in.name, "(not on this CPU)");
    else
      std::printf("%-26s %14.2f %14.1f %11.2fx\n", in.name, macs[i] / in.macsPerInstruction / 1e9,
                  macs[i] / 1e9, macs[i] / base);
  }
#else
  (void)minSeconds;
  std::printf("--peak: x86-64 only\n");
#endif
}

} // namespace xfmr::bench
