//===- TensorImporter.cpp - ONNX tensors and types to MLIR ----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <sys/mman.h>
#include <unistd.h>

using namespace mlir;
using namespace xfmr::onnx_import;

namespace {

/// Drops the whole pages of [data, data + size) from this process's memory
/// (a read-only file mapping: a later read faults them in again).
void releasePages(void *data, size_t size) {
  auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<uintptr_t>(data);
  uintptr_t first = (begin + page - 1) / page * page;
  uintptr_t last = (begin + size) / page * page;
  if (last > first)
    (void)::madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}
// Data types newer than Debian's onnx 1.12 protobuf classes know.
constexpr int32_t kFloat8E4M3FN = 17, kFloat8E4M3FNUZ = 18, kFloat8E5M2 = 19,
                  kFloat8E5M2FNUZ = 20, kUInt4 = 21, kInt4 = 22;

std::string dataTypeName(int32_t dt) {
  static const char *const newer[] = {"FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                      "FLOAT8E5M2",   "FLOAT8E5M2FNUZ",
                                      "UINT4",        "INT4"};
  if (dt >= 17 && dt <= 22)
    return newer[dt - 17];
  if (pb::TensorProto_DataType_IsValid(dt))
    return pb::TensorProto_DataType_Name(
        static_cast<pb::TensorProto_DataType>(dt));
  return "UNKNOWN";
}

bool isInt4(int32_t dt) { return dt == kInt4 || dt == kUInt4; }

/// Reads element `i` of little-endian raw storage as an APInt of the
/// element type's bit width (int4 is packed two per byte, low nibble first).
APInt rawElement(ArrayRef<char> raw, int32_t dt, unsigned width, int64_t i) {
  if (isInt4(dt)) {
    uint8_t byte = static_cast<uint8_t>(raw[i / 2]);
    return APInt(4, (i % 2 == 0) ? (byte & 0xF) : (byte >> 4));
  }
  unsigned bytes = width == 1 ? 1 : width / 8;
  uint64_t v = 0;
  memcpy(&v, raw.data() + i * bytes, bytes);
  if (width == 1)
    v = v != 0;
  return APInt(width, v);
}

ElementsAttr denseFromRaw(RankedTensorType type, int32_t dt,
                          ArrayRef<char> raw) {
  Type elem = type.getElementType();
  int64_t n = type.getNumElements();
  unsigned width = elem.getIntOrFloatBitWidth();
  if (auto ft = dyn_cast<FloatType>(elem)) {
    SmallVector<APFloat> values;
    values.reserve(n);
    for (int64_t i = 0; i < n; ++i)
      values.emplace_back(ft.getFloatSemantics(),
                          rawElement(raw, dt, width, i));
    return DenseElementsAttr::get(type, values);
  }
  SmallVector<APInt> values;
  values.reserve(n);
  for (int64_t i = 0; i < n; ++i)
    values.push_back(rawElement(raw, dt, width, i));
  return DenseElementsAttr::get(type, values);
}

/// Serializes typed-field data (float_data, int32_data, ...) into the raw
/// little-endian layout `raw_data` would have had.
FailureOr<std::string> typedToRaw(const ImportContext &ic,
                                  const pb::TensorProto &t,
                                  llvm::StringRef what, int64_t n,
                                  int64_t elemBytes) {
  int32_t dt = t.data_type();
  std::string out(static_cast<size_t>(n * elemBytes), '\0');
  auto mismatch = [&](llvm::StringRef field, int64_t count) {
    ic.error() << what << ": " << field << " holds " << count
               << " values, expected " << n;
    return failure();
  };
  switch (dt) {
  case pb::TensorProto::FLOAT:
    if (t.float_data_size() != n)
      return mismatch("float_data", t.float_data_size());
    memcpy(out.data(), t.float_data().data(), n * 4);
    return out;
  case pb::TensorProto::DOUBLE:
    if (t.double_data_size() != n)
      return mismatch("double_data", t.double_data_size());
    memcpy(out.data(), t.double_data().data(), n * 8);
    return out;
  case pb::TensorProto::INT64:
    if (t.int64_data_size() != n)
      return mismatch("int64_data", t.int64_data_size());
    memcpy(out.data(), t.int64_data().data(), n * 8);
    return out;
  case pb::TensorProto::UINT32:
  case pb::TensorProto::UINT64:
    if (t.uint64_data_size() != n)
      return mismatch("uint64_data", t.uint64_data_size());
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = t.uint64_data(i);
      memcpy(out.data() + i * elemBytes, &v, elemBytes);
    }
    return out;
  default:
    break;
  }
  if (isInt4(dt)) {
    ic.error() << what << ": 4-bit tensors must use raw_data";
    return failure();
  }
  // int32, int16, int8, uint16, uint8, bool, float16, bfloat16, float8: one
  // int32_data entry per element holding the low bits.
  if (t.int32_data_size() != n)
    return mismatch("int32_data", t.int32_data_size());
  // Integer types stored in int32_data must fit their type; float16,
  // bfloat16 and float8 store raw bit patterns of their width.
  int64_t lo = 0, hi = 0;
  switch (dt) {
  case pb::TensorProto::INT8:
    lo = -128, hi = 127;
    break;
  case pb::TensorProto::UINT8:
    lo = 0, hi = 255;
    break;
  case pb::TensorProto::INT16:
    lo = -32768, hi = 32767;
    break;
  case pb::TensorProto::UINT16:
    lo = 0, hi = 65535;
    break;
  case pb::TensorProto::BOOL:
    lo = 0, hi = 1;
    break;
  case pb::TensorProto::INT32:
    lo = INT32_MIN, hi = INT32_MAX;
    break;
  default:
    lo = 0, hi = (int64_t(1) << (8 * elemBytes)) - 1;
    break;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = t.int32_data(i);
    if (v < lo || v > hi) {
      ic.error() << what << ": int32_data value " << v
                 << " is out of range for " << dataTypeName(dt);
      return failure();
    }
    uint32_t bits = static_cast<uint32_t>(v);
    memcpy(out.data() + i * elemBytes, &bits, elemBytes);
  }
  return out;
}

int64_t typedFieldCount(const pb::TensorProto &t) {
  return t.float_data_size() + t.int32_data_size() + t.string_data_size() +
         t.int64_data_size() + t.double_data_size() + t.uint64_data_size();
}

std::string blobName(llvm::StringRef tensorName) {
  return tensorName.empty() ? std::string("onnx_tensor") : tensorName.str();
}
} // namespace

int64_t xfmr::onnx_import::rawElementBytes(int32_t dataType) {
  switch (dataType) {
  case pb::TensorProto::FLOAT:
  case pb::TensorProto::INT32:
  case pb::TensorProto::UINT32:
    return 4;
  case pb::TensorProto::UINT8:
  case pb::TensorProto::INT8:
  case pb::TensorProto::BOOL:
  case kFloat8E4M3FN:
  case kFloat8E4M3FNUZ:
  case kFloat8E5M2:
  case kFloat8E5M2FNUZ:
    return 1;
  case pb::TensorProto::UINT16:
  case pb::TensorProto::INT16:
  case pb::TensorProto::FLOAT16:
  case pb::TensorProto::BFLOAT16:
    return 2;
  case pb::TensorProto::INT64:
  case pb::TensorProto::DOUBLE:
  case pb::TensorProto::UINT64:
    return 8;
  case kInt4:
  case kUInt4:
    return 0;
  default:
    return -1;
  }
}

FailureOr<int64_t> xfmr::onnx_import::checkDims(const ImportContext &ic,
                                                llvm::StringRef what,
                                                ArrayRef<int64_t> dims) {
  if (static_cast<int64_t>(dims.size()) > ic.options.maxRank) {
    ic.error() << what << ": rank " << dims.size() << " exceeds the limit of "
               << ic.options.maxRank;
    return failure();
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      ic.error() << what << ": dim " << d << " is negative";
      return failure();
    }
    if (d > ic.options.maxDim) {
      ic.error() << what << ": dim " << d << " exceeds the limit of "
                 << ic.options.maxDim;
      return failure();
    }
    if (__builtin_mul_overflow(n, d, &n)) {
      ic.error() << what << ": element count overflows int64";
      return failure();
    }
  }
  if (n > ic.options.maxElements) {
    ic.error() << what << ": " << n << " elements exceed the limit of "
               << ic.options.maxElements;
    return failure();
  }
  return n;
}

FailureOr<ElementsAttr>
xfmr::onnx_import::importTensor(const ImportContext &ic, pb::TensorProto &t,
                                llvm::StringRef what,
                                ExternalDataResolver &external) {
  int32_t dt = t.data_type();
  Type elem = xfmr::onnx::convertONNXElementType(ic.ctx, dt);
  int64_t elemBytes = rawElementBytes(dt);
  if (!elem || elemBytes < 0) {
    ic.error() << what << ": unsupported data type " << dataTypeName(dt) << " ("
               << dt << ")";
    return failure();
  }
  if (t.has_segment()) {
    ic.error() << what << ": segmented tensors are not supported";
    return failure();
  }
  SmallVector<int64_t> dims(t.dims().begin(), t.dims().end());
  FailureOr<int64_t> n = checkDims(ic, what, dims);
  if (failed(n))
    return failure();
  auto type = RankedTensorType::get(dims, elem);
  uint64_t expected = isInt4(dt) ? (static_cast<uint64_t>(*n) + 1) / 2
                                 : static_cast<uint64_t>(*n) * elemBytes;
  bool isExternal = t.data_location() == pb::TensorProto::EXTERNAL;
  if (!isExternal && t.external_data_size() > 0) {
    ic.error()
        << what
        << ": has external_data entries but data_location is not EXTERNAL";
    return failure();
  }
  int64_t typed = typedFieldCount(t);
  if (isExternal && (t.has_raw_data() || typed > 0)) {
    ic.error() << what << ": has both external data and inline data";
    return failure();
  }
  if (t.has_raw_data() && typed > 0) {
    ic.error() << what << ": has both raw_data and typed data fields";
    return failure();
  }
  if (t.string_data_size() > 0) {
    ic.error() << what << ": string_data is not supported for "
               << dataTypeName(dt);
    return failure();
  }

  // Inline: small tensors become dense attributes that folders can read.
  bool inlineIt = !isExternal && *n <= ic.options.inlineElementLimit;
  if (isExternal) {
    std::shared_ptr<MappedFile> keepAlive;
    FailureOr<ArrayRef<char>> bytes = external.resolve(t, expected, keepAlive);
    if (failed(bytes))
      return failure();
    if (isInt4(dt) || dt == pb::TensorProto::BOOL) {
      // Rare in practice; widen into an owned blob of one byte per element.
      std::string widened(*n, '\0');
      for (int64_t i = 0; i < *n; ++i)
        widened[i] = static_cast<char>(
            rawElement(*bytes, dt, elem.getIntOrFloatBitWidth(), i)
                .getZExtValue());
      return cast<ElementsAttr>(DenseResourceElementsAttr::get(
          type, blobName(t.name()),
          HeapAsmResourceBlob::allocateAndCopyWithAlign(widened, 1)));
    }
    size_t align = std::max<int64_t>(1, elemBytes);
    if (reinterpret_cast<uintptr_t>(bytes->data()) % align != 0)
      align = 1; // unaligned offset in the file: the blob says so
    // Released (xfmr::ResourceUses, once the weight is written to the
    // artifact), the blob gives its pages back: a compile then holds one
    // weight of a multi-GB model at a time, not every page it has read.
    AsmResourceBlob blob(
        *bytes, align,
        [keepAlive](void *data, size_t size, size_t) mutable {
          releasePages(data, size);
          keepAlive.reset();
        },
        /*dataIsMutable=*/false);
    return cast<ElementsAttr>(DenseResourceElementsAttr::get(
        type, blobName(t.name()), std::move(blob)));
  }

  std::string *rawOwned = nullptr;
  std::string converted;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected) {
      ic.error() << what << ": raw_data has " << t.raw_data().size()
                 << " bytes, expected " << expected << " (" << *n
                 << " elements of " << dataTypeName(dt) << ")";
      return failure();
    }
    rawOwned = t.mutable_raw_data();
  } else if (*n > 0 || typed > 0) {
    FailureOr<std::string> raw =
        typedToRaw(ic, t, what, *n, std::max<int64_t>(1, elemBytes));
    if (failed(raw))
      return failure();
    converted = std::move(*raw);
    rawOwned = &converted;
  }
  ArrayRef<char> raw = rawOwned
                           ? ArrayRef<char>(rawOwned->data(), rawOwned->size())
                           : ArrayRef<char>();
  if (inlineIt || isInt4(dt) || dt == pb::TensorProto::BOOL) {
    if (!inlineIt && (isInt4(dt) || dt == pb::TensorProto::BOOL)) {
      std::string widened(*n, '\0');
      for (int64_t i = 0; i < *n; ++i)
        widened[i] = static_cast<char>(
            rawElement(raw, dt, elem.getIntOrFloatBitWidth(), i)
                .getZExtValue());
      return cast<ElementsAttr>(DenseResourceElementsAttr::get(
          type, blobName(t.name()),
          HeapAsmResourceBlob::allocateAndCopyWithAlign(widened, 1)));
    }
    return denseFromRaw(type, dt, raw);
  }
  // Large: take over the protobuf's buffer (no copy), freed with the context.
  auto owned = std::make_shared<std::string>(std::move(*rawOwned));
  size_t align = std::max<int64_t>(1, elemBytes);
  if (reinterpret_cast<uintptr_t>(owned->data()) % align != 0)
    return cast<ElementsAttr>(DenseResourceElementsAttr::get(
        type, blobName(t.name()),
        HeapAsmResourceBlob::allocateAndCopyWithAlign(
            ArrayRef<char>(owned->data(), owned->size()), align)));
  AsmResourceBlob blob(
      ArrayRef<char>(owned->data(), owned->size()), align,
      [owned](void *, size_t, size_t) mutable { owned.reset(); },
      /*dataIsMutable=*/false);
  return cast<ElementsAttr>(DenseResourceElementsAttr::get(
      type, blobName(t.name()), std::move(blob)));
}

FailureOr<TensorType> xfmr::onnx_import::importValueType(
    const ImportContext &ic, const pb::TypeProto &type, llvm::StringRef what) {
  if (!type.has_tensor_type()) {
    ic.error() << what << ": only tensor values are supported";
    return failure();
  }
  const pb::TypeProto::Tensor &tt = type.tensor_type();
  Type elem = xfmr::onnx::convertONNXElementType(ic.ctx, tt.elem_type());
  if (!elem) {
    ic.error() << what << ": unsupported element type "
               << dataTypeName(tt.elem_type()) << " (" << tt.elem_type() << ")";
    return failure();
  }
  if (!tt.has_shape())
    return cast<TensorType>(UnrankedTensorType::get(elem));
  SmallVector<int64_t> dims, staticDims;
  for (const pb::TensorShapeProto::Dimension &d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      dims.push_back(d.dim_value());
      staticDims.push_back(d.dim_value());
    } else {
      dims.push_back(ShapedType::kDynamic);
    }
  }
  if (static_cast<int64_t>(dims.size()) > ic.options.maxRank) {
    ic.error() << what << ": rank " << dims.size() << " exceeds the limit of "
               << ic.options.maxRank;
    return failure();
  }
  if (failed(checkDims(ic, what, staticDims)))
    return failure();
  return cast<TensorType>(RankedTensorType::get(dims, elem));
}
