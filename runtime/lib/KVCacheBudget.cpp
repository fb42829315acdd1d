//===- KVCacheBudget.cpp - sizing the KV cache from available memory ------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/KVCacheBudget.h"
#include "xfmr/runtime/Text.h"

#include <fstream>
#include <sstream>

namespace xfmr::rt {

std::string formatBytes(uint64_t bytes) {
  double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t(1) << 30))
    return formatString("%.1f GiB", b / (1 << 30));
  if (bytes >= (uint64_t(1) << 20))
    return formatString("%.1f MiB", b / (1 << 20));
  if (bytes >= (uint64_t(1) << 10))
    return formatString("%.1f KiB", b / (1 << 10));
  return formatString("%llu bytes", static_cast<unsigned long long>(bytes));
}

std::string KVCacheBudget::describe() const {
  return "KV cache budget: " + formatBytes(bytes) + " (" + source + ")";
}

uint64_t availableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    uint64_t kib = 0;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB")
      return kib * 1024;
  }
  return 0;
}

KVCacheBudget explicitKVCacheBudget(uint64_t bytes, const std::string &flag) {
  return {bytes, flag};
}

KVCacheBudget defaultKVCacheBudget(uint64_t workloadBytes, uint64_t availableBytes,
                                   double fraction) {
  std::string share =
      availableBytes
          ? formatString("%.2g x MemAvailable %s", fraction, formatBytes(availableBytes).c_str())
          : formatString("%.2g x 1 GiB, MemAvailable unknown", fraction);
  uint64_t base = availableBytes ? availableBytes : (uint64_t(1) << 30);
  uint64_t bytes = static_cast<uint64_t>(fraction * static_cast<double>(base));
  if (workloadBytes && workloadBytes <= bytes)
    return {workloadBytes, "every request at full length; " + share + " would be " +
                               formatBytes(bytes)};
  return {bytes, share};
}

} // namespace xfmr::rt
