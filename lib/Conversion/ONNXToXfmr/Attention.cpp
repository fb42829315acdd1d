//===- Attention.cpp - raise scaled dot-product attention -----------------===//
//
// Part of xfmr.
//
// Anchored at a Softmax over the last axis, walks up the scores:
//   Softmax(mask ops(scale ops(MatMul(q, Transpose(k))))) · v
// where the scale is Div/Mul by a constant (also folded into q), masks are
// added (float bias) or applied with Where(keep, scores, -large), and K's
// transpose may come from any layout permutation (GPT-2's [0,2,3,1], torch
// MHA's [1,2,0]). GQA/MQA: K and V given through Hugging Face's repeat_kv
// (Reshape(Expand(Unsqueeze(kv, 2)))) are read in place by the op. Rank-3
// attention (torch MHA's [batch*heads, S, D]) becomes one head per batch.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>

using namespace mlir;

namespace xfmr::raise {
namespace {

/// A Where fill value that masks (isMaskingFill: <= -1e4, which underflows
/// the f32 softmax; 16-bit models fill with their lowest value, below it).
bool masksScores(std::optional<double> fill, Type) {
  return fill && isMaskingFill(*fill);
}

/// Float-to-float Cast (HF's softmax in f32 of f16 scores, and back).
bool isFloatCast(Operation *op) {
  auto cast = dyn_cast_or_null<onnx::CastOp>(op);
  return cast && isa<FloatType>(elementTypeOf(cast.getInput())) &&
         isa<FloatType>(elementTypeOf(cast.getOutput()));
}

/// Whether `v` reaches a non-constant MatMul through score transforms.
bool leadsToScores(Value v, int depth = 0) {
  Operation *op = v ? v.getDefiningOp() : nullptr;
  if (!op || depth > 8)
    return false;
  if (auto mm = dyn_cast<onnx::MatMulOp>(op))
    return rankOf(mm.getY()) >= 3 && !isConstant(mm.getA()) && !isConstant(mm.getB());
  if (isa<onnx::AddOp, onnx::MulOp>(op))
    return leadsToScores(op->getOperand(0), depth + 1) ||
           leadsToScores(op->getOperand(1), depth + 1);
  if (isa<onnx::DivOp, onnx::TanhOp>(op) || isFloatCast(op))
    return leadsToScores(op->getOperand(0), depth + 1);
  if (auto where = dyn_cast<onnx::WhereOp>(op))
    return leadsToScores(where.getX(), depth + 1) || leadsToScores(where.getY(), depth + 1);
  return false;
}

struct Scores {
  onnx::MatMulOp qk;
  double scale = 1.0;
  std::optional<double> softcap; ///< c of c * tanh(scores / c)
  SmallVector<Value> bias; ///< additive masks
  SmallVector<std::pair<Value, bool>> keep; ///< (condition, negated)
};

/// Walks from the softmax input up to Q·Kᵀ, collecting scale and masks.
LogicalResult peelScores(Value s, Scores &out, std::string &why) {
  bool scaled = false;
  for (int steps = 0; steps < 16; ++steps) {
    Operation *op = s.getDefiningOp();
    if (auto mm = dyn_cast_or_null<onnx::MatMulOp>(op)) {
      out.qk = mm;
      return success();
    }
    if (!op || !s.hasOneUse()) {
      why = "an intermediate score tensor has other users";
      return failure();
    }
    if (auto add = dyn_cast<onnx::AddOp>(op)) {
      bool a = leadsToScores(add.getA()), b = leadsToScores(add.getB());
      if (a == b) {
        why = "cannot tell the scores from the mask in an Add";
        return failure();
      }
      if (scaled) {
        why = "the mask is added before the scores are scaled";
        return failure();
      }
      out.bias.push_back(a ? add.getB() : add.getA());
      s = a ? add.getA() : add.getB();
      continue;
    }
    if (isa<onnx::DivOp, onnx::MulOp>(op)) {
      Value x = op->getOperand(0), c = op->getOperand(1);
      if (isa<onnx::MulOp>(op) && scalarValue(x))
        std::swap(x, c);
      auto factor = scalarValue(c);
      if (!factor || *factor == 0) {
        why = "scores are scaled by a non-constant";
        return failure();
      }
      out.scale *= isa<onnx::DivOp>(op) ? 1.0 / *factor : *factor;
      scaled = true;
      s = x;
      continue;
    }
    if (isFloatCast(op)) {
      s = op->getOperand(0);
      continue;
    }
    if (isa<onnx::TanhOp>(op)) {
      // Soft-capping, c * tanh(x / c): the factor met above the Tanh is c,
      // the ones below it scale x (xfmr.attention's scale is x's times c).
      if (out.softcap || out.scale <= 0) {
        why = "the scores pass through a Tanh that is not one soft-cap c * tanh(x / c)";
        return failure();
      }
      out.softcap = out.scale;
      out.scale = 1.0;
      s = op->getOperand(0);
      continue;
    }
    if (auto where = dyn_cast<onnx::WhereOp>(op)) {
      auto y = scalarValue(where.getY()), x = scalarValue(where.getX());
      Type scoreType = elementTypeOf(where.getOutput());
      if (masksScores(y, scoreType) && leadsToScores(where.getX())) {
        out.keep.push_back({where.getCondition(), false});
        s = where.getX();
        continue;
      }
      if (masksScores(x, scoreType) && leadsToScores(where.getY())) {
        out.keep.push_back({where.getCondition(), true});
        s = where.getY();
        continue;
      }
      why = "a Where on the scores does not mask with a very negative constant "
            "(<= -1e4, which underflows the f32 softmax)";
      return failure();
    }
    why = ("the scores pass through " + op->getName().getStringRef()).str();
    return failure();
  }
  why = "too many ops between the softmax and Q·Kᵀ";
  return failure();
}

Value repeatKVSource(Value v);

/// K or V given through repeat_kv: Reshape(Expand(Unsqueeze(kv, [2]),
/// [B, Hkv, n_rep, S, D]), [B, Hkv * n_rep, S, D]). Returns kv. Exporters
/// also read the repeated tensor's shape (HF slices the mask to its length):
/// those Shape ops are rebuilt from kv's shape so the repetition dies.
Value peelRepeatKV(RewriterBase &rewriter, Value v) {
  Value kv = repeatKVSource(v);
  if (kv == v)
    return v;
  int64_t rep = dimOf(v, 1) / dimOf(kv, 1);
  for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
    auto shape = dyn_cast<onnx::ShapeOp>(user);
    if (!shape || shape.getEndAttr() || shape.getStart() != 0)
      continue;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(shape);
    Location loc = shape.getLoc();
    auto type = shape.getShape().getType();
    Value base = onnx::ShapeOp::create(rewriter, loc, type, kv, nullptr,
                                       rewriter.getI64IntegerAttr(0));
    Value scaled = onnx::MulOp::create(rewriter, loc, type, base,
                                       i64Constant(rewriter, loc, {1, rep, 1, 1}));
    rewriter.replaceOp(shape, scaled);
  }
  return kv;
}

Value repeatKVSource(Value v) {
  auto reshape = def<onnx::ReshapeOp>(v);
  auto expand = reshape ? def<onnx::ExpandOp>(reshape.getData()) : onnx::ExpandOp();
  auto unsq = expand ? def<onnx::UnsqueezeOp>(expand.getInput()) : onnx::UnsqueezeOp();
  auto axes = unsq ? constantInts(unsq.getAxes()) : std::nullopt;
  if (!axes || *axes != SmallVector<int64_t>{2} || rankOf(unsq.getData()) != 4)
    return v;
  Value kv = unsq.getData();
  auto expanded = cast<RankedTensorType>(expand.getOutput().getType());
  int64_t heads = dimOf(kv, 1), repeated = dimOf(v, 1);
  // The expand cannot grow dim 1 unless it is 1 (then growing it or dim 2
  // gives the same copies of the one head, multi-query attention): a
  // dynamic expanded dim 1 is heads.
  int64_t expandedHeads = expanded.getDimSize(1);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(repeated) || repeated % heads ||
      (expandedHeads != heads && !ShapedType::isDynamic(expandedHeads)) ||
      dimOf(v, 3) != dimOf(kv, 3) || ShapedType::isDynamic(dimOf(kv, 3)))
    return v;
  // Dynamic exports compute the expand shape at run time (torch's -1
  // handling), so n_rep may only be known from the reshape: dims 1 and 4
  // are fixed and dim 2 is the only one the expand can grow from 1.
  int64_t rep = expanded.getDimSize(2);
  if (!ShapedType::isDynamic(rep) && rep * heads != repeated)
    return v;
  return kv;
}

/// Static broadcast shape of two ranked types (dynamic where unknown).
RankedTensorType broadcastType(Value a, Value b, Type element) {
  auto ta = cast<RankedTensorType>(a.getType()), tb = cast<RankedTensorType>(b.getType());
  int64_t rank = std::max(ta.getRank(), tb.getRank());
  SmallVector<int64_t> shape(rank, 1);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t da = i - (rank - ta.getRank()) >= 0 ? ta.getDimSize(i - (rank - ta.getRank())) : 1;
    int64_t db = i - (rank - tb.getRank()) >= 0 ? tb.getDimSize(i - (rank - tb.getRank())) : 1;
    shape[i] = da == 1 ? db : (db == 1 ? da : (ShapedType::isDynamic(da) ? db : da));
  }
  return RankedTensorType::get(shape, element);
}

/// One mask operand for the op from what the walk collected.
Value combineMasks(OpBuilder &b, Location loc, const Scores &scores, Type scoreType) {
  Value keep;
  for (auto [cond, negated] : scores.keep) {
    Value c = cond;
    if (negated)
      c = onnx::NotOp::create(b, loc, c.getType(), c);
    keep = keep ? onnx::AndOp::create(b, loc, broadcastType(keep, c, b.getI1Type()), keep, c)
                      .getResult()
                : c;
  }
  Value bias;
  for (Value m : scores.bias)
    bias = bias ? onnx::AddOp::create(b, loc, broadcastType(bias, m, scoreType), bias, m)
                      .getResult()
                : m;
  if (!keep || !bias)
    return keep ? keep : bias;
  auto lowest = floatConstant(b, loc, RankedTensorType::get({}, scoreType),
                              APFloat::getLargest(cast<FloatType>(scoreType).getFloatSemantics(),
                                                  /*Negative=*/true)
                                  .convertToDouble());
  return onnx::WhereOp::create(b, loc, broadcastType(keep, bias, scoreType), keep, bias,
                               lowest);
}

int64_t softmaxAxis(onnx::SoftmaxOp softmax) {
  if (auto axis = softmax->getAttrOfType<IntegerAttr>("axis"))
    return axis.getInt();
  auto module = softmax->getParentOfType<ModuleOp>();
  auto opsets = module ? module->getAttrOfType<DictionaryAttr>("onnx.opset_import")
                       : DictionaryAttr();
  auto opset = opsets ? dyn_cast_or_null<IntegerAttr>(opsets.get("ai.onnx")) : IntegerAttr();
  return opset && opset.getInt() < 13 ? 1 : -1;
}

/// gpt-oss's attention sinks: the Softmax is over Concat(scores, sinks) on
/// the key axis (less its row max, which changes nothing), and a Slice drops
/// the sink column before the product with V. The sinks are a constant with
/// one logit per query head ([1, Hq, 1, 1], expanded to [B, Hq, Sq, 1]).
struct SinkForm {
  Value scores; ///< the scores beside the sink column
  Value probs;  ///< the Slice: the keys' probabilities
  SmallVector<float> sinks;
};

bool isConstantInts(Value v, ArrayRef<int64_t> expected) {
  auto values = constantInts(v);
  return values && llvm::equal(*values, expected);
}

std::optional<SinkForm> matchSinks(onnx::SoftmaxOp softmax) {
  Value in = softmax.getInput();
  int64_t rank = rankOf(in);
  if (rank != 4)
    return std::nullopt;
  if (auto sub = def<onnx::SubOp>(in)) {
    auto max = def<onnx::ReduceMaxOp>(sub.getB());
    if (!max || max.getData() != sub.getA() || max.getKeepdims() != 1 ||
        !isLastAxisOnly(max.getAxes(), rank))
      return std::nullopt;
    in = sub.getA();
  }
  auto concat = def<onnx::ConcatOp>(in);
  if (!concat || concat.getInputs().size() != 2 || !isLastAxis(concat.getAxis(), rank))
    return std::nullopt;
  Value sink = concat.getInputs()[1];
  if (auto expand = def<onnx::ExpandOp>(sink))
    sink = expand.getInput();
  auto values = floatValues(sink);
  if (!values || rankOf(sink) != rank || dimOf(sink, 0) != 1 || dimOf(sink, 2) != 1 ||
      dimOf(sink, 3) != 1)
    return std::nullopt;
  // The Slice keeps keys [0, -1) of the last axis: one sink column, which
  // the product with V (as many rows as keys) implies.
  auto slice = soleUserOf<onnx::SliceOp>(softmax.getOutput());
  auto noneOr = [](Value v, ArrayRef<int64_t> expected) {
    return isa<NoneType>(v.getType()) || isConstantInts(v, expected);
  };
  if (!slice || !isConstantInts(slice.getStarts(), {0}) ||
      !isConstantInts(slice.getEnds(), {-1}) ||
      !(isConstantInts(slice.getAxes(), {-1}) || isConstantInts(slice.getAxes(), {rank - 1})) ||
      !noneOr(slice.getSteps(), {1}))
    return std::nullopt;
  return SinkForm{concat.getInputs()[0], slice.getOutput(), std::move(*values)};
}

} // namespace

bool raiseAttention(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto softmax = cast<onnx::SoftmaxOp>(anchor);
  Value probs = softmax.getOutput();
  int64_t rank = rankOf(probs);
  std::optional<SinkForm> sinks = matchSinks(softmax);
  Value scoresIn = sinks ? sinks->scores : softmax.getInput();
  if ((rank != 3 && rank != 4) || !isLastAxis(softmaxAxis(softmax), rank) ||
      !leadsToScores(scoresIn))
    return false; // not a candidate
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "attention", why);
    return false;
  };
  Scores scores;
  std::string why;
  if (failed(peelScores(scoresIn, scores, why)))
    return fail(why);
  Value probsUsed = sinks ? sinks->probs : probs;
  if (Operation *user = soleUser(probsUsed); isFloatCast(user))
    probsUsed = user->getResult(0); // softmax in f32, back to the model's type
  auto pv = soleUserOf<onnx::MatMulOp>(probsUsed);
  if (!pv || pv.getA() != probsUsed)
    return fail("the probabilities are not multiplied by V");
  if (!scores.qk->hasOneUse())
    return fail("Q·Kᵀ has other users");

  Value q = scores.qk.getA();
  if (isa_and_nonnull<onnx::DivOp, onnx::MulOp>(q.getDefiningOp()) && q.hasOneUse()) {
    Operation *op = q.getDefiningOp();
    if (auto c = scalarValue(op->getOperand(1)); c && *c != 0) {
      scores.scale *= isa<onnx::DivOp>(op) ? 1.0 / *c : *c;
      q = op->getOperand(0);
    }
  }
  auto kT = def<onnx::TransposeOp>(scores.qk.getB());
  if (!kT)
    return fail("K is not transposed by a Transpose");
  SmallVector<int64_t> perm;
  if (auto permAttr = kT.getPerm())
    for (Attribute a : *permAttr)
      perm.push_back(cast<IntegerAttr>(a).getInt());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);

  Location loc = pv.getLoc();
  rewriter.setInsertionPoint(pv);
  Value k = kT.getData();
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    k = transpose(rewriter, loc, k, perm);
  Value v = pv.getB();
  Type scoreType = elementTypeOf(scores.qk.getY());
  // A keep mask that is a window of a lower-triangular buffer is `causal`.
  std::optional<Value> causalRowStart;
  for (auto it = scores.keep.begin(); it != scores.keep.end(); ++it)
    if (!it->second)
      if ((causalRowStart = causalKeepOffset(it->first, dimOf(scores.qk.getY(), -2),
                                             dimOf(scores.qk.getY(), -1)))) {
        scores.keep.erase(it);
        break;
      }
  Value mask = combineMasks(rewriter, loc, scores, scoreType);
  if (rank == 3) {
    q = unsqueeze(rewriter, loc, q, 1);
    k = unsqueeze(rewriter, loc, k, 1);
    v = unsqueeze(rewriter, loc, v, 1);
    if (mask && rankOf(mask) == 3)
      mask = unsqueeze(rewriter, loc, mask, 1);
  }
  k = peelRepeatKV(rewriter, k);
  v = peelRepeatKV(rewriter, v);
  // Head counts and sizes that shape inference left dynamic, derived from
  // the projections' reshapes (asserted at run time once the op is formed).
  SmallVector<int64_t> qShape = splitShape(q, {1, 3}), kShape = splitShape(k, {1, 3}),
                       vShape = splitShape(v, {1, 3});
  int64_t heads = qShape[1], kvHeads = kShape[1];
  if (ShapedType::isDynamic(heads))
    return fail("the query heads are dynamic (" + describeDim(q, 1) + ")");
  if (ShapedType::isDynamic(kvHeads))
    return fail("the K/V heads are dynamic (" + describeDim(k, 1) + ")");
  if (heads % kvHeads || vShape[1] != kvHeads)
    return fail("the K/V heads do not divide the query heads");
  if (mask && (rankOf(mask) < 2 || rankOf(mask) > 4))
    return fail("the mask has rank outside 2..4");
  if (sinks && static_cast<int64_t>(sinks->sinks.size()) != heads)
    return fail("the attention sinks are not one per query head");
  std::string where = nodeName(anchor);
  q = withStaticDims(rewriter, loc, q, qShape, where + ": the query");
  k = withStaticDims(rewriter, loc, k, kShape, where + ": the key");
  v = withStaticDims(rewriter, loc, v, vShape, where + ": the value");
  auto qType = cast<RankedTensorType>(q.getType());
  auto resultType = qType.clone({dimOf(q, 0), heads, dimOf(q, 2), dimOf(v, 3)});
  auto op = AttentionOp::create(rewriter, loc, resultType, q, k, v, mask,
                                rewriter.getI64IntegerAttr(heads),
                                rewriter.getI64IntegerAttr(kvHeads),
                                rewriter.getF32FloatAttr(scores.softcap
                                                             ? scores.scale * *scores.softcap
                                                             : scores.scale),
                                rewriter.getBoolAttr(causalRowStart.has_value()),
                                scores.softcap ? rewriter.getF32FloatAttr(*scores.softcap)
                                               : FloatAttr(),
                                sinks ? rewriter.getDenseF32ArrayAttr(sinks->sinks)
                                      : DenseF32ArrayAttr());
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler silence(op.getContext(), [](Diagnostic &) { return success(); });
    verified = mlir::verify(op);
  }
  if (failed(verified)) {
    rewriter.eraseOp(op);
    return fail("the formed op does not verify");
  }
  if (causalRowStart) {
    rewriter.setInsertionPoint(op);
    if (*causalRowStart)
      assertCausalOffset(rewriter, loc, op, *causalRowStart,
                       nodeName(pv) + ": the causal window does not start at the key/query "
                                      "length difference");
    rewriter.setInsertionPointAfter(op);
    log.formed("causal_mask");
  }
  Value result = op.getResult();
  if (rank == 3)
    result = squeeze(rewriter, loc, result, 1);
  rewriter.replaceAllUsesWith(pv.getY(), result);
  log.formed("attention");
  return true;
}

bool raiseAttention23(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto attn = cast<onnx::AttentionOp>(anchor);
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "attention", why);
    return false;
  };
  Value q = attn.getQ(), k = attn.getK(), v = attn.getV(), mask = attn.getAttnMask();
  auto present = [](Value x) { return x && !isa<NoneType>(x.getType()); };
  if (rankOf(q) != 4 || rankOf(k) != 4 || rankOf(v) != 4)
    return fail("3-D (packed heads) inputs are not raised yet");
  if (present(attn.getPastKey()) || present(attn.getPastValue()) ||
      present(attn.getNonpadKvSeqlen()))
    return fail("past_key/past_value/nonpad_kv_seqlen inputs are not raised yet");
  for (Value extra : anchor->getResults().drop_front())
    if (!extra.use_empty())
      return fail("present or qk_matmul outputs are used");
  // softcap > 0 caps the scaled scores before the mask (onnxruntime 1.32
  // and ONNX's reference agree: scripts/onnx-conformance.py's softcap cases).
  FloatAttr softcap = positiveSoftcap(rewriter, attn.getSoftcap());
  int64_t d = dimOf(q, 3), heads = dimOf(q, 1), kvHeads = dimOf(k, 1);
  if (ShapedType::isDynamic(heads))
    return fail("the query heads are dynamic (" + describeDim(q, 1) + ")");
  if (ShapedType::isDynamic(kvHeads))
    return fail("the K/V heads are dynamic (" + describeDim(k, 1) + ")");
  if (heads % kvHeads)
    return fail("the K/V heads do not divide the query heads");
  double scale;
  if (auto attr = attn.getScaleAttr())
    scale = attr.getValueAsDouble();
  else if (!ShapedType::isDynamic(d))
    scale = 1.0 / std::sqrt(static_cast<double>(d));
  else
    return fail("no scale and a dynamic head size");
  if (present(mask)) {
    if (rankOf(mask) < 2 || !(isa<FloatType>(elementTypeOf(mask)) ||
                              elementTypeOf(mask).isInteger(1)))
      return fail("the mask is not a float or bool tensor of rank 2..4");
    if (dimOf(mask, -1) != dimOf(k, 2) || ShapedType::isDynamic(dimOf(mask, -1)))
      return fail("the mask is not as long as the keys (padded masks are not raised)");
  } else {
    mask = nullptr;
  }
  Location loc = attn.getLoc();
  rewriter.setInsertionPoint(attn);
  bool causal = attn.getIsCausal() != 0;
  // ONNX aligns the causal triangle top-left, xfmr bottom-right: the same
  // when there are as many queries as keys, which is checked at run time
  // when the lengths are not static.
  if (causal && (ShapedType::isDynamic(dimOf(q, 2)) || dimOf(q, 2) != dimOf(k, 2))) {
    if (!ShapedType::isDynamic(dimOf(q, 2)) && !ShapedType::isDynamic(dimOf(k, 2)))
      return fail("is_causal with fewer queries than keys (top-left alignment)");
    Value sq = tensor::DimOp::create(rewriter, loc, q, 2);
    Value skv = tensor::DimOp::create(rewriter, loc, k, 2);
    Value same = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, sq, skv);
    cf::AssertOp::create(rewriter, loc, same,
                         nodeName(attn) + ": is_causal needs as many queries as keys");
  }
  auto resultType = cast<RankedTensorType>(attn.getY().getType());
  auto op = AttentionOp::create(rewriter, loc, resultType, q, k, v, mask,
                                rewriter.getI64IntegerAttr(heads),
                                rewriter.getI64IntegerAttr(kvHeads),
                                rewriter.getF32FloatAttr(scale), rewriter.getBoolAttr(causal),
                                softcap, DenseF32ArrayAttr());
  rewriter.replaceAllUsesWith(attn.getY(), op.getResult());
  log.formed("attention");
  return true;
}

} // namespace xfmr::raise
