//===- PagedKV.cpp - the xfmr-paged-kv model rewrite ----------------------===//
//
// Part of xfmr.
//
// A decoder whose only cross-token op is attention computes the same thing
// for the packed tokens of many sequences as for one sequence of batch 1,
// as long as each token carries its own position: that is vLLM's trick, and
// this pass applies it to an exported graph. The graph runs at batch 1 on
// the T packed tokens; each xfmr.attention is replaced by writing the
// tokens' K/V into their slots and attending over each sequence's blocks.
// Mask inputs and the subgraphs built from them, past_key_values inputs and
// present outputs become dead and are removed. Latent attention (DeepSeek's
// MLA, LatentAttention.h) caches its latent and RoPE key, not per-head K/V.
//
//===----------------------------------------------------------------------===//

#include "LatentAttention.h"
#include "Match.h"
#include "StepPositions.h"

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_PAGEDKVCACHEPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;

constexpr StringLiteral kNameAttr = "onnx.name";
constexpr StringLiteral kDimParamsAttr = "onnx.dim_params";
constexpr StringLiteral kPoolAttr = "xfmr.kv_pool";

StringRef argName(func::FuncOp f, unsigned i) {
  auto name = f.getArgAttrOfType<StringAttr>(i, kNameAttr);
  return name ? name.getValue() : StringRef();
}

/// The step function's inputs before the pools, in ABI order.
struct StepInput {
  StringLiteral name;
  Type element; ///< null: the element type of the original input_ids
  int64_t rank;
  const char *dims[2];
};

/// Inputs before the pools: input_ids, positions, slot_mapping, block_tables,
/// context_lens, query_start_loc, logits_indices.
constexpr unsigned kStepInputs = 7;

/// `logits` [1, T, V] restricted to the token rows `indices` [N]. When the
/// logits are a product with a weight matrix (the lm_head), the rows are
/// taken from its input, so the product runs on N rows instead of T: for a
/// prefill chunk of 2048 tokens that is a [2048, hidden] x [hidden, vocab]
/// product saved.
/// The output projection (lm_head) that produces `logits` row by row from
/// its operand 0 ([1, T, H]): a MatMul by a 2-D weight, or what quantization
/// made of one (xfmr.linear, MatMulNBits). Null if there is none.
Operation *rowwiseHead(Value logits) {
  Operation *head = logits.getDefiningOp();
  if (!head || !logits.hasOneUse() || head->getNumOperands() < 2 ||
      rankOf(head->getOperand(0)) != 3)
    return nullptr;
  if (auto mm = dyn_cast<onnx::MatMulOp>(head))
    return rankOf(mm.getB()) == 2 ? head : nullptr;
  return isa<LinearOp, onnx::MsMatMulNBitsOp>(head) ? head : nullptr;
}

/// `rows`' tokens `indices` (axis 1) as [1, ?, ...].
Value gatherRows(OpBuilder &b, Value rows, Value indices) {
  auto type = cast<RankedTensorType>(rows.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] = ShapedType::kDynamic;
  return onnx::GatherOp::create(b, rows.getLoc(), type.clone(shape), rows, indices,
                                b.getI64IntegerAttr(1));
}

/// The logits of the tokens `indices` only. The selection goes in front of
/// the output projection when there is one, so a prompt's rows are not all
/// projected to the vocabulary (the lm_head is the largest product: in a
/// 4-bit SmolLM2 its int8 [576, 49152] took a third of a 128-token prefill
/// before it was selected through xfmr.linear too).
Value selectRows(Value logits, Value indices) {
  Operation *head = rowwiseHead(logits);
  OpBuilder b(logits.getContext());
  if (!head) {
    b.setInsertionPointAfterValue(logits);
    return gatherRows(b, logits, indices);
  }
  b.setInsertionPoint(head); // indices is an argument: it dominates
  Value picked = gatherRows(b, head->getOperand(0), indices);
  Operation *projected = b.clone(*head);
  projected->setOperand(0, picked);
  auto ltype = cast<RankedTensorType>(logits.getType());
  SmallVector<int64_t> lshape(ltype.getShape());
  lshape[1] = ShapedType::kDynamic;
  projected->getResult(0).setType(ltype.clone(lshape));
  return projected->getResult(0);
}

/// What builds an attention mask, as far as paging cares: how many position
/// comparisons (Less/Greater[OrEqual], Trilu) and the window of Hugging
/// Face's sliding-window masks, `key > query - window`. A causal mask has one
/// comparison (key <= query position, or one triangle); a sliding window
/// adds that second one.
struct MaskPositions {
  int64_t comparisons = 0;
  std::optional<int64_t> window;
};

/// `query - w` with w a positive integer constant: w.
std::optional<int64_t> windowOf(Value v) {
  auto sub = def<onnx::SubOp>(v);
  auto w = sub ? constantInts(sub.getB()) : std::nullopt;
  if (!w || w->size() != 1 || (*w)[0] < 1)
    return std::nullopt;
  return (*w)[0];
}

MaskPositions maskPositions(Value mask) {
  SmallVector<Value> work{mask};
  DenseSet<Value> seen;
  MaskPositions out;
  while (!work.empty() && seen.size() < 4096) {
    Value v = work.pop_back_val();
    Operation *op = v.getDefiningOp();
    if (!op || !seen.insert(v).second)
      continue;
    out.comparisons += isa<onnx::LessOp, onnx::LessOrEqualOp, onnx::GreaterOp,
                           onnx::GreaterOrEqualOp, onnx::TriluOp>(op);
    std::optional<int64_t> w;
    if (auto gt = dyn_cast<onnx::GreaterOp>(op))
      w = windowOf(gt.getB());
    else if (auto lt = dyn_cast<onnx::LessOp>(op))
      w = windowOf(lt.getA());
    if (w)
      out.window = out.window ? std::min(*out.window, *w) : *w;
    // A shape depends on no element of its input (whose producers may be
    // earlier layers with masks of their own).
    if (isa<onnx::ShapeOp>(op))
      continue;
    llvm::append_range(work, op->getOperands());
  }
  return out;
}

/// The K/V heads and head size of a past input [B, H, P, D]: its own static
/// dims, else those of the new tokens its Concat(past, new) users append on
/// the sequence axis (all users must agree; TorchScript's one-input Concat
/// of the past is looked through).
std::optional<std::pair<int64_t, int64_t>> pastHeadDims(Value past) {
  auto type = cast<RankedTensorType>(past.getType());
  if (type.getRank() != 4)
    return std::nullopt;
  int64_t heads = type.getDimSize(1), size = type.getDimSize(3);
  SmallVector<Value> pasts{past};
  for (size_t i = 0; i < pasts.size() && i < 16; ++i)
    for (Operation *user : pasts[i].getUsers())
      if (auto c = dyn_cast<onnx::ConcatOp>(user); c && c.getInputs().size() == 1)
        pasts.push_back(c.getResult());
  for (Value p : pasts) {
    for (Operation *user : p.getUsers()) {
      auto concat = dyn_cast<onnx::ConcatOp>(user);
      if (!concat || concat.getInputs().size() != 2 || concat.getInputs()[0] != p)
        continue;
      int64_t axis = static_cast<int64_t>(concat.getAxis());
      if ((axis != 2 && axis != -2) || rankOf(concat.getInputs()[1]) != 4)
        continue;
      auto unify = [](int64_t &known, int64_t other) {
        if (ShapedType::isDynamic(known))
          known = other;
        return ShapedType::isDynamic(other) || other == known;
      };
      if (!unify(heads, dimOf(concat.getInputs()[1], 1)) ||
          !unify(size, dimOf(concat.getInputs()[1], 3)))
        return std::nullopt;
    }
  }
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(size))
    return std::nullopt;
  return std::pair(heads, size);
}

struct PagedKVCachePass : impl::PagedKVCachePassBase<PagedKVCachePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        funcs.push_back(f);
    if (funcs.size() != 1) {
      module.emitError("xfmr-paged-kv: expected one model function, found ") << funcs.size();
      return signalPassFailure();
    }
    if (blockSize < 1) {
      module.emitError("xfmr-paged-kv: block-size must be >= 1");
      return signalPassFailure();
    }
    if (kvDtype != "auto" && kvDtype != "f32" && kvDtype != "bf16" && kvDtype != "int8" &&
        kvDtype != "fp8-e4m3") {
      module.emitError("xfmr-paged-kv: kv-dtype must be auto, f32, bf16, int8 or fp8-e4m3, got '")
          << kvDtype << "'";
      return signalPassFailure();
    }
    if (failed(rewrite(funcs.front())))
      return signalPassFailure();
  }

  /// The pools' element type for K/V of type `model`.
  Type poolElement(Type model) {
    Builder b(&getContext());
    if (kvDtype == "f32")
      return b.getF32Type();
    if (kvDtype == "bf16")
      return b.getBF16Type();
    if (kvDtype == "int8")
      return b.getI8Type();
    if (kvDtype == "fp8-e4m3")
      return b.getType<Float8E4M3FNType>();
    return model;
  }
  /// int8 and fp8 pools carry f32 scales per token and head.
  bool scaled() const { return kvDtype == "int8" || kvDtype == "fp8-e4m3"; }

  /// The manifest's kv_cache records one KV head count, head size and
  /// element type, and the loader requires every pool to have them: a layer
  /// whose key or value pool differs from layer 0's key pool is refused
  /// here, naming it, instead of compiling an artifact that cannot load.
  static LogicalResult checkSamePools(AttentionOp op, size_t layer,
                                      RankedTensorType firstKey,
                                      RankedTensorType firstValue,
                                      RankedTensorType key,
                                      RankedTensorType value) {
    auto describe = [](RankedTensorType t) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << t.getDimSize(2) << " KV heads of size " << t.getDimSize(3) << " ("
         << t.getElementType() << ")";
      return s;
    };
    for (auto [role, pool, first] :
         {std::tuple<StringRef, RankedTensorType, RankedTensorType>{"key", key, firstKey},
          std::tuple<StringRef, RankedTensorType, RankedTensorType>{"value", value,
                                                                    firstValue}}) {
      if (pool.getShape().drop_front(2) == first.getShape().drop_front(2) &&
          pool.getElementType() == first.getElementType())
        continue;
      return op.emitError("xfmr-paged-kv: layer ")
             << layer << " (" << nodeName(op) << "): its " << role
             << " cache would hold " << describe(pool)
             << " where layer 0's " << role << " cache holds " << describe(first)
             << "; the runtime sizes every layer's KV pools alike";
    }
    return success();
  }

  /// The model function's inputs by role.
  struct Inputs {
    std::optional<unsigned> ids, positions, cachePositions;
    SmallVector<unsigned> masks, pasts;
  };

  /// The layers' attention ops and what paging each needs.
  struct Layers {
    SmallVector<AttentionOp> ops;
    SmallVector<RankedTensorType> keyPools, valuePools;
    /// Each layer's own window: models mix local and global layers.
    SmallVector<std::optional<int64_t>> windows;
    SmallVector<std::optional<LatentAttention>> latents;
  };

  /// What replaced the old inputs (batch 1, T tokens).
  struct OldInputViews {
    Value idsRow, idsView;       ///< input_ids as [1, T], and as the old type
    DenseSet<Value> pastValues;  ///< the empty pasts
  };

  static InFlightDiagnostic error(func::FuncOp f, const Twine &msg) {
    return f.emitError("xfmr-paged-kv: ") << msg;
  }

  /// The old inputs by name; every one must have a role in a step function.
  static FailureOr<Inputs> classifyInputs(func::FuncOp f) {
    Inputs in;
    std::optional<unsigned> other;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      StringRef name = argName(f, i);
      if (name == "input_ids")
        in.ids = i;
      else if (name == "position_ids")
        in.positions = i;
      else if (name == "cache_position")
        in.cachePositions = i;
      else if (name == "attention_mask")
        in.masks.push_back(i);
      else if (name.starts_with("past_key_values") || name.starts_with("past_key") ||
               name.starts_with("past_value") || name.starts_with("past."))
        in.pasts.push_back(i);
      else if (!other)
        other = i;
    }
    if (!in.ids)
      return error(f, "the model has no 'input_ids' input");
    if (other)
      return error(f, "input '") << argName(f, *other) << "' has no role in a step function";
    if (rankOf(f.getArgument(*in.ids)) != 2 ||
        (in.positions && rankOf(f.getArgument(*in.positions)) != 2))
      return error(f, "input_ids and position_ids must be [batch, sequence]");
    if (in.cachePositions && rankOf(f.getArgument(*in.cachePositions)) != 1)
      return error(f, "cache_position must be [sequence]");
    return in;
  }

  /// Each layer's pools, window and latent form. Paged attention is causal:
  /// a sliding window (key > query - W) becomes the op's `sliding_window`;
  /// any other extra comparison is refused.
  FailureOr<Layers> planLayers(func::FuncOp f) {
    constexpr int64_t dyn = ShapedType::kDynamic;
    Layers p;
    f.walk([&](AttentionOp op) { p.ops.push_back(op); });
    if (p.ops.empty())
      return error(f, "no xfmr.attention in the model: run xfmr-raise first (or the "
                      "attention was left unfused: see xfmr-compile --report)");
    p.windows.resize(p.ops.size());
    for (auto [l, op] : llvm::enumerate(p.ops)) {
      if (Value mask = op.getMask()) {
        MaskPositions m = maskPositions(mask);
        if (m.comparisons == 2 && m.window)
          p.windows[l] = m.window;
        else if (m.comparisons > 1)
          return op.emitError("xfmr-paged-kv: ")
                 << nodeName(op) << ": the attention mask compares positions more than once "
                 << "(not a causal or sliding-window pattern); paged attention is causal over "
                    "the whole context and would drop it";
      }
      Value k = op.getKey(), v = op.getValue();
      int64_t kvHeads = op.getNumKvHeads(), d = dimOf(k, 3), dv = dimOf(v, 3);
      // Latent attention caches [latent ; RoPE key] for one KV head: the
      // value pool holds the latent, the key pool the RoPE key.
      p.latents.push_back(matchLatentAttention(op));
      if (const std::optional<LatentAttention> &mla = p.latents.back()) {
        k = mla->ropeKey;
        v = mla->latent;
        kvHeads = 1;
        d = mla->ropeDim;
        dv = mla->rank;
      } else if (!p.latents.front() != !p.latents.back()) {
        return op.emitError("xfmr-paged-kv: ")
               << nodeName(op) << ": layers with and without latent attention in one model";
      }
      if (ShapedType::isDynamic(d) || ShapedType::isDynamic(dv))
        return error(f, "attention at ") << op.getLoc() << " has a dynamic head size";
      p.keyPools.push_back(
          RankedTensorType::get({dyn, blockSize, kvHeads, d}, poolElement(elementTypeOf(k))));
      p.valuePools.push_back(
          RankedTensorType::get({dyn, blockSize, kvHeads, dv}, poolElement(elementTypeOf(v))));
      if (failed(checkSamePools(op, l, p.keyPools.front(), p.valuePools.front(),
                                p.keyPools.back(), p.valuePools.back())))
        return failure();
    }
    return p;
  }

  /// Appends the step inputs (kStepInputs of them, in ABI order) and each
  /// layer's pools (key, value[, key scales, value scales]) to `f`, named
  /// and with their dims named; returns the pools' names.
  FailureOr<SmallVector<std::string>> addStepArguments(func::FuncOp f, const Inputs &in,
                                                       const Layers &p) {
    constexpr int64_t dyn = ShapedType::kDynamic;
    Builder b(&getContext());
    Type idType = elementTypeOf(f.getArgument(*in.ids));
    // Without a position_ids input the graph's own positions (derived from
    // the sequence length or the mask) are replaced after the rewrite.
    Type posType = in.positions ? elementTypeOf(f.getArgument(*in.positions)) : b.getI64Type();
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    struct NewArg {
      const char *name;
      Type type;
      SmallVector<StringRef> dims;
    };
    SmallVector<NewArg> newArgs = {
        {"input_ids", RankedTensorType::get({dyn}, idType), {"tokens"}},
        {"positions", RankedTensorType::get({dyn}, posType), {"tokens"}},
        {"slot_mapping", RankedTensorType::get({dyn}, i64), {"tokens"}},
        {"block_tables", RankedTensorType::get({dyn, dyn}, i32), {"seqs", "max_blocks"}},
        {"context_lens", RankedTensorType::get({dyn}, i32), {"seqs"}},
        {"query_start_loc", RankedTensorType::get({dyn}, i32), {"seqs_plus_one"}},
        {"logits_indices", RankedTensorType::get({dyn}, i64), {"outputs"}},
    };
    SmallVector<std::string> poolNames;
    for (size_t l = 0; l < p.ops.size(); ++l) {
      std::string n = std::to_string(l);
      auto scaleType =
          RankedTensorType::get({dyn, blockSize, p.keyPools[l].getDimSize(2)}, b.getF32Type());
      newArgs.push_back({nullptr, p.keyPools[l], {"num_blocks"}});
      newArgs.push_back({nullptr, p.valuePools[l], {"num_blocks"}});
      poolNames.push_back("key_cache." + n);
      poolNames.push_back("value_cache." + n);
      if (scaled()) {
        newArgs.push_back({nullptr, scaleType, {"num_blocks"}});
        newArgs.push_back({nullptr, scaleType, {"num_blocks"}});
        poolNames.push_back("key_scale." + n);
        poolNames.push_back("value_scale." + n);
      }
    }
    for (auto [i, a] : llvm::enumerate(newArgs)) {
      bool isPool = i >= kStepInputs;
      StringRef name = isPool ? StringRef(poolNames[i - kStepInputs]) : StringRef(a.name);
      SmallVector<NamedAttribute> attrs{b.getNamedAttr(kNameAttr, b.getStringAttr(name))};
      SmallVector<Attribute> dims;
      auto type = cast<RankedTensorType>(a.type);
      for (int64_t d = 0; d < type.getRank(); ++d)
        dims.push_back(b.getStringAttr(d < static_cast<int64_t>(a.dims.size()) ? a.dims[d] : ""));
      attrs.push_back(b.getNamedAttr(kDimParamsAttr, b.getArrayAttr(dims)));
      if (isPool)
        attrs.push_back(b.getNamedAttr(kPoolAttr, b.getUnitAttr()));
      if (failed(f.insertArgument(f.getNumArguments(), a.type, b.getDictionaryAttr(attrs),
                                  f.getLoc())))
        return error(f, "cannot add input ") << name;
    }
    return poolNames;
  }

  /// Replaces the old inputs' uses by views of the new step inputs
  /// (`stepArg(i)`): input_ids and positions as rows of batch 1, masks as
  /// ones over the tokens, pasts as empty (only the new tokens' K/V are
  /// computed; the pools hold the rest).
  FailureOr<OldInputViews> replaceOldInputs(func::FuncOp f, const Inputs &in,
                                            function_ref<Value(unsigned)> stepArg) {
    OpBuilder b = OpBuilder::atBlockBegin(&f.getBody().front());
    Location loc = f.getLoc();
    constexpr int64_t dyn = ShapedType::kDynamic;
    auto asOld = [&](Value v, Value old) -> Value {
      return v.getType() == old.getType()
                 ? v
                 : tensor::CastOp::create(b, loc, old.getType(), v).getResult();
    };
    OldInputViews views;
    views.idsRow = unsqueeze(b, loc, stepArg(0), 0);
    views.idsView = asOld(views.idsRow, f.getArgument(*in.ids));
    f.getArgument(*in.ids).replaceAllUsesWith(views.idsView);
    if (in.positions) {
      Value posRow = unsqueeze(b, loc, stepArg(1), 0);
      f.getArgument(*in.positions).replaceAllUsesWith(asOld(posRow, f.getArgument(*in.positions)));
    }
    if (in.cachePositions)
      f.getArgument(*in.cachePositions)
          .replaceAllUsesWith(asOld(stepArg(1), f.getArgument(*in.cachePositions)));
    for (unsigned m : in.masks) {
      Value old = f.getArgument(m);
      Type element = cast<RankedTensorType>(old.getType()).getElementType();
      Value shape = onnx::ShapeOp::create(b, loc, RankedTensorType::get({2}, b.getI64Type()),
                                          views.idsRow, nullptr, b.getI64IntegerAttr(0));
      auto one = DenseElementsAttr::get(RankedTensorType::get({1}, element),
                                        b.getIntegerAttr(element, 1));
      Value ones = onnx::ConstantOfShapeOp::create(
          b, loc, RankedTensorType::get({1, dyn}, element), shape, one);
      old.replaceAllUsesWith(asOld(ones, old));
    }
    for (unsigned p : in.pasts) {
      Value old = f.getArgument(p);
      auto type = cast<RankedTensorType>(old.getType());
      // Exports may name the K/V heads and head size symbolically; the new
      // tokens' K/V it is concatenated with fix them.
      std::optional<std::pair<int64_t, int64_t>> dims = pastHeadDims(old);
      if (type.getRank() != 4 || !dims)
        return error(f, "past input '") << argName(f, p)
                                        << "' is not [batch, kv_heads, past, head_dim] with "
                                           "kv_heads and head_dim known (from its type or the "
                                           "new tokens it is concatenated with)";
      auto emptyType =
          RankedTensorType::get({1, dims->first, 0, dims->second}, type.getElementType());
      Value empty = onnx::ConstantOp::create(
          b, loc, emptyType, DenseElementsAttr::get(emptyType, ArrayRef<Attribute>{}), nullptr,
          nullptr, nullptr, nullptr, nullptr, nullptr);
      Value replacement = asOld(empty, old);
      old.replaceAllUsesWith(replacement);
      views.pastValues.insert(replacement);
    }
    return views;
  }

  /// Each xfmr.attention -> kv_write of its new tokens' K/V + paged_attention
  /// over its pools; returns the updated pools in argument order.
  FailureOr<SmallVector<Value>> rewriteLayers(func::FuncOp f, const Layers &p,
                                              const DenseSet<Value> &pastValues,
                                              function_ref<Value(unsigned)> stepArg) {
    // Concat(past, new) on the sequence axis: only the new part is written.
    auto newTokens = [&](Value kv) -> Value {
      if (auto concat = def<onnx::ConcatOp>(kv))
        if (concat.getInputs().size() == 2 && pastValues.contains(concat.getInputs()[0]) &&
            (static_cast<int64_t>(concat.getAxis()) == 2 ||
             static_cast<int64_t>(concat.getAxis()) == -2))
          return concat.getInputs()[1];
      return kv;
    };
    auto packed = [](OpBuilder &ob, Location at, Value x) { // [1, H, T, D] -> [T, H, D]
      return squeeze(ob, at, transpose(ob, at, x, {0, 2, 1, 3}), 0);
    };
    const unsigned poolsPerLayer = scaled() ? 4 : 2;
    SmallVector<Value> finalPools;
    for (size_t l = 0; l < p.ops.size(); ++l) {
      AttentionOp op = p.ops[l]; // a handle (the op is erased below)
      OpBuilder ob(op);
      Location at = op.getLoc();
      if (op->getParentOp() != f)
        return error(f, "attention inside a region is not supported");
      const std::optional<LatentAttention> &mla = p.latents[l];
      Value q = packed(ob, at, op.getQuery());
      Value k = packed(ob, at, newTokens(mla ? mla->ropeKey : op.getKey()));
      Value v = packed(ob, at, newTokens(mla ? mla->latent : op.getValue()));
      if (mla)
        q = absorbQuery(ob, at, *mla, q);
      unsigned first = kStepInputs + poolsPerLayer * l;
      SmallVector<Value, 2> scales;
      for (unsigned i = 2; i < poolsPerLayer; ++i)
        scales.push_back(stepArg(first + i));
      auto write = KVWriteOp::create(ob, at, k, v, stepArg(first), stepArg(first + 1),
                                     stepArg(2), scales);
      auto attn = PagedAttentionOp::create(
          ob, at, q, write.getNewKeyPool(), write.getNewValuePool(), stepArg(3), stepArg(4),
          stepArg(5), write.getNewScales(), op.getNumHeadsAttr(),
          mla ? ob.getI64IntegerAttr(1) : op.getNumKvHeadsAttr(), op.getScaleAttr(),
          ob.getI64IntegerAttr(blockSize),
          p.windows[l] ? ob.getI64IntegerAttr(*p.windows[l]) : IntegerAttr(),
          op.getSoftcapAttr(), op.getSinksAttr(), mla ? ob.getUnitAttr() : UnitAttr());
      Value heads = mla ? expandOutput(ob, at, *mla, attn.getResult()) : attn.getResult();
      Value out = transpose(ob, at, unsqueeze(ob, at, heads, 0), {0, 2, 1, 3});
      if (out.getType() != op.getType())
        out = tensor::CastOp::create(ob, at, op.getType(), out);
      op.getResult().replaceAllUsesWith(out);
      op.erase();
      finalPools.push_back(write.getNewKeyPool());
      finalPools.push_back(write.getNewValuePool());
      finalPools.append(write.getNewScales().begin(), write.getNewScales().end());
    }
    return finalPools;
  }

  /// The results: logits for the rows logits_indices selects (a sequence's
  /// last token; prompt chunks need none), then the updated pools (each
  /// returned so bufferization writes it in place into its argument).
  void rewriteResults(func::FuncOp f, Value logitsIndices, ArrayRef<Value> finalPools,
                      ArrayRef<std::string> poolNames) {
    MLIRContext *ctx = &getContext();
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    OpBuilder rb(ret);
    Value logits = squeeze(rb, ret.getLoc(), selectRows(ret.getOperand(0), logitsIndices), 0);
    SmallVector<Value> results{logits};
    results.append(finalPools.begin(), finalPools.end());
    func::ReturnOp::create(rb, ret.getLoc(), results);
    DictionaryAttr logitsAttrs = f.getResultAttrDict(0);
    ret.erase();
    SmallVector<Type> resultTypes;
    for (Value r : results)
      resultTypes.push_back(r.getType());
    f.setType(FunctionType::get(ctx, f.getArgumentTypes(), resultTypes));
    SmallVector<DictionaryAttr> resultAttrs;
    SmallVector<Attribute> vocabDims{rb.getStringAttr("outputs"), rb.getStringAttr("")};
    NamedAttrList la(logitsAttrs);
    la.set(kDimParamsAttr, rb.getArrayAttr(vocabDims));
    if (!la.get(kNameAttr))
      la.set(kNameAttr, rb.getStringAttr("logits"));
    resultAttrs.push_back(la.getDictionary(ctx));
    for (size_t i = 0; i < finalPools.size(); ++i)
      resultAttrs.push_back(rb.getDictionaryAttr(
          {rb.getNamedAttr(kNameAttr, rb.getStringAttr(poolNames[i])),
           rb.getNamedAttr(kPoolAttr, rb.getI64IntegerAttr(kStepInputs + i))}));
    f.setAllResultAttrs(resultAttrs);
  }

  /// Removes the first `count` (old) inputs, which the rewrite left unused.
  static LogicalResult eraseOldInputs(func::FuncOp f, unsigned count) {
    llvm::BitVector erase(f.getNumArguments());
    for (unsigned i = 0; i < count; ++i) {
      if (!f.getArgument(i).use_empty())
        return error(f, "input '") << argName(f, i) << "' is still used after the rewrite";
      erase.set(i);
    }
    if (failed(f.eraseArguments(erase)))
      return error(f, "cannot remove the old inputs");
    return success();
  }

  /// What the runtime needs to size the pools, as the module's
  /// `xfmr.kv_cache`; the pools' element type names the dtype (int8 and
  /// fp8-e4m3 imply the scale pools).
  void recordKVCache(const Layers &p) {
    Builder b(&getContext());
    RankedTensorType key = p.keyPools.front(), value = p.valuePools.front();
    SmallVector<NamedAttribute> kv{
        b.getNamedAttr("block_size", b.getI64IntegerAttr(blockSize)),
        b.getNamedAttr("num_layers", b.getI64IntegerAttr(p.ops.size())),
        b.getNamedAttr("num_kv_heads", b.getI64IntegerAttr(key.getDimSize(2))),
        b.getNamedAttr("head_dim", b.getI64IntegerAttr(key.getDimSize(3))),
    };
    if (value.getDimSize(3) != key.getDimSize(3))
      kv.push_back(b.getNamedAttr("value_head_dim", b.getI64IntegerAttr(value.getDimSize(3))));
    if (p.latents.front())
      kv.push_back(b.getNamedAttr("latent", b.getUnitAttr()));
    Type element = key.getElementType();
    StringRef dtype = element.isInteger(8)               ? "int8"
                      : isa<Float8E4M3FNType>(element) ? "fp8-e4m3"
                      : element.isBF16()               ? "bf16"
                      : element.isF16()                ? "f16"
                      : element.isF64()                ? "f64"
                                                       : "f32";
    kv.push_back(b.getNamedAttr("dtype", b.getStringAttr(dtype)));
    getOperation()->setAttr("xfmr.kv_cache", b.getDictionaryAttr(kv));
  }

  LogicalResult rewrite(func::FuncOp f) {
    FailureOr<Inputs> in = classifyInputs(f);
    if (failed(in))
      return failure();
    FailureOr<Layers> layers = planLayers(f);
    if (failed(layers))
      return failure();
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    if (!ret.getNumOperands() || rankOf(ret.getOperand(0)) != 3)
      return error(f, "the first output must be logits [batch, sequence, vocab]");

    // New inputs go after the old ones, which are erased at the end.
    unsigned base = f.getNumArguments();
    FailureOr<SmallVector<std::string>> poolNames = addStepArguments(f, *in, *layers);
    if (failed(poolNames))
      return failure();
    auto stepArg = [&](unsigned i) -> Value { return f.getArgument(base + i); };
    FailureOr<OldInputViews> views = replaceOldInputs(f, *in, stepArg);
    if (failed(views))
      return failure();
    FailureOr<SmallVector<Value>> pools = rewriteLayers(f, *layers, views->pastValues, stepArg);
    if (failed(pools))
      return failure();
    rewriteResults(f, stepArg(6), *pools, *poolNames);

    IRRewriter rewriter(&getContext());
    (void)runRegionDCE(rewriter, f->getRegions());
    if (!in->positions && !in->cachePositions) {
      SmallVector<std::pair<Value, int64_t>> tDims{
          {views->idsView, 1}, {views->idsRow, 1}, {stepArg(0), 0}, {stepArg(1), 0}};
      if (failed(substituteStepPositions(f, tDims, stepArg(1))))
        return failure();
      (void)runRegionDCE(rewriter, f->getRegions());
    }
    if (failed(eraseOldInputs(f, base)))
      return failure();
    recordKVCache(*layers);
    return success();
  }
};

} // namespace
} // namespace xfmr
