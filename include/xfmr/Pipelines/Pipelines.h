//===- Pipelines.h - named compilation pipelines ----------------*- C++ -*-===//
//
// Part of xfmr.
//
// The stages xfmr-compile runs, also registered in xfmr-opt:
//   xfmr-onnx-to-linalg   onnx dialect -> linalg/tensor/arith/math on tensors
//   xfmr-cpu-to-llvm      tensors -> buffers -> loops -> LLVM dialect
//   xfmr-gpu-kernels      tensors -> buffers -> kernels as PTX, host loops
//
// Each is built from typed pass constructors and option structs: paths and
// names reach the passes unchanged (no pipeline text to quote).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_PIPELINES_PIPELINES_H
#define XFMR_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace xfmr {

struct CPUPipelineOptions {
  /// Where xfmr-externalize-weights writes the weights ("" = nowhere).
  std::string weightsFile;
  /// Constants of at least this many bytes go to the weights file.
  int64_t minWeightBytes = 256;
  /// f32 matrix products with at least this many rows call BLAS sgemm
  /// (xfmr-contractions-to-blas; faster prefill, but a row's result then
  /// depends on the batch); 0: never.
  int64_t blasMinRows = 0;
  /// Register-blocked, batch-invariant kernels for the other f32 products
  /// (xfmr-tile-contractions).
  bool tileContractions = true;
  /// f32 lanes per vector register for those kernels: 8 (AVX2) or 16
  /// (AVX-512 targets).
  int64_t vectorLanes = 8;
  /// Split the tiled products' column panels across cores (OpenMP; the
  /// artifact then links libomp, and OMP_NUM_THREADS caps the threads).
  bool threads = true;
  /// Compile structurally equal decoder layers once, as calls of one
  /// function (xfmr-outline-layers).
  bool outlineLayers = true;
  /// Write weights.bin on a thread while code is generated; the driver
  /// then calls xfmr::cpu::waitForWeights().
  bool backgroundWeights = false;
  /// Weights that are bytes of the model's external data stay there: the
  /// artifact references them and the loader reads (and packs) them.
  bool referenceWeights = false;
  /// Leave the weights' resource blobs allocated (another module uses them).
  bool keepBlobs = false;
  /// Run buffer-deallocation-simplification (off for the calibration
  /// artifact, whose many results make it slow).
  bool simplifyDeallocations = true;
};

/// Options of buildGPUKernelsPipeline.
struct GPUPipelineOptions {
  /// Where xfmr-externalize-weights writes the weights ("" = nowhere).
  std::string weightsFile;
  int64_t minWeightBytes = 256;
  /// Threads per block of the loop-nest kernels (xfmr-gpu-map-loops).
  int64_t blockSize = 256;
  /// The NVVM target: chip (sm_80, sm_90a) and PTX features (+ptx80).
  std::string chip = "sm_90a";
  std::string features = "+ptx80";
  /// The CUDA toolkit whose libdevice the kernels link ("" = none).
  std::string toolkit;
  /// Instead of kernels: the same grid as host loops over blocks and
  /// threads, lowered for the CPU (tests the GPU program without a GPU).
  bool emulate = false;
};

struct RaiseOptions {
  /// Print what xfmr-raise formed and left.
  bool report = false;
  /// Ops xfmr-raise does not form (its `skip` option).
  std::vector<std::string> skip;
  /// Rewrite into a step function over a paged KV cache (xfmr-paged-kv).
  bool pagedKV = false;
  int64_t blockSize = 16;
  /// The pools' element type (xfmr-paged-kv's kv-dtype): auto, f32, bf16,
  /// int8 or fp8-e4m3.
  std::string kvDtype = "auto";
  /// > 0: rewrite constant f32 MatMul weights first (xfmr-quantize-weights)
  /// to 4 bits in blocks of quantGroup values, 8 bits per output channel or
  /// 16 (bfloat16).
  int64_t quantBits = 0;
  int64_t quantGroup = 0;
  /// With quantBits 8: float8 e4m3fn instead of int8.
  bool quantFloat8 = false;
  /// MatMuls left in f32: node or weight names containing one of these.
  std::vector<std::string> quantSkip;
  /// rtn, awq or gptq (quantBits 4) or smoothquant (quantBits 8), with the
  /// statistics file calibrationFile (xfmr-quantize-weights' method and
  /// calibration).
  std::string quantMethod = "rtn";
  std::string calibrationFile;
  /// smoothquant's migration strength.
  double smoothAlpha = 0.5;
  /// gptq: channels of largest E[x^2] first; H's dampening and shrinkage.
  bool gptqActOrder = false;
  double gptqDamp = 0.01;
  double gptqShrink = 0.0;
  /// gptq: print each product's calibration error (xfmr-quantize-weights report).
  bool quantReport = false;
  /// Instead of quantizing: return each product's input statistics
  /// (xfmr-calibration-outputs), for the calibration artifact.
  bool calibrationOutputs = false;
  /// With calibrationOutputs: each input's A^T A too (GPTQ).
  bool calibrationSecondMoments = false;
  /// > 1: keep rank tensorParallelRank's shard of a model split over that
  /// many ranks (xfmr-shard-tensor-parallel, after the paged rewrite).
  int64_t tensorParallelRanks = 1;
  int64_t tensorParallelRank = 0;
  /// > 1: keep stage pipelineStage's layers of a model split into that many
  /// pipeline stages (xfmr-split-pipeline-stage, after the paged rewrite and
  /// before the tensor-parallel split).
  int64_t pipelineStages = 1;
  int64_t pipelineStage = 0;
};

/// onnx (imported) -> onnx + xfmr ops [-> paged step function].
void buildRaisePipeline(mlir::OpPassManager &pm, const RaiseOptions &options);

/// onnx + xfmr ops -> linalg/tensor/scf on tensors. With
/// `fusedAttentionMaxHeadDim` > 0 (a target with a fused attention kernel),
/// f32 attention with a value head dim up to it stays one op on buffers
/// (xfmr.attention_buffers) for the target to replace. With `microKernels`
/// false (a GPU target), quantized xfmr.linear products stay linalg
/// products instead of calls to the host CPU's micro-kernels.
void buildONNXToLinalgPipeline(mlir::OpPassManager &pm,
                               int64_t fusedAttentionMaxHeadDim = 0,
                               bool microKernels = true);

/// Appends linalg on tensors -> LLVM dialect for the host CPU.
void buildCPUToLLVMPipeline(mlir::OpPassManager &pm,
                            const CPUPipelineOptions &options);

/// Linalg on tensors to kernels: weights out, bufferization, one kernel per
/// parallel loop nest (xfmr-gpu-map-loops), outlined into one gpu.module
/// lowered to NVVM and serialized to PTX (a gpu.binary of assembly).
void buildGPUKernelsPipeline(mlir::OpPassManager &pm,
                             const GPUPipelineOptions &options);

/// The host side of a GPU module (after buildGPUKernelsPipeline): loops,
/// run-time checks, launches and allocations to the LLVM dialect
/// (mgpu* calls the runtime's CUDA backend implements).
void buildGPUHostPipeline(mlir::OpPassManager &pm);

/// Registers the pipelines under the names above (xfmr-opt, lit tests).
void registerPipelines();

} // namespace xfmr

#endif // XFMR_PIPELINES_PIPELINES_H
