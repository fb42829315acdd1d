//===- MoELoop.cpp - raise a loop over the experts to xfmr.moe -----------===//
//
// Part of xfmr.
//
// The sparse MoE block as transformers 4.x's MixtralSparseMoeBlock (and the
// Qwen2-MoE, OLMoE, ... blocks written like it) traces: a loop over every
// expert, unrolled by the exporter, with T tokens, E experts, top k:
//
//   p       = Softmax(x . Wr);  v, I = TopK(p, k);  w = v | v / sum(v)
//   mask    = Transpose(OneHot(I, E, [0, 1]), [2, 1, 0])           [E, k, T]
//   for e in 0..E-1:
//     slot, tok = NonZero(Cast(Gather(mask, e)))       (Transpose, Split, Squeeze)
//     xe   = Reshape(Gather(Unsqueeze(x, 0), tok, axis 1), [-1, H])
//     ye   = down_e(act(gate_e(xe)) * up_e(xe)) * Gather(Flatten(w), tok * k + slot)
//     acc  = acc + ScatterElements(zeros, Expand(Unsqueeze(tok, 1)), Expand(ye))
//            (or ScatterElements(acc, ..., reduction = add))
//
// starting from zeros. Every expert runs over the tokens routed to it, but
// through dynamic shapes (NonZero) that the lowering cannot keep on packed
// kernels, and with one product per expert. The chain becomes one xfmr.moe
// whose [E, H, I] / [E, I, H] weights are the experts' matrices stacked.
// A token's terms are added in expert order here and in slot order by
// xfmr.moe: with k = 2 both sums are the same two-term addition.
//
//===----------------------------------------------------------------------===//

#include "MoE.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

using namespace moe;

/// Looks through Expand (the exporter broadcasts index_add's operands to
/// the accumulator's shape) and Reshapes.
Value stripBroadcast(Value v) {
  while (true) {
    if (auto e = def<onnx::ExpandOp>(v))
      v = e.getInput();
    else if (auto r = def<onnx::ReshapeOp>(v); r && rankOf(r.getData()) == rankOf(v))
      v = r.getData();
    else
      return v;
  }
}

/// One `acc + scatter(tok, ye)` of the chain.
struct Step {
  Value acc, tokens, update;
};

/// acc' = Add(acc, ScatterElements(zeros, idx, upd)) or
/// acc' = ScatterElements(acc, idx, upd, reduction = add), rows (axis 0).
std::optional<Step> accumulation(Value v) {
  auto rows = [](onnx::ScatterElementsOp s) -> Value {
    if (s.getAxis() != 0 || rankOf(s.getOutput()) != 2)
      return nullptr;
    auto unsq = def<onnx::UnsqueezeOp>(stripBroadcast(s.getIndices()));
    if (!unsq || rankOf(unsq.getData()) != 1 || !isAxis(unsq.getAxes(), 1, 2))
      return nullptr;
    return unsq.getData();
  };
  if (auto s = def<onnx::ScatterElementsOp>(v); s && s.getReduction() == "add") {
    if (Value tok = rows(s))
      return Step{s.getData(), tok, stripBroadcast(s.getUpdates())};
    return std::nullopt;
  }
  auto add = def<onnx::AddOp>(v);
  if (!add || rankOf(add.getC()) != 2)
    return std::nullopt;
  for (auto [acc, other] :
       {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())}) {
    auto s = def<onnx::ScatterElementsOp>(other);
    if (!s || s.getReduction() != "none" || !isFill(s.getData(), 0.0))
      continue;
    if (Value tok = rows(s))
      return Step{acc, tok, stripBroadcast(s.getUpdates())};
  }
  return std::nullopt;
}

/// Whether `v` is the accumulator of a further step (then it is not the end
/// of the chain).
bool feedsAnotherStep(Value v) {
  for (Operation *user : v.getUsers()) {
    if (user->getNumResults() != 1)
      continue;
    if (auto step = accumulation(user->getResult(0)); step && step->acc == v)
      return true;
  }
  return false;
}

/// Row `row` of NonZero(mask) [2, n] as a [n] vector: Squeeze(Split(
/// Transpose(nz, [1, 0]), axis 1)#row, 1) or Gather(nz, row, axis 0).
std::optional<std::pair<onnx::NonZeroOp, int64_t>> nonZeroRow(Value v) {
  if (auto g = def<onnx::GatherOp>(v); g && g.getAxis() == 0) {
    auto nz = def<onnx::NonZeroOp>(g.getData());
    auto row = constantInts(g.getIndices());
    if (nz && row && row->size() == 1 && rankOf(g.getIndices()) == 0)
      return std::pair(nz, (*row)[0]);
    return std::nullopt;
  }
  auto sq = def<onnx::SqueezeOp>(v);
  auto split = sq ? def<onnx::SplitOp>(sq.getData()) : onnx::SplitOp();
  if (!split || split->getNumResults() != 2 || split.getAxis() != 1 ||
      !isAxis(sq.getAxes(), 1, 2))
    return std::nullopt;
  auto tr = def<onnx::TransposeOp>(split.getInput());
  auto nz = tr ? def<onnx::NonZeroOp>(tr.getData()) : onnx::NonZeroOp();
  auto perm = tr ? tr.getPerm() : std::nullopt;
  if (!nz || !perm || perm->size() != 2 || cast<IntegerAttr>((*perm)[0]).getInt() != 1)
    return std::nullopt;
  return std::pair(nz, int64_t(cast<OpResult>(sq.getData()).getResultNumber()));
}

/// The expert a NonZero selects: NonZero([Cast](Gather(Transpose(OneHot(
/// TopK.indices, E, [0, 1]), [2, 1, 0]), e))) -> (TopK, E, e).
struct ExpertMask {
  onnx::TopKOp topk;
  int64_t experts, expert;
};

std::optional<ExpertMask> expertMask(onnx::NonZeroOp nz) {
  Value m = nz.getX();
  if (auto cast = def<onnx::CastOp>(m))
    m = cast.getInput();
  auto g = def<onnx::GatherOp>(m);
  auto e = g ? constantInts(g.getIndices()) : std::nullopt;
  if (!g || g.getAxis() != 0 || !e || e->size() != 1 || rankOf(g.getIndices()) != 0)
    return std::nullopt;
  auto tr = def<onnx::TransposeOp>(g.getData());
  auto perm = tr ? tr.getPerm() : std::nullopt;
  if (!perm || perm->size() != 3 || cast<IntegerAttr>((*perm)[0]).getInt() != 2 ||
      cast<IntegerAttr>((*perm)[1]).getInt() != 1)
    return std::nullopt;
  auto oneHot = def<onnx::OneHotOp>(tr.getData());
  if (!oneHot || (int64_t(oneHot.getAxis()) != -1 && int64_t(oneHot.getAxis()) != 2))
    return std::nullopt;
  auto depth = constantInts(oneHot.getDepth());
  auto values = constantInts(oneHot.getValues());
  auto topk = def<onnx::TopKOp>(oneHot.getIndices());
  if (!depth || depth->size() != 1 || !values || *values != SmallVector<int64_t>{0, 1} || !topk ||
      oneHot.getIndices() != topk.getIndices())
    return std::nullopt;
  return ExpertMask{topk, (*depth)[0], (*e)[0]};
}

/// The tokens the expert reads: Reshape(Gather(Unsqueeze(x, 0), tok, axis 1),
/// [-1, H]) or Gather(x, tok) -> x.
Value gatheredTokens(Value xe, Value tok) {
  if (auto r = def<onnx::ReshapeOp>(xe); r && rankOf(r.getData()) == 3)
    xe = r.getData();
  auto g = def<onnx::GatherOp>(xe);
  if (!g || g.getIndices() != tok)
    return nullptr;
  if (g.getAxis() == 0 && rankOf(g.getData()) == 2)
    return g.getData();
  auto unsq = def<onnx::UnsqueezeOp>(g.getData());
  if (g.getAxis() != 1 || !unsq || !isAxis(unsq.getAxes(), 0, 3) || rankOf(unsq.getData()) != 2)
    return nullptr;
  return unsq.getData();
}

/// The routing weight column of (tok, slot), slot and tok the two rows of
/// `nz`: Gather(Flatten(Unsqueeze(w, 2), 2) | Reshape(w, [-1, 1]),
/// tok * k + slot) -> w [T, k].
Value gatheredScores(Value col, Value tok, onnx::NonZeroOp nz, int64_t k) {
  auto g = def<onnx::GatherOp>(stripBroadcast(col));
  if (!g || g.getAxis() != 0 || rankOf(g.getData()) != 2 || dimOf(g.getData(), 1) != 1)
    return nullptr;
  auto add = def<onnx::AddOp>(g.getIndices());
  if (!add)
    return nullptr;
  auto isTokTimesK = [&](Value v) {
    auto mul = def<onnx::MulOp>(v);
    return mul && ((mul.getA() == tok && isScalar(mul.getB(), double(k))) ||
                   (mul.getB() == tok && isScalar(mul.getA(), double(k))));
  };
  auto isSlot = [&](Value v) {
    auto row = nonZeroRow(v);
    return row && row->first == nz && row->second == 0;
  };
  if (!((isSlot(add.getA()) && isTokTimesK(add.getB())) ||
        (isSlot(add.getB()) && isTokTimesK(add.getA()))))
    return nullptr;
  Value flat = g.getData();
  if (auto f = def<onnx::FlattenOp>(flat); f && f.getAxis() == 2) {
    auto unsq = def<onnx::UnsqueezeOp>(f.getInput());
    return unsq && isAxis(unsq.getAxes(), 2, 3) ? unsq.getData() : nullptr;
  }
  if (auto r = def<onnx::ReshapeOp>(flat); r && rankOf(r.getData()) == 2)
    return r.getData();
  return nullptr;
}

/// One expert of the loop, decoded from its step.
struct LoopExpert {
  int64_t index;
  Projection gate, up, down;
  Activation act;
  Value x, scores;
  onnx::TopKOp topk;
  int64_t experts;
};

/// ye = down(act(gate(xe)) * up(xe)) * score, with everything traced back.
std::optional<LoopExpert> loopExpert(const Step &step, std::string &why) {
  auto tokRow = nonZeroRow(step.tokens);
  if (!tokRow || tokRow->second != 1) {
    why = "the scattered rows are not the tokens of a NonZero over an expert's mask";
    return std::nullopt;
  }
  auto mask = expertMask(tokRow->first);
  if (!mask) {
    why = "the NonZero is not over one expert of a OneHot of the TopK indices";
    return std::nullopt;
  }
  auto mul = def<onnx::MulOp>(step.update);
  if (!mul) {
    why = "an expert's output is not weighted by its routing score";
    return std::nullopt;
  }
  int64_t topK = constantK(mask->topk);
  for (auto [y, col] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())}) {
    std::optional<GatedExpert> e = gatedExpert(y);
    Value scores = e ? gatheredScores(col, step.tokens, tokRow->first, topK) : Value();
    if (!scores)
      continue;
    Value x = gatheredTokens(e->gate.input, step.tokens);
    if (!x) {
      why = "an expert does not read the tokens routed to it";
      return std::nullopt;
    }
    return LoopExpert{mask->expert, e->gate, e->up, e->down, e->act, x, scores, mask->topk,
                      mask->experts};
  }
  why = "an expert is not down(act(gate(x)) * up(x)) times its routing score";
  return std::nullopt;
}

} // namespace

bool raiseMoELoop(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  Value result = anchor->getResult(0);
  if (!accumulation(result) || feedsAnotherStep(result))
    return false;
  SmallVector<Step> steps;
  Value acc = result;
  for (std::optional<Step> step; (step = accumulation(acc)); acc = step->acc)
    steps.push_back(*step);
  if (!isFill(acc, 0.0))
    return false;
  // Scatter-adds into zeros of rows NonZero picked: a loop over experts (or
  // some other index_add). Only report it once it looks like experts.
  auto first = nonZeroRow(steps.front().tokens);
  if (!first || !expertMask(first->first))
    return false;
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "moe", why);
    return false;
  };
  SmallVector<std::optional<LoopExpert>> byIndex;
  std::optional<LoopExpert> any;
  std::string why;
  for (const Step &step : steps) {
    std::optional<LoopExpert> e = loopExpert(step, why);
    if (!e)
      return fail(why);
    if (any && (e->topk != any->topk || e->x != any->x || e->scores != any->scores ||
                e->act != any->act || e->experts != any->experts))
      return fail("the experts do not share the routing, the tokens and the activation");
    if (e->experts < 1 || e->experts > 4096 || e->index < 0 || e->index >= e->experts)
      return fail("an expert index is outside the one-hot depth");
    byIndex.resize(e->experts);
    if (byIndex[e->index])
      return fail("an expert appears twice in the loop");
    byIndex[e->index] = e;
    any = e;
  }
  int64_t experts = any->experts;
  if (int64_t(steps.size()) != experts)
    return fail(Twine("the loop covers ") + Twine(steps.size()) + " of " + Twine(experts) +
                " experts (an export traced with only the experts some input hit)");
  std::optional<Routing> routing = matchRouting(any->topk, any->scores, why);
  if (!routing)
    return fail(why);
  Value x = any->x;
  if (stripFlattening(x) != stripFlattening(routing->router.input))
    return fail("the experts and the router do not read the same tokens");
  ExpertProjections projections;
  for (const std::optional<LoopExpert> &e : byIndex) {
    projections.gates.push_back(e->gate);
    projections.ups.push_back(e->up);
    projections.downs.push_back(e->down);
  }
  routing->x = x;
  routing->act = any->act;
  if (std::optional<std::string> problem =
          formPerExpertMoE(rewriter, anchor, *routing, projections))
    return fail(*problem);
  log.formed("moe");
  return true;
}

} // namespace xfmr::raise
