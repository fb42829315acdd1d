//===- CUDA.h - the CUDA driver, loaded at run time -------------*- C++ -*-===//
//
// Part of xfmr.
//
// GPU artifacts (xfmr-compile --target=sm_90a|sm_80) run through the CUDA
// driver API, which is loaded with dlopen("libcuda.so.1") the first time a
// GPU artifact is opened: xfmr builds and runs CPU artifacts on machines
// without a driver, and a GPU artifact there fails to load with one line
// that says why. The entry points are resolved with cuGetProcAddress at a
// fixed ABI version (as IREE does), never by plain dlsym of unversioned
// names (which gives the legacy 32-bit ABIs).
//
// The host code of a GPU artifact calls the mgpu* functions MLIR's
// gpu-to-llvm lowering emits (and xfmr_gpu_free); they are defined here and
// exported from every executable that links the runtime, all on one stream
// per process.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_CUDA_H
#define XFMR_RUNTIME_CUDA_H

#include "xfmr/runtime/Error.h"

#include <cstdint>
#include <string>

namespace xfmr::rt::cuda {

struct DeviceInfo {
  std::string name;
  int computeCapability = 0; // major * 10 + minor
  uint64_t memoryBytes = 0;
};

/// Loads the driver, initialises it and makes device 0's primary context
/// current (once per process). The error says what is missing: no
/// libcuda.so.1, a stub library, no device, a driver too old.
Expected<DeviceInfo> openDevice();

/// Device memory: `bytes` copied from `host`. The pointer is the device's.
Expected<void *> uploadToDevice(const void *host, uint64_t bytes);
/// Device memory, uninitialised.
Expected<void *> allocateDevice(uint64_t bytes);
/// Unified (managed) memory the host and the device both address.
Expected<void *> allocateUnified(uint64_t bytes);
void freeDevice(void *p);
/// Waits for the stream; the first failure of a launch or copy since the
/// last call, or success.
Status synchronize();

/// Milliseconds the device spent in kernels since the last call (CUDA
/// events around every launch), reset.
double takeKernelMilliseconds();

/// The module the last mgpuModuleLoad loaded (a GPU artifact's model.so
/// loads its kernels when it is opened), or null.
void *lastLoadedModule();

/// The device word `xfmr_kernel_check` of `module` (the number + 1 of a
/// failed run-time check inside a kernel, or 0), cleared.
Expected<int64_t> takeKernelCheck(void *module);

} // namespace xfmr::rt::cuda

#endif // XFMR_RUNTIME_CUDA_H
