//===- MLP.cpp - raise gated MLPs and token embeddings --------------------===//
//
// Part of xfmr.
//
// Gated MLP: MatMul(act(MatMul(x, Wg)) * MatMul(x, Wu), Wd) with act one of
//   SiLU   g * Sigmoid(g)
//   GELU   Gelu-20, or 0.5 * g * (1 + Erf(g / sqrt(2)))
//   GELU (tanh) Gelu-20 approximate=tanh, or
//          0.5 * g * (1 + Tanh(sqrt(2/pi) * (g + 0.044715 * g^3))), g^3 as a
//          Pow or as g * g * g
//   ReLU   Relu(g)
// Embedding: Gather(constant [V, H] float table, integer ids, axis 0).
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include <cmath>

using namespace mlir;

namespace xfmr::raise {
namespace {

/// The factors of a product tree of Muls (at most `limit` deep).
void productFactors(Value v, SmallVectorImpl<Value> &out, int limit = 3) {
  auto mul = def<onnx::MulOp>(v);
  if (!mul || limit == 0) {
    out.push_back(v);
    return;
  }
  productFactors(mul.getA(), out, limit - 1);
  productFactors(mul.getB(), out, limit - 1);
}

/// Splits `factors` into one scalar constant (product of all constant
/// factors) and the rest.
double constantPart(SmallVectorImpl<Value> &factors) {
  double c = 1.0;
  llvm::erase_if(factors, [&](Value f) {
    auto s = scalarValue(f);
    if (s)
      c *= *s;
    return s.has_value();
  });
  return c;
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-4 * std::abs(b); }

/// 1 + inner, either order; returns inner.
Value onePlus(Value v) {
  auto add = def<onnx::AddOp>(v);
  if (!add)
    return nullptr;
  if (isScalar(add.getA(), 1.0))
    return add.getB();
  if (isScalar(add.getB(), 1.0))
    return add.getA();
  return nullptr;
}

/// 0.5 * g * (1 + f(g)) -> (g, f(g)).
std::optional<std::pair<Value, Value>> halfTimesOnePlus(Value v) {
  SmallVector<Value> factors;
  productFactors(v, factors);
  if (!near(constantPart(factors), 0.5) || factors.size() != 2)
    return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (Value inner = onePlus(factors[i]))
      return std::make_pair(factors[1 - i], inner);
  return std::nullopt;
}

} // namespace

std::optional<std::pair<Value, Activation>> matchActivation(Value v) {
  if (auto relu = def<onnx::ReluOp>(v))
    return std::make_pair(relu.getX(), Activation::relu);
  if (auto gelu = def<onnx::GeluOp>(v))
    return std::make_pair(gelu.getX(), gelu.getApproximate() == "tanh"
                                           ? Activation::gelu_tanh
                                           : Activation::gelu);
  if (auto mul = def<onnx::MulOp>(v)) {
    for (auto [g, s] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
      if (auto sig = def<onnx::SigmoidOp>(s); sig && sig.getX() == g)
        return std::make_pair(g, Activation::silu);
  }
  auto half = halfTimesOnePlus(v);
  if (!half)
    return std::nullopt;
  auto [g, inner] = *half;
  if (auto erf = def<onnx::ErfOp>(inner)) {
    Value arg = erf.getInput();
    if (auto div = def<onnx::DivOp>(arg); div && div.getA() == g &&
                                          near(scalarValue(div.getB()).value_or(0), std::sqrt(2.0)))
      return std::make_pair(g, Activation::gelu);
    SmallVector<Value> f;
    productFactors(arg, f);
    if (near(constantPart(f), 1.0 / std::sqrt(2.0)) && f.size() == 1 && f[0] == g)
      return std::make_pair(g, Activation::gelu);
  }
  if (auto tanh = def<onnx::TanhOp>(inner)) {
    SmallVector<Value> f;
    productFactors(tanh.getInput(), f);
    double k0 = constantPart(f); // before looking at what is left
    auto sum = f.size() == 1 ? def<onnx::AddOp>(f[0]) : onnx::AddOp();
    if (sum && near(k0, std::sqrt(2.0 / M_PI))) {
      Value cubic = otherOperand(sum, g);
      SmallVector<Value> c;
      if (cubic)
        productFactors(cubic, c);
      double k = constantPart(c);
      // g^3 as Pow(g, 3) or as products g * (g * g) (torch's tanh GELU).
      bool isCube = (c.size() == 1 && def<onnx::PowOp>(c[0]) &&
                     def<onnx::PowOp>(c[0]).getX() == g &&
                     isScalar(def<onnx::PowOp>(c[0]).getY(), 3.0)) ||
                    (c.size() == 3 && llvm::all_of(c, [&](Value x) { return x == g; }));
      if (isCube && near(k, 0.044715))
        return std::make_pair(g, Activation::gelu_tanh);
    }
  }
  return std::nullopt;
}

namespace {

bool isWeight(Value w) { return rankOf(w) == 2; }

} // namespace

bool raiseGatedMLP(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto down = cast<onnx::MatMulOp>(anchor);
  auto gateTimesUp = def<onnx::MulOp>(down.getA());
  // Candidates: a projection of a product with a projection in it.
  if (!gateTimesUp || !isWeight(down.getB()))
    return false;
  onnx::MatMulOp up, gate;
  std::optional<std::pair<Value, Activation>> act;
  for (auto [a, u] : {std::pair(gateTimesUp.getA(), gateTimesUp.getB()),
                      std::pair(gateTimesUp.getB(), gateTimesUp.getA())}) {
    auto candidate = matchActivation(a);
    if (candidate && def<onnx::MatMulOp>(candidate->first) && def<onnx::MatMulOp>(u)) {
      act = candidate;
      gate = def<onnx::MatMulOp>(candidate->first);
      up = def<onnx::MatMulOp>(u);
    }
  }
  if (!act) {
    if (def<onnx::MatMulOp>(gateTimesUp.getA()) || def<onnx::MatMulOp>(gateTimesUp.getB()))
      log.unfused(anchor, "gated_mlp", "the gate's activation is not SiLU, GELU or ReLU "
                                       "of a projection");
    return false;
  }
  if (gate.getA() != up.getA() || !isWeight(gate.getB()) || !isWeight(up.getB())) {
    log.unfused(anchor, "gated_mlp", "gate and up projections do not share the input "
                                     "or have no 2-D weights");
    return false;
  }
  Value x = gate.getA();
  // A hidden size shape inference left dynamic is the projections' K
  // (asserted at run time).
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape = xType ? SmallVector<int64_t>(xType.getShape())
                                     : SmallVector<int64_t>();
  if (xType && xType.getRank() > 0 && xType.isDynamicDim(xType.getRank() - 1))
    shape.back() = dimOf(gate.getB(), 0);
  if (!xType || !sameUpToDynamic(xType.clone(shape), down.getY().getType())) {
    log.unfused(anchor, "gated_mlp", "output shape differs from the input's");
    return false;
  }
  rewriter.setInsertionPoint(down);
  x = withStaticDims(rewriter, down.getLoc(), x, shape, nodeName(anchor) + ": the hidden size");
  auto op = GatedMLPOp::create(rewriter, down.getLoc(), act->second, x, gate.getB(),
                               up.getB(), down.getB());
  rewriter.replaceAllUsesWith(down.getY(), castTo(rewriter, down.getLoc(), op.getResult(),
                                                  down.getY().getType()));
  log.formed("gated_mlp");
  return true;
}

bool raiseEmbedding(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto gather = cast<onnx::GatherOp>(anchor);
  Value table = gather.getData();
  if (rankOf(table) != 2 || !isa<FloatType>(elementTypeOf(table)) || !isConstant(table))
    return false;
  // Rows of rotary cos/sin caches are angles, not token embeddings.
  for (Operation *user : gather.getOutput().getUsers())
    if (isa<RopeOp>(user))
      return false;
  if (gather.getAxis() != 0) {
    log.unfused(anchor, "embedding", "gathers along the hidden axis");
    return false;
  }
  rewriter.setInsertionPoint(gather);
  auto op = EmbeddingOp::create(rewriter, gather.getLoc(), gather.getOutput().getType(),
                                table, gather.getIndices());
  rewriter.replaceAllUsesWith(gather.getOutput(), op.getResult());
  log.formed("embedding");
  return true;
}

} // namespace xfmr::raise
