//===- TokenizerPatternTest.cpp - pre-tokenizer scanners against PCRE2 ----===//
//
// Part of xfmr.
//
// The hand-written scanners of GPT-2's, Llama-3's and Qwen2's pre-tokenizer
// regexes (runtime/lib/TokenizerPatterns.cpp) must give exactly PCRE2's
// matches of the same pattern: compared on random text built from the
// pieces where the patterns branch (apostrophes and contractions in both
// cases, long s, runs of Unicode spaces and line breaks, digits of other
// scripts, combining marks, emoji, invalid UTF-8 as the tokenizer replaces
// it), and on every code point next to a character of each class.
//
//===----------------------------------------------------------------------===//

#include "runtime/lib/TokenizerInternal.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

namespace {

const char *const kPatterns[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

/// Pieces of text where the patterns branch.
const char *const kAtoms[] = {
    "a", "Z", "hello", "\xC3\xA9", "\xCE\xB1\xCE\xB2", "\xD0\x96", "\xE4\xB8\xAD",
    "\xED\x95\x9C", "\xE0\xB8\x81\xE0\xB8\xB4", // Thai with a vowel mark
    "0", "7", "12345", "\xE0\xA5\xA6",          // Devanagari zero
    "\xD9\xA3",                                 // Arabic-Indic three
    "\xE2\x85\xA0",                             // Roman numeral one (Nl)
    "\xC2\xB2", "\xC2\xBD",                     // superscript two, one half
    "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve",
    "'M", "'LL", "'lL", "'D", "'x", "''", "'\xC5\xBF", // long s
    "\xE2\x84\xAA",                                    // Kelvin sign
    "\xE2\x80\x99",                                    // right quote
    " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\x0B", "\x0C",
    "\xC2\x85",     // U+0085
    "\xC2\xA0",     // no-break space
    "\xE1\x9A\x80", // ogham space
    "\xE2\x80\x80", "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9",
    "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80",
    "\xE1\xA0\x8E", // Mongolian vowel separator (no longer a space)
    "\xE2\x80\x8B", // zero-width space (Cf)
    "\xE2\x80\x8D", // zero-width joiner
    "\xCC\x81",     // combining acute (Mn)
    "\xE0\xA4\x83", // Devanagari visarga (Mc)
    "\xE2\x83\x9D", // combining enclosing circle (Me)
    "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", // emoji
    "\xEF\xBF\xBD",                                         // U+FFFD
    "\xF0\xB1\x8D\x90", // U+31350, CJK extension H (Unicode 15)
    "!", "?", ".", ",", "-", "(", ")", "_", "#", "...", "://", "$",
    "\xC2\xAB", // guillemet
};

std::vector<std::pair<size_t, size_t>> findAll(const Regex &re,
                                               std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  re.findAll(text, out);
  return out;
}

std::string hex(std::string_view s) {
  static const char *const kDigits = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

class TokenizerPatternTest : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    ASSERT_NE(knownPattern(GetParam()), KnownPattern::None);
    Expected<Regex> a = Regex::compile(GetParam());
    Expected<Regex> b = Regex::compile(GetParam(), /*scanners=*/false);
    ASSERT_TRUE(a.ok() && b.ok());
    scanner.emplace(a.take());
    pcre2.emplace(b.take());
  }

  /// Whether both give the same matches; reports the first difference and
  /// the text around it if not.
  bool same(std::string_view text) {
    auto want = findAll(*pcre2, text), got = findAll(*scanner, text);
    if (got == want)
      return true;
    size_t k = 0;
    while (k < got.size() && k < want.size() && got[k] == want[k])
      ++k;
    auto show = [](const auto &v, size_t k) {
      return k < v.size() ? "[" + std::to_string(v[k].first) + ", " +
                                std::to_string(v[k].second) + ")"
                          : std::string("none");
    };
    size_t at = k < want.size() ? want[k].first : text.size();
    size_t from = at < 16 ? 0 : at - 16;
    ADD_FAILURE() << "match " << k << ": scanner " << show(got, k)
                  << ", PCRE2 " << show(want, k) << "; text from byte "
                  << from << " (hex): " << hex(text.substr(from, 48));
    return false;
  }

  std::optional<Regex> scanner, pcre2;
};

TEST_P(TokenizerPatternTest, RandomText) {
  std::mt19937 rng(1234);
  constexpr size_t kAtomCount = sizeof kAtoms / sizeof kAtoms[0];
  for (int round = 0; round < 30000; ++round) {
    std::string text;
    size_t atoms = rng() % 24;
    for (size_t k = 0; k < atoms; ++k)
      text += kAtoms[rng() % kAtomCount];
    ASSERT_TRUE(isValidUtf8(text)) << "hex " << hex(text);
    if (!same(text))
      return;
  }
}

TEST_P(TokenizerPatternTest, RandomBytes) {
  std::mt19937 rng(99);
  // Bytes as the tokenizer sees them: invalid UTF-8 replaced by U+FFFD.
  const char kBytes[] = "aZ9' \t\r\n\x85\xA0\xC2\xC5\xBF\xE2\x80\xF0";
  for (int round = 0; round < 20000; ++round) {
    std::string raw;
    size_t length = rng() % 32;
    for (size_t k = 0; k < length; ++k)
      raw += rng() % 4 ? kBytes[rng() % (sizeof kBytes - 1)]
                       : static_cast<char>(rng() & 0xFF);
    if (!same(toValidUtf8(raw)))
      return;
  }
}

TEST_P(TokenizerPatternTest, NotUtf8StaysInBounds) {
  // Not what encode passes (it replaces ill-formed bytes first), and PCRE2
  // has no answer to compare with: the scanner must still cover the text
  // with contiguous matches, reading nothing past it.
  std::mt19937 rng(5);
  for (int round = 0; round < 20000; ++round) {
    std::string raw(rng() % 16, '\0');
    for (char &c : raw)
      c = static_cast<char>(rng() & 0xFF);
    std::vector<std::pair<size_t, size_t>> out;
    scanner->findAll(raw, out);
    size_t at = 0;
    for (auto [start, end] : out) {
      ASSERT_EQ(start, at) << "hex " << hex(raw);
      ASSERT_GT(end, start) << "hex " << hex(raw);
      at = end;
    }
    ASSERT_EQ(at, raw.size()) << "hex " << hex(raw);
  }
}

/// Every code point, each followed by a character of another class, so that
/// its own class shows in where a match ends.
TEST_P(TokenizerPatternTest, EveryCodePoint) {
  const char *const kNeighbours[] = {" ", "a", "1", "!", "'", "\n", "", "  "};
  size_t next = 0;
  for (char32_t block = 0; block < 0x110000; block += 0x1000) {
    std::string text;
    for (char32_t c = block; c < block + 0x1000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF)
        continue;
      appendUtf8(text, c);
      text += kNeighbours[next++ % 8];
    }
    if (!same(text))
      return;
  }
}

INSTANTIATE_TEST_SUITE_P(KnownPatterns, TokenizerPatternTest,
                         ::testing::ValuesIn(kPatterns));

TEST(TokenizerPatternTest, Utf8CheckAgreesWithReplacement) {
  // isValidUtf8 (the check before every encode) against toValidUtf8 (which
  // replaces what is ill-formed): text is valid when nothing is replaced.
  std::mt19937 rng(7);
  const unsigned char kBytes[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F,
                                  0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                                  0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1,
                                  0xF3, 0xF4, 0xF5, 0xFF};
  for (int round = 0; round < 200000; ++round) {
    std::string s(rng() % 40, 'a');
    for (char &c : s)
      if (rng() % 3)
        c = static_cast<char>(kBytes[rng() % sizeof kBytes]);
    ASSERT_EQ(isValidUtf8(s), toValidUtf8(s) == s) << "hex " << hex(s);
  }
}

TEST(TokenizerPatternTest, OnlyTheExactPattern) {
  // A pattern that means the same but is written otherwise goes to PCRE2.
  EXPECT_EQ(knownPattern(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+)"),
            KnownPattern::None);
  EXPECT_EQ(knownPattern(std::string(kPatterns[0]) + " "), KnownPattern::None);
  EXPECT_EQ(knownPattern(kPatterns[0]), KnownPattern::Gpt2);
  EXPECT_EQ(knownPattern(kPatterns[1]), KnownPattern::Llama3);
  EXPECT_EQ(knownPattern(kPatterns[2]), KnownPattern::Qwen2);
}

} // namespace
