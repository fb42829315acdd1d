//===- Utf8.cpp - UTF-8, Unicode classes and regexes of the tokenizer -----===//
//
// Part of xfmr.
//
// Character classes follow the Rust functions `tokenizers` calls
// (char::is_whitespace, the unicode_categories crate, regex's \w) with
// utf8proc's Unicode tables; normalization forms and lowercasing come from
// utf8proc, regexes from PCRE2.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <cstring>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

char32_t tok::nextCodePoint(std::string_view s, size_t &i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char lead = b(0);
  char32_t cp;
  size_t len = utf8Length(lead);
  if (len == 1)
    cp = lead;
  else if (len == 2)
    cp = (char32_t(lead & 0x1F) << 6) | (b(1) & 0x3F);
  else if (len == 3)
    cp = (char32_t(lead & 0x0F) << 12) | (char32_t(b(1) & 0x3F) << 6) |
         (b(2) & 0x3F);
  else
    cp = (char32_t(lead & 0x07) << 18) | (char32_t(b(1) & 0x3F) << 12) |
         (char32_t(b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  i += len;
  return cp;
}

void tok::appendUtf8(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The length of the well-formed character at s[i], or 0 when s[i] starts
/// an ill-formed subsequence; `bad` is then the length of its maximal
/// subpart (Unicode's "U+FFFD substitution of maximal subparts").
static size_t wellFormedLength(std::string_view s, size_t i, size_t &bad) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char lead = at(0);
  bad = 1;
  if (lead < 0x80)
    return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0)
      lo = 0xA0;
    else if (lead == 0xED)
      hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0)
      lo = 0x90;
    else if (lead == 0xF4)
      hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size())
      return 0;
    unsigned char c = at(k);
    bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok)
      return 0;
    bad = k + 1;
  }
  return len;
}

bool tok::isValidUtf8(std::string_view s) {
  // Every encode checks its text first: ASCII sixteen bytes at a time, a
  // character of other text without a call or a loop over its bytes.
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t n = s.size();
  auto continuation = [&](size_t k) { return (p[k] & 0xC0) == 0x80; };
  for (size_t i = 0; i < n;) {
    unsigned char lead = p[i];
    if (lead < 0x80) {
      for (; n - i >= 16; i += 16) {
        uint64_t a, b;
        std::memcpy(&a, p + i, 8);
        std::memcpy(&b, p + i + 8, 8);
        if ((a | b) & 0x8080808080808080ull)
          break;
      }
      while (i < n && p[i] < 0x80)
        ++i;
      continue;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
      if (n - i < 2 || !continuation(i + 1))
        return false;
      i += 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      if (n - i < 3 || !continuation(i + 1) || !continuation(i + 2))
        return false;
      // No overlong forms (E0 80..9F) and no surrogates (ED A0..BF).
      if ((lead == 0xE0 && p[i + 1] < 0xA0) ||
          (lead == 0xED && p[i + 1] > 0x9F))
        return false;
      i += 3;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      if (n - i < 4 || !continuation(i + 1) || !continuation(i + 2) ||
          !continuation(i + 3))
        return false;
      // No overlong forms (F0 80..8F), nothing past U+10FFFF (F4 90..).
      if ((lead == 0xF0 && p[i + 1] < 0x90) ||
          (lead == 0xF4 && p[i + 1] > 0x8F))
        return false;
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

std::string tok::toValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t bad;
    size_t len = wellFormedLength(s, i, bad);
    if (len) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

bool tok::endsWithReplacementChar(std::string_view s) {
  return s.size() >= 3 && s.substr(s.size() - 3) == "\xEF\xBF\xBD";
}

//===----------------------------------------------------------------------===//
// Character classes
//===----------------------------------------------------------------------===//

static utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool tok::isRustWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool tok::isRustWordChar(char32_t c) {
  if (c < 0x80)
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || c == '_';
  switch (category(c)) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    break;
  }
  // Join_Control and the Other_Alphabetic symbols (circled and squared
  // Latin letters).
  return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) ||
         (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
         (c >= 0x1F170 && c <= 0x1F189);
}

bool tok::isNumeric(char32_t c) {
  if (c < 0x80)
    return c >= '0' && c <= '9';
  utf8proc_category_t cat = category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
         cat == UTF8PROC_CATEGORY_NO;
}

bool tok::isPunctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
           (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  switch (category(c)) {
  case UTF8PROC_CATEGORY_PC:
  case UTF8PROC_CATEGORY_PD:
  case UTF8PROC_CATEGORY_PS:
  case UTF8PROC_CATEGORY_PE:
  case UTF8PROC_CATEGORY_PI:
  case UTF8PROC_CATEGORY_PF:
  case UTF8PROC_CATEGORY_PO:
    return true;
  default:
    return false;
  }
}

bool tok::isBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r')
    return false;
  switch (category(c)) {
  case UTF8PROC_CATEGORY_CC:
  case UTF8PROC_CATEGORY_CF:
  case UTF8PROC_CATEGORY_CO:
  case UTF8PROC_CATEGORY_CS:
    return true;
  default:
    return false;
  }
}

bool tok::isChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool tok::isNonspacingMark(char32_t c) {
  return c >= 0x300 && category(c) == UTF8PROC_CATEGORY_MN;
}

bool tok::isCombiningMark(char32_t c) {
  if (c < 0x300)
    return false;
  utf8proc_category_t cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
         cat == UTF8PROC_CATEGORY_ME;
}

//===----------------------------------------------------------------------===//
// Normalization and case
//===----------------------------------------------------------------------===//

std::string tok::normalizeUnicode(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (char c : s)
    ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii)
    return std::string(s);
  int options = UTF8PROC_STABLE;
  switch (form) {
  case NormalForm::NFC:
    options |= UTF8PROC_COMPOSE;
    break;
  case NormalForm::NFD:
    options |= UTF8PROC_DECOMPOSE;
    break;
  case NormalForm::NFKC:
    options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    break;
  case NormalForm::NFKD:
    options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    break;
  }
  utf8proc_uint8_t *out = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(s.data()),
                   static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    // Only on invalid UTF-8, which never gets here; keep the text.
    std::free(out);
    return std::string(s);
  }
  std::string result(reinterpret_cast<char *>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

size_t tok::decomposeCanonical(char32_t c, char32_t *parts) {
  utf8proc_int32_t buf[kMaxDecomposition];
  int boundClass = 0;
  utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c),
                                               buf, kMaxDecomposition,
                                               UTF8PROC_DECOMPOSE, &boundClass);
  if (n <= 0 || n > utf8proc_ssize_t(kMaxDecomposition))
    return 0;
  for (utf8proc_ssize_t k = 0; k < n; ++k)
    parts[k] = static_cast<char32_t>(buf[k]);
  return static_cast<size_t>(n);
}

bool tok::hasCombiningClass(char32_t c) {
  return c >= 0x300 && utf8proc_get_property(static_cast<utf8proc_int32_t>(c))
                               ->combining_class != 0;
}

void tok::appendLowercase(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  // The one unconditional multi-character lowercase mapping
  // (SpecialCasing.txt): İ -> i + combining dot above.
  if (cp == 0x130) {
    out += "i\xCC\x87";
    return;
  }
  appendUtf8(out, static_cast<char32_t>(
                      utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}

std::string tok::toLowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      ++i;
      continue;
    }
    appendLowercase(out, nextCodePoint(s, i));
  }
  return out;
}

//===----------------------------------------------------------------------===//
// GPT-2's byte-level alphabet
//===----------------------------------------------------------------------===//

namespace {
/// bytes_char() of tokenizers/src/pre_tokenizers/byte_level.rs: printable
/// bytes stand for themselves, the others for U+0100 onwards.
struct ByteLevelAlphabet {
  std::array<std::string, 256> chars;
  std::array<int16_t, 0x180> bytes;

  ByteLevelAlphabet() {
    bytes.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      appendUtf8(chars[b], cp);
      bytes[cp] = static_cast<int16_t>(b);
    }
  }
};
/// Built before main: the tokenizer maps every byte through it.
const ByteLevelAlphabet kAlphabet;
const ByteLevelAlphabet &alphabet() { return kAlphabet; }
} // namespace

const std::string &tok::byteLevelChar(unsigned char b) {
  return alphabet().chars[b];
}

int tok::byteLevelByte(char32_t c) {
  return c < 0x180 ? alphabet().bytes[c] : -1;
}

//===----------------------------------------------------------------------===//
// Regex
//===----------------------------------------------------------------------===//

/// Rewrites Oniguruma's \s (Unicode White_Space, which includes U+0085)
/// for PCRE2, whose \s leaves out U+0085.
static std::string adaptPattern(const std::string &pattern) {
  std::string out;
  bool inClass = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[i + 1];
      ++i;
      if (e == 's')
        out += inClass ? "\\s\\x{85}" : "[\\s\\x{85}]";
      else if (e == 'S' && !inClass)
        out += "[^\\s\\x{85}]";
      else
        out += {'\\', e};
      continue;
    }
    if (c == '[' && !inClass) {
      inClass = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']')
        out += pattern[++i];
      continue;
    }
    if (c == ']' && inClass)
      inClass = false;
    out += c;
  }
  return out;
}

Expected<Regex> Regex::compile(const std::string &pattern, bool scanners) {
  if (KnownPattern known = knownPattern(pattern);
      scanners && known != KnownPattern::None) {
    Regex regex;
    regex.known = known;
    return regex;
  }
  std::string adapted = adaptPattern(pattern);
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(adapted.data()),
                                   adapted.size(), PCRE2_UTF | PCRE2_UCP,
                                   &errorCode, &errorOffset, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(errorCode, buf, sizeof buf);
    return Error("regex '" + pattern +
                 "': " + reinterpret_cast<const char *>(buf));
  }
  // Without JIT (an unsupported CPU) PCRE2 interprets the pattern.
  bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  Regex regex;
  regex.jitCompiled = jit;
  regex.code = std::shared_ptr<void>(
      code, [](void *p) { pcre2_code_free(static_cast<pcre2_code *>(p)); });
  return regex;
}

Expected<Regex> Regex::literal(const std::string &literal) {
  if (literal.empty()) {
    // Oniguruma's empty pattern: an empty match at every character.
    return compile("");
  }
  Regex regex;
  regex.isLiteral = true;
  regex.literalText = literal;
  return regex;
}

void Regex::findAll(std::string_view text,
                    std::vector<std::pair<size_t, size_t>> &out) const {
  if (known != KnownPattern::None) {
    scanKnownPattern(known, text, out);
    return;
  }
  out.clear();
  if (isLiteral) {
    for (size_t pos = text.find(literalText); pos != std::string_view::npos;
         pos = text.find(literalText, pos + literalText.size()))
      out.emplace_back(pos, pos + literalText.size());
    return;
  }
  auto *re = static_cast<pcre2_code *>(code.get());
  // One match data per thread, for every pattern: only the whole match's
  // offsets are read (a pattern with groups returns 0, "ovector too
  // small", and still sets them), and an allocation per call was a tenth
  // of a byte-level pre-tokenizer's time.
  struct MatchData {
    pcre2_match_data *data = pcre2_match_data_create(1, nullptr);
    ~MatchData() { pcre2_match_data_free(data); }
  };
  thread_local MatchData perThread;
  pcre2_match_data *md = perThread.data;
  if (!md)
    return;
  const auto *subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  bool haveLast = false;
  size_t lastEnd = 0;
  while (pos <= text.size()) {
    // pcre2_jit_match skips pcre2_match's checks of its arguments, a
    // noticeable part of a call that matches one short word.
    int rc = jitCompiled ? pcre2_jit_match(re, subject, text.size(), pos,
                                           PCRE2_NO_UTF_CHECK, md, nullptr)
                         : pcre2_match(re, subject, text.size(), pos,
                                       PCRE2_NO_UTF_CHECK, md, nullptr);
    // The JIT stack (32 KiB) can run out where the interpreter, which
    // keeps its backtracking on the heap, does not.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(re, subject, text.size(), pos,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    if (rc < 0)
      break;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t start = ov[0], end = ov[1];
    if (start == end && haveLast && lastEnd == end) {
      // No empty match right after the previous one: step one character.
      pos += pos < text.size()
                 ? utf8Length(static_cast<unsigned char>(text[pos]))
                 : 1;
      continue;
    }
    out.emplace_back(start, end);
    pos = end;
    haveLast = true;
    lastEnd = end;
  }
}
