//===- Tokenizer.h - Hugging Face tokenizer.json in C++ ---------*- C++ -*-===//
//
// Part of xfmr.
//
// Reads a Hugging Face `tokenizer.json` (the `tokenizers` library's
// serialization) and encodes and decodes exactly as `tokenizers` does:
// added and special tokens, normalizers, pre-tokenizers (their regexes run
// through PCRE2 with JIT), the BPE (byte-level, or SentencePiece-style with
// byte fallback) and WordPiece models, post-processors and decoders.
//
// Text is UTF-8. Invalid UTF-8 in the input is replaced, per maximal
// ill-formed subsequence, by U+FFFD (as Python's bytes.decode("utf-8",
// "replace") and Rust's String::from_utf8_lossy do) before encoding; decode
// output is always valid UTF-8 (bytes that do not form a character become
// U+FFFD, as tokenizers' decoders do).
//
// A Tokenizer is immutable after load and safe to use from many threads at
// once (encode's word cache is internally synchronised).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_TOKENIZER_H
#define XFMR_RUNTIME_TOKENIZER_H

#include "xfmr/runtime/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

class Tokenizer {
public:
  /// Loads `path` (a tokenizer.json). Errors name the file and the JSON
  /// path of what is wrong or unsupported ("model.type 'Unigram' is not
  /// supported").
  static Expected<std::unique_ptr<Tokenizer>> fromFile(const std::string &path);
  /// The same from the file's text; `name` is what errors call it.
  static Expected<std::unique_ptr<Tokenizer>> fromJson(std::string_view json,
                                                       const std::string &name);
  virtual ~Tokenizer();

  /// `tokenizers`' Tokenizer.encode(text, add_special_tokens).ids.
  virtual std::vector<int64_t> encode(std::string_view text,
                                      bool addSpecialTokens = true) const = 0;
  /// `tokenizers`' Tokenizer.decode(ids, skip_special_tokens). Ids outside
  /// the vocabulary are skipped.
  virtual std::string decode(const std::vector<int64_t> &ids,
                             bool skipSpecialTokens = true) const = 0;

  /// The id of a token string (vocabulary or added token), if any.
  virtual std::optional<int64_t> tokenToId(std::string_view token) const = 0;
  /// The token string of an id ("" if none).
  virtual std::string idToToken(int64_t id) const = 0;
  /// One past the largest id (vocabulary and added tokens).
  virtual int64_t vocabSize() const = 0;
  /// Whether `id` is an added token marked special.
  virtual bool isSpecial(int64_t id) const = 0;

private:
  friend class DecodeStream;
  /// Whether the text of `id` may still change with the ids after it (a
  /// <0xXX> token under a ByteFallback decoder: a later byte that makes its
  /// run invalid UTF-8 turns the whole run into U+FFFD).
  virtual bool dependsOnNext(int64_t id) const;
  /// Whether decode() drops `id` (unknown, or special when skipping).
  virtual bool isSkipped(int64_t id, bool skipSpecialTokens) const;
};

/// Incremental detokenization for streaming: feed generated ids one at a
/// time and get the text they add. Text is released only up to the last
/// complete UTF-8 character whose decoding the following tokens can no
/// longer change (as vLLM's and TGI's incremental detokenizers do, by
/// decoding a short window of previous tokens and emitting the new suffix),
/// so the concatenation of everything returned equals
/// tokenizer.decode(all ids) and no piece ends inside a character.
class DecodeStream {
public:
  /// `prompt` (optional) gives the decoder the context the first generated
  /// tokens follow (a SentencePiece decoder strips a leading space only at
  /// the start of the text).
  DecodeStream(const Tokenizer &tokenizer, bool skipSpecialTokens = true,
               std::vector<int64_t> prompt = {});
  /// The text `id` completes (possibly empty).
  std::string step(int64_t id);
  /// Whatever is still held back (an incomplete character at the very end
  /// comes out as U+FFFD, as decode() would). Call it once, at the end.
  std::string flush();

private:
  /// decode() of ids[begin, end).
  std::string decodeRange(size_t begin, size_t end) const;
  /// Whether a decoding window may start at ids[pos]: the token is kept and
  /// has text of its own, so that what a decoder does to the first token
  /// of its input (Metaspace's and Strip's leading space) stays inside it.
  bool startsWindow(size_t pos) const;

  const Tokenizer &tokenizer;
  bool skipSpecial;
  std::vector<int64_t> ids;
  /// ids[prefixOffset, readOffset) decode to the text already returned at
  /// the end of the window; ids from readOffset on are not returned yet.
  size_t prefixOffset = 0, readOffset = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_TOKENIZER_H
