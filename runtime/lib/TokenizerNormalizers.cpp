//===- TokenizerNormalizers.cpp - tokenizer.json normalizers --------------===//
//
// Part of xfmr.
//
// The normalizers of tokenizers/src/normalizers: each rewrites the text
// between added tokens before it is split into words. Character classes and
// normalization forms come from Utf8.cpp (utf8proc).
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#include <array>
#include <cstring>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Replaces the matches of `regex` in `text` by `content`.
std::string tok::replaceAll(const Regex &regex, const std::string &text,
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

namespace {

/// Keeps the characters `keep` accepts, mapping each through `map`; clears
/// `keepsStart` when the first one goes.
template <typename Keep, typename Map>
std::string filterMap(const std::string &text, bool &keepsStart, Keep keep,
                      Map map) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    bool first = i == 0;
    char32_t c = nextCodePoint(text, i);
    if (keep(c))
      appendUtf8(out, map(c));
    else if (first)
      keepsStart = false;
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
  void normalize(std::string &text, bool &keepsStart) const override {
    for (const auto &n : normalizers)
      n->normalize(text, keepsStart);
  }
};

class UnicodeNormalizer : public Normalizer {
public:
  explicit UnicodeNormalizer(NormalForm form) : form(form) {}
  void normalize(std::string &text, bool & /*keepsStart*/) const override {
    text = normalizeUnicode(text, form);
  }

private:
  NormalForm form;
};

class LowercaseNormalizer : public Normalizer {
public:
  void normalize(std::string &text, bool & /*keepsStart*/) const override {
    text = toLowercase(text);
  }
};

/// Strip: leading and/or trailing White_Space.
class StripNormalizer : public Normalizer {
public:
  bool left = true, right = true;
  void normalize(std::string &text, bool &keepsStart) const override {
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
    if (begin > 0)
      keepsStart = false;
    text = text.substr(begin, end - begin);
  }
};

class StripAccentsNormalizer : public Normalizer {
public:
  void normalize(std::string &text, bool &keepsStart) const override {
    text = filterMap(
        text, keepsStart, [](char32_t c) { return !isCombiningMark(c); },
        [](char32_t c) { return c; });
  }
};

class ReplaceNormalizer : public Normalizer {
public:
  ReplaceNormalizer(Regex regex, std::string content)
      : regex(std::move(regex)), content(std::move(content)) {}
  void normalize(std::string &text, bool &keepsStart) const override {
    // A match at the start moves it unless it is one character replaced by
    // something: tokenizers aligns the new text with the last character
    // replaced.
    std::vector<std::pair<size_t, size_t>> matches;
    regex.findAll(text, matches);
    if (!matches.empty() && matches[0].first == 0 && matches[0].second > 0 &&
        (content.empty() ||
         utf8Length(static_cast<unsigned char>(text[0])) < matches[0].second))
      keepsStart = false;
    text = replaceAll(regex, text, content);
  }

private:
  Regex regex;
  std::string content;
};

class PrependNormalizer : public Normalizer {
public:
  explicit PrependNormalizer(std::string prefix) : prefix(std::move(prefix)) {}
  void normalize(std::string &text, bool & /*keepsStart*/) const override {
    if (!text.empty())
      text.insert(0, prefix);
  }

private:
  std::string prefix;
};

/// BertNormalizer (tokenizers/src/normalizers/bert.rs).
///
/// Every step but the NFD of strip_accents is per character, and NFD only
/// reorders runs of combining characters (canonical class > 0), which are
/// all nonspacing marks, dropped anyway, in nearly every text. So the text
/// goes through one character at a time (ASCII without any Unicode
/// lookup); a text with a combining character of another category takes
/// the steps one after the other over the whole text.
class BertNormalizer : public Normalizer {
public:
  bool cleanText = true, chineseChars = true, stripAccents = true,
       lowercase = true;
  void normalize(std::string &text, bool &keepsStart) const override {
    std::string out;
    out.reserve(text.size() + text.size() / 8);
    bool fastKeepsStart = keepsStart;
    if (normalizeByCharacter(text, out, fastKeepsStart)) {
      text = std::move(out);
      keepsStart = fastKeepsStart;
      return;
    }
    normalizeByStep(text, keepsStart);
  }

private:
  /// The steps character by character into `out`; false when the text has
  /// a character whose NFD reordering could move what is kept.
  bool normalizeByCharacter(const std::string &text, std::string &out,
                            bool &keepsStart) const {
    for (size_t i = 0; i < text.size();) {
      bool first = i == 0;
      unsigned char b = static_cast<unsigned char>(text[i]);
      if (b < 0x80) {
        ++i;
        if (cleanText && (b < 0x20 || b == 0x7F)) {
          if (b != '\t' && b != '\n' && b != '\r') {
            // NUL and the other controls go.
            if (first)
              keepsStart = false;
            continue;
          }
          b = ' ';
        }
        if (lowercase && b >= 'A' && b <= 'Z')
          b += 32;
        out += static_cast<char>(b);
        continue;
      }
      char32_t c = nextCodePoint(text, i);
      if (!appendRemembered(c, out, first, keepsStart))
        return false;
    }
    return true;
  }

  /// What the steps made of a non-ASCII character lately, per thread and
  /// configuration: text repeats its characters, and the Unicode lookups
  /// of one (category, decomposition, case) were a third of the time of
  /// non-Latin text.
  struct Remembered {
    char32_t c = 0; // 0: empty (never a non-ASCII character)
    uint8_t config = 0, length = 0;
    bool clearsStart = false;
    char text[9];
  };
  static constexpr size_t kRememberedBits = 10;

  /// appendCharacter through the per-thread memo.
  bool appendRemembered(char32_t c, std::string &out, bool first,
                        bool &keepsStart) const {
    thread_local std::array<Remembered, size_t(1) << kRememberedBits> memo;
    uint8_t config = uint8_t(cleanText | chineseChars << 1 | stripAccents << 2 |
                             lowercase << 3);
    Remembered &r = memo[(c * 0x9E3779B1u) >> (32 - kRememberedBits)];
    if (r.c != c || r.config != config) {
      std::string text;
      bool clearsStart = false;
      if (!appendCharacter(c, text, clearsStart))
        return false;
      if (text.size() > sizeof r.text) {
        out += text;
        if (first && clearsStart)
          keepsStart = false;
        return true;
      }
      r.c = c;
      r.config = config;
      r.length = static_cast<uint8_t>(text.size());
      r.clearsStart = clearsStart;
      std::memcpy(r.text, text.data(), text.size());
    }
    if (first && r.clearsStart)
      keepsStart = false;
    out.append(r.text, r.length);
    return true;
  }

  /// The steps for one non-ASCII character; `clearsStart` is set when, as
  /// the first character, it would clear keepsStart. False when its
  /// decomposition has a combining character that is not a nonspacing
  /// mark.
  bool appendCharacter(char32_t c, std::string &out, bool &clearsStart) const {
    if (cleanText) {
      if (c == 0xFFFD || isBertControl(c)) {
        clearsStart = true;
        return true;
      }
      if (isRustWhitespace(c)) {
        out += ' ';
        return true;
      }
    }
    bool chinese = chineseChars && isChineseChar(c);
    if (chinese)
      out += ' ';
    bool firstIsMark = false;
    if (!appendStripped(c, out, firstIsMark))
      return false;
    clearsStart = firstIsMark && !chinese;
    if (chinese)
      out += ' ';
    return true;
  }

  /// strip_accents and lowercase of one character; `firstIsMark` says
  /// that the first character of its decomposition went. False when the
  /// decomposition has a combining character that is not a nonspacing
  /// mark.
  bool appendStripped(char32_t c, std::string &out, bool &firstIsMark) const {
    if (!stripAccents) {
      appendCase(c, out);
      return true;
    }
    char32_t parts[kMaxDecomposition];
    size_t n = decomposeCanonical(c, parts);
    if (n == 0)
      return false;
    for (size_t k = 0; k < n; ++k) {
      if (isNonspacingMark(parts[k])) {
        firstIsMark |= k == 0;
        continue;
      }
      if (hasCombiningClass(parts[k]))
        return false;
      appendCase(parts[k], out);
    }
    return true;
  }

  void appendCase(char32_t c, std::string &out) const {
    if (lowercase)
      appendLowercase(out, c);
    else
      appendUtf8(out, c);
  }

  /// The steps one after the other, each over the whole text.
  void normalizeByStep(std::string &text, bool &keepsStart) const {
    if (cleanText)
      text = filterMap(
          text, keepsStart,
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
          normalizeUnicode(text, NormalForm::NFD), keepsStart,
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
  void normalize(std::string &text, bool &keepsStart) const override {
    text = filterMap(
        text, keepsStart,
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
  void normalize(std::string &text, bool & /*keepsStart*/) const override {
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
    auto members = parseSequence<Normalizer>(reader, node, path, "normalizers",
                                             parseNormalizer);
    if (!members)
      return members.takeError();
    auto seq = std::make_unique<SequenceNormalizer>();
    seq->normalizers = members.take();
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
