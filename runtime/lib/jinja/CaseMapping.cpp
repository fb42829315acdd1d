//===- CaseMapping.cpp - Python's str case methods ------------------------===//
//
// Part of xfmr.
//
// str.upper(), lower(), title(), capitalize() and Jinja2's title filter for
// the scripts chat text mostly uses: ASCII, Latin-1, Latin Extended-A,
// Greek, basic Cyrillic and fullwidth letters, with Python's special cases
// ('ß' upper is "SS", title "Ss"; capital sigma lowers to final sigma at
// the end of a word), and text without case (CJK, Hangul, Arabic, Hebrew,
// Indic, Thai, punctuation, symbols, emoji) passed through. A character
// outside those tables, or a multi-character special case not listed here
// (ligatures, 'İ'), is an error: rendering it differently from Python would
// be silent.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

#include <cstdio>
#include <optional>

namespace xfmr::rt::jinja {

namespace {

using CodePoints = std::u32string;

uint32_t decode(const std::string &ch) {
  unsigned char c = ch[0];
  if (ch.size() == 1)
    return c;
  uint32_t cp = c & (0xff >> (ch.size() + 1));
  for (size_t i = 1; i < ch.size(); ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(ch[i]) & 0x3f);
  return cp;
}

void encode(uint32_t cp, std::string &out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

/// Characters without case in the ranges chat text uses.
bool caseless(uint32_t cp) {
  struct Range {
    uint32_t lo, hi;
  };
  static const Range ranges[] = {
      {0x80, 0xa9},     {0xab, 0xb4},       {0xb6, 0xb9},      {0xbb, 0xbf},
      {0xd7, 0xd7},     {0xf7, 0xf7},       {0x300, 0x344},    {0x346, 0x36f},
      {0x590, 0x5ff},   {0x600, 0x6ff},     {0x900, 0xdff},    {0xe00, 0xe7f},
      {0x2000, 0x215f}, {0x2190, 0x24b5},   {0x2500, 0x2bff},  {0x3000, 0x9fff},
      {0xac00, 0xd7af}, {0xfe30, 0xfe4f},   {0xff00, 0xff20},  {0xff3b, 0xff40},
      {0xff5b, 0xffef}, {0x1f000, 0x1faff}, {0x20000, 0x2ffff}};
  if (cp < 0x80)
    return !((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  for (const Range &r : ranges)
    if (cp >= r.lo && cp <= r.hi)
      return true;
  return false;
}

/// In a Latin Extended-A run of case pairs starting at `first` (the
/// capital), whether `cp` is the capital of its pair.
bool pairUpper(uint32_t cp, uint32_t first) { return (cp - first) % 2 == 0; }

struct Cased {
  bool upper;     ///< which case cp is
  uint32_t other; ///< the other case
};

/// Letters of the tables with a simple one-to-one case pair.
std::optional<Cased> simplePair(uint32_t cp) {
  if (cp < 0x80 && (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
    return Cased{cp < 'a', cp ^ 0x20};
  if (cp >= 0xc0 && cp <= 0xde && cp != 0xd7)
    return Cased{true, cp + 0x20};
  if (cp >= 0xe0 && cp <= 0xfe && cp != 0xf7)
    return Cased{false, cp - 0x20};
  if (cp == 0xff || cp == 0x178)
    return Cased{cp == 0x178, cp == 0xff ? 0x178u : 0xffu};
  auto pairs = [&](uint32_t lo, uint32_t hi,
                   uint32_t firstUpper) -> std::optional<Cased> {
    if (cp < lo || cp > hi)
      return std::nullopt;
    bool up = pairUpper(cp, firstUpper);
    return Cased{up, up ? cp + 1 : cp - 1};
  };
  for (auto r : {pairs(0x100, 0x12f, 0x100), pairs(0x132, 0x137, 0x132),
                 pairs(0x139, 0x148, 0x139), pairs(0x14a, 0x177, 0x14a),
                 pairs(0x179, 0x17e, 0x179)})
    if (r)
      return r;
  // Greek.
  if (cp == 0x386)
    return Cased{true, 0x3ac};
  if (cp == 0x3ac)
    return Cased{false, 0x386};
  if ((cp >= 0x388 && cp <= 0x38a) || cp == 0x38c)
    return Cased{true, cp == 0x38c ? 0x3ccu : cp + 0x25};
  if ((cp >= 0x3ad && cp <= 0x3af) || cp == 0x3cc)
    return Cased{false, cp == 0x3cc ? 0x38cu : cp - 0x25};
  if (cp == 0x38e || cp == 0x38f)
    return Cased{true, cp + 0x3f};
  if (cp == 0x3cd || cp == 0x3ce)
    return Cased{false, cp - 0x3f};
  if (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2 && cp != 0x3a3)
    return Cased{true, cp + 0x20};
  if (cp >= 0x3b1 && cp <= 0x3cb && cp != 0x3c2)
    return Cased{false, cp - 0x20};
  // Fullwidth Latin.
  if (cp >= 0xff21 && cp <= 0xff3a)
    return Cased{true, cp + 0x20};
  if (cp >= 0xff41 && cp <= 0xff5a)
    return Cased{false, cp - 0x20};
  // Basic Cyrillic.
  if (cp >= 0x400 && cp <= 0x42f)
    return Cased{true, cp + (cp < 0x410 ? 0x50 : 0x20)};
  if (cp >= 0x430 && cp <= 0x45f)
    return Cased{false, cp - (cp >= 0x450 ? 0x50 : 0x20)};
  return std::nullopt;
}

enum class Target { Upper, Lower, Title };

[[noreturn]] void unsupported(uint32_t cp, const char *what) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s of U+%04X is not supported", what,
                static_cast<unsigned>(cp));
  fail(buf);
}

/// The mapping of one character, as Python's full case mapping.
CodePoints mapChar(uint32_t cp, Target target) {
  const char *what = target == Target::Upper   ? "upper case"
                     : target == Target::Lower ? "lower case"
                                               : "title case";
  if (auto pair = simplePair(cp)) {
    bool wantUpper = target != Target::Lower;
    return CodePoints(1, pair->upper == wantUpper ? cp : pair->other);
  }
  if (caseless(cp))
    return CodePoints(1, cp);
  switch (cp) {
  case 0xdf: // ß
    return target == Target::Lower   ? U"\u00df"
           : target == Target::Upper ? U"SS"
                                     : U"Ss";
  case 0xb5: // µ
    return CodePoints(1, target == Target::Lower ? 0xb5 : 0x39c);
  case 0x131: // dotless i
    return CodePoints(1, target == Target::Lower ? 0x131 : 'I');
  case 0x17f: // long s
    return CodePoints(1, target == Target::Lower ? 0x17f : 'S');
  case 0x138: // kra
    return CodePoints(1, cp);
  case 0x3c2: // final sigma
    return CodePoints(1, target == Target::Lower ? 0x3c2 : 0x3a3);
  case 0x3a3: // capital sigma (lower case is decided by caseMap)
    return CodePoints(1, cp);
  default:
    break;
  }
  unsupported(cp, what);
}

/// Characters Unicode's Final_Sigma rule skips (Case_Ignorable), as far as
/// the tables go.
bool caseIgnorable(uint32_t cp) {
  return cp == '\'' || cp == '.' || cp == ':' || cp == '^' || cp == '`' ||
         cp == 0xad || cp == 0xb7 || cp == 0x2019 ||
         (cp >= 0x300 && cp <= 0x36f);
}

bool isCased(uint32_t cp) {
  return simplePair(cp) || cp == 0xdf || cp == 0xb5 || cp == 0x131 ||
         cp == 0x17f || cp == 0x138 || cp == 0x3c2 || cp == 0x3a3;
}

std::vector<uint32_t> codePoints(const std::string &s) {
  std::vector<uint32_t> out;
  for (const std::string &ch : characters(s))
    out.push_back(decode(ch));
  return out;
}

void append(std::string &out, const CodePoints &cps) {
  for (char32_t cp : cps)
    encode(cp, out);
}

} // namespace

/// Whether the capital sigma at `i` lowers to a final sigma: a cased letter
/// before it and none after it (skipping case-ignorable characters).
bool finalSigma(const std::vector<uint32_t> &cps, size_t i) {
  size_t before = i;
  while (before > 0 && caseIgnorable(cps[before - 1]))
    --before;
  size_t after = i + 1;
  while (after < cps.size() && caseIgnorable(cps[after]))
    ++after;
  return before > 0 && isCased(cps[before - 1]) &&
         !(after < cps.size() && isCased(cps[after]));
}

std::string caseMap(const std::string &s, CaseOp op) {
  std::vector<uint32_t> cps = codePoints(s);
  std::string out;
  bool prevCased = false; // str.title()
  bool wordStart = true;  // Jinja's title filter
  for (size_t i = 0; i < cps.size(); ++i) {
    uint32_t cp = cps[i];
    Target target = Target::Lower;
    switch (op) {
    case CaseOp::Upper:
      target = Target::Upper;
      break;
    case CaseOp::Lower:
      break;
    case CaseOp::Capitalize:
      target = i == 0 ? Target::Title : Target::Lower;
      break;
    case CaseOp::PythonTitle:
      target = prevCased ? Target::Lower : Target::Title;
      prevCased = isCased(cp);
      break;
    case CaseOp::JinjaTitle: {
      std::string ch;
      encode(cp, ch);
      bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
                 cp == '<' || isPythonSpace(ch);
      target = wordStart ? Target::Upper : Target::Lower;
      wordStart = sep;
      break;
    }
    }
    if (cp == 0x3a3 && target == Target::Lower)
      encode(finalSigma(cps, i) ? 0x3c2 : 0x3c3, out);
    else
      append(out, mapChar(cp, target));
  }
  return out;
}

} // namespace xfmr::rt::jinja
