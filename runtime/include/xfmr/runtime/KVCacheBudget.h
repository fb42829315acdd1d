//===- KVCacheBudget.h - sizing the KV cache from available memory -*- C++ -*-===//
//
// Part of xfmr. Serving systems size the KV cache from the memory they may
// use rather than a fixed number (vLLM: gpu_memory_utilization, a fraction
// of the device's memory). Here the default is a fraction of MemAvailable,
// capped at what the workload can use at all (every request at its full
// length at once), so that a small run does not claim half the machine.
// The tools print the chosen size and where it came from.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_KVCACHEBUDGET_H
#define XFMR_RUNTIME_KVCACHEBUDGET_H

#include <cstdint>
#include <string>

namespace xfmr::rt {

/// The fraction of available memory the KV cache takes by default.
constexpr double kDefaultKVCacheFraction = 0.5;

/// A KV-cache size and why it is that size.
struct KVCacheBudget {
  uint64_t bytes = 0;
  /// "--kv-cache-bytes", "0.5 x MemAvailable (...)", ...
  std::string source;
  /// "KV cache budget: 96.0 MiB (source)": the tools' startup line.
  std::string describe() const;
};

/// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read.
uint64_t availableMemoryBytes();

/// The budget given on the command line.
KVCacheBudget explicitKVCacheBudget(uint64_t bytes, const std::string &flag);

/// The default budget: `fraction` of `availableBytes` (1 GiB when that is
/// 0, i.e. unknown), capped at `workloadBytes` (what every request at its
/// full length needs at once; 0: no cap).
KVCacheBudget defaultKVCacheBudget(uint64_t workloadBytes, uint64_t availableBytes,
                                   double fraction = kDefaultKVCacheFraction);

/// "24.0 KiB", "96.0 MiB", "30.6 GiB".
std::string formatBytes(uint64_t bytes);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_KVCACHEBUDGET_H
