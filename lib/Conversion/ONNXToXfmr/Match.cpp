//===- Match.cpp - helpers for raising onnx subgraphs to xfmr ops ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Match.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;

namespace xfmr::raise {

void RaiseLog::unfused(Operation *anchor, StringRef kind, const Twine &reason) {
  left.push_back((kind + " at " + nodeName(anchor) + ": " + reason).str());
}

void RaiseLog::print(raw_ostream &os, StringRef function) const {
  os << "xfmr-raise @" << function << ": formed";
  if (counts.empty())
    os << " nothing";
  bool first = true;
  for (auto [kind, n] : counts) {
    os << (first ? " " : ", ") << n << " " << kind;
    first = false;
  }
  os << "; " << left.size() << " candidate(s) left unfused\n";
  for (const std::string &line : left)
    os << "  unfused " << line << "\n";
}

Operation *soleUser(Value v) {
  if (!v || !v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

Value otherOperand(Operation *binary, Value v) {
  if (!binary || binary->getNumOperands() != 2)
    return nullptr;
  if (binary->getOperand(0) == v)
    return binary->getOperand(1);
  if (binary->getOperand(1) == v)
    return binary->getOperand(0);
  return nullptr;
}

static std::optional<double> splatValue(Value v) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return std::nullopt;
  Type t = dense.getElementType();
  if (isa<FloatType>(t))
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (t.isInteger(1))
    return dense.getSplatValue<bool>() ? 1.0 : 0.0;
  if (isa<IntegerType>(t))
    return static_cast<double>(dense.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

static std::optional<double> evaluate(Value v, int depth) {
  if (depth > 8 || !v)
    return std::nullopt;
  if (auto s = splatValue(v))
    return s;
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto arg = [&](unsigned i) { return evaluate(op->getOperand(i), depth + 1); };
  if (isa<onnx::CastOp, onnx::ReshapeOp, onnx::UnsqueezeOp, onnx::SqueezeOp,
          onnx::IdentityOp>(op))
    return arg(0);
  if (isa<onnx::SqrtOp>(op)) {
    auto a = arg(0);
    return a ? std::optional<double>(std::sqrt(*a)) : std::nullopt;
  }
  if (!isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::PowOp>(op))
    return std::nullopt;
  auto a = arg(0), b = arg(1);
  if (!a || !b)
    return std::nullopt;
  if (isa<onnx::AddOp>(op))
    return *a + *b;
  if (isa<onnx::SubOp>(op))
    return *a - *b;
  if (isa<onnx::MulOp>(op))
    return *a * *b;
  if (isa<onnx::DivOp>(op))
    return *a / *b;
  return std::pow(*a, *b);
}

std::optional<double> scalarValue(Value v) { return evaluate(v, 0); }

Value stripCasts(Value v) {
  while (auto cast = def<onnx::CastOp>(v))
    v = cast.getInput();
  return v;
}

bool isScalar(Value v, double expected) {
  auto s = scalarValue(v);
  return s && std::abs(*s - expected) <= 1e-6 * std::max(1.0, std::abs(expected));
}

std::optional<SmallVector<int64_t>> constantInts(Value v) {
  ElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto dense = dyn_cast<DenseIntElementsAttr>(attr)) {
    SmallVector<int64_t> out;
    for (const APInt &x : dense.getValues<APInt>())
      out.push_back(x.getSExtValue());
    return out;
  }
  if (auto blob = dyn_cast<DenseI64ResourceElementsAttr>(attr))
    if (auto data = blob.tryGetAsArrayRef();
        data && static_cast<int64_t>(data->size()) == attr.getNumElements())
      return SmallVector<int64_t>(data->begin(), data->end());
  return std::nullopt;
}

std::optional<SmallVector<float>> floatValues(Value v) {
  ElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.getElementType().isF32())
    return std::nullopt;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return llvm::to_vector(dense.getValues<float>());
  if (auto blob = dyn_cast<DenseF32ResourceElementsAttr>(attr))
    if (auto data = blob.tryGetAsArrayRef();
        data && static_cast<int64_t>(data->size()) == attr.getNumElements())
      return SmallVector<float>(data->begin(), data->end());
  return std::nullopt;
}

int64_t rankOf(Value v) {
  auto t = v ? dyn_cast<RankedTensorType>(v.getType()) : RankedTensorType();
  return t ? t.getRank() : -1;
}

int64_t dimOf(Value v, int64_t dim) {
  auto t = cast<RankedTensorType>(v.getType());
  if (dim < 0)
    dim += t.getRank();
  return t.getDimSize(dim);
}

Type elementTypeOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

bool isConstant(Value v) { return v && matchPattern(v, m_Constant()); }

bool isLastAxis(int64_t axis, int64_t rank) {
  return axis == -1 || axis == rank - 1;
}

bool isLastAxisOnly(Value axes, int64_t rank) {
  if (!axes || isa<NoneType>(axes.getType()))
    return rank == 1;
  auto values = constantInts(axes);
  return values && values->size() == 1 && isLastAxis((*values)[0], rank);
}

std::string nodeName(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    os << "node '" << name.getName().getValue() << "' ("
       << op->getName().stripDialect() << ")";
  else
    os << op->getName().getStringRef() << " at " << op->getLoc();
  return s;
}

std::optional<int64_t> splitDim(Value v, int64_t i) {
  auto [from, j] = onnx::getDimOrigin(v, i);
  auto reshape = def<onnx::ReshapeOp>(from);
  if (!reshape || j < 0)
    return std::nullopt;
  auto target = onnx::getShapeValue(reshape.getShape());
  int64_t rank = rankOf(reshape.getData());
  int64_t n = rank > 0 ? dimOf(reshape.getData(), -1) : ShapedType::kDynamic;
  if (!target || ShapedType::isDynamic(n) || n <= 0 || j < rank - 1 ||
      j >= static_cast<int64_t>(target->size()))
    return std::nullopt;
  // The split entries [rank - 1, end): one unknown (dim j), the rest static.
  int64_t rest = 1;
  for (int64_t e = rank - 1, end = target->size(); e < end; ++e) {
    int64_t d = (*target)[e];
    bool unknown = d == -1 || ShapedType::isDynamic(d);
    if (unknown != (e == j) || (!unknown && d <= 0))
      return std::nullopt;
    if (!unknown)
      rest *= d;
  }
  if (n % rest)
    return std::nullopt;
  return n / rest;
}

Value withStaticDims(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape,
                     function_ref<std::string(int64_t, int64_t)> message) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> refined(type.getShape());
  for (auto [axis, want] : llvm::enumerate(shape)) {
    if (!type.isDynamicDim(axis) || ShapedType::isDynamic(want))
      continue;
    Value got = tensor::DimOp::create(b, loc, v, axis);
    Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, got,
                                     arith::ConstantIndexOp::create(b, loc, want));
    cf::AssertOp::create(b, loc, ok, message(axis, want));
    refined[axis] = want;
  }
  if (refined == type.getShape())
    return v;
  return tensor::CastOp::create(b, loc, type.clone(refined), v);
}

Value withStaticDims(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape,
                     const std::string &what) {
  return withStaticDims(b, loc, v, shape, [&](int64_t axis, int64_t want) {
    return what + ": dim " + std::to_string(axis) + " must be " + std::to_string(want) +
           " (derived at compile time)";
  });
}

SmallVector<int64_t> splitShape(Value v, ArrayRef<int64_t> dims) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t d : dims)
    if (d < type.getRank() && type.isDynamicDim(d))
      if (auto x = splitDim(v, d))
        shape[d] = *x;
  return shape;
}

bool sameUpToDynamic(Type a, Type b) {
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  return ta && tb && ta.getElementType() == tb.getElementType() &&
         succeeded(verifyCompatibleShape(ta.getShape(), tb.getShape()));
}

Value castTo(OpBuilder &b, Location loc, Value v, Type type) {
  return v.getType() == type ? v : tensor::CastOp::create(b, loc, type, v).getResult();
}

std::string describeDim(Value v, int64_t i) {
  auto [from, j] = onnx::getDimOrigin(v, i);
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto arg = dyn_cast_or_null<BlockArgument>(from)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto name = func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "onnx.name")
                     : StringAttr();
    auto params = func ? func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), "onnx.dim_params")
                       : ArrayAttr();
    os << "input '" << (name ? name.getValue() : "?") << "' dim " << j;
    if (params && j < static_cast<int64_t>(params.size()))
      if (auto p = dyn_cast<StringAttr>(params[j]); p && !p.empty())
        os << " ('" << p.getValue() << "')";
  } else if (Operation *op = from ? from.getDefiningOp() : nullptr) {
    os << "dim " << j << " of " << nodeName(op);
  } else {
    os << "dim " << i;
  }
  return s;
}

Value makeConstant(OpBuilder &b, Location loc, ElementsAttr value) {
  return onnx::ConstantOp::create(b, loc, value.getType(), value, nullptr, nullptr, nullptr,
                                  nullptr, nullptr, nullptr);
}

Value blobConstant(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type element,
                   ArrayRef<char> bytes, StringRef name) {
  auto type = RankedTensorType::get(shape, element);
  auto attr = DenseResourceElementsAttr::get(
      type, name, HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, 64));
  return makeConstant(b, loc, attr);
}

Value i64Constant(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    b.getI64Type());
  return makeConstant(b, loc, DenseIntElementsAttr::get(type, values));
}

FloatAttr positiveSoftcap(OpBuilder &b, std::optional<APFloat> cap) {
  if (!cap || cap->isNegative() || cap->isZero())
    return FloatAttr();
  return b.getF32FloatAttr(cap->convertToFloat());
}

Value floatConstant(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  auto element = cast<FloatType>(type.getElementType());
  APFloat f(value);
  bool lost;
  f.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return makeConstant(b, loc, DenseElementsAttr::get(type, f));
}

Value transpose(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return onnx::TransposeOp::create(b, loc, type.clone(shape), v,
                                   b.getI64ArrayAttr(perm));
}

Value unsqueeze(OpBuilder &b, Location loc, Value v, int64_t axis) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.insert(shape.begin() + axis, 1);
  return onnx::UnsqueezeOp::create(b, loc, type.clone(shape), v,
                                   i64Constant(b, loc, {axis}));
}

Value squeeze(OpBuilder &b, Location loc, Value v, int64_t axis) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + axis);
  return onnx::SqueezeOp::create(b, loc, type.clone(shape), v,
                                 i64Constant(b, loc, {axis}));
}

Value sliceLast(OpBuilder &b, Location loc, Value x, int64_t from, int64_t n) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = n;
  return onnx::SliceOp::create(b, loc, type.clone(shape), x, i64Constant(b, loc, {from}),
                               i64Constant(b, loc, {from + n}), i64Constant(b, loc, {-1}),
                               i64Constant(b, loc, {1}));
}

std::optional<ArrayRef<char>> rawBytes(ElementsAttr attr) {
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return dense.isSplat() ? std::nullopt : std::optional(dense.getRawData());
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr))
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      return blob->getData();
  return std::nullopt;
}

std::optional<ArrayRef<float>> constantMatrix(Value v) {
  ElementsAttr w;
  if (rankOf(v) != 2 || !matchPattern(v, m_Constant(&w)))
    return std::nullopt;
  auto type = cast<RankedTensorType>(w.getType());
  if (!type.hasStaticShape() || !type.getElementType().isF32())
    return std::nullopt;
  ArrayRef<char> raw;
  if (auto dense = dyn_cast<DenseElementsAttr>(w); dense && !dense.isSplat())
    raw = dense.getRawData();
  else if (auto resource = dyn_cast<DenseResourceElementsAttr>(w))
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      raw = blob->getData();
  if (raw.size() != static_cast<size_t>(type.getNumElements()) * sizeof(float))
    return std::nullopt;
  return ArrayRef<float>(reinterpret_cast<const float *>(raw.data()), type.getNumElements());
}

std::optional<ArrayRef<float>> constantWeight(onnx::MatMulOp mm) {
  if (!elementTypeOf(mm.getA()).isF32())
    return std::nullopt;
  return constantMatrix(mm.getB());
}

/// The ONNX node name of `op` and the resource name of its weight `w`.
SmallVector<std::string> namesOf(Operation *op, Value w) {
  SmallVector<std::string> names;
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    names.push_back(name.getName().str());
  ElementsAttr attr;
  if (matchPattern(w, m_Constant(&attr)))
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr))
      names.push_back(resource.getRawHandle().getKey().str());
  return names;
}

} // namespace xfmr::raise
