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
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

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

/// The scalar computation of unary op `name` on `x` (original element type
/// `orig`); null if the op is not defined for that type.
Value unaryBody(OpBuilder &b, Location loc, Operation *op, StringRef name,
                Value x, Type orig) {
  Type t = x.getType();
  bool fp = isa<FloatType>(t);
  bool uns = isUnsignedInt(orig);
  auto one = [&] { return cst(b, loc, t, 1); };
  auto zero = [&] { return cst(b, loc, t, 0); };
  auto expm1 = [&](Value v) {
    return arith::SubFOp::create(b, loc, math::ExpOp::create(b, loc, v), one());
  };
  if (name == "Abs")
    return fp ? math::AbsFOp::create(b, loc, x).getResult()
              : (uns ? x : math::AbsIOp::create(b, loc, x).getResult());
  if (name == "Neg")
    return fp ? arith::NegFOp::create(b, loc, x).getResult()
              : arith::SubIOp::create(b, loc, zero(), x).getResult();
  if (name == "Relu")
    return uns ? x : selectLess(b, loc, x, zero(), false, /*wantMin=*/false);
  if (name == "Sign") {
    Value pos, neg;
    if (fp) {
      pos = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, zero());
      neg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero());
    } else {
      pos = arith::CmpIOp::create(b, loc,
                                  uns ? arith::CmpIPredicate::ugt
                                      : arith::CmpIPredicate::sgt,
                                  x, zero());
      neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero());
      if (uns)
        neg = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    }
    Value r = arith::SelectOp::create(b, loc, neg, cst(b, loc, t, -1), zero());
    r = arith::SelectOp::create(b, loc, pos, one(), r);
    if (fp) // NaN stays NaN
      r = arith::SelectOp::create(
          b, loc,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x), x, r);
    return r;
  }
  if (name == "Not")
    return arith::XOrIOp::create(b, loc, x, cst(b, loc, t, 1));
  if (name == "Shrink") {
    Value lambd = cst(b, loc, t, floatAttr(op, "lambd", 0.5f));
    Value bias = cst(b, loc, t, floatAttr(op, "bias", 0.0f));
    if (!fp)
      return {};
    Value negL = arith::NegFOp::create(b, loc, lambd);
    Value lo = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, negL);
    Value hi = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, lambd);
    Value r = arith::SelectOp::create(
        b, loc, hi, arith::SubFOp::create(b, loc, x, bias), zero());
    return arith::SelectOp::create(b, loc, lo,
                                   arith::AddFOp::create(b, loc, x, bias), r);
  }
  if (!fp)
    return {};
  // Floating-point only from here on.
  if (name == "IsNaN")
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  if (name == "IsInf") {
    Value inf = highestValue(b, loc, t, false);
    Value ninf = lowestValue(b, loc, t, false);
    Value r = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    if (intAttr(op, "detect_positive", 1))
      r = arith::OrIOp::create(
          b, loc, r,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, inf));
    if (intAttr(op, "detect_negative", 1))
      r = arith::OrIOp::create(
          b, loc, r,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, ninf));
    return r;
  }
  using UnaryFn = Value (*)(OpBuilder &, Location, Value);
  UnaryFn simple =
      llvm::StringSwitch<UnaryFn>(name)
          .Case("Exp", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::ExpOp::create(b, l, v);
          })
          .Case("Log", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::LogOp::create(b, l, v);
          })
          .Case("Sqrt", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::SqrtOp::create(b, l, v);
          })
          .Case("Sin", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::SinOp::create(b, l, v);
          })
          .Case("Cos", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::CosOp::create(b, l, v);
          })
          .Case("Tan", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::TanOp::create(b, l, v);
          })
          .Case("Asin", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::AsinOp::create(b, l, v);
          })
          .Case("Acos", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::AcosOp::create(b, l, v);
          })
          .Case("Atan", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::AtanOp::create(b, l, v);
          })
          .Case("Sinh", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::SinhOp::create(b, l, v);
          })
          .Case("Cosh", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::CoshOp::create(b, l, v);
          })
          .Case("Asinh", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::AsinhOp::create(b, l, v);
          })
          .Case("Acosh", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::AcoshOp::create(b, l, v);
          })
          .Case("Atanh", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::AtanhOp::create(b, l, v);
          })
          .Case("Tanh", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::TanhOp::create(b, l, v);
          })
          .Case("Erf", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::ErfOp::create(b, l, v);
          })
          .Case("Ceil", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::CeilOp::create(b, l, v);
          })
          .Case("Floor", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::FloorOp::create(b, l, v);
          })
          .Case("Round", [](OpBuilder &b, Location l, Value v) -> Value {
            return math::RoundEvenOp::create(b, l, v);
          })
          .Default(nullptr);
  if (simple)
    return simple(b, loc, x);
  if (name == "Reciprocal")
    return arith::DivFOp::create(b, loc, one(), x);
  if (name == "Sigmoid") {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, one(),
                                 arith::AddFOp::create(b, loc, one(), e));
  }
  if (name == "Softplus") {
    // log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
    Value ax = math::AbsFOp::create(b, loc, x);
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, ax));
    return arith::AddFOp::create(b, loc, arith::MaximumFOp::create(b, loc, x, zero()),
                                 math::Log1pOp::create(b, loc, e));
  }
  if (name == "Softsign")
    return arith::DivFOp::create(
        b, loc, x,
        arith::AddFOp::create(b, loc, one(), math::AbsFOp::create(b, loc, x)));
  if (name == "Mish") {
    Value ax = math::AbsFOp::create(b, loc, x);
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, ax));
    Value sp = arith::AddFOp::create(
        b, loc, arith::MaximumFOp::create(b, loc, x, zero()),
        math::Log1pOp::create(b, loc, e));
    return arith::MulFOp::create(b, loc, x, math::TanhOp::create(b, loc, sp));
  }
  Value isNeg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero());
  if (name == "LeakyRelu")
    return arith::SelectOp::create(
        b, loc, isNeg,
        arith::MulFOp::create(b, loc, cst(b, loc, t, floatAttr(op, "alpha", 0.01f)), x),
        x);
  if (name == "Elu") {
    Value alpha = cst(b, loc, t, floatAttr(op, "alpha", 1.0f));
    return arith::SelectOp::create(
        b, loc, isNeg, arith::MulFOp::create(b, loc, alpha, expm1(x)), x);
  }
  if (name == "Selu") {
    Value alpha = cst(b, loc, t, floatAttr(op, "alpha", 1.67326319217681884765625f));
    Value gamma = cst(b, loc, t, floatAttr(op, "gamma", 1.05070102214813232421875f));
    Value le = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, x, zero());
    Value neg = arith::MulFOp::create(b, loc, alpha, expm1(x));
    return arith::MulFOp::create(b, loc, gamma,
                                 arith::SelectOp::create(b, loc, le, neg, x));
  }
  if (name == "Celu") {
    Value alpha = cst(b, loc, t, floatAttr(op, "alpha", 1.0f));
    Value neg = arith::MulFOp::create(
        b, loc, alpha, expm1(arith::DivFOp::create(b, loc, x, alpha)));
    return arith::AddFOp::create(
        b, loc, arith::MaximumFOp::create(b, loc, x, zero()),
        arith::MinimumFOp::create(b, loc, neg, zero()));
  }
  if (name == "ThresholdedRelu") {
    Value alpha = cst(b, loc, t, floatAttr(op, "alpha", 1.0f));
    Value gt = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, alpha);
    return arith::SelectOp::create(b, loc, gt, x, zero());
  }
  if (name == "HardSigmoid" || name == "HardSwish") {
    float alphaV = name == "HardSwish" ? 1.0f / 6 : floatAttr(op, "alpha", 0.2f);
    float betaV = name == "HardSwish" ? 0.5f : floatAttr(op, "beta", 0.5f);
    Value v = arith::AddFOp::create(
        b, loc, arith::MulFOp::create(b, loc, cst(b, loc, t, alphaV), x),
        cst(b, loc, t, betaV));
    v = arith::MaximumFOp::create(b, loc, zero(),
                                  arith::MinimumFOp::create(b, loc, one(), v));
    return name == "HardSwish" ? arith::MulFOp::create(b, loc, x, v).getResult()
                               : v;
  }
  if (name == "Gelu") {
    Value half = cst(b, loc, t, 0.5);
    Value inner;
    if (stringAttr(op, "approximate", "none") == "tanh") {
      Value x3 = arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
      inner = arith::AddFOp::create(
          b, loc, x, arith::MulFOp::create(b, loc, cst(b, loc, t, 0.044715), x3));
      inner = math::TanhOp::create(
          b, loc,
          arith::MulFOp::create(b, loc, cst(b, loc, t, std::sqrt(2.0 / M_PI)), inner));
    } else {
      inner = math::ErfOp::create(
          b, loc, arith::MulFOp::create(b, loc, x, cst(b, loc, t, M_SQRT1_2)));
    }
    return arith::MulFOp::create(
        b, loc, arith::MulFOp::create(b, loc, half, x),
        arith::AddFOp::create(b, loc, one(), inner));
  }
  return {};
}

XFMR_LOWERING_PATTERN(UnaryLowering);

LogicalResult UnaryLowering::lower(Operation *op, StringRef name,
                                   ArrayRef<Value> operands,
                                   ConversionPatternRewriter &rewriter) const {
  RankedTensorType type = resultType(op);
  Type orig = elementType(op->getOperand(0));
  if (!isa<RankedTensorType>(operands[0].getType()))
    return unsupported(op, "operand of unknown rank");
  // Only these are defined on integers (and Not on bool); the rest need floats.
  if (!isFloat(elementType(operands[0])) &&
      !llvm::is_contained({"Abs", "Neg", "Relu", "Sign", "Not"}, name))
    return unsupported(op, "element type " + typeName(orig));
  Value r = buildElementwise(
      rewriter, op->getLoc(), type, operands[0],
      [&](OpBuilder &b, Location loc, ValueRange args) {
        return unaryBody(b, loc, op, name, args[0], orig);
      });
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Binary and variadic
//===----------------------------------------------------------------------===//

Value compare(OpBuilder &b, Location loc, StringRef name, Value x, Value y,
              bool uns) {
  if (isa<FloatType>(x.getType())) {
    auto p = llvm::StringSwitch<arith::CmpFPredicate>(name)
                 .Case("Equal", arith::CmpFPredicate::OEQ)
                 .Case("Greater", arith::CmpFPredicate::OGT)
                 .Case("GreaterOrEqual", arith::CmpFPredicate::OGE)
                 .Case("Less", arith::CmpFPredicate::OLT)
                 .Default(arith::CmpFPredicate::OLE);
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  using P = arith::CmpIPredicate;
  auto p = llvm::StringSwitch<P>(name)
               .Case("Equal", P::eq)
               .Case("Greater", uns ? P::ugt : P::sgt)
               .Case("GreaterOrEqual", uns ? P::uge : P::sge)
               .Case("Less", uns ? P::ult : P::slt)
               .Default(uns ? P::ule : P::sle);
  return arith::CmpIOp::create(b, loc, p, x, y);
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

XFMR_LOWERING_PATTERN(BinaryLowering);

LogicalResult BinaryLowering::lower(Operation *op, StringRef name,
                                    ArrayRef<Value> operands,
                                    ConversionPatternRewriter &rewriter) const {
  RankedTensorType type = resultType(op);
  Type xOrig = elementType(op->getOperand(0));
  Type yOrig = elementType(op->getOperand(1));
  bool uns = isUnsignedInt(xOrig);
  bool fp = isFloat(elementType(operands[0]));
  bool isBool = elementType(operands[0]).isInteger(1);
  if ((name == "BitShift" && fp) ||
      ((name == "And" || name == "Or" || name == "Xor") && !isBool) ||
      (name == "Mod" && fp && !intAttr(op, "fmod", 0)) ||
      (name == "PRelu" && !fp))
    return unsupported(op, "operand element type");
  bool fmod = intAttr(op, "fmod", 0);
  bool left = stringAttr(op, "direction", "") == "LEFT";
  Value r = buildElementwise(
      rewriter, op->getLoc(), type, operands,
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        Value x = a[0], y = a[1];
        if (name == "Add")
          return fp ? arith::AddFOp::create(b, loc, x, y).getResult()
                    : arith::AddIOp::create(b, loc, x, y).getResult();
        if (name == "Sub")
          return fp ? arith::SubFOp::create(b, loc, x, y).getResult()
                    : arith::SubIOp::create(b, loc, x, y).getResult();
        if (name == "Mul")
          return fp ? arith::MulFOp::create(b, loc, x, y).getResult()
                    : arith::MulIOp::create(b, loc, x, y).getResult();
        if (name == "Div")
          return fp ? arith::DivFOp::create(b, loc, x, y).getResult()
                 : uns ? arith::DivUIOp::create(b, loc, x, y).getResult()
                       : arith::DivSIOp::create(b, loc, x, y).getResult();
        if (name == "Pow")
          return powBody(b, loc, x, y, xOrig, yOrig);
        if (name == "Mod")
          return modBody(b, loc, x, y, uns, fmod);
        if (name == "BitShift")
          return left ? arith::ShLIOp::create(b, loc, x, y).getResult()
                      : arith::ShRUIOp::create(b, loc, x, y).getResult();
        if (name == "And")
          return arith::AndIOp::create(b, loc, x, y);
        if (name == "Or")
          return arith::OrIOp::create(b, loc, x, y);
        if (name == "Xor")
          return arith::XOrIOp::create(b, loc, x, y);
        if (name == "PRelu") {
          Value neg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x,
                                            scalarConstant(b, loc, x.getType(), 0));
          return arith::SelectOp::create(b, loc, neg,
                                         arith::MulFOp::create(b, loc, x, y), x);
        }
        return compare(b, loc, name, x, y, uns);
      });
  rewriter.replaceOp(op, r);
  return success();
}

XFMR_LOWERING_PATTERN(VariadicLowering);

LogicalResult VariadicLowering::lower(Operation *op, StringRef name,
                                      ArrayRef<Value> operands,
                                      ConversionPatternRewriter &rewriter) const {
  RankedTensorType type = resultType(op);
  bool uns = isUnsignedInt(elementType(op->getOperand(0)));
  bool fp = isFloat(type.getElementType());
  if (name == "Mean" && !fp)
    return unsupported(op, "Mean of integers");
  Value r = buildElementwise(
      rewriter, op->getLoc(), type, operands,
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        Value acc = a[0];
        for (Value v : a.drop_front()) {
          if (name == "Max" || name == "Min")
            acc = selectLess(b, loc, acc, v, uns, name == "Min");
          else
            acc = fp ? arith::AddFOp::create(b, loc, acc, v).getResult()
                     : arith::AddIOp::create(b, loc, acc, v).getResult();
        }
        if (name == "Mean")
          acc = arith::DivFOp::create(
              b, loc, acc,
              scalarConstant(b, loc, acc.getType(), double(a.size())));
        return acc;
      });
  rewriter.replaceOp(op, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Where, Clip, Cast, forwarding ops
//===----------------------------------------------------------------------===//

XFMR_LOWERING_PATTERN(WhereLowering);

LogicalResult WhereLowering::lower(Operation *op, StringRef,
                                   ArrayRef<Value> operands,
                                   ConversionPatternRewriter &rewriter) const {
  Value r = buildElementwise(
      rewriter, op->getLoc(), resultType(op), operands,
      [](OpBuilder &b, Location loc, ValueRange a) -> Value {
        return arith::SelectOp::create(b, loc, a[0], a[1], a[2]);
      });
  rewriter.replaceOp(op, r);
  return success();
}

XFMR_LOWERING_PATTERN(ClipLowering);

LogicalResult ClipLowering::lower(Operation *op, StringRef,
                                  ArrayRef<Value> operands,
                                  ConversionPatternRewriter &rewriter) const {
  RankedTensorType type = resultType(op);
  bool uns = isUnsignedInt(elementType(op->getOperand(0)));
  SmallVector<Value> ins{operands[0]};
  int minIdx = -1, maxIdx = -1;
  if (operands.size() > 1 && !isNone(operands[1])) {
    minIdx = ins.size();
    ins.push_back(operands[1]);
  }
  if (operands.size() > 2 && !isNone(operands[2])) {
    maxIdx = ins.size();
    ins.push_back(operands[2]);
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

XFMR_LOWERING_PATTERN(CastLowering);

LogicalResult CastLowering::lower(Operation *op, StringRef,
                                  ArrayRef<Value> operands,
                                  ConversionPatternRewriter &rewriter) const {
  Type src = elementType(op->getOperand(0));
  Type dst = elementType(op->getResult(0));
  // Before opset 19 the reference rounds f32 -> bf16 by truncation.
  bool truncateBF16 = dst.isBF16() && src.isF32() && defaultOpset(op) < 19;
  Value r = buildElementwise(
      rewriter, op->getLoc(), resultType(op), operands[0],
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        if (truncateBF16) {
          Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), a[0]);
          bits = arith::ShRUIOp::create(b, loc, bits,
                                        scalarConstant(b, loc, b.getI32Type(), 16));
          bits = arith::TruncIOp::create(b, loc, b.getI16Type(), bits);
          return arith::BitcastOp::create(b, loc, b.getBF16Type(), bits);
        }
        return castScalar(b, loc, a[0], src, dst);
      });
  rewriter.replaceOp(op, r);
  return success();
}

XFMR_LOWERING_PATTERN(ForwardLowering);

LogicalResult ForwardLowering::lower(Operation *op, StringRef name,
                                     ArrayRef<Value> operands,
                                     ConversionPatternRewriter &rewriter) const {
  Location loc = op->getLoc();
  if (name == "Dropout" && operands.size() > 2 && !isNone(operands[2])) {
    // A model exported while its module was in training mode. Inference
    // means identity (what the module computes after eval()); onnxruntime
    // 1.32 would sample a random mask here, so its outputs differ from run
    // to run. Said once per node.
    auto training = constantInts(operands[2], op->getOperand(2));
    if (!training || (*training)[0] != 0)
      op->emitWarning("Dropout with training_mode true (or not a constant) runs as identity, "
                      "as in inference: the model was probably exported in training mode");
  }
  SmallVector<Value> results;
  Value x = operands[0];
  if (x.getType() != resultType(op))
    x = tensor::CastOp::create(rewriter, loc, resultType(op), x);
  results.push_back(x);
  // Dropout's mask in inference: all true.
  for (unsigned i = 1; i < op->getNumResults(); ++i) {
    if (RankedTensorType maskType = resultType(op, i)) {
      Value t = arith::ConstantOp::create(rewriter, loc, rewriter.getBoolAttr(true));
      results.push_back(filledTensor(rewriter, loc, maskType,
                                     mixedSizes(rewriter, loc, operands[0]), t));
    } else {
      results.push_back(onnx::NoValueOp::create(rewriter, loc, rewriter.getNoneType()));
    }
  }
  rewriter.replaceOp(op, results);
  return success();
}

} // namespace

void populateElementwisePatterns(RewritePatternSet &patterns,
                                 const TypeConverter &converter,
                                 UnsupportedLog &log) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<UnaryLowering>(
      converter, ctx, log,
      ArrayRef<StringRef>{
          "Abs",   "Neg",      "Relu",     "Sign",     "Not",      "Shrink",
          "IsNaN", "IsInf",    "Exp",      "Log",      "Sqrt",     "Sin",
          "Cos",   "Tan",      "Asin",     "Acos",     "Atan",     "Sinh",
          "Cosh",  "Asinh",    "Acosh",    "Atanh",    "Tanh",     "Erf",
          "Ceil",  "Floor",    "Round",    "Reciprocal", "Sigmoid", "Softplus",
          "Softsign", "Mish",  "LeakyRelu", "Elu",     "Selu",     "Celu",
          "ThresholdedRelu", "HardSigmoid", "HardSwish", "Gelu"});
  patterns.add<BinaryLowering>(
      converter, ctx, log,
      ArrayRef<StringRef>{"Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift",
                          "And", "Or", "Xor", "Equal", "Greater",
                          "GreaterOrEqual", "Less", "LessOrEqual", "PRelu"});
  patterns.add<VariadicLowering>(converter, ctx, log,
                                 ArrayRef<StringRef>{"Sum", "Mean", "Max", "Min"});
  patterns.add<WhereLowering>(converter, ctx, log, ArrayRef<StringRef>{"Where"});
  patterns.add<ClipLowering>(converter, ctx, log, ArrayRef<StringRef>{"Clip"});
  patterns.add<CastLowering>(converter, ctx, log,
                             ArrayRef<StringRef>{"Cast", "CastLike"});
  patterns.add<ForwardLowering>(converter, ctx, log,
                                ArrayRef<StringRef>{"Identity", "Dropout"});
}

} // namespace xfmr::lowering
