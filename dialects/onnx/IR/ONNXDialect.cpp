//===- ONNXDialect.cpp - onnx dialect registration and constants ----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXDialect.h"
#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace xfmr::onnx;

#include "dialects/onnx/IR/ONNXDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/onnx/IR/ONNXOps.cpp.inc"
      >();
}

Operation *ONNXDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  if (isa<UnitAttr>(value) && isa<NoneType>(type))
    return NoValueOp::create(builder, loc, type);
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements, nullptr, nullptr,
                            nullptr, nullptr, nullptr, nullptr);
}

OpFoldResult NoValueOp::fold(FoldAdaptor) {
  return UnitAttr::get(getContext());
}

OpFoldResult ConstantOp::fold(FoldAdaptor) {
  // Only the canonical `value` form folds; the importer normalizes the
  // value_float/value_ints/... forms into it.
  return getValueAttr();
}

//===----------------------------------------------------------------------===//
// Constant readers
//===----------------------------------------------------------------------===//

/// The raw bytes of a resource-backed tensor, or an empty ref.
static ArrayRef<char> resourceBytes(ElementsAttr attr) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  if (!resource)
    return {};
  AsmResourceBlob *blob = resource.getRawHandle().getBlob();
  if (!blob)
    return {};
  return blob->getData();
}

std::optional<SmallVector<int64_t>>
xfmr::onnx::readIntElements(ElementsAttr attr) {
  if (!attr)
    return std::nullopt;
  auto type = cast<ShapedType>(attr.getType());
  auto intType = dyn_cast<IntegerType>(type.getElementType());
  if (!intType || !type.hasStaticShape())
    return std::nullopt;
  int64_t n = type.getNumElements();
  SmallVector<int64_t> out;
  out.reserve(n);
  if (auto dense = dyn_cast<DenseIntElementsAttr>(attr)) {
    for (const APInt &v : dense.getValues<APInt>())
      out.push_back(intType.isUnsigned() || intType.getWidth() == 1
                        ? static_cast<int64_t>(v.getZExtValue())
                        : v.getSExtValue());
    return out;
  }
  ArrayRef<char> bytes = resourceBytes(attr);
  unsigned width = intType.getWidth();
  unsigned stride = width == 1 ? 1 : width / 8;
  if (width % 8 != 0 && width != 1)
    return std::nullopt;
  if (bytes.size() != static_cast<size_t>(n) * stride)
    return std::nullopt;
  for (int64_t i = 0; i < n; ++i) {
    const char *p = bytes.data() + i * stride;
    int64_t v = 0;
    switch (stride) {
    case 1:
      v = intType.isUnsigned() || width == 1
              ? *reinterpret_cast<const uint8_t *>(p)
              : *reinterpret_cast<const int8_t *>(p);
      break;
    case 2: {
      uint16_t raw;
      memcpy(&raw, p, 2);
      v = intType.isUnsigned() ? raw : static_cast<int16_t>(raw);
      break;
    }
    case 4: {
      uint32_t raw;
      memcpy(&raw, p, 4);
      v = intType.isUnsigned() ? raw : static_cast<int32_t>(raw);
      break;
    }
    case 8:
      memcpy(&v, p, 8);
      break;
    default:
      return std::nullopt;
    }
    out.push_back(v);
  }
  return out;
}

std::optional<SmallVector<double>>
xfmr::onnx::readFloatElements(ElementsAttr attr) {
  if (!attr)
    return std::nullopt;
  auto type = cast<ShapedType>(attr.getType());
  auto floatType = dyn_cast<FloatType>(type.getElementType());
  if (!floatType || !type.hasStaticShape())
    return std::nullopt;
  SmallVector<double> out;
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr)) {
    for (const APFloat &v : dense.getValues<APFloat>())
      out.push_back(v.convertToDouble());
    return out;
  }
  ArrayRef<char> bytes = resourceBytes(attr);
  int64_t n = type.getNumElements();
  unsigned width = floatType.getWidth();
  if (width % 8 != 0 || bytes.size() != static_cast<size_t>(n) * (width / 8))
    return std::nullopt;
  const llvm::fltSemantics &sem = floatType.getFloatSemantics();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t raw = 0;
    memcpy(&raw, bytes.data() + i * (width / 8), width / 8);
    APFloat v(sem, APInt(width, raw));
    out.push_back(v.convertToDouble());
  }
  return out;
}

std::optional<SmallVector<int64_t>> xfmr::onnx::getConstantInts(Value value) {
  ElementsAttr attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  return readIntElements(attr);
}

Type xfmr::onnx::convertONNXElementType(MLIRContext *ctx, int32_t dataType) {
  Builder b(ctx);
  auto unsignedInt = [&](unsigned w) {
    return IntegerType::get(ctx, w, IntegerType::Unsigned);
  };
  switch (dataType) {
  case 1:
    return b.getF32Type();
  case 2:
    return unsignedInt(8);
  case 3:
    return b.getIntegerType(8);
  case 4:
    return unsignedInt(16);
  case 5:
    return b.getIntegerType(16);
  case 6:
    return b.getIntegerType(32);
  case 7:
    return b.getIntegerType(64);
  case 9:
    return b.getI1Type();
  case 10:
    return b.getF16Type();
  case 11:
    return b.getF64Type();
  case 12:
    return unsignedInt(32);
  case 13:
    return unsignedInt(64);
  case 16:
    return b.getBF16Type();
  case 17:
    return b.getType<Float8E4M3FNType>();
  case 18:
    return b.getType<Float8E4M3FNUZType>();
  case 19:
    return b.getType<Float8E5M2Type>();
  case 20:
    return b.getType<Float8E5M2FNUZType>();
  case 21:
    return unsignedInt(4);
  case 22:
    return b.getIntegerType(4);
  default:
    return {};
  }
}
