//===- ConstantFolding.cpp - evaluate onnx ops on small constants ---------===//
//
// Part of xfmr.
//
// A tiny evaluator for the shape arithmetic exporters emit. Values are small
// tensors held as int64 or double; anything larger than the configured limit,
// or of a type or op the evaluator does not know, is left alone.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXOps.h"
#include "dialects/onnx/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace xfmr::onnx;

namespace {
using Shape = SmallVector<int64_t>;

/// A small constant tensor. Integer (and bool) element types use `ints`,
/// floating-point ones use `fps`.
struct Literal {
  Shape shape;
  Type elementType;
  SmallVector<int64_t> ints;
  SmallVector<double> fps;

  bool isFloat() const { return isa<FloatType>(elementType); }
  int64_t size() const { return isFloat() ? fps.size() : ints.size(); }
  double at(int64_t i) const { return isFloat() ? fps[i] : double(ints[i]); }
  int64_t intAt(int64_t i) const {
    return isFloat() ? saturatingInt(fps[i]) : ints[i];
  }

  /// double -> int64 without UB: NaN is 0, out-of-range values saturate.
  static int64_t saturatingInt(double d) {
    if (std::isnan(d))
      return 0;
    if (d >= 9.2233720368547758e18)
      return std::numeric_limits<int64_t>::max();
    if (d <= -9.2233720368547758e18)
      return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(d);
  }
};

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::optional<Literal> readLiteral(Value v, int64_t maxElements) {
  ElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto type = cast<ShapedType>(attr.getType());
  if (!type.hasStaticShape() || type.getNumElements() > maxElements)
    return std::nullopt;
  Literal lit{Shape(type.getShape()), type.getElementType(), {}, {}};
  if (isa<IntegerType>(lit.elementType)) {
    auto ints = readIntElements(attr);
    if (!ints)
      return std::nullopt;
    lit.ints = std::move(*ints);
  } else if (isa<FloatType>(lit.elementType)) {
    auto fps = readFloatElements(attr);
    if (!fps)
      return std::nullopt;
    lit.fps = std::move(*fps);
  } else {
    return std::nullopt;
  }
  return lit;
}

ElementsAttr toAttr(const Literal &lit) {
  auto type = RankedTensorType::get(lit.shape, lit.elementType);
  if (auto ft = dyn_cast<FloatType>(lit.elementType)) {
    SmallVector<APFloat> vals;
    for (double d : lit.fps) {
      APFloat f(d);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(f);
    }
    return DenseElementsAttr::get(type, vals);
  }
  auto it = cast<IntegerType>(lit.elementType);
  SmallVector<APInt> vals;
  for (int64_t v : lit.ints)
    vals.push_back(
        APInt(it.getWidth(), static_cast<uint64_t>(v), !it.isUnsigned()));
  return DenseElementsAttr::get(type, vals);
}

std::optional<Shape> broadcastShapes(ArrayRef<const Literal *> ins) {
  size_t rank = 0;
  for (auto *l : ins)
    rank = std::max(rank, l->shape.size());
  Shape out(rank, 1);
  for (auto *l : ins)
    for (size_t i = 0; i < l->shape.size(); ++i) {
      int64_t d = l->shape[i], &o = out[rank - l->shape.size() + i];
      if (d != 1 && o != 1 && d != o)
        return std::nullopt;
      if (d != 1)
        o = d;
    }
  return out;
}

/// Index into `l` for the flat output index `flat` of shape `out`.
int64_t broadcastIndex(const Literal &l, ArrayRef<int64_t> out, int64_t flat) {
  int64_t idx = 0, stride = 1;
  for (int64_t i = out.size() - 1, j = l.shape.size() - 1; i >= 0; --i, --j) {
    int64_t coord = flat % out[i];
    flat /= out[i];
    if (j >= 0) {
      if (l.shape[j] != 1)
        idx += coord * stride;
      stride *= l.shape[j];
    }
  }
  return idx;
}

/// Elementwise n-ary op with broadcasting; `f` maps doubles (ints are
/// computed through int64 by `fi` when every input is integer).
template <typename FI, typename FF>
std::optional<Literal> elementwise(ArrayRef<Literal> ins, Type resultElem,
                                   FI fi, FF ff, int64_t maxElements) {
  SmallVector<const Literal *> ptrs;
  for (const Literal &l : ins)
    ptrs.push_back(&l);
  auto shape = broadcastShapes(ptrs);
  if (!shape || numElements(*shape) > maxElements)
    return std::nullopt;
  Literal out{*shape, resultElem, {}, {}};
  bool allInt =
      llvm::none_of(ins, [](const Literal &l) { return l.isFloat(); });
  int64_t n = numElements(*shape);
  for (int64_t k = 0; k < n; ++k) {
    SmallVector<int64_t, 3> iv(ins.size(), 0);
    SmallVector<double, 3> fv(ins.size(), 0.0);
    for (auto [j, l] : llvm::enumerate(ins)) {
      int64_t idx = broadcastIndex(l, *shape, k);
      if (allInt)
        iv[j] = l.ints[idx];
      fv[j] = l.at(idx);
    }
    if (allInt && !out.isFloat()) {
      std::optional<int64_t> r = fi(iv);
      if (!r)
        return std::nullopt;
      out.ints.push_back(*r);
    } else {
      double r = ff(fv);
      if (out.isFloat())
        out.fps.push_back(r);
      else
        out.ints.push_back(Literal::saturatingInt(r));
    }
  }
  return out;
}

/// a op b in int64, or std::nullopt on overflow (left to the runtime).
std::optional<int64_t> checked(int64_t a, int64_t b, char op) {
  int64_t r;
  bool overflow = op == '+'   ? __builtin_add_overflow(a, b, &r)
                  : op == '-' ? __builtin_sub_overflow(a, b, &r)
                              : __builtin_mul_overflow(a, b, &r);
  if (overflow)
    return std::nullopt;
  return r;
}

std::optional<int64_t> attrInt(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = dyn_cast_or_null<IntegerAttr>(op->getAttr(name)))
    return a.getInt();
  return dflt;
}

/// Evaluates `op` on literal operands; std::nullopt when unsupported.
std::optional<Literal> evaluate(Operation *op,
                                ArrayRef<std::optional<Literal>> in,
                                Type resultElem, int64_t maxElements) {
  StringRef name = op->getName().getStringRef();
  name.consume_front("onnx.");
  auto all = [&](size_t n) {
    if (in.size() < n)
      return false;
    for (size_t i = 0; i < n; ++i)
      if (!in[i])
        return false;
    return true;
  };
  SmallVector<Literal> args;
  for (auto &l : in)
    if (l)
      args.push_back(*l);

  using IV = ArrayRef<int64_t>;
  using FV = ArrayRef<double>;
  auto binary = [&](auto fi, auto ff) -> std::optional<Literal> {
    if (!all(2))
      return std::nullopt;
    return elementwise({*in[0], *in[1]}, resultElem, fi, ff, maxElements);
  };
  if (name == "Add")
    return binary(
        [](IV v) -> std::optional<int64_t> { return checked(v[0], v[1], '+'); },
        [](FV v) { return v[0] + v[1]; });
  if (name == "Sub")
    return binary(
        [](IV v) -> std::optional<int64_t> { return checked(v[0], v[1], '-'); },
        [](FV v) { return v[0] - v[1]; });
  if (name == "Mul")
    return binary(
        [](IV v) -> std::optional<int64_t> { return checked(v[0], v[1], '*'); },
        [](FV v) { return v[0] * v[1]; });
  if (name == "Div")
    return binary(
        [](IV v) -> std::optional<int64_t> {
          if (v[1] == 0 ||
              (v[0] == std::numeric_limits<int64_t>::min() && v[1] == -1))
            return std::nullopt;
          return v[0] / v[1]; // ONNX integer Div truncates
        },
        [](FV v) { return v[0] / v[1]; });
  if (name == "Equal" || name == "Less" || name == "Greater" ||
      name == "LessOrEqual" || name == "GreaterOrEqual") {
    // Integers compare as int64: doubles lose precision past 2^53.
    auto cmp = [name](auto a, auto b) -> int64_t {
      if (name == "Equal")
        return a == b;
      if (name == "Less")
        return a < b;
      if (name == "Greater")
        return a > b;
      if (name == "LessOrEqual")
        return a <= b;
      return a >= b;
    };
    return binary(
        [&](IV v) -> std::optional<int64_t> { return cmp(v[0], v[1]); },
        [&](FV v) { return double(cmp(v[0], v[1])); });
  }
  if (name == "Max" || name == "Min") {
    if (!all(in.size()) || in.empty())
      return std::nullopt;
    bool isMax = name == "Max";
    return elementwise(
        args, resultElem,
        [&](IV v) -> std::optional<int64_t> {
          int64_t r = v[0];
          for (int64_t x : v)
            r = isMax ? std::max(r, x) : std::min(r, x);
          return r;
        },
        [&](FV v) {
          double r = v[0];
          for (double x : v)
            r = isMax ? std::max(r, x) : std::min(r, x);
          return r;
        },
        maxElements);
  }
  if (name == "Where") {
    if (!all(3))
      return std::nullopt;
    return elementwise(
        args, resultElem,
        [](IV v) -> std::optional<int64_t> { return v[0] ? v[1] : v[2]; },
        [](FV v) { return v[0] != 0 ? v[1] : v[2]; }, maxElements);
  }
  auto unary = [&](auto fi, auto ff) -> std::optional<Literal> {
    if (!all(1))
      return std::nullopt;
    return elementwise({*in[0]}, resultElem, fi, ff, maxElements);
  };
  if (name == "Neg")
    return unary(
        [](IV v) -> std::optional<int64_t> { return checked(0, v[0], '-'); },
        [](FV v) { return -v[0]; });
  if (name == "Abs")
    return unary(
        [](IV v) -> std::optional<int64_t> {
          return v[0] < 0 ? checked(0, v[0], '-')
                          : std::optional<int64_t>(v[0]);
        },
        [](FV v) { return std::fabs(v[0]); });
  if (name == "Not")
    return unary([](IV v) -> std::optional<int64_t> { return !v[0]; },
                 [](FV v) { return double(v[0] == 0); });
  if (name == "Sqrt")
    return unary([](IV v) -> std::optional<int64_t> { return std::nullopt; },
                 [](FV v) { return std::sqrt(v[0]); });
  if (name == "Reciprocal")
    return unary([](IV v) -> std::optional<int64_t> { return std::nullopt; },
                 [](FV v) { return 1.0 / v[0]; });
  if (name == "Identity" || name == "Cast" || name == "CastLike") {
    if (!all(1))
      return std::nullopt;
    Literal out{in[0]->shape, resultElem, {}, {}};
    for (int64_t i = 0; i < in[0]->size(); ++i) {
      if (out.isFloat())
        out.fps.push_back(in[0]->at(i));
      else if (resultElem.isInteger(1))
        out.ints.push_back(in[0]->at(i) != 0);
      else if (in[0]->isFloat()) {
        double d = in[0]->fps[i];
        if (!std::isfinite(d) || std::fabs(d) > 9.2e18)
          return std::nullopt;
        out.ints.push_back(static_cast<int64_t>(d));
      } else
        out.ints.push_back(in[0]->ints[i]);
    }
    return out;
  }
  if (name == "Unsqueeze" || name == "Squeeze" || name == "Reshape" ||
      name == "Flatten" || name == "Expand") {
    if (!in.size() || !in[0])
      return std::nullopt;
    auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!rt || !rt.hasStaticShape())
      return std::nullopt;
    Literal out{Shape(rt.getShape()), resultElem, {}, {}};
    int64_t n = rt.getNumElements();
    if (n > maxElements)
      return std::nullopt;
    if (name == "Expand") {
      for (int64_t k = 0; k < n; ++k) {
        int64_t idx = broadcastIndex(*in[0], out.shape, k);
        if (out.isFloat())
          out.fps.push_back(in[0]->at(idx));
        else
          out.ints.push_back(in[0]->intAt(idx));
      }
      return out;
    }
    if (n != in[0]->size())
      return std::nullopt;
    out.ints = in[0]->ints;
    out.fps = in[0]->fps;
    return out;
  }
  if (name == "Concat") {
    if (!all(in.size()))
      return std::nullopt;
    int64_t rank = args[0].shape.size();
    int64_t axis = *attrInt(op, "axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    if (rank == 0 || axis < 0 || axis >= rank)
      return std::nullopt;
    Shape shape = args[0].shape;
    shape[axis] = 0;
    for (const Literal &l : args) {
      if (static_cast<int64_t>(l.shape.size()) != rank)
        return std::nullopt;
      shape[axis] += l.shape[axis];
    }
    if (numElements(shape) > maxElements)
      return std::nullopt;
    int64_t outer = numElements(ArrayRef<int64_t>(shape).take_front(axis));
    Literal out{shape, resultElem, {}, {}};
    for (int64_t o = 0; o < outer; ++o)
      for (const Literal &l : args) {
        int64_t chunk =
            numElements(ArrayRef<int64_t>(l.shape).drop_front(axis));
        for (int64_t k = 0; k < chunk; ++k) {
          int64_t idx = o * chunk + k;
          if (out.isFloat())
            out.fps.push_back(l.at(idx));
          else
            out.ints.push_back(l.intAt(idx));
        }
      }
    return out;
  }
  if (name == "Gather") {
    if (!all(2))
      return std::nullopt;
    const Literal &data = *in[0], &idx = *in[1];
    int64_t rank = data.shape.size();
    int64_t axis = *attrInt(op, "axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    if (rank == 0 || axis < 0 || axis >= rank || idx.isFloat())
      return std::nullopt;
    Shape shape(data.shape.begin(), data.shape.begin() + axis);
    shape.append(idx.shape.begin(), idx.shape.end());
    shape.append(data.shape.begin() + axis + 1, data.shape.end());
    if (numElements(shape) > maxElements)
      return std::nullopt;
    int64_t outer = numElements(ArrayRef<int64_t>(data.shape).take_front(axis));
    int64_t inner =
        numElements(ArrayRef<int64_t>(data.shape).drop_front(axis + 1));
    int64_t dim = data.shape[axis];
    Literal out{shape, resultElem, {}, {}};
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i : idx.ints) {
        if (i < -dim || i >= dim)
          return std::nullopt; // out-of-range index: leave it to the runtime
        i = i < 0 ? i + dim : i;
        for (int64_t k = 0; k < inner; ++k) {
          int64_t src = (o * dim + i) * inner + k;
          if (out.isFloat())
            out.fps.push_back(data.at(src));
          else
            out.ints.push_back(data.intAt(src));
        }
      }
    return out;
  }
  if (name == "Slice") {
    // 1-D only: what exporters slice out of Shape results.
    if (!all(3) || in[0]->shape.size() != 1)
      return std::nullopt;
    auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!rt || !rt.hasStaticShape())
      return std::nullopt;
    int64_t dim = in[0]->shape[0];
    int64_t s = in[1]->intAt(0), e = in[2]->intAt(0), step = 1;
    if (in.size() > 3 && in[3] && in[3]->intAt(0) != 0 && in[3]->intAt(0) != -1)
      return std::nullopt;
    if (in.size() > 4 && in[4])
      step = in[4]->intAt(0);
    if (step == 0 || step == std::numeric_limits<int64_t>::min())
      return std::nullopt;
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    Literal out{Shape(rt.getShape()), resultElem, {}, {}};
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      for (int64_t i = s; i < e; i += step)
        out.isFloat() ? out.fps.push_back(in[0]->at(i))
                      : out.ints.push_back(in[0]->intAt(i));
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      for (int64_t i = s; i > e; i += step)
        out.isFloat() ? out.fps.push_back(in[0]->at(i))
                      : out.ints.push_back(in[0]->intAt(i));
    }
    if (out.size() != rt.getNumElements())
      return std::nullopt;
    return out;
  }
  if (name == "Range") {
    if (!all(3))
      return std::nullopt;
    double start = in[0]->at(0), limit = in[1]->at(0), delta = in[2]->at(0);
    if (delta == 0)
      return std::nullopt;
    double n = std::ceil((limit - start) / delta);
    if (!(n <= double(maxElements)))
      return std::nullopt;
    int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
    Literal out{{count}, resultElem, {}, {}};
    if (!out.isFloat() && (in[0]->isFloat() || in[2]->isFloat()))
      return std::nullopt;
    for (int64_t i = 0; i < count; ++i) {
      if (out.isFloat())
        out.fps.push_back(start + i * delta);
      else {
        std::optional<int64_t> step = checked(i, in[2]->ints[0], '*');
        std::optional<int64_t> v =
            step ? checked(in[0]->ints[0], *step, '+') : std::nullopt;
        if (!v)
          return std::nullopt;
        out.ints.push_back(*v);
      }
    }
    return out;
  }
  if (name == "ConstantOfShape") {
    if (!all(1))
      return std::nullopt;
    Shape shape(in[0]->ints.begin(), in[0]->ints.end());
    for (int64_t d : shape)
      if (d < 0)
        return std::nullopt;
    if (numElements(shape) > maxElements)
      return std::nullopt;
    double fill = 0;
    if (auto v = dyn_cast_or_null<ElementsAttr>(op->getAttr("value"))) {
      auto lit = isa<FloatType>(v.getElementType()) ? readFloatElements(v)
                                                    : std::nullopt;
      auto ilit = isa<IntegerType>(v.getElementType()) ? readIntElements(v)
                                                       : std::nullopt;
      if (lit && lit->size() == 1)
        fill = (*lit)[0];
      else if (ilit && ilit->size() == 1)
        fill = double((*ilit)[0]);
      else
        return std::nullopt;
    }
    Literal out{shape, resultElem, {}, {}};
    int64_t n = numElements(shape);
    if (out.isFloat())
      out.fps.assign(n, fill);
    else
      out.ints.assign(n, Literal::saturatingInt(fill));
    return out;
  }
  if (name == "OneHot") {
    // TorchScript's repeat_interleave builds its Tile repeats this way.
    if (!all(3) || in[0]->isFloat() || in[1]->size() != 1 ||
        in[2]->size() != 2)
      return std::nullopt;
    const Literal &idx = *in[0];
    double depthValue = in[1]->at(0);
    if (!(depthValue >= 1 && depthValue <= double(maxElements)))
      return std::nullopt;
    int64_t depth = static_cast<int64_t>(depthValue);
    int64_t rank = idx.shape.size() + 1;
    int64_t axis = *attrInt(op, "axis", -1);
    axis = axis < 0 ? axis + rank : axis;
    if (axis < 0 || axis >= rank)
      return std::nullopt;
    Shape shape(idx.shape.begin(), idx.shape.begin() + axis);
    shape.push_back(depth);
    shape.append(idx.shape.begin() + axis, idx.shape.end());
    int64_t n = numElements(shape);
    if (n > maxElements)
      return std::nullopt;
    int64_t outer = numElements(ArrayRef<int64_t>(idx.shape).take_front(axis));
    int64_t inner = numElements(ArrayRef<int64_t>(idx.shape).drop_front(axis));
    Literal out{shape, resultElem, {}, {}};
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t d = 0; d < depth; ++d)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t v = idx.ints[o * inner + i];
          // Out of [-depth, depth) the whole one-hot row is off.
          bool on = v == d || (v < 0 && v + depth == d);
          if (out.isFloat())
            out.fps.push_back(in[2]->at(on ? 1 : 0));
          else
            out.ints.push_back(in[2]->intAt(on ? 1 : 0));
        }
    return out;
  }
  if (name == "ReduceProd" || name == "ReduceSum" || name == "ReduceMax" ||
      name == "ReduceMin") {
    // Full reductions of 1-D tensors (element counts of shapes).
    if (!in.size() || !in[0] || in[0]->shape.size() != 1 ||
        (in.size() > 1 && in[1]) || in[0]->isFloat())
      return std::nullopt;
    if (*attrInt(op, "keepdims", 1))
      return std::nullopt;
    const Literal &x = *in[0];
    if (x.ints.empty())
      return std::nullopt;
    int64_t r = name == "ReduceProd" ? 1 : name == "ReduceSum" ? 0 : x.ints[0];
    for (int64_t v : x.ints) {
      std::optional<int64_t> next = name == "ReduceProd"  ? checked(r, v, '*')
                                    : name == "ReduceSum" ? checked(r, v, '+')
                                    : name == "ReduceMax" ? std::max(r, v)
                                                          : std::min(r, v);
      if (!next)
        return std::nullopt;
      r = *next;
    }
    return Literal{{}, resultElem, {r}, {}};
  }
  return std::nullopt;
}

/// op(constants...) -> constant
struct FoldConstantOperands : RewritePattern {
  FoldConstantOperands(MLIRContext *ctx, int64_t maxElements)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        maxElements(maxElements) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<ONNXDialect>(op->getDialect()) || op->getNumResults() != 1 ||
        op->hasTrait<OpTrait::ConstantLike>() || op->getNumOperands() == 0)
      return rewriter.notifyMatchFailure(
          op, "not a single-result onnx op with operands");
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!resultType)
      return rewriter.notifyMatchFailure(op, "unranked result");
    SmallVector<std::optional<Literal>> ins;
    for (Value v : op->getOperands()) {
      if (isa<NoneType>(v.getType())) {
        ins.push_back(std::nullopt);
        continue;
      }
      auto lit = readLiteral(v, maxElements);
      if (!lit)
        return rewriter.notifyMatchFailure(op,
                                           "operand is not a small constant");
      ins.push_back(std::move(lit));
    }
    auto result = evaluate(op, ins, resultType.getElementType(), maxElements);
    if (!result)
      return rewriter.notifyMatchFailure(op,
                                         "evaluator does not handle this op");
    if (resultType.hasStaticShape() &&
        ArrayRef<int64_t>(result->shape) != resultType.getShape())
      return rewriter.notifyMatchFailure(
          op, "evaluated shape disagrees with result type");
    ElementsAttr attr = toAttr(*result);
    auto constant = ConstantOp::create(rewriter, op->getLoc(), attr.getType(),
                                       attr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr);
    rewriter.replaceOp(op, constant->getResults());
    return success();
  }

  int64_t maxElements;
};

/// A 1-D (or 0-D) int64 value of shape arithmetic whose entries are all
/// known -> constant: Shape(x) of static dims, and Gather/Slice/Concat/
/// Unsqueeze/Cast of such values, even when x has other, dynamic dims.
struct FoldKnownShapeValue : RewritePattern {
  FoldKnownShapeValue(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/2, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<ShapeOp, GatherOp, SliceOp, ConcatOp, UnsqueezeOp, SqueezeOp,
             CastOp>(op))
      return rewriter.notifyMatchFailure(op, "not shape arithmetic");
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || !type.hasStaticShape() || type.getRank() > 1 ||
        !type.getElementType().isInteger(64))
      return rewriter.notifyMatchFailure(op, "not a static 0-D/1-D i64 result");
    auto value = getShapeValue(op->getResult(0));
    if (!value ||
        static_cast<int64_t>(value->size()) != type.getNumElements() ||
        llvm::any_of(*value, ShapedType::isDynamic))
      return rewriter.notifyMatchFailure(op, "some entries are unknown");
    auto attr = DenseIntElementsAttr::get(type, *value);
    rewriter.replaceOpWithNewOp<ConstantOp>(op, type, attr, nullptr, nullptr,
                                            nullptr, nullptr, nullptr, nullptr);
    return success();
  }
};

/// Size(x) -> constant when x is static.
struct FoldStaticSize : OpRewritePattern<SizeOp> {
  using Base::Base;
  LogicalResult matchAndRewrite(SizeOp op,
                                PatternRewriter &rewriter) const override {
    auto in = dyn_cast<RankedTensorType>(op.getData().getType());
    if (!in || !in.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "input is not static");
    auto type = RankedTensorType::get({}, rewriter.getI64Type());
    auto attr =
        DenseIntElementsAttr::get(type, ArrayRef<int64_t>{in.getNumElements()});
    rewriter.replaceOpWithNewOp<ConstantOp>(op, type, attr, nullptr, nullptr,
                                            nullptr, nullptr, nullptr, nullptr);
    return success();
  }
};
/// Cast(x) to x's own type -> x; Identity(x) -> x. Exporters emit both
/// around shape math (torch casts int64 shapes to int64).
template <typename OpTy> struct FoldNoopConversion : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value input = op->getOperand(0);
    if (input.getType() != op->getResult(0).getType())
      return rewriter.notifyMatchFailure(op, "changes the type");
    rewriter.replaceOp(op, input);
    return success();
  }
};
} // namespace

void xfmr::onnx::populateONNXConstantFoldingPatterns(
    RewritePatternSet &patterns, int64_t maxElements) {
  patterns.add<FoldConstantOperands>(patterns.getContext(), maxElements);
  patterns.add<FoldKnownShapeValue, FoldStaticSize, FoldNoopConversion<CastOp>,
               FoldNoopConversion<IdentityOp>>(patterns.getContext());
}
