//===- GPUTarget.h - NVPTX targets, ptxas and kernel reports ----*- C++ -*-===//
//
// Part of xfmr.
//
// What differs between GPU targets lives here, behind one small table:
// the chip name, the PTX ISA its code needs, shared memory, and which
// tensor-core instructions exist. The passes and the driver ask this table
// instead of testing chip names.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TARGET_GPU_GPUTARGET_H
#define XFMR_TARGET_GPU_GPUTARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::gpu {

struct GPUTarget {
  /// As ptxas and the NVVM target spell it: sm_80, sm_90a.
  llvm::StringRef chip;
  /// LLVM NVPTX features: the PTX ISA version the code is written in.
  llvm::StringRef ptxFeatures;
  /// Compute capability major * 10 + minor; the loader refuses another.
  int computeCapability;
  /// Shared memory one block may use (opt-in maximum), bytes.
  int64_t sharedMemoryPerBlock;
  /// Warp-level tensor cores (mma.sync), warpgroup ones (wgmma), TMA.
  bool mmaSync;
  bool wgmma;
  bool tma;
  /// Peak HBM bandwidth of the reference part, bytes/s (for reports).
  double peakBytesPerSecond;
};

/// The targets xfmr compiles for.
llvm::ArrayRef<GPUTarget> knownGPUTargets();
const GPUTarget *lookupGPUTarget(llvm::StringRef chip);
/// "sm_80, sm_90a".
std::string knownGPUTargetNames();

/// The CUDA toolkit: $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, the directory
/// above the ptxas on $PATH, then /usr/local/cuda; nullopt when there is
/// no bin/ptxas in any of them.
std::optional<std::string> findCUDAToolkit();

/// What ptxas -v says of one kernel, and what its PTX uses.
struct KernelReport {
  std::string name;
  int64_t registers = 0;
  int64_t spillStores = 0;
  int64_t spillLoads = 0;
  int64_t stackBytes = 0;
  int64_t sharedBytes = 0;
  bool mmaSync = false;
  bool wgmma = false;
  bool cpAsync = false;
  bool tma = false;
};

/// The notable instructions `k` uses, in report order: "mma.sync",
/// "wgmma", "cp.async", "tma".
std::vector<llvm::StringRef> usedInstructions(const KernelReport &k);

/// Every `.entry` of `ptx`, with the instructions it uses.
std::vector<KernelReport> scanPTX(llvm::StringRef ptx);

/// Folds `ptxas -v` output into `kernels` (by name; unknown names are
/// added).
void parsePtxasReport(llvm::StringRef log, std::vector<KernelReport> &kernels);

/// Runs `ptxas -arch=<chip> -v -O3` on `ptx`, writing `cubinPath`; the
/// log (stderr) is returned in `log`. False with `error` set when ptxas
/// fails or cannot be run.
bool assemblePTX(llvm::StringRef toolkit, const GPUTarget &target, llvm::StringRef ptx,
                 llvm::StringRef cubinPath, std::string &log, std::string &error);

/// After buildGPUKernelsPipeline: writes each gpu.binary's PTX to
/// `dir`/kernels.ptx and, with a toolkit, assembles it to
/// `dir`/kernels.<chip>.cubin, which then replaces the PTX in the binary
/// (the host code loads the cubin; without ptxas the driver JIT-compiles
/// the PTX). Returns one report per kernel.
mlir::FailureOr<std::vector<KernelReport>>
assembleKernels(mlir::ModuleOp module, const GPUTarget &target,
                const std::optional<std::string> &toolkit, llvm::StringRef dir,
                std::string &error);

} // namespace xfmr::gpu

#endif // XFMR_TARGET_GPU_GPUTARGET_H
