//===- Tensor.h - host tensors of the runtime -------------------*- C++ -*-===//
//
// Part of xfmr.
//
// A Tensor is a named, dense, row-major (C order) host array that owns a
// 64-byte aligned buffer. It is what xfmr-run reads model inputs into and
// writes outputs from, and what the conformance runner compares. Storage is
// little-endian, as on every host the runtime supports; bool is one byte
// holding 0 or 1; f16 and bf16 are stored as their 16-bit patterns.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_TENSOR_H
#define XFMR_RUNTIME_TENSOR_H

#include "xfmr/runtime/Error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace xfmr::rt {

/// Element types of runtime tensors.
enum class DType : uint8_t {
  F32,
  F64,
  F16,
  BF16,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  Bool,
  /// float8 e4m3fn (OCP FP8: no infinities, one NaN), e.g. a quantized KV pool.
  F8E4M3FN,
};

/// Every DType, in declaration order.
inline constexpr DType kAllDTypes[] = {
    DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
    DType::I16, DType::I32, DType::I64, DType::U8,   DType::U16,
    DType::U32, DType::U64, DType::Bool, DType::F8E4M3FN};

/// Bytes per element: 1, 2, 4 or 8.
size_t dtypeSize(DType dtype);
/// Short lower-case name: "f32", "bf16", "i64", "u8", "bool", ...
const char *dtypeName(DType dtype);
bool isFloatingPoint(DType dtype);
/// The DType of an ONNX TensorProto.DataType code, or nullopt for codes the
/// runtime does not support (UNDEFINED, STRING, complex, float8, int4, ...).
std::optional<DType> dtypeFromONNX(int32_t onnxDataType);
/// The ONNX TensorProto.DataType code of `dtype`.
int32_t toONNX(DType dtype);

/// IEEE binary16 and bfloat16 bit patterns to and from float. Conversions to
/// 16 bits round to nearest even and keep NaNs quiet NaNs.
float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float bf16ToFloat(uint16_t bits);
/// The float8 e4m3fn value of `bits` (exact; 0x7f/0xff are NaN).
float f8e4m3fnToFloat(uint8_t bits);
uint16_t floatToBf16(float value);

/// The most dims a runtime tensor may have (the importer's default limit).
inline constexpr size_t kMaxRank = 32;

/// The element count of `shape`, or why it is not a valid shape: rank above
/// kMaxRank, a negative dim, or a product that overflows int64 (checked in
/// order, so (162, 341606371735362067) fails rather than wrapping to 6). The
/// message names neither file nor shape; callers prefix both.
Expected<int64_t> countElements(const std::vector<int64_t> &shape);
/// Formats a shape like NumPy: "()", "(3,)", "(2, 3)".
std::string formatShape(const std::vector<int64_t> &shape);

/// A dense C-order host tensor owning a 64-byte aligned, zero-padded buffer.
/// Move-only: copies are explicit through clone(). A default-constructed or
/// moved-from tensor is empty: f32 of shape (0,) without a buffer.
class Tensor {
public:
  static constexpr size_t kAlignment = 64;

  Tensor();
  ~Tensor();
  Tensor(Tensor &&other) noexcept;
  Tensor &operator=(Tensor &&other) noexcept;
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;

  /// A zero-filled tensor. Fails on an invalid shape (see countElements), a
  /// byte size that overflows, or an allocation the system refuses.
  static Expected<Tensor> create(DType dtype, std::vector<int64_t> shape,
                                 std::string name = "");
  /// An independent copy of this tensor (it can fail like create).
  Expected<Tensor> clone() const;

  const std::string &name() const { return tensorName; }
  void setName(std::string name) { tensorName = std::move(name); }
  DType dtype() const { return elementType; }
  const std::vector<int64_t> &shape() const { return dims; }
  size_t rank() const { return dims.size(); }
  int64_t numel() const { return elementCount; }
  size_t elementSize() const { return dtypeSize(elementType); }
  /// numel() * elementSize(): the meaningful bytes, without the padding.
  size_t byteSize() const {
    return static_cast<size_t>(elementCount) * elementSize();
  }

  /// The buffer; null only when numel() is 0.
  uint8_t *bytes() { return buffer; }
  const uint8_t *bytes() const { return buffer; }

  /// The buffer as elements of T, which must be the storage type of dtype():
  /// float f32, double f64, intN_t iN, uintN_t uN, uint16_t f16 and bf16,
  /// bool or uint8_t bool. Any other T aborts (a bug in the caller).
  template <typename T> T *data() {
    checkStorageType(storageTypeMatches<T>(elementType), sizeof(T));
    return reinterpret_cast<T *>(buffer);
  }
  template <typename T> const T *data() const {
    checkStorageType(storageTypeMatches<T>(elementType), sizeof(T));
    return reinterpret_cast<const T *>(buffer);
  }

  /// Element `index` (flat, row-major) converted to double; i64 and u64
  /// values beyond 2^53 round. Aborts on an index outside [0, numel()).
  double elementAsDouble(int64_t index) const;

private:
  template <typename T> static bool storageTypeMatches(DType dtype);
  void checkStorageType(bool matches, size_t requestedSize) const;
  void release();

  std::string tensorName;
  DType elementType = DType::F32;
  std::vector<int64_t> dims{0};
  int64_t elementCount = 0;
  uint8_t *buffer = nullptr;
};

template <typename T> bool Tensor::storageTypeMatches(DType dtype) {
  if constexpr (std::is_same_v<T, float>)
    return dtype == DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return dtype == DType::F64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return dtype == DType::I8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return dtype == DType::I16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return dtype == DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return dtype == DType::I64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return dtype == DType::U8 || dtype == DType::Bool;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return dtype == DType::U16 || dtype == DType::F16 || dtype == DType::BF16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return dtype == DType::U32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return dtype == DType::U64;
  else if constexpr (std::is_same_v<T, bool>)
    return dtype == DType::Bool;
  else
    return false;
}

/// The outcome of comparing an actual tensor with an expected one.
struct TensorComparison {
  /// Same dtype and shape, and every element within tolerance.
  bool match = false;
  /// Largest |actual - expected| over the compared elements; infinity when a
  /// NaN or infinity sits against a different value.
  double maxAbsError = 0;
  /// Largest |actual - expected| / |expected| over elements whose expected
  /// value is non-zero (NumPy's definition).
  double maxRelError = 0;
  /// Flat index of the first element out of tolerance, -1 if none.
  int64_t firstMismatch = -1;
  int64_t mismatchCount = 0;
  /// Empty on a match; otherwise one line saying what differs.
  std::string message;
};

/// Compares element-wise like numpy.testing.assert_allclose(actual,
/// expected, rtol, atol, equal_nan=True) with the tolerance taken relative
/// to `expected`: |a - e| <= atol + rtol * |e|. NaN equals NaN, an infinity
/// equals only the same infinity. Integers and bools compare exactly
/// (rtol and atol do not apply). Dtypes and shapes must be equal.
TensorComparison compareTensors(const Tensor &actual, const Tensor &expected,
                                double rtol, double atol);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_TENSOR_H
