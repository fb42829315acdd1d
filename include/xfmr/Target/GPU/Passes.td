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
    becomes a loop nest (so copies run on the device too). A buffer the
    host function allocates that only kernels touch (uses inside launches,
    deallocation, size queries, views of the same) becomes device memory
    (an asynchronous `gpu.alloc` on the runtime's stream); any other (the
    host reads a scalar of it, returns it, passes it to a call) becomes
    `gpu.alloc host_shared` (unified memory). `memref.dealloc` becomes a
    call of the runtime's `xfmr_gpu_free`. Constant globals a kernel reads are cloned into the
    kernel's body so that outlining copies them into the `gpu.module`.
    A run-time check (`cf.assert`) inside a kernel stores its number
    (1-based, messages in module attribute `xfmr.kernel_checks`) into the
    device word `@xfmr_kernel_check`, which the runtime reads and clears
    after each call: a trap would poison the CUDA context, and the lowerings
    clamp what their checks guard.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">,
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Run the grid as a host loop nest over blocks and threads (the same "
           "index arithmetic and guards; for testing the mapping on the CPU)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Loop nests turned into gpu.launch">,
    Statistic<"numCopies", "copies", "memref.copy turned into loops">,
  ];
}

def TensorCoreProductsPass : Pass<"xfmr-gpu-products", "mlir::ModuleOp"> {
  let summary = "Run every f32 matrix product as a tensor-core kernel";
  let description = [{
    After bufferization, each f32 product `C[.., m, n] += A[.., m, k] *
    B[.., k, n]` (A or B possibly transposed, outer dims shared or
    broadcast) becomes one `gpu.launch`: 32 x 64 tiles of C per block of 4
    warps, A and B staged in shared memory per 32-wide step of K and split
    into tf32 high and low parts, each warp accumulating with WMMA
    m16n16k8 tf32 (`gpu.subgroup_mma_*`, `wmma.mma.sync` in PTX) the three
    products lo*hi, hi*lo, hi*hi (3xTF32: near-f32 accuracy on tensor
    cores). Steps of K are the same for every row: a row's result does not
    depend on the batch. With `emulate`, the same tiles, guards and staging
    run as host loops (the warp's WMMA as scalar loops), for testing on the
    CPU.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Host loops instead of a kernel (tests on the CPU)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::linalg::LinalgDialect"];
  let statistics = [
    Statistic<"numProducts", "products", "Products turned into tensor-core kernels">,
  ];
}

def FusedAttentionPass : Pass<"xfmr-gpu-attention", "mlir::ModuleOp"> {
  let summary = "Run every xfmr.attention_buffers as one FlashAttention kernel";
  let description = [{
    After bufferization, each `xfmr.attention_buffers` (f32 attention that
    `convert-xfmr-to-linalg{fused-attention=N}` left on buffers) becomes one
    `gpu.launch`: a block of 4 warps per 16 query rows of one head, keys 32
    at a time with an online softmax (causal: only up to the last visible
    key), S = Q·Kᵀ and O += P·V on tensor cores (WMMA m16n16k8 tf32,
    3xTF32) from tiles staged in shared memory, the running output in
    shared memory, GQA heads read in place. With `emulate`, the same
    program runs as host loops (tests on the CPU).
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Host loops instead of a kernel (tests on the CPU)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::math::MathDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Attention ops turned into fused kernels">,
  ];
}

def MergeKernelModulesPass : Pass<"xfmr-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Put every outlined kernel into one gpu.module, shared buffers aligned";
  let description = [{
    `gpu-kernel-outlining` makes one `gpu.module` per kernel. The artifact
    carries one PTX file and one cubin per target, loaded once: this pass
    moves every `gpu.func` into the first module (globals with the same
    name and the same contents are kept once, others renamed) and points
    each `gpu.launch_func` at it. A kernel takes its old module's (unique)
    name. Every kernel's workgroup (shared-memory) buffers get `llvm.align`
    128: WMMA loads and stores need 256-bit aligned rows, and the lowering
    otherwise aligns a buffer to its element only.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect"];
}

#endif // XFMR_TARGET_GPU_PASSES
