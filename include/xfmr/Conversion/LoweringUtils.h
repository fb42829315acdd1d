//===- LoweringUtils.h - builders shared by the lowerings -------*- C++ -*-===//
//
// Part of xfmr. Small builders both convert-onnx-to-linalg and
// convert-xfmr-to-linalg use: index constants and dims, the type a reduction
// or product accumulates in, float conversions and constants.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_CONVERSION_LOWERINGUTILS_H
#define XFMR_CONVERSION_LOWERINGUTILS_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace xfmr::lowering {

/// f32 for 16-bit (and narrower) floats, else the type itself.
mlir::FloatType accumulatorType(mlir::Type element);

/// Float scalar `v` as `to`; formats of the same width (bf16, f16) go through
/// f32 since extf and truncf need a width change.
mlir::Value convertFloat(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Type to);

mlir::Value floatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::FloatType type, double v);
mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
/// The size of dim `d` of `t` as an index value (a constant when static).
mlir::Value dimValue(mlir::OpBuilder &b, mlir::Location loc, mlir::Value t, int64_t d);

/// A run-time check: unless `cond` holds, the call fails with `message` (and
/// the op's location). It is a `cf.assert`; `xfmr-checks-to-status` turns
/// every one into an error returned by the entry point, so the code after a
/// check must stay memory-safe when the check fails (clamp what it guards).
void runtimeCheck(mlir::OpBuilder &b, mlir::Location loc, mlir::Value cond,
                  const llvm::Twine &message);

/// Index `i` (any integer type, or index) normalized into [0, dim): negative
/// values count from the end (ONNX Gather's rule). Anything else out of range
/// fails the call with "`what`: index out of range" and is clamped into
/// [0, dim) so that the code that follows reads nothing out of bounds.
mlir::Value checkedIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value i, mlir::Value dim,
                         bool isUnsigned, llvm::StringRef what);

/// The bytes of a constant operand (onnx.Constant or arith.constant, dense
/// or a resource blob); nothing for splats or values only known at run time.
std::optional<llvm::ArrayRef<char>> constantBytes(mlir::Value v);

/// An arith.constant tensor of `shape` x `element` holding `bytes` (a
/// resource blob named `name`).
mlir::Value constantTensor(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<char> bytes,
                           llvm::ArrayRef<int64_t> shape, mlir::Type element,
                           llvm::StringRef name);

/// Declares the micro-kernel `name` (runtime/ukernels: pointers and i64s
/// in, nothing out) once in `anchor`'s module.
void declareKernel(mlir::OpBuilder &b, mlir::Operation *anchor, llvm::StringRef name,
                   mlir::TypeRange args);

/// Micro-kernel calls over `rows` (index) rows, `rows64` the same as i64:
/// one call(b, 0, rows64) below `parallelRows` rows, else call(b, r0,
/// count) per block of `tile` rows in an scf.for marked
/// `xfmr.independent_iterations` (xfmr-parallelize-loops splits it across
/// threads). r0 and count are i64.
void forRowBlocks(mlir::OpBuilder &b, mlir::Location loc, mlir::Value rows, mlir::Value rows64,
                  int64_t tile, int64_t parallelRows,
                  llvm::function_ref<void(mlir::OpBuilder &, mlir::Value, mlir::Value)> call);

/// A read-only buffer holding a copy of the tensor `t`, for a micro-kernel
/// that reads it through a pointer the tensor analysis cannot see. The copy
/// goes into a `bufferization.alloc_tensor`, which CSE never merges (a
/// `tensor.empty` of the same shape would be merged with the destination of
/// a later elementwise op, which could then be computed in place over the
/// copy while calls after it still read the pointer).
mlir::Value kernelInput(mlir::OpBuilder &b, mlir::Location loc, mlir::Value t);

/// After a lowering: a kernelInput copy of a tensor that an earlier one in
/// the same block already copied (the same value, or the same pure ops on
/// it, such as q, k and v projections flattening one input) is dropped and
/// its users read the earlier buffer, which nothing writes after its copy.
void mergeKernelInputs(mlir::Operation *root);

/// The address of an identity-layout memref's first element, as an LLVM
/// pointer for a micro-kernel call.
mlir::Value addressOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref);

} // namespace xfmr::lowering

#endif // XFMR_CONVERSION_LOWERINGUTILS_H
