//===- TensorIO.cpp - tensors from and to .npy and .pb files --------------===//
//
// Part of xfmr.
//
// Built with exceptions: protobuf may throw (std::bad_alloc on a hostile
// length prefix), and so may allocating a buffer a file asks for. Both are
// caught here; nothing escapes to callers built without exceptions.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/TensorIO.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;

namespace {

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

std::string errnoMessage(int err) { return std::strerror(err); }

/// A read-only regular file.
class InputFile {
public:
  InputFile() = default;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile() {
    if (fd >= 0)
      ::close(fd);
  }

  /// Opens `path`; a missing file, a directory or a device is an error.
  Status open(const std::string &path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat
    // rejects it; reads of regular files ignore the flag.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return Error(path + ": cannot open: " + errnoMessage(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0)
      return Error(path + ": cannot stat: " + errnoMessage(errno));
    if (!S_ISREG(st.st_mode))
      return Error(path + ": not a regular file");
    fileSize = static_cast<uint64_t>(st.st_size);
    name = path;
    return {};
  }

  uint64_t size() const { return fileSize; }

  /// Reads exactly `n` bytes at `offset`; a short read means the file
  /// changed under us and is an error too.
  Status readAt(void *dst, size_t n, uint64_t offset) {
    auto *p = static_cast<char *>(dst);
    while (n > 0) {
      size_t chunk = std::min<size_t>(n, size_t(1) << 30);
      ssize_t got = ::pread(fd, p, chunk, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        return Error(name + ": read failed: " + errnoMessage(errno));
      if (got == 0)
        return Error(name + ": file ended early (was it truncated while "
                            "being read?)");
      p += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
    return {};
  }

private:
  int fd = -1;
  uint64_t fileSize = 0;
  std::string name;
};

/// The directory part of `path` ("." for a bare file name).
std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so readers see the old file or the whole new one.
Status writeFileAtomically(const std::string &path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  std::string dir = parentDirectory(path);
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.empty())
    return Error(path + ": cannot write: the path names a directory");
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    uint64_t salt =
        static_cast<uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (counter.fetch_add(1) << 20);
    tmp = dir + "/." + base + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(salt);
    // 0666 minus the umask, like any newly created file.
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      return Error(path + ": cannot create a temporary file in '" + dir +
                   "': " + errnoMessage(errno));
  }
  if (fd < 0)
    return Error(path + ": cannot create a temporary file in '" + dir + "'");
  auto fail = [&](const std::string &what, int err) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    return Error(path + ": " + what + ": " + errnoMessage(err));
  };
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t put = ::write(fd, p, std::min<size_t>(left, size_t(1) << 30));
    if (put < 0 && errno == EINTR)
      continue;
    if (put < 0)
      return fail("write failed", errno);
    p += put;
    left -= static_cast<size_t>(put);
  }
  // Flush before the rename: after a crash the name must not point at a
  // file whose data never reached the disk.
  if (::fsync(fd) != 0)
    return fail("fsync failed", errno);
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0)
    return fail("close failed", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("cannot rename the temporary file into place", errno);
  return {};
}

//===----------------------------------------------------------------------===//
// .npy header
//===----------------------------------------------------------------------===//

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

/// What the header of a .npy file says.
struct NpyHeader {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  /// Bytes before the data: magic, version, length field and header.
  uint64_t dataOffset = 0;
};

/// The dtype of a .npy descr string, or why it is not supported.
Expected<DType> dtypeFromDescr(const std::string &descr) {
  auto unsupported = [&](const std::string &why) {
    return Error("dtype '" + descr + "': " + why);
  };
  if (descr.size() < 2)
    return unsupported("not a supported dtype");
  char order = descr[0];
  std::string kind = descr.substr(1);
  if (kind == "O")
    return unsupported("object arrays are not supported");
  if (order == '>')
    return unsupported("big-endian data is not supported (save it "
                       "little-endian, e.g. a.astype(a.dtype.newbyteorder("
                       "'<')))");
  if (order != '<' && order != '|')
    return unsupported("only the byte orders '<' and '|' are supported");
  static const struct {
    const char *kind;
    DType dtype;
  } table[] = {{"f4", DType::F32},  {"f8", DType::F64}, {"f2", DType::F16},
               {"V2", DType::BF16}, {"i1", DType::I8},  {"i2", DType::I16},
               {"i4", DType::I32},  {"i8", DType::I64}, {"u1", DType::U8},
               {"u2", DType::U16},  {"u4", DType::U32}, {"u8", DType::U64},
               {"b1", DType::Bool}, {"V1", DType::F8E4M3FN}};
  for (const auto &entry : table)
    if (kind == entry.kind)
      return entry.dtype;
  return unsupported("not a supported dtype (supported: f2 f4 f8 i1 i2 i4 i8 "
                     "u1 u2 u4 u8 b1, V2 as bfloat16 and V1 as float8 e4m3fn)");
}

/// The .npy descr of `dtype` ('<' for multi-byte types, '|' for bytes, as
/// NumPy writes them).
std::string descrOf(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return "<V2";
  case DType::I8:
    return "|i1";
  case DType::I16:
    return "<i2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::U8:
    return "|u1";
  case DType::U16:
    return "<u2";
  case DType::U32:
    return "<u4";
  case DType::U64:
    return "<u8";
  case DType::Bool:
    return "|b1";
  case DType::F8E4M3FN:
    return "|V1"; // raw bytes, as ml_dtypes' float8_e4m3fn saves
  }
  return "";
}

/// Parses the Python dict literal of a .npy header, e.g.
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
/// Only the literal forms np.save writes are accepted: quoted strings,
/// True/False, and tuples of non-negative decimal integers.
class NpyDictParser {
public:
  explicit NpyDictParser(std::string_view text) : text(text) {}

  Status parse(std::string &descr, bool &fortranOrder,
               std::vector<int64_t> &shape) {
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!consume('{'))
      return error("expected '{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (Status s = parseString(key); !s)
        return s;
      skipSpace();
      if (!consume(':'))
        return error("expected ':' after '" + key + "'");
      skipSpace();
      if (key == "descr") {
        if (haveDescr)
          return error("duplicate key 'descr'");
        haveDescr = true;
        if (peek() == '[')
          return Error("structured dtypes are not supported");
        if (Status s = parseString(descr); !s)
          return s;
      } else if (key == "fortran_order") {
        if (haveOrder)
          return error("duplicate key 'fortran_order'");
        haveOrder = true;
        if (Status s = parseBool(fortranOrder); !s)
          return s;
      } else if (key == "shape") {
        if (haveShape)
          return error("duplicate key 'shape'");
        haveShape = true;
        if (Status s = parseTuple(shape); !s)
          return s;
      } else {
        return error("unexpected key '" + key + "'");
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (!consume('}'))
        return error("expected ',' or '}'");
      break;
    }
    skipSpace();
    if (pos != text.size())
      return error("unexpected text after the dictionary");
    if (!haveDescr || !haveOrder || !haveShape)
      return Error("the header lacks one of the keys 'descr', "
                   "'fortran_order' and 'shape'");
    return {};
  }

private:
  char peek() const { return pos < text.size() ? text[pos] : '\0'; }
  bool consume(char c) {
    if (peek() != c)
      return false;
    ++pos;
    return true;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  Error error(const std::string &why) const {
    return Error("malformed header dictionary at offset " +
                 std::to_string(pos) + ": " + why);
  }

  Status parseString(std::string &out) {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      return error("expected a quoted string");
    ++pos;
    size_t end = text.find(quote, pos);
    if (end == std::string_view::npos)
      return error("unterminated string");
    out = std::string(text.substr(pos, end - pos));
    if (out.find('\\') != std::string::npos)
      return error("escapes in strings are not supported");
    pos = end + 1;
    return {};
  }

  Status parseBool(bool &out) {
    if (text.substr(pos, 4) == "True") {
      out = true, pos += 4;
      return {};
    }
    if (text.substr(pos, 5) == "False") {
      out = false, pos += 5;
      return {};
    }
    return error("expected True or False");
  }

  /// "()", "(3,)", "(2, 3)", "(2, 3,)"; Python 2's "3L" too. "(3)" is an
  /// int in Python, not a shape.
  Status parseTuple(std::vector<int64_t> &out) {
    if (!consume('('))
      return error("expected a tuple");
    bool trailingComma = false;
    while (true) {
      skipSpace();
      if (consume(')'))
        break;
      if (out.size() >= kMaxRank)
        return Error("rank exceeds the limit of " + std::to_string(kMaxRank));
      bool negative = consume('-');
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        return error("expected an integer");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, peek() - '0', &v))
          return Error("a dim of the shape does not fit in int64");
        ++pos;
      }
      consume('L');
      out.push_back(negative ? -v : v);
      skipSpace();
      trailingComma = consume(',');
      if (trailingComma)
        continue;
      skipSpace();
      if (consume(')'))
        break;
      return error("expected ',' or ')' in the shape");
    }
    if (out.size() == 1 && !trailingComma)
      return error("the shape is not a tuple");
    return {};
  }

  std::string_view text;
  size_t pos = 0;
};

/// Parses the preamble and header of a .npy file from `prefix`, its first
/// bytes (at least the whole header if the file has one), given the size of
/// the whole file. Checks that the data fills the rest of the file exactly.
Expected<NpyHeader> parseNpyHeader(std::string_view prefix, uint64_t fileSize,
                                   const std::string &name) {
  auto fail = [&](const std::string &why) { return Error(name + ": " + why); };
  if (fileSize == 0)
    return fail("file is empty");
  if (prefix.size() < kNpyMagicLen ||
      prefix.substr(0, kNpyMagicLen) != std::string_view(kNpyMagic))
    return fail("not a .npy file (it does not start with \\x93NUMPY)");
  if (prefix.size() < kNpyMagicLen + 2)
    return fail("file is truncated in the format version");
  auto major = static_cast<uint8_t>(prefix[6]);
  auto minor = static_cast<uint8_t>(prefix[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return fail("unsupported .npy format version " + std::to_string(major) +
                "." + std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t headerStart = kNpyMagicLen + 2 + lenBytes;
  if (prefix.size() < headerStart)
    return fail("file is truncated in the header length");
  uint64_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= static_cast<uint64_t>(static_cast<uint8_t>(prefix[8 + i]))
                 << (8 * i);
  if (headerLen > kMaxNpyHeaderBytes)
    return fail("header length " + std::to_string(headerLen) +
                " exceeds the limit of " + std::to_string(kMaxNpyHeaderBytes) +
                " bytes");
  if (headerStart + headerLen > fileSize ||
      headerStart + headerLen > prefix.size())
    return fail("file is truncated: the header of " +
                std::to_string(headerLen) + " bytes ends past the end of the " +
                "file (" + std::to_string(fileSize) + " bytes)");
  std::string_view header = prefix.substr(headerStart, headerLen);
  // Headers of the supported dtypes are ASCII (format 3.0 only allows UTF-8
  // for structured dtypes' field names).
  for (char c : header)
    if (static_cast<unsigned char>(c) >= 0x80 || c == '\0')
      return fail("header contains a NUL or non-ASCII byte");

  std::string descr;
  bool fortranOrder = false;
  NpyHeader h;
  if (Status s = NpyDictParser(header).parse(descr, fortranOrder, h.shape); !s)
    return fail(s.error());
  Expected<DType> dtype = dtypeFromDescr(descr);
  if (!dtype)
    return fail(dtype.error());
  h.dtype = *dtype;
  if (fortranOrder)
    return fail("fortran_order is True: only C-order arrays are supported "
                "(save np.ascontiguousarray(a))");
  Expected<int64_t> n = countElements(h.shape);
  if (!n)
    return fail("shape " + formatShape(h.shape) + ": " + n.error());
  h.numel = *n;
  int64_t bytes;
  if (__builtin_mul_overflow(h.numel, static_cast<int64_t>(dtypeSize(h.dtype)),
                             &bytes))
    return fail("byte size of shape " + formatShape(h.shape) + " of " +
                dtypeName(h.dtype) + " overflows int64");
  h.dataOffset = headerStart + headerLen;
  uint64_t have = fileSize - h.dataOffset;
  if (have != static_cast<uint64_t>(bytes))
    return fail(std::string(have < static_cast<uint64_t>(bytes)
                                ? "data is truncated"
                                : "trailing bytes after the data") +
                ": shape " + formatShape(h.shape) + " of " +
                dtypeName(h.dtype) + " needs " + std::to_string(bytes) +
                " bytes of data, the file holds " + std::to_string(have));
  return h;
}

/// Bool storage is 0 or 1; NumPy reads any non-zero byte as True.
void normalizeBools(Tensor &t) {
  if (t.dtype() != DType::Bool)
    return;
  uint8_t *p = t.bytes();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = p[i] != 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

Expected<Tensor> xfmr::rt::parseNpy(std::string_view bytes,
                                    const std::string &displayName) {
  Expected<NpyHeader> h = parseNpyHeader(bytes, bytes.size(), displayName);
  if (!h)
    return h.takeError();
  Expected<Tensor> t = Tensor::create(h->dtype, h->shape);
  if (!t)
    return Error(displayName + ": " + t.error());
  if (t->byteSize() > 0)
    std::memcpy(t->bytes(), bytes.data() + h->dataOffset, t->byteSize());
  normalizeBools(*t);
  return t;
}

Expected<Tensor> xfmr::rt::readNpy(const std::string &path) {
  InputFile file;
  if (Status s = file.open(path); !s)
    return s.takeError();
  // The preamble and header are at most this long; the data is then read
  // straight into the tensor.
  std::string prefix(std::min<uint64_t>(file.size(), kNpyMagicLen + 2 + 4 +
                                                         kMaxNpyHeaderBytes),
                     '\0');
  if (Status s = file.readAt(prefix.data(), prefix.size(), 0); !s)
    return s.takeError();
  Expected<NpyHeader> h = parseNpyHeader(prefix, file.size(), path);
  if (!h)
    return h.takeError();
  Expected<Tensor> t = Tensor::create(h->dtype, h->shape);
  if (!t)
    return Error(path + ": " + t.error());
  if (t->byteSize() > 0)
    if (Status s = file.readAt(t->bytes(), t->byteSize(), h->dataOffset); !s)
      return s.takeError();
  normalizeBools(*t);
  return t;
}

std::string xfmr::rt::serializeNpy(const Tensor &tensor) {
  // What numpy.lib.format._write_array_header writes: the sorted dict, room
  // for the first dim to grow to 21 digits, then spaces and '\n' up to a
  // multiple of 64 bytes.
  const std::vector<int64_t> &shape = tensor.shape();
  std::string dict =
      "{'descr': '" + descrOf(tensor.dtype()) +
      "', 'fortran_order': False, 'shape': " + formatShape(shape) + ", }";
  if (!shape.empty())
    dict.append(21 - std::min<size_t>(21, std::to_string(shape[0]).size()),
                ' ');
  size_t hlen = dict.size() + 1;
  int major = 1;
  size_t preamble = kNpyMagicLen + 2 + 2;
  size_t padlen = 64 - (preamble + hlen) % 64;
  if (hlen + padlen > 0xFFFF) {
    major = 2;
    preamble = kNpyMagicLen + 2 + 4;
    padlen = 64 - (preamble + hlen) % 64;
  }
  uint64_t headerLen = hlen + padlen;
  std::string out(kNpyMagic, kNpyMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out.push_back(static_cast<char>((headerLen >> (8 * i)) & 0xFF));
  out += dict;
  out.append(padlen, ' ');
  out.push_back('\n');
  out.append(reinterpret_cast<const char *>(tensor.bytes()), tensor.byteSize());
  return out;
}

Status xfmr::rt::writeNpy(const std::string &path, const Tensor &tensor) {
  std::string bytes;
  try {
    bytes = serializeNpy(tensor);
  } catch (const std::bad_alloc &) {
    return Error(path + ": cannot allocate " +
                 std::to_string(tensor.byteSize()) + " bytes to serialize");
  }
  return writeFileAtomically(path, bytes);
}

//===----------------------------------------------------------------------===//
// ONNX TensorProto
//===----------------------------------------------------------------------===//

namespace {
namespace pb = onnx;

constexpr uint64_t kProtobufLimit = (uint64_t(1) << 31) - 1;

std::string onnxTypeName(int32_t dt) {
  // Types newer than Debian's onnx 1.12 protobuf classes.
  static const char *const newer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",        "INT4",           "FLOAT4E2M1"};
  if (dt >= 17 && dt <= 23)
    return newer[dt - 17];
  if (pb::TensorProto_DataType_IsValid(dt))
    return pb::TensorProto_DataType_Name(
        static_cast<pb::TensorProto_DataType>(dt));
  return "UNKNOWN";
}

/// The typed field that holds values of `dtype` (onnx.proto's comments).
enum class TypedField { Float, Double, Int32, Int64, UInt64 };

TypedField typedFieldOf(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return TypedField::Float;
  case DType::F64:
    return TypedField::Double;
  case DType::I64:
    return TypedField::Int64;
  case DType::U32:
  case DType::U64:
    return TypedField::UInt64;
  default:
    return TypedField::Int32; // and 16-bit floats as their bit patterns
  }
}

const char *fieldName(TypedField f) {
  switch (f) {
  case TypedField::Float:
    return "float_data";
  case TypedField::Double:
    return "double_data";
  case TypedField::Int32:
    return "int32_data";
  case TypedField::Int64:
    return "int64_data";
  case TypedField::UInt64:
    return "uint64_data";
  }
  return "";
}

int64_t fieldSize(const pb::TensorProto &t, TypedField f) {
  switch (f) {
  case TypedField::Float:
    return t.float_data_size();
  case TypedField::Double:
    return t.double_data_size();
  case TypedField::Int32:
    return t.int32_data_size();
  case TypedField::Int64:
    return t.int64_data_size();
  case TypedField::UInt64:
    return t.uint64_data_size();
  }
  return 0;
}

/// Copies the typed field of `t` into `out`, checking that integer values
/// fit the element type. `fail` builds the error.
template <typename Fail>
Status copyTypedData(const pb::TensorProto &t, Tensor &out, Fail fail) {
  int64_t n = out.numel();
  uint8_t *dst = out.bytes();
  size_t elem = out.elementSize();
  switch (typedFieldOf(out.dtype())) {
  case TypedField::Float:
    if (n)
      std::memcpy(dst, t.float_data().data(), n * sizeof(float));
    return {};
  case TypedField::Double:
    if (n)
      std::memcpy(dst, t.double_data().data(), n * sizeof(double));
    return {};
  case TypedField::Int64:
    if (n)
      std::memcpy(dst, t.int64_data().data(), n * sizeof(int64_t));
    return {};
  case TypedField::UInt64:
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = t.uint64_data(static_cast<int>(i));
      if (out.dtype() == DType::U32 && v > UINT32_MAX)
        return fail("uint64_data value " + std::to_string(v) +
                    " is out of range for UINT32");
      std::memcpy(dst + i * elem, &v, elem);
    }
    return {};
  case TypedField::Int32:
    break;
  }
  // One int32_data entry per element holding the value (integers, bool) or
  // the bit pattern (float16, bfloat16).
  int64_t lo, hi;
  switch (out.dtype()) {
  case DType::I8:
    lo = INT8_MIN, hi = INT8_MAX;
    break;
  case DType::I16:
    lo = INT16_MIN, hi = INT16_MAX;
    break;
  case DType::I32:
    lo = INT32_MIN, hi = INT32_MAX;
    break;
  case DType::U8:
    lo = 0, hi = UINT8_MAX;
    break;
  case DType::Bool:
    lo = 0, hi = 1;
    break;
  default: // u16, f16, bf16
    lo = 0, hi = UINT16_MAX;
    break;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = t.int32_data(static_cast<int>(i));
    if (v < lo || v > hi)
      return fail("int32_data value " + std::to_string(v) +
                  " is out of range for " + onnxTypeName(toONNX(out.dtype())));
    auto bits = static_cast<uint32_t>(v);
    std::memcpy(dst + i * elem, &bits, elem);
  }
  return {};
}

/// Checks a parsed TensorProto and copies its data into a Tensor.
Expected<Tensor> tensorFromProto(const pb::TensorProto &t,
                                 const std::string &displayName) {
  std::string what =
      displayName + ": " +
      (t.name().empty() ? std::string("tensor") : "tensor '" + t.name() + "'");
  auto fail = [&](const std::string &why) { return Error(what + ": " + why); };

  int32_t dt = t.data_type();
  std::optional<DType> dtype = dtypeFromONNX(dt);
  if (!dtype)
    return fail("unsupported data type " + onnxTypeName(dt) + " (" +
                std::to_string(dt) + ")");
  if (t.has_segment())
    return fail("segmented tensors are not supported");
  if (t.data_location() == pb::TensorProto::EXTERNAL ||
      t.external_data_size() > 0)
    return fail("external data is not supported (store the data inline)");
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  Expected<int64_t> n = countElements(shape);
  if (!n)
    return fail("shape " + formatShape(shape) + ": " + n.error());
  int64_t bytes;
  if (__builtin_mul_overflow(*n, static_cast<int64_t>(dtypeSize(*dtype)),
                             &bytes))
    return fail("byte size of shape " + formatShape(shape) + " of " +
                dtypeName(*dtype) + " overflows int64");

  if (t.string_data_size() > 0)
    return fail("has string_data, which " + onnxTypeName(dt) + " does not use");
  TypedField field = typedFieldOf(*dtype);
  int64_t typed = 0;
  for (TypedField f : {TypedField::Float, TypedField::Double, TypedField::Int32,
                       TypedField::Int64, TypedField::UInt64}) {
    int64_t count = fieldSize(t, f);
    typed += count;
    if (count > 0 && f != field)
      return fail(std::string("has ") + fieldName(f) + ", which " +
                  onnxTypeName(dt) + " does not use (its values go in " +
                  fieldName(field) + ")");
  }
  if (t.has_raw_data() && typed > 0)
    return fail("has both raw_data and " + std::string(fieldName(field)));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<uint64_t>(bytes))
      return fail("raw_data has " + std::to_string(t.raw_data().size()) +
                  " bytes, expected " + std::to_string(bytes) + " (" +
                  std::to_string(*n) + " elements of " + onnxTypeName(dt) +
                  ")");
  } else if (typed != *n) {
    return fail(std::string(fieldName(field)) + " holds " +
                std::to_string(typed) + " values, expected " +
                std::to_string(*n));
  }

  // Every size is now backed by the file: allocating is safe.
  Expected<Tensor> out = Tensor::create(*dtype, shape, t.name());
  if (!out)
    return fail(out.error());
  if (t.has_raw_data()) {
    if (bytes > 0)
      std::memcpy(out->bytes(), t.raw_data().data(), bytes);
  } else if (Status s = copyTypedData(t, *out, fail); !s) {
    return s.takeError();
  }
  normalizeBools(*out);
  return out;
}
} // namespace

Expected<Tensor> xfmr::rt::parseTensorProto(std::string_view bytes,
                                            const std::string &displayName) {
  if (bytes.empty())
    return Error(displayName + ": file is empty");
  if (bytes.size() > kProtobufLimit)
    return Error(displayName + ": " + std::to_string(bytes.size()) +
                 " bytes is above protobuf's 2 GiB limit");
  try {
    pb::TensorProto t;
    google::protobuf::io::CodedInputStream stream(
        reinterpret_cast<const uint8_t *>(bytes.data()),
        static_cast<int>(bytes.size()));
    stream.SetRecursionLimit(64);
    if (!t.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
      return Error(displayName + ": not a valid ONNX TensorProto (protobuf "
                                 "parse failed: truncated or corrupt)");
    return tensorFromProto(t, displayName);
  } catch (const std::exception &e) {
    return Error(displayName + ": not a valid ONNX TensorProto (" +
                 std::string(e.what()) + ")");
  }
}

Expected<Tensor> xfmr::rt::readTensorProto(const std::string &path) {
  InputFile file;
  if (Status s = file.open(path); !s)
    return s.takeError();
  if (file.size() == 0)
    return Error(path + ": file is empty");
  if (file.size() > kProtobufLimit)
    return Error(path + ": " + std::to_string(file.size()) +
                 " bytes is above protobuf's 2 GiB limit");
  std::string bytes;
  try {
    bytes.resize(file.size());
  } catch (const std::bad_alloc &) {
    return Error(path + ": cannot allocate " + std::to_string(file.size()) +
                 " bytes to read it");
  }
  if (Status s = file.readAt(bytes.data(), bytes.size(), 0); !s)
    return s.takeError();
  return parseTensorProto(bytes, path);
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

Expected<Tensor> xfmr::rt::readTensor(const std::string &path) {
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    if (path.size() < n)
      return false;
    for (size_t i = 0; i < n; ++i)
      if (std::tolower(static_cast<unsigned char>(path[path.size() - n + i])) !=
          suffix[i])
        return false;
    return true;
  };
  if (endsWith(".npy"))
    return readNpy(path);
  if (endsWith(".pb"))
    return readTensorProto(path);
  return Error(path + ": unknown tensor file type (expected a .npy or an "
                      ".pb file)");
}
