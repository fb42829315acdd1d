//===- Elementwise.cpp - elementwise onnx ops to linalg.generic -----------===//
//
// Part of xfmr.
//
// Unary math and activations, binary arithmetic and comparisons with ONNX
// broadcasting, variadic Sum/Mean/Max/Min, Where, Clip, Cast and the ops
// that forward their input (Identity, Dropout in inference).
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include <type_traits>

using namespace mlir;

namespace xfmr::lowering {
namespace {

Value cst(OpBuilder &b, Location loc, Type t, double v) {
  return scalarConstant(b, loc, t, v);
}

Value selectLess(OpBuilder &b, Location loc, Value x, Value y, bool isUnsigned,
                 bool wantMin) {
  if (isa<FloatType>(x.getType()))
    return wantMin ? arith::MinimumFOp::create(b, loc, x, y).getResult()
                   : arith::MaximumFOp::create(b, loc, x, y).getResult();
  if (isUnsigned)
    return wantMin ? arith::MinUIOp::create(b, loc, x, y).getResult()
                   : arith::MaxUIOp::create(b, loc, x, y).getResult();
  return wantMin ? arith::MinSIOp::create(b, loc, x, y).getResult()
                 : arith::MaxSIOp::create(b, loc, x, y).getResult();
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// The scalar computation of a unary op on `x` (converted element type;
/// `orig` is the original, possibly unsigned one).
template <typename OpTy>
using UnaryBody = Value (*)(OpTy op, OpBuilder &b, Location loc, Value x,
                            Type orig);

/// A unary op that is one math dialect op on floats.
template <typename MathOp, typename OpTy>
Value mathBody(OpTy, OpBuilder &b, Location loc, Value x, Type) {
  return MathOp::create(b, loc, x);
}

Value zeroLike(OpBuilder &b, Location loc, Value x) {
  return cst(b, loc, x.getType(), 0);
}

Value oneLike(OpBuilder &b, Location loc, Value x) {
  return cst(b, loc, x.getType(), 1);
}

/// exp(v) - 1.
Value expMinusOne(OpBuilder &b, Location loc, Value v) {
  return arith::SubFOp::create(b, loc, math::ExpOp::create(b, loc, v),
                               oneLike(b, loc, v));
}

/// x < 0 (floats).
Value isNegative(OpBuilder &b, Location loc, Value x) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x,
                               zeroLike(b, loc, x));
}

/// log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
Value softplus(OpBuilder &b, Location loc, Value x) {
  Value ax = math::AbsFOp::create(b, loc, x);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, ax));
  return arith::AddFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, x, zeroLike(b, loc, x)),
      math::Log1pOp::create(b, loc, e));
}

/// max(0, min(1, alpha * x + beta)).
Value hardSigmoid(OpBuilder &b, Location loc, Value x, float alpha,
                  float beta) {
  Type t = x.getType();
  Value v = arith::AddFOp::create(
      b, loc, arith::MulFOp::create(b, loc, cst(b, loc, t, alpha), x),
      cst(b, loc, t, beta));
  return arith::MaximumFOp::create(
      b, loc, zeroLike(b, loc, x),
      arith::MinimumFOp::create(b, loc, oneLike(b, loc, x), v));
}

float floatValue(const APFloat &f) { return f.convertToFloat(); }

Value unaryBody(onnx::AbsOp, OpBuilder &b, Location loc, Value x, Type orig) {
  if (isa<FloatType>(x.getType()))
    return math::AbsFOp::create(b, loc, x);
  return isUnsignedInt(orig) ? x : math::AbsIOp::create(b, loc, x).getResult();
}

Value unaryBody(onnx::NegOp, OpBuilder &b, Location loc, Value x, Type) {
  if (isa<FloatType>(x.getType()))
    return arith::NegFOp::create(b, loc, x);
  return arith::SubIOp::create(b, loc, zeroLike(b, loc, x), x);
}

Value unaryBody(onnx::ReluOp, OpBuilder &b, Location loc, Value x, Type orig) {
  if (isUnsignedInt(orig))
    return x;
  return selectLess(b, loc, x, zeroLike(b, loc, x), false, /*wantMin=*/false);
}

Value unaryBody(onnx::SignOp, OpBuilder &b, Location loc, Value x, Type orig) {
  Type t = x.getType();
  bool fp = isa<FloatType>(t);
  bool uns = isUnsignedInt(orig);
  Value zero = zeroLike(b, loc, x);
  Value pos, neg;
  if (fp) {
    pos = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, zero);
    neg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
  } else {
    pos = arith::CmpIOp::create(
        b, loc, uns ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt, x,
        zero);
    neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero);
    if (uns)
      neg = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  }
  Value r = arith::SelectOp::create(b, loc, neg, cst(b, loc, t, -1), zero);
  r = arith::SelectOp::create(b, loc, pos, oneLike(b, loc, x), r);
  if (fp) // NaN stays NaN
    r = arith::SelectOp::create(
        b, loc, arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x),
        x, r);
  return r;
}

Value unaryBody(onnx::NotOp, OpBuilder &b, Location loc, Value x, Type) {
  return arith::XOrIOp::create(b, loc, x, oneLike(b, loc, x));
}

Value unaryBody(onnx::ShrinkOp op, OpBuilder &b, Location loc, Value x, Type) {
  Type t = x.getType();
  Value lambd = cst(b, loc, t, floatValue(op.getLambd()));
  Value bias = cst(b, loc, t, floatValue(op.getBias()));
  Value negL = arith::NegFOp::create(b, loc, lambd);
  Value lo = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, negL);
  Value hi = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, lambd);
  Value r = arith::SelectOp::create(
      b, loc, hi, arith::SubFOp::create(b, loc, x, bias), zeroLike(b, loc, x));
  return arith::SelectOp::create(b, loc, lo,
                                 arith::AddFOp::create(b, loc, x, bias), r);
}

Value unaryBody(onnx::IsNaNOp, OpBuilder &b, Location loc, Value x, Type) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
}

Value unaryBody(onnx::IsInfOp op, OpBuilder &b, Location loc, Value x, Type) {
  Type t = x.getType();
  Value inf = highestValue(b, loc, t, false);
  Value ninf = lowestValue(b, loc, t, false);
  Value r = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  if (op.getDetectPositive())
    r = arith::OrIOp::create(
        b, loc, r,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, inf));
  if (op.getDetectNegative())
    r = arith::OrIOp::create(
        b, loc, r,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, ninf));
  return r;
}

Value unaryBody(onnx::ReciprocalOp, OpBuilder &b, Location loc, Value x, Type) {
  return arith::DivFOp::create(b, loc, oneLike(b, loc, x), x);
}

Value unaryBody(onnx::SigmoidOp, OpBuilder &b, Location loc, Value x, Type) {
  Value one = oneLike(b, loc, x);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one,
                               arith::AddFOp::create(b, loc, one, e));
}

Value unaryBody(onnx::SoftplusOp, OpBuilder &b, Location loc, Value x, Type) {
  return softplus(b, loc, x);
}

Value unaryBody(onnx::SoftsignOp, OpBuilder &b, Location loc, Value x, Type) {
  return arith::DivFOp::create(
      b, loc, x,
      arith::AddFOp::create(b, loc, oneLike(b, loc, x),
                            math::AbsFOp::create(b, loc, x)));
}

Value unaryBody(onnx::MishOp, OpBuilder &b, Location loc, Value x, Type) {
  return arith::MulFOp::create(
      b, loc, x, math::TanhOp::create(b, loc, softplus(b, loc, x)));
}

Value unaryBody(onnx::LeakyReluOp op, OpBuilder &b, Location loc, Value x,
                Type) {
  Value isNeg = isNegative(b, loc, x);
  Value alpha = cst(b, loc, x.getType(), floatValue(op.getAlpha()));
  return arith::SelectOp::create(b, loc, isNeg,
                                 arith::MulFOp::create(b, loc, alpha, x), x);
}

Value unaryBody(onnx::EluOp op, OpBuilder &b, Location loc, Value x, Type) {
  Value alpha = cst(b, loc, x.getType(), floatValue(op.getAlpha()));
  return arith::SelectOp::create(
      b, loc, isNegative(b, loc, x),
      arith::MulFOp::create(b, loc, alpha, expMinusOne(b, loc, x)), x);
}

Value unaryBody(onnx::SeluOp op, OpBuilder &b, Location loc, Value x, Type) {
  Type t = x.getType();
  Value alpha = cst(b, loc, t, floatValue(op.getAlpha()));
  Value gamma = cst(b, loc, t, floatValue(op.getGamma()));
  Value le = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, x,
                                   zeroLike(b, loc, x));
  Value neg = arith::MulFOp::create(b, loc, alpha, expMinusOne(b, loc, x));
  return arith::MulFOp::create(b, loc, gamma,
                               arith::SelectOp::create(b, loc, le, neg, x));
}

Value unaryBody(onnx::CeluOp op, OpBuilder &b, Location loc, Value x, Type) {
  Value zero = zeroLike(b, loc, x);
  Value alpha = cst(b, loc, x.getType(), floatValue(op.getAlpha()));
  Value neg = arith::MulFOp::create(
      b, loc, alpha,
      expMinusOne(b, loc, arith::DivFOp::create(b, loc, x, alpha)));
  return arith::AddFOp::create(b, loc,
                               arith::MaximumFOp::create(b, loc, x, zero),
                               arith::MinimumFOp::create(b, loc, neg, zero));
}

Value unaryBody(onnx::ThresholdedReluOp op, OpBuilder &b, Location loc, Value x,
                Type) {
  Value alpha = cst(b, loc, x.getType(), floatValue(op.getAlpha()));
  Value gt = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, alpha);
  return arith::SelectOp::create(b, loc, gt, x, zeroLike(b, loc, x));
}

Value unaryBody(onnx::HardSigmoidOp op, OpBuilder &b, Location loc, Value x,
                Type) {
  return hardSigmoid(b, loc, x, floatValue(op.getAlpha()),
                     floatValue(op.getBeta()));
}

Value unaryBody(onnx::HardSwishOp, OpBuilder &b, Location loc, Value x, Type) {
  return arith::MulFOp::create(b, loc, x,
                               hardSigmoid(b, loc, x, 1.0f / 6, 0.5f));
}

Value unaryBody(onnx::GeluOp op, OpBuilder &b, Location loc, Value x, Type) {
  Type t = x.getType();
  Value half = cst(b, loc, t, 0.5);
  Value inner;
  if (op.getApproximate() == "tanh") {
    Value x3 =
        arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    inner = arith::AddFOp::create(
        b, loc, x, arith::MulFOp::create(b, loc, cst(b, loc, t, 0.044715), x3));
    inner = math::TanhOp::create(
        b, loc,
        arith::MulFOp::create(b, loc, cst(b, loc, t, std::sqrt(2.0 / M_PI)),
                              inner));
  } else {
    inner = math::ErfOp::create(
        b, loc, arith::MulFOp::create(b, loc, x, cst(b, loc, t, M_SQRT1_2)));
  }
  return arith::MulFOp::create(
      b, loc, arith::MulFOp::create(b, loc, half, x),
      arith::AddFOp::create(b, loc, oneLike(b, loc, x), inner));
}

/// y = body(x) elementwise; ops other than Abs, Neg, Relu, Sign and Not (on
/// bool) need a float input.
template <typename OpTy> struct UnaryLowering : ONNXOpLowering<OpTy> {
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;

  UnaryLowering(const TypeConverter &converter, MLIRContext *ctx,
                UnsupportedLog &log, UnaryBody<OpTy> body, bool acceptsIntegers)
      : ONNXOpLowering<OpTy>(converter, ctx, log), body(body),
        acceptsIntegers(acceptsIntegers) {}

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Value x = adaptor.getOperands()[0];
    Type orig = elementType(op->getOperand(0));
    if (!isa<RankedTensorType>(x.getType()))
      return this->unsupported(op, "operand of unknown rank");
    if (!isFloat(elementType(x)) && !acceptsIntegers)
      return this->unsupported(op, "element type " + typeName(orig));
    Value r =
        buildElementwise(rewriter, op->getLoc(), this->resultType(op), x,
                         [&](OpBuilder &b, Location loc, ValueRange args) {
                           return body(op, b, loc, args[0], orig);
                         });
    rewriter.replaceOp(op, r);
    return success();
  }

private:
  UnaryBody<OpTy> body;
  bool acceptsIntegers;
};

//===----------------------------------------------------------------------===//
// Binary and variadic
//===----------------------------------------------------------------------===//

/// The element types of a binary op's operands: `xOrig`/`yOrig` as imported
/// (possibly unsigned), the flags of the converted lhs.
struct BinaryTypes {
  Type xOrig, yOrig;
  bool fp, uns, isBool;
};

/// The scalar computation of a binary op.
template <typename OpTy>
using BinaryBody = Value (*)(OpTy op, OpBuilder &b, Location loc, Value x,
                             Value y, const BinaryTypes &types);
/// Whether a binary op is defined for its operands' element types.
template <typename OpTy>
using BinaryAccepts = bool (*)(OpTy op, const BinaryTypes &types);

Value compare(OpBuilder &b, Location loc, Value x, Value y, bool uns,
              arith::CmpFPredicate fp, arith::CmpIPredicate signedPred,
              arith::CmpIPredicate unsignedPred) {
  if (isa<FloatType>(x.getType()))
    return arith::CmpFOp::create(b, loc, fp, x, y);
  return arith::CmpIOp::create(b, loc, uns ? unsignedPred : signedPred, x, y);
}

Value powBody(OpBuilder &b, Location loc, Value x, Value y, Type xOrig,
              Type yOrig) {
  Type t = x.getType();
  if (isa<FloatType>(t)) {
    if (y.getType() != t)
      y = castScalar(b, loc, y, yOrig, t);
    return math::PowFOp::create(b, loc, x, y);
  }
  // Integer base: compute in f64 (exact for the results that fit) and truncate.
  Type f64 = b.getF64Type();
  Value xf = castScalar(b, loc, x, xOrig, f64);
  Value yf = castScalar(b, loc, y, yOrig, f64);
  Value r = math::PowFOp::create(b, loc, xf, yf);
  return castScalar(b, loc, r, f64, xOrig);
}

Value modBody(OpBuilder &b, Location loc, Value x, Value y, bool uns,
              bool fmod) {
  if (isa<FloatType>(x.getType()))
    return arith::RemFOp::create(b, loc, x, y);
  if (uns)
    return arith::RemUIOp::create(b, loc, x, y);
  Value r = arith::RemSIOp::create(b, loc, x, y);
  if (fmod)
    return r;
  // Python semantics: the result takes the divisor's sign.
  Value zero = scalarConstant(b, loc, x.getType(), 0);
  Value nz = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, zero);
  Value rNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, zero);
  Value yNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, y, zero);
  Value fix = arith::AndIOp::create(
      b, loc, nz, arith::XOrIOp::create(b, loc, rNeg, yNeg));
  return arith::SelectOp::create(b, loc, fix, arith::AddIOp::create(b, loc, r, y),
                                 r);
}

Value binaryBody(onnx::AddOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  return t.fp ? arith::AddFOp::create(b, loc, x, y).getResult()
              : arith::AddIOp::create(b, loc, x, y).getResult();
}

Value binaryBody(onnx::SubOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  return t.fp ? arith::SubFOp::create(b, loc, x, y).getResult()
              : arith::SubIOp::create(b, loc, x, y).getResult();
}

Value binaryBody(onnx::MulOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  return t.fp ? arith::MulFOp::create(b, loc, x, y).getResult()
              : arith::MulIOp::create(b, loc, x, y).getResult();
}

Value binaryBody(onnx::DivOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  if (t.fp)
    return arith::DivFOp::create(b, loc, x, y);
  return t.uns ? arith::DivUIOp::create(b, loc, x, y).getResult()
               : arith::DivSIOp::create(b, loc, x, y).getResult();
}

Value binaryBody(onnx::PowOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  return powBody(b, loc, x, y, t.xOrig, t.yOrig);
}

Value binaryBody(onnx::ModOp op, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  return modBody(b, loc, x, y, t.uns, op.getFmod());
}

Value binaryBody(onnx::BitShiftOp op, OpBuilder &b, Location loc, Value x,
                 Value y, const BinaryTypes &) {
  if (op.getDirection() == "LEFT")
    return arith::ShLIOp::create(b, loc, x, y);
  return arith::ShRUIOp::create(b, loc, x, y);
}

Value binaryBody(onnx::AndOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &) {
  return arith::AndIOp::create(b, loc, x, y);
}

Value binaryBody(onnx::OrOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &) {
  return arith::OrIOp::create(b, loc, x, y);
}

Value binaryBody(onnx::XorOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &) {
  return arith::XOrIOp::create(b, loc, x, y);
}

Value binaryBody(onnx::PReluOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &) {
  return arith::SelectOp::create(b, loc, isNegative(b, loc, x),
                                 arith::MulFOp::create(b, loc, x, y), x);
}

Value binaryBody(onnx::EqualOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  using P = arith::CmpIPredicate;
  return compare(b, loc, x, y, t.uns, arith::CmpFPredicate::OEQ, P::eq, P::eq);
}

Value binaryBody(onnx::GreaterOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  using P = arith::CmpIPredicate;
  return compare(b, loc, x, y, t.uns, arith::CmpFPredicate::OGT, P::sgt,
                 P::ugt);
}

Value binaryBody(onnx::GreaterOrEqualOp, OpBuilder &b, Location loc, Value x,
                 Value y, const BinaryTypes &t) {
  using P = arith::CmpIPredicate;
  return compare(b, loc, x, y, t.uns, arith::CmpFPredicate::OGE, P::sge,
                 P::uge);
}

Value binaryBody(onnx::LessOp, OpBuilder &b, Location loc, Value x, Value y,
                 const BinaryTypes &t) {
  using P = arith::CmpIPredicate;
  return compare(b, loc, x, y, t.uns, arith::CmpFPredicate::OLT, P::slt,
                 P::ult);
}

Value binaryBody(onnx::LessOrEqualOp, OpBuilder &b, Location loc, Value x,
                 Value y, const BinaryTypes &t) {
  using P = arith::CmpIPredicate;
  return compare(b, loc, x, y, t.uns, arith::CmpFPredicate::OLE, P::sle,
                 P::ule);
}

/// The element types each binary op is defined for (the rest: all).
template <typename OpTy> bool acceptsAnyType(OpTy, const BinaryTypes &) {
  return true;
}
template <typename OpTy> bool acceptsBool(OpTy, const BinaryTypes &t) {
  return t.isBool;
}
template <typename OpTy> bool acceptsFloat(OpTy, const BinaryTypes &t) {
  return t.fp;
}
bool acceptsInteger(onnx::BitShiftOp, const BinaryTypes &t) { return !t.fp; }
/// Mod of floats only as fmod (Python's remainder is integer-only here).
bool acceptsModTypes(onnx::ModOp op, const BinaryTypes &t) {
  return !t.fp || op.getFmod();
}

/// z = body(x, y) elementwise with ONNX broadcasting.
template <typename OpTy> struct BinaryLowering : ONNXOpLowering<OpTy> {
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;

  BinaryLowering(const TypeConverter &converter, MLIRContext *ctx,
                 UnsupportedLog &log, BinaryBody<OpTy> body,
                 BinaryAccepts<OpTy> accepts)
      : ONNXOpLowering<OpTy>(converter, ctx, log), body(body),
        accepts(accepts) {}

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    ValueRange operands = adaptor.getOperands();
    Type elem = elementType(operands[0]);
    BinaryTypes types{elementType(op->getOperand(0)),
                      elementType(op->getOperand(1)), isFloat(elem),
                      isUnsignedInt(elementType(op->getOperand(0))),
                      elem.isInteger(1)};
    if (!accepts(op, types))
      return this->unsupported(op, "operand element type");
    Value r = buildElementwise(
        rewriter, op->getLoc(), this->resultType(op), operands,
        [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
          return body(op, b, loc, a[0], a[1], types);
        });
    rewriter.replaceOp(op, r);
    return success();
  }

private:
  BinaryBody<OpTy> body;
  BinaryAccepts<OpTy> accepts;
};

/// Sum, Mean, Max, Min: a fold over any number of broadcast operands.
template <typename OpTy> struct VariadicLowering : ONNXOpLowering<OpTy> {
  using ONNXOpLowering<OpTy>::ONNXOpLowering;
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;
  static constexpr bool isMean = std::is_same_v<OpTy, onnx::MeanOp>;
  static constexpr bool isMax = std::is_same_v<OpTy, onnx::MaxOp>;
  static constexpr bool isMin = std::is_same_v<OpTy, onnx::MinOp>;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = this->resultType(op);
    bool uns = isUnsignedInt(elementType(op->getOperand(0)));
    bool fp = isFloat(type.getElementType());
    if (isMean && !fp)
      return this->unsupported(op, "Mean of integers");
    Value r = buildElementwise(
        rewriter, op->getLoc(), type, adaptor.getOperands(),
        [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
          Value acc = a[0];
          for (Value v : a.drop_front()) {
            if (isMax || isMin)
              acc = selectLess(b, loc, acc, v, uns, isMin);
            else
              acc = fp ? arith::AddFOp::create(b, loc, acc, v).getResult()
                       : arith::AddIOp::create(b, loc, acc, v).getResult();
          }
          if (isMean)
            acc = arith::DivFOp::create(
                b, loc, acc,
                scalarConstant(b, loc, acc.getType(), double(a.size())));
          return acc;
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Where, Clip, Cast, forwarding ops
//===----------------------------------------------------------------------===//

/// Where(c, x, y) -> select(c, x, y) elementwise.
struct WhereLowering : ONNXOpLowering<onnx::WhereOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::WhereOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Value r = buildElementwise(
        rewriter, op->getLoc(), resultType(op), adaptor.getOperands(),
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          return arith::SelectOp::create(b, loc, a[0], a[1], a[2]);
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Clip(x, min, max) with scalar bounds, either of them optional.
struct ClipLowering : ONNXOpLowering<onnx::ClipOp> {
  using ONNXOpLowering::ONNXOpLowering;
  LogicalResult lower(onnx::ClipOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override;
};

LogicalResult ClipLowering::lower(onnx::ClipOp op, OpAdaptor adaptor,
                                  ConversionPatternRewriter &rewriter) const {
  RankedTensorType type = resultType(op);
  bool uns = isUnsignedInt(elementType(op->getOperand(0)));
  SmallVector<Value> ins{adaptor.getInput()};
  int minIdx = -1, maxIdx = -1;
  if (!isNone(adaptor.getMin())) {
    minIdx = ins.size();
    ins.push_back(adaptor.getMin());
  }
  if (!isNone(adaptor.getMax())) {
    maxIdx = ins.size();
    ins.push_back(adaptor.getMax());
  }
  for (Value v : ins)
    if (cast<RankedTensorType>(v.getType()).getRank() > type.getRank())
      return unsupported(op, "min/max must be scalars");
  Value r = buildElementwise(
      rewriter, op->getLoc(), type, ins,
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        Value x = a[0];
        bool fp = isa<FloatType>(x.getType());
        auto clampTo = [&](Value bound, bool isMin) -> Value {
          Value out;
          if (fp)
            out = arith::CmpFOp::create(b, loc,
                                        isMin ? arith::CmpFPredicate::OLT
                                              : arith::CmpFPredicate::OGT,
                                        x, bound);
          else
            out = arith::CmpIOp::create(
                b, loc,
                isMin ? (uns ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt)
                      : (uns ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt),
                x, bound);
          return arith::SelectOp::create(b, loc, out, bound, x);
        };
        if (minIdx >= 0)
          x = clampTo(a[minIdx], true);
        if (maxIdx >= 0)
          x = clampTo(a[maxIdx], false);
        return x;
      });
  rewriter.replaceOp(op, r);
  return success();
}

/// Cast and CastLike: ONNX Cast semantics per element (castScalar).
template <typename OpTy> struct CastLowering : ONNXOpLowering<OpTy> {
  using ONNXOpLowering<OpTy>::ONNXOpLowering;
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Type src = elementType(op->getOperand(0));
    Type dst = elementType(op->getResult(0));
    // Before opset 19 the reference rounds f32 -> bf16 by truncation.
    bool truncateBF16 = dst.isBF16() && src.isF32() && defaultOpset(op) < 19;
    Value r = buildElementwise(
        rewriter, op->getLoc(), this->resultType(op), adaptor.getInput(),
        [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
          if (truncateBF16) {
            Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), a[0]);
            bits = arith::ShRUIOp::create(
                b, loc, bits, scalarConstant(b, loc, b.getI32Type(), 16));
            bits = arith::TruncIOp::create(b, loc, b.getI16Type(), bits);
            return arith::BitcastOp::create(b, loc, b.getBF16Type(), bits);
          }
          return castScalar(b, loc, a[0], src, dst);
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Warns when a Dropout is not known to run in inference mode: a model
/// exported while its module was in training mode. Inference means identity
/// (what the module computes after eval()); onnxruntime 1.32 would sample a
/// random mask here, so its outputs differ from run to run. Said once per
/// node.
void warnIfTraining(onnx::DropoutOp op, Value trainingMode) {
  if (isNone(trainingMode))
    return;
  auto training = constantInts(trainingMode, op.getTrainingMode());
  if (!training || (*training)[0] != 0)
    op->emitWarning(
        "Dropout with training_mode true (or not a constant) runs as identity, "
        "as in inference: the model was probably exported in training mode");
}

/// Identity and Dropout (in inference): the input, and Dropout's mask all
/// true.
template <typename OpTy> struct ForwardLowering : ONNXOpLowering<OpTy> {
  using ONNXOpLowering<OpTy>::ONNXOpLowering;
  using OpAdaptor = typename ONNXOpLowering<OpTy>::OpAdaptor;

  LogicalResult lower(OpTy op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op->getLoc();
    if constexpr (std::is_same_v<OpTy, onnx::DropoutOp>)
      warnIfTraining(op, adaptor.getTrainingMode());
    Value input = adaptor.getOperands()[0];
    SmallVector<Value> results;
    Value x = input;
    if (x.getType() != this->resultType(op))
      x = tensor::CastOp::create(rewriter, loc, this->resultType(op), x);
    results.push_back(x);
    for (unsigned i = 1; i < op->getNumResults(); ++i) {
      if (RankedTensorType maskType = this->resultType(op, i)) {
        Value t = arith::ConstantOp::create(rewriter, loc,
                                            rewriter.getBoolAttr(true));
        results.push_back(filledTensor(rewriter, loc, maskType,
                                       mixedSizes(rewriter, loc, input), t));
      } else {
        results.push_back(
            onnx::NoValueOp::create(rewriter, loc, rewriter.getNoneType()));
      }
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

template <typename OpTy>
void addUnary(RewritePatternSet &patterns, const TypeConverter &converter,
              UnsupportedLog &log, UnaryBody<OpTy> body,
              bool acceptsIntegers = false) {
  patterns.add<UnaryLowering<OpTy>>(converter, patterns.getContext(), log, body,
                                    acceptsIntegers);
}

template <typename OpTy>
void addBinary(RewritePatternSet &patterns, const TypeConverter &converter,
               UnsupportedLog &log, BinaryBody<OpTy> body,
               BinaryAccepts<OpTy> accepts = acceptsAnyType<OpTy>) {
  patterns.add<BinaryLowering<OpTy>>(converter, patterns.getContext(), log,
                                     body, accepts);
}

} // namespace

void populateElementwisePatterns(RewritePatternSet &patterns,
                                 const TypeConverter &converter,
                                 UnsupportedLog &log) {
  // Defined on integers too (Not on bool).
  addUnary<onnx::AbsOp>(patterns, converter, log, unaryBody, true);
  addUnary<onnx::NegOp>(patterns, converter, log, unaryBody, true);
  addUnary<onnx::ReluOp>(patterns, converter, log, unaryBody, true);
  addUnary<onnx::SignOp>(patterns, converter, log, unaryBody, true);
  addUnary<onnx::NotOp>(patterns, converter, log, unaryBody, true);
  // Floats only.
  addUnary<onnx::ShrinkOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::IsNaNOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::IsInfOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::ExpOp>(patterns, converter, log, mathBody<math::ExpOp>);
  addUnary<onnx::LogOp>(patterns, converter, log, mathBody<math::LogOp>);
  addUnary<onnx::SqrtOp>(patterns, converter, log, mathBody<math::SqrtOp>);
  addUnary<onnx::SinOp>(patterns, converter, log, mathBody<math::SinOp>);
  addUnary<onnx::CosOp>(patterns, converter, log, mathBody<math::CosOp>);
  addUnary<onnx::TanOp>(patterns, converter, log, mathBody<math::TanOp>);
  addUnary<onnx::AsinOp>(patterns, converter, log, mathBody<math::AsinOp>);
  addUnary<onnx::AcosOp>(patterns, converter, log, mathBody<math::AcosOp>);
  addUnary<onnx::AtanOp>(patterns, converter, log, mathBody<math::AtanOp>);
  addUnary<onnx::SinhOp>(patterns, converter, log, mathBody<math::SinhOp>);
  addUnary<onnx::CoshOp>(patterns, converter, log, mathBody<math::CoshOp>);
  addUnary<onnx::AsinhOp>(patterns, converter, log, mathBody<math::AsinhOp>);
  addUnary<onnx::AcoshOp>(patterns, converter, log, mathBody<math::AcoshOp>);
  addUnary<onnx::AtanhOp>(patterns, converter, log, mathBody<math::AtanhOp>);
  addUnary<onnx::TanhOp>(patterns, converter, log, mathBody<math::TanhOp>);
  addUnary<onnx::ErfOp>(patterns, converter, log, mathBody<math::ErfOp>);
  addUnary<onnx::CeilOp>(patterns, converter, log, mathBody<math::CeilOp>);
  addUnary<onnx::FloorOp>(patterns, converter, log, mathBody<math::FloorOp>);
  addUnary<onnx::RoundOp>(patterns, converter, log,
                          mathBody<math::RoundEvenOp>);
  addUnary<onnx::ReciprocalOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::SigmoidOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::SoftplusOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::SoftsignOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::MishOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::LeakyReluOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::EluOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::SeluOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::CeluOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::ThresholdedReluOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::HardSigmoidOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::HardSwishOp>(patterns, converter, log, unaryBody);
  addUnary<onnx::GeluOp>(patterns, converter, log, unaryBody);

  addBinary<onnx::AddOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::SubOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::MulOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::DivOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::PowOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::ModOp>(patterns, converter, log, binaryBody, acceptsModTypes);
  addBinary<onnx::BitShiftOp>(patterns, converter, log, binaryBody,
                              acceptsInteger);
  addBinary<onnx::AndOp>(patterns, converter, log, binaryBody,
                         acceptsBool<onnx::AndOp>);
  addBinary<onnx::OrOp>(patterns, converter, log, binaryBody,
                        acceptsBool<onnx::OrOp>);
  addBinary<onnx::XorOp>(patterns, converter, log, binaryBody,
                         acceptsBool<onnx::XorOp>);
  addBinary<onnx::EqualOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::GreaterOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::GreaterOrEqualOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::LessOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::LessOrEqualOp>(patterns, converter, log, binaryBody);
  addBinary<onnx::PReluOp>(patterns, converter, log, binaryBody,
                           acceptsFloat<onnx::PReluOp>);

  MLIRContext *ctx = patterns.getContext();
  patterns
      .add<VariadicLowering<onnx::SumOp>, VariadicLowering<onnx::MeanOp>,
           VariadicLowering<onnx::MaxOp>, VariadicLowering<onnx::MinOp>,
           WhereLowering, ClipLowering, CastLowering<onnx::CastOp>,
           CastLowering<onnx::CastLikeOp>, ForwardLowering<onnx::IdentityOp>,
           ForwardLowering<onnx::DropoutOp>>(converter, ctx, log);
}

} // namespace xfmr::lowering
