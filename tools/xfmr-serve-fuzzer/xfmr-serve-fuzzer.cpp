//===- xfmr-serve-fuzzer.cpp - libFuzzer target for xfmr-serve's inputs ---===//
//
// Part of xfmr. What a client controls in xfmr-serve, fuzzed: the first
// byte picks a target, the rest is its input.
//  0: the body of a /v1/completions or /v1/chat/completions request
//     (parseGenerationRequest): it parses or is refused with a message and
//     a 4xx status, never aborts;
//  1: text through SmolLM2's tokenizer (examples/tokenizers/smollm2): the
//     ids are in the vocabulary, decode gives valid UTF-8, and the pieces
//     of a DecodeStream are each valid UTF-8 and concatenate to decode();
//  2: token ids (2 bytes each) through decode and DecodeStream, the same;
//  3: a tokenizer.json: it loads or is refused with a message.
// A violated property aborts, which libFuzzer reports as a crash.
//
//===----------------------------------------------------------------------===//

#include "../xfmr-serve/Protocol.h"

#include "xfmr/runtime/Tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace xfmr::rt;
using namespace xfmr::serve;

namespace {

const Tokenizer &smolTokenizer() {
  static std::unique_ptr<Tokenizer> tokenizer = [] {
    Expected<std::unique_ptr<Tokenizer>> t =
        Tokenizer::fromFile(XFMR_SMOLLM2_TOKENIZER);
    if (!t) {
      std::fprintf(stderr, "xfmr-serve-fuzzer: %s\n", t.error().c_str());
      std::abort();
    }
    return t.take();
  }();
  return *tokenizer;
}

void require(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "xfmr-serve-fuzzer: violated: %s\n", what);
    std::abort();
  }
}

bool validUtf8(const std::string &s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80         ? 1
               : (c >> 5) == 6  ? 2
               : (c >> 4) == 14 ? 3
               : (c >> 3) == 30 ? 4
                                : 0;
    if (n == 0 || i + n > s.size())
      return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
        (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

void checkDecode(const Tokenizer &t, const std::vector<int64_t> &ids) {
  for (bool skip : {true, false}) {
    std::string whole = t.decode(ids, skip);
    require(validUtf8(whole), "decode() gives valid UTF-8");
    DecodeStream stream(t, skip);
    std::string joined;
    for (int64_t id : ids) {
      std::string piece = stream.step(id);
      require(validUtf8(piece), "every DecodeStream piece is valid UTF-8");
      joined += piece;
    }
    std::string rest = stream.flush();
    require(validUtf8(rest), "DecodeStream::flush gives valid UTF-8");
    joined += rest;
    require(joined == whole, "DecodeStream pieces concatenate to decode()");
  }
}

void fuzzRequest(const std::string &body, bool chat) {
  GenerationRequest g;
  std::optional<ApiError> e = parseGenerationRequest(
      body, chat ? Endpoint::ChatCompletions : Endpoint::Completions, 49152, g);
  if (e) {
    require(e->status >= 400 && e->status < 500, "a refused request is a 4xx");
    require(!e->message.empty(), "a refused request has a message");
    require(!errorBody(*e).empty(), "the error body serialises");
    return;
  }
  require(chat ? g.messages.is_array() && !g.messages.empty()
               : g.promptText.has_value() || !g.promptIds.empty(),
          "an accepted request has a prompt");
  for (int64_t id : g.promptIds)
    require(id >= 0 && id < 49152, "prompt ids are in the vocabulary");
  require(!g.maxTokens || *g.maxTokens >= 1, "max_tokens >= 1");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  std::string rest(reinterpret_cast<const char *>(data) + 1, size - 1);
  switch (data[0] % 4) {
  case 0:
    fuzzRequest(rest, data[0] & 4);
    break;
  case 1: {
    const Tokenizer &t = smolTokenizer();
    for (bool special : {true, false}) {
      std::vector<int64_t> ids = t.encode(rest, special);
      for (int64_t id : ids)
        require(id >= 0 && id < t.vocabSize(),
                "encoded ids are in the vocabulary");
      checkDecode(t, ids);
    }
    break;
  }
  case 2: {
    const Tokenizer &t = smolTokenizer();
    std::vector<int64_t> ids;
    for (size_t i = 0; i + 1 < rest.size(); i += 2)
      ids.push_back(
          (static_cast<uint8_t>(rest[i]) << 8 |
           static_cast<uint8_t>(rest[i + 1])) %
          (t.vocabSize() + 16)); // a few ids outside the vocabulary too
    checkDecode(t, ids);
    break;
  }
  case 3: {
    Expected<std::unique_ptr<Tokenizer>> t =
        Tokenizer::fromJson(rest, "fuzz.json");
    if (!t)
      require(!t.error().empty(), "a refused tokenizer.json has a message");
    else
      checkDecode(**t, (*t)->encode("Hello, world!", true));
    break;
  }
  }
  return 0;
}
