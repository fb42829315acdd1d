//===- TensorParallel.cpp - one rank's shard of a tensor-parallel model ---===//
//
// Part of xfmr.
//
// Megatron-style tensor parallelism over N ranks, decided on the raised
// model: rank r keeps
//   - query heads [r Hq / N, (r + 1) Hq / N): the query projection's columns
//     of those heads (and its bias), the output projection's rows;
//   - the KV heads those query heads read: [r Hkv / N, (r + 1) Hkv / N), or,
//     with fewer KV heads than ranks (GQA, MQA), the one KV head r Hkv / N
//     (replicated over N / Hkv ranks): the key and value projections'
//     columns, and KV pools of that many heads;
//   - of every xfmr.gated_mlp, intermediate columns [r I / N, (r + 1) I / N)
//     of gate and up, the same rows of down.
// The attention's output projection and the MLP then hold partial sums,
// completed by an xfmr.all_reduce (one per attention and one per MLP, of
// T x H floats each). Everything else (embedding, norms, residuals, LM
// head) is replicated.
//
// The head count lives in the types of the ops between a projection and its
// attention (reshapes, transposes, RoPE, bias adds): the pass follows each
// projection's result forward, keeping track of which dimension carries the
// heads, and narrows that dimension of every type on the way (rewriting a
// reshape's constant head count where the exporter wrote one). An op it
// does not know on that path is an error naming it. Every rank's code is
// the same; only the weights differ (xfmr-compile checks model.so is
// identical for all ranks). See docs/parallelism.md.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace xfmr {
#define GEN_PASS_DEF_SHARDTENSORPARALLELPASS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

namespace xfmr {
namespace {

using namespace raise;
constexpr int64_t kDyn = ShapedType::kDynamic;

/// Which part of a value this rank keeps: dimension `dim` (originally
/// `heads` x `unit` long) keeps heads [first, first + count).
struct Shard {
  int64_t dim;
  int64_t heads, first, count, unit;
  int64_t oldSize() const { return heads * unit; }
  int64_t newSize() const { return count * unit; }
};

/// Elements [begin, end) of dimension `dim` of a constant, as a new constant.
FailureOr<Value> sliceConstant(OpBuilder &b, Location loc, Value v, int64_t dim,
                               int64_t begin, int64_t end) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return failure();
  auto type = cast<RankedTensorType>(attr.getType());
  SmallVector<int64_t> shape(type.getShape());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int64_t d = dim + 1; d < type.getRank(); ++d)
    inner *= shape[d];
  int64_t size = shape[dim];
  shape[dim] = end - begin;
  auto sliced = RankedTensorType::get(shape, type.getElementType());
  if (auto dense = dyn_cast<DenseElementsAttr>(attr); dense && dense.isSplat())
    return makeConstant(b, loc, dense.resizeSplat(sliced));
  if (type.getNumElements() == 0) // an empty past
    return makeConstant(b, loc,
                        DenseElementsAttr::get(sliced, ArrayRef<Attribute>{}));
  std::optional<ArrayRef<char>> raw = rawBytes(attr);
  unsigned bits = type.getElementTypeBitWidth();
  if (!raw || bits % 8 ||
      raw->size() != static_cast<size_t>(type.getNumElements()) * bits / 8)
    return failure();
  int64_t bytes = bits / 8;
  std::vector<char> piece;
  piece.reserve(outer * (end - begin) * inner * bytes);
  for (int64_t o = 0; o < outer; ++o) {
    const char *from = raw->data() + ((o * size + begin) * inner) * bytes;
    piece.insert(piece.end(), from, from + (end - begin) * inner * bytes);
  }
  // "xfmr.tp.*": written to the weights file whatever its size
  // (ExternalizeWeights.cpp), so that the ranks' code does not differ.
  std::string name = "xfmr.tp.";
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr))
    name += resource.getRawHandle().getKey().str();
  return blobConstant(b, loc, shape, type.getElementType(), piece, name);
}

RankedTensorType withDim(Type t, int64_t dim, int64_t size) {
  auto type = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(type.getShape());
  if (shape[dim] != kDyn)
    shape[dim] = size;
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

/// Whether `v` becomes a function result through ops whose other operands
/// are constants (a squeeze, Gemma-2's logit softcap): an LM head's logits.
bool reachesReturn(Value v, int depth = 8) {
  if (depth == 0 || v.use_empty())
    return false;
  for (Operation *user : v.getUsers()) {
    if (isa<func::ReturnOp>(user))
      continue;
    if (user->getNumResults() != 1 || user->getNumRegions() != 0 ||
        !llvm::all_of(user->getOperands(),
                      [&](Value o) { return o == v || isConstant(o); }) ||
        !reachesReturn(user->getResult(0), depth - 1))
      return false;
  }
  return true;
}

/// An onnx op by name (the mask arithmetic of the vocabulary-parallel
/// embedding), with its result type given.
Value onnxOp(OpBuilder &b, Location loc, StringRef name, Type result,
             ValueRange operands, ArrayRef<NamedAttribute> attrs = {}) {
  OperationState state(loc, ("onnx." + name).str());
  state.addOperands(operands);
  state.addTypes(result);
  state.addAttributes(attrs);
  return b.create(state)->getResult(0);
}

/// Elementwise ops of one tensor (MLP activations, spelled out or not).
bool isUnary(Operation *op) {
  return isa<onnx::SigmoidOp, onnx::TanhOp, onnx::ReluOp, onnx::ErfOp,
             onnx::GeluOp, onnx::NegOp, onnx::ExpOp, onnx::SoftplusOp,
             onnx::SqrtOp, onnx::HardSigmoidOp>(op);
}

class Sharder {
public:
  Sharder(func::FuncOp f, int64_t ranks, int64_t rank)
      : f(f), ranks(ranks), rank(rank) {}

  LogicalResult run();
  int64_t attentions = 0, mlps = 0, vocabulary = 0;
  /// The KV heads each rank's pools hold (0: no paged attention).
  int64_t poolHeads = 0;

private:
  LogicalResult shardAttention(Operation *attention);
  LogicalResult shardMLP(GatedMLPOp mlp);
  /// An MLP left as products (GPT-2's, StarCoder2's: up, activation, down;
  /// or gate and up joined elementwise): the column-parallel products of
  /// `down`'s input, or nothing when it is not such an MLP.
  SmallVector<onnx::MatMulOp> ungatedMLP(onnx::MatMulOp down);
  LogicalResult shardUngatedMLP(onnx::MatMulOp down,
                                ArrayRef<onnx::MatMulOp> ups);
  /// Vocabulary-parallel LM head: columns [r V / N, (r + 1) V / N) of the
  /// product, gathered after it.
  void shardLMHead(onnx::MatMulOp mm);
  /// Vocabulary-parallel embedding: rows [r V / N, (r + 1) V / N) of the
  /// table; other ids give zeros; the ranks' rows are summed.
  LogicalResult shardEmbedding(EmbeddingOp e);
  /// The projection `v` is computed from by head-layout ops.
  FailureOr<onnx::MatMulOp> projectionOf(Operation *attention, Value v,
                                         StringRef what);
  /// Keeps columns of heads [first, first + count) of `mm`'s weight and
  /// follows its result to the attention.
  LogicalResult shardColumns(onnx::MatMulOp mm, int64_t heads, int64_t first,
                             int64_t count);
  /// Narrows the types from `v` (sharded as `s`) to the ops that join
  /// shards (attention, KV write, output projection).
  LogicalResult propagate(Value v, Shard s);
  LogicalResult visit(Operation *user, Value v, Shard s);
  LogicalResult reshape(onnx::ReshapeOp op, Shard s);
  LogicalResult elementwise(Operation *op, Value v, Shard s);
  /// A concatenation along another dimension with constants (an empty
  /// past): the constants keep the rank's heads too.
  LogicalResult concatenate(onnx::ConcatOp op, Value v, Shard s);
  LogicalResult rowParallel(onnx::MatMulOp mm, Value v, Shard s);
  FailureOr<Value> shapeWithSize(onnx::ReshapeOp op, int64_t dim,
                                 int64_t oldSize, int64_t newSize);
  void allReduceAfter(Value partial);

  func::FuncOp f;
  int64_t ranks, rank;
  /// Shards reaching the ops that join them (attention, kv_write, return).
  DenseMap<Value, Shard> reached;
  DenseSet<Operation *> visited;
  /// The values between an ungated MLP's column-parallel products and its
  /// down projection (sharded as the propagation reaches them).
  DenseSet<Value> mlpValues;
};

bool joinsShards(Operation *op) {
  return isa<PagedAttentionOp, AttentionOp, KVWriteOp, func::ReturnOp>(op);
}

FailureOr<onnx::MatMulOp> Sharder::projectionOf(Operation *attention, Value v,
                                                StringRef what) {
  for (int steps = 0; steps < 32; ++steps) {
    Operation *def = v.getDefiningOp();
    if (auto mm = dyn_cast_or_null<onnx::MatMulOp>(def)) {
      if (!constantMatrix(mm.getB()))
        break;
      return mm;
    }
    if (auto r = dyn_cast_or_null<onnx::ReshapeOp>(def))
      v = r.getData();
    else if (isa_and_nonnull<onnx::TransposeOp, onnx::SqueezeOp,
                             onnx::UnsqueezeOp, tensor::CastOp, onnx::CastOp>(
                 def))
      v = def->getOperand(0);
    else if (auto rope = dyn_cast_or_null<RopeOp>(def))
      v = rope.getInput();
    else if (isa_and_nonnull<RMSNormOp, LayerNormOp>(def))
      v = def->getOperand(0);
    else if (isa_and_nonnull<onnx::AddOp>(def) &&
             isConstant(def->getOperand(1)))
      v = def->getOperand(0);
    else if (isa_and_nonnull<onnx::AddOp>(def) &&
             isConstant(def->getOperand(0)))
      v = def->getOperand(1);
    else
      break;
  }
  return attention->emitError()
         << "--tensor-parallel: the " << what
         << " of this attention is not a projection by a constant f32 "
            "weight through reshapes, transposes and RoPE, which the "
            "head split needs";
}

LogicalResult Sharder::shardColumns(onnx::MatMulOp mm, int64_t heads,
                                    int64_t first, int64_t count) {
  auto wType = cast<RankedTensorType>(mm.getB().getType());
  int64_t cols = wType.getDimSize(1);
  if (cols % heads)
    return mm.emitError() << "--tensor-parallel: " << cols
                          << " columns are not " << heads << " heads";
  int64_t unit = cols / heads;
  OpBuilder b(mm);
  FailureOr<Value> w = sliceConstant(b, mm.getLoc(), mm.getB(), 1, first * unit,
                                     (first + count) * unit);
  if (failed(w))
    return mm.emitError(
        "--tensor-parallel: cannot read the projection's weight");
  mm->setOperand(1, *w);
  Value y = mm.getResult();
  int64_t last = rankOf(y) - 1;
  y.setType(withDim(y.getType(), last, count * unit));
  visited.insert(mm);
  return propagate(y, Shard{last, heads, first, count, unit});
}

LogicalResult Sharder::propagate(Value v, Shard s) {
  for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
    if (joinsShards(user)) {
      reached[v] = s;
      continue;
    }
    if (failed(visit(user, v, s)))
      return failure();
  }
  return success();
}

LogicalResult Sharder::visit(Operation *user, Value v, Shard s) {
  if (visited.contains(user))
    return success();
  visited.insert(user);
  auto follow = [&](Value result, int64_t dim, int64_t unit) {
    result.setType(withDim(result.getType(), dim, s.count * unit));
    return propagate(result, Shard{dim, s.heads, s.first, s.count, unit});
  };
  if (auto mm = dyn_cast<onnx::MatMulOp>(user))
    return rowParallel(mm, v, s);
  if (auto r = dyn_cast<onnx::ReshapeOp>(user))
    return reshape(r, s);
  if (auto t = dyn_cast<onnx::TransposeOp>(user)) {
    std::optional<SmallVector<int64_t>> perm;
    if (auto p = t.getPermAttr())
      perm = SmallVector<int64_t>(
          llvm::map_range(p.getAsValueRange<IntegerAttr>(),
                          [](const APInt &i) { return i.getSExtValue(); }));
    if (!perm)
      return t.emitError(
          "--tensor-parallel: a transpose without perm on the heads' path");
    auto it = llvm::find(*perm, s.dim);
    return follow(t.getResult(), it - perm->begin(), s.unit);
  }
  if (auto sq = dyn_cast<onnx::SqueezeOp>(user)) {
    std::optional<SmallVector<int64_t>> axes = constantInts(sq.getAxes());
    int64_t rank = rankOf(v), dim = s.dim;
    if (!axes)
      return sq.emitError(
          "--tensor-parallel: a squeeze of unknown axes on the heads' path");
    for (int64_t a : *axes) {
      a = a < 0 ? a + rank : a;
      if (a == s.dim)
        return sq.emitError("--tensor-parallel: squeezes the heads' dimension");
      if (a < s.dim)
        --dim;
    }
    return follow(sq.getResult(), dim, s.unit);
  }
  if (auto un = dyn_cast<onnx::UnsqueezeOp>(user)) {
    std::optional<SmallVector<int64_t>> axes = constantInts(un.getAxes());
    if (!axes)
      return un.emitError(
          "--tensor-parallel: an unsqueeze of unknown axes on the heads' path");
    int64_t outRank = rankOf(un.getResult());
    SmallVector<bool> inserted(outRank, false);
    for (int64_t a : *axes)
      inserted[a < 0 ? a + outRank : a] = true;
    int64_t dim = 0;
    for (int64_t seen = -1; dim < outRank; ++dim)
      if (!inserted[dim] && ++seen == s.dim)
        break;
    return follow(un.getResult(), dim, s.unit);
  }
  if (isa<tensor::CastOp, onnx::CastOp>(user) || isUnary(user))
    return follow(user->getResult(0), s.dim, s.unit);
  if (auto rope = dyn_cast<RopeOp>(user)) {
    if (rope.getInput() != v)
      return rope.emitError("--tensor-parallel: RoPE tables carry the heads");
    return follow(rope.getResult(), s.dim, s.unit);
  }
  if (isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::PowOp>(
          user))
    return elementwise(user, v, s);
  // A size read of another dimension (the raised GroupQueryAttention's
  // checks) does not see the split.
  if (auto dim = dyn_cast<tensor::DimOp>(user)) {
    std::optional<int64_t> index = dim.getConstantIndex();
    if (!index || *index == s.dim)
      return dim.emitError(
          "--tensor-parallel: reads the size of the heads' dimension");
    visited.erase(user);
    return success();
  }
  if (auto concat = dyn_cast<onnx::ConcatOp>(user))
    return concatenate(concat, v, s);
  // A norm of each head (Qwen3's q_norm, k_norm) keeps the heads apart; one
  // over all heads' features (OLMo-2's) would need them all.
  if (isa<RMSNormOp, LayerNormOp>(user) && user->getOperand(0) == v) {
    if (s.dim == rankOf(v) - 1)
      return user->emitError(
          "--tensor-parallel: a norm over all heads' features needs the "
          "whole projection on every rank");
    return follow(user->getResult(0), s.dim, s.unit);
  }
  return user->emitError()
         << "--tensor-parallel: '" << user->getName()
         << "' on the path of the attention heads is not supported";
}

LogicalResult Sharder::elementwise(Operation *op, Value v, Shard s) {
  Value result = op->getResult(0);
  int64_t outRank = rankOf(result), dim = s.dim + outRank - rankOf(v);
  for (Value other : op->getOperands()) {
    if (other == v || mlpValues.contains(other))
      continue;
    int64_t at = dim - (outRank - rankOf(other));
    if (at < 0 || dimOf(other, at) == 1)
      continue;
    if (dimOf(other, at) != s.oldSize())
      return op->emitError(
          "--tensor-parallel: an operand of unknown extent beside the heads");
    OpBuilder b(op);
    FailureOr<Value> piece =
        sliceConstant(b, op->getLoc(), other, at, s.first * s.unit,
                      (s.first + s.count) * s.unit);
    if (failed(piece))
      return op->emitError(
          "--tensor-parallel: a non-constant operand beside the heads");
    op->replaceUsesOfWith(other, *piece);
  }
  result.setType(withDim(result.getType(), dim, s.newSize()));
  return propagate(result, Shard{dim, s.heads, s.first, s.count, s.unit});
}

LogicalResult Sharder::concatenate(onnx::ConcatOp op, Value v, Shard s) {
  int64_t rank = rankOf(v),
          axis = op.getAxis() < 0 ? op.getAxis() + rank : op.getAxis();
  if (axis == s.dim)
    return op.emitError(
        "--tensor-parallel: concatenates along the heads' dimension");
  OpBuilder b(op);
  for (OpOperand &operand : op->getOpOperands()) {
    Value other = operand.get();
    if (other == v)
      continue;
    auto cast = other.getDefiningOp<tensor::CastOp>();
    Value source = cast ? cast.getSource() : other;
    FailureOr<Value> piece = failure();
    if (dimOf(source, s.dim) == s.oldSize())
      piece = sliceConstant(b, op.getLoc(), source, s.dim, s.first * s.unit,
                            (s.first + s.count) * s.unit);
    if (failed(piece))
      return op.emitError(
          "--tensor-parallel: a concatenation with a non-constant beside "
          "the heads");
    Value replacement = *piece;
    if (cast)
      replacement = tensor::CastOp::create(
          b, op.getLoc(), withDim(cast.getType(), s.dim, s.newSize()), *piece);
    operand.set(replacement);
  }
  Value result = op.getResult();
  result.setType(withDim(result.getType(), s.dim, s.newSize()));
  return propagate(result, s);
}

FailureOr<Value> Sharder::shapeWithSize(onnx::ReshapeOp op, int64_t dim,
                                        int64_t oldSize, int64_t newSize) {
  Value shape = op.getShape();
  OpBuilder b(op);
  auto fixed = [&](int64_t v) { return v == -1 || v == newSize; };
  if (std::optional<SmallVector<int64_t>> ints = constantInts(shape)) {
    if (fixed((*ints)[dim]))
      return shape;
    if ((*ints)[dim] != oldSize)
      return failure();
    (*ints)[dim] = newSize;
    return i64Constant(b, op.getLoc(), *ints);
  }
  auto concat = shape.getDefiningOp<onnx::ConcatOp>();
  if (!concat)
    return failure();
  int64_t at = 0;
  SmallVector<Value> pieces(concat->getOperands());
  for (Value &piece : pieces) {
    int64_t n = dimOf(piece, 0);
    if (n == kDyn)
      return failure();
    if (dim < at + n) {
      std::optional<SmallVector<int64_t>> ints = constantInts(piece);
      if (!ints)
        return failure();
      if (fixed((*ints)[dim - at]))
        return shape;
      if ((*ints)[dim - at] != oldSize)
        return failure();
      (*ints)[dim - at] = newSize;
      piece = i64Constant(b, op.getLoc(), *ints);
      Operation *copy = b.clone(*concat);
      copy->setOperands(pieces);
      return copy->getResult(0);
    }
    at += n;
  }
  return failure();
}

LogicalResult Sharder::reshape(onnx::ReshapeOp op, Shard s) {
  auto in = cast<RankedTensorType>(op.getData().getType());
  auto out = dyn_cast<RankedTensorType>(op.getResult().getType());
  if (!out)
    return op.emitError(
        "--tensor-parallel: an unranked reshape on the heads' path");
  int64_t ri = in.getRank(), ro = out.getRank();
  int64_t dim = -1, unit = 0;
  if (s.dim == ri - 1 && ro == ri + 1 && !out.isDynamicDim(ro - 1) &&
      s.unit % out.getDimSize(ro - 1) == 0) {
    dim = ro - 2; // [.., H * D] -> [.., H, D]
    unit = s.unit / out.getDimSize(ro - 1);
  } else if (s.dim == ri - 2 && ro == ri - 1 && !in.isDynamicDim(ri - 1)) {
    dim = ro - 1; // [.., H, D] -> [.., H * D]
    unit = s.unit * in.getDimSize(ri - 1);
  } else if (ro - ri + s.dim >= 0) {
    dim = ro - ri + s.dim; // leading dims change, the heads and after do not
    unit = s.unit;
    for (int64_t d = s.dim + 1; d < ri; ++d)
      if (in.getDimSize(d) != out.getDimSize(d + ro - ri))
        dim = -1;
  }
  if (dim < 0 ||
      (!out.isDynamicDim(dim) && out.getDimSize(dim) != s.heads * unit))
    return op.emitError(
        "--tensor-parallel: a reshape that moves the attention heads");
  FailureOr<Value> shape =
      shapeWithSize(op, dim, s.heads * unit, s.count * unit);
  if (failed(shape))
    return op.emitError(
        "--tensor-parallel: the head count of this reshape is computed, "
        "not a constant");
  op->setOperand(1, *shape);
  op.getResult().setType(withDim(out, dim, s.count * unit));
  return propagate(op.getResult(), Shard{dim, s.heads, s.first, s.count, unit});
}

void Sharder::allReduceAfter(Value partial) {
  OpBuilder b(partial.getContext());
  b.setInsertionPointAfterValue(partial);
  auto sum = AllReduceOp::create(b, partial.getLoc(), partial);
  partial.replaceAllUsesExcept(sum.getResult(), sum);
}

LogicalResult Sharder::rowParallel(onnx::MatMulOp mm, Value v, Shard s) {
  if (mm.getA() != v || !constantMatrix(mm.getB()) ||
      s.dim != rankOf(mm.getA()) - 1)
    return mm.emitError(
        "--tensor-parallel: the attention's output is not projected by a "
        "constant f32 weight");
  OpBuilder b(mm);
  FailureOr<Value> w =
      sliceConstant(b, mm.getLoc(), mm.getB(), 0, s.first * s.unit,
                    (s.first + s.count) * s.unit);
  if (failed(w))
    return mm.emitError(
        "--tensor-parallel: cannot read the output projection's weight");
  mm->setOperand(1, *w);
  allReduceAfter(mm.getResult());
  return success();
}

LogicalResult Sharder::shardAttention(Operation *attention) {
  auto paged = dyn_cast<PagedAttentionOp>(attention);
  auto dense = dyn_cast<AttentionOp>(attention);
  int64_t hq = paged ? paged.getNumHeads() : dense.getNumHeads();
  int64_t hkv = paged ? paged.getNumKvHeads() : dense.getNumKvHeads();
  if (hq % ranks)
    return attention->emitError()
           << "--tensor-parallel=" << ranks << ": " << hq
           << " query heads do not split over " << ranks << " ranks";
  if (hkv % ranks && ranks % hkv)
    return attention->emitError()
           << "--tensor-parallel=" << ranks << ": " << hkv
           << " KV heads neither split over nor divide " << ranks << " ranks";
  if (paged && (paged.getLatent() || !paged.getScales().empty()))
    return attention->emitError(
        "--tensor-parallel: latent (MLA) and quantized KV pools are "
        "not split yet");
  if (dense && dense.getMask() && rankOf(dense.getMask()) >= 3 &&
      dimOf(dense.getMask(), -3) != 1 && dimOf(dense.getMask(), -3) != kDyn)
    return attention->emitError("--tensor-parallel: a per-head attention mask");
  int64_t qCount = hq / ranks, qFirst = rank * qCount;
  int64_t kvCount = hkv >= ranks ? hkv / ranks : 1,
          kvFirst = rank * hkv / ranks;

  KVWriteOp write =
      paged ? paged.getKeyPool().getDefiningOp<KVWriteOp>() : KVWriteOp();
  if (paged &&
      (!write || paged.getValuePool().getDefiningOp<KVWriteOp>() != write))
    return attention->emitError(
        "--tensor-parallel: the KV pools are not written by one "
        "xfmr.kv_write");
  Value q = attention->getOperand(0);
  Value k = paged ? write.getKey() : dense.getKey();
  Value v = paged ? write.getValue() : dense.getValue();
  FailureOr<onnx::MatMulOp> qp = projectionOf(attention, q, "query");
  if (failed(qp))
    return failure();
  FailureOr<onnx::MatMulOp> kp = projectionOf(attention, k, "key");
  if (failed(kp))
    return failure();
  FailureOr<onnx::MatMulOp> vp = projectionOf(attention, v, "value");
  if (failed(vp))
    return failure();
  if (failed(shardColumns(*qp, hq, qFirst, qCount)) ||
      failed(shardColumns(*kp, hkv, kvFirst, kvCount)) ||
      failed(shardColumns(*vp, hkv, kvFirst, kvCount)))
    return failure();
  for (auto [value, count] :
       {std::pair{q, qCount}, {k, kvCount}, {v, kvCount}}) {
    auto it = reached.find(value);
    if (it == reached.end() || it->second.dim != 1 || it->second.count != count)
      return attention->emitError(
          "--tensor-parallel: the heads do not reach the attention "
          "as its second dimension");
  }

  Builder b(attention->getContext());
  if (paged) {
    // The pools hold this rank's KV heads: [blocks, block_size, Hkv', D].
    for (Value pool : {write.getKeyPool(), write.getValuePool()}) {
      auto arg = dyn_cast<BlockArgument>(pool);
      if (!arg || arg.getOwner()->getParentOp() != f)
        return attention->emitError(
            "--tensor-parallel: a KV pool that is not an argument "
            "of the step function");
      arg.setType(withDim(arg.getType(), 2, kvCount));
    }
    if (poolHeads && poolHeads != kvCount)
      return attention->emitError(
          "--tensor-parallel: layers with different KV head counts");
    poolHeads = kvCount;
    write.getNewKeyPool().setType(write.getKeyPool().getType());
    write.getNewValuePool().setType(write.getValuePool().getType());
    paged.setNumHeads(qCount);
    paged.setNumKvHeads(kvCount);
    if (auto sinks = paged.getSinksAttr())
      paged.setSinks(sinks.asArrayRef().slice(qFirst, qCount));
  } else {
    dense.setNumHeads(qCount);
    dense.setNumKvHeads(kvCount);
    if (auto sinks = dense.getSinksAttr())
      dense.setSinks(sinks.asArrayRef().slice(qFirst, qCount));
  }
  Value out = attention->getResult(0);
  out.setType(withDim(out.getType(), 1, qCount));
  int64_t unit = 1;
  visited.insert(attention);
  if (failed(propagate(out, Shard{1, hq, qFirst, qCount, unit})))
    return failure();
  ++attentions;
  return success();
}

LogicalResult Sharder::shardMLP(GatedMLPOp mlp) {
  int64_t inter = dimOf(mlp.getWGate(), 1);
  if (inter == kDyn || inter % ranks)
    return mlp.emitError()
           << "--tensor-parallel=" << ranks << ": the MLP's " << inter
           << " intermediate columns do not split over the ranks";
  int64_t n = inter / ranks, first = rank * n;
  OpBuilder b(mlp);
  FailureOr<Value> g =
      sliceConstant(b, mlp.getLoc(), mlp.getWGate(), 1, first, first + n);
  FailureOr<Value> u =
      sliceConstant(b, mlp.getLoc(), mlp.getWUp(), 1, first, first + n);
  FailureOr<Value> d =
      sliceConstant(b, mlp.getLoc(), mlp.getWDown(), 0, first, first + n);
  if (failed(g) || failed(u) || failed(d))
    return mlp.emitError(
        "--tensor-parallel: the MLP's weights are not constants");
  mlp.getWGateMutable().assign(*g);
  mlp.getWUpMutable().assign(*u);
  mlp.getWDownMutable().assign(*d);
  allReduceAfter(mlp.getResult());
  ++mlps;
  return success();
}

void Sharder::shardLMHead(onnx::MatMulOp mm) {
  auto wType = cast<RankedTensorType>(mm.getB().getType());
  int64_t vocab = wType.getDimSize(1), n = vocab / ranks;
  OpBuilder b(mm);
  FailureOr<Value> w =
      sliceConstant(b, mm.getLoc(), mm.getB(), 1, rank * n, (rank + 1) * n);
  if (failed(w))
    return;
  mm->setOperand(1, *w);
  Value logits = mm.getResult();
  Type full = logits.getType();
  logits.setType(withDim(full, rankOf(logits) - 1, n));
  b.setInsertionPointAfter(mm);
  auto gather = AllGatherOp::create(b, mm.getLoc(), full, logits,
                                    b.getI64IntegerAttr(ranks));
  logits.replaceAllUsesExcept(gather.getResult(), gather);
  ++vocabulary;
}

LogicalResult Sharder::shardEmbedding(EmbeddingOp e) {
  int64_t vocab = dimOf(e.getTable(), 0), n = vocab / ranks, first = rank * n;
  OpBuilder b(e);
  Location loc = e.getLoc();
  FailureOr<Value> table =
      sliceConstant(b, loc, e.getTable(), 0, first, first + n);
  if (failed(table))
    return e.emitError(
        "--tensor-parallel: the embedding table is not a constant");
  Value ids = e.getIds();
  auto idsType = cast<RankedTensorType>(ids.getType());
  auto scalar = RankedTensorType::get({}, idsType.getElementType());
  auto constant = [&](int64_t v) {
    return makeConstant(
        b, loc,
        DenseElementsAttr::get(scalar,
                               b.getIntegerAttr(scalar.getElementType(), v)));
  };
  auto bools = idsType.clone(b.getI1Type());
  // The rank's first row is data (a rank shard in the weights file), not
  // code: every rank's code stays the same.
  Value offset;
  if (idsType.getElementType().isInteger(64)) {
    int64_t v = first;
    offset = blobConstant(
        b, loc, {}, scalar.getElementType(),
        ArrayRef<char>(reinterpret_cast<const char *>(&v), sizeof(v)),
        "xfmr.tp.vocabulary_offset");
  } else {
    int32_t v = static_cast<int32_t>(first);
    offset = blobConstant(
        b, loc, {}, scalar.getElementType(),
        ArrayRef<char>(reinterpret_cast<const char *>(&v), sizeof(v)),
        "xfmr.tp.vocabulary_offset");
  }
  Value local = onnxOp(b, loc, "Sub", idsType, {ids, offset});
  Value zero = constant(0);
  Value inRange =
      onnxOp(b, loc, "And", bools,
             {onnxOp(b, loc, "GreaterOrEqual", bools, {local, zero}),
              onnxOp(b, loc, "Less", bools, {local, constant(n)})});
  Value safe = onnxOp(b, loc, "Where", idsType, {inRange, local, zero});
  auto rows = EmbeddingOp::create(b, loc, e.getType(), *table, safe, Value());
  auto rowType = cast<RankedTensorType>(e.getType());
  Value keep =
      onnxOp(b, loc, "Cast", idsType.clone(rowType.getElementType()), {inRange},
             {b.getNamedAttr("to", b.getI64IntegerAttr(1))});
  Value keepRows = unsqueeze(b, loc, keep, idsType.getRank());
  Value masked = onnxOp(b, loc, "Mul", rowType, {rows.getResult(), keepRows});
  auto sum = AllReduceOp::create(b, loc, masked);
  e.getResult().replaceAllUsesWith(sum.getResult());
  e.erase();
  ++vocabulary;
  return success();
}

SmallVector<onnx::MatMulOp> Sharder::ungatedMLP(onnx::MatMulOp down) {
  auto w = dyn_cast<RankedTensorType>(down.getB().getType());
  if (!w || w.getRank() != 2 || !w.hasStaticShape() ||
      !constantMatrix(down.getB()))
    return {};
  int64_t inter = w.getDimSize(0);
  SmallVector<onnx::MatMulOp> ups;
  SmallVector<Value> work{down.getA()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (isConstant(v)) {
      if (rankOf(v) == 0 || dimOf(v, -1) == 1 || dimOf(v, -1) == inter)
        continue; // a scalar, or a bias of the intermediate columns
      return {};
    }
    if (!seen.insert(v).second)
      continue;
    if (dimOf(v, -1) != inter)
      return {};
    Operation *def = v.getDefiningOp();
    if (auto mm = dyn_cast_or_null<onnx::MatMulOp>(def)) {
      auto u = dyn_cast<RankedTensorType>(mm.getB().getType());
      if (!u || u.getRank() != 2 || u.getDimSize(1) != inter ||
          !constantMatrix(mm.getB()) || visited.contains(mm))
        return {};
      ups.push_back(mm);
      continue;
    }
    if (!def ||
        !(isUnary(def) || isa<onnx::CastOp, onnx::AddOp, onnx::SubOp,
                              onnx::MulOp, onnx::DivOp, onnx::PowOp>(def)))
      return {};
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  // Every value on the way is used only inside the MLP.
  for (Value v : seen)
    for (Operation *user : v.getUsers())
      if (user != down.getOperation() &&
          !llvm::any_of(user->getResults(),
                        [&](Value r) { return seen.contains(r); }))
        return {};
  mlpValues.insert(seen.begin(), seen.end());
  return ups;
}

LogicalResult Sharder::shardUngatedMLP(onnx::MatMulOp down,
                                       ArrayRef<onnx::MatMulOp> ups) {
  int64_t inter = dimOf(down.getB(), 0);
  if (inter % ranks)
    return success(); // stays replicated
  for (onnx::MatMulOp up : ups)
    if (failed(shardColumns(up, inter, rank * (inter / ranks), inter / ranks)))
      return failure();
  if (!visited.contains(down))
    return down.emitError(
        "--tensor-parallel: the MLP's columns do not reach its down "
        "projection");
  ++mlps;
  return success();
}

LogicalResult Sharder::run() {
  // Fused projections cut into q, k, v (onnxruntime-genai's packed QKV
  // before GroupQueryAttention) become one product each, as xfmr-raise
  // does for the exporters' (SplitProjections.cpp).
  SmallVector<onnx::MatMulOp> products;
  f.walk([&](onnx::MatMulOp mm) { products.push_back(mm); });
  IRRewriter rewriter(f.getContext());
  RaiseLog log;
  for (onnx::MatMulOp mm : products)
    (void)splitFusedProjection(mm, rewriter, log);

  SmallVector<Operation *> attentionOps;
  SmallVector<GatedMLPOp> mlpOps;
  f.walk([&](Operation *op) {
    if (isa<PagedAttentionOp, AttentionOp>(op))
      attentionOps.push_back(op);
    else if (auto mlp = dyn_cast<GatedMLPOp>(op))
      mlpOps.push_back(mlp);
  });
  if (f.getBody()
          .walk([](MoEOp) { return WalkResult::interrupt(); })
          .wasInterrupted())
    return f.emitError(
        "--tensor-parallel: mixture-of-experts layers are split with "
        "--expert-parallel, not yet combined with --tensor-parallel");
  for (Operation *a : attentionOps)
    if (failed(shardAttention(a)))
      return failure();
  for (GatedMLPOp mlp : mlpOps)
    if (failed(shardMLP(mlp)))
      return failure();
  // MLPs left as products: each down projection whose input comes only
  // from products of its width through elementwise ops.
  SmallVector<std::pair<onnx::MatMulOp, SmallVector<onnx::MatMulOp>>> ungated;
  f.walk([&](onnx::MatMulOp down) {
    if (visited.contains(down))
      return;
    SmallVector<onnx::MatMulOp> ups = ungatedMLP(down);
    if (!ups.empty())
      ungated.emplace_back(down, std::move(ups));
  });
  for (auto &[down, ups] : ungated)
    if (failed(shardUngatedMLP(down, ups)))
      return failure();
  // The vocabulary: an f32 embedding table and LM head whose rows / columns
  // split evenly (else they stay replicated).
  SmallVector<EmbeddingOp> embeddings;
  f.walk([&](EmbeddingOp e) { embeddings.push_back(e); });
  for (EmbeddingOp e : embeddings) {
    auto table = cast<RankedTensorType>(e.getTable().getType());
    if (!e.getScales() && table.getElementType().isF32() &&
        table.hasStaticShape() && table.getDimSize(0) % ranks == 0 &&
        isConstant(e.getTable()) &&
        cast<RankedTensorType>(e.getType()).getElementType().isF32() &&
        failed(shardEmbedding(e)))
      return failure();
  }
  SmallVector<onnx::MatMulOp> heads;
  f.walk([&](onnx::MatMulOp mm) {
    auto w = dyn_cast<RankedTensorType>(mm.getB().getType());
    if (!visited.contains(mm) && w && w.getRank() == 2 && w.hasStaticShape() &&
        w.getDimSize(1) % ranks == 0 && constantMatrix(mm.getB()) &&
        reachesReturn(mm.getResult()))
      heads.push_back(mm);
  });
  for (onnx::MatMulOp mm : heads)
    shardLMHead(mm);
  if (attentions + mlps + vocabulary == 0)
    return f.emitError(
        "--tensor-parallel: no attention, gated MLP, embedding or LM head was "
        "raised, nothing to split");
  // A shard may leave the function only as a KV pool.
  for (auto &[value, shard] : reached)
    for (OpOperand &use : value.getUses())
      if (isa<func::ReturnOp>(use.getOwner()) &&
          !value.getDefiningOp<KVWriteOp>())
        return use.getOwner()->emitError()
               << "--tensor-parallel: result " << use.getOperandNumber()
               << " is one rank's heads (the model returns its keys and "
                  "values): compile "
                  "with --kv-cache=paged";
  auto ret = cast<func::ReturnOp>(f.getBody().back().getTerminator());
  f.setFunctionType(FunctionType::get(
      f.getContext(), f.getBody().getArgumentTypes(), ret.getOperandTypes()));
  return success();
}

struct ShardTensorParallelPass
    : impl::ShardTensorParallelPassBase<ShardTensorParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    if (ranks < 1 || rank < 0 || rank >= ranks) {
      getOperation().emitError() << "xfmr-shard-tensor-parallel: rank " << rank
                                 << " of " << ranks << " ranks";
      return signalPassFailure();
    }
    if (ranks == 1)
      return;
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      Sharder sharder(f, ranks, rank);
      if (failed(sharder.run()))
        return signalPassFailure();
      numAttention += sharder.attentions;
      numMLP += sharder.mlps;
      numVocabulary += sharder.vocabulary;
      // xfmr-paged-kv's description of the pools, for the runtime.
      auto kv = getOperation()->getAttrOfType<DictionaryAttr>("xfmr.kv_cache");
      if (kv && sharder.poolHeads) {
        NamedAttrList entries(kv);
        entries.set("num_kv_heads",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     sharder.poolHeads));
        getOperation()->setAttr("xfmr.kv_cache",
                                entries.getDictionary(&getContext()));
      }
    }
  }
};

} // namespace
} // namespace xfmr
