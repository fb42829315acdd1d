//===- TokenizerPreTokenizers.cpp - tokenizer.json pre-tokenizers ---------===//
//
// Part of xfmr.
//
// The pre-tokenizers of tokenizers/src/pre_tokenizers, which split the
// normalized text into the words the model sees, on top of one splitting
// routine: NormalizedString::split with its five delimiter behaviors.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#include <algorithm>
#include <array>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

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
  thread_local std::vector<std::pair<size_t, size_t>> parts;
  parts.clear();
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
  releaseScratch(parts);
}

Expected<SplitBehavior> parseBehavior(const JsonReader &reader,
                                      const json &node, const std::string &path,
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
  // Kept per thread, `out` swapped with `pieces` (as ByteLevel's): growing
  // fresh vectors word by word was a fifth of a first pass through Split.
  thread_local std::vector<Piece> out;
  thread_local std::vector<Span> spans;
  out.clear();
  out.reserve(pieces.size() * 2);
  for (const Piece &piece : pieces) {
    spansOf(piece.text, spans);
    emitSplits(piece, spans, behavior, out);
  }
  pieces.swap(out);
  releaseScratch(out);
  releaseScratch(spans);
}

} // namespace

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

  ByteLevelPreTokenizer() {
    for (int b = 0; b < 256; ++b) {
      const std::string &c = byteLevelChar(static_cast<unsigned char>(b));
      mapped[size_t(b)].length = static_cast<uint8_t>(c.size());
      for (size_t k = 0; k < c.size() && k < 2; ++k)
        mapped[size_t(b)].bytes[k] = c[k];
    }
  }

  void preTokenize(std::vector<Piece> &pieces) const override {
    // The words go into a vector kept per thread, swapped with `pieces`;
    // the input's pieces are freed from it at the end.
    thread_local std::vector<Piece> out;
    out.clear();
    size_t bytes = 0;
    for (const Piece &p : pieces)
      bytes += p.text.size();
    out.reserve(bytes / 3 + pieces.size() + 4);
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    for (Piece &p : pieces) {
      if (addPrefixSpace && (p.text.empty() || p.text[0] != ' '))
        p.text.insert(0, 1, ' ');
      const std::string &text = p.text;
      // Isolated: every match and every gap between matches is a word.
      size_t prev = 0;
      auto emit = [&](size_t s, size_t e) {
        if (s == e)
          return;
        Piece &word = out.emplace_back();
        word.atStart = p.atStart && s == 0;
        // Mapped into a buffer, then copied once: resizing the string
        // itself zero-filled it first.
        char buffer[256];
        std::string_view from(text.data() + s, e - s);
        while (!from.empty()) {
          size_t take = std::min(from.size(), sizeof buffer / 2);
          char *dst = buffer;
          for (char c : from.substr(0, take)) {
            // Both bytes written, the second overwritten when unused: no
            // branch on the length for mixed text to mispredict.
            const MappedByte &m = mapped[static_cast<unsigned char>(c)];
            dst[0] = m.bytes[0];
            dst[1] = m.bytes[1];
            dst += m.length;
          }
          word.text.append(buffer, size_t(dst - buffer));
          from.remove_prefix(take);
        }
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
    pieces.swap(out);
    releaseScratch(out);
  }

private:
  /// The UTF-8 of each byte's stand-in (one or two bytes).
  struct MappedByte {
    char bytes[2] = {};
    uint8_t length = 0;
  };
  std::array<MappedByte, 256> mapped;
};

class SplitPreTokenizer : public PreTokenizer {
public:
  SplitPreTokenizer(Regex regex, SplitBehavior behavior, bool invert)
      : regex(std::move(regex)), behavior(behavior), invert(invert) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    splitEach(pieces, behavior,
              [&](std::string_view text, std::vector<Span> &spans) {
                regex.findAll(text, matches);
                spansFromMatches(text, matches, invert, spans);
              });
    releaseScratch(matches);
  }

private:
  Regex regex;
  SplitBehavior behavior;
  bool invert;
};

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
      bool startsWith =
          out.compare(0, replacementText.size(), replacementText) == 0;
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

/// BertPreTokenizer: split on whitespace (Removed), then isolate
/// punctuation (Isolated), in one pass over each piece.
class BertPreTokenizer : public PreTokenizer {
public:
  BertPreTokenizer() {
    for (char32_t c = 0; c < 0x80; ++c)
      asciiClass[c] = isRustWhitespace(c) ? kSpace
                      : isPunctuation(c)  ? kPunct
                                          : kOther;
  }
  void preTokenize(std::vector<Piece> &pieces) const override {
    // The words go into a vector kept per thread, swapped with `pieces`;
    // the input's pieces are freed from it at the end.
    thread_local std::vector<Piece> out;
    out.clear();
    size_t bytes = 0;
    for (const Piece &p : pieces)
      bytes += p.text.size();
    out.reserve(bytes / 4 + pieces.size() + 4);
    for (const Piece &piece : pieces) {
      const std::string &text = piece.text;
      size_t wordStart = 0;
      auto emit = [&](size_t s, size_t e) {
        if (s < e)
          out.push_back({text.substr(s, e - s), piece.atStart && s == 0});
      };
      for (size_t i = 0; i < text.size();) {
        size_t start = i;
        unsigned char b = static_cast<unsigned char>(text[i]);
        uint8_t cls;
        if (b < 0x80) {
          cls = asciiClass[b];
          ++i;
        } else {
          char32_t c = nextCodePoint(text, i);
          cls = isRustWhitespace(c) ? kSpace
                : isPunctuation(c)  ? kPunct
                                    : kOther;
        }
        if (cls == kOther)
          continue;
        emit(wordStart, start);
        if (cls == kPunct)
          emit(start, i);
        wordStart = i;
      }
      emit(wordStart, text.size());
    }
    pieces.swap(out);
    releaseScratch(out);
  }

private:
  enum : uint8_t { kOther, kSpace, kPunct };
  uint8_t asciiClass[0x80];
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
                  int cls = isRustWordChar(c) ? 1 : isRustWhitespace(c) ? 0 : 2;
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

} // namespace

Expected<PrependScheme> tok::parsePrependScheme(const JsonReader &reader,
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
  Expected<bool> addPrefix =
      reader.boolean(node, path, "add_prefix_space", true);
  if (!addPrefix)
    return addPrefix.takeError();
  if (!*addPrefix)
    scheme = PrependScheme::Never;
  return scheme;
}

Expected<std::unique_ptr<PreTokenizer>>
tok::parsePreTokenizer(const JsonReader &reader, const json &node,
                       const std::string &path) {
  using Result = std::unique_ptr<PreTokenizer>;
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    auto members = parseSequence<PreTokenizer>(
        reader, node, path, "pretokenizers", parsePreTokenizer);
    if (!members)
      return members.takeError();
    auto seq = std::make_unique<SequencePreTokenizer>();
    seq->steps = members.take();
    return std::unique_ptr<PreTokenizer>(std::move(seq));
  }
  if (t == "ByteLevel") {
    auto bl = std::make_unique<ByteLevelPreTokenizer>();
    Expected<bool> prefix =
        reader.boolean(node, path, "add_prefix_space", true);
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
