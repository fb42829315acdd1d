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

} // namespace xfmr::lowering

#endif // XFMR_CONVERSION_LOWERINGUTILS_H
