//===- KernelBuilder.h - a block's program as phases ------------*- C++ -*-===//
//
// Part of xfmr.
//
// The kernels written by hand (tensor-core products, fused attention) are
// built as a sequence of phases separated by barriers: in each phase every
// thread of the block runs the same code on its own share of a tile in
// shared memory, or every warp runs a tensor-core product on tiles in
// shared memory. Built for the GPU, a phase is the thread's code followed
// by gpu.barrier and a warp product is WMMA m16n16k8 tf32 (3xTF32). Built
// with `emulate`, a phase is a host loop over the threads and a warp
// product is scalar loops: the same tiles, indices, guards and shared
// memory layout run through the CPU lowering in tests, so everything but
// the tensor-core instruction and the barrier is checked against
// onnxruntime without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_TARGET_GPU_KERNELBUILDER_H
#define XFMR_LIB_TARGET_GPU_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <array>

namespace xfmr::gpu {

/// WMMA's fragment: 16 x 16 results, 8 terms of the reduction per step.
constexpr int64_t kFrag = 16, kFragK = 8;

/// An operand tile of a warp product in shared memory, split into tf32
/// high and low parts (x = hi + lo), and the element the warp starts at.
/// A tile in shared memory as tf32 hi and lo parts; `lo` null when the
/// values are exact in tf32 (integers of at most 8 bits): no lo terms.
struct SplitTile {
  mlir::Value hi, lo;
  mlir::Value row, col;
};

class KernelBuilder {
public:
  KernelBuilder(mlir::OpBuilder &b, mlir::Location loc, int64_t threads, bool emulate)
      : b(b), loc(loc), threads(threads), emulate(emulate) {}

  mlir::OpBuilder &b;
  mlir::Location loc;
  int64_t threads;
  bool emulate;

  mlir::Value idx(int64_t v) { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  mlir::Value f32(float v);
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return mlir::arith::AddIOp::create(b, loc, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return mlir::arith::SubIOp::create(b, loc, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return mlir::arith::MulIOp::create(b, loc, x, y);
  }
  mlir::Value div(mlir::Value x, int64_t y) {
    return mlir::arith::DivUIOp::create(b, loc, x, idx(y));
  }
  mlir::Value rem(mlir::Value x, int64_t y) {
    return mlir::arith::RemUIOp::create(b, loc, x, idx(y));
  }
  mlir::Value lt(mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, x, y);
  }
  mlir::Value both(mlir::Value x, mlir::Value y) {
    return mlir::arith::AndIOp::create(b, loc, x, y);
  }
  mlir::Value load(mlir::Value buf, mlir::ValueRange at) {
    return mlir::memref::LoadOp::create(b, loc, buf, at);
  }
  void store(mlir::Value v, mlir::Value buf, mlir::ValueRange at) {
    mlir::memref::StoreOp::create(b, loc, v, buf, at);
  }

  /// x = hi + lo with hi x's tf32 value (the low 13 mantissa bits cleared).
  std::pair<mlir::Value, mlir::Value> splitTF32(mlir::Value x);

  /// `body()` in a new scf.for over [lb, ub) by step.
  void loop(mlir::Value lb, mlir::Value ub, mlir::Value step,
            llvm::function_ref<void(mlir::Value)> body);
  void loop(int64_t n, llvm::function_ref<void(mlir::Value)> body) {
    loop(idx(0), idx(n), idx(1), body);
  }
  /// `then()` when `cond` holds; `otherwise()` (if given) else.
  void when(mlir::Value cond, llvm::function_ref<void()> then,
            llvm::function_ref<void()> otherwise = nullptr);
  /// The f32 `make()` computes when `cond` holds, else 0 (a guarded load).
  mlir::Value orZero(mlir::Value cond, llvm::function_ref<mlir::Value()> make);

  /// One phase: every thread of the block runs `body(tid)`, then the block
  /// waits (on the host: the threads one after another).
  void phase(mlir::Value gpuTid, llvm::function_ref<void(mlir::Value)> body);
  /// Runs `body(i)` for i = tid, tid + threads, ... below `count` (a
  /// multiple of the block size): consecutive threads take consecutive
  /// elements, coalesced along a row.
  void forShare(mlir::Value tid, int64_t count, llvm::function_ref<void(mlir::Value)> body);

  /// One warp phase: every warp runs `body(warp)`, then the block waits
  /// (on the host: the warps one after another).
  void warpPhase(mlir::Value gpuTid, llvm::function_ref<void(mlir::Value)> body);

  /// The body of one block: block ids (x, y, z), thread id (null when
  /// emulated: phases loop over the threads), the shared buffers.
  using BlockBody =
      llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value, mlir::Value,
                              llvm::ArrayRef<mlir::Value>)>;
  /// Runs `body` on a grid of `blocks` blocks with f32 shared buffers of
  /// `shapes`: a gpu.launch of kernel `name` in @xfmr_kernels, or, emulated,
  /// host loops over the blocks with the shared buffers on the heap
  /// (allocated before, freed after: the grid may sit in a loop).
  void grid(llvm::StringRef name, std::array<mlir::Value, 3> blocks,
            llvm::ArrayRef<llvm::SmallVector<int64_t, 2>> shapes, BlockBody body);

  /// The warp's product out[r, c] (=|+=) sum_k a[r, k] * b[k, c] for a
  /// [16, 16 * frags] piece of `out` at (outRow, outCol), k over `depth`
  /// (a multiple of 8) from a's and b's starts, as the three tf32 products
  /// lo*hi, hi*lo, hi*hi per step of 8 (3xTF32). `out` is f32 in shared
  /// memory; with `accumulate` its values are added to.
  void warpProduct(const SplitTile &a, const SplitTile &bt, int64_t depth, int64_t frags,
                   mlir::Value out, mlir::Value outRow, mlir::Value outCol, bool accumulate);
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_TARGET_GPU_KERNELBUILDER_H
