//===- KVQuant.h - quantized KV-cache rows and tiles ------------*- C++ -*-===//
//
// Part of xfmr. The element-level code of int8 and fp8-e4m3 KV caches
// (xfmr-compile --kv-dtype): xfmr.kv_write quantizes each token's head
// vectors with one f32 scale per head, xfmr.paged_attention widens each
// key/value tile back to f32 as it reads it. Both are linalg.generic ops on
// tensors; fp8 is encoded and decoded with integer operations (LLVM has no
// fp8 arithmetic on x86), bit-exact with round to nearest even.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOLINALG_KVQUANT_H
#define XFMR_LIB_CONVERSION_XFMRTOLINALG_KVQUANT_H

#include "mlir/IR/Builders.h"

namespace xfmr::lowering {

struct QuantizedRow {
  mlir::Value values; ///< [H, D] of the pool's element type
  mlir::Value scales; ///< [H] f32
};

/// `row` [H, D] (any float type) as `element` values and per-head scales:
/// s = max|x| / qmax (127 for i8, 448 for f8E4M3FN), q = round(x / s), 0
/// where s = 0.
QuantizedRow quantizeHeads(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                           mlir::Type element);

/// One stored KV element as f32, for the body of the attention products: a
/// float widened exactly, an i8 converted, an f8E4M3FN byte widened through
/// f16 (the byte's bits placed in an f16 are the value / 256, exact
/// including subnormals; vcvtph2ps on F16C CPUs): the result times
/// widenedScale(element) is the stored value.
mlir::Value widenKV(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);
/// 256 for f8E4M3FN (see widenKV), else 1: folded into the per-row scales.
double widenedScale(mlir::Type element);

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_XFMRTOLINALG_KVQUANT_H
