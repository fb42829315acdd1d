//===- StepPositions.cpp - a step function's positions for derived ones ---===//
//
// Part of xfmr.
//
// Exports without a position_ids input derive positions from the sequence:
// Hugging Face's `cache_position = arange(past, past + S)` (then
// `position_ids = cache_position[None]`), GPT-2's `arange(0, S)`, or
// `cumsum(attention_mask, -1) - 1`. xfmr-paged-kv runs the graph at batch 1
// on the T packed tokens of many sequences with no past and a ones mask, so
// those expressions evaluate to 0..T-1: right for one sequence, wrong for a
// packed batch. This file finds them and substitutes the step's `positions`
// input, which holds each packed token's own position:
//   Range(start, limit, 1) with start == 0 and limit == T   ->  positions
//   CumSum(ones [1, T], axis 1)                              ->  positions + 1
// where T is proven to be the packed length by following dims to the tokens
// (onnx::getDimOrigin) through the shape arithmetic, evaluated as a*T + c.
// Any other live Range or CumSum whose value depends on T is refused, naming
// the node: the pass cannot prove it is a position.
//
//===----------------------------------------------------------------------===//

#include "StepPositions.h"

#include "Match.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace xfmr::raise {
namespace {

/// A scalar integer known as t * T + c.
struct Affine {
  int64_t t = 0, c = 0;
  bool operator==(const Affine &o) const { return t == o.t && c == o.c; }
};

class StepLength {
public:
  explicit StepLength(ArrayRef<std::pair<Value, int64_t>> dims) : dims(dims) {}

  /// Whether dim `i` of `v` is the packed token count.
  bool isT(Value v, int64_t i) const {
    int budget = 256;
    return isTWithin(v, i, budget);
  }

  /// Entry `k` of a 0-D/1-D integer tensor as a*T + c, if known.
  std::optional<Affine> entry(Value v, int64_t k, int depth = 0) const {
    if (!v || depth > 24 || k < 0)
      return std::nullopt;
    if (auto c = constantInts(v)) {
      if (c->size() == 1)
        return Affine{0, (*c)[0]};
      if (k < static_cast<int64_t>(c->size()))
        return Affine{0, (*c)[k]};
      return std::nullopt;
    }
    Operation *op = v.getDefiningOp();
    if (!op || !isa<onnx::ONNXDialect>(op->getDialect()))
      return std::nullopt;
    StringRef name = op->getName().getStringRef();
    name.consume_front("onnx.");
    if (name == "Shape") {
      Value x = op->getOperand(0);
      // The step's stand-ins (an empty past, ...) are casts of static
      // tensors to the old inputs' types.
      while (auto cast = x.getDefiningOp<tensor::CastOp>())
        x = cast.getSource();
      int64_t rank = rankOf(x);
      if (rank < 0)
        return std::nullopt;
      int64_t start = 0;
      if (auto a = op->getAttrOfType<IntegerAttr>("start"))
        start = a.getInt() < 0 ? a.getInt() + rank : a.getInt();
      int64_t d = start + k;
      if (d < 0 || d >= rank)
        return std::nullopt;
      if (!ShapedType::isDynamic(dimOf(x, d)))
        return Affine{0, dimOf(x, d)};
      if (isT(x, d))
        return Affine{1, 0};
      return std::nullopt;
    }
    if (name == "Cast" || name == "Identity" || name == "Squeeze" || name == "Unsqueeze" ||
        name == "Reshape")
      return entry(op->getOperand(0), k, depth + 1);
    if (name == "Gather") {
      auto idx = constantInts(op->getOperand(1));
      if (!idx || idx->empty())
        return std::nullopt;
      int64_t i = (*idx)[idx->size() == 1 ? 0 : k];
      if (i < 0) {
        int64_t n = dimOf(op->getOperand(0), 0);
        if (ShapedType::isDynamic(n))
          return std::nullopt;
        i += n;
      }
      return entry(op->getOperand(0), i, depth + 1);
    }
    if (name == "Slice") {
      auto starts = constantInts(op->getOperand(1));
      if (!starts || starts->size() != 1 || (*starts)[0] < 0 || op->getNumOperands() > 4)
        return std::nullopt;
      return entry(op->getOperand(0), (*starts)[0] + k, depth + 1);
    }
    if (name == "Concat") {
      for (Value part : op->getOperands()) {
        int64_t n = dimOf(part, 0);
        if (rankOf(part) == 0)
          n = 1;
        if (ShapedType::isDynamic(n))
          return std::nullopt;
        if (k < n)
          return entry(part, k, depth + 1);
        k -= n;
      }
      return std::nullopt;
    }
    if (name == "Add" || name == "Sub" || name == "Mul") {
      auto a = entry(op->getOperand(0), k, depth + 1);
      auto b = entry(op->getOperand(1), k, depth + 1);
      if (!a || !b)
        return std::nullopt;
      if (name == "Add")
        return Affine{a->t + b->t, a->c + b->c};
      if (name == "Sub")
        return Affine{a->t - b->t, a->c - b->c};
      if (a->t && b->t)
        return std::nullopt;
      return Affine{a->t * b->c + b->t * a->c, a->c * b->c};
    }
    return std::nullopt;
  }

  /// Whether `v` (an integer tensor) is all ones of shape [1, T] or [T].
  bool isOnesOverT(Value v) const {
    for (int i = 0; i < 8; ++i) {
      if (auto cast = def<onnx::CastOp>(v))
        v = cast.getInput();
      else if (auto shapeCast = def<tensor::CastOp>(v))
        v = shapeCast.getSource();
      else
        break;
    }
    Operation *op = v.getDefiningOp();
    if (!op || op->getName().getStringRef() != "onnx.ConstantOfShape")
      return false;
    auto value = op->getAttrOfType<DenseElementsAttr>("value");
    if (!value || value.getNumElements() != 1)
      return false;
    bool one = isa<FloatType>(value.getElementType())
                   ? (*value.getValues<APFloat>().begin()).convertToDouble() == 1.0
                   : (*value.getValues<APInt>().begin()).getSExtValue() == 1;
    int64_t rank = rankOf(v);
    if (!one || rank < 1 || rank > 2 || (rank == 2 && dimOf(v, 0) != 1))
      return false;
    return isT(v, rank - 1);
  }

private:
  /// isT with a shared step budget (the walk may branch at broadcasts).
  bool isTWithin(Value v, int64_t i, int &budget) const {
    if (--budget < 0)
      return false;
    if (llvm::is_contained(dims, std::make_pair(v, i)))
      return true;
    auto [from, dim] = onnx::getDimOrigin(v, i);
    if (from != v || dim != i)
      return isTWithin(from, dim, budget);
    // Through the raised ops (the ONNX dim walk stops at them): an
    // embedding's leading dims are its ids', norms/RoPE/MLPs keep the
    // input's shape, attention and quantized products all but the feature
    // dim of their first operand's.
    Operation *op = v.getDefiningOp();
    if (!op)
      return false;
    if (auto cast = dyn_cast<tensor::CastOp>(op))
      return isTWithin(cast.getSource(), i, budget);
    if (auto emb = dyn_cast<EmbeddingOp>(op))
      return i < rankOf(emb.getIds()) && isTWithin(emb.getIds(), i, budget);
    if (isa<RMSNormOp, LayerNormOp, RopeOp, GatedMLPOp>(op))
      return isTWithin(op->getOperand(0), i, budget);
    if (isa<AttentionOp, PagedAttentionOp, LinearOp, onnx::MsMatMulNBitsOp>(op))
      return i + 1 < rankOf(v) && isTWithin(op->getOperand(0), i, budget);
    // A broadcasting elementwise op whose operands' origins differ (a
    // residual add of an embedding and a layer's output): its dim is any
    // operand's that is not 1, since the others must equal it or be 1.
    if (isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::WhereOp>(op)) {
      int64_t rank = rankOf(v);
      for (Value operand : op->getOperands()) {
        int64_t off = rank - rankOf(operand);
        if (rankOf(operand) < 0 || off < 0 || i < off || dimOf(operand, i - off) == 1)
          continue;
        if (isTWithin(operand, i - off, budget))
          return true;
      }
    }
    return false;
  }

  SmallVector<std::pair<Value, int64_t>> dims;
};

} // namespace

LogicalResult substituteStepPositions(func::FuncOp f, ArrayRef<std::pair<Value, int64_t>> tDims,
                                      Value positions, RaiseLog *log) {
  StepLength len(tDims);
  SmallVector<Operation *> ranges, cumsums;
  f.walk([&](Operation *op) {
    StringRef name = op->getName().getStringRef();
    if (name == "onnx.Range")
      ranges.push_back(op);
    else if (name == "onnx.CumSum")
      cumsums.push_back(op);
  });
  auto refuse = [&](Operation *op, const Twine &why) {
    return op->emitError("xfmr-paged-kv: ")
           << nodeName(op) << " derives positions from the sequence in a form that cannot be "
           << "proven to be the step's positions (" << why
           << "); export the model with a position_ids input";
  };
  auto dependsOnT = [&](Operation *op) {
    for (Value operand : op->getOperands()) {
      auto e = len.entry(operand, 0);
      if (!e || e->t)
        return true;
    }
    return false;
  };
  Type posType = elementTypeOf(positions);
  for (Operation *op : ranges) {
    if (op->use_empty() || !dependsOnT(op))
      continue;
    auto start = len.entry(op->getOperand(0), 0), limit = len.entry(op->getOperand(1), 0),
         delta = len.entry(op->getOperand(2), 0);
    if (!start || !limit || !delta || !(*delta == Affine{0, 1}) || !(*start == Affine{0, 0}) ||
        !(*limit == Affine{1, 0}))
      return refuse(op, "a Range that is not 0..T-1 over the T new tokens");
    if (elementTypeOf(op->getResult(0)) != posType)
      return refuse(op, "a Range of another element type than the positions");
    OpBuilder b(op);
    Value replacement = positions;
    if (replacement.getType() != op->getResult(0).getType())
      replacement = tensor::CastOp::create(b, op->getLoc(), op->getResult(0).getType(), positions);
    op->getResult(0).replaceAllUsesWith(replacement);
    if (log)
      log->formed("step_positions");
  }
  for (Operation *op : cumsums) {
    if (op->use_empty() || !dependsOnT(op))
      continue;
    Value x = op->getOperand(0);
    auto axis = len.entry(op->getOperand(1), 0);
    int64_t rank = rankOf(x);
    bool lastAxis = axis && axis->t == 0 && (axis->c == -1 || axis->c == rank - 1);
    auto flag = [&](StringRef n) {
      auto a = op->getAttrOfType<IntegerAttr>(n);
      return a && a.getInt() != 0;
    };
    if (!lastAxis || flag("exclusive") || flag("reverse") || !len.isOnesOverT(x))
      return refuse(op, "a CumSum that is not the running count of an attention mask");
    if (elementTypeOf(op->getResult(0)) != posType)
      return refuse(op, "a CumSum of another element type than the positions");
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value row = rank == 2 ? unsqueeze(b, loc, positions, 0) : positions;
    auto rowType = cast<RankedTensorType>(row.getType());
    Value one = makeConstant(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({1}, posType),
                                       b.getIntegerAttr(posType, 1)));
    Value counted = onnx::AddOp::create(b, loc, rowType, row, one);
    if (counted.getType() != op->getResult(0).getType())
      counted = tensor::CastOp::create(b, loc, op->getResult(0).getType(), counted);
    op->getResult(0).replaceAllUsesWith(counted);
    if (log)
      log->formed("step_positions");
  }
  return success();
}

} // namespace xfmr::raise
