//===- Lexer.cpp - Jinja2's lexer with trim_blocks and lstrip_blocks ------===//
//
// Part of xfmr.
//
// Follows jinja2/lexer.py (3.1) step by step, since whitespace is where
// renderings differ: newlines are normalised and one trailing newline
// dropped; `{%-`/`{{-`/`{#-` strip all whitespace before the tag and
// `-%}`/`-}}`/`-#}` all after it; trim_blocks drops the newline right after
// `%}` and `#}`; lstrip_blocks drops spaces and tabs between a line start
// and `{%` or `{#` (not `{{`), unless the tag is `{%+`.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

#include <cctype>
#include <cstdlib>

namespace xfmr::rt::jinja {

namespace {

/// Line/column of byte offsets. Tokens are made in source order, so each
/// lookup continues from the previous one.
struct Positions {
  const std::string &src;
  size_t pos = 0;
  Loc loc{1, 1};

  Loc at(size_t target) {
    if (target < pos) {
      pos = 0;
      loc = Loc{1, 1};
    }
    for (; pos < target && pos < src.size(); ++pos) {
      if (src[pos] == '\n') {
        ++loc.line;
        loc.column = 1;
      } else if ((static_cast<unsigned char>(src[pos]) & 0xc0) != 0x80) {
        ++loc.column;
      }
    }
    return loc;
  }
};

std::string normalizeNewlines(const std::string &source) {
  std::string out;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n')
        ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n')
    out.pop_back();
  return out;
}

/// Python's rstrip() of the text before a `{%-` tag.
std::string rstripText(const std::string &text) {
  return stripText(text, nullptr, false, true);
}

bool allPythonSpace(const std::string &text) {
  if (text.empty())
    return false;
  for (const std::string &ch : characters(text))
    if (!isPythonSpace(ch))
      return false;
  return true;
}

/// Skips Python whitespace (regex `\s*`) from `pos`.
size_t skipSpace(const std::string &s, size_t pos) {
  while (pos < s.size()) {
    std::string ch = characters(s.substr(pos, 4)).front();
    if (!isPythonSpace(ch))
      break;
    pos += ch.size();
  }
  return pos;
}

class Lexer {
public:
  explicit Lexer(const std::string &source)
      : src(normalizeNewlines(source)), positions{src} {}
  Lexer(const Lexer &) = delete;

  std::vector<Token> run() {
    while (pos < src.size())
      lexData();
    tokens.push_back(Token{Token::End, "", positions.at(src.size())});
    return std::move(tokens);
  }

private:
  std::string src;
  Positions positions;
  size_t pos = 0;
  bool lineStarting = true;
  std::vector<Token> tokens;

  void emit(Token::Type type, std::string text, size_t at) {
    tokens.push_back(Token{type, std::move(text), positions.at(at)});
  }

  /// The next `{{`, `{%` or `{#` at or after `from`.
  size_t findTag(size_t from) const {
    for (size_t i = from; i + 1 < src.size(); ++i)
      if (src[i] == '{' &&
          (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  /// Text up to the next tag, whitespace control applied, then the tag.
  void lexData() {
    size_t tag = findTag(pos);
    if (tag == std::string::npos) {
      emit(Token::Data, src.substr(pos), pos);
      lineStarting = src.back() == '\n';
      pos = src.size();
      return;
    }
    char kind = src[tag + 1];
    char sign = tag + 2 < src.size() ? src[tag + 2] : 0;
    std::string text = src.substr(pos, tag - pos);
    if (sign == '-') {
      text = rstripText(text);
    } else if (sign != '+' && kind != '{') {
      size_t lineStart = text.rfind('\n');
      lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
      if ((lineStart > 0 || lineStarting) &&
          allPythonSpace(text.substr(lineStart)))
        text.resize(lineStart);
    }
    if (!text.empty())
      emit(Token::Data, text, pos);
    size_t after = tag + 2 + (sign == '-' || sign == '+');
    if (kind == '#')
      lexComment(tag, after);
    else if (kind == '%' && lexRaw(tag, after))
      return;
    else
      lexTag(kind, tag, after);
  }

  /// After `}}`/`%}`/`#}` at `end` (the index after the two characters),
  /// with `minus` when the tag ends `-X}` and `plus` for `+%}`.
  void finishTag(size_t end, bool minus, bool plus, bool trimNewline) {
    if (minus)
      end = skipSpace(src, end);
    else if (!plus && trimNewline && end < src.size() && src[end] == '\n')
      ++end;
    lineStarting = end > 0 && src[end - 1] == '\n';
    pos = end;
  }

  void lexComment(size_t tag, size_t after) {
    size_t close = src.find("#}", after);
    if (close == std::string::npos)
      fail("Missing end of comment tag", positions.at(tag));
    bool minus = close > after && src[close - 1] == '-';
    bool plus = close > after && src[close - 1] == '+';
    finishTag(close + 2, minus, plus, true);
  }

  /// `{% raw %}...{% endraw %}`: the text between, as data.
  bool lexRaw(size_t tag, size_t after) {
    size_t p = skipSpace(src, after);
    if (src.compare(p, 3, "raw") != 0)
      return false;
    size_t q = skipSpace(src, p + 3);
    bool minus = src.compare(q, 3, "-%}") == 0;
    if (!minus && src.compare(q, 2, "%}") != 0)
      return false;
    size_t bodyStart = minus ? skipSpace(src, q + 3) : q + 2;
    for (size_t t = findTag(bodyStart); t != std::string::npos;
         t = findTag(t + 1)) {
      if (src[t + 1] != '%')
        continue;
      size_t a = t + 2;
      char sign = a < src.size() ? src[a] : 0;
      if (sign == '-' || sign == '+')
        ++a;
      a = skipSpace(src, a);
      if (src.compare(a, 6, "endraw") != 0)
        continue;
      std::string text = src.substr(bodyStart, t - bodyStart);
      if (sign == '-')
        text = rstripText(text);
      if (!text.empty())
        emit(Token::Data, text, bodyStart);
      size_t e = skipSpace(src, a + 6);
      bool endMinus = src.compare(e, 3, "-%}") == 0;
      bool endPlus = src.compare(e, 3, "+%}") == 0;
      if (endMinus || endPlus)
        ++e;
      if (src.compare(e, 2, "%}") != 0)
        fail("expected end of endraw tag", positions.at(e));
      finishTag(e + 2, endMinus, endPlus, true);
      return true;
    }
    fail("Missing end of raw directive", positions.at(tag));
  }

  /// The expression tokens of a `{{ }}` or `{% %}` tag, through its end.
  void lexTag(char kind, size_t tag, size_t after) {
    bool block = kind == '%';
    emit(block ? Token::BlockBegin : Token::VariableBegin, "", tag);
    const char *close = block ? "%}" : "}}";
    std::vector<char> brackets;
    size_t p = after;
    while (true) {
      p = skipSpace(src, p);
      if (p >= src.size())
        fail(std::string("unexpected end of template, expected '") + close +
                 "'",
             positions.at(p));
      if (brackets.empty()) {
        if (src.compare(p, 2, close) == 0) {
          emit(block ? Token::BlockEnd : Token::VariableEnd, "", p);
          finishTag(p + 2, false, false, block);
          return;
        }
        if ((src[p] == '-' || (block && src[p] == '+')) &&
            src.compare(p + 1, 2, close) == 0) {
          emit(block ? Token::BlockEnd : Token::VariableEnd, "", p);
          finishTag(p + 3, src[p] == '-', src[p] == '+', block);
          return;
        }
      }
      p = lexOne(p, brackets);
    }
  }

  /// One expression token at `p`; returns the position after it.
  size_t lexOne(size_t p, std::vector<char> &brackets) {
    unsigned char c = src[p];
    if (std::isdigit(c))
      return lexNumber(p);
    if (std::isalpha(c) || c == '_') {
      size_t e = p;
      while (
          e < src.size() &&
          (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_'))
        ++e;
      emit(Token::Name, src.substr(p, e - p), p);
      return e;
    }
    if (c == '\'' || c == '"')
      return lexString(p);
    return lexOperator(p, brackets);
  }

  size_t lexNumber(size_t p) {
    size_t e = p;
    auto digits = [&] {
      while (e < src.size() &&
             (std::isdigit(static_cast<unsigned char>(src[e])) ||
              (src[e] == '_' && e + 1 < src.size() &&
               std::isdigit(static_cast<unsigned char>(src[e + 1])))))
        ++e;
    };
    digits();
    bool isFloat = false;
    if (e + 1 < src.size() && src[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
      ++e;
      digits();
      isFloat = true;
    }
    if (e < src.size() && (src[e] == 'e' || src[e] == 'E')) {
      size_t x = e + 1;
      if (x < src.size() && (src[x] == '+' || src[x] == '-'))
        ++x;
      if (x < src.size() && std::isdigit(static_cast<unsigned char>(src[x]))) {
        e = x;
        digits();
        isFloat = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i)
      if (src[i] != '_')
        text += src[i];
    Token token{isFloat ? Token::Float : Token::Integer, text, positions.at(p)};
    if (isFloat)
      token.real = std::strtod(text.c_str(), nullptr);
    else
      token.integer = std::strtoll(text.c_str(), nullptr, 10);
    tokens.push_back(token);
    return e;
  }

  size_t lexString(size_t p) {
    char quote = src[p];
    std::string raw;
    size_t e = p + 1;
    for (; e < src.size() && src[e] != quote; ++e) {
      if (src[e] == '\\' && e + 1 < src.size())
        raw += src[e++];
      raw += src[e];
    }
    if (e >= src.size())
      fail("unexpected end of string literal", positions.at(p));
    emit(Token::String, decodeEscapes(raw, positions.at(p)), p);
    return e + 1;
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
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

  /// Python's "unicode-escape" decoding, as Jinja2 applies to literals.
  static std::string decodeEscapes(const std::string &raw, Loc loc) {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out += raw[i];
        continue;
      }
      char c = raw[++i];
      switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        std::string hex = raw.substr(i + 1, n);
        if (hex.size() != n ||
            hex.find_first_not_of("0123456789abcdefABCDEF") !=
                std::string::npos)
          fail("truncated \\" + std::string(1, c) + " escape", loc);
        appendUtf8(out, std::strtoul(hex.c_str(), nullptr, 16));
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = 0;
          size_t n = 0;
          for (; n < 3 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++n)
            cp = cp * 8 + (raw[i++] - '0');
          --i;
          appendUtf8(out, cp);
        } else if (c == 'N') {
          fail("\\N{...} escapes are not supported", loc);
        } else {
          out += '\\';
          out += c;
        }
      }
    }
    return out;
  }

  size_t lexOperator(size_t p, std::vector<char> &brackets) {
    static const char *const ops[] = {
        "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
        "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};
    for (const char *op : ops) {
      size_t n = std::char_traits<char>::length(op);
      if (src.compare(p, n, op) != 0)
        continue;
      trackBracket(op[0], p, brackets);
      emit(Token::Operator, op, p);
      return p + n;
    }
    fail(std::string("unexpected char '") + src[p] + "'", positions.at(p));
  }

  void trackBracket(char c, size_t p, std::vector<char> &brackets) {
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty())
        fail(std::string("unexpected '") + c + "'", positions.at(p));
      if (brackets.back() != c)
        fail(std::string("unexpected '") + c + "', expected '" +
                 brackets.back() + "'",
             positions.at(p));
      brackets.pop_back();
    }
  }
};

} // namespace

std::vector<Token> tokenize(const std::string &source) {
  return Lexer(source).run();
}

} // namespace xfmr::rt::jinja
