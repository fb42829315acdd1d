//===- CUDA.cpp - the CUDA driver, loaded at run time ---------------------===//
//
// Part of xfmr. See CUDA.h.
//
// The few driver types and entry points used are declared here from cuda.h
// (CUDA 12/13 ABI), so the runtime builds without the toolkit's headers.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/CUDA.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace xfmr::rt::cuda {
namespace {

// cuda.h: CUresult, CUdevice and the handle types.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr unsigned CU_MEM_ATTACH_GLOBAL = 1;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
// The ABI version the entry points are requested at (cuGetProcAddress):
// 12.0, whose cuMemAlloc is the 64-bit _v2 and cuStreamBeginCapture _v2.
constexpr int kDriverABI = 12000;

struct Driver {
  void *library = nullptr;
  CUresult (*getProcAddress)(const char *, void **, int, uint64_t, int *) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driverGetVersion)(int *) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*deviceGetCount)(int *) = nullptr;
  CUresult (*deviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*deviceTotalMem)(size_t *, CUdevice) = nullptr;
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*moduleUnload)(CUmodule) = nullptr;
  CUresult (*funcSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void **, void **) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memAllocManaged)(CUdeviceptr *, size_t, unsigned) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*moduleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *) = nullptr;
  CUresult (*streamCreate)(CUstream *, unsigned) = nullptr;
  CUresult (*streamSynchronize)(CUstream) = nullptr;
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;
  CUresult (*eventCreate)(CUevent *, unsigned) = nullptr;
  CUresult (*eventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*eventElapsedTime)(float *, CUevent, CUevent) = nullptr;

  CUcontext context = nullptr;
  CUmodule lastModule = nullptr;
  // Kernel time: an event before and after each launch (the launches are
  // synchronous, so each pair is read at the following synchronisation).
  CUevent before = nullptr, after = nullptr;
  bool timing = false;
  double kernelMs = 0;
  CUstream stream = nullptr;
  DeviceInfo device;
  std::string openError; // non-empty: openDevice failed (for good)
  bool opened = false;
  // The first failure since the last synchronize() (launches return nothing).
  std::mutex errorMutex;
  std::string pendingError;
};

Driver &driver() {
  static Driver d;
  return d;
}

std::string describe(CUresult r) {
  const char *s = nullptr;
  if (driver().getErrorString && driver().getErrorString(r, &s) == CUDA_SUCCESS && s)
    return std::string(s) + " (" + std::to_string(r) + ")";
  return "CUDA error " + std::to_string(r);
}

void recordError(const char *what, CUresult r) {
  Driver &d = driver();
  std::lock_guard<std::mutex> lock(d.errorMutex);
  if (d.pendingError.empty())
    d.pendingError = std::string(what) + ": " + describe(r);
}

template <typename F> bool resolve(Driver &d, const char *name, F &fn, std::string &error) {
  void *p = nullptr;
  int status = 0;
  CUresult r = d.getProcAddress(name, &p, kDriverABI, 0, &status);
  if (r != CUDA_SUCCESS || !p) {
    error = std::string("the CUDA driver has no ") + name + " (driver older than 12.0?)";
    return false;
  }
  fn = reinterpret_cast<F>(p);
  return true;
}

std::string loadDriver(Driver &d) {
  d.library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d.library)
    return std::string("no CUDA driver (") + ::dlerror() + ")";
  d.getProcAddress = reinterpret_cast<decltype(d.getProcAddress)>(
      ::dlsym(d.library, "cuGetProcAddress_v2"));
  if (!d.getProcAddress)
    return "the CUDA driver has no cuGetProcAddress_v2 (driver older than 12.0)";
  std::string error;
  bool ok = resolve(d, "cuInit", d.init, error) &&
            resolve(d, "cuDriverGetVersion", d.driverGetVersion, error) &&
            resolve(d, "cuDeviceGet", d.deviceGet, error) &&
            resolve(d, "cuDeviceGetCount", d.deviceGetCount, error) &&
            resolve(d, "cuDeviceGetAttribute", d.deviceGetAttribute, error) &&
            resolve(d, "cuDeviceGetName", d.deviceGetName, error) &&
            resolve(d, "cuDeviceTotalMem", d.deviceTotalMem, error) &&
            resolve(d, "cuDevicePrimaryCtxRetain", d.primaryCtxRetain, error) &&
            resolve(d, "cuCtxSetCurrent", d.ctxSetCurrent, error) &&
            resolve(d, "cuModuleLoadData", d.moduleLoadData, error) &&
            resolve(d, "cuModuleGetFunction", d.moduleGetFunction, error) &&
            resolve(d, "cuModuleUnload", d.moduleUnload, error) &&
            resolve(d, "cuFuncSetAttribute", d.funcSetAttribute, error) &&
            resolve(d, "cuLaunchKernel", d.launchKernel, error) &&
            resolve(d, "cuMemAlloc", d.memAlloc, error) &&
            resolve(d, "cuMemAllocManaged", d.memAllocManaged, error) &&
            resolve(d, "cuMemFree", d.memFree, error) &&
            resolve(d, "cuMemcpyHtoD", d.memcpyHtoD, error) &&
            resolve(d, "cuMemcpyDtoH", d.memcpyDtoH, error) &&
            resolve(d, "cuModuleGetGlobal", d.moduleGetGlobal, error) &&
            resolve(d, "cuStreamCreate", d.streamCreate, error) &&
            resolve(d, "cuStreamSynchronize", d.streamSynchronize, error) &&
            resolve(d, "cuGetErrorString", d.getErrorString, error) &&
            resolve(d, "cuEventCreate", d.eventCreate, error) &&
            resolve(d, "cuEventRecord", d.eventRecord, error) &&
            resolve(d, "cuEventElapsedTime", d.eventElapsedTime, error);
  if (!ok)
    return error;
  if (CUresult r = d.init(0); r != CUDA_SUCCESS)
    return r == CUDA_ERROR_STUB_LIBRARY
               ? "libcuda.so.1 is the toolkit's stub library, not a driver"
               : "cuInit: " + describe(r);
  int count = 0;
  if (CUresult r = d.deviceGetCount(&count); r != CUDA_SUCCESS || count == 0)
    return "no CUDA device" + (r == CUDA_SUCCESS ? std::string() : ": " + describe(r));
  CUdevice dev = 0;
  int major = 0, minor = 0;
  char name[256] = {0};
  size_t memory = 0;
  if (CUresult r = d.deviceGet(&dev, 0); r != CUDA_SUCCESS)
    return "cuDeviceGet: " + describe(r);
  d.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  d.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  d.deviceGetName(name, sizeof(name) - 1, dev);
  d.deviceTotalMem(&memory, dev);
  d.device = DeviceInfo{name, major * 10 + minor, memory};
  if (CUresult r = d.primaryCtxRetain(&d.context, dev); r != CUDA_SUCCESS)
    return "cuDevicePrimaryCtxRetain: " + describe(r);
  if (CUresult r = d.ctxSetCurrent(d.context); r != CUDA_SUCCESS)
    return "cuCtxSetCurrent: " + describe(r);
  if (CUresult r = d.streamCreate(&d.stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
    return "cuStreamCreate: " + describe(r);
  // Without the events nothing is timed (kernelMilliseconds stays 0).
  if (d.eventCreate(&d.before, 0) != CUDA_SUCCESS || d.eventCreate(&d.after, 0) != CUDA_SUCCESS)
    d.before = d.after = nullptr;
  return "";
}

std::once_flag openOnce;

} // namespace

Expected<DeviceInfo> openDevice() {
  Driver &d = driver();
  std::call_once(openOnce, [&] {
    d.openError = loadDriver(d);
    d.opened = d.openError.empty();
  });
  if (!d.opened)
    return Error(d.openError);
  // Each thread that launches needs the context current.
  d.ctxSetCurrent(d.context);
  return d.device;
}


Expected<void *> allocateDevice(uint64_t bytes) {
  CUdeviceptr p = 0;
  if (CUresult r = driver().memAlloc(&p, bytes ? bytes : 1); r != CUDA_SUCCESS)
    return Error("cuMemAlloc of " + std::to_string(bytes) + " bytes: " + describe(r));
  return reinterpret_cast<void *>(p);
}

Expected<void *> allocateUnified(uint64_t bytes) {
  Driver &d = driver();
  CUdeviceptr p = 0;
  if (CUresult r = d.memAllocManaged(&p, bytes ? bytes : 1, CU_MEM_ATTACH_GLOBAL);
      r != CUDA_SUCCESS)
    return Error("cuMemAllocManaged of " + std::to_string(bytes) + " bytes: " + describe(r));
  return reinterpret_cast<void *>(p);
}

Expected<void *> uploadToDevice(const void *host, uint64_t bytes) {
  Driver &d = driver();
  Expected<void *> p = allocateDevice(bytes);
  if (!p || !bytes)
    return p;
  auto dev = reinterpret_cast<CUdeviceptr>(*p);
  if (CUresult r = d.memcpyHtoD(dev, host, bytes); r != CUDA_SUCCESS) {
    d.memFree(dev);
    return Error("cuMemcpyHtoD of " + std::to_string(bytes) + " bytes: " + describe(r));
  }
  return p;
}

void freeDevice(void *p) {
  if (p && driver().opened)
    driver().memFree(reinterpret_cast<CUdeviceptr>(p));
}

Status synchronize() {
  Driver &d = driver();
  if (!d.opened)
    return Error(d.openError.empty() ? "the CUDA device is not open" : d.openError);
  if (CUresult r = d.streamSynchronize(d.stream); r != CUDA_SUCCESS)
    recordError("cuStreamSynchronize", r);
  std::lock_guard<std::mutex> lock(d.errorMutex);
  if (d.pendingError.empty())
    return Status();
  std::string e = std::move(d.pendingError);
  d.pendingError.clear();
  return Error(e);
}

void *lastLoadedModule() { return driver().lastModule; }

double takeKernelMilliseconds() {
  double ms = driver().kernelMs;
  driver().kernelMs = 0;
  return ms;
}

Expected<int64_t> takeKernelCheck(void *module) {
  Driver &d = driver();
  CUdeviceptr word = 0;
  size_t bytes = 0;
  if (!module || d.moduleGetGlobal(&word, &bytes, module, "xfmr_kernel_check") != CUDA_SUCCESS ||
      bytes != sizeof(int64_t))
    return int64_t{0}; // no checks inside kernels
  int64_t code = 0;
  if (CUresult r = d.memcpyDtoH(&code, word, sizeof(code)); r != CUDA_SUCCESS)
    return Error("reading xfmr_kernel_check: " + describe(r));
  if (code != 0) {
    int64_t zero = 0;
    if (CUresult r = d.memcpyHtoD(word, &zero, sizeof(zero)); r != CUDA_SUCCESS)
      return Error("clearing xfmr_kernel_check: " + describe(r));
  }
  return code;
}

} // namespace xfmr::rt::cuda

// The host code of a GPU artifact calls these (MLIR 22's gpu-to-llvm ABI:
// mgpuModuleLoad(ptr, i64), a 12-argument mgpuLaunchKernel). Every launch
// goes to the process's one stream; a launch's failure is recorded and
// reported by the next synchronize(). The stream the lowering creates per
// launch is that stream, and destroying it does nothing.
using namespace xfmr::rt::cuda;
using xfmr::rt::Expected;

extern "C" {

__attribute__((visibility("default"))) void *mgpuModuleLoad(void *data, uint64_t size) {
  (void)size;
  void *module = nullptr;
  if (!driver().opened)
    return nullptr;
  if (CUresult r = driver().moduleLoadData(&module, data); r != CUDA_SUCCESS)
    recordError("cuModuleLoadData", r);
  driver().lastModule = module;
  return module;
}

__attribute__((visibility("default"))) void *mgpuModuleLoadJIT(void *data, int optLevel) {
  (void)optLevel;
  return mgpuModuleLoad(data, 0);
}

__attribute__((visibility("default"))) void mgpuModuleUnload(void *module) {
  if (module && driver().opened)
    driver().moduleUnload(module);
}

__attribute__((visibility("default"))) void *mgpuModuleGetFunction(void *module,
                                                                     const char *name) {
  void *f = nullptr;
  if (!module)
    return nullptr;
  if (CUresult r = driver().moduleGetFunction(&f, module, name); r != CUDA_SUCCESS)
    recordError(name, r);
  return f;
}

__attribute__((visibility("default"))) void *mgpuStreamCreate() { return driver().stream; }
__attribute__((visibility("default"))) void mgpuStreamDestroy(void *) {}
__attribute__((visibility("default"))) void mgpuStreamSynchronize(void *) {
  // The host reads what kernels wrote (unified memory) right after the
  // launch: wait for them.
  Driver &d = driver();
  if (!d.opened)
    return;
  if (CUresult r = d.streamSynchronize(d.stream); r != CUDA_SUCCESS)
    recordError("cuStreamSynchronize", r);
  if (d.timing) {
    float ms = 0;
    if (d.eventElapsedTime(&ms, d.before, d.after) == CUDA_SUCCESS)
      d.kernelMs += ms;
    d.timing = false;
  }
}

__attribute__((visibility("default"))) void
mgpuLaunchKernel(void *function, int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by,
                 int64_t bz, int32_t smem, void *stream, void **params, void **extra,
                 int64_t paramCount) {
  (void)paramCount;
  Driver &d = driver();
  if (!function) // the module or the function did not load: recorded then
    return;
  if (smem > 48 * 1024)
    d.funcSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
  bool timed = d.before && d.eventRecord(d.before, stream) == CUDA_SUCCESS;
  if (CUresult r = d.launchKernel(function, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
      r != CUDA_SUCCESS)
    recordError("cuLaunchKernel", r);
  d.timing = timed && d.eventRecord(d.after, stream) == CUDA_SUCCESS;
}

__attribute__((visibility("default"))) void *mgpuMemAlloc(uint64_t bytes, void *stream,
                                                          bool hostShared) {
  (void)stream;
  Expected<void *> p = hostShared ? allocateUnified(bytes) : allocateDevice(bytes);
  if (!p) {
    std::lock_guard<std::mutex> lock(driver().errorMutex);
    if (driver().pendingError.empty())
      driver().pendingError = p.error();
    return nullptr;
  }
  return *p;
}

__attribute__((visibility("default"))) void xfmr_gpu_free(int64_t pointer) {
  freeDevice(reinterpret_cast<void *>(pointer));
}

} // extern "C"
