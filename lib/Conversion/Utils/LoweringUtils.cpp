//===- LoweringUtils.cpp - builders shared by the lowerings ---------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/LoweringUtils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::lowering {

FloatType accumulatorType(Type element) {
  auto f = cast<FloatType>(element);
  return f.getWidth() < 32 ? Float32Type::get(element.getContext()) : f;
}

Value convertFloat(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  unsigned fromWidth = cast<FloatType>(from).getWidth();
  unsigned toWidth = cast<FloatType>(to).getWidth();
  if (fromWidth < toWidth)
    return arith::ExtFOp::create(b, loc, to, v);
  if (fromWidth > toWidth)
    return arith::TruncFOp::create(b, loc, to, v);
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  return arith::TruncFOp::create(b, loc, to, wide);
}

Value floatConstant(OpBuilder &b, Location loc, FloatType type, double v) {
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
}

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value dimValue(OpBuilder &b, Location loc, Value t, int64_t d) {
  return getValueOrCreateConstantIndexOp(b, loc, tensor::getMixedSize(b, loc, t, d));
}

} // namespace xfmr::lowering
