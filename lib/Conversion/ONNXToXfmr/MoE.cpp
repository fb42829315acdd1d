//===- MoE.cpp - raise mixture-of-experts blocks to xfmr.moe --------------===//
//
// Part of xfmr.
//
// The block as Hugging Face's batched experts export it (transformers'
// `batched_mm` experts, the form its ONNX exporter and onnxruntime's MoE
// fusion use; Mixtral, Qwen-MoE, ...), with T tokens, E experts, top k:
//
//   p        = Softmax(Gemm(x, Wr, transB) | MatMul(x, Wr))        [T, E]
//   v, idx   = TopK(p, k)                                          [T, k]
//   w        = v | v / ReduceSum(v, -1, keepdims)    (renormalised)
//   ids      = Unsqueeze(Reshape(idx, [-1]), -1)                   [T*k, 1]
//   xr       = Reshape(Expand(Unsqueeze(x, 1), [T, k, H]), [-1, H]) (repeat)
//   proj(W, a) = Squeeze(MatMul(GatherND(W, ids), Unsqueeze(a, -1)), -1)
//   g, u     = Split(proj(Wgu, xr), 2, axis 1)  |  proj(Wg, xr), proj(Wu, xr)
//   y        = proj(Wd, act(g) * u)                                [T*k, H]
//   out      = ReduceSum(Reshape(y * Unsqueeze(Reshape(w, [-1]), -1),
//                                [T, k, H]), axis 1)               [T, H]
//
// with the expert weights in torch's [E, out, in] layout. The graph gathers
// T*k copies of expert matrices; xfmr.moe reads each selected expert once.
// Weights are re-laid out at compile time into xfmr.moe's [E, H, I] /
// [E, I, H] (and the router into [H, E]). A shared expert added to the
// result (Qwen-MoE: Sigmoid(x . Wsg) * down(act(x . Wg) * (x . Wu)), as
// MatMul or Gemm products of the same tokens) joins the op.
//
//===----------------------------------------------------------------------===//

#include "MoE.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace xfmr::raise {
namespace {

using namespace moe;

/// The TopK whose indices, flattened to [T*k], `v` is.
onnx::TopKOp topKOfFlatIds(Value v) {
  auto flat = def<onnx::ReshapeOp>(v);
  if (!flat || rankOf(flat.getReshaped()) != 1)
    return {};
  auto topk = def<onnx::TopKOp>(flat.getData());
  return topk && flat.getData() == topk.getIndices() ? topk : onnx::TopKOp();
}

/// The per-slot expert matrices [T*k, out, in] of a constant [E, out, in]
/// `W`, as the exporters gather them: GatherND(W, Unsqueeze(ids, -1))
/// (dynamo) or Gather(W, ids, axis 0) (TorchScript), ids =
/// Reshape(TopK.indices, [-1]). Returns W and the TopK.
std::optional<std::pair<Value, onnx::TopKOp>> gatheredExperts(Value v, int64_t rank = 3) {
  Value data, ids;
  if (auto nd = def<onnx::GatherNDOp>(v); nd && nd.getBatchDims() == 0) {
    auto unsq = def<onnx::UnsqueezeOp>(nd.getIndices());
    if (!unsq || rankOf(nd.getIndices()) != 2 || !isAxis(unsq.getAxes(), -1, 2))
      return std::nullopt;
    data = nd.getData();
    ids = unsq.getData();
  } else if (auto g = def<onnx::GatherOp>(v); g && g.getAxis() == 0) {
    data = g.getData();
    ids = g.getIndices();
  } else {
    return std::nullopt;
  }
  if (rankOf(data) != rank || !isConstant(data))
    return std::nullopt;
  onnx::TopKOp topk = topKOfFlatIds(ids);
  if (!topk)
    return std::nullopt;
  return std::pair(data, topk);
}

/// `v` through Squeeze(Unsqueeze(x, a), a) round trips.
Value stripUnitRoundTrip(Value v) {
  while (auto sq = def<onnx::SqueezeOp>(v)) {
    auto unsq = def<onnx::UnsqueezeOp>(sq.getData());
    auto a = constantInts(sq.getAxes()), b = unsq ? constantInts(unsq.getAxes()) : std::nullopt;
    if (!unsq || !a || !b || *a != *b || rankOf(unsq.getData()) != rankOf(v))
      break;
    v = unsq.getData();
  }
  return v;
}

/// One expert product proj(W, a) [+ bias]: the constant W, the per-slot
/// input a [T*k, in], the TopK of the routing ids, and the layout: W
/// [E, out, in] multiplying a column (Mixtral) or [E, in, out] multiplied
/// by a row (`rows`: gpt-oss); the bias a constant [E, out] gathered by the
/// same ids, or null.
struct ExpertProduct {
  Value weight, input;
  onnx::TopKOp topk;
  bool rows = false;
  Value bias;

  int64_t in() const { return dimOf(weight, rows ? 1 : 2); }
  int64_t out() const { return dimOf(weight, rows ? 2 : 1); }
};

std::optional<ExpertProduct> unbiasedExpertProduct(Value v) {
  auto sq = def<onnx::SqueezeOp>(v);
  if (!sq || rankOf(sq.getData()) != 3)
    return std::nullopt;
  auto mm = def<onnx::MatMulOp>(sq.getData());
  if (!mm)
    return std::nullopt;
  // Squeeze(MatMul(W[ids] [S, out, in], Unsqueeze(a, -1)), -1)
  if (isAxis(sq.getAxes(), -1, 3)) {
    auto gathered = gatheredExperts(mm.getA());
    auto col = def<onnx::UnsqueezeOp>(mm.getB());
    if (!gathered || !col || !isAxis(col.getAxes(), -1, 3))
      return std::nullopt;
    return ExpertProduct{gathered->first, col.getData(), gathered->second};
  }
  // Squeeze(MatMul(Unsqueeze(a, 1), W[ids] [S, in, out]), 1)
  if (isAxis(sq.getAxes(), 1, 3)) {
    auto gathered = gatheredExperts(mm.getB());
    auto row = def<onnx::UnsqueezeOp>(mm.getA());
    if (!gathered || !row || !isAxis(row.getAxes(), 1, 3))
      return std::nullopt;
    return ExpertProduct{gathered->first, row.getData(), gathered->second, /*rows=*/true};
  }
  return std::nullopt;
}

std::optional<ExpertProduct> expertProduct(Value v) {
  v = stripUnitRoundTrip(v);
  if (auto add = def<onnx::AddOp>(v)) {
    for (auto [p, b] : {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())}) {
      auto product = unbiasedExpertProduct(p);
      auto bias = gatheredExperts(b, /*rank=*/2);
      if (product && bias && bias->second == product->topk &&
          dimOf(bias->first, 0) == dimOf(product->weight, 0) &&
          dimOf(bias->first, 1) == product->out()) {
        product->bias = bias->first;
        return product;
      }
    }
    return std::nullopt;
  }
  return unbiasedExpertProduct(v);
}

/// The tokens x [T, H] repeated k times each (repeat_interleave):
/// Reshape(Expand(Unsqueeze(x, 1), [T, k, H]), [-1, H]) (dynamo) or
/// Flatten(Tile(Unsqueeze(x, 1), [1, k, 1]), 2) (TorchScript) -> x.
Value repeatedTokens(Value xr, int64_t k) {
  Value repeated;
  if (auto flat = def<onnx::ReshapeOp>(xr)) {
    if (auto expand = def<onnx::ExpandOp>(flat.getData()))
      repeated = expand.getOutput();
  } else if (auto flat = def<onnx::FlattenOp>(xr); flat && flat.getAxis() == 2) {
    auto tile = def<onnx::TileOp>(flat.getInput());
    auto reps = tile ? constantInts(tile.getRepeats()) : std::nullopt;
    if (reps && *reps == SmallVector<int64_t>{1, k, 1})
      repeated = tile.getOutput();
  }
  if (!repeated || rankOf(repeated) != 3 || dimOf(repeated, 1) != k || rankOf(xr) != 2)
    return nullptr;
  auto unsq = def<onnx::UnsqueezeOp>(repeated.getDefiningOp()->getOperand(0));
  if (!unsq || rankOf(unsq.getData()) != 2 || !isAxis(unsq.getAxes(), 1, 3))
    return nullptr;
  return unsq.getData();
}

/// The [T*k, 2I] product whose first and second halves along the last axis
/// `g` and `u` are: Split(p, 2, axis -1) (dynamo) or two Slices of p,
/// [0, I) and [I, 2I) (TorchScript's chunk). Null otherwise.
Value fusedHalves(Value g, Value u, int64_t inter) {
  auto gSplit = def<onnx::SplitOp>(g);
  if (gSplit && gSplit == def<onnx::SplitOp>(u) && gSplit->getNumResults() == 2 &&
      g == gSplit->getResult(0) && u == gSplit->getResult(1) && isLastAxis(gSplit.getAxis(), 2))
    return gSplit.getInput();
  // Slice(p, [begin], [end], [last axis] (, [1])) -> p, when it is [begin, end).
  auto sliceOf = [](Value v, int64_t begin, int64_t end) -> Value {
    auto slice = def<onnx::SliceOp>(v);
    if (!slice || rankOf(v) != 2 || !isAxis(slice.getAxes(), -1, 2))
      return nullptr;
    auto starts = constantInts(slice.getStarts()), ends = constantInts(slice.getEnds());
    if (!isa<NoneType>(slice.getSteps().getType())) {
      auto steps = constantInts(slice.getSteps());
      if (!steps || *steps != SmallVector<int64_t>{1})
        return nullptr;
    }
    int64_t dim = dimOf(slice.getData(), 1);
    if (!starts || !ends || starts->size() != 1 || ends->size() != 1 ||
        ShapedType::isDynamic(dim) || (*starts)[0] != begin ||
        std::min((*ends)[0], dim) != end)
      return nullptr;
    return slice.getData();
  };
  Value p = sliceOf(g, 0, inter);
  return p && sliceOf(u, inter, 2 * inter) == p ? p : nullptr;
}

/// Router: the projection (of the tokens, by a constant [H, E] or, from a
/// Gemm, [E, H]) that the TopK's Softmax over the experts reads.
std::optional<Projection> router(onnx::TopKOp topk) {
  auto sm = def<onnx::SoftmaxOp>(topk.getX());
  if (!sm || rankOf(sm.getOutput()) != 2 || !isLastAxis(sm.getAxis(), 2))
    return std::nullopt;
  return projection(sm.getInput());
}

/// x . W + b with a constant [N] bias b: Gemm(x, W, b) (beta 1) or
/// Add(projection, b) -> the projection and b.
std::optional<std::pair<Projection, Value>> biasedProjection(Value v) {
  auto isBias = [&](Value b) {
    return isConstant(b) && rankOf(b) == 1 && dimOf(b, 0) == dimOf(v, -1) &&
           elementTypeOf(b) == elementTypeOf(v);
  };
  if (auto gemm = def<onnx::GemmOp>(v); gemm && !gemm.getTransA() &&
                                         gemm.getAlpha().convertToDouble() == 1.0 &&
                                         gemm.getBeta().convertToDouble() == 1.0 &&
                                         isConstant(gemm.getB()) && isBias(gemm.getC()))
    return std::pair(Projection{gemm.getA(), gemm.getB(), gemm.getTransB() != 0}, gemm.getC());
  if (auto add = def<onnx::AddOp>(v))
    for (auto [p, b] : {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())})
      if (auto proj = projection(p); proj && isBias(b))
        return std::pair(*proj, b);
  if (auto proj = projection(v))
    return std::pair(*proj, Value());
  return std::nullopt;
}

/// w = Mul(v, c) with a constant scalar c (the routed scale) -> (v, c);
/// (w, 1) otherwise.
std::pair<Value, double> routedScale(Value w) {
  if (auto mul = def<onnx::MulOp>(w))
    for (auto [v, c] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
      if (auto scale = scalarValue(c); scale && std::isfinite(*scale) && *scale > 0)
        return {v, *scale};
  return {w, 1.0};
}

/// w: `values` (false), or values / ReduceSum(values, -1, keepdims)
/// (true, renormalised), the sum plus at most a tiny constant (DeepSeek's
/// 1e-20, below any f32 sum of selected scores); nullopt otherwise.
std::optional<bool> scoreNormalization(Value w, Value values) {
  if (w == values)
    return false;
  auto div = def<onnx::DivOp>(w);
  if (!div || div.getA() != values)
    return std::nullopt;
  Value denominator = div.getB();
  if (auto add = def<onnx::AddOp>(denominator))
    for (auto [v, c] : {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())})
      if (auto eps = scalarValue(c); eps && *eps >= 0 && *eps <= 1e-12) {
        denominator = v;
        break;
      }
  auto sum = def<onnx::ReduceSumOp>(denominator);
  if (!sum || sum.getData() != values || sum.getKeepdims() != 1 ||
      !isAxis(sum.getAxes(), -1, 2))
    return std::nullopt;
  return true;
}

/// Group-limited routing (DeepSeek-V3's): the choice scores c [T, E] with
/// the experts outside the best groups masked,
///   Where(Not(mask), -inf, c),
///   mask = Reshape(Expand(Unsqueeze(ScatterElements(0, gi, 1, axis 1), -1),
///                         [T, G, E/G]), [T, E])
///   gi   = TopK(ReduceSum(TopK(Reshape(c, [T, G, E/G]), 2).values, -1), kg)
/// (Casts around the mask allowed) -> c, G and kg.
struct GroupLimit {
  Value choice;
  int64_t groups, topGroups;
};

std::optional<GroupLimit> groupLimit(Value masked) {
  auto where = def<onnx::WhereOp>(masked);
  auto fill = where ? scalarValue(where.getX()) : std::nullopt;
  if (!fill || !std::isinf(*fill) || *fill > 0)
    return std::nullopt;
  auto notMask = def<onnx::NotOp>(stripCasts(where.getCondition()));
  auto flat = notMask ? def<onnx::ReshapeOp>(stripCasts(notMask.getX())) : onnx::ReshapeOp();
  auto expand = flat ? def<onnx::ExpandOp>(flat.getData()) : onnx::ExpandOp();
  auto unsq = expand ? def<onnx::UnsqueezeOp>(expand.getInput()) : onnx::UnsqueezeOp();
  if (!unsq || rankOf(expand.getOutput()) != 3 || !isAxis(unsq.getAxes(), -1, 3))
    return std::nullopt;
  auto scatter = def<onnx::ScatterElementsOp>(unsq.getData());
  if (!scatter || rankOf(scatter.getOutput()) != 2 || !isLastAxis(scatter.getAxis(), 2) ||
      scatter.getReduction() != "none" || !isFill(scatter.getData(), 0.0) ||
      !isFill(scatter.getUpdates(), 1.0))
    return std::nullopt;
  auto groupTopK = def<onnx::TopKOp>(scatter.getIndices());
  if (!groupTopK || scatter.getIndices() != groupTopK.getIndices() ||
      groupTopK.getLargest() != 1 || !isLastAxis(groupTopK.getAxis(), 2))
    return std::nullopt;
  auto groupSum = def<onnx::ReduceSumOp>(groupTopK.getX());
  auto inner = groupSum ? def<onnx::TopKOp>(groupSum.getData()) : onnx::TopKOp();
  if (!inner || groupSum.getData() != inner.getValues() || groupSum.getKeepdims() != 0 ||
      !isAxis(groupSum.getAxes(), -1, 3) || inner.getLargest() != 1 ||
      !isLastAxis(inner.getAxis(), 3))
    return std::nullopt;
  auto grouped = def<onnx::ReshapeOp>(inner.getX());
  if (!grouped || grouped.getData() != where.getY() || rankOf(grouped.getReshaped()) != 3)
    return std::nullopt;
  int64_t groups = dimOf(grouped.getReshaped(), 1), size = dimOf(grouped.getReshaped(), 2);
  int64_t experts = dimOf(where.getY(), -1), topGroups = constantK(groupTopK);
  if (ShapedType::isDynamic(groups) || ShapedType::isDynamic(size) || groups * size != experts ||
      constantK(inner) != std::min<int64_t>(2, size) || topGroups < 1 || topGroups > groups ||
      dimOf(expand.getOutput(), 1) != groups || dimOf(expand.getOutput(), 2) != size)
    return std::nullopt;
  return GroupLimit{where.getY(), groups, topGroups};
}

/// Sigmoid routing: `scores` = GatherElements(Sigmoid(x . router),
/// topk.indices, last axis), TopK's input Sigmoid(...) [+ constant bias
/// [E]], optionally group-limited. Fills the router and the sigmoid fields.
bool matchSigmoidRouting(onnx::TopKOp topk, Value values, Routing &routing) {
  auto gathered = def<onnx::GatherElementsOp>(values);
  if (!gathered || gathered.getIndices() != topk.getIndices() ||
      !isLastAxis(gathered.getAxis(), 2))
    return false;
  auto sig = def<onnx::SigmoidOp>(gathered.getData());
  std::optional<Projection> r = sig ? projection(sig.getX()) : std::nullopt;
  if (!r)
    return false;
  Value choice = topk.getX();
  if (auto limit = groupLimit(choice)) {
    choice = limit->choice;
    routing.groups = limit->groups;
    routing.topGroups = limit->topGroups;
  }
  if (choice != sig.getY()) {
    auto add = def<onnx::AddOp>(choice);
    Value bias = !add ? Value() : add.getA() == sig.getY() ? add.getB() : add.getA();
    if (!add || (add.getA() != sig.getY() && add.getB() != sig.getY()) || !isConstant(bias) ||
        rankOf(bias) != 1 || dimOf(bias, 0) != dimOf(sig.getY(), -1) ||
        !elementTypeOf(bias).isF32())
      return false;
    routing.selectionBias = bias;
  }
  routing.router = *r;
  routing.sigmoid = true;
  return true;
}

/// Slice(p, [first], [end], [last axis], [2]) -> p, with end past the
/// last column.
Value everyOther(Value v, int64_t first) {
  auto slice = def<onnx::SliceOp>(v);
  if (!slice || isa<NoneType>(slice.getSteps().getType()))
    return nullptr;
  int64_t rank = rankOf(slice.getData());
  auto starts = constantInts(slice.getStarts()), ends = constantInts(slice.getEnds());
  auto steps = constantInts(slice.getSteps());
  int64_t cols = dimOf(slice.getData(), -1);
  if (!starts || !ends || !steps || starts->size() != 1 || (*starts)[0] != first ||
      *steps != SmallVector<int64_t>{2} || ShapedType::isDynamic(cols) || (*ends)[0] < cols ||
      !isAxis(slice.getAxes(), -1, rank))
    return nullptr;
  return slice.getData();
}

/// gpt-oss's clamped SwiGLU of interleaved gate and up columns:
///   (Clip(u, -L, L) + c) * (g' * Sigmoid(g' * alpha)), g' = Clip(g, -, L),
///   g = p[..., 0::2], u = p[..., 1::2]
/// -> p, alpha, L, c.
struct ClampedSwiGLU {
  Value product;
  float alpha, limit, offset;
};

std::optional<ClampedSwiGLU> clampedSwiGLU(Value v) {
  auto mul = def<onnx::MulOp>(v);
  if (!mul)
    return std::nullopt;
  for (auto [a, b] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())}) {
    auto add = def<onnx::AddOp>(a);
    auto glu = def<onnx::MulOp>(b);
    if (!add || !glu)
      continue;
    onnx::ClipOp upClip;
    std::optional<double> offset;
    for (auto [c, k] : {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())})
      if (auto clip = def<onnx::ClipOp>(c); clip && (offset = scalarValue(k))) {
        upClip = clip;
        break;
      }
    auto lo = upClip ? scalarValue(upClip.getMin()) : std::nullopt;
    auto hi = upClip ? scalarValue(upClip.getMax()) : std::nullopt;
    if (!lo || !hi || !(*hi > 0) || *lo != -*hi)
      continue;
    for (auto [gp, sg] : {std::pair(glu.getA(), glu.getB()), std::pair(glu.getB(), glu.getA())}) {
      auto gateClip = def<onnx::ClipOp>(gp);
      auto sig = def<onnx::SigmoidOp>(sg);
      auto scaled = sig ? def<onnx::MulOp>(sig.getX()) : onnx::MulOp();
      if (!gateClip || !scaled || !isa<NoneType>(gateClip.getMin().getType()) ||
          scalarValue(gateClip.getMax()) != hi)
        continue;
      Value other = scaled.getA() == gp ? scaled.getB() : scaled.getA();
      auto alpha = scalarValue(other);
      if ((scaled.getA() != gp && scaled.getB() != gp) || !alpha)
        continue;
      Value p = everyOther(gateClip.getInput(), 0);
      if (!p || everyOther(upClip.getInput(), 1) != p)
        continue;
      return ClampedSwiGLU{p, static_cast<float>(*alpha), static_cast<float>(*hi),
                           static_cast<float>(*offset)};
    }
  }
  return std::nullopt;
}

/// The gate and up expert products feeding the down projection's input
/// (act(g) * u from one fused product cut in halves, or from two; or
/// gpt-oss's clamped SwiGLU of interleaved columns), all routed by `topk`,
/// and where each one's `inter` columns start and step in its product.
struct GateUp {
  ExpertProduct gate, up;
  int64_t gateFirst = 0, upFirst = 0, step = 1;
  Activation act = Activation::silu;
  std::optional<ClampedSwiGLU> clamped;
};

std::optional<GateUp> gateAndUp(Value downInput, onnx::TopKOp topk, int64_t inter) {
  if (auto clamped = clampedSwiGLU(downInput)) {
    auto fused = expertProduct(clamped->product);
    if (!fused || fused->topk != topk || !fused->rows || fused->out() != 2 * inter)
      return std::nullopt;
    return GateUp{*fused, *fused, 0, 1, 2, Activation::silu, clamped};
  }
  auto gateTimesUp = def<onnx::MulOp>(downInput);
  if (!gateTimesUp)
    return std::nullopt;
  for (auto [a, u] : {std::pair(gateTimesUp.getA(), gateTimesUp.getB()),
                      std::pair(gateTimesUp.getB(), gateTimesUp.getA())}) {
    auto candidate = matchActivation(a);
    if (!candidate)
      continue;
    if (Value gu = fusedHalves(candidate->first, u, inter)) {
      auto fused = expertProduct(gu);
      if (!fused || fused->topk != topk || fused->out() != 2 * inter)
        continue;
      return GateUp{*fused, *fused, 0, inter, 1, candidate->second, std::nullopt};
    }
    auto g = expertProduct(candidate->first), up = expertProduct(u);
    if (g && up && g->topk == topk && up->topk == topk && g->input == up->input &&
        g->out() == inter && up->out() == inter)
      return GateUp{*g, *up, 0, 0, 1, candidate->second, std::nullopt};
  }
  return std::nullopt;
}

} // namespace

namespace moe {

bool isFill(Value v, double value) {
  if (auto e = def<onnx::ExpandOp>(v))
    v = e.getInput();
  if (auto cos = def<onnx::ConstantOfShapeOp>(v)) {
    auto fill = dyn_cast_or_null<DenseElementsAttr>(cos.getValueAttr());
    if (!fill)
      return value == 0.0;
    if (!fill.isSplat())
      return false;
    if (isa<FloatType>(fill.getElementType()))
      return fill.getSplatValue<APFloat>().convertToDouble() == value;
    return fill.getSplatValue<APInt>().getSExtValue() == value;
  }
  if (isScalar(v, value))
    return true;
  auto bytes = value == 0.0 ? constantBytes(v) : std::nullopt;
  return bytes && llvm::all_of(*bytes, [](char c) { return c == 0; });
}

Value stripFlattening(Value v) {
  while (auto r = def<onnx::ReshapeOp>(v)) {
    if (rankOf(r.getData()) != 2 || rankOf(v) != 2)
      break;
    v = r.getData();
  }
  return v;
}

bool isAxis(Value axes, int64_t axis, int64_t rank) {
  auto a = constantInts(axes);
  if (!a || a->size() != 1)
    return false;
  int64_t got = (*a)[0] < 0 ? (*a)[0] + rank : (*a)[0];
  return got == (axis < 0 ? axis + rank : axis);
}

std::optional<Projection> projection(Value v) {
  if (auto mm = def<onnx::MatMulOp>(v); mm && rankOf(mm.getB()) == 2 && isConstant(mm.getB()))
    return Projection{mm.getA(), mm.getB(), false};
  if (auto gemm = def<onnx::GemmOp>(v); gemm && !gemm.getTransA() &&
                                         isa<NoneType>(gemm.getC().getType()) &&
                                         gemm.getAlpha().convertToDouble() == 1.0 &&
                                         isConstant(gemm.getB()))
    return Projection{gemm.getA(), gemm.getB(), gemm.getTransB() != 0};
  return std::nullopt;
}

std::optional<ArrayRef<char>> constantBytes(Value v) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  return raise::rawBytes(attr);
}

Value transposedRows(OpBuilder &b, Location loc, Value w, int64_t r0, int64_t r1,
                     StringRef name) {
  auto type = cast<RankedTensorType>(w.getType());
  int64_t m = type.getRank() == 3 ? type.getDimSize(0) : 1;
  int64_t r = type.getDimSize(type.getRank() - 2), c = type.getDimSize(type.getRank() - 1);
  unsigned bytes = type.getElementTypeBitWidth() / 8;
  ArrayRef<char> raw = *constantBytes(w);
  std::vector<char> out(m * c * (r1 - r0) * bytes);
  for (int64_t e = 0; e < m; ++e)
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < c; ++j)
        std::memcpy(&out[((e * c + j) * (r1 - r0) + (i - r0)) * bytes],
                    &raw[((e * r + i) * c + j) * bytes], bytes);
  SmallVector<int64_t> shape;
  if (type.getRank() == 3)
    shape.push_back(m);
  shape.append({c, r1 - r0});
  return blobConstant(b, loc, shape, type.getElementType(), out, name);
}

std::optional<SharedExpert> sharedExpert(Value routed, Value x) {
  if (!routed.hasOneUse())
    return std::nullopt;
  // The routed sum reshaped back to the hidden states' shape first.
  auto unflatten = dyn_cast<onnx::ReshapeOp>(*routed.getUsers().begin());
  if (unflatten) {
    if (!unflatten.getReshaped().hasOneUse() || dimOf(unflatten.getReshaped(), -1) != dimOf(x, 1))
      return std::nullopt;
    routed = unflatten.getReshaped();
  }
  auto add = dyn_cast<onnx::AddOp>(*routed.getUsers().begin());
  if (!add || add.getC().getType() != routed.getType())
    return std::nullopt;
  Value other = add.getA() == routed ? add.getB() : add.getA();
  std::optional<Projection> scale;
  if (auto mul = def<onnx::MulOp>(other)) {
    for (auto [s, y] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
      if (auto sig = def<onnx::SigmoidOp>(s))
        if (auto p = projection(sig.getX()); p && dimOf(sig.getX(), -1) == 1) {
          scale = p;
          other = y;
          break;
        }
  }
  std::optional<GatedExpert> e = gatedExpert(other);
  if (!e)
    return std::nullopt;
  // The same tokens, flattened to [T, H] or (after an unflatten) not.
  Value root = stripFlattening(x);
  auto sameTokens = [&](Value v) {
    if (stripFlattening(v) == root)
      return true;
    auto flat = def<onnx::ReshapeOp>(root);
    return unflatten && flat && flat.getData() == v;
  };
  if (!sameTokens(e->gate.input) || (scale && !sameTokens(scale->input)))
    return std::nullopt;
  return SharedExpert{add, e->gate, e->up, e->down, scale, e->act, unflatten};
}

std::optional<GatedExpert> gatedExpert(Value y) {
  auto down = projection(y);
  auto gateTimesUp = down ? def<onnx::MulOp>(down->input) : onnx::MulOp();
  if (!gateTimesUp)
    return std::nullopt;
  for (auto [a, u] : {std::pair(gateTimesUp.getA(), gateTimesUp.getB()),
                      std::pair(gateTimesUp.getB(), gateTimesUp.getA())}) {
    auto act = matchActivation(a);
    auto g = act ? projection(act->first) : std::nullopt;
    auto up = projection(u);
    if (g && up && g->input == up->input)
      return GatedExpert{*g, *up, *down, act->second};
  }
  return std::nullopt;
}

Value stridedColumns(OpBuilder &b, Location loc, Value w, int64_t first, int64_t step,
                     int64_t count, StringRef name) {
  auto type = cast<RankedTensorType>(w.getType());
  int64_t cols = type.getShape().back(), outer = type.getNumElements() / cols;
  unsigned bytes = type.getElementTypeBitWidth() / 8;
  ArrayRef<char> raw = *constantBytes(w);
  std::vector<char> out(outer * count * bytes);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(&out[(o * count + j) * bytes], &raw[(o * cols + first + step * j) * bytes],
                  bytes);
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = count;
  return blobConstant(b, loc, shape, type.getElementType(), out, name);
}

Value asKN(OpBuilder &b, Location loc, const Projection &p, const std::string &name) {
  if (!p.transposed)
    return p.weight;
  return transposedRows(b, loc, p.weight, 0, dimOf(p.weight, 0), name);
}

bool hasStaticBytes(Value w) {
  auto type = dyn_cast<RankedTensorType>(w.getType());
  return type && type.hasStaticShape() && type.getElementTypeBitWidth() % 8 == 0 &&
         constantBytes(w).has_value();
}

int64_t constantK(onnx::TopKOp topk) {
  auto k = constantInts(topk.getK());
  return k && k->size() == 1 ? (*k)[0] : -1;
}

std::optional<Routing> matchRouting(onnx::TopKOp topk, Value scores, std::string &why) {
  int64_t topK = constantK(topk), experts = dimOf(topk.getX(), -1);
  if (topK < 1 || (!ShapedType::isDynamic(experts) && topK > experts) ||
      !isLastAxis(topk.getAxis(), 2) || topk.getLargest() != 1) {
    why = "the routing is not a TopK of the largest scores over the experts";
    return std::nullopt;
  }
  if (!scores) {
    why = "the expert outputs are not weighted by the TopK scores (or their renormalisation)";
    return std::nullopt;
  }
  Routing routing{Value(), Projection(), Activation(), topK, false};
  // [routed scale *] (values | values / sum): softmax routing weights by
  // TopK's values, sigmoid routing by the sigmoids at TopK's indices.
  auto [weights, scale] = routedScale(scores);
  auto div = def<onnx::DivOp>(weights);
  Value values = div ? div.getA() : weights;
  std::optional<bool> normalize = scoreNormalization(weights, values);
  if (!normalize) {
    why = "the expert outputs are not weighted by the TopK scores (or their renormalisation)";
    return std::nullopt;
  }
  routing.routedScale = scale;
  routing.normalize = *normalize;
  // gpt-oss: Softmax over TopK's values of the (biased) logits, which is
  // the softmax over all experts renormalised over the top k.
  if (auto sm = def<onnx::SoftmaxOp>(stripCasts(scores));
      sm && sm.getInput() == topk.getValues() && isLastAxis(sm.getAxis(), 2) && scale == 1.0) {
    std::optional<std::pair<Projection, Value>> r = biasedProjection(topk.getX());
    if (!r) {
      why = "the top-k logits are not the tokens times a constant router (plus a constant bias)";
      return std::nullopt;
    }
    routing.router = r->first;
    routing.routerBias = r->second;
    routing.normalize = true;
    return routing;
  }
  if (values == topk.getValues()) {
    // TopK's values of sigmoids are the sigmoids at its indices.
    if (auto sig = def<onnx::SigmoidOp>(topk.getX()))
      if (std::optional<Projection> r = projection(sig.getX())) {
        routing.router = *r;
        routing.sigmoid = true;
        return routing;
      }
    std::optional<Projection> r = router(topk);
    if (!r) {
      why = "the scores are not a softmax or sigmoids of the tokens times a constant router";
      return std::nullopt;
    }
    routing.router = *r;
    return routing;
  }
  if (!matchSigmoidRouting(topk, values, routing)) {
    why = "the scores are neither TopK's values of a softmax nor the sigmoids at its indices "
          "(with a constant bias, group-limited or not) of the tokens times a constant router";
    return std::nullopt;
  }
  return routing;
}

Value stackedKN(OpBuilder &b, Location loc, ArrayRef<Projection> ps, StringRef name) {
  auto first = cast<RankedTensorType>(ps.front().weight.getType());
  int64_t k = first.getDimSize(ps.front().transposed ? 1 : 0);
  int64_t n = first.getDimSize(ps.front().transposed ? 0 : 1);
  unsigned bytes = first.getElementTypeBitWidth() / 8;
  std::vector<char> out(ps.size() * k * n * bytes);
  for (auto [e, p] : llvm::enumerate(ps)) {
    ArrayRef<char> raw = *constantBytes(p.weight);
    char *dst = &out[e * k * n * bytes];
    if (!p.transposed) {
      std::memcpy(dst, raw.data(), k * n * bytes);
      continue;
    }
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(&dst[(i * n + j) * bytes], &raw[(j * k + i) * bytes], bytes);
  }
  return blobConstant(b, loc, {int64_t(ps.size()), k, n}, first.getElementType(), out, name);
}

void formMoE(IRRewriter &rewriter, Operation *combine, const Routing &routing,
             function_ref<std::array<Value, 3>(OpBuilder &, Location, const std::string &)>
                 expertWeights,
             const ExpertExtras &extras) {
  Value routed = combine->getResult(0);
  // A shared expert beside it (same activation, constant weights of the
  // tokens' type) joins the op; otherwise it stays as it is.
  std::optional<SharedExpert> shared = sharedExpert(routed, routing.x);
  if (shared && (shared->act != routing.act || !hasStaticBytes(shared->gate.weight) ||
                 !hasStaticBytes(shared->up.weight) || !hasStaticBytes(shared->down.weight) ||
                 (shared->scale && !hasStaticBytes(shared->scale->weight)) ||
                 shared->add.getC().getType() !=
                     (shared->unflatten ? shared->unflatten.getReshaped() : routed).getType()))
    shared.reset();

  Operation *replaced = shared ? shared->add.getOperation() : combine;
  rewriter.setInsertionPoint(replaced);
  Location loc = combine->getLoc();
  std::string base = nodeName(combine);
  Value routerHE = asKN(rewriter, loc, routing.router, base + ".router");
  auto [wg, wu, wd] = expertWeights(rewriter, loc, base);
  Value sg, su, sd, sgate;
  if (shared) {
    sg = asKN(rewriter, loc, shared->gate, base + ".shared_w_gate");
    su = asKN(rewriter, loc, shared->up, base + ".shared_w_up");
    sd = asKN(rewriter, loc, shared->down, base + ".shared_w_down");
    if (shared->scale)
      sgate = asKN(rewriter, loc, *shared->scale, base + ".shared_gate");
  }
  std::array<Value, 3> biases{};
  if (extras.biases)
    biases = extras.biases(rewriter, loc, base);
  auto op = MoEOp::create(rewriter, loc, routing.act, routing.x, routerHE, wg, wu, wd, sg, su, sd,
                          sgate, Value(), Value(), Value(), routing.selectionBias,
                          routing.routerBias, biases[0], biases[1], biases[2],
                          rewriter.getI64IntegerAttr(routing.topK),
                          rewriter.getBoolAttr(routing.normalize),
                          rewriter.getStringAttr(routing.sigmoid ? "sigmoid" : "softmax"),
                          rewriter.getI64IntegerAttr(routing.groups),
                          rewriter.getI64IntegerAttr(routing.topGroups),
                          rewriter.getF32FloatAttr(static_cast<float>(routing.routedScale)),
                          extras.swigluLimit ? rewriter.getF32FloatAttr(*extras.swigluLimit)
                                             : FloatAttr(),
                          rewriter.getF32FloatAttr(extras.swigluAlpha),
                          rewriter.getF32FloatAttr(extras.upOffset));
  Value old = replaced->getResult(0);
  Value result = op.getResult();
  if (shared && shared->unflatten) {
    // Reshaped back as the routed sum was.
    IRMapping map;
    map.map(shared->unflatten.getData(), result);
    result = rewriter.clone(*shared->unflatten, map)->getResult(0);
  }
  if (result.getType() != old.getType())
    result = tensor::CastOp::create(rewriter, loc, old.getType(), result);
  rewriter.replaceAllUsesWith(old, result);
}

/// [K, N] of a projection's weight.
static std::pair<int64_t, int64_t> kn(const Projection &p) {
  int64_t r = dimOf(p.weight, 0), c = dimOf(p.weight, 1);
  return p.transposed ? std::pair(c, r) : std::pair(r, c);
}

std::optional<std::string> formPerExpertMoE(IRRewriter &rewriter, Operation *combine,
                                            const Routing &routing,
                                            const ExpertProjections &experts) {
  Value x = routing.x;
  int64_t n = experts.gates.size();
  int64_t h = dimOf(x, 1), inter = kn(experts.gates.front()).second;
  for (int64_t e = 0; e < n; ++e) {
    const Projection &g = experts.gates[e], &u = experts.ups[e], &d = experts.downs[e];
    if (kn(g) != std::pair(h, inter) || kn(u) != std::pair(h, inter) ||
        kn(d) != std::pair(inter, h))
      return std::string("expert weight shapes do not agree");
    for (const Projection &p : {g, u, d})
      if (!hasStaticBytes(p.weight) || elementTypeOf(p.weight) != elementTypeOf(x))
        return std::string("expert weights are not constants of the tokens' type");
  }
  if (ShapedType::isDynamic(h) || kn(routing.router) != std::pair(h, n) ||
      !hasStaticBytes(routing.router.weight))
    return std::string("the router's weight is not a constant [hidden, experts]");
  Type resultType = combine->getResult(0).getType();
  if (resultType != x.getType() && !tensor::CastOp::areCastCompatible(x.getType(), resultType))
    return std::string("the result's type differs from the tokens'");
  formMoE(rewriter, combine, routing, [&](OpBuilder &b, Location loc, const std::string &base) {
    return std::array<Value, 3>{stackedKN(b, loc, experts.gates, base + ".w_gate"),
                                stackedKN(b, loc, experts.ups, base + ".w_up"),
                                stackedKN(b, loc, experts.downs, base + ".w_down")};
  });
  return std::nullopt;
}

} // namespace moe

bool raiseMoE(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto combine = cast<onnx::ReduceSumOp>(anchor);
  Value perToken = combine.getData();
  auto split = def<onnx::ReshapeOp>(perToken);
  if (!split || rankOf(perToken) != 3 || combine.getKeepdims() != 0 ||
      !isAxis(combine.getAxes(), 1, 3))
    return false;
  auto weighted = def<onnx::MulOp>(split.getData());
  if (!weighted)
    return false;
  // One side is the down projection of the experts, the other the scores.
  std::optional<ExpertProduct> down;
  Value scoreCol;
  for (auto [y, s] : {std::pair(weighted.getA(), weighted.getB()),
                      std::pair(weighted.getB(), weighted.getA())})
    if (auto p = expertProduct(y)) {
      down = p;
      scoreCol = s;
    }
  if (!down)
    return false;
  // From here on it is a mixture of experts: say why if it stays unraised.
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "moe", why);
    return false;
  };
  onnx::TopKOp topk = down->topk;
  auto scoreUnsq = def<onnx::UnsqueezeOp>(scoreCol);
  auto scoreFlat = scoreUnsq ? def<onnx::ReshapeOp>(scoreUnsq.getData()) : onnx::ReshapeOp();
  std::string why;
  std::optional<Routing> routing =
      matchRouting(topk, scoreFlat ? scoreFlat.getData() : Value(), why);
  if (!routing)
    return fail(why);
  int64_t topK = routing->topK;
  if (dimOf(perToken, 1) != topK)
    return fail("the expert outputs are not summed over the TopK slots");

  int64_t inter = down->in();
  std::optional<GateUp> gu = gateAndUp(down->input, topk, inter);
  if (!gu)
    return fail("gate and up are not expert products of the same tokens with a SiLU, GELU "
                "or ReLU gate (or gpt-oss's clamped SwiGLU)");
  Value x = repeatedTokens(gu->gate.input, topK);
  if (!x || stripFlattening(x) != stripFlattening(routing->router.input))
    return fail("the experts and the router do not read the same tokens");
  int64_t h = dimOf(x, 1), experts = dimOf(down->weight, 0);
  const ExpertProduct &g = gu->gate, &u = gu->up;
  if (ShapedType::isDynamic(h) || down->out() != h || dimOf(g.weight, 0) != experts ||
      dimOf(u.weight, 0) != experts || g.in() != h || u.in() != h ||
      dimOf(routing->router.weight, routing->router.transposed ? 0 : 1) != experts ||
      dimOf(routing->router.weight, routing->router.transposed ? 1 : 0) != h)
    return fail("expert or router weight shapes do not agree");
  if (!hasStaticBytes(g.weight) || !hasStaticBytes(u.weight) || !hasStaticBytes(down->weight) ||
      !hasStaticBytes(routing->router.weight) || elementTypeOf(g.weight) != elementTypeOf(x))
    return fail("expert weights are not constants of the tokens' type");
  bool biased = g.bias || u.bias || down->bias;
  if (biased && (!g.bias || !u.bias || !down->bias || !hasStaticBytes(g.bias) ||
                 !hasStaticBytes(u.bias) || !hasStaticBytes(down->bias) ||
                 elementTypeOf(g.bias) != elementTypeOf(x)))
    return fail("some expert products have a bias and others not, or one is not a constant");
  if (combine.getReduced().getType() != x.getType() &&
      !tensor::CastOp::areCastCompatible(x.getType(), combine.getReduced().getType()))
    return fail("the result's type differs from the tokens'");

  routing->x = x;
  routing->act = gu->act;
  // Expert e's [in, count] slice of a product's weight: columns first,
  // first + step, ... of [E, in, out], or rows [first, first + count) of
  // [E, out, in] transposed.
  auto slice = [&](OpBuilder &b, Location loc, const ExpertProduct &p, int64_t first,
                   int64_t step, int64_t count, const std::string &name) {
    return p.rows ? stridedColumns(b, loc, p.weight, first, step, count, name)
                  : transposedRows(b, loc, p.weight, first, first + count, name);
  };
  ExpertExtras extras;
  if (gu->clamped) {
    extras.swigluLimit = gu->clamped->limit;
    extras.swigluAlpha = gu->clamped->alpha;
    extras.upOffset = gu->clamped->offset;
  }
  if (biased)
    extras.biases = [&](OpBuilder &b, Location loc, const std::string &base) {
      return std::array<Value, 3>{
          stridedColumns(b, loc, g.bias, gu->gateFirst, gu->step, inter, base + ".b_gate"),
          stridedColumns(b, loc, u.bias, gu->upFirst, gu->step, inter, base + ".b_up"),
          down->bias};
    };
  formMoE(
      rewriter, combine, *routing,
      [&](OpBuilder &b, Location loc, const std::string &base) {
        return std::array<Value, 3>{
            slice(b, loc, g, gu->gateFirst, gu->step, inter, base + ".w_gate"),
            slice(b, loc, u, gu->upFirst, gu->step, inter, base + ".w_up"),
            slice(b, loc, *down, 0, 1, h, base + ".w_down")};
      },
      extras);
  log.formed("moe");
  return true;
}

} // namespace xfmr::raise
