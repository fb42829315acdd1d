//===- TokenizerInternal.h - the tokenizer.json pipeline --------*- C++ -*-===//
//
// Part of xfmr.
//
// The stages of a Hugging Face tokenizer, each an interface with one
// implementation per `type` of tokenizer.json: normalizers rewrite a string,
// pre-tokenizers split it into words, a model turns a word into ids,
// post-processors add special tokens and decoders turn token strings back
// into text. Each follows the Rust source of `tokenizers` 0.23 (named in the
// comments); docs/tokenizer.md lists what is supported.
//
// Private to the tokenizer's files in runtime/lib.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_LIB_TOKENIZERINTERNAL_H
#define XFMR_RUNTIME_LIB_TOKENIZERINTERNAL_H

#include "xfmr/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xfmr::rt::tok {

using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// UTF-8 and Unicode (Utf8.cpp)
//===----------------------------------------------------------------------===//

/// The code point starting at s[i] of valid UTF-8; advances i past it.
char32_t nextCodePoint(std::string_view s, size_t &i);
/// Appends the UTF-8 encoding of `cp`.
void appendUtf8(std::string &out, char32_t cp);
/// The byte length of the UTF-8 character starting with `lead`.
inline size_t utf8Length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
/// Whether `s` is well-formed UTF-8.
bool isValidUtf8(std::string_view s);
/// `s` with every maximal ill-formed subsequence replaced by U+FFFD, as
/// Rust's String::from_utf8_lossy and Python's decode("utf-8", "replace").
std::string toValidUtf8(std::string_view s);
/// Whether `s` ends with U+FFFD.
bool endsWithReplacementChar(std::string_view s);

/// Rust's char::is_whitespace (the White_Space property).
bool isRustWhitespace(char32_t c);
/// Rust regex's \w: Alphabetic, marks, decimal digits, connector
/// punctuation and the joiners.
bool isRustWordChar(char32_t c);
/// Rust's char::is_numeric (Nd, Nl, No).
bool isNumeric(char32_t c);
/// ASCII punctuation or a Unicode P* category (BERT's and Punctuation's
/// test).
bool isPunctuation(char32_t c);
/// BERT's is_control: a C* category other than unassigned, except tab, CR
/// and LF.
bool isBertControl(char32_t c);
/// BERT's CJK ideograph blocks.
bool isChineseChar(char32_t c);
/// Unicode category Mn (BERT's accent stripping).
bool isNonspacingMark(char32_t c);
/// Mn, Mc or Me (the StripAccents normalizer).
bool isCombiningMark(char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
/// `s` (valid UTF-8) in the given normalization form (utf8proc).
std::string normalizeUnicode(std::string_view s, NormalForm form);
/// Rust's str::to_lowercase per character (without the final-sigma rule
/// tokenizers does not apply either).
std::string toLowercase(std::string_view s);
/// Appends the lowercase of one character (toLowercase's mapping).
void appendLowercase(std::string &out, char32_t cp);
/// The most characters decomposeCanonical writes.
constexpr size_t kMaxDecomposition = 8;
/// The full canonical decomposition of `c` (NFD of the character alone,
/// before canonical reordering) into `parts`; its length, or 0 if it does
/// not fit.
size_t decomposeCanonical(char32_t c, char32_t *parts);
/// Whether `c` has a canonical combining class other than 0 (NFD reorders
/// such characters among themselves).
bool hasCombiningClass(char32_t c);

/// The printable character GPT-2's byte-level alphabet maps byte `b` to.
const std::string &byteLevelChar(unsigned char b);
/// The byte a byte-level character stands for, or -1.
int byteLevelByte(char32_t c);

//===----------------------------------------------------------------------===//
// Regular expressions (Utf8.cpp)
//===----------------------------------------------------------------------===//

/// The pre-tokenizer patterns matched by a hand-written scanner
/// (TokenizerPatterns.cpp) rather than PCRE2.
enum class KnownPattern { None, Gpt2, Llama3, Qwen2 };
/// Which scanner matches exactly `pattern` (the string itself, not what it
/// means), or None.
KnownPattern knownPattern(std::string_view pattern);
/// The matches of a known pattern in valid UTF-8 `text`, exactly PCRE2's.
void scanKnownPattern(KnownPattern pattern, std::string_view text,
                      std::vector<std::pair<size_t, size_t>> &out);

/// A pattern of tokenizer.json (Oniguruma syntax, as `tokenizers` compiles
/// it) run by PCRE2 with UTF, UCP and JIT, or by a scanner when it is a
/// known one. Immutable and shareable between threads.
class Regex {
public:
  /// Compiles `pattern`; the error says where PCRE2 stopped. A known
  /// pattern gets its scanner unless `scanners` is false (its tests).
  static Expected<Regex> compile(const std::string &pattern,
                                 bool scanners = true);
  /// A pattern matching `literal` (tokenizers' String patterns).
  static Expected<Regex> literal(const std::string &literal);

  /// The matches (start, end) as Oniguruma's find_iter yields them: leftmost,
  /// non-overlapping, an empty match allowed except right where the
  /// previous match ended. `text` is valid UTF-8.
  void findAll(std::string_view text,
               std::vector<std::pair<size_t, size_t>> &out) const;

private:
  std::shared_ptr<void> code; // pcre2_code_8
  std::string literalText;    // set for literal patterns (matched by find)
  bool isLiteral = false;
  bool jitCompiled = false; // pcre2_jit_match applies
  KnownPattern known = KnownPattern::None;
};

//===----------------------------------------------------------------------===//
// JSON reading
//===----------------------------------------------------------------------===//

/// Reads one tokenizer.json; every error names the file and the JSON path.
class JsonReader {
public:
  explicit JsonReader(std::string file) : file(std::move(file)) {}

  Error fail(const std::string &path, const std::string &why) const {
    return Error(file + ": " + path + ": " + why);
  }
  Error unsupported(const std::string &path, const std::string &what) const {
    return Error(file + ": " + path + " '" + what + "' is not supported");
  }
  static std::string join(const std::string &path, const char *key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string index(const std::string &path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  /// obj[key] or null when absent (or obj is not an object).
  static const json *find(const json &obj, const char *key);
  /// The `type` string of a component.
  Expected<std::string> type(const json &obj, const std::string &path) const;
  Expected<std::string> string(const json &obj, const std::string &path,
                               const char *key) const;
  /// A string, or `fallback` when absent or null.
  Expected<std::string> optString(const json &obj, const std::string &path,
                                  const char *key,
                                  const std::string &fallback) const;
  /// Whether the member is present and not null.
  static bool has(const json &obj, const char *key);
  Expected<bool> boolean(const json &obj, const std::string &path,
                         const char *key, bool fallback) const;
  Expected<int64_t> integer(const json &obj, const std::string &path,
                            const char *key, int64_t fallback) const;
  Expected<int64_t> asInteger(const json &v, const std::string &path) const;
  Expected<const json *> array(const json &obj, const std::string &path,
                               const char *key) const;
  /// A one-character string (Metaspace's replacement, Strip's content).
  Expected<char32_t> character(const json &obj, const std::string &path,
                               const char *key) const;
  /// A {"String": s} or {"Regex": r} pattern.
  Expected<Regex> pattern(const json &obj, const std::string &path,
                          const char *key) const;

  /// Refuses a Sequence nested deeper than real files nest them (the
  /// parsers recurse once per level).
  Status checkNesting(const std::string &path) const;

  const std::string &fileName() const { return file; }

private:
  std::string file;
};

/// The members of a "Sequence" component (normalizers, pre-tokenizers,
/// decoders, post-processors): node[key], each parsed by `parse(reader,
/// element, path)`, after the nesting check.
template <typename T, typename Parse>
Expected<std::vector<std::unique_ptr<T>>>
parseSequence(const JsonReader &reader, const json &node,
              const std::string &path, const char *key, Parse parse) {
  if (Status s = reader.checkNesting(path); !s)
    return s.takeError();
  Expected<const json *> list = reader.array(node, path, key);
  if (!list)
    return list.takeError();
  std::vector<std::unique_ptr<T>> members;
  for (size_t i = 0; i < (*list)->size(); ++i) {
    Expected<std::unique_ptr<T>> member = parse(
        reader, (**list)[i], JsonReader::index(JsonReader::join(path, key), i));
    if (!member)
      return member.takeError();
    members.push_back(member.take());
  }
  return members;
}

//===----------------------------------------------------------------------===//
// Pipeline stages (TokenizerNormalizers.cpp, TokenizerPreTokenizers.cpp,
// TokenizerDecoders.cpp)
//===----------------------------------------------------------------------===//

/// Replaces the matches of `regex` in `text` by `content` (the Replace
/// normalizer and decoder).
std::string replaceAll(const Regex &regex, const std::string &text,
                       const std::string &content);

/// Where Metaspace puts its replacement character in front of a word.
enum class PrependScheme { Always, First, Never };
/// Metaspace's prepend_scheme (or the older add_prefix_space).
Expected<PrependScheme> parsePrependScheme(const JsonReader &reader,
                                           const json &node,
                                           const std::string &path);

/// Rewrites the text between added tokens (tokenizers/src/normalizers).
class Normalizer {
public:
  virtual ~Normalizer() = default;
  /// Rewrites `text`; clears `keepsStart` when it deletes the first
  /// character, after which the text no longer starts at the offset its
  /// first character had (Metaspace's prepend_scheme "first" asks).
  virtual void normalize(std::string &text, bool &keepsStart) const = 0;
  void normalize(std::string &text) const {
    bool keepsStart = true;
    normalize(text, keepsStart);
  }
};
Expected<std::unique_ptr<Normalizer>> parseNormalizer(const JsonReader &reader,
                                                      const json &node,
                                                      const std::string &path);

/// A word on its way through the pre-tokenizers.
struct Piece {
  std::string text;
  /// Whether it starts at offset 0 of the input (Metaspace's
  /// prepend_scheme "first").
  bool atStart = false;
};

/// Empties a vector kept per thread between calls (saving an allocation a
/// call), and frees it when one long text grew it past 1 MiB: a thread
/// keeps no document's worth of words.
template <typename T> void releaseScratch(std::vector<T> &v) {
  if (v.capacity() * sizeof(T) > (size_t(1) << 20))
    std::vector<T>().swap(v);
  else
    v.clear();
}

/// Splits pieces into words (tokenizers/src/pre_tokenizers).
class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  /// Replaces `pieces` by their splits; empty pieces are dropped.
  virtual void preTokenize(std::vector<Piece> &pieces) const = 0;
};
Expected<std::unique_ptr<PreTokenizer>>
parsePreTokenizer(const JsonReader &reader, const json &node,
                  const std::string &path);

/// Turns token strings back into text (tokenizers/src/decoders): each
/// decoder maps the list of strings to a new list, which is then joined.
class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void decodeChain(std::vector<std::string> &tokens) const = 0;
  /// Whether the text of a token may still change with the tokens after it
  /// (ByteFallback's <0xXX> runs); DecodeStream holds such tokens back.
  virtual bool dependsOnNext(std::string_view token) const {
    (void)token;
    return false;
  }
};
Expected<std::unique_ptr<Decoder>> parseDecoder(const JsonReader &reader,
                                                const json &node,
                                                const std::string &path);

/// Adds special tokens around a single sequence
/// (tokenizers/src/processors).
class PostProcessor {
public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int64_t> &ids) const = 0;
};
Expected<std::unique_ptr<PostProcessor>>
parsePostProcessor(const JsonReader &reader, const json &node,
                   const std::string &path);

//===----------------------------------------------------------------------===//
// Models (TokenizerModels.cpp)
//===----------------------------------------------------------------------===//

/// A vocabulary and the algorithm that splits a word into its tokens.
class Model {
public:
  virtual ~Model() = default;
  /// Appends the ids of `word` (non-empty) to `out`.
  virtual void tokenize(std::string_view word,
                        std::vector<int64_t> &out) const = 0;
  /// Appends the ids of each non-empty piece in turn; a model may overlap
  /// the memory accesses of several words.
  virtual void tokenizeAll(const std::vector<Piece> &pieces,
                           std::vector<int64_t> &out) const {
    for (const Piece &p : pieces)
      if (!p.text.empty())
        tokenize(p.text, out);
  }
  virtual std::optional<int64_t> tokenToId(std::string_view token) const = 0;
  /// The token of `id`, or null.
  virtual const std::string *idToToken(int64_t id) const = 0;
  /// The number of vocabulary entries (tokenizers' get_vocab_size, which
  /// numbers the added tokens that are not in the vocabulary).
  virtual size_t size() const = 0;
  /// One past the largest id.
  virtual int64_t idLimit() const = 0;
};
Expected<std::unique_ptr<Model>>
parseModel(const JsonReader &reader, const json &node, const std::string &path);

} // namespace xfmr::rt::tok

#endif // XFMR_RUNTIME_LIB_TOKENIZERINTERNAL_H
