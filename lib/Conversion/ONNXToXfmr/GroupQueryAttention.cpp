//===- GroupQueryAttention.cpp - com.microsoft GroupQueryAttention --------===//
//
// Part of xfmr.
//
// onnxruntime-genai's model builder writes every decoder attention as one
// com.microsoft GroupQueryAttention: packed QKV (or separate Q, K, V) of
// shape [B, S, heads * D], past K/V [B, Hkv, P, D] (BNSH), `seqlens_k`
// (per batch row, its total length - 1), `total_sequence_length`, and,
// with do_rotary, cos/sin caches [max_pos, R] applied inside the op. It is
// raised to the ops the rest of xfmr works on:
//
//   q, k, v  = split and [B, S, H, D] -> [B, H, S, D]
//   pos      = Range(P, P + S)                 (the token positions)
//   q, k     = xfmr.rope(q | k, cos_cache[pos], sin_cache[pos])
//   K, V     = Concat(past, k | v, axis 2)      -> present_key | present_value
//   keep     = key <= seqlens_k[b] (and key >= pos - W for a local window W)
//   out      = xfmr.attention(q, K, V, keep) {causal}
//
// onnxruntime places a batch row's new tokens after its own seqlens_k + 1 - S
// past tokens; the Concat form places them after all P. The two agree when
// the past is empty (first prompt, right-padded rows) or when every row's
// seqlens_k + 1 == P + S (no padding): the raised graph asserts that at run
// time, and total_sequence_length == P + S. Paged step functions
// (xfmr-paged-kv) then see a Hugging Face-like with-past graph: positions
// from Range(past, past + S), Concat(past, new), a padding mask.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;

namespace xfmr::raise {
namespace {

bool present(Value v) { return v && !isa<NoneType>(v.getType()); }

RankedTensorType i64Type(ArrayRef<int64_t> shape, MLIRContext *ctx) {
  return RankedTensorType::get(shape, IntegerType::get(ctx, 64));
}

Value scalarI64(OpBuilder &b, Location loc, int64_t v) {
  auto type = i64Type({}, b.getContext());
  return makeConstant(b, loc, DenseIntElementsAttr::get(type, ArrayRef<int64_t>{v}));
}

/// Dim `d` of `x` as a 0-D i64 tensor (Gather(Shape(x), d)): xfmr-paged-kv
/// follows this shape arithmetic back to the tokens.
Value dimScalar(OpBuilder &b, Location loc, Value x, int64_t d) {
  Value shape = onnx::ShapeOp::create(b, loc, i64Type({rankOf(x)}, b.getContext()), x, nullptr,
                                      b.getI64IntegerAttr(0));
  return onnx::GatherOp::create(b, loc, i64Type({}, b.getContext()), shape, scalarI64(b, loc, d),
                                b.getI64IntegerAttr(0));
}

/// [B, S, H * D] -> [B, H, S, D].
Value toHeads(OpBuilder &b, Location loc, Value x, int64_t heads, int64_t d) {
  auto type = cast<RankedTensorType>(x.getType());
  auto split = type.clone({type.getDimSize(0), type.getDimSize(1), heads, d});
  Value r = onnx::ReshapeOp::create(b, loc, split, x, i64Constant(b, loc, {0, 0, heads, d}),
                                    b.getI64IntegerAttr(0));
  return transpose(b, loc, r, {0, 2, 1, 3});
}

/// Asserts per batch row at run time that onnxruntime's layout of each
/// row's tokens equals the Concat layout (see the file comment).
void assertSameLayout(OpBuilder &b, Location loc, Value seqlens, Value past, Value newTokens,
                      const std::string &where) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value p = tensor::DimOp::create(b, loc, past, 2);
  Value s = tensor::DimOp::create(b, loc, newTokens, 2);
  Value total = arith::AddIOp::create(b, loc, p, s);
  Value firstPrompt = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, p, zero);
  Value rows = tensor::DimOp::create(b, loc, seqlens, 0);
  scf::ForOp::create(b, loc, zero, rows, one, ValueRange{},
                     [&](OpBuilder &nb, Location l, Value i, ValueRange) {
                       Value len = tensor::ExtractOp::create(nb, l, seqlens, i);
                       len = arith::IndexCastOp::create(nb, l, nb.getIndexType(), len);
                       len = arith::AddIOp::create(nb, l, len, one);
                       Value full = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, len,
                                                          total);
                       Value ok = arith::OrIOp::create(nb, l, firstPrompt, full);
                       cf::AssertOp::create(
                           nb, l, ok,
                           where + ": after the first prompt, every batch row's seqlens_k + 1 "
                                   "must equal past + new tokens (padded rows with a past are "
                                   "not supported)");
                       scf::YieldOp::create(nb, l);
                     });
}

/// `past` [B, Hkv, P, D] typed with the head dimensions the op fixes. The
/// builder of onnxruntime-genai >= 0.12 names the head size of its past and
/// present inputs symbolically (kv_cache_dim): the only consistent value is
/// the one derived from the query, so a symbolic Hkv or D is asserted at run
/// time to equal it and cast to the static type.
Value withHeadDims(OpBuilder &b, Location loc, Value past, int64_t kvHeads, int64_t d,
                   const std::string &where) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(past.getType()).getShape());
  shape[1] = kvHeads;
  shape[3] = d;
  return withStaticDims(b, loc, past, shape, [&](int64_t axis, int64_t want) {
    return where + ": past " + (axis == 1 ? "K/V heads" : "head size") + " must be " +
           std::to_string(want) + " (from the query and num_heads/kv_num_heads)";
  });
}

/// Whether the static dimension `dim` of `v` is known and differs from `want`.
bool conflicts(Value v, unsigned dim, int64_t want) {
  int64_t got = dimOf(v, dim);
  return !ShapedType::isDynamic(got) && got != want;
}

/// head_sink (one logit per query head) or smooth_softmax (an extra 1 in
/// each row's denominator: every sink 0) as xfmr.attention's sinks; both
/// measured against onnxruntime 1.32 (scripts/check-gqa-features.py).
DenseF32ArrayAttr sinksOf(OpBuilder &b, onnx::MsGroupQueryAttentionOp gqa) {
  if (present(gqa.getHeadSink()))
    return b.getDenseF32ArrayAttr(*floatValues(gqa.getHeadSink()));
  if (static_cast<int64_t>(gqa.getSmoothSoftmax()) > 0)
    return b.getDenseF32ArrayAttr(SmallVector<float>(gqa.getNumHeads(), 0.0f));
  return DenseF32ArrayAttr();
}

/// Why an op using a feature xfmr.attention lacks is left alone, if it is.
std::optional<StringRef> unsupportedFeature(onnx::MsGroupQueryAttentionOp gqa) {
  if (present(gqa.getKScale()) || present(gqa.getVScale()) || gqa.getKQuantType() != "NONE" ||
      gqa.getVQuantType() != "NONE")
    return StringRef("a quantized KV cache (k_quant_type/v_quant_type) is not raised yet");
  if (present(gqa.getQNormWeight()) || present(gqa.getKNormWeight()))
    return StringRef("QK-norm inside GroupQueryAttention is not raised yet");
  if (present(gqa.getQuerySeqlens()) || gqa.getCausal() != 1)
    return StringRef("non-causal attention or query_seqlens is not supported");
  if (present(gqa.getHeadSink())) {
    auto sinks = floatValues(gqa.getHeadSink());
    if (!sinks || static_cast<int64_t>(sinks->size()) != gqa.getNumHeads())
      return StringRef("head_sink is not a constant with one value per query head");
  }
  if (gqa.getQkOutput() != 0 || present(gqa.getOutputQk()))
    return StringRef("the QK output is requested");
  if (present(gqa.getAttentionBias()))
    return StringRef("attention_bias is not raised yet");
  return std::nullopt;
}

} // namespace

bool raiseGroupQueryAttention(Operation *anchor, IRRewriter &rewriter, RaiseLog &log) {
  auto gqa = cast<onnx::MsGroupQueryAttentionOp>(anchor);
  auto fail = [&](const Twine &why) {
    log.unfused(anchor, "attention", why);
    return false;
  };
  Value query = gqa.getQuery(), key = gqa.getKey(), value = gqa.getValue();
  Value pastKey = gqa.getPastKey(), pastValue = gqa.getPastValue();
  int64_t heads = gqa.getNumHeads(), kvHeads = gqa.getKvNumHeads();
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads)
    return fail("K/V heads do not divide the query heads");
  if (rankOf(query) != 3)
    return fail("query is not [batch, sequence, hidden]");
  if (present(key) != present(value))
    return fail("key without value (or value without key)");
  if (!present(pastKey) || !present(pastValue) || rankOf(pastKey) != 4 || rankOf(pastValue) != 4)
    return fail("past_key/past_value are not [batch, kv_heads, past, head_size] inputs");
  if (std::optional<StringRef> why = unsupportedFeature(gqa))
    return fail(*why);
  if (rankOf(gqa.getSeqlensK()) != 1)
    return fail("seqlens_k is not [batch]");
  int64_t hidden = dimOf(query, 2);
  if (ShapedType::isDynamic(hidden))
    return fail("the query's hidden size is dynamic");
  int64_t d = present(key) ? hidden / heads : hidden / (heads + 2 * kvHeads);
  if (d * (present(key) ? heads : heads + 2 * kvHeads) != hidden ||
      conflicts(pastKey, 3, d) || conflicts(pastKey, 1, kvHeads) ||
      conflicts(pastValue, 3, d) || conflicts(pastValue, 1, kvHeads))
    return fail("head sizes of query and past_key disagree");
  bool rotary = gqa.getDoRotary().value_or(0) != 0;
  Value cosCache = gqa.getCosCache(), sinCache = gqa.getSinCache();
  if (rotary && (!present(cosCache) || !present(sinCache) || rankOf(cosCache) != 2 ||
                 dimOf(cosCache, 1) != dimOf(sinCache, 1) || ShapedType::isDynamic(dimOf(cosCache, 1)) ||
                 2 * dimOf(cosCache, 1) > d))
    return fail("do_rotary without [max_position, rotary_dim / 2] cos/sin caches");

  Location loc = gqa.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  rewriter.setInsertionPoint(gqa);
  std::string where = nodeName(gqa);
  pastKey = withHeadDims(rewriter, loc, pastKey, kvHeads, d, where);
  pastValue = withHeadDims(rewriter, loc, pastValue, kvHeads, d, where);

  // Q, K, V as [B, H, S, D].
  Value q, k, v;
  if (present(key)) {
    q = toHeads(rewriter, loc, query, heads, d);
    k = toHeads(rewriter, loc, key, kvHeads, d);
    v = toHeads(rewriter, loc, value, kvHeads, d);
  } else {
    q = toHeads(rewriter, loc, sliceLast(rewriter, loc, query, 0, heads * d), heads, d);
    k = toHeads(rewriter, loc, sliceLast(rewriter, loc, query, heads * d, kvHeads * d), kvHeads, d);
    v = toHeads(rewriter, loc, sliceLast(rewriter, loc, query, (heads + kvHeads) * d, kvHeads * d),
                kvHeads, d);
  }

  // Positions P .. P + S - 1 (or the given position_ids).
  int64_t s = dimOf(query, 1);
  Value past = dimScalar(rewriter, loc, pastKey, 2);
  Value end = onnx::AddOp::create(rewriter, loc, i64Type({}, ctx), past,
                                  dimScalar(rewriter, loc, query, 1));
  Value positions = onnx::RangeOp::create(rewriter, loc, i64Type({s}, ctx), past, end,
                                          scalarI64(rewriter, loc, 1));
  if (rotary) {
    Value posIds = present(gqa.getPositionIds()) ? gqa.getPositionIds() : positions;
    int64_t r = dimOf(cosCache, 1);
    auto table = [&](Value cache) -> Value {
      auto posType = cast<RankedTensorType>(posIds.getType());
      SmallVector<int64_t> shape(posType.getShape());
      shape.push_back(r);
      return onnx::GatherOp::create(rewriter, loc,
                                    RankedTensorType::get(shape, elementTypeOf(cache)), cache,
                                    posIds, rewriter.getI64IntegerAttr(0));
    };
    Value cos = table(cosCache), sin = table(sinCache);
    bool interleaved = gqa.getRotaryInterleaved().value_or(0) != 0;
    auto rope = [&](Value x) -> Value {
      return RopeOp::create(rewriter, loc, x, cos, sin,
                            rewriter.getI64IntegerAttr(2 * r), rewriter.getBoolAttr(interleaved));
    };
    q = rope(q);
    k = rope(k);
    log.formed("rope");
    log.formed("rope");
  }

  // K/V of the whole context; they are the present outputs.
  auto concatType = [&](Value pastT, Value now) {
    auto t = cast<RankedTensorType>(pastT.getType());
    int64_t p = t.getDimSize(2), n = dimOf(now, 2);
    int64_t len = ShapedType::isDynamic(p) || ShapedType::isDynamic(n) ? ShapedType::kDynamic : p + n;
    return t.clone({t.getDimSize(0), kvHeads, len, d});
  };
  Value keys = onnx::ConcatOp::create(rewriter, loc, concatType(pastKey, k),
                                      ValueRange{pastKey, k}, rewriter.getI64IntegerAttr(2));
  Value values = onnx::ConcatOp::create(rewriter, loc, concatType(pastValue, v),
                                        ValueRange{pastValue, v}, rewriter.getI64IntegerAttr(2));
  assertSameLayout(rewriter, loc, gqa.getSeqlensK(), pastKey, k, where);
  {
    Value total = gqa.getTotalSequenceLength();
    Value t = tensor::ExtractOp::create(
        rewriter, loc, total,
        SmallVector<Value>(rankOf(total), arith::ConstantIndexOp::create(rewriter, loc, 0)));
    t = arith::IndexCastOp::create(rewriter, loc, rewriter.getIndexType(), t);
    Value len = tensor::DimOp::create(rewriter, loc, keys, 2);
    cf::AssertOp::create(rewriter, loc,
                         arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, t, len),
                         where + ": total_sequence_length is not past + new tokens");
  }

  // keep[b, 0, i, j] = j <= seqlens_k[b] (and j >= pos_i - W: onnxruntime's
  // local_window_size W attends to W + 1 keys, the token's own included).
  Value keyIdx = onnx::RangeOp::create(rewriter, loc, i64Type({dimOf(keys, 2)}, ctx),
                                       scalarI64(rewriter, loc, 0), end,
                                       scalarI64(rewriter, loc, 1));
  Value seqlens = gqa.getSeqlensK();
  auto seqType = cast<RankedTensorType>(seqlens.getType());
  Value last = onnx::CastOp::create(rewriter, loc, seqType.clone(rewriter.getI64Type()), seqlens,
                                    rewriter.getStringAttr("up"), rewriter.getI64IntegerAttr(1),
                                    rewriter.getI64IntegerAttr(7));
  int64_t rows = seqType.getDimSize(0);
  last = unsqueeze(rewriter, loc, last, 1); // [B, 1]
  Value keep = onnx::LessOrEqualOp::create(
      rewriter, loc, RankedTensorType::get({rows, dimOf(keys, 2)}, rewriter.getI1Type()), keyIdx,
      last);
  keep = unsqueeze(rewriter, loc, unsqueeze(rewriter, loc, keep, 1), 1); // [B, 1, 1, L]
  int64_t window = gqa.getLocalWindowSize();
  if (window > 0) {
    // In Hugging Face's sliding-window form, key > query - (W + 1), which
    // xfmr-paged-kv keeps as the paged op's sliding_window.
    Value qpos = unsqueeze(rewriter, loc, positions, 1); // [S, 1]
    Value oldest = onnx::SubOp::create(rewriter, loc, qpos.getType(), qpos,
                                       i64Constant(rewriter, loc, {window + 1}));
    Value inWindow = onnx::GreaterOp::create(
        rewriter, loc, RankedTensorType::get({s, dimOf(keys, 2)}, rewriter.getI1Type()), keyIdx,
        oldest);
    keep = onnx::AndOp::create(
        rewriter, loc,
        RankedTensorType::get({rows, 1, s, dimOf(keys, 2)}, rewriter.getI1Type()), keep,
        inWindow);
  }

  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (std::optional<APFloat> attr = gqa.getScale(); attr && !attr->isZero())
    scale = attr->convertToDouble();
  auto qType = cast<RankedTensorType>(q.getType());
  auto attn = AttentionOp::create(rewriter, loc, qType, q, keys, values, keep,
                                  rewriter.getI64IntegerAttr(heads),
                                  rewriter.getI64IntegerAttr(kvHeads),
                                  rewriter.getF32FloatAttr(scale), rewriter.getBoolAttr(true),
                                  positiveSoftcap(rewriter, gqa.getSoftcap()), sinksOf(rewriter, gqa));
  // [B, H, S, D] -> [B, S, H * D]
  Value out = transpose(rewriter, loc, attn.getResult(), {0, 2, 1, 3});
  auto outType = cast<RankedTensorType>(gqa.getOutput().getType());
  out = onnx::ReshapeOp::create(rewriter, loc, outType, out, i64Constant(rewriter, loc, {0, 0, heads * d}),
                                rewriter.getI64IntegerAttr(0));
  rewriter.replaceAllUsesWith(gqa.getOutput(), out);
  auto replacePresent = [&](Value result, Value with) {
    if (result.use_empty())
      return;
    if (with.getType() != result.getType())
      with = tensor::CastOp::create(rewriter, loc, result.getType(), with);
    rewriter.replaceAllUsesWith(result, with);
  };
  replacePresent(gqa.getPresentKey(), keys);
  replacePresent(gqa.getPresentValue(), values);
  rewriter.eraseOp(gqa);
  log.formed("attention");
  return true;
}

} // namespace xfmr::raise
