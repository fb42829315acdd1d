//===- ExternalData.cpp - checked, memory-mapped ONNX external data -------===//
//
// Part of xfmr.
//
// External data is a path someone else wrote into the model. Everything is
// checked before a byte is read or allocated: the location is relative, has no
// `..` and no links on the way (file or directory, symbolic or hard), offset
// and length are plain decimal numbers inside the file, and the length is
// exactly what the tensor's type needs. The file is then mapped read-only;
// the blobs point into the mapping.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace xfmr::onnx_import;

namespace {
/// Strict non-negative decimal parse (no sign, no spaces, no overflow).
std::optional<uint64_t> parseDecimal(llvm::StringRef s) {
  if (s.empty() || s.size() > 19)
    return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// RAII file descriptor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

FailureOr<std::shared_ptr<MappedFile>>
ExternalDataResolver::open(llvm::StringRef tensorName,
                           llvm::StringRef location) {
  auto fail = [&](const llvm::Twine &why) {
    ic.error() << "tensor '" << tensorName << "': external data location '"
               << location << "' " << why;
    return failure();
  };
  if (ic.baseDir.empty())
    return fail("cannot be resolved: the model was not read from a file");
  if (location.empty())
    return fail("is empty");
  if (location.contains('\0'))
    return fail("contains a NUL byte");
  if (llvm::sys::path::is_absolute(location) || location.starts_with("/") ||
      location.starts_with("\\"))
    return fail("is absolute; it must be relative to the model's directory");
  SmallVector<llvm::StringRef> parts;
  location.split(parts, '/', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts)
    if (part == ".." || part.contains('\\'))
      return fail("escapes the model's directory");
  if (auto it = files.find(location); it != files.end())
    return it->second;

  // Walk from the model's directory, refusing any symbolic link on the way.
  llvm::SmallString<256> path(ic.baseDir);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == ".")
      continue;
    llvm::sys::path::append(path, parts[i]);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0)
      return fail("does not exist");
    if (S_ISLNK(st.st_mode))
      return fail(llvm::Twine("goes through a symbolic link ('") + path + "')");
    bool last = i + 1 == parts.size();
    if (!last && !S_ISDIR(st.st_mode))
      return fail("has a non-directory component");
    if (last && !S_ISREG(st.st_mode))
      return fail("is not a regular file");
  }
  Fd fd;
  fd.fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd.fd < 0)
    return fail("cannot be opened");
  struct stat st;
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return fail("is not a regular file");
  if (st.st_nlink != 1)
    return fail("is a hard link (link count " + llvm::Twine(st.st_nlink) + ")");

  auto file = std::make_shared<MappedFile>();
  file->size = st.st_size;
  if (file->size > 0) {
    std::error_code ec;
    file->region = llvm::sys::fs::mapped_file_region(
        llvm::sys::fs::convertFDToNativeFile(fd.fd),
        llvm::sys::fs::mapped_file_region::readonly, file->size, 0, ec);
    if (ec)
      return fail("cannot be mapped: " + ec.message());
    llvm::SmallString<256> absolute;
    if (!llvm::sys::fs::real_path(path, absolute))
      xfmr::MappedSources::get().add(
          file->region.const_data(),
          {absolute.str().str(), file->size,
           static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  files[location] = file;
  return file;
}

FailureOr<ArrayRef<char>>
ExternalDataResolver::resolve(const pb::TensorProto &tensor,
                              uint64_t expectedBytes,
                              std::shared_ptr<MappedFile> &keepAlive) {
  llvm::StringRef name = tensor.name();
  std::optional<llvm::StringRef> location;
  std::optional<uint64_t> offset, length;
  for (const pb::StringStringEntryProto &e : tensor.external_data()) {
    llvm::StringRef key = e.key(), value = e.value();
    if (key == "location") {
      location = value;
    } else if (key == "offset" || key == "length") {
      std::optional<uint64_t> v = parseDecimal(value);
      if (!v) {
        ic.error() << "tensor '" << name << "': external data " << key << " '"
                   << value << "' is not a non-negative decimal number";
        return failure();
      }
      (key == "offset" ? offset : length) = v;
    } else if (key != "checksum" && key != "basepath") {
      ic.error() << "tensor '" << name << "': unknown external data key '"
                 << key << "'";
      return failure();
    }
  }
  if (!location) {
    ic.error() << "tensor '" << name << "': external data has no location";
    return failure();
  }
  if (length && *length != expectedBytes) {
    ic.error() << "tensor '" << name << "': external data length " << *length
               << " differs from the " << expectedBytes
               << " bytes its type needs";
    return failure();
  }
  FailureOr<std::shared_ptr<MappedFile>> file = open(name, *location);
  if (failed(file))
    return failure();
  uint64_t start = offset.value_or(0);
  if (start > (*file)->size || expectedBytes > (*file)->size - start) {
    ic.error() << "tensor '" << name << "': external data [" << start << ", "
               << start + expectedBytes << ") lies beyond the end of '"
               << *location << "' (" << (*file)->size << " bytes)";
    return failure();
  }
  if (!length && start + expectedBytes != (*file)->size) {
    ic.error() << "tensor '" << name
               << "': external data without a length must run to the end of '"
               << *location << "': " << (*file)->size - start
               << " bytes remain, " << expectedBytes << " expected";
    return failure();
  }
  keepAlive = *file;
  if (expectedBytes == 0)
    return ArrayRef<char>();
  return ArrayRef<char>((*file)->region.const_data() + start, expectedBytes);
}
