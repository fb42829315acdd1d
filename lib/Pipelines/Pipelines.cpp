//===- Pipelines.cpp - named compilation pipelines ------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Pipelines/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace xfmr {

/// Shared by the CPU and GPU pipelines: the entry's calling convention,
/// bufferization across function boundaries, KV pools updated in place.
static void addBufferization(llvm::raw_ostream &os) {
  os << "xfmr-prepare-entry,"
     << "one-shot-bufferize{bufferize-function-boundaries "
        "function-boundary-type-conversion=identity-layout-map "
        "allow-return-allocs-from-loops},"
     << "canonicalize,drop-equivalent-buffer-results,"
     << "canonicalize,xfmr-drop-pool-results,";
}

LogicalResult buildRaisePipeline(OpPassManager &pm, const RaiseOptions &options) {
  std::string p;
  llvm::raw_string_ostream os(p);
  os << "onnx-simplify-shapes,";
  if (options.quantBits > 0) {
    os << "xfmr-quantize-weights{bits=" << options.quantBits;
    if (options.quantBits == 4)
      os << " group=" << options.quantGroup;
    if (options.quantFloat8)
      os << " float8=true";
    if (!options.quantSkip.empty())
      os << " skip=" << llvm::join(options.quantSkip, ",");
    if (options.quantMethod != "rtn")
      os << " method=" << options.quantMethod << " calibration=" << options.calibrationFile
         << " alpha=" << options.smoothAlpha;
    os << "},";
  }
  if (options.calibrationOutputs)
    os << "xfmr-calibration-outputs,";
  os << "xfmr-raise{report=" << (options.report ? "true" : "false");
  if (!options.skip.empty())
    os << " skip=" << llvm::join(options.skip, ",");
  os << "}";
  // The experts exist once raised: bf16 and fp8 as asked, int8 for the
  // int8 and int4 modes (the MoE kernel has no 4-bit path).
  if (options.quantBits > 0) {
    os << ",xfmr-quantize-experts{mode="
       << (options.quantBits == 16 ? "bf16" : options.quantFloat8 ? "fp8-e4m3" : "int8");
    if (!options.quantSkip.empty())
      os << " skip=" << llvm::join(options.quantSkip, ",");
    os << "}";
  }
  if (options.pagedKV)
    os << ",xfmr-paged-kv{block-size=" << options.blockSize << " kv-dtype=" << options.kvDtype
       << "}";
  return parsePassPipeline(p, pm, llvm::errs());
}

LogicalResult buildONNXToLinalgPipeline(OpPassManager &pm, int64_t fusedAttentionMaxHeadDim,
                                        bool microKernels) {
  std::string p;
  llvm::raw_string_ostream os(p);
  os << "onnx-simplify-shapes,convert-onnx-to-linalg,"
     << "convert-xfmr-to-linalg{fused-attention=" << fusedAttentionMaxHeadDim
     << " micro-kernels=" << (microKernels ? "true" : "false") << "},"
     << "canonicalize,cse,xfmr-fuse-elementwise,canonicalize,cse";
  return parsePassPipeline(p, pm, llvm::errs());
}

LogicalResult buildCPUToLLVMPipeline(OpPassManager &pm,
                                     const CPUPipelineOptions &options) {
  std::string p;
  llvm::raw_string_ostream os(p);
  // Weights left in the model's files are all packed by the loader.
  if (options.tileContractions)
    os << "xfmr-pack-weights" << (options.referenceWeights ? "{lazy-min-bytes=0}," : ",");
  if (options.outlineLayers)
    os << "xfmr-outline-layers,";
  os << "xfmr-externalize-weights{min-bytes=" << options.minWeightBytes;
  if (!options.weightsFile.empty())
    os << " weights-file=" << options.weightsFile;
  if (options.backgroundWeights)
    os << " background=true";
  if (options.referenceWeights)
    os << " reference-sources=true";
  if (options.keepBlobs)
    os << " keep-blobs=true";
  os << "},";
  // A layer function (xfmr-outline-layers) returns the KV pools it updated
  // in place: its callers use their own buffers instead (once canonicalize
  // has folded the casts in between).
  addBufferization(os);
  if (options.blasMinRows > 0)
    os << "xfmr-contractions-to-blas{min-rows=" << options.blasMinRows << "},";
  if (options.tileContractions)
    os << "xfmr-tile-contractions{lanes=" << options.vectorLanes << "},";
  os
     << "buffer-deallocation-pipeline,canonicalize,xfmr-lower-strided-copies,"
     << (options.threads ? "xfmr-split-rows," : "") << "convert-linalg-to-loops,"
     << "func.func(math-extend-to-supported-types{target-type=f32}),"
     // exp as arithmetic: the loops around it vectorize (no expf calls).
     << "xfmr-approximate-exp,"
     << "arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32},"
     << "expand-strided-metadata,lower-affine,"
     // The alloca_scope convert-scf-to-openmp wraps a body in is inlined by
     // canonicalize (the kernels allocate nothing); scf-to-cf could not
     // lower loops inside it.
     // Guided schedules: the threads of a step finish together (xfmr-loop-schedule).
     << (options.threads ? "xfmr-parallelize-loops,convert-scf-to-openmp,xfmr-loop-schedule,canonicalize,"
                         : "")
     << "convert-scf-to-cf,xfmr-checks-to-status,"
     << "arith-expand{include-bf16=true},xfmr-exact-math-to-intrinsics,convert-math-to-libm,"
     // Allocations through runtime/ukernels/BufferCache.c (linked into the
     // artifact): a step's large buffers are reused, not mapped afresh.
     << "finalize-memref-to-llvm{use-generic-functions=true},convert-to-llvm,"
     << (options.threads ? "convert-openmp-to-llvm," : "") << "reconcile-unrealized-casts";
  return parsePassPipeline(p, pm, llvm::errs());
}

LogicalResult buildGPUKernelsPipeline(OpPassManager &pm, const GPUPipelineOptions &options) {
  std::string p;
  llvm::raw_string_ostream os(p);
  os << "xfmr-externalize-weights{min-bytes=" << options.minWeightBytes;
  if (!options.weightsFile.empty())
    os << " weights-file=" << options.weightsFile;
  os << "},";
  addBufferization(os);
  os << "buffer-deallocation-pipeline,canonicalize,"
     << "xfmr-gpu-attention" << (options.emulate ? "{emulate=true}," : ",")
     << "xfmr-gpu-products" << (options.emulate ? "{emulate=true}," : ",")
     << "func.func(convert-linalg-to-parallel-loops),canonicalize,"
     << "xfmr-gpu-map-loops{block-size=" << options.blockSize
     << (options.emulate ? " emulate=true" : "") << "},";
  if (!options.emulate)
    os << "gpu-launch-sink-index-computations,gpu-kernel-outlining,xfmr-gpu-merge-modules,"
       << "canonicalize,cse,";
  os << "func.func(math-extend-to-supported-types{target-type=f32}),"
     << "arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32},"
     << "expand-strided-metadata,lower-affine,";
  if (options.emulate) {
    // The CPU pipeline's tail (buildCPUToLLVMPipeline).
    os << "convert-scf-to-cf,xfmr-checks-to-status,arith-expand{include-bf16=true},"
       << "convert-math-to-libm,finalize-memref-to-llvm,convert-to-llvm,"
       << "reconcile-unrealized-casts";
    return parsePassPipeline(p, pm, llvm::errs());
  }
  os << "nvvm-attach-target{chip=" << options.chip << " features=" << options.features
     << " O=3},"
     << "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=64},"
     << "convert-nvvm-to-llvm,canonicalize,cse,reconcile-unrealized-casts),"
     << "gpu-module-to-binary{format=isa";
  if (!options.toolkit.empty())
    os << " toolkit=" << options.toolkit;
  os << "}";
  return parsePassPipeline(p, pm, llvm::errs());
}

LogicalResult buildGPUHostPipeline(OpPassManager &pm) {
  return parsePassPipeline("convert-scf-to-cf,xfmr-checks-to-status,"
                           "arith-expand{include-bf16=true},convert-math-to-libm,"
                           "gpu-to-llvm,finalize-memref-to-llvm,convert-to-llvm,"
                           "reconcile-unrealized-casts",
                           pm, llvm::errs());
}

namespace {
struct CPUOptions : public PassPipelineOptions<CPUOptions> {
  Option<std::string> weightsFile{*this, "weights-file",
                                  llvm::cl::desc("Where to write the weights")};
  Option<int64_t> minBytes{*this, "min-bytes",
                           llvm::cl::desc("Smallest constant moved to the weights file"),
                           llvm::cl::init(256)};
  Option<int64_t> blasMinRows{
      *this, "blas-min-rows",
      llvm::cl::desc("Fewest rows for which an f32 product calls BLAS (0: never)"),
      llvm::cl::init(0)};
  Option<bool> tile{*this, "tile-contractions",
                    llvm::cl::desc("Register-blocked kernels for f32 products"),
                    llvm::cl::init(true)};
  Option<int64_t> lanes{*this, "lanes",
                        llvm::cl::desc("f32 lanes per register for the product kernels: 8 or 16"),
                        llvm::cl::init(8)};
  Option<bool> threads{*this, "threads",
                       llvm::cl::desc("Split tiled products across cores (OpenMP)"),
                       llvm::cl::init(true)};
  Option<bool> outline{*this, "outline-layers",
                       llvm::cl::desc("One function per repeated decoder layer"),
                       llvm::cl::init(true)};
};
struct GPUOptions : public PassPipelineOptions<GPUOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("sm_80 or sm_90a"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features", llvm::cl::desc("PTX features (+ptx80)"),
                               llvm::cl::init("+ptx80")};
  Option<std::string> toolkit{*this, "toolkit",
                              llvm::cl::desc("CUDA toolkit (libdevice for math functions)")};
  Option<int64_t> blockSize{*this, "block-size", llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
};
} // namespace

void registerPipelines() {
  PassPipelineRegistration<GPUOptions>(
      "xfmr-gpu-kernels", "linalg on tensors to a gpu.binary of PTX and its host code",
      [](OpPassManager &pm, const GPUOptions &o) {
        GPUPipelineOptions options;
        options.chip = o.chip;
        options.features = o.features;
        options.toolkit = o.toolkit;
        options.blockSize = o.blockSize;
        (void)buildGPUKernelsPipeline(pm, options);
      });
  PassPipelineRegistration<>(
      "xfmr-onnx-to-linalg",
      "onnx dialect to linalg/tensor/arith/math on tensors",
      [](OpPassManager &pm) { (void)buildONNXToLinalgPipeline(pm); });
  PassPipelineRegistration<CPUOptions>(
      "xfmr-cpu-to-llvm", "linalg on tensors to the LLVM dialect for the host",
      [](OpPassManager &pm, const CPUOptions &o) {
        CPUPipelineOptions options;
        options.weightsFile = o.weightsFile;
        options.minWeightBytes = o.minBytes;
        options.blasMinRows = o.blasMinRows;
        options.tileContractions = o.tile;
        options.vectorLanes = o.lanes;
        options.threads = o.threads;
        options.outlineLayers = o.outline;
        (void)buildCPUToLLVMPipeline(pm, options);
      });
}

} // namespace xfmr
