//===- TestArtifacts.h - hand-written artifacts for the unit tests -*- C++ -*-===//
//
// Part of xfmr. The manifests the tests write by hand name the files of the
// artifact with their size and SHA-256, as xfmr-compile's do: sealManifest
// fills them in once model.so and weights.bin are in place.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TEST_UNIT_TESTARTIFACTS_H
#define XFMR_TEST_UNIT_TESTARTIFACTS_H

#include "xfmr/runtime/Digest.h"

#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace xfmr::rt::test {

/// {"size": N, "sha256": "..."} of `path` ("{}" when it cannot be read, which
/// the loader then reports).
inline std::string fileEntry(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "{}";
  struct stat st;
  ::fstat(fd, &st);
  Expected<std::string> digest = sha256OfFile(fd, path);
  ::close(fd);
  if (!digest)
    return "{}";
  return "{\"size\": " + std::to_string(st.st_size) + ", \"sha256\": \"" + *digest + "\"}";
}

/// `manifest` (a JSON object ending in '}') with a "files" entry for
/// `dir`/model.so and `dir`/weights.bin appended.
inline std::string sealManifest(std::string manifest, const std::string &dir) {
  size_t end = manifest.rfind('}');
  std::string files = ", \"files\": {\"model.so\": " + fileEntry(dir + "/model.so") +
                      ", \"weights.bin\": " + fileEntry(dir + "/weights.bin") + "}";
  manifest.insert(end, files);
  return manifest;
}

} // namespace xfmr::rt::test

#endif // XFMR_TEST_UNIT_TESTARTIFACTS_H
