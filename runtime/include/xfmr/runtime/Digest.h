//===- Digest.h - SHA-256 of artifact files ---------------------*- C++ -*-===//
//
// Part of xfmr. The manifest records the size and SHA-256 of model.so and
// weights.bin (xfmr-compile computes them with this code too); the loader
// compares before it dlopens or maps anything. OpenSSL's libcrypto does the
// hashing (SHA extensions or AVX2 where the CPU has them).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_DIGEST_H
#define XFMR_RUNTIME_DIGEST_H

#include "xfmr/runtime/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace xfmr::rt {

/// Lowercase hex SHA-256 of `size` bytes at `data`.
std::string sha256Hex(const void *data, size_t size);

/// Lowercase hex SHA-256 of the open file `fd` from offset 0 to its end,
/// read in chunks (never the whole file in memory). `pathForErrors` names
/// it in a read error.
Expected<std::string> sha256OfFile(int fd, const std::string &pathForErrors);

/// SHA-256 of bytes given piece by piece (xfmr-compile hashes weights.bin
/// as it writes it).
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  void update(const void *data, size_t size);
  /// Lowercase hex digest of everything given so far; once.
  std::string finish();

private:
  struct Context;
  Context *ctx;
};

/// Whether `s` is 64 lowercase hex digits.
bool isSHA256Hex(const std::string &s);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_DIGEST_H
