//===- CPUFeatures.cpp - x86 features an artifact may require -------------===//
//
// Part of xfmr.
//
// CPUID bits from the Intel SDM vol. 2A (CPUID) and AMD APM vol. 3; the OS
// state bits are XCR0's (SDM vol. 1, 13.3).
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/CPUFeatures.h"

#include <array>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace xfmr::rt {
namespace {

enum class Reg { EAX, EBX, ECX, EDX };
/// Register state the OS must save for a feature's registers to be usable.
enum class State { None, YMM, ZMM, Tile };

struct Feature {
  const char *name;
  unsigned leaf, subleaf;
  Reg reg;
  unsigned bit;
  State state;
};

constexpr Feature kFeatures[] = {
    {"sse", 1, 0, Reg::EDX, 25, State::None},
    {"sse2", 1, 0, Reg::EDX, 26, State::None},
    {"sse3", 1, 0, Reg::ECX, 0, State::None},
    {"pclmul", 1, 0, Reg::ECX, 1, State::None},
    {"ssse3", 1, 0, Reg::ECX, 9, State::None},
    {"fma", 1, 0, Reg::ECX, 12, State::YMM},
    {"cx16", 1, 0, Reg::ECX, 13, State::None},
    {"sse4.1", 1, 0, Reg::ECX, 19, State::None},
    {"sse4.2", 1, 0, Reg::ECX, 20, State::None},
    {"movbe", 1, 0, Reg::ECX, 22, State::None},
    {"popcnt", 1, 0, Reg::ECX, 23, State::None},
    {"aes", 1, 0, Reg::ECX, 25, State::None},
    {"xsave", 1, 0, Reg::ECX, 26, State::None},
    {"avx", 1, 0, Reg::ECX, 28, State::YMM},
    {"f16c", 1, 0, Reg::ECX, 29, State::YMM},
    {"rdrnd", 1, 0, Reg::ECX, 30, State::None},
    {"bmi", 7, 0, Reg::EBX, 3, State::None},
    {"avx2", 7, 0, Reg::EBX, 5, State::YMM},
    {"bmi2", 7, 0, Reg::EBX, 8, State::None},
    {"avx512f", 7, 0, Reg::EBX, 16, State::ZMM},
    {"avx512dq", 7, 0, Reg::EBX, 17, State::ZMM},
    {"rdseed", 7, 0, Reg::EBX, 18, State::None},
    {"adx", 7, 0, Reg::EBX, 19, State::None},
    {"avx512ifma", 7, 0, Reg::EBX, 21, State::ZMM},
    {"avx512cd", 7, 0, Reg::EBX, 28, State::ZMM},
    {"sha", 7, 0, Reg::EBX, 29, State::None},
    {"avx512bw", 7, 0, Reg::EBX, 30, State::ZMM},
    {"avx512vl", 7, 0, Reg::EBX, 31, State::ZMM},
    {"avx512vbmi", 7, 0, Reg::ECX, 1, State::ZMM},
    {"avx512vbmi2", 7, 0, Reg::ECX, 6, State::ZMM},
    {"gfni", 7, 0, Reg::ECX, 8, State::None},
    {"vaes", 7, 0, Reg::ECX, 9, State::YMM},
    {"vpclmulqdq", 7, 0, Reg::ECX, 10, State::YMM},
    {"avx512vnni", 7, 0, Reg::ECX, 11, State::ZMM},
    {"avx512bitalg", 7, 0, Reg::ECX, 12, State::ZMM},
    {"avx512vpopcntdq", 7, 0, Reg::ECX, 14, State::ZMM},
    {"amx-bf16", 7, 0, Reg::EDX, 22, State::Tile},
    {"avx512fp16", 7, 0, Reg::EDX, 23, State::ZMM},
    {"amx-tile", 7, 0, Reg::EDX, 24, State::Tile},
    {"amx-int8", 7, 0, Reg::EDX, 25, State::Tile},
    {"avxvnni", 7, 1, Reg::EAX, 4, State::YMM},
    {"avx512bf16", 7, 1, Reg::EAX, 5, State::ZMM},
    {"lzcnt", 0x80000001, 0, Reg::ECX, 5, State::None},
    {"sse4a", 0x80000001, 0, Reg::ECX, 6, State::None},
    {"prfchw", 0x80000001, 0, Reg::ECX, 8, State::None},
    {"xop", 0x80000001, 0, Reg::ECX, 11, State::YMM},
    {"fma4", 0x80000001, 0, Reg::ECX, 16, State::YMM},
};

const Feature *lookup(std::string_view name) {
  for (const Feature &f : kFeatures)
    if (name == f.name)
      return &f;
  return nullptr;
}

#if defined(__x86_64__) || defined(__i386__)
bool cpuidBit(const Feature &f) {
  unsigned regs[4] = {0, 0, 0, 0};
  unsigned maxLeaf = __get_cpuid_max(f.leaf & 0x80000000u, nullptr);
  if (maxLeaf < f.leaf)
    return false;
  __cpuid_count(f.leaf, f.subleaf, regs[0], regs[1], regs[2], regs[3]);
  return (regs[static_cast<int>(f.reg)] >> f.bit) & 1u;
}

/// XCR0, or 0 when the OS does not enable XSAVE (then no AVX state is saved).
uint64_t xcr0() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) // OSXSAVE
    return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

/// Linux gives a process the AMX tile data state only when asked
/// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA).
bool requestTileState() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

bool osSaves(State state) {
  uint64_t x = xcr0();
  switch (state) {
  case State::None:
    return true;
  case State::YMM:
    return (x & 0x6) == 0x6;
  case State::ZMM:
    return (x & 0xe6) == 0xe6;
  case State::Tile:
    return (x & 0x60006) == 0x60006 && requestTileState();
  }
  return false;
}
#endif

} // namespace

bool isCheckableCPUFeature(std::string_view name) { return lookup(name) != nullptr; }

bool hostHasCPUFeature(std::string_view name) {
  const Feature *f = lookup(name);
  if (!f)
    return false;
#if defined(__x86_64__) || defined(__i386__)
  return cpuidBit(*f) && osSaves(f->state);
#else
  return false;
#endif
}

std::vector<std::string> missingCPUFeatures(const std::vector<std::string> &required) {
  std::vector<std::string> missing;
  for (const std::string &name : required) {
    if (!isCheckableCPUFeature(name))
      missing.push_back(name + " (unknown to this runtime)");
    else if (!hostHasCPUFeature(name))
      missing.push_back(name);
  }
  return missing;
}

} // namespace xfmr::rt
