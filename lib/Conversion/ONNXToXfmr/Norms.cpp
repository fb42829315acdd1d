//===- Norms.cpp - raise RMS and layer norms ------------------------------===//
//
// Part of xfmr.
//
// RMS norm, as exported from Hugging Face's LlamaRMSNorm / T5LayerNorm:
//   w * (x * 1 / sqrt(mean(x^2, -1) + eps))      (also Reciprocal, or
//   x / sqrt(...), weight on either side or absent), and the ONNX ops
//   RMSNormalization-23, SimplifiedLayerNormalization (onnxruntime's, in
//   the default domain) and com.microsoft SkipSimplifiedLayerNormalization
//   (residual add + RMS norm; the sum is its fourth output).
// Layer norm: LayerNormalization-17 and its decomposed form
//   ((x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)) * w + b.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

/// The value `x` if `v` is x^2 (Pow(x, 2) or Mul(x, x)).
Value squaredBase(Value v) {
  if (auto pow = def<onnx::PowOp>(v))
    return isScalar(pow.getY(), 2.0) ? pow.getX() : Value();
  if (auto mul = def<onnx::MulOp>(v))
    return mul.getA() == mul.getB() ? mul.getA() : Value();
  return nullptr;
}

/// From `mean` (a ReduceMean over the last axis), match
/// sqrt(mean + eps) and its use dividing `x`; returns the normalized value
/// and epsilon.
struct Normalized {
  Value value;
  double epsilon = 0;
};
FailureOr<Normalized> matchDivideByRms(Value mean, Value x, std::string &why) {
  auto add = soleUserOf<onnx::AddOp>(mean);
  auto eps = add ? scalarValue(otherOperand(add, mean)) : std::nullopt;
  if (!eps) {
    why = "mean of squares is not followed by `+ epsilon`";
    return failure();
  }
  auto sqrt = soleUserOf<onnx::SqrtOp>(add.getC());
  if (!sqrt) {
    why = "`mean + epsilon` is not followed by Sqrt";
    return failure();
  }
  Operation *user = soleUser(sqrt.getY());
  Value inverse;
  if (auto div = dyn_cast_or_null<onnx::DivOp>(user)) {
    if (div.getA() == x && div.getB() == sqrt.getY())
      return Normalized{div.getC(), *eps};
    if (div.getB() == sqrt.getY() && isScalar(div.getA(), 1.0))
      inverse = div.getC();
  } else if (auto rec = dyn_cast_or_null<onnx::ReciprocalOp>(user)) {
    inverse = rec.getY();
  }
  auto mul = inverse ? soleUserOf<onnx::MulOp>(inverse) : onnx::MulOp();
  if (!mul || otherOperand(mul, inverse) != x) {
    why = "the inverse RMS does not scale the normalized input";
    return failure();
  }
  return Normalized{mul.getC(), *eps};
}

/// `normalized * weight` (either order) with a 1-D weight of the last dim.
Value matchScale(Value normalized, int64_t lastDim, Operation *&root) {
  auto mul = soleUserOf<onnx::MulOp>(normalized);
  if (!mul)
    return nullptr;
  Value w = otherOperand(mul, normalized);
  // A dynamic last dim is the weight's length (withNormalizedWidth).
  if (rankOf(w) != 1 || !isa<FloatType>(elementTypeOf(w)) ||
      (dimOf(w, 0) != lastDim && !ShapedType::isDynamic(lastDim)) ||
      ShapedType::isDynamic(dimOf(w, 0)))
    return nullptr;
  root = mul;
  return w;
}

/// `x` with a dynamic normalized (last) axis given the weight's length: the
/// product with the [N] weight fixes it (shape inference leaves it dynamic
/// when x comes from a reshape it could not infer, e.g. QK-norm over a head
/// size). Asserted at run time.
Value withNormalizedWidth(OpBuilder &b, Location loc, Value x, Value weight,
                          const std::string &where) {
  auto type = cast<RankedTensorType>(x.getType());
  if (!type.isDynamicDim(type.getRank() - 1))
    return x;
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = dimOf(weight, 0);
  return withStaticDims(b, loc, x, shape, where + ": the normalized axis");
}

Value onesWeight(OpBuilder &b, Location loc, Value x) {
  int64_t last = dimOf(x, -1);
  if (ShapedType::isDynamic(last))
    return nullptr;
  return floatConstant(b, loc, RankedTensorType::get({last}, elementTypeOf(x)), 1.0);
}

} // namespace

bool raiseRMSNorm(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  Value x, weight;
  double epsilon = 0;
  Operation *root = anchor;
  if (auto rms = dyn_cast<onnx::RMSNormalizationOp>(anchor)) {
    if (!isLastAxis(rms.getAxis(), rankOf(rms.getX())) || rankOf(rms.getScale()) != 1) {
      log.unfused(anchor, "rms_norm", "normalizes over more than the last axis");
      return false;
    }
    x = rms.getX();
    weight = rms.getScale();
    epsilon = rms.getEpsilon().convertToDouble();
  } else {
    auto mean = cast<onnx::ReduceMeanOp>(anchor);
    x = squaredBase(mean.getData());
    if (!x || mean->getResult(0).use_empty())
      return false; // not a mean of squares: not a candidate
    if (!isLastAxisOnly(mean.getAxes(), rankOf(x)) || mean.getKeepdims() != 1) {
      log.unfused(anchor, "rms_norm", "mean of squares is not over the last axis with keepdims");
      return false;
    }
    std::string why;
    auto normalized = matchDivideByRms(mean.getReduced(), x, why);
    if (failed(normalized)) {
      log.unfused(anchor, "rms_norm", why);
      return false;
    }
    epsilon = normalized->epsilon;
    root = normalized->value.getDefiningOp();
    weight = matchScale(normalized->value, dimOf(x, -1), root);
  }
  rewriter.setInsertionPoint(root);
  if (!weight && !(weight = onesWeight(rewriter, root->getLoc(), x))) {
    log.unfused(anchor, "rms_norm", "no weight and a dynamic hidden size");
    return false;
  }
  Value result = root->getResult(0);
  if (!sameUpToDynamic(result.getType(), x.getType())) {
    log.unfused(anchor, "rms_norm", "result type differs from the input's");
    return false;
  }
  x = withNormalizedWidth(rewriter, root->getLoc(), x, weight, nodeName(anchor));
  auto op = RMSNormOp::create(rewriter, root->getLoc(), x, weight,
                              rewriter.getF32FloatAttr(epsilon));
  rewriter.replaceAllUsesWith(result, castTo(rewriter, root->getLoc(), op.getResult(),
                                             result.getType()));
  log.formed("rms_norm");
  return true;
}

bool raiseSimplifiedNorm(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "rms_norm", why);
    return false;
  };
  auto used = [](Value v) { return v && !isa<NoneType>(v.getType()) && !v.use_empty(); };
  Location loc = anchor->getLoc();
  rewriter.setInsertionPoint(anchor);
  if (auto norm = dyn_cast<onnx::SimplifiedLayerNormalizationOp>(anchor)) {
    Value x = norm.getX();
    if (!isLastAxis(static_cast<int64_t>(norm.getAxis()), rankOf(x)) ||
        rankOf(norm.getScale()) != 1)
      return fail("normalizes over more than the last axis");
    if (used(norm.getInvStdVar()))
      return fail("inv_std_var is used");
    if (norm.getY().getType() != x.getType())
      return fail("result type differs from the input's");
    auto op = RMSNormOp::create(rewriter, loc, x, norm.getScale(),
                                rewriter.getF32FloatAttr(norm.getEpsilon().convertToDouble()));
    rewriter.replaceAllUsesWith(norm.getY(), op.getResult());
    log.formed("rms_norm");
    return true;
  }
  // com.microsoft SkipSimplifiedLayerNormalization: the residual sum
  // input + skip (+ bias), which is also output 3, then an RMS norm of it.
  auto skip = cast<onnx::MsSkipSimplifiedLayerNormalizationOp>(anchor);
  Value x = skip.getInput(), residual = skip.getSkip(), bias = skip.getBias();
  if (x.getType() != residual.getType() || skip.getOutput().getType() != x.getType())
    return fail("input, skip and output types differ (broadcast skip is not raised)");
  if (rankOf(skip.getGamma()) != 1 || used(skip.getMean()) || used(skip.getInvStdVar()))
    return fail("gamma is not a vector, or mean/inv_std_var are used");
  Value sum = onnx::AddOp::create(rewriter, loc, x.getType(), x, residual);
  if (bias && !isa<NoneType>(bias.getType()))
    sum = onnx::AddOp::create(rewriter, loc, x.getType(), sum, bias);
  auto op = RMSNormOp::create(rewriter, loc, sum, skip.getGamma(),
                              rewriter.getF32FloatAttr(skip.getEpsilon().convertToDouble()));
  rewriter.replaceAllUsesWith(skip.getOutput(), op.getResult());
  Value total = skip.getInputSkipBiasSum();
  if (used(total)) {
    if (total.getType() != sum.getType())
      sum = tensor::CastOp::create(rewriter, loc, total.getType(), sum);
    rewriter.replaceAllUsesWith(total, sum);
  }
  rewriter.eraseOp(skip);
  log.formed("rms_norm");
  return true;
}

bool raiseLayerNorm(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto ln = cast<onnx::LayerNormalizationOp>(anchor);
  Value x = ln.getX();
  if (!isLastAxis(ln.getAxis(), rankOf(x)) || rankOf(ln.getScale()) != 1) {
    log.unfused(anchor, "layer_norm", "normalizes over more than the last axis");
    return false;
  }
  for (Value extra : anchor->getResults().drop_front())
    if (!extra.use_empty()) {
      log.unfused(anchor, "layer_norm", "Mean or InvStdDev output is used");
      return false;
    }
  Value bias = ln.getB();
  if (isa<NoneType>(bias.getType()))
    bias = nullptr;
  rewriter.setInsertionPoint(anchor);
  auto op = LayerNormOp::create(rewriter, anchor->getLoc(), x, ln.getScale(), bias,
                                rewriter.getF32FloatAttr(ln.getEpsilon().convertToDouble()));
  rewriter.replaceAllUsesWith(anchor->getResult(0), op.getResult());
  log.formed("layer_norm");
  return true;
}

bool raiseDecomposedLayerNorm(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto mean = cast<onnx::ReduceMeanOp>(anchor);
  Value x = mean.getData();
  // Candidates: a mean whose only user centres its own input.
  auto sub = soleUserOf<onnx::SubOp>(mean.getReduced());
  if (!sub || sub.getA() != x || sub.getB() != mean.getReduced())
    return false;
  if (!isLastAxisOnly(mean.getAxes(), rankOf(x)) || mean.getKeepdims() != 1) {
    log.unfused(anchor, "layer_norm", "mean is not over the last axis with keepdims");
    return false;
  }
  Value centred = sub.getC();
  onnx::ReduceMeanOp variance;
  for (Operation *user : centred.getUsers())
    if (squaredBase(user->getResult(0)) == centred)
      if (auto m = soleUserOf<onnx::ReduceMeanOp>(user->getResult(0)))
        variance = m;
  if (!variance || !isLastAxisOnly(variance.getAxes(), rankOf(x))) {
    log.unfused(anchor, "layer_norm", "no variance over the last axis of the centred input");
    return false;
  }
  std::string why;
  auto normalized = matchDivideByRms(variance.getReduced(), centred, why);
  if (failed(normalized)) {
    log.unfused(anchor, "layer_norm", why);
    return false;
  }
  Operation *root = normalized->value.getDefiningOp();
  Value weight = matchScale(normalized->value, dimOf(x, -1), root);
  Value bias;
  if (weight) {
    auto add = soleUserOf<onnx::AddOp>(root->getResult(0));
    Value b = add ? otherOperand(add, root->getResult(0)) : Value();
    if (b && rankOf(b) == 1 && dimOf(b, 0) == dimOf(x, -1)) {
      bias = b;
      root = add;
    }
  }
  rewriter.setInsertionPoint(root);
  if (!weight && !(weight = onesWeight(rewriter, root->getLoc(), x))) {
    log.unfused(anchor, "layer_norm", "no weight and a dynamic hidden size");
    return false;
  }
  auto op = LayerNormOp::create(rewriter, root->getLoc(), x, weight, bias,
                                rewriter.getF32FloatAttr(normalized->epsilon));
  rewriter.replaceAllUsesWith(root->getResult(0), op.getResult());
  log.formed("layer_norm");
  return true;
}

} // namespace xfmr::raise
