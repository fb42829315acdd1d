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

namespace xfmr::cpu {

struct HostTarget {
  std::string triple;
  std::string cpu;
  std::string features;
};

/// The machine xfmr runs on (`cpu` = "native"), or a named CPU ("generic",
/// "x86-64-v3", "skylake-avx512"...).
HostTarget resolveHostTarget(llvm::StringRef cpu = "native");

/// Translates `module` (LLVM dialect) to LLVM IR, adds the artifact ABI
/// (`xfmr_entry(void**)` calling `_mlir_ciface_<entry>`, `xfmr_abi_version`),
/// optimizes at `optLevel`, writes an object and links it into `soPath` with
/// the system C compiler driver. On failure, `error` says why.
mlir::LogicalResult emitSharedObject(mlir::ModuleOp module,
                                     const HostTarget &target,
                                     llvm::StringRef entry,
                                     llvm::StringRef soPath, int optLevel,
                                     std::string &error,
                                     std::string *llvmIR = nullptr);

} // namespace xfmr::cpu

#endif // XFMR_TARGET_CPU_OBJECTEMITTER_H
