//===- Passes.h - GPU (NVPTX) target passes ---------------------*- C++ -*-===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TARGET_GPU_PASSES_H
#define XFMR_TARGET_GPU_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace xfmr::gpu {

/// The largest value head dim xfmr-gpu-attention's kernel takes (its
/// output tile stays in shared memory).
constexpr int64_t kFusedAttentionMaxHeadDim = 256;

#define GEN_PASS_DECL
#include "xfmr/Target/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "xfmr/Target/GPU/Passes.h.inc"

} // namespace xfmr::gpu

#endif // XFMR_TARGET_GPU_PASSES_H
