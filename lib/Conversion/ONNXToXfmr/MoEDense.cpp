//===- MoEDense.cpp - raise the dense coefficient MoE form to xfmr.moe ---===//
//
// Part of xfmr.
//
// Export-friendly MoE code avoids the data-dependent loop over the experts
// hit: every expert runs on every token, times a coefficient that is the
// token's routing weight for that expert or zero, and the products are
// summed. With T tokens, E experts, top k:
//
//   p      = Softmax(x . Wr);  v, idx = TopK(p, k);  w = v | v / sum(v)
//   c_e    = coefficient of expert e, [T, 1]:
//              ReduceSum(w * Cast(Equal(idx, e)), -1, keepdims)     (coef)
//              ReduceSum(Where(Equal(idx, e), w, 0), -1, keepdims)  (where)
//              Slice(D, e, e + 1, axis 1) | Gather(D, e, axis 1)    (one-hot,
//                with D [T, E] = ReduceSum(Unsqueeze(w, -1) * onehot, 1)
//                where onehot = Cast(OneHot(idx, E)) or
//                Cast(Equal(Unsqueeze(idx, -1), Range(0, E)))
//                or D = ScatterElements(zeros, idx, w, axis 1))     (scatter)
//   out    = sum over e of c_e * down_e(act(gate_e(x)) * up_e(x))
//
// as a chain of Adds (starting at zeros or at the first product). It reads
// every expert's weights for every token; one xfmr.moe reads the k chosen
// ones. Non-chosen terms are exact zeros (c_e = 0), so a token's sum is its
// k weighted expert outputs in expert order; xfmr.moe adds them in slot
// order, the same two-term sum for k = 2.
//
//===----------------------------------------------------------------------===//

#include "MoE.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

using namespace moe;

/// What a coefficient c_e decodes to: the TopK, the weights w it
/// distributes and the expert e.
struct Coefficient {
  onnx::TopKOp topk;
  Value scores;
  int64_t expert;
};

/// The single integer of a constant scalar or 1-element tensor.
std::optional<int64_t> singleInt(Value v) {
  auto ints = constantInts(v);
  if (!ints || ints->size() != 1)
    return std::nullopt;
  return (*ints)[0];
}

/// Equal(TopK.indices, e) (either order) -> (TopK, e).
std::optional<std::pair<onnx::TopKOp, int64_t>> indexEquals(Value v) {
  auto eq = def<onnx::EqualOp>(stripCasts(v));
  if (!eq)
    return std::nullopt;
  for (auto [i, c] : {std::pair(eq.getA(), eq.getB()), std::pair(eq.getB(), eq.getA())}) {
    auto topk = def<onnx::TopKOp>(stripCasts(i));
    std::optional<int64_t> e = singleInt(c);
    if (topk && stripCasts(i) == topk.getIndices() && e)
      return std::pair(topk, *e);
  }
  return std::nullopt;
}

/// ReduceSum(s, last axis, keepdims) of a [T, k] per-slot coefficient:
/// w * Cast(Equal(idx, e)) or Where(Equal(idx, e), w, 0).
std::optional<Coefficient> summedSlots(Value v) {
  auto sum = def<onnx::ReduceSumOp>(v);
  if (!sum || sum.getKeepdims() != 1 || rankOf(sum.getData()) != 2 ||
      !isAxis(sum.getAxes(), -1, 2))
    return std::nullopt;
  Value perSlot = sum.getData();
  if (auto mul = def<onnx::MulOp>(perSlot)) {
    for (auto [w, m] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
      if (auto hit = indexEquals(m))
        return Coefficient{hit->first, w, hit->second};
    return std::nullopt;
  }
  if (auto where = def<onnx::WhereOp>(perSlot)) {
    auto hit = indexEquals(where.getCondition());
    if (hit && isFill(where.getY(), 0.0))
      return Coefficient{hit->first, where.getX(), hit->second};
  }
  return std::nullopt;
}

/// Whether `v` is the constant 0, 1, ..., n - 1 (an initializer or a Range
/// of constants).
bool isIota(Value v, int64_t n) {
  if (auto ints = constantInts(v)) {
    if (int64_t(ints->size()) != n)
      return false;
    for (int64_t i = 0; i < n; ++i)
      if ((*ints)[i] != i)
        return false;
    return true;
  }
  auto range = def<onnx::RangeOp>(v);
  return range && singleInt(range.getStart()) == 0 && singleInt(range.getLimit()) == n &&
         singleInt(range.getDelta()) == 1;
}

/// The number of experts a TopK chooses among (its input's last dim).
int64_t expertsOf(onnx::TopKOp topk) { return dimOf(topk.getX(), -1); }

/// One-hot of TopK indices over the experts, [T, k, E] of 0/1:
/// Cast(OneHot(idx, E, [0, 1])) or Cast(Equal(Unsqueeze(idx, -1), iota(E))).
onnx::TopKOp oneHotIndices(Value v) {
  v = stripCasts(v);
  if (auto oh = def<onnx::OneHotOp>(v)) {
    auto topk = def<onnx::TopKOp>(stripCasts(oh.getIndices()));
    auto values = constantInts(oh.getValues());
    if (topk && stripCasts(oh.getIndices()) == topk.getIndices() &&
        singleInt(oh.getDepth()) == expertsOf(topk) && values &&
        *values == SmallVector<int64_t>{0, 1} &&
        (int64_t(oh.getAxis()) == -1 || int64_t(oh.getAxis()) == 2))
      return topk;
    return {};
  }
  auto eq = def<onnx::EqualOp>(v);
  if (!eq)
    return {};
  for (auto [i, r] : {std::pair(eq.getA(), eq.getB()), std::pair(eq.getB(), eq.getA())}) {
    auto unsq = def<onnx::UnsqueezeOp>(i);
    auto topk = unsq ? def<onnx::TopKOp>(stripCasts(unsq.getData())) : onnx::TopKOp();
    if (topk && stripCasts(unsq.getData()) == topk.getIndices() &&
        isAxis(unsq.getAxes(), -1, 3) && isIota(r, expertsOf(topk)))
      return topk;
  }
  return {};
}

/// The dense [T, E] coefficients D -> (TopK, w): ReduceSum(Unsqueeze(w, -1)
/// * onehot, axis 1) or ScatterElements(zeros, idx, w, axis 1).
std::optional<std::pair<onnx::TopKOp, Value>> denseCoefficients(Value v) {
  if (auto sc = def<onnx::ScatterElementsOp>(v)) {
    auto topk = def<onnx::TopKOp>(stripCasts(sc.getIndices()));
    if (topk && stripCasts(sc.getIndices()) == topk.getIndices() && sc.getAxis() == 1 &&
        sc.getReduction() == "none" && rankOf(sc.getOutput()) == 2 &&
        isFill(sc.getData(), 0.0))
      return std::pair(topk, sc.getUpdates());
    return std::nullopt;
  }
  auto sum = def<onnx::ReduceSumOp>(v);
  if (!sum || sum.getKeepdims() != 0 || rankOf(sum.getData()) != 3 ||
      !isAxis(sum.getAxes(), 1, 3))
    return std::nullopt;
  auto mul = def<onnx::MulOp>(sum.getData());
  if (!mul)
    return std::nullopt;
  for (auto [w, m] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())}) {
    auto unsq = def<onnx::UnsqueezeOp>(w);
    if (!unsq || !isAxis(unsq.getAxes(), -1, 3))
      continue;
    if (onnx::TopKOp topk = oneHotIndices(m))
      return std::pair(topk, unsq.getData());
  }
  return std::nullopt;
}

/// Column e of the dense coefficients, [T, 1]: Slice(D, e, e + 1, axis 1)
/// or Unsqueeze(Gather(D, e, axis 1), 1).
std::optional<Coefficient> denseColumn(Value v) {
  Value dense;
  std::optional<int64_t> e;
  if (auto slice = def<onnx::SliceOp>(v)) {
    std::optional<int64_t> start = singleInt(slice.getStarts()), end = singleInt(slice.getEnds());
    bool unitStep = isa<NoneType>(slice.getSteps().getType()) || singleInt(slice.getSteps()) == 1;
    if (!start || !end || *end != *start + 1 || !unitStep || rankOf(slice.getData()) != 2 ||
        isa<NoneType>(slice.getAxes().getType()) || !isAxis(slice.getAxes(), 1, 2))
      return std::nullopt;
    dense = slice.getData();
    e = start;
  } else if (auto unsq = def<onnx::UnsqueezeOp>(v); unsq && isAxis(unsq.getAxes(), 1, 2)) {
    auto g = def<onnx::GatherOp>(unsq.getData());
    if (!g || g.getAxis() != 1 || rankOf(g.getIndices()) != 0 || rankOf(g.getData()) != 2)
      return std::nullopt;
    dense = g.getData();
    e = singleInt(g.getIndices());
  }
  if (!dense || !e)
    return std::nullopt;
  auto coefficients = denseCoefficients(dense);
  if (!coefficients)
    return std::nullopt;
  return Coefficient{coefficients->first, coefficients->second, *e};
}

/// c_e [T, 1] in any of the forms.
std::optional<Coefficient> coefficient(Value v) {
  if (rankOf(v) != 2 || dimOf(v, 1) != 1)
    return std::nullopt;
  if (auto c = summedSlots(v))
    return c;
  return denseColumn(v);
}

/// One term c_e * down_e(act(gate_e(x)) * up_e(x)).
struct Term {
  Coefficient coef;
  GatedExpert expert;
};

/// `v` as a term (either order).
std::optional<Term> term(Value v) {
  auto mul = def<onnx::MulOp>(v);
  if (!mul || rankOf(mul.getC()) != 2)
    return std::nullopt;
  for (auto [c, y] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
    if (std::optional<GatedExpert> e = gatedExpert(y)) {
      std::optional<Coefficient> coef = coefficient(c);
      return coef ? std::optional<Term>(Term{*coef, *e}) : std::nullopt;
    }
  return std::nullopt;
}

/// One step of the chain: Add(acc, term) in either order.
std::optional<std::pair<Value, Term>> step(Value v) {
  auto add = def<onnx::AddOp>(v);
  if (!add || rankOf(add.getC()) != 2)
    return std::nullopt;
  if (auto t = term(add.getB()))
    return std::pair(add.getA(), *t);
  if (auto t = term(add.getA()))
    return std::pair(add.getB(), *t);
  return std::nullopt;
}

/// Whether `v` is the accumulator of a further step.
bool feedsAnotherStep(Value v) {
  for (Operation *user : v.getUsers())
    if (auto add = dyn_cast<onnx::AddOp>(user))
      if (auto s = step(add.getC()); s && s->first == v)
        return true;
  return false;
}

} // namespace

bool raiseMoEDense(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  Value result = anchor->getResult(0);
  if (!step(result) || feedsAnotherStep(result))
    return false;
  SmallVector<Term> terms;
  Value acc = result;
  for (std::optional<std::pair<Value, Term>> s; (s = step(acc)); acc = s->first)
    terms.push_back(s->second);
  if (auto first = term(acc))
    terms.push_back(*first);
  else if (!isFill(acc, 0.0))
    return false;
  if (terms.size() < 2)
    return false;
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "moe", why);
    return false;
  };
  const Term &any = terms.front();
  for (const Term &t : terms)
    if (t.coef.topk != any.coef.topk || t.coef.scores != any.coef.scores ||
        t.expert.act != any.expert.act || t.expert.gate.input != any.expert.gate.input)
      return fail("the experts do not share the routing, the tokens and the activation");
  std::string why;
  std::optional<Routing> routing = matchRouting(any.coef.topk, any.coef.scores, why);
  if (!routing)
    return fail(why);
  int64_t experts = expertsOf(any.coef.topk);
  if (ShapedType::isDynamic(experts) || int64_t(terms.size()) != experts)
    return fail(Twine("the sum covers ") + Twine(terms.size()) + " terms for " + Twine(experts) +
                " experts");
  SmallVector<const Term *> byIndex(experts, nullptr);
  for (const Term &t : terms) {
    if (t.coef.expert < 0 || t.coef.expert >= experts)
      return fail("an expert index is outside the router's experts");
    if (byIndex[t.coef.expert])
      return fail("an expert appears twice in the sum");
    byIndex[t.coef.expert] = &t;
  }
  Value x = any.expert.gate.input;
  if (stripFlattening(x) != stripFlattening(routing->router.input))
    return fail("the experts and the router do not read the same tokens");
  ExpertProjections projections;
  for (const Term *t : byIndex) {
    projections.gates.push_back(t->expert.gate);
    projections.ups.push_back(t->expert.up);
    projections.downs.push_back(t->expert.down);
  }
  routing->x = x;
  routing->act = any.expert.act;
  if (std::optional<std::string> problem =
          formPerExpertMoE(rewriter, anchor, *routing, projections))
    return fail(*problem);
  log.formed("moe");
  return true;
}

} // namespace xfmr::raise
