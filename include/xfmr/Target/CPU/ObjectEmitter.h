//===- ObjectEmitter.h - LLVM dialect to a host shared object ---*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TARGET_CPU_OBJECTEMITTER_H
#define XFMR_TARGET_CPU_OBJECTEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace xfmr::cpu {

struct HostTarget {
  std::string triple;
  std::string cpu;
  std::string features;
  /// The features the generated code may use that the runtime checks before
  /// loading it (manifest target.requires; runtime/CPUFeatures.h).
  std::vector<std::string> required;
};

/// The machine xfmr runs on (`cpu` = "native"), or a named x86-64 CPU
/// ("x86-64", "x86-64-v3", "x86-64-v4", "skylake-avx512", "znver4"...).
/// Fails, listing the known names, on a CPU LLVM does not know.
llvm::FailureOr<HostTarget> resolveHostTarget(llvm::StringRef cpu, std::string &error);

/// Translates `module` (LLVM dialect) to LLVM IR, adds the artifact ABI
/// (`xfmr_entry(void**)` calling `_mlir_ciface_<entry>`, `xfmr_abi_version`),
/// optimizes at `optLevel`, writes an object and links it into `soPath` with
/// the system C compiler driver. On failure, `error` says why.
///
/// With several cores and several functions (outlined layers), the functions
/// are split into partitions compiled on one thread each, one object per
/// partition, all linked into `soPath`; asking for `llvmIR` (the optimized
/// IR, printed) compiles one module on the calling thread, as does an MLIR
/// context with multithreading disabled.
mlir::LogicalResult emitSharedObject(mlir::ModuleOp module,
                                     const HostTarget &target,
                                     llvm::StringRef entry,
                                     llvm::StringRef soPath, int optLevel,
                                     std::string &error,
                                     std::string *llvmIR = nullptr);

} // namespace xfmr::cpu

#endif // XFMR_TARGET_CPU_OBJECTEMITTER_H
