//===- Passes.td - CPU target passes -----------------------*- tablegen -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TARGET_CPU_PASSES
#define XFMR_TARGET_CPU_PASSES

include "mlir/Pass/PassBase.td"

def ExternalizeWeightsPass : Pass<"xfmr-externalize-weights", "mlir::ModuleOp"> {
  let summary = "Move large constants of the entry function into a weights file";
  let description = [{
    Every non-splat `arith.constant` tensor of at least `min-bytes` bytes in
    the public function is written to `weights-file` at a 64-byte aligned
    offset and replaced by a view of a new leading function argument
    `memref<?xi8> {xfmr.weights}` (the memory-mapped file at run time):

    ```mlir
    %v = memref.view %weights[%c4096][] : memref<?xi8> to memref<64x64xf32>
    %t = bufferization.to_tensor %v restrict : memref<64x64xf32> to tensor<64x64xf32>
    ```

    A panel `linalg.pack` of a constant (xfmr-pack-weights leaves one for
    every large matrix) is written in its packed layout, whatever its
    size, and replaced the same way. Each weight is written from its blob
    and the blob is released once no op refers to it, so the pass holds no
    copy of the weights (a model's memory-mapped pages are given back as
    they are written).

    With `reference-sources`, a weight whose bytes are those of a model
    file the importer mapped (ONNX external data; xfmr::MappedSources) is
    not written: the writer records the file, offset and packing, and the
    loader reads it from there (xfmr-compile --weights=reference).

    The module gets `xfmr.weights = {count, size}`. Without `weights-file`
    nothing is written (for tests), offsets are still assigned.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"weightsFile", "weights-file", "std::string", "\"\"",
           "Where to write the weights (written atomically)">,
    Option<"minBytes", "min-bytes", "int64_t", "256",
           "Smallest constant, in bytes, that moves to the file">,
    Option<"background", "background", "bool", "false",
           "Write the file on a thread while compilation goes on "
           "(xfmr::cpu::waitForWeights joins it)">,
    Option<"keepBlobs", "keep-blobs", "bool", "false",
           "Do not free a weight's resource blob after its last use here (another "
           "module shares the blobs: xfmr-compile's calibration artifact)">,
    Option<"referenceSources", "reference-sources", "bool", "false",
           "Leave weights that are bytes of a mapped model file in that file "
           "(the writer lists them as references)">,
  ];
  let statistics = [
    Statistic<"numWeights", "weights", "Constants moved to the weights file">,
  ];
}

def PrepareEntryPass : Pass<"xfmr-prepare-entry", "mlir::ModuleOp"> {
  let summary = "Give the public function the artifact calling convention";
  let description = [{
    Each output must be a new `malloc` the caller owns (docs/artifact.md). A
    returned tensor that a destination-style op computes into a
    `tensor.empty` already gets its own buffer and is returned as is; any
    other (an input, a weight, a constant, a view of them, a value returned
    twice) is copied into a fresh allocation
    (`bufferization.alloc_tensor() copy(...)`). Tensor arguments are marked
    `bufferization.writable = false`: the caller's inputs are never
    overwritten. The function gets `llvm.emit_c_interface`.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LowerStridedCopiesPass : Pass<"xfmr-lower-strided-copies"> {
  let summary = "Turn memref.copy of strided views into linalg.copy";
  let description = [{
    MLIR lowers a `memref.copy` between contiguous buffers to `memcpy` but
    calls the `memrefCopy` runtime helper for any other layout; xfmr's
    artifacts link no MLIR runtime library, so such copies become a
    `linalg.copy` (and then loops) instead.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def DropPoolResultsPass : Pass<"xfmr-drop-pool-results", "mlir::ModuleOp"> {
  let summary = "Drop the KV-pool results a step function wrote in place";
  let description = [{
    After bufferization, a step function (xfmr-paged-kv) returns each
    updated KV pool as the very buffer it received. This pass removes those
    results (marked `xfmr.kv_pool` by xfmr-prepare-entry) from the public
    entry, so the ABI returns only the model's outputs. A pool result that
    is not its argument's buffer (bufferized out of place) is an error:
    the caller's pool would not be updated.
  }];
}

def ContractionsToBLASPass : Pass<"xfmr-contractions-to-blas", "mlir::ModuleOp"> {
  let summary = "Call BLAS sgemm for f32 matrix products with enough rows";
  let description = [{
    After bufferization, every top-level f32 `linalg.generic` that is a
    matrix product (`C[b?,m,n] += A[b?,m,k] * B[b?,k,n]`, A and B possibly
    transposed, B possibly shared across the batch) is guarded by a run-time
    test and calls `cblas_sgemm` (OpenBLAS, row-major, beta = 1) once per
    batch element when

    * the product has at least `min-rows` rows (decode's one-row products
      stay on the generated loop, which streams the weights at memory
      bandwidth), and
    * every operand's innermost stride is 1 and its leading dimension is
      valid for BLAS, and every extent fits BLAS's 32-bit integers.

    Otherwise the original loop runs:

    ```mlir
    scf.if %use_blas {
      scf.for %b = %c0 to %batch step %c1 {
        func.call @cblas_sgemm(%row_major, %ta, %tb, %m, %n, %k, %one,
                               %a, %lda, %b, %ldb, %one, %c, %ldc) : (...) -> ()
      }
    } else {
      linalg.generic ... // unchanged
    }
    ```

    Products inside loops (attention tiles) are left alone: their extents
    are a few dozen and the call would cost more than it saves. The shared
    object links `-lopenblas` when the module calls it (docs/cpu-backend.md).
  }];
  let options = [
    Option<"minRows", "min-rows", "int64_t", "8",
           "Fewest rows (m) for which a product calls BLAS">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numCalls", "blas-calls", "Matrix products guarded by a BLAS call">,
  ];
}

def TileContractionsPass : Pass<"xfmr-tile-contractions", "mlir::ModuleOp"> {
  let summary = "Register-blocked f32 matrix products that stay batch invariant";
  let description = [{
    After bufferization, every top-level f32 `linalg.generic` that is a
    matrix product `C[b?,m,n] += A[b?,m,k] * B[b?,k,n]` with B and C
    contiguous along n gets register-blocked kernels: for each panel of 16
    columns, blocks of 6 rows, then one block of the M mod 6 remaining rows,
    keep their sums in vector registers (twelve 8-wide accumulators for 6
    rows) across the whole k loop, while the panel of B stays in cache for
    all rows.

    With B packed by xfmr-pack-weights (a constant weight), every row takes
    the kernels: a panel is one contiguous stream, so one row (decode) reads
    the matrix at memory bandwidth. Otherwise products of at least 6 rows
    take the kernels on the full panels and the loop on the columns left
    over, and smaller ones keep the loop, which streams B's rows (strided
    panel reads would be slower).

    A product inside a loop (attention's tiles, which the loop around them
    shares out to the cores) is tiled in place, its tiles one after
    another, for any number of rows: `p · v` per KV block with the kernels
    above; the scores `q · kᵀ`, whose B is the key block read in place
    (transposed: both operands run along d), with 4 x 4 tiles of 16-lane
    dot products whose 16 accumulators one butterfly of shuffles and adds
    turns into 16 sums (DotTiles.cpp). Their elements are computed the
    same way in every tile, so they do not depend on the tile's size.

    Every element is computed exactly as the loop computes it: C's value,
    then one multiply-add per k in increasing k, contracted the same way
    (`contract`, never `reassoc`). So a row's result does not depend on how
    many other rows share the product: a request's tokens are the same
    whether it runs alone or batched with 63 others (batch invariance, which
    serving relies on for reproducible greedy outputs). BLAS cannot promise
    this (xfmr-contractions-to-blas is opt-in for that reason).

    With `lanes=16` (AVX-512 targets) the block is 12 rows by two panels
    (32 columns) when N is a static multiple of 32, else one panel: 24 (or
    12) zmm accumulators, two loads of B and twelve broadcasts per 24
    multiply-adds; the arithmetic of every element is the same, so
    artifacts for AVX2 and AVX-512 compute identical results.
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector register: 8 (AVX2: 6-row blocks) or 16 (AVX-512: 12-row blocks)">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numTiled", "tiled", "Matrix products given the register-blocked kernel">,
  ];
}

def PackWeightsPass : Pass<"xfmr-pack-weights", "mlir::ModuleOp"> {
  let summary = "Store constant f32 weight matrices in 16-column panels";
  let description = [{
    On linalg on tensors, before the weights are externalized: the constant
    B [K, N] (N a multiple of 16) of every top-level f32 matrix product
    `C[.., m, n] += A[.., m, k] * B[k, n]` is replaced by its panel layout
    Bp [N / 16, K, 16] (Bp[p, k, j] = B[k, 16p + j]), read through the map
    `(n floordiv 16, k, n mod 16)`, so the product is unchanged:

    ```mlir
    linalg.generic {indexing_maps = [..., affine_map<(b, k, m, n) ->
        (n floordiv 16, k, n mod 16)>, ...]}
        ins(%x, %packed : tensor<1x?x1024xf32>, tensor<64x1024x16xf32>) ...
    ```

    xfmr-tile-contractions then reads each panel as one contiguous stream:
    the whole matrix at memory bandwidth for one row (decode), each panel
    from cache for the other rows. This is IREE's data tiling (mmt4d) with
    the pack done at compile time. A constant with other users keeps its
    original too.

    Resource matrices of at least `lazy-min-bytes` become a `linalg.pack`
    of the constant instead, which xfmr-externalize-weights carries out as
    it writes the weight (or leaves to the loader, with its
    reference-sources), so no packed copy is held in memory.
  }];
  let options = [
    Option<"lazyMinBytes", "lazy-min-bytes", "int64_t", "1 << 20",
           "Resource matrices of at least this many bytes are packed by a "
           "linalg.pack carried out when weights are written">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect"];
  let statistics = [
    Statistic<"numPacked", "packed", "Weight matrices stored in panels">,
  ];
}

def OutlineLayersPass : Pass<"xfmr-outline-layers", "mlir::ModuleOp"> {
  let summary = "Compile repeated decoder layers once: one function per layer structure";
  let description = [{
    On linalg on tensors, after xfmr-pack-weights and before the weights are
    externalized. The top-level ops of the public function are grouped by
    the layer their location names (`.../layers.3/...`, also `layer.N`,
    `h.N`, `blocks.N`). Ops that do not depend on any layer's data flow
    (constants, shape arithmetic on inputs, rotary tables, CSE'd values
    shared by several layers) stay where they are. Layers whose remaining
    ops are structurally equal (same ops, attributes, types and regions,
    operands in the same places) become calls of one private function
    `@xfmr_layer_N`; what differs between them (weights, KV pools, the
    previous layer's outputs) becomes arguments, small constants that are
    equal in every layer are cloned into the function.

    ```mlir
    %h1, %kp1, %vp1 = func.call @xfmr_layer_0(%h0, %w1_qkv, %w1_o, ..., %kpool1, %vpool1, ...)
    %h2, %kp2, %vp2 = func.call @xfmr_layer_0(%h1, %w2_qkv, %w2_o, ..., %kpool2, %vpool2, ...)
    ```

    Code generation then compiles one layer instead of every layer, so its
    time does not grow with the depth of the model. Layers that differ
    (the first layer of a model whose later layers add the residual inside
    their first norm, say) stay inline; so does everything when the
    locations name no layers.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numFunctions", "layer-functions", "Functions made from repeated layers">,
    Statistic<"numCalls", "layer-calls", "Layers replaced by a call">,
  ];
}

def SplitRowsPass : Pass<"xfmr-split-rows", "mlir::ModuleOp"> {
  let summary = "Row-parallel loops for top-level elementwise and row-wise ops";
  let description = [{
    After bufferization, before `convert-linalg-to-loops` (with xfmr-compile
    --parallel): a top-level `linalg.generic` (directly in a function: not
    an attention tile inside a sequence loop) whose outermost loop that is
    not statically 1 is parallel, used by every output and only as a plain
    dimension by every operand (norms, RoPE, activations, residual adds,
    the int8 quantization of activations) becomes

      scf.if rows >= min-rows
        scf.for blocks of `rows-per-task` rows {xfmr.independent_iterations}
          the same generic on subviews of the block's rows
      else
        the generic as it was

    and `xfmr-parallelize-loops` turns the marked loop into an
    `scf.parallel` (OpenMP). `linalg.index` of the split loop is offset by
    the block's first row. Only which thread computes a row changes: every
    element's operations and their order are the same, so results are
    bit-identical, and steps of fewer than `min-rows` rows (decode) do not
    wake threads.
  }];
  let options = [
    Option<"minRows", "min-rows", "int64_t", /*default=*/"64",
           "Fewer rows than this run as before, on one core">,
    Option<"rowsPerTask", "rows-per-task", "int64_t", /*default=*/"16",
           "Rows per iteration of the parallel loop">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numSplit", "split-ops", "Ops given a row-parallel loop">,
  ];
}

def ParallelizeLoopsPass : Pass<"xfmr-parallelize-loops", "mlir::ModuleOp"> {
  let summary = "Turn loops marked independent into scf.parallel";
  let description = [{
    After bufferization and deallocation, an `scf.for` that a lowering
    marked `xfmr.independent_iterations` (the sequence loop of paged
    attention: each sequence writes its own rows) and that carries no values
    becomes an `scf.parallel` with the same body, which
    `convert-scf-to-openmp` then runs on several cores (xfmr-compile
    --parallel). A marked loop that still carries values is left alone.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numParallel", "parallel-loops", "Loops turned into scf.parallel">,
  ];
}

def LoopSchedulePass : Pass<"xfmr-loop-schedule", "mlir::ModuleOp"> {
  let summary = "Give every OpenMP worksharing loop a schedule";
  let description = [{
    Runs after `convert-scf-to-openmp`, which leaves `omp.wsloop` without
    a schedule clause: libomp then splits the iterations statically, each
    thread an equal share up front, and a core that runs slower (another
    process, a descheduled virtual CPU, tiles of unequal cost) holds the
    others at the closing barrier. With `kind=guided` (the default) a
    thread takes a share of what is left, at least `chunk` iterations, as
    it becomes free: the first shares are large and contiguous (a decode
    step's threads still stream long runs of weight panels), the last
    ones small, so the threads finish together. `dynamic` hands out
    `chunk` iterations at a time (measured: 12% slower fp32 decode, the
    streams broken into one-tile pieces); `runtime` defers to
    `OMP_SCHEDULE`; `static` adds nothing.
    Which thread computes an iteration does not change what it computes
    (each iteration of the loops xfmr runs in parallel, a product's column
    tile, a block of rows, a sequence of paged attention, is one thread's
    work), so results are the same bits under every schedule.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"guided\"",
           "static, dynamic, guided or runtime">,
    Option<"chunk", "chunk", "int64_t", /*default=*/"1",
           "The fewest iterations a thread takes at a time (dynamic, guided)">,
  ];
  let dependentDialects = ["::mlir::omp::OpenMPDialect", "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numLoops", "loops", "Worksharing loops given a schedule">,
  ];
}

def ChecksToStatusPass : Pass<"xfmr-checks-to-status", "mlir::ModuleOp"> {
  let summary = "Turn run-time checks into an error status the entry point returns";
  let description = [{
    Runs after `convert-scf-to-cf`. Each public function with a C interface
    gets a trailing `memref<2xi64>` status argument (the caller zeroes
    it). Every `cf.assert` in it becomes a recorded failure: element
    0 is set to the check's number plus one, unless a failure is already
    recorded. A check in the function's own control flow returns at once
    with null result descriptors:

    ```mlir
    cf.assert %ok, "xfmr.embedding: token id: index out of range at loc(...)"
    // becomes
    cf.cond_br %ok, ^rest, ^exit(%c1_i64 : i64)
    ...
    ^exit(%code: i64):   // record %code in %status[0], return null memrefs
    ```

    A check inside a region the function cannot return from (an OpenMP
    loop) records its failure and falls through: the lowerings clamp what
    their checks guard, so the rest of the call stays in bounds, and the
    caller discards its results. The messages, in number order, become the
    module attribute `xfmr.checks` (xfmr-compile writes them to the
    manifest). A check outside such a function is an error.
  }];
  let dependentDialects = ["::mlir::cf::ControlFlowDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
  let statistics = [
    Statistic<"numReturning", "returning-checks", "Checks that return on failure">,
    Statistic<"numRecording", "recording-checks",
              "Checks in parallel regions that record and continue">,
  ];
}

def ApproximateExpPass : Pass<"xfmr-approximate-exp"> {
  let summary = "f32 math.exp as arithmetic (Cephes polynomial) instead of libm's expf";
  let description = [{
    Rewrites every f32 `math.exp` (softmax, SiLU, sigmoid, attention's
    online softmax) into MLIR's polynomial approximation: n = floor(x log2 e
    + 1/2) clamped to [-127, 127], r = x - n ln 2 (two FMAs), a degree-5
    Cephes polynomial and 2^n built in the exponent bits; measured relative
    error at most 2.9e-7 (about 2.5 ulp; scripts/check-exp-accuracy.py),
    results below about 2^-126 flushed to 0, -inf gives 0.
    The loops that called `expf` one element at a time have no call left,
    so LLVM vectorizes them. Every element is computed by the same
    operations (explicit FMAs, no reassociation), whatever the vector width
    or the number of rows: results stay independent of the batch and the
    same on AVX2 and AVX-512. (Its FMAs and floor become LLVM intrinsics
    in xfmr-exact-math-to-intrinsics.)
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def ExactMathToIntrinsicsPass : Pass<"xfmr-exact-math-to-intrinsics"> {
  let summary = "Exact f32/f64 math ops (fma, floor, ceil, trunc, round, roundeven) as LLVM intrinsics";
  let description = [{
    `convert-math-to-libm` turns these ops into calls to fmaf, floorf,
    ceilf, truncf, roundf and roundevenf, which keep LLVM from vectorizing
    the loops around them (xfmr-approximate-exp's polynomial uses fma and
    floor; QuantizeLinear and the int8 KV cache round to even). As LLVM
    intrinsics they are one instruction each (vfmadd, vroundps) and
    vectorize. The results are the same: every one of these operations is
    exact (correctly rounded) both ways. Runs before convert-math-to-libm.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // XFMR_TARGET_CPU_PASSES
