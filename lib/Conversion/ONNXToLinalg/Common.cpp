//===- Common.cpp - shared helpers of the onnx to linalg lowering ---------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace xfmr::lowering {

//===----------------------------------------------------------------------===//
// Type conversion and the pattern base
//===----------------------------------------------------------------------===//

static Type signlessElement(Type t) {
  if (auto i = dyn_cast<IntegerType>(t); i && !i.isSignless())
    return IntegerType::get(t.getContext(), i.getWidth());
  return t;
}

ONNXTypeConverter::ONNXTypeConverter(MLIRContext *ctx) {
  addConversion([](Type t) { return t; });
  addConversion([](IntegerType t) { return signlessElement(t); });
  addConversion([](RankedTensorType t) -> Type {
    return t.clone(signlessElement(t.getElementType()));
  });
  addConversion([](UnrankedTensorType t) -> Type {
    return UnrankedTensorType::get(signlessElement(t.getElementType()));
  });
  auto materialize = [](OpBuilder &b, Type type, ValueRange inputs,
                        Location loc) -> Value {
    return UnrealizedConversionCastOp::create(b, loc, type, inputs)
        .getResult(0);
  };
  addSourceMaterialization(materialize);
  addTargetMaterialization(materialize);
}

LogicalResult recordUnsupported(UnsupportedLog &log, Operation *op,
                                const Twine &why) {
  log.reasons.try_emplace(op, why.str());
  return failure();
}

LogicalResult checkSupportedTypes(Operation *op, UnsupportedLog &log,
                                  bool allowFloat8) {
  auto supported = [allowFloat8](Type t) {
    if (isa<NoneType>(t))
      return true;
    auto shaped = dyn_cast<RankedTensorType>(t);
    if (!shaped)
      return false;
    Type e = shaped.getElementType();
    if (auto i = dyn_cast<IntegerType>(e))
      return llvm::is_contained({1u, 8u, 16u, 32u, 64u}, i.getWidth());
    return e.isF16() || e.isBF16() || e.isF32() || e.isF64() ||
           (allowFloat8 && isa<Float8E4M3FNType>(e));
  };
  for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
    if (!supported(v.getType()))
      return recordUnsupported(log, op, "type " + typeName(v.getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes and constants
//===----------------------------------------------------------------------===//

std::optional<SmallVector<int64_t>> intsAttr(Operation *op, StringRef name) {
  auto a = dyn_cast_or_null<ArrayAttr>(op->getAttr(name));
  if (!a)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (Attribute e : a) {
    auto i = dyn_cast<IntegerAttr>(e);
    if (!i)
      return std::nullopt;
    out.push_back(i.getValue().getSExtValue());
  }
  return out;
}

int64_t defaultOpset(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  while (module) {
    if (auto d = module->getAttrOfType<DictionaryAttr>(onnx::kOpsetImportAttrName))
      if (auto v = dyn_cast_or_null<IntegerAttr>(d.get("ai.onnx")))
        return v.getInt();
    module = module->getParentOfType<ModuleOp>();
  }
  return 0;
}

bool isNone(Value v) { return !v || isa<NoneType>(v.getType()); }

std::optional<SmallVector<int64_t>> constantInts(Value converted,
                                                 Value original) {
  for (Value v : {converted, original}) {
    if (!v)
      continue;
    if (auto c = onnx::getConstantInts(v))
      return c;
    ElementsAttr attr;
    if (matchPattern(v, m_Constant(&attr)))
      if (auto c = onnx::readIntElements(attr))
        return c;
  }
  return std::nullopt;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

Type elementType(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

bool isUnsignedInt(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && i.isUnsigned();
}

bool isFloat(Type t) { return isa<FloatType>(t); }

Value scalarConstant(OpBuilder &b, Location loc, Type type, double v) {
  if (auto f = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(f, v));
  if (isa<IndexType>(type))
    return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(v));
  return arith::ConstantOp::create(
      b, loc, type, b.getIntegerAttr(type, static_cast<int64_t>(v)));
}

static Value extremeValue(OpBuilder &b, Location loc, Type type,
                          bool isUnsigned, bool highest) {
  if (auto f = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(
        b, loc, type,
        b.getFloatAttr(f, APFloat::getInf(f.getFloatSemantics(), !highest)));
  unsigned w = type.getIntOrFloatBitWidth();
  APInt v = isUnsigned ? (highest ? APInt::getMaxValue(w) : APInt::getMinValue(w))
                       : (highest ? APInt::getSignedMaxValue(w)
                                  : APInt::getSignedMinValue(w));
  return arith::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
}

Value lowestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned) {
  return extremeValue(b, loc, type, isUnsigned, /*highest=*/false);
}

Value highestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned) {
  return extremeValue(b, loc, type, isUnsigned, /*highest=*/true);
}

Value castScalar(OpBuilder &b, Location loc, Value v, Type srcOrig,
                 Type dstOrig) {
  Type src = signlessElement(srcOrig), dst = signlessElement(dstOrig);
  if (srcOrig == dstOrig)
    return v;
  bool srcUnsigned = isUnsignedInt(srcOrig) || src.isInteger(1);
  if (dst.isInteger(1)) {
    if (isa<FloatType>(src))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                   scalarConstant(b, loc, src, 0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v,
                                 scalarConstant(b, loc, src, 0));
  }
  if (auto sf = dyn_cast<FloatType>(src)) {
    if (auto df = dyn_cast<FloatType>(dst)) {
      if (sf.getWidth() == df.getWidth()) { // f16 <-> bf16: through f32
        v = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
        return arith::TruncFOp::create(b, loc, dst, v);
      }
      if (sf.getWidth() < df.getWidth())
        return arith::ExtFOp::create(b, loc, dst, v);
      return arith::TruncFOp::create(b, loc, dst, v);
    }
    if (isUnsignedInt(dstOrig))
      return arith::FPToUIOp::create(b, loc, dst, v);
    return arith::FPToSIOp::create(b, loc, dst, v);
  }
  if (isa<FloatType>(dst)) {
    if (srcUnsigned)
      return arith::UIToFPOp::create(b, loc, dst, v);
    return arith::SIToFPOp::create(b, loc, dst, v);
  }
  unsigned sw = src.getIntOrFloatBitWidth(), dw = dst.getIntOrFloatBitWidth();
  if (sw == dw)
    return v;
  if (sw > dw)
    return arith::TruncIOp::create(b, loc, dst, v);
  if (srcUnsigned)
    return arith::ExtUIOp::create(b, loc, dst, v);
  return arith::ExtSIOp::create(b, loc, dst, v);
}

Value toIndex(OpBuilder &b, Location loc, Value v, bool isUnsigned) {
  if (isa<IndexType>(v.getType()))
    return v;
  if (isUnsigned || v.getType().isInteger(1))
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

SmallVector<OpFoldResult> mixedSizes(OpBuilder &b, Location loc, Value t) {
  return tensor::getMixedSizes(b, loc, t);
}

SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc,
                                RankedTensorType type,
                                ArrayRef<OpFoldResult> sizes) {
  SmallVector<Value> dyn;
  for (auto [i, s] : llvm::enumerate(sizes))
    if (type.isDynamicDim(i))
      dyn.push_back(getValueOrCreateConstantIndexOp(b, loc, s));
  return dyn;
}

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                  ArrayRef<OpFoldResult> sizes) {
  return tensor::EmptyOp::create(b, loc, type,
                                 dynamicSizes(b, loc, type, sizes));
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   ArrayRef<OpFoldResult> sizes, Value scalar) {
  Value empty = emptyTensor(b, loc, type, sizes);
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

SmallVector<OpFoldResult> broadcastSizes(OpBuilder &b, Location loc,
                                         RankedTensorType type,
                                         ValueRange operands) {
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    if (!type.isDynamicDim(d)) {
      sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
      continue;
    }
    // A static extent other than 1 decides; otherwise the run-time extent
    // that is not 1 (valid broadcasts only mix 1 and one other value).
    std::optional<int64_t> fixed;
    SmallVector<Value> dynamic;
    for (Value v : operands) {
      auto t = cast<RankedTensorType>(v.getType());
      int64_t j = d - (rank - t.getRank());
      if (j < 0 || t.getDimSize(j) == 1)
        continue;
      if (!t.isDynamicDim(j))
        fixed = t.getDimSize(j);
      else
        dynamic.push_back(tensor::DimOp::create(b, loc, v, j));
    }
    if (fixed) {
      sizes.push_back(b.getIndexAttr(*fixed));
      continue;
    }
    // The extent that is not 1, if any (0 is a valid extent: an empty
    // operand broadcasts against size-1 ones to an empty result).
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value size = one;
    for (Value v : dynamic) {
      Value isOne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, v, one);
      size = arith::SelectOp::create(b, loc, isOne, size, v);
    }
    sizes.push_back(size);
  }
  return sizes;
}

/// The generic with affine maps: operand dims that are dynamic are taken to
/// equal the result's (checked by the caller).
static Value buildMappedElementwise(OpBuilder &b, Location loc,
                                    RankedTensorType type, ValueRange operands,
                                    const ScalarBody &body,
                                    ArrayRef<OpFoldResult> sizes) {
  int64_t rank = type.getRank();
  Value init = emptyTensor(b, loc, type, sizes);
  SmallVector<AffineMap> maps;
  MLIRContext *ctx = b.getContext();
  for (Value v : operands) {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<AffineExpr> exprs;
    for (int64_t j = 0; j < t.getRank(); ++j) {
      int64_t d = rank - t.getRank() + j;
      bool broadcast = t.getDimSize(j) == 1 && type.getDimSize(d) != 1;
      exprs.push_back(broadcast ? getAffineConstantExpr(0, ctx)
                                : getAffineDimExpr(d, ctx));
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, operands, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value r = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, r);
      });
  return generic.getResult(0);
}

Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType type,
                       ValueRange operands, const ScalarBody &body,
                       std::optional<ArrayRef<OpFoldResult>> givenSizes) {
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> sizes =
      givenSizes ? SmallVector<OpFoldResult>(*givenSizes)
                 : broadcastSizes(b, loc, type, operands);
  // A dynamic operand extent may be 1 at run time and broadcast. Check that
  // each is 1 or the result's; when all equal the result's (the usual case)
  // run the mapped generic, else one that clamps indices of size-1 dims.
  Value allEqual;
  for (Value v : operands) {
    auto t = cast<RankedTensorType>(v.getType());
    for (int64_t j = 0; j < t.getRank(); ++j) {
      int64_t d = rank - t.getRank() + j;
      if (!t.isDynamicDim(j))
        continue;
      Value have = tensor::DimOp::create(b, loc, v, j);
      Value want = getValueOrCreateConstantIndexOp(b, loc, sizes[d]);
      Value eq = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, have, want);
      Value one = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, have,
                                        arith::ConstantIndexOp::create(b, loc, 1));
      runtimeCheck(b, loc, arith::OrIOp::create(b, loc, eq, one),
                   "broadcast: incompatible extents");
      allEqual = allEqual ? arith::AndIOp::create(b, loc, allEqual, eq).getResult()
                          : eq;
    }
  }
  if (!allEqual)
    return buildMappedElementwise(b, loc, type, operands, body, sizes);
  auto ifOp = scf::IfOp::create(
      b, loc, allEqual,
      [&](OpBuilder &tb, Location tl) {
        scf::YieldOp::create(
            tb, tl, buildMappedElementwise(tb, tl, type, operands, body, sizes));
      },
      [&](OpBuilder &eb, Location el) {
        Value r = buildIndexed(
            eb, el, type, sizes, [&](OpBuilder &nb, Location nl, ValueRange out) {
              SmallVector<Value> scalars;
              for (Value v : operands) {
                auto t = cast<RankedTensorType>(v.getType());
                SmallVector<Value> at;
                for (int64_t j = 0; j < t.getRank(); ++j) {
                  int64_t d = rank - t.getRank() + j;
                  Value zero = arith::ConstantIndexOp::create(nb, nl, 0);
                  if (t.getDimSize(j) == 1) {
                    at.push_back(zero);
                  } else if (!t.isDynamicDim(j)) {
                    at.push_back(out[d]);
                  } else {
                    Value dim = tensor::DimOp::create(nb, nl, v, j);
                    Value isOne = arith::CmpIOp::create(
                        nb, nl, arith::CmpIPredicate::eq, dim,
                        arith::ConstantIndexOp::create(nb, nl, 1));
                    at.push_back(arith::SelectOp::create(nb, nl, isOne, zero, out[d]));
                  }
                }
                scalars.push_back(tensor::ExtractOp::create(nb, nl, v, at));
              }
              return body(nb, nl, scalars);
            });
        scf::YieldOp::create(eb, el, r);
      });
  return ifOp.getResult(0);
}

Value buildIndexed(OpBuilder &b, Location loc, RankedTensorType type,
                   ArrayRef<OpFoldResult> sizes, const IndexBody &body) {
  int64_t rank = type.getRank();
  Value init = emptyTensor(b, loc, type, sizes);
  SmallVector<AffineMap> maps{
      AffineMap::getMultiDimIdentityMap(rank, b.getContext())};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{}, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange) {
        SmallVector<Value> idx;
        for (int64_t d = 0; d < rank; ++d)
          idx.push_back(linalg::IndexOp::create(nb, nloc, d));
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, idx));
      });
  return generic.getResult(0);
}

Value reshapeTo(OpBuilder &b, Location loc, Value x, RankedTensorType type,
                ArrayRef<Value> sizes) {
  if (x.getType() == type && type.hasStaticShape())
    return x;
  Value shape = tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({(int64_t)sizes.size()}, b.getIndexType()),
      sizes);
  return tensor::ReshapeOp::create(b, loc, type, x, shape);
}

} // namespace xfmr::lowering
