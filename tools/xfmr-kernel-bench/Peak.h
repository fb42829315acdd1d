//===- Peak.h - register-only instruction throughput -------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TOOLS_KERNEL_BENCH_PEAK_H
#define XFMR_TOOLS_KERNEL_BENCH_PEAK_H

namespace xfmr::bench {

/// Prints, for each multiply-accumulate instruction the micro-kernels can
/// use and this CPU has, its throughput on one core with operands in
/// registers (24 independent accumulators): instructions/s, multiply-adds/s
/// and the ratio to 512-bit (else 256-bit) f32 FMA. The ceiling a precision's
/// products can reach here, e.g. bf16 prefill against fp32.
void printPeaks(double minSeconds);

} // namespace xfmr::bench

#endif // XFMR_TOOLS_KERNEL_BENCH_PEAK_H
