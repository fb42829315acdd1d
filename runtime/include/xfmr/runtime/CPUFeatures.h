//===- CPUFeatures.h - x86 features an artifact may require -----*- C++ -*-===//
//
// Part of xfmr.
//
// A model.so compiled for one CPU dies of SIGILL on a CPU without the
// instructions it uses. xfmr-compile records the features the code may use
// (manifest target.requires, in LLVM's names: "avx2", "avx512f", ...) and
// the loader checks them against the host before dlopen. The table here is
// the one list both sides use: the compiler records only features in it, and
// the runtime refuses a feature it does not know how to check.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_CPUFEATURES_H
#define XFMR_RUNTIME_CPUFEATURES_H

#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

/// Whether `name` (an LLVM x86 feature name, without '+') is one the runtime
/// can check on the host.
bool isCheckableCPUFeature(std::string_view name);

/// Whether this CPU, and the operating system's saved register state, support
/// the feature (false for a name isCheckableCPUFeature rejects). AVX needs
/// the OS to save YMM state, AVX-512 ZMM state, AMX the tile state (Linux
/// enables it per process with arch_prctl; the runtime asks for it).
bool hostHasCPUFeature(std::string_view name);

/// The features of `required` the host lacks, in order, and those the
/// runtime cannot check (with a note).
std::vector<std::string> missingCPUFeatures(const std::vector<std::string> &required);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_CPUFEATURES_H
