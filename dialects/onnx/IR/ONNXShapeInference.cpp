//===- ONNXShapeInference.cpp - result shapes of onnx ops -----------------===//
//
// Part of xfmr.
//
// Refines result types from operand types and constant operands, following
// the ONNX spec's shape rules. Element types are set by the importer; this
// only makes shapes more precise, never less. Ops without a rule keep what
// the model's value_info said (or an unranked result).
//
// Rules dispatch on the generated op classes (ONNXOps.gen.td) and read
// attributes through their accessors, which apply the schema's defaults:
// op groups that share a rule (same shape as operand 0, broadcast of the
// operands, reductions) are lists of op classes, every other op has its own
// `infer<Op>` function.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace xfmr::onnx;

namespace {
using Shape = SmallVector<int64_t>;
constexpr int64_t kDyn = ShapedType::kDynamic;

std::optional<Shape> shapeOf(Value v) {
  if (!v)
    return std::nullopt;
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return Shape(t.getShape());
  return std::nullopt;
}

/// ODS reads an ONNX int attribute (I64Attr) as uint64_t; ONNX ints are
/// signed (axes count from the end when negative), so every attribute value
/// goes through this before arithmetic.
int64_t signedAttr(uint64_t value) { return static_cast<int64_t>(value); }

/// An optional operand, null when it is absent (`none`).
Value presentOrNull(Value v) {
  return v && !isa<NoneType>(v.getType()) ? v : Value();
}

/// A value's type may change in place only if every user accepts any tensor
/// type: onnx ops, and the return of a function nobody calls (its signature
/// follows). Calls and other dialects' ops keep their types.
bool canRefine(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<ONNXDialect>(user->getDialect()))
      continue;
    if (isa<func::ReturnOp>(user)) {
      auto func = user->getParentOfType<func::FuncOp>();
      auto module = func ? func->getParentOfType<ModuleOp>() : ModuleOp();
      if (func && module && SymbolTable::symbolKnownUseEmpty(func, module))
        continue;
    }
    return false;
  }
  return true;
}

/// Sets result `i` to `shape` where that adds information: unranked becomes
/// ranked, dynamic dims become static. Conflicting static dims keep the old.
bool refine(Operation *op, unsigned i, ArrayRef<int64_t> shape) {
  if (i >= op->getNumResults())
    return false;
  Value r = op->getResult(i);
  auto tensor = dyn_cast<TensorType>(r.getType());
  if (!tensor || !canRefine(r))
    return false;
  for (int64_t d : shape)
    if (d < 0 && d != kDyn)
      return false; // never build an invalid type from bad input
  Shape merged(shape);
  if (auto ranked = dyn_cast<RankedTensorType>(tensor)) {
    if (ranked.getRank() != static_cast<int64_t>(shape.size()))
      return false;
    for (auto [m, old] : llvm::zip(merged, ranked.getShape()))
      if (!ShapedType::isDynamic(old))
        m = old;
    if (ArrayRef<int64_t>(merged) == ranked.getShape())
      return false;
  }
  r.setType(RankedTensorType::get(merged, tensor.getElementType()));
  return true;
}

int64_t normAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// Products and sums of dims; dynamic (or overflowing, on bad input) stays
/// dynamic rather than wrapping.
int64_t mulDims(int64_t a, int64_t b) {
  int64_t r;
  if (a == kDyn || b == kDyn || a < 0 || b < 0 ||
      __builtin_mul_overflow(a, b, &r))
    return kDyn;
  return r;
}
int64_t addDims(int64_t a, int64_t b) {
  int64_t r;
  if (a == kDyn || b == kDyn || a < 0 || b < 0 ||
      __builtin_add_overflow(a, b, &r))
    return kDyn;
  return r;
}

std::optional<Shape> broadcast(ArrayRef<Shape> shapes) {
  size_t rank = 0;
  for (const Shape &s : shapes)
    rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape &s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i], &o = out[off + i];
      if (d == 1)
        continue;
      if (o == 1 || o == kDyn)
        o = (o == kDyn && d == kDyn) ? kDyn
                                     : (o == 1 ? d : (d == kDyn ? kDyn : d));
      else if (d != kDyn && d != o)
        return std::nullopt;
    }
  }
  return out;
}

std::optional<Shape> allShapesBroadcast(Operation *op) {
  SmallVector<Shape> shapes;
  for (Value v : op->getOperands()) {
    auto s = shapeOf(v);
    if (!s)
      return std::nullopt;
    shapes.push_back(*s);
  }
  return broadcast(shapes);
}

//===----------------------------------------------------------------------===//
// Op groups that share a shape rule
//===----------------------------------------------------------------------===//

enum class Rule { None, Same, Broadcast };

/// Ops whose result has the shape of operand 0 (Same) or the broadcast of
/// all operands (Broadcast).
Rule shapeRule(Operation *op) {
  if (isa<AbsOp, AcosOp, AcoshOp, AsinOp, AsinhOp, AtanOp, AtanhOp, CastOp,
          CastLikeOp, CeilOp, CeluOp, ClipOp, CosOp, CoshOp, CumSumOp,
          DequantizeLinearOp, EluOp, ErfOp, ExpOp, FloorOp, GeluOp, HardmaxOp,
          HardSigmoidOp, HardSwishOp, IdentityOp, IsInfOp, IsNaNOp, LeakyReluOp,
          LogOp, LogSoftmaxOp, MishOp, NegOp, NotOp, QuantizeLinearOp,
          ReciprocalOp, ReluOp, RoundOp, SeluOp, ShrinkOp, SigmoidOp, SignOp,
          SinOp, SinhOp, SoftmaxOp, SoftplusOp, SoftsignOp, SqrtOp, TanOp,
          TanhOp, ThresholdedReluOp, TriluOp, DropoutOp>(op))
    return Rule::Same;
  if (isa<LayerNormalizationOp, RMSNormalizationOp, RotaryEmbeddingOp,
          MsRotaryEmbeddingOp, SimplifiedLayerNormalizationOp,
          MsSkipSimplifiedLayerNormalizationOp, MsSkipLayerNormalizationOp,
          ScatterNDOp, ScatterElementsOp>(op))
    return Rule::Same;
  if (isa<AddOp, SubOp, MulOp, DivOp, PowOp, ModOp, AndOp, OrOp, XorOp, EqualOp,
          LessOp, GreaterOp, LessOrEqualOp, GreaterOrEqualOp, BitShiftOp,
          PReluOp, MaxOp, MinOp, SumOp, MeanOp, WhereOp>(op))
    return Rule::Broadcast;
  return Rule::None;
}

/// What a reduction removes: Reduce* ops take their axes as an optional
/// operand (none or empty: every axis, or none with noop_with_empty_axes),
/// ArgMax/ArgMin one `axis` attribute.
struct Reduction {
  Value input;
  /// Reduce*'s axes operand; null when absent or for ArgMax/ArgMin.
  Value axes;
  /// ArgMax/ArgMin's axis.
  std::optional<int64_t> axis;
  bool keepDims = true;
  bool noopWithEmptyAxes = false;
};

/// The reduction `op` performs, if it is one.
std::optional<Reduction> getReduction(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<Reduction>>(op)
      .Case<ReduceL1Op, ReduceL2Op, ReduceLogSumOp, ReduceLogSumExpOp,
            ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceProdOp, ReduceSumOp,
            ReduceSumSquareOp>([](auto op) {
        return Reduction{op.getData(), presentOrNull(op.getAxes()),
                         std::nullopt, op.getKeepdims() != 0,
                         op.getNoopWithEmptyAxes() != 0};
      })
      .Case<ArgMaxOp, ArgMinOp>([](auto op) {
        return Reduction{op.getData(), Value(), signedAttr(op.getAxis()),
                         op.getKeepdims() != 0, false};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Which of the `rank` input dims `r` reduces; nullopt when the axes are not
/// constant or out of range.
std::optional<SmallVector<bool>> reducedDims(const Reduction &r, int64_t rank) {
  SmallVector<bool> reduce(rank, false);
  std::optional<Shape> axes;
  if (r.axis) {
    axes = Shape{normAxis(*r.axis, rank)};
  } else if (r.axes) {
    axes = getConstantInts(r.axes);
    if (!axes)
      return std::nullopt;
  }
  if (!axes || axes->empty()) {
    // noop_with_empty_axes: nothing reduced.
    if (r.axis || !r.noopWithEmptyAxes)
      reduce.assign(rank, true);
    return reduce;
  }
  for (int64_t a : *axes) {
    a = normAxis(a, rank);
    if (a < 0 || a >= rank)
      return std::nullopt;
    reduce[a] = true;
  }
  return reduce;
}

//===----------------------------------------------------------------------===//
// Where a dimension comes from
//===----------------------------------------------------------------------===//

/// A dimension named by where it comes from: dim `index` of `value`, or the
/// sum of that and dim `index2` of `value2` (a KV cache's past + new length:
/// the Concat of past and new along the sequence, and the shape arithmetic
/// Shape(past)[2] + Shape(input_ids)[1] that reshapes it).
struct DimOrigin {
  Value value;
  int64_t index = -1;
  Value value2;
  int64_t index2 = -1;
  bool isSum() const { return static_cast<bool>(value2); }
  bool operator==(const DimOrigin &o) const {
    return value == o.value && index == o.index && value2 == o.value2 &&
           index2 == o.index2;
  }
  bool operator!=(const DimOrigin &o) const { return !(*this == o); }
};

/// a + b in a canonical order, if both are single dims.
std::optional<DimOrigin> sumOf(DimOrigin a, DimOrigin b) {
  if (!a.value || !b.value || a.isSum() || b.isSum())
    return std::nullopt;
  auto key = [](const DimOrigin &o) {
    return std::make_pair(o.value.getAsOpaquePointer(), o.index);
  };
  if (key(b) < key(a))
    std::swap(a, b);
  return DimOrigin{a.value, a.index, b.value, b.index};
}

std::optional<Shape> shapeValue(Value v, int depth = 0);
/// One entry of a shape tensor: its value (kDyn when unknown) and, for an
/// unknown one taken from a Shape op, the dimension it names.
struct ShapeEntry {
  int64_t value = kDyn;
  DimOrigin origin;
};
using ShapeEntries = SmallVector<ShapeEntry>;
std::optional<ShapeEntries> shapeEntries(Value v, int depth = 0);

/// Walks dim `i` of `v` back through ops that pass it through unchanged
/// (elementwise ops, the rows of a MatMul, the index dims of a Gather,
/// transposes, the kept dims of a Reshape...), so that two dynamic dims with
/// the same origin are known to be equal at run time. This is what lets
/// `Reshape(x, Concat(Shape(x)[:2], [-1, 8]))` (Hugging Face's
/// `view(*input_shape, -1, head_dim)`) infer its -1.
DimOrigin dimOriginWithin(Value v, int64_t i, int &budget);

/// Bounded walk: shared sub-DAGs (Add(x, x) chains) and the shape tensors
/// it reads on the way (which walk dims again) make at most
/// `kDimOriginBudget` steps per outermost query.
constexpr int kDimOriginBudget = 2048;
thread_local int dimOriginNesting = 0;
thread_local int dimOriginBudget = 0;
DimOrigin dimOrigin(Value v, int64_t i) {
  if (dimOriginNesting++ == 0)
    dimOriginBudget = kDimOriginBudget;
  DimOrigin o = dimOriginWithin(v, i, dimOriginBudget);
  --dimOriginNesting;
  return o;
}

/// Graph inputs' dims that carry the same dim_param are one dimension (the
/// ONNX IR: "the same dim_param within a graph denotes the same value"), so
/// such a dim is named by the first input dim with that name. A dynamo export
/// without value_info reshapes the hidden states of `input_ids` with
/// Shape(attention_mask)[1] as their sequence length: both are "sequence".
/// The runtime binds each name once and refuses inputs that disagree
/// (Artifact::run), so what this infers holds whenever the model runs.
DimOrigin namedInputDim(BlockArgument arg, int64_t i) {
  DimOrigin self{arg, i};
  auto func = dyn_cast_or_null<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.front())
    return self;
  auto nameAt = [&](unsigned a, int64_t d) -> StringAttr {
    auto params = func.getArgAttrOfType<ArrayAttr>(a, "onnx.dim_params");
    if (!params || d < 0 || d >= static_cast<int64_t>(params.size()))
      return {};
    auto name = dyn_cast<StringAttr>(params[d]);
    return name && !name.empty() ? name : StringAttr();
  };
  StringAttr name = nameAt(arg.getArgNumber(), i);
  if (!name)
    return self;
  for (unsigned a = 0; a <= arg.getArgNumber(); ++a) {
    auto type = dyn_cast<RankedTensorType>(func.getArgument(a).getType());
    for (int64_t d = 0, e = type ? type.getRank() : 0; d < e; ++d)
      if (type.isDynamicDim(d) && nameAt(a, d) == name)
        return {func.getArgument(a), d};
  }
  return self;
}

/// One step of the walk: dim `i` of `v` (rank `rank`), the result of an onnx
/// op. Each method handles the ops of one rule and returns `self()` where
/// the dim starts at `v`.
class OriginStep {
public:
  OriginStep(Value v, int64_t i, int64_t rank, int &budget)
      : v(v), i(i), rank(rank), budget(budget) {}

  /// Dispatches on the op that defines `v`.
  DimOrigin through(Operation *def);

private:
  DimOrigin self() const { return {v, i}; }
  /// Continues the walk at dim `j` of `from`.
  DimOrigin follow(Value from, int64_t j) const {
    auto fs = shapeOf(from);
    if (!fs || j < 0 || j >= static_cast<int64_t>(fs->size()))
      return self();
    return dimOriginWithin(from, j, budget);
  }
  DimOrigin sameShape(Operation *def) const;
  DimOrigin broadcast(Operation *def) const;
  DimOrigin matMul(MatMulOp op) const;
  DimOrigin gemm(GemmOp op) const;
  DimOrigin transpose(TransposeOp op) const;
  DimOrigin gather(GatherOp op) const;
  DimOrigin gatherBlockQuantized(MsGatherBlockQuantizedOp op) const;
  DimOrigin reshape(ReshapeOp op) const;
  DimOrigin slice(SliceOp op) const;
  DimOrigin constantOfShape(ConstantOfShapeOp op) const;
  DimOrigin unsqueeze(UnsqueezeOp op) const;
  DimOrigin split(SplitOp op) const;
  DimOrigin concat(ConcatOp op) const;
  DimOrigin reduce(const Reduction &r) const;

  Value v;
  int64_t i, rank;
  int &budget;
};

DimOrigin OriginStep::through(Operation *def) {
  switch (shapeRule(def)) {
  case Rule::Same:
    return sameShape(def);
  case Rule::Broadcast:
    return broadcast(def);
  case Rule::None:
    break;
  }
  if (std::optional<Reduction> r = getReduction(def); r && !r->axis)
    return reduce(*r);
  return llvm::TypeSwitch<Operation *, DimOrigin>(def)
      .Case([&](MatMulOp op) { return matMul(op); })
      .Case([&](GemmOp op) { return gemm(op); })
      .Case([&](TransposeOp op) { return transpose(op); })
      .Case([&](GatherOp op) { return gather(op); })
      .Case(
          [&](MsGatherBlockQuantizedOp op) { return gatherBlockQuantized(op); })
      .Case([&](ReshapeOp op) { return reshape(op); })
      .Case([&](SliceOp op) { return slice(op); })
      .Case([&](ConstantOfShapeOp op) { return constantOfShape(op); })
      .Case([&](UnsqueezeOp op) { return unsqueeze(op); })
      .Case([&](SplitOp op) { return split(op); })
      .Case([&](ConcatOp op) { return concat(op); })
      .Default([&](Operation *) { return self(); });
}

DimOrigin OriginStep::sameShape(Operation *def) const {
  if (auto s = shapeOf(def->getOperand(0));
      s && static_cast<int64_t>(s->size()) == rank)
    return follow(def->getOperand(0), i);
  return self();
}

/// The one operand whose aligned dim is not 1; several only when they share
/// an origin (a dynamic dim could be a broadcast 1 at run time).
DimOrigin OriginStep::broadcast(Operation *def) const {
  std::optional<DimOrigin> pick;
  for (Value operand : def->getOperands()) {
    auto s = shapeOf(operand);
    if (!s)
      return self();
    int64_t off = rank - static_cast<int64_t>(s->size());
    if (off < 0)
      return self();
    if (i < off || (*s)[i - off] == 1)
      continue;
    DimOrigin o = follow(operand, i - off);
    if (pick && *pick != o)
      return self();
    pick = o;
  }
  return pick ? *pick : self();
}

/// The rows of a product with a 2-D weight.
DimOrigin OriginStep::matMul(MatMulOp op) const {
  auto a = shapeOf(op.getA()), b = shapeOf(op.getB());
  if (!a || !b || a->size() < 2 || b->size() != 2 ||
      static_cast<int64_t>(a->size()) != rank)
    return self();
  return i < rank - 1 ? follow(op.getA(), i) : self();
}

DimOrigin OriginStep::gemm(GemmOp op) const {
  return i == 0 && !op.getTransA() ? follow(op.getA(), 0) : self();
}

DimOrigin OriginStep::transpose(TransposeOp op) const {
  std::optional<ArrayAttr> perm = op.getPerm();
  if (!perm || static_cast<int64_t>(perm->size()) != rank)
    return self();
  return follow(op.getData(), cast<IntegerAttr>((*perm)[i]).getInt());
}

DimOrigin OriginStep::gather(GatherOp op) const {
  auto data = shapeOf(op.getData()), idx = shapeOf(op.getIndices());
  if (!data || !idx)
    return self();
  int64_t axis = normAxis(signedAttr(op.getAxis()), data->size());
  int64_t q = idx->size();
  if (i < axis)
    return follow(op.getData(), i);
  if (i < axis + q)
    return follow(op.getIndices(), i - axis);
  return follow(op.getData(), i - q + 1);
}

/// Gathered rows of an embedding table: the leading dims are the indices'.
DimOrigin OriginStep::gatherBlockQuantized(MsGatherBlockQuantizedOp op) const {
  auto idx = shapeOf(op.getIndices());
  if (!idx || op.getGatherAxis() != 0)
    return self();
  return i < static_cast<int64_t>(idx->size()) ? follow(op.getIndices(), i)
                                               : self();
}

/// A target entry that is 0 (copy) or names a dim of some value.
DimOrigin OriginStep::reshape(ReshapeOp op) const {
  auto target = shapeEntries(op.getShape());
  if (!target || static_cast<int64_t>(target->size()) != rank)
    return self();
  if ((*target)[i].value == 0 && !op.getAllowzero())
    return follow(op.getData(), i);
  if ((*target)[i].origin.value)
    return (*target)[i].origin;
  return self();
}

/// Dims the slice does not cut pass through.
DimOrigin OriginStep::slice(SliceOp op) const {
  Value axesV = presentOrNull(op.getAxes());
  auto axes = axesV ? getConstantInts(axesV) : std::nullopt;
  if (!axes)
    return self();
  for (int64_t a : *axes)
    if (normAxis(a, rank) == i)
      return self();
  return follow(op.getData(), i);
}

DimOrigin OriginStep::constantOfShape(ConstantOfShapeOp op) const {
  auto dims = shapeEntries(op.getInput());
  if (dims && static_cast<int64_t>(dims->size()) == rank &&
      (*dims)[i].origin.value)
    return (*dims)[i].origin;
  return self();
}

DimOrigin OriginStep::unsqueeze(UnsqueezeOp op) const {
  auto axes = getConstantInts(op.getAxes());
  if (!axes)
    return self();
  int64_t skipped = 0;
  for (int64_t a : *axes) {
    a = normAxis(a, rank);
    if (a == i)
      return self();
    skipped += a < i;
  }
  return follow(op.getData(), i - skipped);
}

DimOrigin OriginStep::split(SplitOp op) const {
  int64_t axis = normAxis(signedAttr(op.getAxis()), rank);
  return i != axis ? follow(op.getInput(), i) : self();
}

/// Dims off the axis are operand 0's; Concat(past, new) along a dynamic axis
/// is past + new.
DimOrigin OriginStep::concat(ConcatOp op) const {
  int64_t axis = normAxis(signedAttr(op.getAxis()), rank);
  OperandRange inputs = op.getInputs();
  if (i != axis)
    return follow(inputs[0], i);
  if (inputs.size() != 2)
    return self();
  auto a = shapeOf(inputs[0]), b = shapeOf(inputs[1]);
  if (a && b && static_cast<int64_t>(a->size()) == rank &&
      static_cast<int64_t>(b->size()) == rank &&
      ShapedType::isDynamic((*a)[i]) && ShapedType::isDynamic((*b)[i]))
    if (auto sum = sumOf(follow(inputs[0], i), follow(inputs[1], i)))
      return *sum;
  return self();
}

/// The kept dims pass through (RMSNorm's mean over the last axis; OLMo-2
/// normalises the whole q projection before `view(..., -1, head_dim)`).
DimOrigin OriginStep::reduce(const Reduction &r) const {
  auto in = shapeOf(r.input);
  if (!in)
    return self();
  auto reduce = reducedDims(r, in->size());
  if (!reduce)
    return self();
  for (int64_t j = 0, k = 0, n = in->size(); j < n; ++j) {
    if ((*reduce)[j] && !r.keepDims)
      continue;
    if (k++ == i)
      return (*reduce)[j] ? self() : follow(r.input, j);
  }
  return self();
}

DimOrigin dimOriginWithin(Value v, int64_t i, int &budget) {
  DimOrigin self{v, i};
  auto vs = shapeOf(v);
  if (!vs || i < 0 || i >= static_cast<int64_t>(vs->size()) || --budget < 0)
    return self;
  if (auto arg = dyn_cast<BlockArgument>(v))
    return namedInputDim(arg, i);
  Operation *def = v.getDefiningOp();
  if (!def || !isa<ONNXDialect>(def->getDialect()) ||
      def->getNumOperands() == 0)
    return self;
  return OriginStep(v, i, vs->size(), budget).through(def);
}

//===----------------------------------------------------------------------===//
// The values of shape tensors
//===----------------------------------------------------------------------===//

/// Entries with known values and no origin.
ShapeEntries plainEntries(ArrayRef<int64_t> values) {
  ShapeEntries out;
  for (int64_t d : values)
    out.push_back({d, {}});
  return out;
}

/// The entries of `v` when only its type is known: a static length, every
/// value unknown.
std::optional<ShapeEntries> unknownEntries(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (t && t.getRank() == 1 && !t.isDynamicDim(0))
    return ShapeEntries(t.getDimSize(0));
  if (t && t.getRank() == 0)
    return ShapeEntries(1);
  return std::nullopt;
}

/// Shape(x)[start:end]: x's static dims, and the origins of its dynamic ones.
std::optional<ShapeEntries> entriesOfShape(ShapeOp op) {
  Value x = op.getData();
  auto in = shapeOf(x);
  if (!in)
    return std::nullopt;
  int64_t rank = in->size();
  std::optional<uint64_t> endAttr = op.getEnd();
  int64_t start =
      std::clamp<int64_t>(normAxis(signedAttr(op.getStart()), rank), 0, rank);
  int64_t end = std::clamp<int64_t>(
      normAxis(endAttr ? signedAttr(*endAttr) : rank, rank), 0, rank);
  ShapeEntries out;
  for (int64_t j = start; j < end; ++j)
    out.push_back({(*in)[j], ShapedType::isDynamic((*in)[j]) ? dimOrigin(x, j)
                                                             : DimOrigin{}});
  return out;
}

/// To one dim: the entries in order.
std::optional<ShapeEntries> entriesOfReshape(ReshapeOp op, int depth) {
  auto t = dyn_cast<RankedTensorType>(op.getType());
  if (!t || t.getRank() != 1)
    return std::nullopt;
  auto inner = shapeEntries(op.getData(), depth + 1);
  if (inner && (t.isDynamicDim(0) ||
                t.getDimSize(0) == static_cast<int64_t>(inner->size())))
    return inner;
  return std::nullopt;
}

/// Two dims added (past + new length); constants add as constants.
std::optional<ShapeEntries> entriesOfAdd(AddOp op, int depth) {
  auto a = shapeEntries(op.getA(), depth + 1);
  auto b = shapeEntries(op.getB(), depth + 1);
  if (!a || !b || a->size() != 1 || b->size() != 1)
    return std::nullopt;
  ShapeEntry x = (*a)[0], y = (*b)[0];
  if (!ShapedType::isDynamic(x.value) && !ShapedType::isDynamic(y.value))
    return ShapeEntries{{addDims(x.value, y.value), {}}};
  if (ShapedType::isDynamic(x.value) && ShapedType::isDynamic(y.value))
    if (auto sum = sumOf(x.origin, y.origin))
      return ShapeEntries{{kDyn, *sum}};
  return std::nullopt;
}

std::optional<ShapeEntries> entriesOfConcat(ConcatOp op, int depth) {
  ShapeEntries out;
  for (Value operand : op.getInputs()) {
    auto part = shapeEntries(operand, depth + 1);
    if (!part)
      return std::nullopt;
    out.append(part->begin(), part->end());
  }
  return out;
}

std::optional<ShapeEntries> entriesOfGather(GatherOp op, int depth) {
  auto data = shapeEntries(op.getData(), depth + 1);
  auto idx = getConstantInts(op.getIndices());
  if (!data || !idx)
    return std::nullopt;
  ShapeEntries out;
  int64_t n = data->size();
  for (int64_t i : *idx) {
    if (i < -n || i >= n)
      return std::nullopt;
    out.push_back((*data)[i < 0 ? i + n : i]);
  }
  return out;
}

/// One contiguous range (no steps) of a shape tensor.
std::optional<ShapeEntries> entriesOfSlice(SliceOp op, int depth) {
  auto data = shapeEntries(op.getData(), depth + 1);
  auto starts = getConstantInts(op.getStarts());
  auto ends = getConstantInts(op.getEnds());
  if (!data || !starts || !ends || starts->size() != 1 || ends->size() != 1 ||
      presentOrNull(op.getSteps()))
    return std::nullopt;
  int64_t n = data->size(), b = (*starts)[0], e = (*ends)[0];
  b = std::clamp<int64_t>(b < 0 ? b + n : b, 0, n);
  e = std::clamp<int64_t>(e < 0 ? e + n : e, 0, n);
  return e > b ? ShapeEntries(data->begin() + b, data->begin() + e)
               : ShapeEntries{};
}

/// The entries `def` computes, std::nullopt when it is not shape arithmetic
/// this follows (the caller falls back to the result type).
std::optional<ShapeEntries> entriesOf(Operation *def, int depth) {
  using Entries = std::optional<ShapeEntries>;
  return llvm::TypeSwitch<Operation *, Entries>(def)
      .Case([&](ShapeOp op) { return entriesOfShape(op); })
      .Case<CastOp, IdentityOp>([&](auto op) -> Entries {
        return shapeEntries(op.getInput(), depth + 1);
      })
      .Case<UnsqueezeOp, SqueezeOp>([&](auto op) -> Entries {
        auto inner = shapeEntries(op.getData(), depth + 1);
        if (inner && inner->size() == 1)
          return inner;
        return std::nullopt;
      })
      .Case([&](ReshapeOp op) { return entriesOfReshape(op, depth); })
      .Case([&](AddOp op) { return entriesOfAdd(op, depth); })
      .Case([&](ConcatOp op) { return entriesOfConcat(op, depth); })
      .Case([&](GatherOp op) { return entriesOfGather(op, depth); })
      .Case([&](SliceOp op) { return entriesOfSlice(op, depth); })
      .Default([](Operation *) { return std::nullopt; });
}

/// The value of a 1-D shape tensor as far as it is known: constants, dims of
/// Shape(x) (dynamic where x's dim is, with the dim's origin), and Concat/
/// Unsqueeze/Squeeze/Gather/Slice/Cast of such values. This is ONNX's "data
/// propagation" for the shape arithmetic exporters emit.
std::optional<ShapeEntries> shapeEntries(Value v, int depth) {
  if (!v || depth > 16)
    return std::nullopt;
  if (auto c = getConstantInts(v)) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (t && t.getRank() <= 1)
      return plainEntries(*c);
    return std::nullopt;
  }
  Operation *def = v.getDefiningOp();
  if (def && isa<ONNXDialect>(def->getDialect()))
    if (std::optional<ShapeEntries> entries = entriesOf(def, depth))
      return entries;
  return unknownEntries(v);
}

std::optional<Shape> shapeValue(Value v, int depth) {
  auto entries = shapeEntries(v, depth);
  if (!entries)
    return std::nullopt;
  Shape out;
  for (const ShapeEntry &e : *entries)
    out.push_back(e.value);
  return out;
}

} // namespace

std::pair<Value, int64_t> xfmr::onnx::getDimOrigin(Value v, int64_t index) {
  DimOrigin o = dimOrigin(v, index);
  if (o.isSum())
    return {v, index}; // a sum is named by itself here
  return {o.value, o.index};
}

std::optional<SmallVector<int64_t>> xfmr::onnx::getShapeValue(Value v) {
  return shapeValue(v, 0);
}

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

namespace {
bool inferSameAsOperand(Operation *op, unsigned operand, unsigned result = 0) {
  auto s = shapeOf(op->getOperand(operand));
  return s && refine(op, result, *s);
}

/// Operand 0's shape. Skip*LayerNormalization's input_skip_bias_sum (the
/// residual stream the next layer adds to) has the input's shape too.
bool inferSameShape(Operation *op) {
  bool changed = inferSameAsOperand(op, 0);
  if (isa<MsSkipLayerNormalizationOp, MsSkipSimplifiedLayerNormalizationOp>(
          op) &&
      op->getNumResults() > 3 && isa<TensorType>(op->getResult(3).getType()))
    changed |= inferSameAsOperand(op, 0, 3);
  return changed;
}

bool inferBroadcast(Operation *op) {
  auto s = allShapesBroadcast(op);
  return s && refine(op, 0, *s);
}

bool inferReduce(Operation *op, const Reduction &r) {
  auto in = shapeOf(r.input);
  if (!in)
    return false;
  int64_t rank = in->size();
  auto reduce = reducedDims(r, rank);
  if (!reduce)
    return false;
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!(*reduce)[i])
      out.push_back((*in)[i]);
    else if (r.keepDims)
      out.push_back(1);
  }
  return refine(op, 0, out);
}

bool inferConstant(ConstantOp op) {
  std::optional<ElementsAttr> value = op.getValue();
  return value && refine(op, 0, value->getShapedType().getShape());
}

/// MatMul and MatMulInteger: numpy matmul, 1-D operands promoted and their
/// unit dim dropped again.
template <typename OpTy> bool inferMatMul(OpTy op) {
  auto a = shapeOf(op.getA()), b = shapeOf(op.getB());
  if (!a || !b || a->empty() || b->empty())
    return false;
  Shape as = *a, bs = *b;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  auto batch = broadcast({aBatch, bBatch});
  if (!batch)
    return false;
  Shape out = *batch;
  if (!aVec)
    out.push_back(as[as.size() - 2]);
  if (!bVec)
    out.push_back(bs.back());
  return refine(op, 0, out);
}

bool inferGemm(GemmOp op) {
  auto a = shapeOf(op.getA()), b = shapeOf(op.getB());
  if (!a || !b || a->size() != 2 || b->size() != 2)
    return false;
  return refine(op, 0,
                {(*a)[op.getTransA() ? 1 : 0], (*b)[op.getTransB() ? 0 : 1]});
}

/// Reshape's result: the target's known entries, and its -1 from the
/// input's size where that is static, or after cancelling the input's
/// dynamic dims against target entries naming the same dims.
bool inferReshape(ReshapeOp op) {
  Value input = op.getData();
  auto target = shapeEntries(op.getShape());
  if (!target)
    return false;
  auto in = shapeOf(input);
  bool allowZero = op.getAllowzero() != 0;
  Shape out;
  int64_t known = 1, inferIdx = -1;
  SmallVector<bool> cancelled(in ? in->size() : 0, false);
  bool cancellable = true;
  for (auto [i, entry] : llvm::enumerate(*target)) {
    int64_t d = entry.value;
    if (d == 0 && !allowZero) {
      if (!in || i >= in->size())
        return false;
      d = (*in)[i];
      if (ShapedType::isDynamic(d)) {
        cancelled[i] = true; // copies input dim i
        out.push_back(d);
        continue;
      }
    }
    if (d == -1) {
      inferIdx = i;
      out.push_back(kDyn);
      continue;
    }
    if (d < 0 && d != kDyn)
      return false;
    out.push_back(d);
    if (d != kDyn) {
      known = mulDims(known, d);
      continue;
    }
    // A dynamic entry cancels an input dim with the same origin.
    bool matched = false;
    for (size_t j = 0; in && entry.origin.value && j < in->size() && !matched;
         ++j)
      if (!cancelled[j] && ShapedType::isDynamic((*in)[j]) &&
          dimOrigin(input, j) == entry.origin)
        matched = cancelled[j] = true;
    cancellable &= matched;
  }
  if (inferIdx >= 0 && in && known != kDyn && known != 0 && cancellable) {
    int64_t total = 1;
    bool staticRest = true;
    for (auto [j, d] : llvm::enumerate(*in)) {
      if (cancelled[j])
        continue;
      staticRest &= !ShapedType::isDynamic(d);
      total = mulDims(total, d);
    }
    if (staticRest && total != kDyn && total % known == 0)
      out[inferIdx] = total / known;
  }
  return refine(op, 0, out);
}

/// `perm`, or the reversed dims when it is absent.
bool inferTranspose(TransposeOp op) {
  auto in = shapeOf(op.getData());
  if (!in)
    return false;
  Shape perm;
  if (std::optional<ArrayAttr> p = op.getPerm()) {
    for (Attribute a : *p)
      perm.push_back(cast<IntegerAttr>(a).getInt());
  } else {
    for (int64_t i = in->size() - 1; i >= 0; --i)
      perm.push_back(i);
  }
  if (perm.size() != in->size())
    return false;
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in->size()))
      return false;
    out.push_back((*in)[p]);
  }
  return refine(op, 0, out);
}

bool inferUnsqueeze(UnsqueezeOp op) {
  auto in = shapeOf(op.getData());
  auto axes = getConstantInts(op.getAxes());
  if (!in || !axes)
    return false;
  int64_t rank = in->size() + axes->size();
  SmallVector<bool> isNew(rank, false);
  for (int64_t a : *axes) {
    a = normAxis(a, rank);
    if (a < 0 || a >= rank || isNew[a])
      return false;
    isNew[a] = true;
  }
  Shape out;
  auto it = in->begin();
  for (int64_t i = 0; i < rank; ++i)
    out.push_back(isNew[i] ? 1 : *it++);
  return refine(op, 0, out);
}

/// The constant `axes`, or every static unit dim when it is absent.
bool inferSqueeze(SqueezeOp op) {
  auto in = shapeOf(op.getData());
  if (!in)
    return false;
  int64_t rank = in->size();
  SmallVector<bool> drop(rank, false);
  if (Value axesV = presentOrNull(op.getAxes())) {
    auto axes = getConstantInts(axesV);
    if (!axes)
      return false;
    for (int64_t a : *axes) {
      a = normAxis(a, rank);
      if (a < 0 || a >= rank)
        return false;
      drop[a] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) {
      if ((*in)[i] == kDyn)
        return false;
      drop[i] = (*in)[i] == 1;
    }
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      out.push_back((*in)[i]);
  return refine(op, 0, out);
}

bool inferConcat(ConcatOp op) {
  Shape out;
  int64_t axis = signedAttr(op.getAxis());
  for (Value v : op.getInputs()) {
    auto s = shapeOf(v);
    if (!s)
      return false;
    if (out.empty()) {
      out = *s;
      axis = normAxis(axis, s->size());
      if (axis < 0 || axis >= static_cast<int64_t>(s->size()))
        return false;
      continue;
    }
    if (s->size() != out.size())
      return false;
    for (size_t d = 0; d < out.size(); ++d) {
      if (static_cast<int64_t>(d) == axis)
        out[d] = addDims(out[d], (*s)[d]);
      else if (out[d] == kDyn)
        out[d] = (*s)[d];
    }
  }
  return !out.empty() && refine(op, 0, out);
}

bool inferGather(GatherOp op) {
  auto data = shapeOf(op.getData()), idx = shapeOf(op.getIndices());
  if (!data || !idx || data->empty())
    return false;
  int64_t axis = normAxis(signedAttr(op.getAxis()), data->size());
  if (axis < 0 || axis >= static_cast<int64_t>(data->size()))
    return false;
  Shape out(data->begin(), data->begin() + axis);
  out.append(idx->begin(), idx->end());
  out.append(data->begin() + axis + 1, data->end());
  return refine(op, 0, out);
}

bool inferGatherElements(GatherElementsOp op) {
  auto s = shapeOf(op.getIndices());
  return s && refine(op, 0, *s);
}

bool inferGatherND(GatherNDOp op) {
  auto data = shapeOf(op.getData()), idx = shapeOf(op.getIndices());
  int64_t b = signedAttr(op.getBatchDims());
  if (!data || !idx || idx->empty() || ShapedType::isDynamic(idx->back()))
    return false;
  int64_t k = idx->back(), r = data->size();
  if (b < 0 || k < 1 || b + k > r)
    return false;
  Shape out(idx->begin(), idx->end() - 1);
  out.append(data->begin() + b + k, data->end());
  return refine(op, 0, out);
}

/// Slice bounds known only at run time: the rank is kept, sliced axes (all
/// of them when the axes are not constant either) become dynamic.
bool inferSliceWithRuntimeBounds(SliceOp op, const Shape &in) {
  int64_t rank = in.size();
  Shape out = in;
  Value axesV = presentOrNull(op.getAxes());
  auto axes = axesV ? getConstantInts(axesV) : std::nullopt;
  if (axesV && axes) {
    for (int64_t a : *axes) {
      a = normAxis(a, rank);
      if (a < 0 || a >= rank)
        return false;
      out[a] = kDyn;
    }
  } else if (!axesV) {
    auto startsType = dyn_cast<RankedTensorType>(op.getStarts().getType());
    if (!startsType || startsType.isDynamicDim(0) ||
        startsType.getDimSize(0) > rank)
      out.assign(rank, kDyn);
    else
      for (int64_t i = 0; i < startsType.getDimSize(0); ++i)
        out[i] = kDyn;
  } else {
    out.assign(rank, kDyn);
  }
  return refine(op, 0, out);
}

/// The length of a static dim `dim` sliced from `start` to `end` by `step`
/// (nonzero, not INT64_MIN). ONNX: negative indices count from the end, then
/// clamp; the clamp range depends on the step's sign. v + dim cannot
/// overflow for v < 0.
int64_t slicedLength(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end - 1) / (-step) + 1 : 0;
}

bool inferSlice(SliceOp op) {
  auto in = shapeOf(op.getData());
  auto starts = getConstantInts(op.getStarts());
  auto ends = getConstantInts(op.getEnds());
  if (!in)
    return false;
  if (!starts || !ends || starts->size() != ends->size())
    return inferSliceWithRuntimeBounds(op, *in);
  int64_t rank = in->size();
  Shape axes, steps(starts->size(), 1);
  if (Value a = presentOrNull(op.getAxes())) {
    auto c = getConstantInts(a);
    if (!c)
      return false;
    axes = *c;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (Value s = presentOrNull(op.getSteps())) {
    auto c = getConstantInts(s);
    if (!c)
      return false;
    steps = *c;
  }
  if (axes.size() != starts->size() || steps.size() != starts->size())
    return false;
  Shape out = *in;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normAxis(axes[i], rank);
    if (a < 0 || a >= rank || steps[i] == 0)
      return false;
    int64_t dim = (*in)[a];
    if (dim == kDyn) {
      out[a] = kDyn;
      continue;
    }
    if (steps[i] == std::numeric_limits<int64_t>::min())
      return false;
    out[a] = slicedLength(dim, (*starts)[i], (*ends)[i], steps[i]);
  }
  return refine(op, 0, out);
}

bool inferExpand(ExpandOp op) {
  auto in = shapeOf(op.getInput());
  auto target = shapeValue(op.getShape());
  if (!in || !target)
    return false;
  Shape t(target->begin(), target->end());
  auto out = broadcast({*in, t});
  return out && refine(op, 0, *out);
}

/// Each result: the input with the axis cut to its `split` entry, or to
/// ceil(dim / n) chunks when `split` is absent.
bool inferSplit(SplitOp op) {
  auto in = shapeOf(op.getInput());
  if (!in)
    return false;
  int64_t rank = in->size();
  int64_t axis = normAxis(signedAttr(op.getAxis()), rank);
  if (axis < 0 || axis >= rank)
    return false;
  unsigned n = op->getNumResults();
  Shape sizes;
  if (Value s = presentOrNull(op.getSplit())) {
    auto c = getConstantInts(s);
    if (!c || c->size() != n)
      return false;
    sizes = *c;
  } else if ((*in)[axis] != kDyn) {
    int64_t dim = (*in)[axis], chunk = (dim + n - 1) / n;
    for (unsigned i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
  } else {
    sizes.assign(n, kDyn);
  }
  bool changed = false;
  for (unsigned i = 0; i < n; ++i) {
    Shape out = *in;
    out[axis] = sizes[i];
    changed |= refine(op, i, out);
  }
  return changed;
}

/// The indices' shape with `depth` inserted at `axis`.
bool inferOneHot(OneHotOp op) {
  auto idx = shapeOf(op.getIndices());
  if (!idx)
    return false;
  int64_t rank = idx->size() + 1;
  int64_t axis = normAxis(signedAttr(op.getAxis()), rank);
  if (axis < 0 || axis >= rank)
    return false;
  auto depth = getConstantInts(op.getDepth());
  Shape out = *idx;
  out.insert(out.begin() + axis, depth && depth->size() == 1 && (*depth)[0] >= 0
                                     ? (*depth)[0]
                                     : kDyn);
  return refine(op, 0, out);
}

/// The number of dims in [start, end), clamped to the input's rank.
bool inferShape(ShapeOp op) {
  auto in = shapeOf(op.getData());
  if (!in)
    return refine(op, 0, {kDyn});
  int64_t rank = in->size();
  std::optional<uint64_t> endAttr = op.getEnd();
  int64_t start =
      std::clamp<int64_t>(normAxis(signedAttr(op.getStart()), rank), 0, rank);
  int64_t end = std::clamp<int64_t>(
      normAxis(endAttr ? signedAttr(*endAttr) : rank, rank), 0, rank);
  return refine(op, 0, {std::max<int64_t>(0, end - start)});
}

bool inferConstantOfShape(ConstantOfShapeOp op) {
  auto dims = shapeValue(op.getInput());
  return dims && refine(op, 0, *dims);
}

/// 2-D: the product of the dims before `axis`, and of the rest.
bool inferFlatten(FlattenOp op) {
  auto in = shapeOf(op.getInput());
  if (!in)
    return false;
  int64_t axis = normAxis(signedAttr(op.getAxis()), in->size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(in->size()); ++i) {
    int64_t &acc = i < axis ? outer : inner;
    acc = mulDims(acc, (*in)[i]);
  }
  return refine(op, 0, {outer, inner});
}

/// Values and indices: the input with `axis` cut to K.
bool inferTopK(TopKOp op) {
  auto in = shapeOf(op.getX());
  auto k = getConstantInts(op.getK());
  if (!in || in->empty())
    return false;
  int64_t axis = normAxis(signedAttr(op.getAxis()), in->size());
  if (axis < 0 || axis >= static_cast<int64_t>(in->size()))
    return false;
  Shape out = *in;
  out[axis] = k && k->size() == 1 ? (*k)[0] : kDyn;
  bool values = refine(op, 0, out);
  bool indices = refine(op, 1, out);
  return values || indices;
}

/// Length from constant start/limit/delta (integer ranges only).
bool inferRange(RangeOp op) {
  auto s = getConstantInts(op.getStart()), l = getConstantInts(op.getLimit()),
       d = getConstantInts(op.getDelta());
  if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1 ||
      (*d)[0] == 0)
    return refine(op, 0, {kDyn});
  double n = std::ceil((double((*l)[0]) - double((*s)[0])) / double((*d)[0]));
  if (!(n < double(int64_t(1) << 62)))
    return refine(op, 0, {kDyn});
  return refine(op, 0, {std::max<int64_t>(0, static_cast<int64_t>(n))});
}

bool inferTile(TileOp op) {
  auto in = shapeOf(op.getInput());
  auto reps = getConstantInts(op.getRepeats());
  if (!in || !reps || reps->size() != in->size())
    return false;
  Shape out = *in;
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = mulDims(out[i], (*reps)[i]);
  return refine(op, 0, out);
}

/// 4-D Q and V: [batch, heads, q_seq, v_head_size].
bool inferAttention(AttentionOp op) {
  auto q = shapeOf(op.getQ()), v = shapeOf(op.getV());
  if (!q || !v || q->size() != 4 || v->size() != 4)
    return false;
  return refine(op, 0, {(*q)[0], (*q)[1], (*q)[2], (*v)[3]});
}

/// Output 0: the query's shape when K/V come separately; with packed QKV (no
/// key input) the hidden size is num_heads * head_size of the packing.
bool inferGroupQueryAttention(MsGroupQueryAttentionOp op) {
  auto q = shapeOf(op.getQuery());
  if (!q || q->size() != 3)
    return false;
  if (presentOrNull(op.getKey()))
    return refine(op, 0, *q);
  int64_t heads = signedAttr(op.getNumHeads()),
          kv = signedAttr(op.getKvNumHeads());
  int64_t packed = (*q)[2];
  if (heads <= 0 || kv <= 0 || packed == kDyn || packed % (heads + 2 * kv) != 0)
    return refine(op, 0, {(*q)[0], (*q)[1], kDyn});
  return refine(op, 0, {(*q)[0], (*q)[1], packed / (heads + 2 * kv) * heads});
}

/// y like x; scale and zero point are scalars.
bool inferDynamicQuantizeLinear(DynamicQuantizeLinearOp op) {
  bool changed = refine(op, 1, Shape{});
  changed |= refine(op, 2, Shape{});
  if (auto x = shapeOf(op.getX()))
    changed |= refine(op, 0, *x);
  return changed;
}

/// uint8 data (gather axis 0, quantize axis last): [indices..., data dims
/// 1.., last * 8 / bits].
bool inferGatherBlockQuantized(MsGatherBlockQuantizedOp op) {
  auto data = shapeOf(op.getData()), idx = shapeOf(op.getIndices());
  int64_t bits = signedAttr(op.getBits());
  if (!data || !idx || data->size() < 2 || bits <= 0 || 8 % bits != 0 ||
      !getElementTypeOrSelf(op.getData().getType()).isUnsignedInteger(8) ||
      op.getGatherAxis() != 0)
    return false;
  Shape out = *idx;
  out.append(data->begin() + 1, data->end());
  if (out.back() != kDyn)
    out.back() *= 8 / bits;
  return refine(op, 0, out);
}

/// A's shape with the last dim N.
bool inferMatMulNBits(MsMatMulNBitsOp op) {
  auto a = shapeOf(op.getA());
  if (!a || a->empty())
    return false;
  Shape out = *a;
  out.back() = signedAttr(op.getN());
  return refine(op, 0, out);
}

/// [rank, number of nonzeros].
bool inferNonZero(NonZeroOp op) {
  auto in = shapeOf(op.getX());
  return in && refine(op, 0, {static_cast<int64_t>(in->size()), kDyn});
}
} // namespace

bool xfmr::onnx::inferResultTypes(Operation *op) {
  if (op->getNumResults() == 0 || !isa<ONNXDialect>(op->getDialect()))
    return false;
  switch (shapeRule(op)) {
  case Rule::Same:
    return inferSameShape(op);
  case Rule::Broadcast:
    return inferBroadcast(op);
  case Rule::None:
    break;
  }
  if (std::optional<Reduction> r = getReduction(op))
    return inferReduce(op, *r);
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case(inferConstant)
      .Case<MatMulOp, MatMulIntegerOp>([](auto op) { return inferMatMul(op); })
      .Case(inferGemm)
      .Case(inferReshape)
      .Case(inferTranspose)
      .Case(inferUnsqueeze)
      .Case(inferSqueeze)
      .Case(inferConcat)
      .Case(inferGather)
      .Case(inferGatherElements)
      .Case(inferGatherND)
      .Case(inferSlice)
      .Case(inferExpand)
      .Case(inferSplit)
      .Case(inferOneHot)
      .Case(inferShape)
      .Case([](SizeOp op) { return refine(op, 0, {}); })
      .Case(inferConstantOfShape)
      .Case(inferFlatten)
      .Case(inferTopK)
      .Case(inferRange)
      .Case(inferTile)
      .Case(inferAttention)
      .Case(inferGroupQueryAttention)
      .Case(inferDynamicQuantizeLinear)
      .Case(inferGatherBlockQuantized)
      .Case(inferMatMulNBits)
      .Case(inferNonZero)
      .Default([](Operation *) { return false; });
}
