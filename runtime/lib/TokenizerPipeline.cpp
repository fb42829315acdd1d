//===- TokenizerPipeline.cpp - normalizers, pre-tokenizers, decoders ------===//
//
// Part of xfmr.
//
// The components of tokenizer.json around the model, each after the Rust
// type of `tokenizers` 0.23 it reads (tokenizers/src/normalizers,
// pre_tokenizers, processors, decoders). The JSON is read without
// exceptions: every access is type-checked by JsonReader.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#include <algorithm>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

//===----------------------------------------------------------------------===//
// JsonReader
//===----------------------------------------------------------------------===//

const json *JsonReader::find(const json &obj, const char *key) {
  if (!obj.is_object())
    return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool JsonReader::has(const json &obj, const char *key) {
  const json *v = find(obj, key);
  return v && !v->is_null();
}

Expected<std::string> JsonReader::type(const json &obj,
                                       const std::string &path) const {
  if (!obj.is_object())
    return fail(path, std::string("expected an object, got ") +
                          obj.type_name());
  return string(obj, path, "type");
}

Expected<std::string> JsonReader::string(const json &obj,
                                         const std::string &path,
                                         const char *key) const {
  const json *v = find(obj, key);
  if (!v)
    return fail(join(path, key), "missing");
  if (!v->is_string())
    return fail(join(path, key),
                std::string("expected a string, got ") + v->type_name());
  return v->get_ref<const std::string &>();
}

Expected<std::string> JsonReader::optString(const json &obj,
                                            const std::string &path,
                                            const char *key,
                                            const std::string &fallback) const {
  if (!has(obj, key))
    return fallback;
  return string(obj, path, key);
}

Expected<bool> JsonReader::boolean(const json &obj, const std::string &path,
                                   const char *key, bool fallback) const {
  const json *v = find(obj, key);
  if (!v || v->is_null())
    return fallback;
  if (!v->is_boolean())
    return fail(join(path, key),
                std::string("expected a boolean, got ") + v->type_name());
  return v->get<bool>();
}

Expected<int64_t> JsonReader::asInteger(const json &v,
                                        const std::string &path) const {
  if (v.is_number_unsigned()) {
    auto u = v.get<json::number_unsigned_t>();
    if (u > static_cast<uint64_t>(INT64_MAX))
      return fail(path, "integer too large");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer())
    return static_cast<int64_t>(v.get<json::number_integer_t>());
  return fail(path, std::string("expected an integer, got ") + v.type_name());
}

Expected<int64_t> JsonReader::integer(const json &obj, const std::string &path,
                                      const char *key,
                                      int64_t fallback) const {
  const json *v = find(obj, key);
  if (!v || v->is_null())
    return fallback;
  return asInteger(*v, join(path, key));
}

Expected<const json *> JsonReader::array(const json &obj,
                                         const std::string &path,
                                         const char *key) const {
  const json *v = find(obj, key);
  if (!v)
    return fail(join(path, key), "missing");
  if (!v->is_array())
    return fail(join(path, key),
                std::string("expected an array, got ") + v->type_name());
  return v;
}

Expected<char32_t> JsonReader::character(const json &obj,
                                         const std::string &path,
                                         const char *key) const {
  Expected<std::string> s = string(obj, path, key);
  if (!s)
    return s.takeError();
  size_t i = 0;
  if (s->empty() || (nextCodePoint(*s, i), i != s->size()))
    return fail(join(path, key), "expected one character");
  i = 0;
  return nextCodePoint(*s, i);
}

Expected<Regex> JsonReader::pattern(const json &obj, const std::string &path,
                                    const char *key) const {
  std::string p = join(path, key);
  const json *v = find(obj, key);
  if (!v)
    return fail(p, "missing");
  if (!v->is_object() || v->size() != 1)
    return fail(p, "expected {\"String\": ...} or {\"Regex\": ...}");
  bool isString = has(*v, "String");
  Expected<std::string> text = string(*v, p, isString ? "String" : "Regex");
  if (!text)
    return text.takeError();
  Expected<Regex> re =
      isString ? Regex::literal(*text) : Regex::compile(*text);
  if (!re)
    return fail(p, re.error());
  return re;
}

//===----------------------------------------------------------------------===//
// Splitting (NormalizedString::split of tokenizers/src/tokenizer/normalizer.rs)
//===----------------------------------------------------------------------===//

namespace {

enum class SplitBehavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

/// A span of a piece and whether the pattern matched it.
struct Span {
  size_t start, end;
  bool match;
};

/// Spans covering `text` from the matches of a regex (Pattern for
/// SysRegex).
void spansFromMatches(std::string_view text,
                      const std::vector<std::pair<size_t, size_t>> &matches,
                      bool invert, std::vector<Span> &spans) {
  spans.clear();
  size_t prev = 0;
  for (auto [s, e] : matches) {
    if (prev != s)
      spans.push_back({prev, s, invert});
    spans.push_back({s, e, !invert});
    prev = e;
  }
  if (prev != text.size())
    spans.push_back({prev, text.size(), invert});
}

/// Spans from a character predicate: each matching character is its own
/// match (Pattern for Fn(char) -> bool).
template <typename Pred>
void spansFromPredicate(std::string_view text, Pred pred,
                        std::vector<Span> &spans) {
  spans.clear();
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    char32_t c = nextCodePoint(text, i);
    if (pred(c)) {
      if (last < start)
        spans.push_back({last, start, false});
      spans.push_back({start, i, true});
      last = i;
    }
  }
  if (last < text.size())
    spans.push_back({last, text.size(), false});
}

/// Appends the splits of `piece` along `spans` under `behavior`, dropping
/// empty ones.
void emitSplits(const Piece &piece, const std::vector<Span> &spans,
                SplitBehavior behavior, std::vector<Piece> &out) {
  std::vector<std::pair<size_t, size_t>> parts;
  parts.reserve(spans.size());
  switch (behavior) {
  case SplitBehavior::Isolated:
    for (const Span &s : spans)
      parts.emplace_back(s.start, s.end);
    break;
  case SplitBehavior::Removed:
    for (const Span &s : spans)
      if (!s.match)
        parts.emplace_back(s.start, s.end);
    break;
  case SplitBehavior::Contiguous: {
    bool previous = false;
    for (const Span &s : spans) {
      if (s.match == previous && !parts.empty())
        parts.back().second = s.end;
      else
        parts.emplace_back(s.start, s.end);
      previous = s.match;
    }
    break;
  }
  case SplitBehavior::MergedWithPrevious: {
    bool previous = false;
    for (const Span &s : spans) {
      if (s.match && !previous && !parts.empty())
        parts.back().second = s.end;
      else
        parts.emplace_back(s.start, s.end);
      previous = s.match;
    }
    break;
  }
  case SplitBehavior::MergedWithNext: {
    bool previous = false;
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->match && !previous && !parts.empty())
        parts.back().first = it->start;
      else
        parts.emplace_back(it->start, it->end);
      previous = it->match;
    }
    std::reverse(parts.begin(), parts.end());
    break;
  }
  }
  for (auto [s, e] : parts) {
    if (s == e)
      continue;
    out.push_back({piece.text.substr(s, e - s), piece.atStart && s == 0});
  }
}

Expected<SplitBehavior> parseBehavior(const JsonReader &reader,
                                      const json &node,
                                      const std::string &path,
                                      SplitBehavior fallback) {
  if (!JsonReader::has(node, "behavior"))
    return fallback;
  Expected<std::string> b = reader.string(node, path, "behavior");
  if (!b)
    return b.takeError();
  static const std::pair<const char *, SplitBehavior> names[] = {
      {"Removed", SplitBehavior::Removed},
      {"Isolated", SplitBehavior::Isolated},
      {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
      {"MergedWithNext", SplitBehavior::MergedWithNext},
      {"Contiguous", SplitBehavior::Contiguous}};
  for (auto &[name, value] : names)
    if (*b == name)
      return value;
  return reader.unsupported(JsonReader::join(path, "behavior"), *b);
}

/// Applies `split(piece, spans)` to every piece.
template <typename SpansFn>
void splitEach(std::vector<Piece> &pieces, SplitBehavior behavior,
               SpansFn spansOf) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  std::vector<Span> spans;
  for (const Piece &piece : pieces) {
    spansOf(piece.text, spans);
    emitSplits(piece, spans, behavior, out);
  }
  pieces = std::move(out);
}

/// Replaces the matches of `regex` in `text` by `content`.
std::string replaceAll(const Regex &regex, const std::string &text,
                       const std::string &content) {
  std::vector<std::pair<size_t, size_t>> matches;
  regex.findAll(text, matches);
  if (matches.empty())
    return text;
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  size_t prev = 0;
  for (auto [s, e] : matches) {
    out.append(text, prev, s - prev);
    out += content;
    prev = e;
  }
  out.append(text, prev, std::string::npos);
  return out;
}

/// Keeps the characters `keep` accepts, mapping each through `map`.
template <typename Keep, typename Map>
std::string filterMap(const std::string &text, Keep keep, Map map) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t c = nextCodePoint(text, i);
    if (keep(c))
      appendUtf8(out, map(c));
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

namespace {

class SequenceNormalizer : public Normalizer {
public:
  std::vector<std::unique_ptr<Normalizer>> normalizers;
  void normalize(std::string &text) const override {
    for (const auto &n : normalizers)
      n->normalize(text);
  }
};

class UnicodeNormalizer : public Normalizer {
public:
  explicit UnicodeNormalizer(NormalForm form) : form(form) {}
  void normalize(std::string &text) const override {
    text = normalizeUnicode(text, form);
  }

private:
  NormalForm form;
};

class LowercaseNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override {
    text = toLowercase(text);
  }
};

/// Strip: leading and/or trailing White_Space.
class StripNormalizer : public Normalizer {
public:
  bool left = true, right = true;
  void normalize(std::string &text) const override {
    size_t begin = 0, end = text.size();
    if (left) {
      for (size_t i = 0; i < text.size();) {
        size_t at = i;
        if (!isRustWhitespace(nextCodePoint(text, i))) {
          begin = at;
          break;
        }
        begin = i;
      }
    }
    if (right) {
      size_t i = begin, lastKept = begin;
      while (i < text.size()) {
        char32_t c = nextCodePoint(text, i);
        if (!isRustWhitespace(c))
          lastKept = i;
      }
      end = lastKept;
    }
    text = text.substr(begin, end - begin);
  }
};

class StripAccentsNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override {
    text = filterMap(
        text, [](char32_t c) { return !isCombiningMark(c); },
        [](char32_t c) { return c; });
  }
};

class ReplaceNormalizer : public Normalizer {
public:
  ReplaceNormalizer(Regex regex, std::string content)
      : regex(std::move(regex)), content(std::move(content)) {}
  void normalize(std::string &text) const override {
    text = replaceAll(regex, text, content);
  }

private:
  Regex regex;
  std::string content;
};

class PrependNormalizer : public Normalizer {
public:
  explicit PrependNormalizer(std::string prefix) : prefix(std::move(prefix)) {}
  void normalize(std::string &text) const override {
    if (!text.empty())
      text.insert(0, prefix);
  }

private:
  std::string prefix;
};

/// BertNormalizer (tokenizers/src/normalizers/bert.rs).
class BertNormalizer : public Normalizer {
public:
  bool cleanText = true, chineseChars = true, stripAccents = true,
       lowercase = true;
  void normalize(std::string &text) const override {
    if (cleanText)
      text = filterMap(
          text,
          [](char32_t c) { return c != 0 && c != 0xFFFD && !isBertControl(c); },
          [](char32_t c) {
            return c == '\t' || c == '\n' || c == '\r' || isRustWhitespace(c)
                       ? char32_t(' ')
                       : c;
          });
    if (chineseChars) {
      std::string out;
      out.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        size_t start = i;
        char32_t c = nextCodePoint(text, i);
        if (isChineseChar(c)) {
          out += ' ';
          out.append(text, start, i - start);
          out += ' ';
        } else {
          out.append(text, start, i - start);
        }
      }
      text = std::move(out);
    }
    if (stripAccents)
      text = filterMap(
          normalizeUnicode(text, NormalForm::NFD),
          [](char32_t c) { return !isNonspacingMark(c); },
          [](char32_t c) { return c; });
    if (lowercase)
      text = toLowercase(text);
  }
};

/// Nmt (tokenizers/src/normalizers/unicode.rs): drops control characters
/// and maps some separators to a space.
class NmtNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override {
    text = filterMap(
        text,
        [](char32_t c) {
          return !((c >= 1 && c <= 8) || c == 0xB || (c >= 0xE && c <= 0x1F) ||
                   c == 0x7F || c == 0x8F || c == 0x9F);
        },
        [](char32_t c) {
          bool space = c == 0x9 || c == 0xA || c == 0xC || c == 0xD ||
                       c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                       c == 0x2028 || c == 0x2029 || c == 0x2581 ||
                       c == 0xFEFF || c == 0xFFFD;
          return space ? char32_t(' ') : c;
        });
  }
};

/// ByteLevel normalizer: every byte as its byte-level character.
class ByteLevelNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override {
    std::string out;
    out.reserve(text.size() * 2);
    for (char c : text)
      out += byteLevelChar(static_cast<unsigned char>(c));
    text = std::move(out);
  }
};

} // namespace

Expected<std::unique_ptr<Normalizer>>
tok::parseNormalizer(const JsonReader &reader, const json &node,
                     const std::string &path) {
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    Expected<const json *> list = reader.array(node, path, "normalizers");
    if (!list)
      return list.takeError();
    auto seq = std::make_unique<SequenceNormalizer>();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      auto n = parseNormalizer(reader, (**list)[i],
                               JsonReader::index(path + ".normalizers", i));
      if (!n)
        return n.takeError();
      seq->normalizers.push_back(n.take());
    }
    return std::unique_ptr<Normalizer>(std::move(seq));
  }
  if (t == "NFC")
    return std::unique_ptr<Normalizer>(
        std::make_unique<UnicodeNormalizer>(NormalForm::NFC));
  if (t == "NFD")
    return std::unique_ptr<Normalizer>(
        std::make_unique<UnicodeNormalizer>(NormalForm::NFD));
  if (t == "NFKC")
    return std::unique_ptr<Normalizer>(
        std::make_unique<UnicodeNormalizer>(NormalForm::NFKC));
  if (t == "NFKD")
    return std::unique_ptr<Normalizer>(
        std::make_unique<UnicodeNormalizer>(NormalForm::NFKD));
  if (t == "Lowercase")
    return std::unique_ptr<Normalizer>(std::make_unique<LowercaseNormalizer>());
  if (t == "StripAccents")
    return std::unique_ptr<Normalizer>(
        std::make_unique<StripAccentsNormalizer>());
  if (t == "Nmt")
    return std::unique_ptr<Normalizer>(std::make_unique<NmtNormalizer>());
  if (t == "ByteLevel")
    return std::unique_ptr<Normalizer>(std::make_unique<ByteLevelNormalizer>());
  if (t == "Strip") {
    auto strip = std::make_unique<StripNormalizer>();
    Expected<bool> l = reader.boolean(node, path, "strip_left", true);
    Expected<bool> r = reader.boolean(node, path, "strip_right", true);
    if (!l)
      return l.takeError();
    if (!r)
      return r.takeError();
    strip->left = *l;
    strip->right = *r;
    return std::unique_ptr<Normalizer>(std::move(strip));
  }
  if (t == "Replace") {
    Expected<Regex> re = reader.pattern(node, path, "pattern");
    if (!re)
      return re.takeError();
    Expected<std::string> content = reader.string(node, path, "content");
    if (!content)
      return content.takeError();
    return std::unique_ptr<Normalizer>(
        std::make_unique<ReplaceNormalizer>(re.take(), content.take()));
  }
  if (t == "Prepend") {
    Expected<std::string> prefix = reader.string(node, path, "prepend");
    if (!prefix)
      return prefix.takeError();
    return std::unique_ptr<Normalizer>(
        std::make_unique<PrependNormalizer>(prefix.take()));
  }
  if (t == "BertNormalizer") {
    auto bert = std::make_unique<BertNormalizer>();
    Expected<bool> clean = reader.boolean(node, path, "clean_text", true);
    Expected<bool> chinese =
        reader.boolean(node, path, "handle_chinese_chars", true);
    Expected<bool> lower = reader.boolean(node, path, "lowercase", true);
    if (!clean)
      return clean.takeError();
    if (!chinese)
      return chinese.takeError();
    if (!lower)
      return lower.takeError();
    // strip_accents: null means "as lowercase".
    Expected<bool> strip = reader.boolean(node, path, "strip_accents", *lower);
    if (!strip)
      return strip.takeError();
    bert->cleanText = *clean;
    bert->chineseChars = *chinese;
    bert->lowercase = *lower;
    bert->stripAccents = *strip;
    return std::unique_ptr<Normalizer>(std::move(bert));
  }
  return reader.unsupported(JsonReader::join(path, "type"), t);
}

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

namespace {

class SequencePreTokenizer : public PreTokenizer {
public:
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void preTokenize(std::vector<Piece> &pieces) const override {
    for (const auto &s : steps)
      s->preTokenize(pieces);
  }
};

/// ByteLevel: an optional leading space, GPT-2's regex, then every byte as
/// its printable stand-in.
class ByteLevelPreTokenizer : public PreTokenizer {
public:
  bool addPrefixSpace = true;
  bool useRegex = true;
  std::optional<Regex> regex;

  void preTokenize(std::vector<Piece> &pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 8);
    std::vector<std::pair<size_t, size_t>> matches;
    for (Piece &p : pieces) {
      if (addPrefixSpace && (p.text.empty() || p.text[0] != ' '))
        p.text.insert(0, 1, ' ');
      const std::string &text = p.text;
      // Isolated: every match and every gap between matches is a word.
      size_t prev = 0;
      auto emit = [&](size_t s, size_t e) {
        if (s == e)
          return;
        Piece word;
        word.atStart = p.atStart && s == 0;
        word.text.reserve((e - s) * 2);
        for (size_t i = s; i < e; ++i) {
          unsigned char c = static_cast<unsigned char>(text[i]);
          if (c >= '!' && c <= '~')
            word.text += static_cast<char>(c); // printable ASCII: itself
          else
            word.text += byteLevelChar(c);
        }
        out.push_back(std::move(word));
      };
      if (useRegex) {
        regex->findAll(text, matches);
        for (auto [s, e] : matches) {
          emit(prev, s);
          emit(s, e);
          prev = e;
        }
      }
      emit(prev, text.size());
    }
    pieces = std::move(out);
  }
};

class SplitPreTokenizer : public PreTokenizer {
public:
  SplitPreTokenizer(Regex regex, SplitBehavior behavior, bool invert)
      : regex(std::move(regex)), behavior(behavior), invert(invert) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    splitEach(pieces, behavior,
              [&](std::string_view text, std::vector<Span> &spans) {
                regex.findAll(text, matches);
                spansFromMatches(text, matches, invert, spans);
              });
  }

private:
  Regex regex;
  SplitBehavior behavior;
  bool invert;
};

enum class PrependScheme { Always, First, Never };

/// Metaspace (tokenizers/src/pre_tokenizers/metaspace.rs).
class MetaspacePreTokenizer : public PreTokenizer {
public:
  char32_t replacement = 0x2581;
  std::string replacementText;
  PrependScheme scheme = PrependScheme::Always;
  bool split = true;

  void preTokenize(std::vector<Piece> &pieces) const override {
    for (Piece &p : pieces) {
      std::string out;
      out.reserve(p.text.size() + 8);
      for (char c : p.text) {
        if (c == ' ')
          out += replacementText;
        else
          out += c;
      }
      bool startsWith = out.compare(0, replacementText.size(),
                                    replacementText) == 0;
      if (!startsWith && (scheme == PrependScheme::Always ||
                          (scheme == PrependScheme::First && p.atStart)))
        out.insert(0, replacementText);
      p.text = std::move(out);
    }
    if (split)
      splitEach(pieces, SplitBehavior::MergedWithNext,
                [&](std::string_view text, std::vector<Span> &spans) {
                  spansFromPredicate(
                      text, [&](char32_t c) { return c == replacement; },
                      spans);
                });
  }
};

/// BertPreTokenizer: split on whitespace, isolate punctuation.
class BertPreTokenizer : public PreTokenizer {
public:
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, SplitBehavior::Removed,
              [](std::string_view text, std::vector<Span> &spans) {
                spansFromPredicate(text, isRustWhitespace, spans);
              });
    splitEach(pieces, SplitBehavior::Isolated,
              [](std::string_view text, std::vector<Span> &spans) {
                spansFromPredicate(text, isPunctuation, spans);
              });
  }
};

/// Whitespace: the runs of `\w+|[^\w\s]+` (Rust regex classes).
class WhitespacePreTokenizer : public PreTokenizer {
public:
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, SplitBehavior::Removed,
              [](std::string_view text, std::vector<Span> &spans) {
                spans.clear();
                // 0: whitespace (removed), 1: word, 2: other.
                int current = -1;
                for (size_t i = 0; i < text.size();) {
                  size_t start = i;
                  char32_t c = nextCodePoint(text, i);
                  int cls = isRustWordChar(c)     ? 1
                            : isRustWhitespace(c) ? 0
                                                  : 2;
                  if (cls == current && cls != 0) {
                    spans.back().end = i;
                    continue;
                  }
                  if (cls == 0 && current == 0) {
                    spans.back().end = i;
                    continue;
                  }
                  spans.push_back({start, i, cls == 0});
                  current = cls;
                }
              });
  }
};

class WhitespaceSplitPreTokenizer : public PreTokenizer {
public:
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, SplitBehavior::Removed,
              [](std::string_view text, std::vector<Span> &spans) {
                spansFromPredicate(text, isRustWhitespace, spans);
              });
  }
};

class CharDelimiterPreTokenizer : public PreTokenizer {
public:
  explicit CharDelimiterPreTokenizer(char32_t delimiter)
      : delimiter(delimiter) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, SplitBehavior::Removed,
              [&](std::string_view text, std::vector<Span> &spans) {
                spansFromPredicate(
                    text, [&](char32_t c) { return c == delimiter; }, spans);
              });
  }

private:
  char32_t delimiter;
};

class DigitsPreTokenizer : public PreTokenizer {
public:
  bool individual = false;
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces,
              individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous,
              [](std::string_view text, std::vector<Span> &spans) {
                spansFromPredicate(text, isNumeric, spans);
              });
  }
};

class PunctuationPreTokenizer : public PreTokenizer {
public:
  SplitBehavior behavior = SplitBehavior::Isolated;
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, behavior,
              [](std::string_view text, std::vector<Span> &spans) {
                spansFromPredicate(text, isPunctuation, spans);
              });
  }
};

const char *const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// The GPT-2 regex, compiled once.
Expected<Regex> gpt2Regex() {
  static const Expected<Regex> regex = Regex::compile(kGpt2Pattern);
  return regex;
}

Expected<PrependScheme> parsePrependScheme(const JsonReader &reader,
                                           const json &node,
                                           const std::string &path) {
  Expected<std::string> s =
      reader.optString(node, path, "prepend_scheme", "always");
  if (!s)
    return s.takeError();
  PrependScheme scheme;
  if (*s == "always")
    scheme = PrependScheme::Always;
  else if (*s == "first")
    scheme = PrependScheme::First;
  else if (*s == "never")
    scheme = PrependScheme::Never;
  else
    return reader.unsupported(JsonReader::join(path, "prepend_scheme"), *s);
  // Older files: add_prefix_space false means "never".
  Expected<bool> addPrefix = reader.boolean(node, path, "add_prefix_space", true);
  if (!addPrefix)
    return addPrefix.takeError();
  if (!*addPrefix)
    scheme = PrependScheme::Never;
  return scheme;
}

} // namespace

Expected<std::unique_ptr<PreTokenizer>>
tok::parsePreTokenizer(const JsonReader &reader, const json &node,
                       const std::string &path) {
  using Result = std::unique_ptr<PreTokenizer>;
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    Expected<const json *> list = reader.array(node, path, "pretokenizers");
    if (!list)
      return list.takeError();
    auto seq = std::make_unique<SequencePreTokenizer>();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      auto p = parsePreTokenizer(reader, (**list)[i],
                                 JsonReader::index(path + ".pretokenizers", i));
      if (!p)
        return p.takeError();
      seq->steps.push_back(p.take());
    }
    return Result(std::move(seq));
  }
  if (t == "ByteLevel") {
    auto bl = std::make_unique<ByteLevelPreTokenizer>();
    Expected<bool> prefix = reader.boolean(node, path, "add_prefix_space", true);
    Expected<bool> useRegex = reader.boolean(node, path, "use_regex", true);
    if (!prefix)
      return prefix.takeError();
    if (!useRegex)
      return useRegex.takeError();
    bl->addPrefixSpace = *prefix;
    bl->useRegex = *useRegex;
    if (bl->useRegex) {
      Expected<Regex> re = gpt2Regex();
      if (!re)
        return reader.fail(path, re.error());
      bl->regex = *re;
    }
    return Result(std::move(bl));
  }
  if (t == "Split") {
    Expected<Regex> re = reader.pattern(node, path, "pattern");
    if (!re)
      return re.takeError();
    Expected<SplitBehavior> behavior =
        parseBehavior(reader, node, path, SplitBehavior::Isolated);
    if (!behavior)
      return behavior.takeError();
    Expected<bool> invert = reader.boolean(node, path, "invert", false);
    if (!invert)
      return invert.takeError();
    return Result(
        std::make_unique<SplitPreTokenizer>(re.take(), *behavior, *invert));
  }
  if (t == "Metaspace") {
    auto ms = std::make_unique<MetaspacePreTokenizer>();
    Expected<char32_t> rep = reader.character(node, path, "replacement");
    if (!rep)
      return rep.takeError();
    Expected<PrependScheme> scheme = parsePrependScheme(reader, node, path);
    if (!scheme)
      return scheme.takeError();
    Expected<bool> split = reader.boolean(node, path, "split", true);
    if (!split)
      return split.takeError();
    ms->replacement = *rep;
    appendUtf8(ms->replacementText, *rep);
    ms->scheme = *scheme;
    ms->split = *split;
    return Result(std::move(ms));
  }
  if (t == "BertPreTokenizer")
    return Result(std::make_unique<BertPreTokenizer>());
  if (t == "Whitespace")
    return Result(std::make_unique<WhitespacePreTokenizer>());
  if (t == "WhitespaceSplit")
    return Result(std::make_unique<WhitespaceSplitPreTokenizer>());
  if (t == "CharDelimiterSplit") {
    Expected<char32_t> d = reader.character(node, path, "delimiter");
    if (!d)
      return d.takeError();
    return Result(std::make_unique<CharDelimiterPreTokenizer>(*d));
  }
  if (t == "Digits") {
    auto digits = std::make_unique<DigitsPreTokenizer>();
    Expected<bool> individual =
        reader.boolean(node, path, "individual_digits", false);
    if (!individual)
      return individual.takeError();
    digits->individual = *individual;
    return Result(std::move(digits));
  }
  if (t == "Punctuation") {
    auto punct = std::make_unique<PunctuationPreTokenizer>();
    Expected<SplitBehavior> behavior =
        parseBehavior(reader, node, path, SplitBehavior::Isolated);
    if (!behavior)
      return behavior.takeError();
    punct->behavior = *behavior;
    return Result(std::move(punct));
  }
  return reader.unsupported(JsonReader::join(path, "type"), t);
}

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

namespace {

class SequenceDecoder : public Decoder {
public:
  std::vector<std::unique_ptr<Decoder>> decoders;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (const auto &d : decoders)
      d->decodeChain(tokens);
  }
  bool dependsOnNext(std::string_view token) const override {
    for (const auto &d : decoders)
      if (d->dependsOnNext(token))
        return true;
    return false;
  }
};

/// ByteLevel: the bytes of all tokens, decoded as UTF-8 with replacement.
class ByteLevelDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string bytes;
    for (const std::string &t : tokens) {
      size_t mark = bytes.size();
      bool allBytes = true;
      for (size_t i = 0; i < t.size();) {
        int b = byteLevelByte(nextCodePoint(t, i));
        if (b < 0) {
          allBytes = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!allBytes) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, toValidUtf8(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
public:
  char32_t replacement = 0x2581;
  PrependScheme scheme = PrependScheme::Always;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string &t = tokens[k];
      std::string out;
      out.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        char32_t c = nextCodePoint(t, i);
        if (c != replacement)
          appendUtf8(out, c);
        else if (k != 0 || scheme == PrependScheme::Never)
          out += ' ';
      }
      tokens[k] = std::move(out);
    }
  }
};

/// The replacements of WordPiece's cleanup, applied in order.
std::string wordPieceCleanup(std::string s) {
  static const std::pair<const char *, const char *> rules[] = {
      {" .", "."},         {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},        {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"},       {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : rules) {
    std::string_view f(from);
    if (s.find(f) == std::string::npos)
      continue;
    std::string out;
    size_t prev = 0;
    for (size_t pos = s.find(f); pos != std::string::npos;
         pos = s.find(f, prev)) {
      out.append(s, prev, pos - prev);
      out += to;
      prev = pos + f.size();
    }
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }
  return s;
}

class WordPieceDecoder : public Decoder {
public:
  std::string prefix = "##";
  bool cleanup = true;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string &t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0)
          t.erase(0, prefix.size());
        else
          t.insert(0, 1, ' ');
      }
      if (cleanup)
        t = wordPieceCleanup(std::move(t));
    }
  }
};

/// The byte of a "<0xXX>" token, or -1.
int byteFallbackByte(std::string_view t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/// ByteFallback: runs of <0xXX> tokens become their UTF-8 text, or one
/// U+FFFD per byte when the run is not valid UTF-8.
class ByteFallbackDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t runTokens = 0;
    auto flushRun = [&] {
      if (!runTokens)
        return;
      if (isValidUtf8(run))
        out.push_back(run);
      else
        for (size_t i = 0; i < runTokens; ++i)
          out.emplace_back("\xEF\xBF\xBD");
      run.clear();
      runTokens = 0;
    };
    for (std::string &t : tokens) {
      int b = byteFallbackByte(t);
      if (b >= 0) {
        run += static_cast<char>(b);
        ++runTokens;
        continue;
      }
      flushRun();
      out.push_back(std::move(t));
    }
    flushRun();
    tokens = std::move(out);
  }
  bool dependsOnNext(std::string_view token) const override {
    return byteFallbackByte(token) >= 0;
  }
};

class FuseDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
  }
};

/// Strip: up to `start` leading and `stop` trailing `content` characters of
/// every token.
class StripDecoder : public Decoder {
public:
  char32_t content = ' ';
  int64_t start = 0, stop = 0;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens) {
      std::vector<char32_t> chars;
      for (size_t i = 0; i < t.size();)
        chars.push_back(nextCodePoint(t, i));
      size_t startCut = 0;
      for (size_t i = 0; i < chars.size() && int64_t(i) < start; ++i) {
        if (chars[i] != content)
          break;
        startCut = i + 1;
      }
      size_t stopCut = chars.size();
      for (int64_t i = 0; i < stop && size_t(i) < chars.size(); ++i) {
        size_t index = chars.size() - i - 1;
        if (chars[index] != content)
          break;
        stopCut = index;
      }
      std::string out;
      for (size_t i = startCut; i < stopCut; ++i)
        appendUtf8(out, chars[i]);
      t = std::move(out);
    }
  }
};

class ReplaceDecoder : public Decoder {
public:
  ReplaceDecoder(Regex regex, std::string content)
      : regex(std::move(regex)), content(std::move(content)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens)
      t = replaceAll(regex, t, content);
  }

private:
  Regex regex;
  std::string content;
};

/// BPEDecoder: the end-of-word suffix becomes a space, except in the last
/// token.
class BpeDecoder : public Decoder {
public:
  std::string suffix = "</w>";
  void decodeChain(std::vector<std::string> &tokens) const override {
    if (suffix.empty())
      return;
    for (size_t k = 0; k < tokens.size(); ++k) {
      const char *replacement = k + 1 == tokens.size() ? "" : " ";
      std::string &t = tokens[k];
      std::string out;
      size_t prev = 0;
      for (size_t pos = t.find(suffix); pos != std::string::npos;
           pos = t.find(suffix, prev)) {
        out.append(t, prev, pos - prev);
        out += replacement;
        prev = pos + suffix.size();
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }
};

} // namespace

Expected<std::unique_ptr<Decoder>> tok::parseDecoder(const JsonReader &reader,
                                                     const json &node,
                                                     const std::string &path) {
  using Result = std::unique_ptr<Decoder>;
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    Expected<const json *> list = reader.array(node, path, "decoders");
    if (!list)
      return list.takeError();
    auto seq = std::make_unique<SequenceDecoder>();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      auto d = parseDecoder(reader, (**list)[i],
                            JsonReader::index(path + ".decoders", i));
      if (!d)
        return d.takeError();
      seq->decoders.push_back(d.take());
    }
    return Result(std::move(seq));
  }
  if (t == "ByteLevel")
    return Result(std::make_unique<ByteLevelDecoder>());
  if (t == "Metaspace") {
    auto ms = std::make_unique<MetaspaceDecoder>();
    Expected<char32_t> rep = reader.character(node, path, "replacement");
    if (!rep)
      return rep.takeError();
    Expected<PrependScheme> scheme = parsePrependScheme(reader, node, path);
    if (!scheme)
      return scheme.takeError();
    ms->replacement = *rep;
    ms->scheme = *scheme;
    return Result(std::move(ms));
  }
  if (t == "WordPiece") {
    auto wp = std::make_unique<WordPieceDecoder>();
    Expected<std::string> prefix = reader.optString(node, path, "prefix", "##");
    Expected<bool> cleanup = reader.boolean(node, path, "cleanup", true);
    if (!prefix)
      return prefix.takeError();
    if (!cleanup)
      return cleanup.takeError();
    wp->prefix = *prefix;
    wp->cleanup = *cleanup;
    return Result(std::move(wp));
  }
  if (t == "ByteFallback")
    return Result(std::make_unique<ByteFallbackDecoder>());
  if (t == "Fuse")
    return Result(std::make_unique<FuseDecoder>());
  if (t == "Strip") {
    auto strip = std::make_unique<StripDecoder>();
    Expected<char32_t> content = reader.character(node, path, "content");
    Expected<int64_t> start = reader.integer(node, path, "start", 0);
    Expected<int64_t> stop = reader.integer(node, path, "stop", 0);
    if (!content)
      return content.takeError();
    if (!start)
      return start.takeError();
    if (!stop)
      return stop.takeError();
    strip->content = *content;
    strip->start = *start;
    strip->stop = *stop;
    return Result(std::move(strip));
  }
  if (t == "Replace") {
    Expected<Regex> re = reader.pattern(node, path, "pattern");
    if (!re)
      return re.takeError();
    Expected<std::string> content = reader.string(node, path, "content");
    if (!content)
      return content.takeError();
    return Result(std::make_unique<ReplaceDecoder>(re.take(), content.take()));
  }
  if (t == "BPEDecoder") {
    auto bpe = std::make_unique<BpeDecoder>();
    Expected<std::string> suffix = reader.optString(node, path, "suffix", "</w>");
    if (!suffix)
      return suffix.takeError();
    bpe->suffix = *suffix;
    return Result(std::move(bpe));
  }
  return reader.unsupported(JsonReader::join(path, "type"), t);
}

//===----------------------------------------------------------------------===//
// Post-processors
//===----------------------------------------------------------------------===//

namespace {

class SequenceProcessor : public PostProcessor {
public:
  std::vector<std::unique_ptr<PostProcessor>> processors;
  void process(std::vector<int64_t> &ids) const override {
    for (const auto &p : processors)
      p->process(ids);
  }
};

/// ByteLevel and RobertaProcessing's offset trimming touch only offsets.
class NoopProcessor : public PostProcessor {
public:
  void process(std::vector<int64_t> &) const override {}
};

/// Ids before and after the sequence (BertProcessing, RobertaProcessing and
/// the single template of TemplateProcessing).
class WrapProcessor : public PostProcessor {
public:
  std::vector<int64_t> before, after;
  void process(std::vector<int64_t> &ids) const override {
    ids.insert(ids.begin(), before.begin(), before.end());
    ids.insert(ids.end(), after.begin(), after.end());
  }
};

/// A [token, id] pair of BertProcessing/RobertaProcessing.
Expected<int64_t> pairId(const JsonReader &reader, const json &node,
                         const std::string &path, const char *key) {
  std::string p = JsonReader::join(path, key);
  const json *v = JsonReader::find(node, key);
  if (!v || !v->is_array() || v->size() != 2 || !(*v)[0].is_string())
    return reader.fail(p, "expected [token, id]");
  return reader.asInteger((*v)[1], p + "[1]");
}

/// The ids of one special token of a template ("special_tokens").
Expected<std::vector<int64_t>> templateIds(const JsonReader &reader,
                                           const json &node,
                                           const std::string &path,
                                           const std::string &name) {
  const json *specials = JsonReader::find(node, "special_tokens");
  std::string p = JsonReader::join(path, "special_tokens") + "." + name;
  const json *entry = specials ? JsonReader::find(*specials, name.c_str())
                               : nullptr;
  if (!entry)
    return reader.fail(p, "missing (used by the template)");
  Expected<const json *> ids = reader.array(*entry, p, "ids");
  if (!ids)
    return ids.takeError();
  std::vector<int64_t> out;
  for (size_t i = 0; i < (*ids)->size(); ++i) {
    Expected<int64_t> id = reader.asInteger((**ids)[i], JsonReader::index(p + ".ids", i));
    if (!id)
      return id.takeError();
    out.push_back(*id);
  }
  return out;
}

/// TemplateProcessing's single template: [{"SpecialToken": {"id": ...}},
/// {"Sequence": {"id": "A"}}, ...] or "[CLS]:0 $A:0 [SEP]:0".
Expected<std::unique_ptr<PostProcessor>>
parseTemplate(const JsonReader &reader, const json &node,
              const std::string &path) {
  auto wrap = std::make_unique<WrapProcessor>();
  std::string p = JsonReader::join(path, "single");
  const json *single = JsonReader::find(node, "single");
  if (!single)
    return reader.fail(p, "missing");
  // Each piece as (special token name or "" for the sequence).
  std::vector<std::string> pieces;
  auto addStringPiece = [&](const std::string &s) {
    std::string id = s.substr(0, s.find(':'));
    pieces.push_back(!id.empty() && id[0] == '$' ? "" : id);
  };
  if (single->is_string()) {
    const std::string &s = single->get_ref<const std::string &>();
    for (size_t start = 0; start <= s.size();) {
      size_t end = s.find(' ', start);
      if (end == std::string::npos)
        end = s.size();
      if (end > start)
        addStringPiece(s.substr(start, end - start));
      start = end + 1;
    }
  } else if (single->is_array()) {
    for (size_t i = 0; i < single->size(); ++i) {
      const json &piece = (*single)[i];
      std::string pp = JsonReader::index(p, i);
      if (piece.is_string()) {
        addStringPiece(piece.get_ref<const std::string &>());
      } else if (const json *st = JsonReader::find(piece, "SpecialToken")) {
        Expected<std::string> id = reader.string(*st, pp + ".SpecialToken", "id");
        if (!id)
          return id.takeError();
        pieces.push_back(*id);
      } else if (JsonReader::find(piece, "Sequence")) {
        pieces.push_back("");
      } else {
        return reader.fail(pp, "expected a SpecialToken or a Sequence");
      }
    }
  } else {
    return reader.fail(p, "expected an array");
  }
  bool afterSequence = false;
  for (const std::string &piece : pieces) {
    if (piece.empty()) {
      afterSequence = true;
      continue;
    }
    Expected<std::vector<int64_t>> ids = templateIds(reader, node, path, piece);
    if (!ids)
      return ids.takeError();
    auto &dst = afterSequence ? wrap->after : wrap->before;
    dst.insert(dst.end(), ids->begin(), ids->end());
  }
  return std::unique_ptr<PostProcessor>(std::move(wrap));
}

} // namespace

Expected<std::unique_ptr<PostProcessor>>
tok::parsePostProcessor(const JsonReader &reader, const json &node,
                        const std::string &path) {
  using Result = std::unique_ptr<PostProcessor>;
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    Expected<const json *> list = reader.array(node, path, "processors");
    if (!list)
      return list.takeError();
    auto seq = std::make_unique<SequenceProcessor>();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      auto pp = parsePostProcessor(reader, (**list)[i],
                                   JsonReader::index(path + ".processors", i));
      if (!pp)
        return pp.takeError();
      seq->processors.push_back(pp.take());
    }
    return Result(std::move(seq));
  }
  if (t == "ByteLevel")
    return Result(std::make_unique<NoopProcessor>());
  if (t == "BertProcessing" || t == "RobertaProcessing") {
    auto wrap = std::make_unique<WrapProcessor>();
    Expected<int64_t> cls = pairId(reader, node, path, "cls");
    if (!cls)
      return cls.takeError();
    Expected<int64_t> sep = pairId(reader, node, path, "sep");
    if (!sep)
      return sep.takeError();
    wrap->before.push_back(*cls);
    wrap->after.push_back(*sep);
    return Result(std::move(wrap));
  }
  if (t == "TemplateProcessing")
    return parseTemplate(reader, node, path);
  return reader.unsupported(JsonReader::join(path, "type"), t);
}
