//===- TokenizerPatterns.cpp - known pre-tokenizer regexes by hand -------===//
//
// Part of xfmr.
//
// The regexes that nearly every byte-level BPE splits its text with, matched
// by a scanner written for each instead of by PCRE2: GPT-2's (ByteLevel's own,
// SmolLM2, GPT-2, RoBERTa) and the Split patterns of Llama-3 and Qwen2. A
// first pass over unseen text spent a quarter of its time in PCRE2 (its JIT
// code plus a call per word); the scanners read each character once, ASCII
// through a 128-entry table.
//
// They give PCRE2's matches exactly. Regex::compile selects one only for the
// exact pattern string, and the classes they test (\p{L}, \p{N}, and \s with
// U+0085, see adaptPattern) are PCRE2's own, asked of PCRE2 for a block of
// 256 code points when text first needs it: PCRE2's Unicode version, not
// utf8proc's, decides which letters are new. TokenizerPatternTest compares
// each scanner with PCRE2 on random text.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <atomic>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <memory>
#include <mutex>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

namespace {

//===----------------------------------------------------------------------===//
// Character classes
//===----------------------------------------------------------------------===//

enum CharClass : uint8_t {
  kOther = 0,  // [^\s\p{L}\p{N}]
  kLetter = 1, // \p{L}
  kNumber = 2, // \p{N}
  kSpace = 3,  // \s (Oniguruma's, with U+0085)
  kEnd = 4,    // past the end of the text
};

/// The class of every code point, as PCRE2 with UTF and UCP sees it. Blocks
/// of 256 code points are filled on first use (PCRE2 has no public call for
/// a character's properties, so a regex of the four classes runs over the
/// block) and never change after: readers take them without a lock.
class CharClassTable {
public:
  static const CharClassTable &get() {
    static const CharClassTable table;
    return table;
  }

  /// Whether PCRE2 compiled the classes (it has Unicode support).
  bool ok() const { return code && matchData; }
  CharClass ascii(unsigned char b) const { return asciiClasses[b]; }
  CharClass of(char32_t c) const {
    if (c < 0x80)
      return asciiClasses[c];
    if (c > 0x10FFFF) // only from bytes that are not UTF-8
      return kOther;
    const CharClass *block = blocks[c >> 8].load(std::memory_order_acquire);
    if (!block)
      block = fill(c >> 8);
    return block[c & 0xFF];
  }

private:
  CharClassTable() {
    int errorCode = 0;
    PCRE2_SIZE errorOffset = 0;
    // One group per class: the match's last set group says which.
    static const char kClasses[] =
        R"((\p{L}+)|(\p{N}+)|([\s\x{85}]+)|([^\p{L}\p{N}\s\x{85}]+))";
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kClasses),
                         PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                         &errorCode, &errorOffset, nullptr);
    if (code)
      pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    matchData = pcre2_match_data_create(5, nullptr);
    const CharClass *first = fill(0);
    for (size_t b = 0; b < 0x80; ++b)
      asciiClasses[b] = first[b];
  }
  ~CharClassTable() {
    pcre2_match_data_free(matchData);
    pcre2_code_free(code);
  }

  /// Fills block `index` (code points index * 256 + 0..255).
  const CharClass *fill(size_t index) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (const CharClass *done = blocks[index].load(std::memory_order_relaxed))
      return done;
    auto block = std::make_unique<CharClass[]>(256);
    // The block's characters as UTF-8 (surrogates, which valid text never
    // holds, left out as kOther) and where each starts.
    std::string text;
    std::array<uint32_t, 257> startOf{};
    std::array<uint8_t, 256> present{};
    for (size_t k = 0; k < 256; ++k) {
      char32_t c = char32_t(index * 256 + k);
      block[k] = kOther;
      startOf[k] = uint32_t(text.size());
      if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
        continue;
      present[k] = 1;
      appendUtf8(text, c);
    }
    startOf[256] = uint32_t(text.size());
    size_t k = 0;
    for (size_t pos = 0; code && matchData && pos < text.size();) {
      int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                           text.size(), pos, PCRE2_NO_UTF_CHECK, matchData,
                           nullptr);
      if (rc < 2)
        break;
      const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(matchData);
      static constexpr CharClass kByGroup[] = {kLetter, kNumber, kSpace,
                                               kOther};
      CharClass cls = kByGroup[rc - 2];
      for (; k < 256 && startOf[k] < ov[1]; ++k)
        if (present[k] && startOf[k] >= ov[0])
          block[k] = cls;
      pos = ov[1];
    }
    const CharClass *result = block.get();
    storage.push_back(std::move(block));
    blocks[index].store(result, std::memory_order_release);
    return result;
  }

  std::array<CharClass, 0x80> asciiClasses{};
  mutable std::array<std::atomic<const CharClass *>, 0x1100> blocks{};
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<CharClass[]>> storage;
  pcre2_code *code = nullptr;
  pcre2_match_data *matchData = nullptr;
};

//===----------------------------------------------------------------------===//
// Scanning
//===----------------------------------------------------------------------===//

/// A character's byte length and class.
struct Char {
  size_t length;
  CharClass cls;
};

/// Reads a valid UTF-8 text a character at a time.
class Scanner {
public:
  explicit Scanner(std::string_view text)
      : p(reinterpret_cast<const unsigned char *>(text.data())),
        n(text.size()), classes(CharClassTable::get()) {}

  size_t size() const { return n; }
  unsigned char byte(size_t i) const { return i < n ? p[i] : 0; }

  Char at(size_t i) const {
    if (i >= n)
      return {0, kEnd};
    unsigned char lead = p[i];
    if (lead < 0x80)
      return {1, classes.ascii(lead)};
    size_t length = utf8Length(lead);
    if (length > n - i) // not valid UTF-8: stop at the end
      return {n - i, kOther};
    char32_t c;
    if (length == 2)
      c = (char32_t(lead & 0x1F) << 6) | (p[i + 1] & 0x3F);
    else if (length == 3)
      c = (char32_t(lead & 0x0F) << 12) | (char32_t(p[i + 1] & 0x3F) << 6) |
          (p[i + 2] & 0x3F);
    else
      c = (char32_t(lead & 0x07) << 18) | (char32_t(p[i + 1] & 0x3F) << 12) |
          (char32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
    return {length, classes.of(c)};
  }

  /// The end of the run of class `cls` from `i`.
  size_t skip(size_t i, CharClass cls) const {
    if (cls == kLetter)
      i = skipAsciiLetters(i);
    while (i < n) {
      if (p[i] < 0x80) {
        if (classes.ascii(p[i]) != cls)
          break;
        ++i;
        continue;
      }
      Char c = at(i);
      if (c.cls != cls)
        break;
      i += c.length;
    }
    return i;
  }

  /// Past the ASCII letters from `i`, 16 bytes at a time: a word's end is
  /// found in one step rather than by a loop over its bytes that
  /// mispredicts its exit. Stops at the first other byte (non-ASCII
  /// included) or with fewer than 16 bytes left; skip() goes on from there.
  size_t skipAsciiLetters(size_t i) const {
#ifdef __SSE2__
    const __m128i toLower = _mm_set1_epi8(0x20);
    // c | 0x20 in 'a'..'z', as a signed compare after a shift to -128.
    const __m128i shift = _mm_set1_epi8(static_cast<char>(0x80 - 'a'));
    const __m128i limit = _mm_set1_epi8(static_cast<char>(-128 + 26));
    while (n - i >= 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i));
      __m128i t = _mm_add_epi8(_mm_or_si128(v, toLower), shift);
      unsigned letters =
          unsigned(_mm_movemask_epi8(_mm_cmplt_epi8(t, limit)));
      if (letters != 0xFFFF)
        return i + size_t(__builtin_ctz(~letters));
      i += 16;
    }
#endif
    return i;
  }

  /// The end of the run of at most `most` characters of class `cls`.
  size_t skipAtMost(size_t i, CharClass cls, size_t most) const {
    for (size_t k = 0; k < most; ++k) {
      Char c = at(i);
      if (c.cls != cls)
        break;
      i += c.length;
    }
    return i;
  }

  /// The whitespace run from `i`: its end, where its last character starts,
  /// and the end of its last \r or \n (0 if none).
  struct SpaceRun {
    size_t end, lastStart, lineEnd;
    size_t count;
  };
  SpaceRun spaces(size_t i) const {
    SpaceRun run{i, i, 0, 0};
    while (run.end < n) {
      Char c = at(run.end);
      if (c.cls != kSpace)
        break;
      run.lastStart = run.end;
      if (p[run.end] == '\r' || p[run.end] == '\n')
        run.lineEnd = run.end + 1;
      run.end += c.length;
      ++run.count;
    }
    return run;
  }

  /// The end of `\s+(?!\S)|\s+` matched at `i` (a whitespace character):
  /// the run without its last character when that one is followed by a
  /// non-space and the run has more than one.
  static size_t spacesNotBeforeWord(const SpaceRun &run, size_t n) {
    return run.end < n && run.count > 1 ? run.lastStart : run.end;
  }

private:
  const unsigned char *p;
  size_t n;
  const CharClassTable &classes;
};

/// The length of GPT-2's `'s|'t|'re|'ve|'m|'ll|'d` at `i` (an apostrophe),
/// or 0; `caseless` for Llama-3's `(?i:...)`, where PCRE2 also takes U+017F
/// (long s) for s.
size_t contraction(const Scanner &s, size_t i, bool caseless) {
  unsigned char fold = caseless ? 0x20 : 0;
  unsigned char a = s.byte(i + 1) | fold, b = s.byte(i + 2) | fold;
  switch (a) {
  case 's':
  case 't':
  case 'm':
  case 'd':
    return 2;
  case 'r':
  case 'v':
    return b == 'e' ? 3 : 0;
  case 'l':
    return b == 'l' ? 3 : 0;
  default:
    break;
  }
  if (caseless && s.byte(i + 1) == 0xC5 && s.byte(i + 2) == 0xBF)
    return 3;
  return 0;
}

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
void scanGpt2(std::string_view text, std::vector<std::pair<size_t, size_t>> &out) {
  Scanner s(text);
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    size_t end;
    unsigned char lead = s.byte(i);
    size_t length = lead == '\'' ? contraction(s, i, false) : 0;
    if (length) {
      end = i + length;
    } else {
      Char c = s.at(i);
      size_t from = i;
      CharClass cls = c.cls;
      if (lead == ' ') {
        // ` ?` joins a space to a word of any class but whitespace.
        CharClass next = s.at(i + 1).cls;
        if (next != kSpace && next != kEnd) {
          from = i + 1;
          cls = next;
        }
      }
      if (cls != kSpace)
        end = s.skip(from, cls);
      else
        end = Scanner::spacesNotBeforeWord(s.spaces(i), n);
    }
    out.emplace_back(i, end);
    i = end;
  }
}

/// Llama-3's `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
/// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, and
/// Qwen2's, the same with \p{N} alone (`digits` 1).
void scanLlama3(std::string_view text, size_t digits,
                std::vector<std::pair<size_t, size_t>> &out) {
  Scanner s(text);
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    size_t end;
    unsigned char lead = s.byte(i);
    size_t length = lead == '\'' ? contraction(s, i, true) : 0;
    Char c = s.at(i);
    if (length) {
      end = i + length;
    } else if (c.cls == kLetter) {
      end = s.skip(i, kLetter);
    } else if (c.cls == kNumber) {
      end = s.skipAtMost(i, kNumber, digits);
    } else if (Char next = s.at(i + c.length);
               next.cls == kLetter && lead != '\r' && lead != '\n') {
      // `[^\r\n\p{L}\p{N}]?\p{L}+`: one other character or space first.
      end = s.skip(i + c.length, kLetter);
    } else if (c.cls == kOther || (lead == ' ' && next.cls == kOther)) {
      end = s.skip(c.cls == kOther ? i : i + 1, kOther);
      while (end < n && (s.byte(end) == '\r' || s.byte(end) == '\n'))
        ++end;
    } else {
      Scanner::SpaceRun run = s.spaces(i);
      // `\s*[\r\n]+` backtracks to the run's last line break.
      end = run.lineEnd ? run.lineEnd : Scanner::spacesNotBeforeWord(run, n);
    }
    out.emplace_back(i, end);
    i = end;
  }
}

const char *const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char *const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char *const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

} // namespace

KnownPattern tok::knownPattern(std::string_view pattern) {
  KnownPattern known = pattern == kGpt2Pattern     ? KnownPattern::Gpt2
                       : pattern == kLlama3Pattern ? KnownPattern::Llama3
                       : pattern == kQwen2Pattern  ? KnownPattern::Qwen2
                                                   : KnownPattern::None;
  // Without the classes PCRE2 compiles the pattern, or says why not.
  if (known != KnownPattern::None && !CharClassTable::get().ok())
    return KnownPattern::None;
  return known;
}

void tok::scanKnownPattern(KnownPattern pattern, std::string_view text,
                           std::vector<std::pair<size_t, size_t>> &out) {
  out.clear();
  switch (pattern) {
  case KnownPattern::Gpt2:
    scanGpt2(text, out);
    break;
  case KnownPattern::Llama3:
    scanLlama3(text, 3, out);
    break;
  case KnownPattern::Qwen2:
    scanLlama3(text, 1, out);
    break;
  case KnownPattern::None:
    break;
  }
}
