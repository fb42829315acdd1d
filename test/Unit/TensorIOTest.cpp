//===- TensorIOTest.cpp - runtime tensors, .npy and .pb files -------------===//
//
// Part of xfmr.
//
// Fixtures in Inputs/ come from numpy and the onnx package
// (scripts/gen_runtime_test_inputs.py), so the readers are checked against
// the real producers; malformed .npy files are built here byte by byte.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/TensorIO.h"
#include "xfmr/runtime/Tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <type_traits>

#include <sys/stat.h>
#include <unistd.h>

#ifndef XFMR_UNIT_INPUTS_DIR
#error "XFMR_UNIT_INPUTS_DIR must name test/Unit/Inputs"
#endif

using namespace xfmr::rt;
namespace fs = std::filesystem;

namespace {

const char *const kONNXTestAddInput =
    "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0/"
    "input_0.pb";

std::string inputPath(const std::string &name) {
  return std::string(XFMR_UNIT_INPUTS_DIR) + "/" + name;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Passes when `result` failed with a message that names `path` and
/// contains `why`.
template <typename T>
::testing::AssertionResult failsWith(const Expected<T> &result,
                                     const std::string &path,
                                     const std::string &why) {
  if (result)
    return ::testing::AssertionFailure() << "succeeded, expected: " << why;
  const std::string &msg = result.error();
  if (msg.find(path) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message does not name '" << path << "': " << msg;
  if (msg.find(why) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message does not say '" << why << "': " << msg;
  return ::testing::AssertionSuccess() << msg;
}

/// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "xfmr-runtime-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string &name) const { return dir + "/" + name; }
  /// Names of the entries of the temporary directory.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir;
};

/// A tensor of `dtype` and `shape` with distinct, type-appropriate bytes.
Tensor patterned(DType dtype, std::vector<int64_t> shape) {
  Expected<Tensor> t = Tensor::create(dtype, std::move(shape), "t");
  EXPECT_TRUE(t) << t.error();
  uint8_t *p = t->bytes();
  for (size_t i = 0; i < t->byteSize(); ++i)
    p[i] = static_cast<uint8_t>(i * 37 + 11);
  if (dtype == DType::Bool)
    for (int64_t i = 0; i < t->numel(); ++i)
      p[i] = static_cast<uint8_t>(i % 3 == 0);
  return t.take();
}

template <typename T>
Tensor tensorOf(DType dtype, std::vector<int64_t> shape,
                std::vector<T> values) {
  Expected<Tensor> t = Tensor::create(dtype, std::move(shape));
  EXPECT_TRUE(t) << t.error();
  EXPECT_EQ(static_cast<size_t>(t->numel()), values.size());
  if (!values.empty())
    std::memcpy(t->data<T>(), values.data(), values.size() * sizeof(T));
  return t.take();
}

//===----------------------------------------------------------------------===//
// DType and 16-bit floats
//===----------------------------------------------------------------------===//

TEST(DTypeTest, SizesNamesAndONNXCodes) {
  struct Row {
    DType dtype;
    size_t size;
    const char *name;
    int32_t onnx;
  } rows[] = {{DType::F32, 4, "f32", 1},  {DType::F64, 8, "f64", 11},
              {DType::F16, 2, "f16", 10}, {DType::BF16, 2, "bf16", 16},
              {DType::I8, 1, "i8", 3},    {DType::I16, 2, "i16", 5},
              {DType::I32, 4, "i32", 6},  {DType::I64, 8, "i64", 7},
              {DType::U8, 1, "u8", 2},    {DType::U16, 2, "u16", 4},
              {DType::U32, 4, "u32", 12}, {DType::U64, 8, "u64", 13},
              {DType::Bool, 1, "bool", 9}, {DType::F8E4M3FN, 1, "f8e4m3fn", 17}};
  ASSERT_EQ(std::size(rows), std::size(kAllDTypes));
  for (const Row &r : rows) {
    EXPECT_EQ(dtypeSize(r.dtype), r.size) << r.name;
    EXPECT_STREQ(dtypeName(r.dtype), r.name);
    EXPECT_EQ(toONNX(r.dtype), r.onnx) << r.name;
    EXPECT_EQ(dtypeFromONNX(r.onnx), r.dtype) << r.name;
  }
}

TEST(DTypeTest, UnsupportedONNXCodes) {
  // UNDEFINED, STRING, COMPLEX64/128, FLOAT8E4M3FNUZ, INT4, garbage.
  for (int32_t code : {0, 8, 14, 15, 18, 22, 99, -1})
    EXPECT_EQ(dtypeFromONNX(code), std::nullopt) << code;
}

TEST(Float8Test, E4M3FNValues) {
  EXPECT_EQ(f8e4m3fnToFloat(0x00), 0.0f);
  EXPECT_EQ(f8e4m3fnToFloat(0x38), 1.0f);         // exponent 7 = bias
  EXPECT_EQ(f8e4m3fnToFloat(0x7E), 448.0f);       // the largest finite
  EXPECT_EQ(f8e4m3fnToFloat(0xFE), -448.0f);
  EXPECT_EQ(f8e4m3fnToFloat(0x08), 0x1p-6f);      // the smallest normal
  EXPECT_EQ(f8e4m3fnToFloat(0x01), 0x1p-9f);      // the smallest subnormal
  EXPECT_EQ(f8e4m3fnToFloat(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(f8e4m3fnToFloat(0x3B), 1.375f);       // 1 + 3/8
  EXPECT_TRUE(std::isnan(f8e4m3fnToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(f8e4m3fnToFloat(0xFF)));
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.5f), 0xC100);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00); // rounds up to infinity
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);        // tie to even
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);        // above the tie
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00); // tie, even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(halfToFloat(0xFC00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(3.140625f), 0x4049);
  EXPECT_EQ(bf16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);
}

TEST(HalfTest, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    auto bits = static_cast<uint16_t>(b);
    float h = halfToFloat(bits), bf = bf16ToFloat(bits);
    if (std::isnan(h))
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(h)))) << b;
    else
      EXPECT_EQ(floatToHalf(h), bits) << b;
    if (std::isnan(bf))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(bf)))) << b;
    else
      EXPECT_EQ(floatToBf16(bf), bits) << b;
  }
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

static_assert(!std::is_copy_constructible_v<Tensor>);
static_assert(!std::is_copy_assignable_v<Tensor>);
static_assert(std::is_nothrow_move_constructible_v<Tensor>);

TEST(TensorTest, CreateIsZeroedAndAligned) {
  Expected<Tensor> t = Tensor::create(DType::F32, {2, 3}, "x");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->name(), "x");
  EXPECT_EQ(t->numel(), 6);
  EXPECT_EQ(t->byteSize(), 24u);
  EXPECT_EQ(t->rank(), 2u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->bytes()) % Tensor::kAlignment, 0u);
  for (int64_t i = 0; i < t->numel(); ++i)
    EXPECT_EQ(t->data<float>()[i], 0.0f);

  Expected<Tensor> scalar = Tensor::create(DType::I64, {});
  ASSERT_TRUE(scalar);
  EXPECT_EQ(scalar->numel(), 1);
  Expected<Tensor> empty = Tensor::create(DType::F16, {4, 0});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->numel(), 0);
  EXPECT_EQ(empty->bytes(), nullptr);
}

TEST(TensorTest, CreateRejectsBadShapes) {
  Expected<Tensor> neg = Tensor::create(DType::F32, {2, -1});
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.error().find("dim -1 is negative"), std::string::npos)
      << neg.error();
  // 162 * 341606371735362067 wraps to 6 in int64.
  Expected<Tensor> wrap = Tensor::create(DType::F32, {162, 341606371735362067});
  ASSERT_FALSE(wrap);
  EXPECT_NE(wrap.error().find("element count overflows int64"),
            std::string::npos)
      << wrap.error();
  Expected<Tensor> bytes = Tensor::create(DType::F64, {int64_t(1) << 61});
  ASSERT_FALSE(bytes);
  EXPECT_NE(bytes.error().find("byte size"), std::string::npos)
      << bytes.error();
  Expected<Tensor> rank =
      Tensor::create(DType::U8, std::vector<int64_t>(kMaxRank + 1, 1));
  ASSERT_FALSE(rank);
  EXPECT_NE(rank.error().find("rank 33 exceeds"), std::string::npos)
      << rank.error();
}

TEST(TensorTest, MoveLeavesEmptyAndCloneCopies) {
  Tensor a = tensorOf<int32_t>(DType::I32, {3}, {1, -2, 3});
  a.setName("a");
  const uint8_t *buffer = a.bytes();
  Tensor b = std::move(a);
  EXPECT_EQ(b.bytes(), buffer);
  EXPECT_EQ(b.name(), "a");
  EXPECT_EQ(a.numel(), 0);       // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.bytes(), nullptr); // NOLINT(bugprone-use-after-move)
  Expected<Tensor> c = b.clone();
  ASSERT_TRUE(c);
  EXPECT_NE(c->bytes(), b.bytes());
  EXPECT_EQ(c->shape(), b.shape());
  EXPECT_EQ(c->name(), "a");
  EXPECT_EQ(std::memcmp(c->bytes(), b.bytes(), b.byteSize()), 0);
  Tensor d;
  d = std::move(*c);
  EXPECT_EQ(d.data<int32_t>()[1], -2);
}

TEST(TensorTest, ElementAsDouble) {
  Tensor h = tensorOf<uint16_t>(DType::F16, {2}, {0x3C00, 0xC100});
  EXPECT_EQ(h.elementAsDouble(1), -2.5);
  Tensor bf = tensorOf<uint16_t>(DType::BF16, {1}, {0x4049});
  EXPECT_EQ(bf.elementAsDouble(0), 3.140625);
  Tensor i = tensorOf<int8_t>(DType::I8, {2}, {-128, 127});
  EXPECT_EQ(i.elementAsDouble(0), -128.0);
  Tensor u = tensorOf<uint64_t>(DType::U64, {1}, {uint64_t(1) << 63});
  EXPECT_EQ(u.elementAsDouble(0), std::ldexp(1.0, 63));
  Tensor b = tensorOf<uint8_t>(DType::Bool, {2}, {0, 1});
  EXPECT_EQ(b.elementAsDouble(1), 1.0);
}

TEST(TensorDeathTest, WrongStorageTypeAborts) {
  Tensor t = tensorOf<float>(DType::F32, {1}, {1.0f});
  EXPECT_DEATH((void)t.data<int32_t>(), "not its storage type");
  EXPECT_DEATH((void)t.elementAsDouble(1), "out of range");
  Expected<Tensor> failed = Tensor::create(DType::F32, {-1});
  EXPECT_DEATH((void)failed.value(), "dim -1 is negative");
}

//===----------------------------------------------------------------------===//
// .npy: round trips and numpy's files
//===----------------------------------------------------------------------===//

using NpyTest = TempDirTest;

TEST_F(NpyTest, RoundTripEveryDType) {
  for (DType dtype : kAllDTypes) {
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{}, std::vector<int64_t>{5},
          std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{0, 3}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(shape));
      Tensor t = patterned(dtype, shape);
      std::string file = path(std::string(dtypeName(dtype)) + ".npy");
      Status w = writeNpy(file, t);
      ASSERT_TRUE(w) << w.error();
      Expected<Tensor> back = readNpy(file);
      ASSERT_TRUE(back) << back.error();
      EXPECT_EQ(back->dtype(), dtype);
      EXPECT_EQ(back->shape(), shape);
      ASSERT_EQ(back->byteSize(), t.byteSize());
      if (t.byteSize()) {
        EXPECT_EQ(std::memcmp(back->bytes(), t.bytes(), t.byteSize()), 0);
      }
      // The data starts on a 64-byte boundary, as np.save aligns it.
      EXPECT_EQ((fs::file_size(file) - t.byteSize()) % 64, 0u);
    }
  }
}

TEST_F(NpyTest, WriterMatchesNumpyByteForByte) {
  for (const char *name : {"f32_2x3.npy", "i64_scalar.npy", "bool_5.npy",
                           "f16_4.npy", "bf16_3.npy"}) {
    SCOPED_TRACE(name);
    Expected<Tensor> t = readNpy(inputPath(name));
    ASSERT_TRUE(t) << t.error();
    ASSERT_TRUE(writeNpy(path(name), *t));
    EXPECT_EQ(readBytes(path(name)), readBytes(inputPath(name)));
  }
}

TEST(NpyReadTest, NumpyF32Matrix) {
  Expected<Tensor> t = readNpy(inputPath("f32_2x3.npy"));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->dtype(), DType::F32);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 3}));
  const float *v = t->data<float>();
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(v[i], i * 0.5f - 1) << i;
}

TEST(NpyReadTest, NumpyI64Scalar) {
  Expected<Tensor> t = readNpy(inputPath("i64_scalar.npy"));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->dtype(), DType::I64);
  EXPECT_TRUE(t->shape().empty());
  EXPECT_EQ(t->data<int64_t>()[0], -1234567890123);
}

TEST(NpyReadTest, NumpyBool) {
  Expected<Tensor> t = readNpy(inputPath("bool_5.npy"));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->dtype(), DType::Bool);
  const bool *v = t->data<bool>();
  EXPECT_EQ(std::vector<bool>(v, v + 5),
            (std::vector<bool>{true, false, true, true, false}));
}

TEST(NpyReadTest, NumpyF16) {
  Expected<Tensor> t = readNpy(inputPath("f16_4.npy"));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->dtype(), DType::F16);
  EXPECT_EQ(t->elementAsDouble(0), 1.0);
  EXPECT_EQ(t->elementAsDouble(1), -2.5);
  EXPECT_EQ(t->elementAsDouble(2), 65504.0);
  EXPECT_EQ(t->elementAsDouble(3), std::ldexp(1.0, -24));
}

TEST(NpyReadTest, MlDtypesBf16) {
  Expected<Tensor> t = readNpy(inputPath("bf16_3.npy"));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->dtype(), DType::BF16);
  EXPECT_EQ(t->elementAsDouble(0), 1.5);
  EXPECT_EQ(t->elementAsDouble(1), -2.0);
  EXPECT_EQ(t->elementAsDouble(2), 3.140625);
}

TEST(NpyReadTest, FormatVersion2) {
  std::string file = inputPath("f32_v2.npy");
  ASSERT_EQ(readBytes(file)[6], '\x02');
  Expected<Tensor> t = readNpy(file);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t->data<float>()[3], 4.0f);
}

TEST(NpyReadTest, NonzeroBoolBytesReadAsTrue) {
  std::string bytes = readBytes(inputPath("bool_5.npy"));
  bytes[bytes.size() - 5] = '\x07';
  Expected<Tensor> t = parseNpy(bytes, "mem.npy");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->data<uint8_t>()[0], 1);
}

//===----------------------------------------------------------------------===//
// .npy: rejection
//===----------------------------------------------------------------------===//

TEST(NpyRejectTest, NumpyFortranOrder) {
  std::string file = inputPath("bad_fortran.npy");
  EXPECT_TRUE(failsWith(readNpy(file), file, "fortran_order is True"));
}

TEST(NpyRejectTest, NumpyBigEndian) {
  std::string file = inputPath("bad_bigendian.npy");
  EXPECT_TRUE(failsWith(readNpy(file), file, "'>f4': big-endian"));
}

TEST(NpyRejectTest, NumpyObjectArray) {
  std::string file = inputPath("bad_object.npy");
  EXPECT_TRUE(failsWith(readNpy(file), file, "'|O': object arrays"));
}

TEST(NpyRejectTest, MissingFileAndDirectory) {
  std::string missing = inputPath("no_such_file.npy");
  EXPECT_TRUE(failsWith(readNpy(missing), missing, "cannot open"));
  EXPECT_TRUE(failsWith(readNpy(XFMR_UNIT_INPUTS_DIR), XFMR_UNIT_INPUTS_DIR,
                        "not a regular file"));
}

/// Builds a .npy file: magic, version, header length (the real one unless
/// `lengthField` is given), the header dict, then `dataBytes` zero bytes.
std::string craftNpy(const std::string &dict, size_t dataBytes, int major = 1,
                     int64_t lengthField = -1) {
  std::string header = dict + "\n";
  uint64_t len =
      lengthField >= 0 ? static_cast<uint64_t>(lengthField) : header.size();
  std::string out = std::string("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
  return out + header + std::string(dataBytes, '\0');
}

std::string dictOf(const std::string &descr, const std::string &shape,
                   const std::string &order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order +
         ", 'shape': " + shape + ", }";
}

struct NpyCase {
  const char *name;
  std::string bytes;
  const char *why;
};

std::string f32x6() { return readBytes(inputPath("f32_2x3.npy")); }

std::vector<NpyCase> npyCases() {
  std::string good = f32x6();
  return {
      {"Empty", "", "file is empty"},
      {"BadMagic", "\x93NUMPZ" + good.substr(6), "not a .npy file"},
      {"PickleFile", std::string("\x80\x04\x95", 3) + good.substr(3),
       "not a .npy file"},
      {"ShortPreamble", good.substr(0, 9), "truncated in the header length"},
      {"TruncatedData", good.substr(0, good.size() - 1),
       "data is truncated: shape (2, 3) of f32 needs 24 bytes of data, the "
       "file holds 23"},
      {"TrailingBytes", good + "x", "trailing bytes after the data"},
      {"HeaderLengthTooBig", craftNpy(dictOf("<f4", "(1,)"), 4, 2, 1 << 20),
       "header length 1048576 exceeds the limit of 10000 bytes"},
      {"HeaderPastEnd", craftNpy(dictOf("<f4", "(1,)"), 0, 1, 5000),
       "the header of 5000 bytes ends past the end of the file"},
      {"Version4", craftNpy(dictOf("<f4", "(1,)"), 4, 4),
       "unsupported .npy format version 4.0"},
      {"ElementCountOverflow",
       craftNpy(dictOf("<f4", "(162, 341606371735362067)"), 24),
       "element count overflows int64"},
      {"ByteSizeOverflow", craftNpy(dictOf("<f8", "(2305843009213693952,)"), 0),
       "byte size of shape (2305843009213693952,) of f64 overflows int64"},
      {"DimBeyondInt64", craftNpy(dictOf("<f4", "(99999999999999999999,)"), 0),
       "does not fit in int64"},
      {"NegativeDim", craftNpy(dictOf("<f4", "(-1, 2)"), 0),
       "dim -1 is negative"},
      {"TooManyDims",
       craftNpy(dictOf("<f4",
                       [] {
                         std::string s = "(";
                         for (int i = 0; i < 33; ++i)
                           s += "1, ";
                         return s + ")";
                       }()),
                4),
       "rank exceeds the limit of 32"},
      {"ComplexDtype", craftNpy(dictOf("<c8", "(1,)"), 8),
       "'<c8': not a supported dtype"},
      {"UnicodeDtype", craftNpy(dictOf("<U3", "(1,)"), 12),
       "'<U3': not a supported dtype"},
      {"NativeOrder", craftNpy(dictOf("=f4", "(1,)"), 4),
       "only the byte orders '<' and '|'"},
      {"StructuredDtype",
       craftNpy("{'descr': [('a', '<f4')], 'fortran_order': False, "
                "'shape': (1,), }",
                4),
       "structured dtypes are not supported"},
      {"MissingKey", craftNpy("{'descr': '<f4', 'shape': (1,), }", 4),
       "lacks one of the keys"},
      {"UnknownKey",
       craftNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                "'extra': 1, }",
                4),
       "unexpected key 'extra'"},
      {"DuplicateKey",
       craftNpy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                "'shape': (1,), }",
                4),
       "duplicate key 'descr'"},
      {"ShapeNotATuple", craftNpy(dictOf("<f4", "(3)"), 12),
       "the shape is not a tuple"},
      {"GarbageHeader", craftNpy("import os", 0), "expected '{'"},
      {"NonAsciiHeader", craftNpy(dictOf("<f4", "(1,)") + "\xC3\xA9", 4),
       "NUL or non-ASCII byte"},
  };
}

class NpyCraftedRejectTest : public ::testing::TestWithParam<NpyCase> {};

TEST_P(NpyCraftedRejectTest, NamesFileAndReason) {
  const NpyCase &c = GetParam();
  std::string name = std::string("crafted_") + c.name + ".npy";
  EXPECT_TRUE(failsWith(parseNpy(c.bytes, name), name, c.why));
  // The file reader says the same as the in-memory parser.
  std::string file =
      ::testing::TempDir() + std::to_string(::getpid()) + "_" + name;
  writeBytes(file, c.bytes);
  EXPECT_TRUE(failsWith(readNpy(file), file, c.why));
  std::remove(file.c_str());
}

INSTANTIATE_TEST_SUITE_P(Malformed, NpyCraftedRejectTest,
                         ::testing::ValuesIn(npyCases()),
                         [](const ::testing::TestParamInfo<NpyCase> &info) {
                           return std::string(info.param.name);
                         });

TEST(NpyRejectTest, FifoIsNotARegularFile) {
  std::string fifo = ::testing::TempDir() + "xfmr-runtime-fifo-" +
                     std::to_string(::getpid()) + ".npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Must not block waiting for a writer.
  EXPECT_TRUE(failsWith(readNpy(fifo), fifo, "not a regular file"));
  std::remove(fifo.c_str());
}

/// Every truncation of every fixture and every single-byte change to a few
/// telling values is read or rejected with a message, never a crash, an
/// out-of-bounds read or a huge allocation (run under ASan in build-asan).
TEST(MutationTest, FixturesNeverCrashTheParsers) {
  int accepted = 0, rejected = 0;
  auto check = [&](const std::string &bytes, bool npy) {
    bool ok = npy ? parseNpy(bytes, "m.npy").ok()
                  : parseTensorProto(bytes, "m.pb").ok();
    ++(ok ? accepted : rejected);
  };
  for (const auto &entry : fs::directory_iterator(XFMR_UNIT_INPUTS_DIR)) {
    std::string bytes = readBytes(entry.path().string());
    bool npy = entry.path().extension() == ".npy";
    for (size_t n = 0; n < bytes.size(); ++n)
      check(bytes.substr(0, n), npy);
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (char v : {'\x00', '\xFF', '\x7F', '9', '-', ')', ','}) {
        std::string mutated = bytes;
        mutated[i] = v;
        check(mutated, npy);
      }
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 100);
}

//===----------------------------------------------------------------------===//
// .npy: writing
//===----------------------------------------------------------------------===//

TEST_F(NpyTest, WriteIsAtomicAndLeavesNoTemporary) {
  std::string file = path("out.npy");
  writeBytes(file, "old contents");
  Tensor t = patterned(DType::F32, {4, 4});
  ASSERT_TRUE(writeNpy(file, t));
  EXPECT_EQ(entries(), std::vector<std::string>{"out.npy"});
  Expected<Tensor> back = readNpy(file);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->shape(), t.shape());
}

TEST_F(NpyTest, WriteFailureNamesPathAndKeepsOldFile) {
  std::string missingDir = path("no/such/dir/out.npy");
  Tensor t = patterned(DType::I32, {2});
  Status s = writeNpy(missingDir, t);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find(missingDir), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("cannot create a temporary file"), std::string::npos)
      << s.error();

  // Renaming over a directory fails; the directory and nothing else stays.
  fs::create_directory(path("target.npy"));
  s = writeNpy(path("target.npy"), t);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("cannot rename"), std::string::npos) << s.error();
  EXPECT_EQ(entries(), std::vector<std::string>{"target.npy"});
  EXPECT_TRUE(fs::is_directory(path("target.npy")));

  // A relative path in the working directory works too.
  std::string cwd = fs::current_path().string();
  fs::current_path(dir);
  Status rel = writeNpy("relative.npy", t);
  fs::current_path(cwd);
  ASSERT_TRUE(rel) << rel.error();
  EXPECT_TRUE(readNpy(path("relative.npy")));
}

//===----------------------------------------------------------------------===//
// ONNX TensorProto
//===----------------------------------------------------------------------===//

TEST(TensorProtoTest, ONNXTestDataAddInput) {
  if (!fs::exists(kONNXTestAddInput))
    GTEST_SKIP() << kONNXTestAddInput << " is not installed";
  Expected<Tensor> t = readTensorProto(kONNXTestAddInput);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->dtype(), DType::F32);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(t->name(), "x");
  // The dispatching reader picks the same parser.
  Expected<Tensor> u = readTensor(kONNXTestAddInput);
  ASSERT_TRUE(u);
  TensorComparison same = compareTensors(*t, *u, 0, 0);
  EXPECT_TRUE(same.match) << same.message;
}

TEST(TensorProtoTest, EveryONNXNodeTestTensorReadsOrFailsCleanly) {
  const char *root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::is_directory(root))
    GTEST_SKIP() << root << " is not installed";
  int read = 0, rejected = 0;
  for (const auto &test : fs::directory_iterator(root)) {
    fs::path set = test.path() / "test_data_set_0";
    if (!fs::is_directory(set))
      continue;
    for (const auto &file : fs::directory_iterator(set)) {
      Expected<Tensor> t = readTensorProto(file.path().string());
      if (t) {
        ++read;
        continue;
      }
      ++rejected; // sequences, strings, float8...: a message, not a crash
      EXPECT_NE(t.error().find(file.path().string()), std::string::npos)
          << t.error();
    }
  }
  EXPECT_GT(read, 1000);
  std::printf("read %d tensors, rejected %d files\n", read, rejected);
}

TEST(TensorProtoTest, TypedFields) {
  Expected<Tensor> f = readTensorProto(inputPath("typed_f32.pb"));
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->name(), "x");
  EXPECT_EQ(f->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f->data<float>()[3], 4.0f);

  Expected<Tensor> q = readTensorProto(inputPath("typed_i8.pb"));
  ASSERT_TRUE(q) << q.error();
  EXPECT_EQ(q->dtype(), DType::I8);
  EXPECT_EQ(q->data<int8_t>()[0], -128);
  EXPECT_EQ(q->data<int8_t>()[2], 127);

  Expected<Tensor> h = readTensorProto(inputPath("typed_f16.pb"));
  ASSERT_TRUE(h) << h.error();
  EXPECT_EQ(h->dtype(), DType::F16);
  EXPECT_EQ(h->elementAsDouble(1), -2.5);

  Expected<Tensor> r = readTensor(inputPath("raw_i64.pb"));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->data<int64_t>()[1], -9);
}

struct PbCase {
  const char *file;
  const char *why;
};

class TensorProtoRejectTest : public ::testing::TestWithParam<PbCase> {};

TEST_P(TensorProtoRejectTest, NamesFileAndReason) {
  std::string file = inputPath(GetParam().file);
  EXPECT_TRUE(failsWith(readTensorProto(file), file, GetParam().why));
}

/// bad_raw_short.pb -> RawShort
std::string pbCaseName(const ::testing::TestParamInfo<PbCase> &info) {
  std::string file = info.param.file;
  std::string name;
  bool upper = true;
  for (char c : file.substr(4, file.size() - 7)) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(c)) : c;
    upper = false;
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, TensorProtoRejectTest,
    ::testing::Values(
        PbCase{"bad_raw_short.pb",
               "tensor 'w': raw_data has 20 bytes, expected 24 (6 elements "
               "of FLOAT)"},
        PbCase{"bad_raw_and_float.pb", "has both raw_data and float_data"},
        PbCase{"bad_negative_dim.pb", "shape (-1, 6): dim -1 is negative"},
        PbCase{"bad_overflow_dims.pb", "element count overflows int64"},
        PbCase{"bad_typed_count.pb", "float_data holds 3 values, expected 4"},
        PbCase{"bad_wrong_field.pb",
               "has int64_data, which FLOAT does not use"},
        PbCase{"bad_int8_range.pb",
               "int32_data value 300 is out of range for INT8"},
        PbCase{"bad_external.pb", "external data is not supported"},
        PbCase{"bad_string.pb", "unsupported data type STRING (8)"}),
    pbCaseName);

TEST(TensorProtoTest, GarbageAndEmptyBytes) {
  EXPECT_TRUE(failsWith(parseTensorProto("\xFF\xFF\xFF\xFF", "g.pb"), "g.pb",
                        "not a valid ONNX TensorProto"));
  EXPECT_TRUE(failsWith(parseTensorProto("", "e.pb"), "e.pb", "file is empty"));
  // A length prefix far past the end of the buffer.
  EXPECT_TRUE(failsWith(
      parseTensorProto(std::string("\x4A\xFF\xFF\xFF\x7F", 5), "len.pb"),
      "len.pb", "not a valid ONNX TensorProto"));
  // Every truncation of a valid tensor is rejected or read, never a crash.
  std::string good = readBytes(inputPath("raw_i64.pb"));
  for (size_t n = 1; n < good.size(); ++n)
    (void)parseTensorProto(good.substr(0, n), "cut.pb");
}

TEST(ReadTensorTest, DispatchesOnExtension) {
  EXPECT_TRUE(readTensor(inputPath("f32_2x3.npy")));
  EXPECT_TRUE(readTensor(inputPath("typed_f32.pb")));
  std::string other = inputPath("model.onnx");
  EXPECT_TRUE(failsWith(readTensor(other), other, "unknown tensor file type"));
  // An .npy file named .pb goes to the protobuf parser and fails there.
  EXPECT_FALSE(readTensorProto(inputPath("f32_2x3.npy")));
}

//===----------------------------------------------------------------------===//
// compareTensors
//===----------------------------------------------------------------------===//

constexpr double kRtol = 1e-3, kAtol = 1e-7; // ONNX's backend tolerances
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(CompareTest, IdenticalAndNaNs) {
  Tensor a = tensorOf<float>(DType::F32, {4}, {1, kNaN, -kInf, 0});
  Tensor b = tensorOf<float>(DType::F32, {4}, {1, kNaN, -kInf, 0});
  TensorComparison r = compareTensors(a, b, kRtol, kAtol);
  EXPECT_TRUE(r.match) << r.message;
  EXPECT_EQ(r.maxAbsError, 0);
  EXPECT_EQ(r.firstMismatch, -1);
  EXPECT_TRUE(r.message.empty());
}

TEST(CompareTest, NaNAgainstNumberAndInfinities) {
  Tensor a = tensorOf<float>(DType::F32, {3}, {1, kNaN, kInf});
  Tensor b = tensorOf<float>(DType::F32, {3}, {1, 2, kInf});
  TensorComparison r = compareTensors(a, b, kRtol, kAtol);
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.firstMismatch, 1);
  EXPECT_EQ(r.mismatchCount, 1);
  EXPECT_TRUE(std::isinf(r.maxAbsError));

  Tensor c = tensorOf<float>(DType::F32, {1}, {kInf});
  Tensor d = tensorOf<float>(DType::F32, {1}, {-kInf});
  EXPECT_FALSE(compareTensors(c, d, 1, 1).match);
  Tensor e = tensorOf<float>(DType::F32, {1}, {3.4e38f});
  EXPECT_FALSE(compareTensors(c, e, 1, 1).match); // inf is never "close"
}

TEST(CompareTest, ToleranceEdges) {
  // |a - e| <= atol + rtol * |e|, computed in double from the f64 values.
  double e = 1000.0, tol = kAtol + kRtol * e;
  Tensor expected = tensorOf<double>(DType::F64, {1}, {e});
  Tensor inside = tensorOf<double>(DType::F64, {1}, {e + tol * 0.999});
  Tensor outside = tensorOf<double>(DType::F64, {1}, {e + tol * 1.001});
  TensorComparison in = compareTensors(inside, expected, kRtol, kAtol);
  EXPECT_TRUE(in.match) << in.message;
  EXPECT_NEAR(in.maxRelError, tol * 0.999 / e, 1e-12);
  TensorComparison out = compareTensors(outside, expected, kRtol, kAtol);
  EXPECT_FALSE(out.match);
  EXPECT_EQ(out.firstMismatch, 0);
  // Near zero only atol counts; expected 0 gives no relative error.
  Tensor zero = tensorOf<float>(DType::F32, {2}, {0, 0});
  Tensor tiny = tensorOf<float>(DType::F32, {2}, {5e-8f, 2e-7f});
  TensorComparison z = compareTensors(tiny, zero, kRtol, kAtol);
  EXPECT_FALSE(z.match);
  EXPECT_EQ(z.firstMismatch, 1);
  EXPECT_EQ(z.mismatchCount, 1);
  EXPECT_EQ(z.maxRelError, 0);
  EXPECT_NEAR(z.maxAbsError, 2e-7, 1e-12);
  EXPECT_NE(z.message.find("first at [1]"), std::string::npos) << z.message;
}

TEST(CompareTest, ReportsIndexValuesAndErrors) {
  Tensor a = tensorOf<float>(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5.5f});
  Tensor b = tensorOf<float>(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5});
  TensorComparison r = compareTensors(a, b, kRtol, kAtol);
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.firstMismatch, 5);
  EXPECT_DOUBLE_EQ(r.maxAbsError, 0.5);
  EXPECT_DOUBLE_EQ(r.maxRelError, 0.1);
  EXPECT_EQ(r.message, "1 of 6 elements differ; first at [1, 2]: actual 5.5, "
                       "expected 5; max abs error 0.5, max rel error 0.1 "
                       "(rtol 0.001, atol 1e-07)");
}

TEST(CompareTest, HalfPrecision) {
  Tensor a = tensorOf<uint16_t>(DType::F16, {2},
                                {floatToHalf(1.0f), floatToHalf(kNaN)});
  Tensor b = tensorOf<uint16_t>(DType::F16, {2},
                                {floatToHalf(1.0f), floatToHalf(kNaN)});
  EXPECT_TRUE(compareTensors(a, b, kRtol, kAtol).match);
  // One f16 ulp at 1.0 is 2^-10 ~ 0.00098: inside rtol 1e-3; two are not.
  Tensor c = tensorOf<uint16_t>(DType::F16, {1}, {0x3C01});
  Tensor d = tensorOf<uint16_t>(DType::F16, {1}, {0x3C02});
  Tensor one = tensorOf<uint16_t>(DType::F16, {1}, {0x3C00});
  EXPECT_TRUE(compareTensors(c, one, kRtol, kAtol).match);
  EXPECT_FALSE(compareTensors(d, one, kRtol, kAtol).match);
}

TEST(CompareTest, IntegersAreExact) {
  Tensor a = tensorOf<int32_t>(DType::I32, {3}, {1, 2, 3});
  Tensor b = tensorOf<int32_t>(DType::I32, {3}, {1, 2, 4});
  TensorComparison r = compareTensors(a, b, /*rtol=*/1, /*atol=*/100);
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.firstMismatch, 2);
  EXPECT_EQ(r.maxAbsError, 1);
  EXPECT_NE(r.message.find("actual 3, expected 4"), std::string::npos)
      << r.message;
  // Values 2^53 and 2^53 + 1 are equal as doubles but not as int64.
  int64_t big = int64_t(1) << 53;
  Tensor c = tensorOf<int64_t>(DType::I64, {1}, {big});
  Tensor d = tensorOf<int64_t>(DType::I64, {1}, {big + 1});
  TensorComparison rb = compareTensors(c, d, 0, 0);
  EXPECT_FALSE(rb.match);
  EXPECT_NE(rb.message.find("actual 9007199254740992, expected "
                            "9007199254740993"),
            std::string::npos)
      << rb.message;
  // Extremes do not overflow the error.
  Tensor lo = tensorOf<int64_t>(DType::I64, {1}, {INT64_MIN});
  Tensor hi = tensorOf<int64_t>(DType::I64, {1}, {INT64_MAX});
  EXPECT_EQ(compareTensors(lo, hi, 0, 0).maxAbsError, std::ldexp(1.0, 64));
  Tensor u0 = tensorOf<uint64_t>(DType::U64, {1}, {0});
  Tensor u1 = tensorOf<uint64_t>(DType::U64, {1}, {UINT64_MAX});
  EXPECT_FALSE(compareTensors(u0, u1, 0, 0).match);
  // Bools compare as truth values.
  Tensor t1 = tensorOf<uint8_t>(DType::Bool, {2}, {1, 0});
  Tensor t2 = tensorOf<uint8_t>(DType::Bool, {2}, {1, 1});
  EXPECT_EQ(compareTensors(t1, t2, 0, 0).firstMismatch, 1);
}

TEST(CompareTest, DTypeAndShapeMustMatch) {
  Tensor a = tensorOf<float>(DType::F32, {2}, {1, 2});
  Tensor b = tensorOf<double>(DType::F64, {2}, {1, 2});
  TensorComparison r = compareTensors(a, b, kRtol, kAtol);
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.message, "dtype differs: actual f32, expected f64");
  Tensor c = tensorOf<float>(DType::F32, {1, 2}, {1, 2});
  TensorComparison s = compareTensors(a, c, kRtol, kAtol);
  EXPECT_FALSE(s.match);
  EXPECT_EQ(s.message, "shape differs: actual (2,), expected (1, 2)");
  Tensor e1 = tensorOf<float>(DType::F32, {0}, {});
  Tensor e2 = tensorOf<float>(DType::F32, {0}, {});
  EXPECT_TRUE(compareTensors(e1, e2, 0, 0).match);
}

} // namespace
