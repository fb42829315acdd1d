//===- Passes.td - GPU (NVPTX) target passes ---------------*- tablegen -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TARGET_GPU_PASSES
#define XFMR_TARGET_GPU_PASSES

include "mlir/Pass/PassBase.td"

def MapLoopsToGPUPass : Pass<"xfmr-gpu-map-loops", "mlir::ModuleOp"> {
  let summary = "Run every outermost parallel loop nest as a GPU kernel";
  let description = [{
    After bufferization and `convert-linalg-to-parallel-loops`, each
    outermost `scf.parallel` of a host function becomes one `gpu.launch`
    over its whole iteration space: the dimensions are linearised, each
    thread owns one point (`blockIdx.x * block-size + threadIdx.x`, guarded
    against the end), reductions stay sequential `scf.for` loops inside the
    thread, in the order the CPU path adds. Before that, every `memref.copy`
    becomes a loop nest (so copies run on the device too), and the buffers
    the host function allocates become `gpu.alloc host_shared` (unified
    memory: the scalars the host still reads, such as sequence lengths,
    stay readable) and `memref.dealloc` a call of the runtime's
    `xfmr_gpu_free`. Constant globals a kernel reads are cloned into the
    kernel's body so that outlining copies them into the `gpu.module`.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">,
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Run the grid as a host loop nest over blocks and threads (the same "
           "index arithmetic and guards; for testing the mapping on the CPU)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Loop nests turned into gpu.launch">,
    Statistic<"numCopies", "copies", "memref.copy turned into loops">,
  ];
}

def MergeKernelModulesPass : Pass<"xfmr-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Put every outlined kernel into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` makes one `gpu.module` per kernel. The artifact
    carries one PTX file and one cubin per target, loaded once: this pass
    moves every `gpu.func` into the first module (globals with the same
    name and the same contents are kept once, others renamed) and points
    each `gpu.launch_func` at it. A kernel takes its old module's (unique)
    name.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

#endif // XFMR_TARGET_GPU_PASSES
