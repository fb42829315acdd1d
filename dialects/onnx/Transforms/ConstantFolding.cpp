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
#include "llvm/ADT/TypeSwitch.h"

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
  /// Appends element `i` of `src`, converted to this literal's kind.
  void append(const Literal &src, int64_t i) {
    if (isFloat())
      fps.push_back(src.at(i));
    else
      ints.push_back(src.intAt(i));
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

/// ODS reads an ONNX int attribute (I64Attr) as uint64_t; ONNX ints are
/// signed, so axes are converted back before any comparison with 0.
int64_t signedAttr(uint64_t value) { return static_cast<int64_t>(value); }

using IV = ArrayRef<int64_t>;
using FV = ArrayRef<double>;

/// Evaluates one onnx op on literal operands (std::nullopt for a missing
/// optional one). Each method handles one op or one family of ops and
/// returns std::nullopt when the operands are not what it folds.
class Evaluator {
public:
  Evaluator(ArrayRef<std::optional<Literal>> in, Type resultElem,
            int64_t maxElements)
      : in(in), resultElem(resultElem), maxElements(maxElements) {}

  /// Dispatches on the op; std::nullopt when unsupported.
  std::optional<Literal> evaluate(Operation *op);

private:
  /// Whether the first `n` operands are all present.
  bool all(size_t n) const {
    return in.size() >= n && llvm::all_of(in.take_front(n), [](auto &l) {
             return l.has_value();
           });
  }
  /// The operands that are present, in order.
  SmallVector<Literal> present() const {
    SmallVector<Literal> args;
    for (const std::optional<Literal> &l : in)
      if (l)
        args.push_back(*l);
    return args;
  }
  template <typename FI, typename FF>
  std::optional<Literal> unary(FI fi, FF ff) const {
    if (!all(1))
      return std::nullopt;
    return elementwise({*in[0]}, resultElem, fi, ff, maxElements);
  }
  template <typename FI, typename FF>
  std::optional<Literal> binary(FI fi, FF ff) const {
    if (!all(2))
      return std::nullopt;
    return elementwise({*in[0], *in[1]}, resultElem, fi, ff, maxElements);
  }
  /// a + b, a - b, a * b: overflowing integers are left to the runtime.
  std::optional<Literal> arith(char opChar, double (*ff)(FV)) const {
    return binary(
        [opChar](IV v) -> std::optional<int64_t> {
          return checked(v[0], v[1], opChar);
        },
        ff);
  }
  std::optional<Literal> divide() const;
  /// Equal, Less, ...: integers compare as int64, since doubles lose
  /// precision past 2^53.
  template <typename Cmp> std::optional<Literal> compare(Cmp cmp) const {
    return binary(
        [&](IV v) -> std::optional<int64_t> { return cmp(v[0], v[1]); },
        [&](FV v) { return double(cmp(v[0], v[1])); });
  }
  std::optional<Literal> extremum(bool isMax) const;
  std::optional<Literal> where() const;
  std::optional<Literal> convert() const;
  std::optional<Literal> reshape(Operation *op) const;
  std::optional<Literal> expand(Operation *op) const;
  std::optional<Literal> concat(ConcatOp op) const;
  std::optional<Literal> gather(GatherOp op) const;
  std::optional<Literal> slice(SliceOp op) const;
  std::optional<Literal> range() const;
  std::optional<Literal> constantOfShape(ConstantOfShapeOp op) const;
  std::optional<Literal> oneHot(OneHotOp op) const;
  std::optional<Literal>
  reduce(bool keepDims, std::optional<int64_t> init,
         std::optional<int64_t> (*combine)(int64_t, int64_t)) const;

  /// A literal of the result's static type, if it is static and small.
  std::optional<Literal> staticResult(Operation *op) const;

  ArrayRef<std::optional<Literal>> in;
  Type resultElem;
  int64_t maxElements;
};

std::optional<Literal> Evaluator::evaluate(Operation *op) {
  using Result = std::optional<Literal>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](AddOp) { return arith('+', [](FV v) { return v[0] + v[1]; }); })
      .Case([&](SubOp) { return arith('-', [](FV v) { return v[0] - v[1]; }); })
      .Case([&](MulOp) { return arith('*', [](FV v) { return v[0] * v[1]; }); })
      .Case([&](DivOp) { return divide(); })
      .Case([&](EqualOp) { return compare(std::equal_to<>()); })
      .Case([&](LessOp) { return compare(std::less<>()); })
      .Case([&](GreaterOp) { return compare(std::greater<>()); })
      .Case([&](LessOrEqualOp) { return compare(std::less_equal<>()); })
      .Case([&](GreaterOrEqualOp) { return compare(std::greater_equal<>()); })
      .Case([&](MaxOp) { return extremum(/*isMax=*/true); })
      .Case([&](MinOp) { return extremum(/*isMax=*/false); })
      .Case([&](WhereOp) { return where(); })
      .Case([&](NegOp) {
        return unary(
            [](IV v) -> std::optional<int64_t> {
              return checked(0, v[0], '-');
            },
            [](FV v) { return -v[0]; });
      })
      .Case([&](AbsOp) {
        return unary(
            [](IV v) -> std::optional<int64_t> {
              return v[0] < 0 ? checked(0, v[0], '-')
                              : std::optional<int64_t>(v[0]);
            },
            [](FV v) { return std::fabs(v[0]); });
      })
      .Case([&](NotOp) {
        return unary([](IV v) -> std::optional<int64_t> { return !v[0]; },
                     [](FV v) { return double(v[0] == 0); });
      })
      .Case([&](SqrtOp) {
        return unary([](IV) -> std::optional<int64_t> { return std::nullopt; },
                     [](FV v) { return std::sqrt(v[0]); });
      })
      .Case([&](ReciprocalOp) {
        return unary([](IV) -> std::optional<int64_t> { return std::nullopt; },
                     [](FV v) { return 1.0 / v[0]; });
      })
      .Case<IdentityOp, CastOp, CastLikeOp>([&](auto) { return convert(); })
      .Case<UnsqueezeOp, SqueezeOp, ReshapeOp, FlattenOp>(
          [&](auto op) { return reshape(op); })
      .Case([&](ExpandOp op) { return expand(op); })
      .Case([&](ConcatOp op) { return concat(op); })
      .Case([&](GatherOp op) { return gather(op); })
      .Case([&](SliceOp op) { return slice(op); })
      .Case([&](RangeOp) { return range(); })
      .Case([&](ConstantOfShapeOp op) { return constantOfShape(op); })
      .Case([&](OneHotOp op) { return oneHot(op); })
      .Case([&](ReduceProdOp op) {
        return reduce(op.getKeepdims(), 1,
                      [](int64_t r, int64_t v) { return checked(r, v, '*'); });
      })
      .Case([&](ReduceSumOp op) {
        return reduce(op.getKeepdims(), 0,
                      [](int64_t r, int64_t v) { return checked(r, v, '+'); });
      })
      .Case([&](ReduceMaxOp op) {
        return reduce(op.getKeepdims(), std::nullopt,
                      [](int64_t r, int64_t v) -> std::optional<int64_t> {
                        return std::max(r, v);
                      });
      })
      .Case([&](ReduceMinOp op) {
        return reduce(op.getKeepdims(), std::nullopt,
                      [](int64_t r, int64_t v) -> std::optional<int64_t> {
                        return std::min(r, v);
                      });
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// ONNX integer Div truncates; division by zero and INT64_MIN / -1 are left
/// to the runtime.
std::optional<Literal> Evaluator::divide() const {
  return binary(
      [](IV v) -> std::optional<int64_t> {
        if (v[1] == 0 ||
            (v[0] == std::numeric_limits<int64_t>::min() && v[1] == -1))
          return std::nullopt;
        return v[0] / v[1];
      },
      [](FV v) { return v[0] / v[1]; });
}

/// Max/Min over any number of broadcast operands.
std::optional<Literal> Evaluator::extremum(bool isMax) const {
  if (!all(in.size()) || in.empty())
    return std::nullopt;
  return elementwise(
      present(), resultElem,
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

std::optional<Literal> Evaluator::where() const {
  if (!all(3))
    return std::nullopt;
  return elementwise(
      present(), resultElem,
      [](IV v) -> std::optional<int64_t> { return v[0] ? v[1] : v[2]; },
      [](FV v) { return v[0] != 0 ? v[1] : v[2]; }, maxElements);
}

/// Identity, Cast and CastLike: the values in the result's element type;
/// floats that do not fit an int64 are left to the runtime.
std::optional<Literal> Evaluator::convert() const {
  if (!all(1))
    return std::nullopt;
  const Literal &x = *in[0];
  Literal out{x.shape, resultElem, {}, {}};
  for (int64_t i = 0; i < x.size(); ++i) {
    if (out.isFloat()) {
      out.fps.push_back(x.at(i));
    } else if (resultElem.isInteger(1)) {
      out.ints.push_back(x.at(i) != 0);
    } else if (x.isFloat()) {
      double d = x.fps[i];
      if (!std::isfinite(d) || std::fabs(d) > 9.2e18)
        return std::nullopt;
      out.ints.push_back(static_cast<int64_t>(d));
    } else {
      out.ints.push_back(x.ints[i]);
    }
  }
  return out;
}

std::optional<Literal> Evaluator::staticResult(Operation *op) const {
  auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!rt || !rt.hasStaticShape() || rt.getNumElements() > maxElements)
    return std::nullopt;
  return Literal{Shape(rt.getShape()), resultElem, {}, {}};
}

/// Unsqueeze, Squeeze, Reshape, Flatten: operand 0's values in the result's
/// (static) shape.
std::optional<Literal> Evaluator::reshape(Operation *op) const {
  if (in.empty() || !in[0])
    return std::nullopt;
  std::optional<Literal> out = staticResult(op);
  if (!out || numElements(out->shape) != in[0]->size())
    return std::nullopt;
  out->ints = in[0]->ints;
  out->fps = in[0]->fps;
  return out;
}

/// Expand: operand 0 broadcast to the result's (static) shape.
std::optional<Literal> Evaluator::expand(Operation *op) const {
  if (in.empty() || !in[0])
    return std::nullopt;
  std::optional<Literal> out = staticResult(op);
  if (!out)
    return std::nullopt;
  for (int64_t k = 0, n = numElements(out->shape); k < n; ++k)
    out->append(*in[0], broadcastIndex(*in[0], out->shape, k));
  return out;
}

std::optional<Literal> Evaluator::concat(ConcatOp op) const {
  if (!all(in.size()))
    return std::nullopt;
  SmallVector<Literal> args = present();
  int64_t rank = args[0].shape.size();
  int64_t axis = signedAttr(op.getAxis());
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
      int64_t chunk = numElements(ArrayRef<int64_t>(l.shape).drop_front(axis));
      for (int64_t k = 0; k < chunk; ++k)
        out.append(l, o * chunk + k);
    }
  return out;
}

std::optional<Literal> Evaluator::gather(GatherOp op) const {
  if (!all(2))
    return std::nullopt;
  const Literal &data = *in[0], &idx = *in[1];
  int64_t rank = data.shape.size();
  int64_t axis = signedAttr(op.getAxis());
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
      for (int64_t k = 0; k < inner; ++k)
        out.append(data, (o * dim + i) * inner + k);
    }
  return out;
}

/// 1-D only: what exporters slice out of Shape results.
std::optional<Literal> Evaluator::slice(SliceOp op) const {
  if (!all(3) || in[0]->shape.size() != 1)
    return std::nullopt;
  auto rt = dyn_cast<RankedTensorType>(op.getResult().getType());
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
      out.append(*in[0], i);
  } else {
    s = std::clamp<int64_t>(s, 0, dim - 1);
    e = std::clamp<int64_t>(e, -1, dim - 1);
    for (int64_t i = s; i > e; i += step)
      out.append(*in[0], i);
  }
  if (out.size() != rt.getNumElements())
    return std::nullopt;
  return out;
}

std::optional<Literal> Evaluator::range() const {
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
    if (out.isFloat()) {
      out.fps.push_back(start + i * delta);
      continue;
    }
    std::optional<int64_t> step = checked(i, in[2]->ints[0], '*');
    std::optional<int64_t> v =
        step ? checked(in[0]->ints[0], *step, '+') : std::nullopt;
    if (!v)
      return std::nullopt;
    out.ints.push_back(*v);
  }
  return out;
}

/// The one value of ConstantOfShape's `value` attribute (0 when absent).
std::optional<double> fillValue(ConstantOfShapeOp op) {
  std::optional<ElementsAttr> value = op.getValue();
  if (!value)
    return 0.0;
  Type elementType = value->getElementType();
  auto floats =
      isa<FloatType>(elementType) ? readFloatElements(*value) : std::nullopt;
  auto ints =
      isa<IntegerType>(elementType) ? readIntElements(*value) : std::nullopt;
  if (floats && floats->size() == 1)
    return (*floats)[0];
  if (ints && ints->size() == 1)
    return double((*ints)[0]);
  return std::nullopt;
}

std::optional<Literal> Evaluator::constantOfShape(ConstantOfShapeOp op) const {
  if (!all(1))
    return std::nullopt;
  Shape shape(in[0]->ints.begin(), in[0]->ints.end());
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }) ||
      numElements(shape) > maxElements)
    return std::nullopt;
  std::optional<double> fill = fillValue(op);
  if (!fill)
    return std::nullopt;
  Literal out{shape, resultElem, {}, {}};
  int64_t n = numElements(shape);
  if (out.isFloat())
    out.fps.assign(n, *fill);
  else
    out.ints.assign(n, Literal::saturatingInt(*fill));
  return out;
}

/// TorchScript's repeat_interleave builds its Tile repeats this way.
std::optional<Literal> Evaluator::oneHot(OneHotOp op) const {
  if (!all(3) || in[0]->isFloat() || in[1]->size() != 1 || in[2]->size() != 2)
    return std::nullopt;
  const Literal &idx = *in[0], &values = *in[2];
  double depthValue = in[1]->at(0);
  if (!(depthValue >= 1 && depthValue <= double(maxElements)))
    return std::nullopt;
  int64_t depth = static_cast<int64_t>(depthValue);
  int64_t rank = idx.shape.size() + 1;
  int64_t axis = signedAttr(op.getAxis());
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank)
    return std::nullopt;
  Shape shape(idx.shape.begin(), idx.shape.begin() + axis);
  shape.push_back(depth);
  shape.append(idx.shape.begin() + axis, idx.shape.end());
  if (numElements(shape) > maxElements)
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
        out.append(values, on ? 1 : 0);
      }
  return out;
}

/// Full reductions of 1-D integer tensors without keepdims (element counts
/// of shapes): `combine` folded over the values from `init` (the first value
/// when none).
std::optional<Literal>
Evaluator::reduce(bool keepDims, std::optional<int64_t> init,
                  std::optional<int64_t> (*combine)(int64_t, int64_t)) const {
  if (in.empty() || !in[0] || in[0]->shape.size() != 1 ||
      (in.size() > 1 && in[1]) || in[0]->isFloat() || keepDims)
    return std::nullopt;
  const Literal &x = *in[0];
  if (x.ints.empty())
    return std::nullopt;
  int64_t r = init.value_or(x.ints[0]);
  for (int64_t v : x.ints) {
    std::optional<int64_t> next = combine(r, v);
    if (!next)
      return std::nullopt;
    r = *next;
  }
  return Literal{{}, resultElem, {r}, {}};
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
    auto result =
        Evaluator(ins, resultType.getElementType(), maxElements).evaluate(op);
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
