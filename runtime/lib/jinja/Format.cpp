//===- Format.cpp - Python's printf-style string formatting ---------------===//
//
// Part of xfmr.
//
// `"fmt" % args` and Jinja2's `format` filter, as Python's str % does it:
// `%(key)s` mappings, the flags `-+ #0`, widths and precisions (also `*`),
// and the conversions s r d i u o x X e E f F g G c %. Numbers go through
// C's printf, whose output Python's % matches for these conversions; what
// differs (`%#o`, `%a`) is refused.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace xfmr::rt::jinja {

namespace {

/// One `%...` specification.
struct Spec {
  std::string key; ///< %(key)s
  std::string flags;
  int width = -1;
  int precision = -1;
  char conversion = 0;
};

class Formatter {
public:
  Formatter(const std::string &fmt, const Value &arg) : fmt(fmt), arg(arg) {
    if (arg.kind == Kind::Tuple)
      args = *arg.list;
    else
      args = {arg};
  }

  std::string run() {
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%') {
        out += fmt[i];
        continue;
      }
      Spec spec = parseSpec(i);
      out += spec.conversion == '%' ? "%" : convert(spec);
    }
    // Python forgives unused arguments only for a non-tuple, non-str value
    // with __getitem__ (it could be a mapping).
    bool mappingOrSequence = arg.kind == Kind::Dict || arg.kind == Kind::List;
    if (next < args.size() && !(usedKeys || (arg.kind != Kind::Tuple &&
                                             mappingOrSequence && next == 0)))
      fail("not all arguments converted during string formatting");
    return out;
  }

private:
  const std::string &fmt;
  const Value &arg;
  ValueList args;
  size_t next = 0;
  bool usedKeys = false;

  const Value &nextArg() {
    if (next >= args.size())
      fail("not enough arguments for format string");
    return args[next++];
  }

  int number(size_t &i) {
    if (fmt[i] == '*') {
      ++i;
      const Value &v = nextArg();
      if (!v.isIntegral())
        fail("* wants int");
      return static_cast<int>(v.kind == Kind::Bool ? v.boolean : v.integer);
    }
    int n = 0;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
      n = n * 10 + (fmt[i++] - '0');
    return n;
  }

  /// Parses the specification at fmt[i] == '%'; leaves i on its last
  /// character.
  Spec parseSpec(size_t &i) {
    Spec spec;
    ++i;
    if (i < fmt.size() && fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos)
        fail("incomplete format key");
      spec.key = fmt.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i]))
      spec.flags += fmt[i++];
    if (i < fmt.size() && (fmt[i] == '*' || (fmt[i] >= '0' && fmt[i] <= '9')))
      spec.width = number(i);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = number(i);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L'))
      ++i;
    if (i >= fmt.size())
      fail("incomplete format");
    spec.conversion = fmt[i];
    return spec;
  }

  const Value &argument(const Spec &spec) {
    if (spec.key.empty())
      return nextArg();
    if (arg.kind != Kind::Dict)
      fail("format requires a mapping");
    usedKeys = true;
    const Value *v = findKey(*arg.dict, spec.key);
    if (!v)
      fail("KeyError: '" + spec.key + "'");
    return *v;
  }

  static std::string pad(std::string text, const Spec &spec) {
    int64_t n = characters(text).size();
    if (spec.width <= n)
      return text;
    std::string fill(spec.width - n, ' ');
    return spec.flags.find('-') != std::string::npos ? text + fill
                                                     : fill + text;
  }

  static std::string printfSpec(const Spec &spec, const char *length,
                                char conversion) {
    std::string f = "%" + spec.flags;
    if (spec.width >= 0)
      f += std::to_string(spec.width);
    if (spec.precision >= 0)
      f += "." + std::to_string(spec.precision);
    return f + length + conversion;
  }

  std::string convert(const Spec &spec) {
    const Value &v = argument(spec);
    char c = spec.conversion;
    if (c == 's' || c == 'r') {
      std::string text = c == 's' ? toStr(v) : repr(v);
      if (spec.precision >= 0) {
        std::vector<std::string> chars = characters(text);
        if (static_cast<int64_t>(chars.size()) > spec.precision) {
          text.clear();
          for (int k = 0; k < spec.precision; ++k)
            text += chars[k];
        }
      }
      return pad(text, spec);
    }
    if (c == 'c')
      return pad(character(v), spec);
    if (std::strchr("diuoxX", c))
      return integerConversion(spec, v);
    if (std::strchr("eEfFgG", c))
      return floatConversion(spec, v);
    fail(std::string("unsupported format character '") + c + "'");
  }

  static std::string character(const Value &v) {
    if (v.isString() && characters(v.str).size() == 1)
      return v.str;
    if (v.isIntegral() && v.integer >= 0 && v.integer < 0x80)
      return std::string(1, static_cast<char>(v.integer));
    fail("%c of this value is not supported");
  }

  std::string integerConversion(const Spec &spec, const Value &v) {
    char c = spec.conversion == 'u' ? 'd' : spec.conversion;
    if (v.kind == Kind::Float && std::strchr("oxX", c))
      fail(std::string("%") + c + " format: an integer is required, not float");
    if (!v.isNumber())
      fail(std::string("%") + spec.conversion +
           " format: a real number is required, not " + typeName(v));
    if (c == 'o' && spec.flags.find('#') != std::string::npos)
      fail("%#o is not supported");
    long long i = v.kind == Kind::Float
                      ? static_cast<long long>(std::trunc(v.real))
                  : v.kind == Kind::Bool ? v.boolean
                                         : v.integer;
    char buf[512];
    std::snprintf(buf, sizeof buf, printfSpec(spec, "ll", c).c_str(), i);
    return buf;
  }

  std::string floatConversion(const Spec &spec, const Value &v) {
    if (!v.isNumber())
      fail(std::string("%") + spec.conversion +
           " format: a real number is required, not " + typeName(v));
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  printfSpec(spec, "", spec.conversion).c_str(), asDouble(v));
    return buf;
  }
};

} // namespace

std::string percentFormat(const std::string &fmt, const Value &arg) {
  return Formatter(fmt, arg).run();
}

} // namespace xfmr::rt::jinja
