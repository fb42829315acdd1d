//===- Tensor.cpp - host tensors of the runtime ---------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the runtime stores tensors little-endian and needs a little-endian host"
#endif

using namespace xfmr::rt;

void xfmr::rt::detail::reportBadExpectedAccess(const char *what,
                                               const std::string &message) {
  std::fprintf(stderr, "xfmr runtime: accessed the %s%s%s\n", what,
               message.empty() ? "" : ": ", message.c_str());
  std::abort();
}

//===----------------------------------------------------------------------===//
// DType
//===----------------------------------------------------------------------===//

namespace {
/// ONNX TensorProto.DataType codes (onnx.proto); fixed by the format.
enum ONNXDataType : int32_t {
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
};
} // namespace

size_t xfmr::rt::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
  case DType::F8E4M3FN:
    return 1;
  }
  return 1;
}

const char *xfmr::rt::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I8:
    return "i8";
  case DType::I16:
    return "i16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::U8:
    return "u8";
  case DType::U16:
    return "u16";
  case DType::U32:
    return "u32";
  case DType::U64:
    return "u64";
  case DType::Bool:
    return "bool";
  case DType::F8E4M3FN:
    return "f8e4m3fn";
  }
  return "?";
}

bool xfmr::rt::isFloatingPoint(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16 || dtype == DType::F8E4M3FN;
}

std::optional<DType> xfmr::rt::dtypeFromONNX(int32_t onnxDataType) {
  switch (onnxDataType) {
  case kFloat:
    return DType::F32;
  case kDouble:
    return DType::F64;
  case kFloat16:
    return DType::F16;
  case kBFloat16:
    return DType::BF16;
  case kInt8:
    return DType::I8;
  case kInt16:
    return DType::I16;
  case kInt32:
    return DType::I32;
  case kInt64:
    return DType::I64;
  case kUInt8:
    return DType::U8;
  case kUInt16:
    return DType::U16;
  case kUInt32:
    return DType::U32;
  case kUInt64:
    return DType::U64;
  case kBool:
    return DType::Bool;
  case kFloat8E4M3FN:
    return DType::F8E4M3FN;
  default:
    return std::nullopt;
  }
}

int32_t xfmr::rt::toONNX(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return kFloat;
  case DType::F64:
    return kDouble;
  case DType::F16:
    return kFloat16;
  case DType::BF16:
    return kBFloat16;
  case DType::F8E4M3FN:
    return kFloat8E4M3FN;
  case DType::I8:
    return kInt8;
  case DType::I16:
    return kInt16;
  case DType::I32:
    return kInt32;
  case DType::I64:
    return kInt64;
  case DType::U8:
    return kUInt8;
  case DType::U16:
    return kUInt16;
  case DType::U32:
    return kUInt32;
  case DType::U64:
    return kUInt64;
  case DType::Bool:
    return kBool;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// 16-bit floats
//===----------------------------------------------------------------------===//

namespace {
uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
} // namespace

float xfmr::rt::halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1F;
  uint32_t mant = bits & 0x3FF;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exp == 0x1F) // infinity, or NaN with its payload
    return bitsToFloat(sign | 0x7F800000 | (mant << 13));
  return bitsToFloat(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

uint16_t xfmr::rt::floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t abs = bits & 0x7FFFFFFF;
  if (abs > 0x7F800000) // NaN: keep the top payload bits, make it quiet
    return sign | 0x7E00 | ((abs >> 13) & 0x3FF);
  uint32_t exp = abs >> 23;
  if (exp >= 127 + 16) // |value| >= 2^16, or infinity
    return sign | 0x7C00;
  if (exp < 127 - 14) {
    // Half subnormal (or zero): value = m * 2^(exp - 150), unit 2^-24.
    if (exp < 127 - 14 - 11)
      return sign; // below half the smallest subnormal
    uint32_t m = (abs & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - exp;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1),
             halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1)))
      ++r; // may carry into the smallest normal: still the right encoding
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ((exp - 127 + 15) << 10) | ((abs & 0x7FFFFF) >> 13);
  uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
    ++r; // a carry into the exponent rounds up to the next binade or infinity
  return sign | static_cast<uint16_t>(r);
}

float xfmr::rt::bf16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

float xfmr::rt::f8e4m3fnToFloat(uint8_t bits) {
  // Sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
  // subnormal (m * 2^-9); S.1111.111 is NaN, there is no infinity.
  float sign = (bits & 0x80) ? -1.0f : 1.0f;
  int e = (bits >> 3) & 0xF, m = bits & 0x7;
  if (e == 0xF && m == 0x7)
    return std::numeric_limits<float>::quiet_NaN();
  if (e == 0)
    return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);
}

uint16_t xfmr::rt::floatToBf16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7FFFFFFF) > 0x7F800000)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t bias = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + bias) >> 16);
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

Expected<int64_t> xfmr::rt::countElements(const std::vector<int64_t> &shape) {
  if (shape.size() > kMaxRank)
    return Error("rank " + std::to_string(shape.size()) +
                 " exceeds the limit of " + std::to_string(kMaxRank));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return Error("dim " + std::to_string(d) + " is negative");
    if (__builtin_mul_overflow(n, d, &n))
      return Error("element count overflows int64");
  }
  return n;
}

std::string xfmr::rt::formatShape(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

Tensor::Tensor() = default;

Tensor::~Tensor() { release(); }

Tensor::Tensor(Tensor &&other) noexcept
    : tensorName(std::move(other.tensorName)), elementType(other.elementType),
      dims(std::move(other.dims)), elementCount(other.elementCount),
      buffer(other.buffer) {
  other.buffer = nullptr;
  other.elementType = DType::F32;
  other.dims = {0};
  other.elementCount = 0;
  other.tensorName.clear();
}

Tensor &Tensor::operator=(Tensor &&other) noexcept {
  if (this == &other)
    return *this;
  release();
  tensorName = std::move(other.tensorName);
  elementType = other.elementType;
  dims = std::move(other.dims);
  elementCount = other.elementCount;
  buffer = other.buffer;
  other.buffer = nullptr;
  other.elementType = DType::F32;
  other.dims = {0};
  other.elementCount = 0;
  other.tensorName.clear();
  return *this;
}

void Tensor::release() {
  if (buffer)
    ::operator delete(buffer, std::align_val_t(kAlignment));
  buffer = nullptr;
}

Expected<Tensor> Tensor::create(DType dtype, std::vector<int64_t> shape,
                                std::string name) {
  Expected<int64_t> n = countElements(shape);
  if (!n)
    return Error("shape " + formatShape(shape) + ": " + n.error());
  int64_t bytes;
  if (__builtin_mul_overflow(*n, static_cast<int64_t>(dtypeSize(dtype)),
                             &bytes))
    return Error("byte size of shape " + formatShape(shape) + " of " +
                 dtypeName(dtype) + " overflows int64");
  Tensor t;
  if (bytes > 0) {
    // Round up to whole 64-byte lines and zero the padding as well, so
    // vector loads past the last element read zeros.
    size_t padded =
        (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
    void *p =
        ::operator new(padded, std::align_val_t(kAlignment), std::nothrow);
    if (!p)
      return Error("cannot allocate " + std::to_string(padded) +
                   " bytes for a tensor of shape " + formatShape(shape) +
                   " of " + dtypeName(dtype));
    std::memset(p, 0, padded);
    t.buffer = static_cast<uint8_t *>(p);
  }
  t.tensorName = std::move(name);
  t.elementType = dtype;
  t.dims = std::move(shape);
  t.elementCount = *n;
  return t;
}

Expected<Tensor> Tensor::clone() const {
  Expected<Tensor> copy = create(elementType, dims, tensorName);
  if (copy && byteSize() > 0)
    std::memcpy(copy->bytes(), buffer, byteSize());
  return copy;
}

void Tensor::checkStorageType(bool matches, size_t requestedSize) const {
  if (matches)
    return;
  std::fprintf(stderr,
               "xfmr runtime: tensor '%s' of %s accessed as elements of %zu "
               "bytes that are not its storage type\n",
               tensorName.c_str(), dtypeName(elementType), requestedSize);
  std::abort();
}

namespace {
template <typename T> T load(const uint8_t *p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

double loadAsDouble(DType dtype, const uint8_t *p, int64_t i) {
  switch (dtype) {
  case DType::F32:
    return load<float>(p, i);
  case DType::F64:
    return load<double>(p, i);
  case DType::F16:
    return halfToFloat(load<uint16_t>(p, i));
  case DType::BF16:
    return bf16ToFloat(load<uint16_t>(p, i));
  case DType::I8:
    return load<int8_t>(p, i);
  case DType::I16:
    return load<int16_t>(p, i);
  case DType::I32:
    return load<int32_t>(p, i);
  case DType::I64:
    return static_cast<double>(load<int64_t>(p, i));
  case DType::U8:
    return load<uint8_t>(p, i);
  case DType::U16:
    return load<uint16_t>(p, i);
  case DType::U32:
    return load<uint32_t>(p, i);
  case DType::U64:
    return static_cast<double>(load<uint64_t>(p, i));
  case DType::Bool:
    return load<uint8_t>(p, i) != 0;
  case DType::F8E4M3FN:
    return f8e4m3fnToFloat(load<uint8_t>(p, i));
  }
  return 0;
}
} // namespace

double Tensor::elementAsDouble(int64_t index) const {
  if (index < 0 || index >= elementCount) {
    std::fprintf(stderr,
                 "xfmr runtime: element %lld of tensor '%s' is out of range "
                 "[0, %lld)\n",
                 static_cast<long long>(index), tensorName.c_str(),
                 static_cast<long long>(elementCount));
    std::abort();
  }
  return loadAsDouble(elementType, buffer, index);
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

namespace {
/// Row-major multi-index of flat index `i`, formatted "[1, 2]".
std::string formatIndex(const std::vector<int64_t> &shape, int64_t i) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

/// An element formatted exactly for integers, with round-trip precision for
/// floats.
std::string formatElement(DType dtype, const uint8_t *p, int64_t i) {
  std::ostringstream os;
  switch (dtype) {
  case DType::I64:
    os << load<int64_t>(p, i);
    break;
  case DType::U64:
    os << load<uint64_t>(p, i);
    break;
  case DType::Bool:
    os << (load<uint8_t>(p, i) ? "true" : "false");
    break;
  default:
    os.precision(dtype == DType::F64 ? 17 : 9);
    os << loadAsDouble(dtype, p, i);
    break;
  }
  return os.str();
}

/// Records element `i` whose errors are `abs` and `rel` (rel < 0: not
/// defined because the expected value is 0).
void recordError(TensorComparison &r, int64_t i, double abs, double rel,
                 bool close) {
  r.maxAbsError = std::max(r.maxAbsError, abs);
  if (rel >= 0)
    r.maxRelError = std::max(r.maxRelError, rel);
  if (close)
    return;
  if (r.firstMismatch < 0)
    r.firstMismatch = i;
  ++r.mismatchCount;
}

/// Exact comparison of integers, widened to 64 bits; `IsBool` compares
/// bytes as truth values.
template <typename T, bool IsBool = false>
void compareIntegers(const uint8_t *a, const uint8_t *e, int64_t n,
                     TensorComparison &r) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  for (int64_t i = 0; i < n; ++i) {
    auto av = static_cast<Wide>(load<T>(a, i));
    auto ev = static_cast<Wide>(load<T>(e, i));
    if (IsBool)
      av = av != 0, ev = ev != 0;
    if (av == ev)
      continue;
    // |av - ev| is exact in uint64 whichever is larger.
    uint64_t diff = av > ev
                        ? static_cast<uint64_t>(av) - static_cast<uint64_t>(ev)
                        : static_cast<uint64_t>(ev) - static_cast<uint64_t>(av);
    double abs = static_cast<double>(diff);
    double mag = ev < 0 ? -static_cast<double>(ev) : static_cast<double>(ev);
    recordError(r, i, abs, ev != 0 ? abs / mag : -1, /*close=*/false);
  }
}

void compareFloats(DType dtype, const uint8_t *a, const uint8_t *e, int64_t n,
                   double rtol, double atol, TensorComparison &r) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    double av = loadAsDouble(dtype, a, i), ev = loadAsDouble(dtype, e, i);
    if (std::isnan(av) && std::isnan(ev))
      continue;
    if (!std::isfinite(av) || !std::isfinite(ev)) {
      // NaN against a number, or an infinity: only the same infinity is
      // equal, nothing is "close".
      if (av != ev)
        recordError(r, i, inf, inf, /*close=*/false);
      continue;
    }
    double abs = std::fabs(av - ev);
    recordError(r, i, abs, ev != 0 ? abs / std::fabs(ev) : -1,
                abs <= atol + rtol * std::fabs(ev));
  }
}
} // namespace

TensorComparison xfmr::rt::compareTensors(const Tensor &actual,
                                          const Tensor &expected, double rtol,
                                          double atol) {
  TensorComparison r;
  if (actual.dtype() != expected.dtype()) {
    r.message = std::string("dtype differs: actual ") +
                dtypeName(actual.dtype()) + ", expected " +
                dtypeName(expected.dtype());
    return r;
  }
  if (actual.shape() != expected.shape()) {
    r.message = "shape differs: actual " + formatShape(actual.shape()) +
                ", expected " + formatShape(expected.shape());
    return r;
  }
  const uint8_t *a = actual.bytes(), *e = expected.bytes();
  int64_t n = actual.numel();
  switch (actual.dtype()) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
  case DType::F8E4M3FN:
    compareFloats(actual.dtype(), a, e, n, rtol, atol, r);
    break;
  case DType::I8:
    compareIntegers<int8_t>(a, e, n, r);
    break;
  case DType::I16:
    compareIntegers<int16_t>(a, e, n, r);
    break;
  case DType::I32:
    compareIntegers<int32_t>(a, e, n, r);
    break;
  case DType::I64:
    compareIntegers<int64_t>(a, e, n, r);
    break;
  case DType::U8:
    compareIntegers<uint8_t>(a, e, n, r);
    break;
  case DType::U16:
    compareIntegers<uint16_t>(a, e, n, r);
    break;
  case DType::U32:
    compareIntegers<uint32_t>(a, e, n, r);
    break;
  case DType::U64:
    compareIntegers<uint64_t>(a, e, n, r);
    break;
  case DType::Bool:
    compareIntegers<uint8_t, /*IsBool=*/true>(a, e, n, r);
    break;
  }
  r.match = r.mismatchCount == 0;
  if (r.match)
    return r;
  std::ostringstream os;
  os << r.mismatchCount << " of " << n << " elements differ; first at "
     << formatIndex(actual.shape(), r.firstMismatch) << ": actual "
     << formatElement(actual.dtype(), a, r.firstMismatch) << ", expected "
     << formatElement(expected.dtype(), e, r.firstMismatch)
     << "; max abs error " << r.maxAbsError << ", max rel error "
     << r.maxRelError;
  if (isFloatingPoint(actual.dtype()))
    os << " (rtol " << rtol << ", atol " << atol << ")";
  r.message = os.str();
  return r;
}
