//===- KVQuant.cpp - quantized KV-cache rows and tiles --------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "KVQuant.h"
#include "TileBuilder.h"

#include "xfmr/Conversion/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::lowering {
namespace {

Value f32Constant(OpBuilder &b, Location loc, double v) {
  return floatConstant(b, loc, b.getF32Type(), v);
}
Value i32Constant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}

/// The largest magnitude of the format: 127 (i8) or 448 (f8E4M3FN).
double maxMagnitude(Type element) { return element.isInteger(8) ? 127.0 : 448.0; }

/// y (f32, |y| <= 448) as float8 e4m3fn bits in an i8, round to nearest even.
/// Below 2^-6 the format is fixed point with step 2^-9: the code is
/// round(|y| * 512), which carries into the exponent field at 8. Above,
/// rounding the f32 mantissa to 3 bits (RNE on the bit pattern) keeps the
/// exponent, rebiased from 127 to 7.
Value encodeE4M3(OpBuilder &b, Location loc, Value y) {
  Type i32 = b.getI32Type();
  auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
  Value bits = arith::BitcastOp::create(b, loc, i32, y);
  Value sign = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, c(24)), c(0x80));
  Value a = math::AbsFOp::create(b, loc, y);
  // Subnormal range.
  Value small = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, a,
                                      f32Constant(b, loc, 0x1p-6));
  Value steps = math::RoundEvenOp::create(
      b, loc, arith::MulFOp::create(b, loc, a, f32Constant(b, loc, 512.0)));
  Value subCode = arith::FPToSIOp::create(b, loc, i32, steps);
  // Normal range.
  Value abits = arith::BitcastOp::create(b, loc, i32, a);
  Value odd = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, abits, c(20)), c(1));
  Value rounded = arith::AddIOp::create(
      b, loc, abits, arith::AddIOp::create(b, loc, c(0x7FFFF), odd));
  Value exponent = arith::SubIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, rounded, c(23)), c(120));
  Value mantissa = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, rounded, c(20)),
                                         c(7));
  Value normCode = arith::OrIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, exponent, c(3)), mantissa);
  Value code = arith::SelectOp::create(b, loc, small, subCode, normCode);
  code = arith::OrIOp::create(b, loc, code, sign);
  return arith::TruncIOp::create(b, loc, b.getI8Type(), code);
}

} // namespace

QuantizedRow quantizeHeads(OpBuilder &b, Location loc, Value row, Type element) {
  MLIRContext *ctx = b.getContext();
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, row);
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap heads = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  using IT = utils::IteratorType;
  double qmax = maxMagnitude(element);

  // max |x| per head, then the scales.
  Value amax = generic(b, loc, row, filled(b, loc, {sizes[0]}, 0.0), {id, heads},
                       {IT::parallel, IT::reduction},
                       [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                         Value x = convertFloat(nb, l, a[0], nb.getF32Type());
                         return arith::MaximumFOp::create(nb, l, a[1],
                                                          math::AbsFOp::create(nb, l, x));
                       });
  Value scales = generic(b, loc, ValueRange{}, amax, {AffineMap::getMultiDimIdentityMap(1, ctx)},
                         {IT::parallel}, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                           return arith::DivFOp::create(nb, l, a[0], f32Constant(nb, l, qmax));
                         });
  // q = round(x / s), saturated; 0 for an all-zero head.
  Value q = generic(
      b, loc, ValueRange{row, scales}, emptyTensor(b, loc, sizes, element), {id, heads, id},
      {IT::parallel, IT::parallel}, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value x = convertFloat(nb, l, a[0], nb.getF32Type());
        Value zero = f32Constant(nb, l, 0.0);
        Value positive = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT, a[1], zero);
        Value y = arith::SelectOp::create(nb, l, positive, arith::DivFOp::create(nb, l, x, a[1]),
                                          zero);
        y = arith::MinimumFOp::create(
            nb, l, arith::MaximumFOp::create(nb, l, y, f32Constant(nb, l, -qmax)),
            f32Constant(nb, l, qmax));
        if (element.isInteger(8))
          return arith::FPToSIOp::create(nb, l, nb.getI8Type(),
                                         math::RoundEvenOp::create(nb, l, y));
        return arith::BitcastOp::create(nb, l, element, encodeE4M3(nb, l, y));
      });
  return {q, scales};
}

Value widenKV(OpBuilder &b, Location loc, Value v) {
  Type element = v.getType();
  Type f32 = b.getF32Type();
  if (element.isInteger(8))
    return arith::SIToFPOp::create(b, loc, f32, v);
  if (!isa<Float8E4M3FNType>(element))
    return convertFloat(b, loc, v, f32);
  // s.eeee.mmm -> the f16 s.0eeee.mmm0000000: exponent bias 15 instead of
  // 7, so the value / 2^8.
  Type i16 = b.getIntegerType(16);
  auto c = [&](int64_t x) { return arith::ConstantIntOp::create(b, loc, i16, x); };
  Value u = arith::ExtUIOp::create(b, loc, i16, arith::BitcastOp::create(b, loc, b.getI8Type(), v));
  Value magnitude = arith::ShLIOp::create(b, loc, arith::AndIOp::create(b, loc, u, c(0x7F)), c(7));
  Value sign = arith::ShLIOp::create(b, loc, arith::AndIOp::create(b, loc, u, c(0x80)), c(8));
  Value half = arith::BitcastOp::create(b, loc, b.getF16Type(),
                                        arith::OrIOp::create(b, loc, magnitude, sign));
  return arith::ExtFOp::create(b, loc, f32, half);
}

double widenedScale(Type element) { return isa<Float8E4M3FNType>(element) ? 256.0 : 1.0; }

} // namespace xfmr::lowering
