//===- ONNXShapeInference.cpp - result shapes of onnx ops -----------------===//
//
// Part of xfmr.
//
// Refines result types from operand types and constant operands, following
// the ONNX spec's shape rules. Element types are set by the importer; this
// only makes shapes more precise, never less. Ops without a rule keep what
// the model's value_info said (or an unranked result).
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSwitch.h"

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

int64_t intAttr(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = dyn_cast_or_null<IntegerAttr>(op->getAttr(name)))
    return a.getInt();
  return dflt;
}

Value operandOrNull(Operation *op, unsigned i) {
  if (i >= op->getNumOperands() || isa<NoneType>(op->getOperand(i).getType()))
    return {};
  return op->getOperand(i);
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

bool inferMatMul(Operation *op) {
  auto a = shapeOf(op->getOperand(0)), b = shapeOf(op->getOperand(1));
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

enum class Rule { None, Same, Broadcast };

/// Ops whose result has the shape of operand 0 (Same) or the broadcast of
/// all operands (Broadcast).
Rule shapeRule(StringRef name) {
  return llvm::StringSwitch<Rule>(name)
      .Cases({"Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh"},
             Rule::Same)
      .Cases({"Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh"},
             Rule::Same)
      .Cases({"CumSum", "DequantizeLinear", "Elu", "Erf", "Exp", "Floor"},
             Rule::Same)
      .Cases({"Gelu", "Hardmax", "HardSigmoid", "HardSwish", "Identity"},
             Rule::Same)
      .Cases({"IsInf", "IsNaN", "LeakyRelu", "Log", "LogSoftmax", "Mish"},
             Rule::Same)
      .Cases({"Neg", "Not", "QuantizeLinear", "Reciprocal", "Relu", "Round"},
             Rule::Same)
      .Cases({"Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax"},
             Rule::Same)
      .Cases({"Softplus", "Softsign", "Sqrt", "Tan", "Tanh"}, Rule::Same)
      .Cases({"ThresholdedRelu", "Trilu", "Dropout", "LayerNormalization"},
             Rule::Same)
      .Cases({"RMSNormalization", "RotaryEmbedding", "ms.RotaryEmbedding"},
             Rule::Same)
      .Cases({"SimplifiedLayerNormalization",
              "ms.SkipSimplifiedLayerNormalization"},
             Rule::Same)
      .Cases({"ms.SkipLayerNormalization", "ScatterND", "ScatterElements"},
             Rule::Same)
      .Cases({"Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor"},
             Rule::Broadcast)
      .Cases({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"},
             Rule::Broadcast)
      .Cases({"BitShift", "PRelu", "Max", "Min", "Sum", "Mean", "Where"},
             Rule::Broadcast)
      .Default(Rule::None);
}

/// Which of the `rank` input dims a Reduce* (axes as operand 1) or
/// ArgMax/ArgMin (`axis` attribute) reduces; nullopt when the axes are not
/// constant or out of range.
std::optional<SmallVector<bool>> reducedDims(Operation *op, int64_t rank,
                                             bool axesAsAttr) {
  SmallVector<bool> reduce(rank, false);
  std::optional<Shape> axes;
  if (axesAsAttr) {
    axes = Shape{normAxis(intAttr(op, "axis", 0), rank)};
  } else if (Value a = operandOrNull(op, 1)) {
    axes = getConstantInts(a);
    if (!axes)
      return std::nullopt;
  }
  if (!axes || axes->empty()) {
    // noop_with_empty_axes: nothing reduced.
    if (axesAsAttr || !intAttr(op, "noop_with_empty_axes", 0))
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

DimOrigin dimOriginWithin(Value v, int64_t i, int &budget) {
  DimOrigin self{v, i};
  auto vs = shapeOf(v);
  if (!vs || i < 0 || i >= static_cast<int64_t>(vs->size()) || --budget < 0)
    return self;
  if (auto arg = dyn_cast<BlockArgument>(v))
    return namedInputDim(arg, i);
  int64_t rank = vs->size();
  Operation *def = v.getDefiningOp();
  if (!def || !isa<ONNXDialect>(def->getDialect()) ||
      def->getNumOperands() == 0)
    return self;
  StringRef name = def->getName().getStringRef();
  name.consume_front("onnx.");
  auto follow = [&](Value from, int64_t j) {
    auto fs = shapeOf(from);
    if (!fs || j < 0 || j >= static_cast<int64_t>(fs->size()))
      return self;
    return dimOriginWithin(from, j, budget);
  };
  switch (shapeRule(name)) {
  case Rule::Same:
    if (auto s = shapeOf(def->getOperand(0)); s && s->size() == vs->size())
      return follow(def->getOperand(0), i);
    return self;
  case Rule::Broadcast: {
    // The one operand whose aligned dim is not 1; several only when they
    // share an origin (a dynamic dim could be a broadcast 1 at run time).
    std::optional<DimOrigin> pick;
    for (Value operand : def->getOperands()) {
      auto s = shapeOf(operand);
      if (!s)
        return self;
      int64_t off = rank - static_cast<int64_t>(s->size());
      if (off < 0)
        return self;
      if (i < off || (*s)[i - off] == 1)
        continue;
      DimOrigin o = follow(operand, i - off);
      if (pick && *pick != o)
        return self;
      pick = o;
    }
    return pick ? *pick : self;
  }
  case Rule::None:
    break;
  }
  if (name == "MatMul" && def->getNumOperands() == 2) {
    auto a = shapeOf(def->getOperand(0)), b = shapeOf(def->getOperand(1));
    if (!a || !b || a->size() < 2 || b->size() != 2 || a->size() != vs->size())
      return self;
    return i < rank - 1 ? follow(def->getOperand(0), i) : self;
  }
  if (name == "Gemm")
    return i == 0 && !intAttr(def, "transA", 0) ? follow(def->getOperand(0), 0)
                                                : self;
  if (name == "Transpose") {
    auto p = dyn_cast_or_null<ArrayAttr>(def->getAttr("perm"));
    if (!p || static_cast<int64_t>(p.size()) != rank)
      return self;
    return follow(def->getOperand(0), cast<IntegerAttr>(p[i]).getInt());
  }
  if (name == "Gather") {
    auto data = shapeOf(def->getOperand(0)), idx = shapeOf(def->getOperand(1));
    if (!data || !idx)
      return self;
    int64_t axis = normAxis(intAttr(def, "axis", 0), data->size());
    int64_t q = idx->size();
    if (i < axis)
      return follow(def->getOperand(0), i);
    if (i < axis + q)
      return follow(def->getOperand(1), i - axis);
    return follow(def->getOperand(0), i - q + 1);
  }
  if (name == "ms.GatherBlockQuantized") {
    // Gathered rows of an embedding table: the leading dims are the indices'.
    auto idx = shapeOf(def->getOperand(1));
    if (!idx || intAttr(def, "gather_axis", 0) != 0)
      return self;
    return i < static_cast<int64_t>(idx->size()) ? follow(def->getOperand(1), i) : self;
  }
  if (name == "Reshape") {
    // A target entry that is 0 (copy) or names a dim of some value.
    auto target = shapeEntries(def->getOperand(1));
    if (!target || static_cast<int64_t>(target->size()) != rank)
      return self;
    if ((*target)[i].value == 0 && !intAttr(def, "allowzero", 0))
      return follow(def->getOperand(0), i);
    if ((*target)[i].origin.value)
      return (*target)[i].origin;
    return self;
  }
  if (name == "Slice") {
    // Dims the slice does not cut pass through.
    Value axesV = operandOrNull(def, 3);
    auto axes = axesV ? getConstantInts(axesV) : std::nullopt;
    if (!axes)
      return self;
    for (int64_t a : *axes)
      if (normAxis(a, rank) == i)
        return self;
    return follow(def->getOperand(0), i);
  }
  if (name == "ConstantOfShape") {
    auto dims = shapeEntries(def->getOperand(0));
    if (dims && static_cast<int64_t>(dims->size()) == rank &&
        (*dims)[i].origin.value)
      return (*dims)[i].origin;
    return self;
  }
  if (name == "Unsqueeze") {
    auto axes = getConstantInts(def->getOperand(1));
    if (!axes)
      return self;
    int64_t skipped = 0;
    for (int64_t a : *axes) {
      a = normAxis(a, rank);
      if (a == i)
        return self;
      skipped += a < i;
    }
    return follow(def->getOperand(0), i - skipped);
  }
  if (name == "Concat" || name == "Split") {
    int64_t axis = normAxis(intAttr(def, "axis", 0), rank);
    if (i != axis)
      return follow(def->getOperand(0), i);
    // Concat(past, new) along a dynamic axis: past + new.
    if (name == "Concat" && def->getNumOperands() == 2) {
      auto a = shapeOf(def->getOperand(0)), b = shapeOf(def->getOperand(1));
      if (a && b && a->size() == vs->size() && b->size() == vs->size() &&
          ShapedType::isDynamic((*a)[i]) && ShapedType::isDynamic((*b)[i]))
        if (auto sum = sumOf(follow(def->getOperand(0), i), follow(def->getOperand(1), i)))
          return *sum;
    }
    return self;
  }
  if (name.starts_with("Reduce")) {
    // The kept dims pass through (RMSNorm's mean over the last axis; OLMo-2
    // normalises the whole q projection before `view(..., -1, head_dim)`).
    auto in = shapeOf(def->getOperand(0));
    if (!in)
      return self;
    auto reduce = reducedDims(def, in->size(), /*axesAsAttr=*/false);
    if (!reduce)
      return self;
    bool keep = intAttr(def, "keepdims", 1);
    for (int64_t j = 0, k = 0, n = in->size(); j < n; ++j) {
      if ((*reduce)[j] && !keep)
        continue;
      if (k++ == i)
        return (*reduce)[j] ? self : follow(def->getOperand(0), j);
    }
    return self;
  }
  return self;
}



/// The value of a 1-D shape tensor as far as it is known: constants, dims of
/// Shape(x) (dynamic where x's dim is, with the dim's origin), and Concat/
/// Unsqueeze/Squeeze/Gather/Slice/Cast of such values. This is ONNX's "data
/// propagation" for the shape arithmetic exporters emit.
std::optional<ShapeEntries> shapeEntries(Value v, int depth) {
  if (!v || depth > 16)
    return std::nullopt;
  auto plain = [](ArrayRef<int64_t> values) {
    ShapeEntries out;
    for (int64_t d : values)
      out.push_back({d, {}});
    return out;
  };
  if (auto c = getConstantInts(v)) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (t && t.getRank() <= 1)
      return plain(*c);
    return std::nullopt;
  }
  Operation *def = v.getDefiningOp();
  auto fallback = [&]() -> std::optional<ShapeEntries> {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (t && t.getRank() == 1 && !t.isDynamicDim(0))
      return ShapeEntries(t.getDimSize(0));
    if (t && t.getRank() == 0)
      return ShapeEntries(1);
    return std::nullopt;
  };
  if (!def || !isa<ONNXDialect>(def->getDialect()))
    return fallback();
  StringRef name = def->getName().getStringRef();
  name.consume_front("onnx.");
  if (name == "Shape") {
    Value x = def->getOperand(0);
    auto in = shapeOf(x);
    if (!in)
      return fallback();
    int64_t rank = in->size();
    int64_t start =
        std::clamp<int64_t>(normAxis(intAttr(def, "start", 0), rank), 0, rank);
    int64_t end =
        std::clamp<int64_t>(normAxis(intAttr(def, "end", rank), rank), 0, rank);
    ShapeEntries out;
    for (int64_t j = start; j < end; ++j)
      out.push_back({(*in)[j], ShapedType::isDynamic((*in)[j])
                                   ? dimOrigin(x, j)
                                   : DimOrigin{}});
    return out;
  }
  if (name == "Cast" || name == "Identity" || name == "Unsqueeze" ||
      name == "Squeeze") {
    auto inner = shapeEntries(def->getOperand(0), depth + 1);
    if (inner && (name == "Cast" || name == "Identity" || inner->size() == 1))
      return inner;
    return fallback();
  }
  if (name == "Reshape" && cast<ShapedType>(v.getType()).getRank() == 1) {
    // To one dim: the entries in order.
    auto inner = shapeEntries(def->getOperand(0), depth + 1);
    auto t = cast<ShapedType>(v.getType());
    if (inner && (t.isDynamicDim(0) || t.getDimSize(0) == static_cast<int64_t>(inner->size())))
      return inner;
    return fallback();
  }
  if (name == "Add") {
    // Two dims added (past + new length); constants add as constants.
    auto a = shapeEntries(def->getOperand(0), depth + 1);
    auto b = shapeEntries(def->getOperand(1), depth + 1);
    if (!a || !b || a->size() != 1 || b->size() != 1)
      return fallback();
    ShapeEntry x = (*a)[0], y = (*b)[0];
    if (!ShapedType::isDynamic(x.value) && !ShapedType::isDynamic(y.value))
      return ShapeEntries{{addDims(x.value, y.value), {}}};
    if (ShapedType::isDynamic(x.value) && ShapedType::isDynamic(y.value))
      if (auto sum = sumOf(x.origin, y.origin))
        return ShapeEntries{{kDyn, *sum}};
    return fallback();
  }
  if (name == "Concat") {
    ShapeEntries out;
    for (Value operand : def->getOperands()) {
      auto part = shapeEntries(operand, depth + 1);
      if (!part)
        return fallback();
      out.append(part->begin(), part->end());
    }
    return out;
  }
  if (name == "Gather") {
    auto data = shapeEntries(def->getOperand(0), depth + 1);
    auto idx = getConstantInts(def->getOperand(1));
    if (!data || !idx)
      return fallback();
    ShapeEntries out;
    int64_t n = data->size();
    for (int64_t i : *idx) {
      if (i < -n || i >= n)
        return fallback();
      out.push_back((*data)[i < 0 ? i + n : i]);
    }
    return out;
  }
  if (name == "Slice") {
    auto data = shapeEntries(def->getOperand(0), depth + 1);
    auto starts = getConstantInts(def->getOperand(1));
    auto ends = getConstantInts(def->getOperand(2));
    Value stepsV = operandOrNull(def, 4);
    if (!data || !starts || !ends || starts->size() != 1 || ends->size() != 1 ||
        stepsV)
      return fallback();
    int64_t n = data->size(), b = (*starts)[0], e = (*ends)[0];
    b = std::clamp<int64_t>(b < 0 ? b + n : b, 0, n);
    e = std::clamp<int64_t>(e < 0 ? e + n : e, 0, n);
    return e > b ? ShapeEntries(data->begin() + b, data->begin() + e)
                 : ShapeEntries{};
  }
  return fallback();
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

namespace {
/// Reshape's result: the target's known entries, and its -1 from the
/// input's size where that is static, or after cancelling the input's
/// dynamic dims against target entries naming the same dims.
bool inferReshape(Operation *op) {
  Value input = op->getOperand(0);
  auto target = shapeEntries(op->getOperand(1));
  if (!target)
    return false;
  auto in = shapeOf(input);
  bool allowZero = intAttr(op, "allowzero", 0);
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

bool inferTranspose(Operation *op) {
  auto in = shapeOf(op->getOperand(0));
  if (!in)
    return false;
  Shape perm;
  if (auto p = dyn_cast_or_null<ArrayAttr>(op->getAttr("perm"))) {
    for (Attribute a : p)
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

bool inferUnsqueeze(Operation *op) {
  auto in = shapeOf(op->getOperand(0));
  auto axes = getConstantInts(op->getOperand(1));
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

bool inferSqueeze(Operation *op) {
  auto in = shapeOf(op->getOperand(0));
  if (!in)
    return false;
  int64_t rank = in->size();
  SmallVector<bool> drop(rank, false);
  Value axesV = operandOrNull(op, 1);
  if (axesV) {
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

bool inferConcat(Operation *op) {
  Shape out;
  int64_t axis = intAttr(op, "axis", 0);
  for (Value v : op->getOperands()) {
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

bool inferGather(Operation *op) {
  auto data = shapeOf(op->getOperand(0)), idx = shapeOf(op->getOperand(1));
  if (!data || !idx || data->empty())
    return false;
  int64_t axis = normAxis(intAttr(op, "axis", 0), data->size());
  if (axis < 0 || axis >= static_cast<int64_t>(data->size()))
    return false;
  Shape out(data->begin(), data->begin() + axis);
  out.append(idx->begin(), idx->end());
  out.append(data->begin() + axis + 1, data->end());
  return refine(op, 0, out);
}

bool inferSlice(Operation *op) {
  auto in = shapeOf(op->getOperand(0));
  auto starts = getConstantInts(op->getOperand(1));
  auto ends = getConstantInts(op->getOperand(2));
  if (!in)
    return false;
  int64_t rank = in->size();
  if (!starts || !ends || starts->size() != ends->size()) {
    // Bounds known only at run time: the rank is kept, sliced axes (all of
    // them when the axes are not constant either) become dynamic.
    Shape out = *in;
    Value axesV = operandOrNull(op, 3);
    auto axes = axesV ? getConstantInts(axesV) : std::nullopt;
    if (axesV && axes) {
      for (int64_t a : *axes) {
        a = normAxis(a, rank);
        if (a < 0 || a >= rank)
          return false;
        out[a] = kDyn;
      }
    } else if (!axesV) {
      auto startsType = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
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
  Shape axes, steps(starts->size(), 1);
  if (Value a = operandOrNull(op, 3)) {
    auto c = getConstantInts(a);
    if (!c)
      return false;
    axes = *c;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (Value s = operandOrNull(op, 4)) {
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
    int64_t step = steps[i];
    if (step == std::numeric_limits<int64_t>::min())
      return false;
    // ONNX: negative indices count from the end, then clamp; the clamp range
    // depends on the step's sign. v + dim cannot overflow for v < 0.
    int64_t s = (*starts)[i], e = (*ends)[i], len;
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len = s > e ? (s - e - 1) / (-step) + 1 : 0;
    }
    out[a] = len;
  }
  return refine(op, 0, out);
}

bool inferExpand(Operation *op) {
  auto in = shapeOf(op->getOperand(0));
  auto target = shapeValue(op->getOperand(1));
  if (!in || !target)
    return false;
  Shape t(target->begin(), target->end());
  auto out = broadcast({*in, t});
  return out && refine(op, 0, *out);
}

bool inferReduce(Operation *op, bool axesAsAttr) {
  auto in = shapeOf(op->getOperand(0));
  if (!in)
    return false;
  int64_t rank = in->size();
  auto reduce = reducedDims(op, rank, axesAsAttr);
  if (!reduce)
    return false;
  bool keep = intAttr(op, "keepdims", 1);
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!(*reduce)[i])
      out.push_back((*in)[i]);
    else if (keep)
      out.push_back(1);
  }
  return refine(op, 0, out);
}

bool inferSplit(Operation *op) {
  auto in = shapeOf(op->getOperand(0));
  if (!in)
    return false;
  int64_t rank = in->size();
  int64_t axis = normAxis(intAttr(op, "axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return false;
  unsigned n = op->getNumResults();
  Shape sizes;
  if (Value s = operandOrNull(op, 1)) {
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

bool inferSameAsOperand(Operation *op, unsigned operand, unsigned result = 0) {
  auto s = shapeOf(op->getOperand(operand));
  return s && refine(op, result, *s);
}
} // namespace

bool xfmr::onnx::inferResultTypes(Operation *op) {
  if (op->getNumResults() == 0 || !isa<ONNXDialect>(op->getDialect()))
    return false;
  StringRef name = op->getName().getStringRef();
  name.consume_front("onnx.");
  Rule rule = shapeRule(name);
  if (rule == Rule::Same) {
    bool changed = inferSameAsOperand(op, 0);
    // Skip*LayerNormalization's input_skip_bias_sum (the residual stream
    // the next layer adds to) has the input's shape too.
    if (name.starts_with("ms.Skip") && op->getNumResults() > 3 &&
        isa<TensorType>(op->getResult(3).getType()))
      changed |= inferSameAsOperand(op, 0, 3);
    return changed;
  }
  if (rule == Rule::Broadcast) {
    auto s = allShapesBroadcast(op);
    return s && refine(op, 0, *s);
  }
  if (name == "Constant") {
    auto value = dyn_cast_or_null<ElementsAttr>(op->getAttr("value"));
    return value && refine(op, 0, value.getShapedType().getShape());
  }
  if (name == "MatMul" || name == "MatMulInteger")
    return inferMatMul(op);
  if (name == "Gemm") {
    auto a = shapeOf(op->getOperand(0)), b = shapeOf(op->getOperand(1));
    if (!a || !b || a->size() != 2 || b->size() != 2)
      return false;
    return refine(op, 0,
                  {(*a)[intAttr(op, "transA", 0) ? 1 : 0],
                   (*b)[intAttr(op, "transB", 0) ? 0 : 1]});
  }
  if (name == "Reshape")
    return inferReshape(op);
  if (name == "Transpose")
    return inferTranspose(op);
  if (name == "Unsqueeze")
    return inferUnsqueeze(op);
  if (name == "Squeeze")
    return inferSqueeze(op);
  if (name == "Concat")
    return inferConcat(op);
  if (name == "Gather")
    return inferGather(op);
  if (name == "GatherElements")
    return inferSameAsOperand(op, 1);
  if (name == "GatherND") {
    auto data = shapeOf(op->getOperand(0)), idx = shapeOf(op->getOperand(1));
    int64_t b = intAttr(op, "batch_dims", 0);
    if (!data || !idx || idx->empty() || ShapedType::isDynamic(idx->back()))
      return false;
    int64_t k = idx->back(), r = data->size();
    if (b < 0 || k < 1 || b + k > r)
      return false;
    Shape out(idx->begin(), idx->end() - 1);
    out.append(data->begin() + b + k, data->end());
    return refine(op, 0, out);
  }
  if (name == "Slice")
    return inferSlice(op);
  if (name == "Expand")
    return inferExpand(op);
  if (name == "Split")
    return inferSplit(op);
  if (name.starts_with("Reduce"))
    return inferReduce(op, /*axesAsAttr=*/false);
  if (name == "ArgMax" || name == "ArgMin")
    return inferReduce(op, /*axesAsAttr=*/true);
  if (name == "OneHot") {
    auto idx = shapeOf(op->getOperand(0));
    if (!idx)
      return false;
    int64_t rank = idx->size() + 1;
    int64_t axis = normAxis(intAttr(op, "axis", -1), rank);
    if (axis < 0 || axis >= rank)
      return false;
    auto depth = getConstantInts(op->getOperand(1));
    Shape out = *idx;
    out.insert(out.begin() + axis,
               depth && depth->size() == 1 && (*depth)[0] >= 0 ? (*depth)[0]
                                                               : kDyn);
    return refine(op, 0, out);
  }
  if (name == "Shape") {
    auto in = shapeOf(op->getOperand(0));
    if (!in)
      return refine(op, 0, {kDyn});
    int64_t rank = in->size();
    int64_t start =
        std::clamp<int64_t>(normAxis(intAttr(op, "start", 0), rank), 0, rank);
    int64_t end =
        std::clamp<int64_t>(normAxis(intAttr(op, "end", rank), rank), 0, rank);
    return refine(op, 0, {std::max<int64_t>(0, end - start)});
  }
  if (name == "Size")
    return refine(op, 0, {});
  if (name == "ConstantOfShape") {
    auto dims = shapeValue(op->getOperand(0));
    return dims && refine(op, 0, *dims);
  }
  if (name == "Flatten") {
    auto in = shapeOf(op->getOperand(0));
    if (!in)
      return false;
    int64_t axis = normAxis(intAttr(op, "axis", 1), in->size());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(in->size()); ++i) {
      int64_t &acc = i < axis ? outer : inner;
      acc = mulDims(acc, (*in)[i]);
    }
    return refine(op, 0, {outer, inner});
  }
  if (name == "TopK") {
    auto in = shapeOf(op->getOperand(0));
    auto k = getConstantInts(op->getOperand(1));
    if (!in || in->empty())
      return false;
    int64_t axis = normAxis(intAttr(op, "axis", -1), in->size());
    if (axis < 0 || axis >= static_cast<int64_t>(in->size()))
      return false;
    Shape out = *in;
    out[axis] = k && k->size() == 1 ? (*k)[0] : kDyn;
    bool values = refine(op, 0, out);
    bool indices = refine(op, 1, out);
    return values || indices;
  }
  if (name == "Range") {
    // Length from constant start/limit/delta (integer ranges only).
    auto s = getConstantInts(op->getOperand(0)),
         l = getConstantInts(op->getOperand(1)),
         d = getConstantInts(op->getOperand(2));
    if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1 ||
        (*d)[0] == 0)
      return refine(op, 0, {kDyn});
    double n = std::ceil((double((*l)[0]) - double((*s)[0])) / double((*d)[0]));
    if (!(n < double(int64_t(1) << 62)))
      return refine(op, 0, {kDyn});
    return refine(op, 0, {std::max<int64_t>(0, static_cast<int64_t>(n))});
  }
  if (name == "Tile") {
    auto in = shapeOf(op->getOperand(0));
    auto reps = getConstantInts(op->getOperand(1));
    if (!in || !reps || reps->size() != in->size())
      return false;
    Shape out = *in;
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = mulDims(out[i], (*reps)[i]);
    return refine(op, 0, out);
  }
  if (name == "Attention") {
    auto q = shapeOf(op->getOperand(0)), v = shapeOf(op->getOperand(2));
    if (!q || !v || q->size() != 4 || v->size() != 4)
      return false;
    return refine(op, 0, {(*q)[0], (*q)[1], (*q)[2], (*v)[3]});
  }
  if (name == "ms.GroupQueryAttention") {
    // Output 0: the query's shape when K/V come separately; with packed QKV
    // (no key input) the hidden size is num_heads * head_size of the packing.
    auto q = shapeOf(op->getOperand(0));
    if (!q || q->size() != 3)
      return false;
    if (operandOrNull(op, 1))
      return refine(op, 0, *q);
    int64_t heads = intAttr(op, "num_heads", 0),
            kv = intAttr(op, "kv_num_heads", 0);
    int64_t packed = (*q)[2];
    if (heads <= 0 || kv <= 0 || packed == kDyn ||
        packed % (heads + 2 * kv) != 0)
      return refine(op, 0, {(*q)[0], (*q)[1], kDyn});
    return refine(op, 0, {(*q)[0], (*q)[1], packed / (heads + 2 * kv) * heads});
  }
  if (name == "DynamicQuantizeLinear") { // y like x; scale, zero point scalars
    bool changed = refine(op, 1, Shape{});
    changed |= refine(op, 2, Shape{});
    if (auto x = shapeOf(op->getOperand(0)))
      changed |= refine(op, 0, *x);
    return changed;
  }
  if (name == "ms.GatherBlockQuantized") {
    // uint8 data (gather axis 0, quantize axis last): [indices..., data
    // dims 1.., last * 8 / bits].
    auto data = shapeOf(op->getOperand(0)), idx = shapeOf(op->getOperand(1));
    int64_t bits = intAttr(op, "bits", 4);
    if (!data || !idx || data->size() < 2 || bits <= 0 || 8 % bits != 0 ||
        !getElementTypeOrSelf(op->getOperand(0).getType()).isUnsignedInteger(8) ||
        intAttr(op, "gather_axis", 0) != 0)
      return false;
    Shape out = *idx;
    out.append(data->begin() + 1, data->end());
    if (out.back() != kDyn)
      out.back() *= 8 / bits;
    return refine(op, 0, out);
  }
  if (name == "ms.MatMulNBits") {
    auto a = shapeOf(op->getOperand(0));
    if (!a || a->empty())
      return false;
    Shape out = *a;
    out.back() = intAttr(op, "N", kDyn);
    return refine(op, 0, out);
  }
  if (name == "NonZero") {
    auto in = shapeOf(op->getOperand(0));
    return in && refine(op, 0, {static_cast<int64_t>(in->size()), kDyn});
  }
  return false;
}
