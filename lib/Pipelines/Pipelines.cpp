//===- Pipelines.cpp - named compilation pipelines ------------------------===//
//
// Part of xfmr.
//
// Every pipeline is built from typed pass constructors and their generated
// option structs: values such as paths reach the passes as they are, never
// through a textual pipeline that a space or a brace would break.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Pipelines/Pipelines.h"

#include "dialects/onnx/Transforms/Passes.h"
#include "xfmr/Conversion/Passes.h"
#include "xfmr/Target/CPU/Passes.h"
#include "xfmr/Target/GPU/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace xfmr {

/// Shared by the CPU and GPU pipelines: the entry's calling convention,
/// bufferization across function boundaries, KV pools updated in place.
static void addBufferization(OpPassManager &pm) {
  pm.addPass(cpu::createPrepareEntryPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(cpu::createDropPoolResultsPass());
}

/// Deallocations (upstream's buffer-deallocation pipeline). Its
/// simplification pass proves memrefs distinct from what the function
/// returns, a cost that grows with the product of the two: the calibration
/// artifact returns hundreds of statistics, and there it took 80% of the
/// lowering (8.7 s of 10.7 on a 4-layer model). Without it, a dealloc of
/// several memrefs checks aliasing at run time (dealloc_helper).
static void addDeallocation(OpPassManager &pm, bool simplify) {
  if (simplify)
    return bufferization::buildBufferDeallocationPipeline(pm);
  memref::ExpandReallocPassOptions expand;
  expand.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(expand));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
}

/// Element types without native arithmetic (bf16, f16) computed in f32.
static void addFloatEmulation(OpPassManager &pm) {
  math::MathExtendToSupportedTypesOptions extend;
  extend.targetTypeStr = "f32";
  pm.addNestedPass<func::FuncOp>(
      math::createMathExtendToSupportedTypes(extend));
}

static void addArithEmulation(OpPassManager &pm) {
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
}

static std::unique_ptr<Pass> createArithExpandWithBF16() {
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  return arith::createArithExpandOpsPass(expand);
}

void buildRaisePipeline(OpPassManager &pm, const RaiseOptions &options) {
  pm.addPass(onnx::createONNXSimplifyShapesPass());
  if (options.quantBits > 0) {
    QuantizeWeightsPassOptions quantize;
    quantize.bits = options.quantBits;
    if (options.quantBits == 4)
      quantize.group = options.quantGroup;
    quantize.float8 = options.quantFloat8;
    quantize.skip.assign(options.quantSkip.begin(), options.quantSkip.end());
    if (options.quantMethod != "rtn") {
      quantize.method = options.quantMethod;
      quantize.calibration = options.calibrationFile;
      quantize.alpha = options.smoothAlpha;
      quantize.actOrder = options.gptqActOrder;
      quantize.damp = options.gptqDamp;
      quantize.shrink = options.gptqShrink;
      quantize.report = options.quantReport;
    }
    pm.addPass(createQuantizeWeightsPass(quantize));
  }
  if (options.calibrationOutputs) {
    CalibrationOutputsPassOptions outputs;
    outputs.secondMoments = options.calibrationSecondMoments;
    pm.addPass(createCalibrationOutputsPass(outputs));
  }
  RaiseONNXToXfmrPassOptions raise;
  raise.report = options.report;
  raise.skip.assign(options.skip.begin(), options.skip.end());
  pm.addPass(createRaiseONNXToXfmrPass(raise));
  // The experts exist once raised: bf16 and fp8 as asked, int8 for the
  // int8 and int4 modes (the MoE kernel has no 4-bit path).
  if (options.quantBits > 0) {
    QuantizeExpertsPassOptions experts;
    experts.mode = options.quantBits == 16 ? "bf16"
                   : options.quantFloat8   ? "fp8-e4m3"
                                           : "int8";
    experts.skip.assign(options.quantSkip.begin(), options.quantSkip.end());
    pm.addPass(createQuantizeExpertsPass(experts));
  }
  if (options.pagedKV) {
    PagedKVCachePassOptions paged;
    paged.blockSize = options.blockSize;
    paged.kvDtype = options.kvDtype;
    pm.addPass(createPagedKVCachePass(paged));
  }
  if (options.pipelineStages > 1) {
    SplitPipelineStagePassOptions split;
    split.stages = options.pipelineStages;
    split.stage = options.pipelineStage;
    pm.addPass(createSplitPipelineStagePass(split));
  }
  if (options.tensorParallelRanks > 1) {
    ShardTensorParallelPassOptions shard;
    shard.ranks = options.tensorParallelRanks;
    shard.rank = options.tensorParallelRank;
    pm.addPass(createShardTensorParallelPass(shard));
  }
}

void buildONNXToLinalgPipeline(OpPassManager &pm,
                               int64_t fusedAttentionMaxHeadDim,
                               bool microKernels) {
  pm.addPass(onnx::createONNXSimplifyShapesPass());
  pm.addPass(createConvertONNXToLinalgPass());
  ConvertXfmrToLinalgPassOptions xfmrToLinalg;
  xfmrToLinalg.fusedAttention = fusedAttentionMaxHeadDim;
  xfmrToLinalg.microKernels = microKernels;
  pm.addPass(createConvertXfmrToLinalgPass(xfmrToLinalg));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createFuseElementwiseOpsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildCPUToLLVMPipeline(OpPassManager &pm,
                            const CPUPipelineOptions &options) {
  // Weights left in the model's files are all packed by the loader.
  if (options.tileContractions) {
    cpu::PackWeightsPassOptions pack;
    if (options.referenceWeights)
      pack.lazyMinBytes = 0;
    pm.addPass(cpu::createPackWeightsPass(pack));
  }
  if (options.outlineLayers)
    pm.addPass(cpu::createOutlineLayersPass());
  cpu::ExternalizeWeightsPassOptions weights;
  weights.minBytes = options.minWeightBytes;
  weights.weightsFile = options.weightsFile;
  weights.background = options.backgroundWeights;
  weights.referenceSources = options.referenceWeights;
  weights.keepBlobs = options.keepBlobs;
  pm.addPass(cpu::createExternalizeWeightsPass(weights));
  // A layer function (xfmr-outline-layers) returns the KV pools it updated
  // in place: its callers use their own buffers instead (once canonicalize
  // has folded the casts in between).
  addBufferization(pm);
  if (options.blasMinRows > 0) {
    cpu::ContractionsToBLASPassOptions blas;
    blas.minRows = options.blasMinRows;
    pm.addPass(cpu::createContractionsToBLASPass(blas));
  }
  if (options.tileContractions) {
    cpu::TileContractionsPassOptions tile;
    tile.lanes = options.vectorLanes;
    pm.addPass(cpu::createTileContractionsPass(tile));
  }
  addDeallocation(pm, options.simplifyDeallocations);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(cpu::createLowerStridedCopiesPass());
  if (options.threads)
    pm.addPass(cpu::createSplitRowsPass());
  pm.addPass(createConvertLinalgToLoopsPass());
  addFloatEmulation(pm);
  // exp as arithmetic: the loops around it vectorize (no expf calls).
  pm.addPass(cpu::createApproximateExpPass());
  addArithEmulation(pm);
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  if (options.threads) {
    // The alloca_scope convert-scf-to-openmp wraps a body in is inlined by
    // canonicalize (the kernels allocate nothing); scf-to-cf could not
    // lower loops inside it. Guided schedules: the threads of a step
    // finish together (xfmr-loop-schedule).
    pm.addPass(cpu::createParallelizeLoopsPass());
    pm.addPass(createConvertSCFToOpenMPPass());
    pm.addPass(cpu::createLoopSchedulePass());
    pm.addPass(createCanonicalizerPass());
  }
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(cpu::createChecksToStatusPass());
  pm.addPass(createArithExpandWithBF16());
  pm.addPass(cpu::createExactMathToIntrinsicsPass());
  pm.addPass(createConvertMathToLibmPass());
  // Allocations through runtime/ukernels/BufferCache.c (linked into the
  // artifact): a step's large buffers are reused, not mapped afresh.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertToLLVMPass());
  if (options.threads)
    pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void buildGPUKernelsPipeline(OpPassManager &pm,
                             const GPUPipelineOptions &options) {
  cpu::ExternalizeWeightsPassOptions weights;
  weights.minBytes = options.minWeightBytes;
  weights.weightsFile = options.weightsFile;
  pm.addPass(cpu::createExternalizeWeightsPass(weights));
  addBufferization(pm);
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createCanonicalizerPass());
  gpu::FusedAttentionPassOptions attention;
  attention.emulate = options.emulate;
  pm.addPass(gpu::createFusedAttentionPass(attention));
  gpu::TensorCoreProductsPassOptions products;
  products.emulate = options.emulate;
  pm.addPass(gpu::createTensorCoreProductsPass(products));
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  pm.addPass(createCanonicalizerPass());
  gpu::MapLoopsToGPUPassOptions mapLoops;
  mapLoops.blockSize = options.blockSize;
  mapLoops.emulate = options.emulate;
  pm.addPass(gpu::createMapLoopsToGPUPass(mapLoops));
  if (!options.emulate) {
    pm.addPass(createGpuLaunchSinkIndexComputationsPass());
    pm.addPass(createGpuKernelOutliningPass());
    pm.addPass(gpu::createMergeKernelModulesPass());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  addFloatEmulation(pm);
  addArithEmulation(pm);
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  if (options.emulate) {
    // The CPU pipeline's tail (buildCPUToLLVMPipeline).
    pm.addPass(createSCFToControlFlowPass());
    pm.addPass(cpu::createChecksToStatusPass());
    pm.addPass(createArithExpandWithBF16());
    pm.addPass(createConvertMathToLibmPass());
    pm.addPass(createFinalizeMemRefToLLVMConversionPass());
    pm.addPass(createConvertToLLVMPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    return;
  }
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<mlir::gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = options.toolkit;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void buildGPUHostPipeline(OpPassManager &pm) {
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(cpu::createChecksToStatusPass());
  pm.addPass(createArithExpandWithBF16());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

namespace {
/// xfmr-onnx-to-linalg's options (buildONNXToLinalgPipeline's arguments).
struct ONNXToLinalgOptions : public PassPipelineOptions<ONNXToLinalgOptions> {
  Option<int64_t> fusedAttention{
      *this, "fused-attention",
      llvm::cl::desc("Largest value head dim of an attention kept as one op on "
                     "buffers for a fused kernel (0: none)"),
      llvm::cl::init(0)};
  Option<bool> microKernels{
      *this, "micro-kernels",
      llvm::cl::desc("Quantized products as calls of the CPU micro-kernels"),
      llvm::cl::init(true)};
};

/// xfmr-cpu-to-llvm's options (CPUPipelineOptions).
struct CPUOptions : public PassPipelineOptions<CPUOptions> {
  Option<std::string> weightsFile{*this, "weights-file",
                                  llvm::cl::desc("Where to write the weights")};
  Option<int64_t> minBytes{
      *this, "min-bytes",
      llvm::cl::desc("Smallest constant moved to the weights file"),
      llvm::cl::init(256)};
  Option<int64_t> blasMinRows{
      *this, "blas-min-rows",
      llvm::cl::desc(
          "Fewest rows for which an f32 product calls BLAS (0: never)"),
      llvm::cl::init(0)};
  Option<bool> tile{*this, "tile-contractions",
                    llvm::cl::desc("Register-blocked kernels for f32 products"),
                    llvm::cl::init(true)};
  Option<int64_t> lanes{
      *this, "lanes",
      llvm::cl::desc("f32 lanes per register for the product kernels: 8 or 16"),
      llvm::cl::init(8)};
  Option<bool> threads{
      *this, "threads",
      llvm::cl::desc("Split tiled products across cores (OpenMP)"),
      llvm::cl::init(true)};
  Option<bool> outline{
      *this, "outline-layers",
      llvm::cl::desc("One function per repeated decoder layer"),
      llvm::cl::init(true)};

  CPUPipelineOptions toOptions() const {
    CPUPipelineOptions options;
    options.weightsFile = weightsFile;
    options.minWeightBytes = minBytes;
    options.blasMinRows = blasMinRows;
    options.tileContractions = tile;
    options.vectorLanes = lanes;
    options.threads = threads;
    options.outlineLayers = outline;
    return options;
  }
};

/// xfmr-gpu-kernels' options (GPUPipelineOptions).
struct GPUOptions : public PassPipelineOptions<GPUOptions> {
  Option<std::string> weightsFile{*this, "weights-file",
                                  llvm::cl::desc("Where to write the weights")};
  Option<int64_t> minBytes{
      *this, "min-bytes",
      llvm::cl::desc("Smallest constant moved to the weights file"),
      llvm::cl::init(256)};
  Option<std::string> chip{*this, "chip", llvm::cl::desc("sm_80 or sm_90a"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features (+ptx80)"),
                               llvm::cl::init("+ptx80")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit (libdevice for math functions)")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
  Option<bool> emulate{
      *this, "emulate",
      llvm::cl::desc("The grid as host loops, lowered for the CPU"),
      llvm::cl::init(false)};

  GPUPipelineOptions toOptions() const {
    GPUPipelineOptions options;
    options.weightsFile = weightsFile;
    options.minWeightBytes = minBytes;
    options.chip = chip;
    options.features = features;
    options.toolkit = toolkit;
    options.blockSize = blockSize;
    options.emulate = emulate;
    return options;
  }
};
} // namespace

void registerPipelines() {
  PassPipelineRegistration<GPUOptions>(
      "xfmr-gpu-kernels",
      "linalg on tensors to a gpu.binary of PTX and its host code",
      [](OpPassManager &pm, const GPUOptions &o) {
        buildGPUKernelsPipeline(pm, o.toOptions());
      });
  PassPipelineRegistration<ONNXToLinalgOptions>(
      "xfmr-onnx-to-linalg",
      "onnx dialect to linalg/tensor/arith/math on tensors",
      [](OpPassManager &pm, const ONNXToLinalgOptions &o) {
        buildONNXToLinalgPipeline(pm, o.fusedAttention, o.microKernels);
      });
  PassPipelineRegistration<CPUOptions>(
      "xfmr-cpu-to-llvm", "linalg on tensors to the LLVM dialect for the host",
      [](OpPassManager &pm, const CPUOptions &o) {
        buildCPUToLLVMPipeline(pm, o.toOptions());
      });
}

} // namespace xfmr
