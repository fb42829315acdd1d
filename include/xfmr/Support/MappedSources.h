//===- MappedSources.h - which model file a weight's bytes come from -*- C++ -*-===//
//
// Part of xfmr. The ONNX importer maps external data files read-only and
// its blobs point into the mappings. It registers each mapping here, so
// that xfmr-externalize-weights can tell, for a weight's bytes, the file and
// offset they are at (xfmr-compile --weights=reference: the artifact then
// reads them from there instead of carrying a copy).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SUPPORT_MAPPEDSOURCES_H
#define XFMR_SUPPORT_MAPPEDSOURCES_H

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace xfmr {

/// A mapped file as it was when mapped: absolute path, size, and
/// modification time in nanoseconds.
struct MappedSource {
  std::string path;
  uint64_t size = 0;
  int64_t mtimeNs = 0;
};

/// Where some bytes lie in a mapped file.
struct SourceLocation {
  const MappedSource *file;
  uint64_t offset;
};

/// The process's registry of mapped model files (thread-safe).
class MappedSources {
public:
  static MappedSources &get() {
    static MappedSources registry;
    return registry;
  }

  void add(const char *base, MappedSource file) {
    std::lock_guard<std::mutex> lock(mutex);
    files[reinterpret_cast<uintptr_t>(base)] = std::move(file);
  }

  void remove(const char *base) {
    std::lock_guard<std::mutex> lock(mutex);
    files.erase(reinterpret_cast<uintptr_t>(base));
  }

  /// The file and offset of [data, data + size) when it lies inside one
  /// registered mapping. The MappedSource stays valid while that mapping is
  /// registered.
  std::optional<SourceLocation> find(const char *data, uint64_t size) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto p = reinterpret_cast<uintptr_t>(data);
    auto it = files.upper_bound(p);
    if (it == files.begin())
      return std::nullopt;
    --it;
    uint64_t offset = p - it->first;
    if (offset > it->second.size || size > it->second.size - offset)
      return std::nullopt;
    return SourceLocation{&it->second, offset};
  }

private:
  mutable std::mutex mutex;
  std::map<uintptr_t, MappedSource> files;
};

} // namespace xfmr

#endif // XFMR_SUPPORT_MAPPEDSOURCES_H
