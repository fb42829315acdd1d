//===- LoweringUtils.cpp - builders shared by the lowerings ---------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/LoweringUtils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
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

void runtimeCheck(OpBuilder &b, Location loc, Value cond, const llvm::Twine &message) {
  std::string where;
  llvm::raw_string_ostream os(where);
  loc.print(os);
  cf::AssertOp::create(b, loc, cond, (message + " at " + where).str());
}

Value checkedIndex(OpBuilder &b, Location loc, Value i, Value dim, bool isUnsigned,
                   llvm::StringRef what) {
  if (!isa<IndexType>(i.getType())) {
    if (isUnsigned || i.getType().isInteger(1))
      i = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), i);
    else
      i = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  }
  Value zero = indexConstant(b, loc, 0);
  Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  i = arith::SelectOp::create(b, loc, neg, arith::AddIOp::create(b, loc, i, dim), i);
  Value ok = arith::AndIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i, zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, dim));
  runtimeCheck(b, loc, ok, what + llvm::Twine(": index out of range"));
  // Execution goes on after a failed check (the entry point reports it when
  // it returns): index 0 stands in for the bad one. An empty `dim` has no
  // element to read; its users read nothing when the extent is 0.
  return arith::SelectOp::create(b, loc, ok, i, zero);
}

} // namespace xfmr::lowering
