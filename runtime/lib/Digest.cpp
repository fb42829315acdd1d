//===- Digest.cpp - SHA-256 of artifact files -----------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Digest.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include <unistd.h>

namespace xfmr::rt {
namespace {

struct MDContextDeleter {
  void operator()(EVP_MD_CTX *c) const { EVP_MD_CTX_free(c); }
};
using MDContext = std::unique_ptr<EVP_MD_CTX, MDContextDeleter>;

std::string toHex(const unsigned char *digest, unsigned size) {
  static const char digits[] = "0123456789abcdef";
  std::string hex(2 * size, '0');
  for (unsigned i = 0; i < size; ++i) {
    hex[2 * i] = digits[digest[i] >> 4];
    hex[2 * i + 1] = digits[digest[i] & 15];
  }
  return hex;
}

std::string finish(EVP_MD_CTX *ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_DigestFinal_ex(ctx, digest, &size);
  return toHex(digest, size);
}

} // namespace

std::string sha256Hex(const void *data, size_t size) {
  MDContext ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), data, size);
  return finish(ctx.get());
}

Expected<std::string> sha256OfFile(int fd, const std::string &pathForErrors) {
  MDContext ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<unsigned char> buffer(size_t(4) << 20);
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Error(pathForErrors + ": cannot read: " + std::strerror(errno));
    if (n == 0)
      break;
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(n));
    offset += n;
  }
  return finish(ctx.get());
}

struct Sha256::Context {
  MDContext md{EVP_MD_CTX_new()};
};

Sha256::Sha256() : ctx(new Context) {
  EVP_DigestInit_ex(ctx->md.get(), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { delete ctx; }

void Sha256::update(const void *data, size_t size) {
  EVP_DigestUpdate(ctx->md.get(), data, size);
}

std::string Sha256::finish() { return xfmr::rt::finish(ctx->md.get()); }

bool isSHA256Hex(const std::string &s) {
  if (s.size() != 64)
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

} // namespace xfmr::rt
