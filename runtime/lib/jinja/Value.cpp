//===- Value.cpp - Python semantics of template values --------------------===//
//
// Part of xfmr.
//
// What Python does with the values a chat template computes: truth, str()
// and repr(), equality and order, iteration, json.dumps. Printing follows
// CPython exactly where chat templates can observe it (float repr, string
// quoting), since a rendered prompt is compared byte for byte.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace xfmr::rt::jinja {

void fail(const std::string &message, Loc loc) { throw Failure{message, loc}; }

std::string typeName(const Value &v) {
  if (v.generator)
    return "generator";
  switch (v.kind) {
  case Kind::Undefined:
    return "Undefined";
  case Kind::None:
    return "NoneType";
  case Kind::Bool:
    return "bool";
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::String:
    return "str";
  case Kind::List:
    return "list";
  case Kind::Tuple:
    return "tuple";
  case Kind::Dict:
    return "dict";
  case Kind::Namespace:
    return "Namespace";
  case Kind::Callable:
    return "function";
  }
  return "object";
}

bool truthy(const Value &v) {
  switch (v.kind) {
  case Kind::Undefined:
  case Kind::None:
    return false;
  case Kind::Bool:
    return v.boolean;
  case Kind::Int:
    return v.integer != 0;
  case Kind::Float:
    return v.real != 0;
  case Kind::String:
    return !v.str.empty();
  case Kind::List:
  case Kind::Tuple:
    return v.generator || !v.list->empty();
  case Kind::Dict:
    return !v.dict->empty();
  case Kind::Namespace:
  case Kind::Callable:
    return true;
  }
  return false;
}

std::string floatRepr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d < 0 ? "-inf" : "inf";
  // The shortest digits that read back as `d`, as CPython's repr.
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  std::string digits;
  const char *p = buf;
  bool negative = *p == '-';
  if (negative)
    ++p;
  for (; *p && *p != 'e'; ++p)
    if (*p != '.')
      digits += *p;
  int exponent = std::atoi(p + 1);
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  std::string out = negative ? "-" : "";
  int n = digits.size();
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (n > 1)
      out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    return out + e;
  }
  if (exponent < 0)
    return out + "0." + std::string(-exponent - 1, '0') + digits;
  if (exponent + 1 >= n)
    return out + digits + std::string(exponent + 1 - n, '0') + ".0";
  return out + digits.substr(0, exponent + 1) + "." +
         digits.substr(exponent + 1);
}

/// Python's repr of a str: single quotes unless the text has a single quote
/// and no double quote.
static std::string stringRepr(const std::string &s) {
  bool hasSingle = s.find('\'') != std::string::npos;
  bool hasDouble = s.find('"') != std::string::npos;
  char quote = hasSingle && !hasDouble ? '"' : '\'';
  std::string out(1, quote);
  for (const std::string &ch : characters(s)) {
    unsigned char c = ch[0];
    if (ch.size() == 1 && c == static_cast<unsigned char>(quote))
      out += std::string("\\") + quote;
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (ch.size() == 1 && (c < 0x20 || c == 0x7f)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (ch == "\xc2\x85" || ch == "\xc2\xa0" ||
               (ch.size() == 2 && c == 0xc2 &&
                static_cast<unsigned char>(ch[1]) < 0xa0)) {
      // C1 controls and NBSP are not printable for Python's repr.
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x",
                    static_cast<unsigned char>(ch[1]));
      out += buf;
    } else if (ch == "\xe2\x80\xa8" || ch == "\xe2\x80\xa9") {
      out += ch == "\xe2\x80\xa8" ? "\\u2028" : "\\u2029";
    } else {
      out += ch;
    }
  }
  return out + quote;
}

std::string repr(const Value &v) {
  switch (v.kind) {
  case Kind::String:
    return stringRepr(v.str);
  case Kind::List:
  case Kind::Tuple: {
    // A range prints as range(a, b); a dict view as dict_items([...]).
    if (v.str.rfind("range(", 0) == 0)
      return v.str;
    if (!v.str.empty()) {
      Value plain = v;
      plain.str.clear();
      return v.str + "(" + repr(plain) + ")";
    }
    bool tuple = v.kind == Kind::Tuple;
    std::string out = tuple ? "(" : "[";
    for (size_t i = 0; i < v.list->size(); ++i)
      out += (i ? ", " : "") + repr((*v.list)[i]);
    if (tuple && v.list->size() == 1)
      out += ",";
    return out + (tuple ? ")" : "]");
  }
  case Kind::Dict: {
    if (!v.str.empty()) // the loop variable
      fail("printing '" + v.str + "' is not supported");
    std::string out = "{";
    for (size_t i = 0; i < v.dict->size(); ++i)
      out += (i ? ", " : "") + stringRepr((*v.dict)[i].first) + ": " +
             repr((*v.dict)[i].second);
    return out + "}";
  }
  case Kind::Undefined:
    return "Undefined";
  default:
    return toStr(v);
  }
}

std::string toStr(const Value &v) {
  switch (v.kind) {
  case Kind::Undefined:
    return "";
  case Kind::None:
    return "None";
  case Kind::Bool:
    return v.boolean ? "True" : "False";
  case Kind::Int:
    return std::to_string(v.integer);
  case Kind::Float:
    return floatRepr(v.real);
  case Kind::String:
    return v.str;
  case Kind::List:
  case Kind::Tuple:
    if (v.generator)
      fail("printing a generator is not supported");
    return repr(v);
  case Kind::Dict:
    return repr(v);
  case Kind::Namespace:
  case Kind::Callable:
    fail("printing a " + typeName(v) + " is not supported");
  }
  return "";
}

double asDouble(const Value &v) {
  switch (v.kind) {
  case Kind::Bool:
    return v.boolean;
  case Kind::Int:
    return static_cast<double>(v.integer);
  case Kind::Float:
    return v.real;
  default:
    fail("expected a number, got " + typeName(v));
  }
}

const Value *findKey(const Dict &dict, const std::string &key) {
  for (const auto &entry : dict)
    if (entry.first == key)
      return &entry.second;
  return nullptr;
}

bool equals(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isIntegral() && b.isIntegral())
      return asDouble(a) == asDouble(b) &&
             (a.kind == Kind::Bool ? a.boolean : a.integer) ==
                 (b.kind == Kind::Bool ? b.boolean : b.integer);
    return asDouble(a) == asDouble(b);
  }
  if (a.isSequence() && b.isSequence()) {
    // A range or dict view never equals a list.
    if (a.kind != b.kind || a.list->size() != b.list->size() ||
        a.str.empty() != b.str.empty())
      return false;
    for (size_t i = 0; i < a.list->size(); ++i)
      if (!equals((*a.list)[i], (*b.list)[i]))
        return false;
    return true;
  }
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Kind::Undefined:
  case Kind::None:
    return true;
  case Kind::String:
    return a.str == b.str;
  case Kind::Dict: {
    if (a.dict->size() != b.dict->size())
      return false;
    for (const auto &[key, value] : *a.dict) {
      const Value *other = findKey(*b.dict, key);
      if (!other || !equals(value, *other))
        return false;
    }
    return true;
  }
  default:
    return a.dict == b.dict && a.callable == b.callable;
  }
}

bool lessThan(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isIntegral() && b.isIntegral())
      return (a.kind == Kind::Bool ? a.boolean : a.integer) <
             (b.kind == Kind::Bool ? b.boolean : b.integer);
    return asDouble(a) < asDouble(b);
  }
  if (a.isString() && b.isString())
    return a.str < b.str; // UTF-8 byte order is code point order
  if (a.isSequence() && a.kind == b.kind) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t i = 0; i < n; ++i)
      if (!equals((*a.list)[i], (*b.list)[i]))
        return lessThan((*a.list)[i], (*b.list)[i]);
    return a.list->size() < b.list->size();
  }
  fail("'<' not supported between instances of '" + typeName(a) + "' and '" +
       typeName(b) + "'");
}

std::vector<std::string> characters(const std::string &s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    unsigned char c = s[i];
    if (c >= 0xf0)
      n = 4;
    else if (c >= 0xe0)
      n = 3;
    else if (c >= 0xc0)
      n = 2;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

ValueList iterate(const Value &v) {
  switch (v.kind) {
  case Kind::Undefined:
    return {};
  case Kind::List:
  case Kind::Tuple:
    if (v.generator) { // used up, as a Python generator is
      ValueList items;
      items.swap(*v.list);
      return items;
    }
    return *v.list;
  case Kind::Dict: {
    ValueList keys;
    for (const auto &entry : *v.dict)
      keys.push_back(Value::fromString(entry.first));
    return keys;
  }
  case Kind::String: {
    ValueList chars;
    for (std::string &ch : characters(v.str))
      chars.push_back(Value::fromString(std::move(ch)));
    return chars;
  }
  default:
    fail("'" + typeName(v) + "' object is not iterable");
  }
}

int64_t length(const Value &v) {
  switch (v.kind) {
  case Kind::Undefined:
    return 0;
  case Kind::String:
    return characters(v.str).size();
  case Kind::List:
  case Kind::Tuple:
    if (v.generator)
      fail("object of type 'generator' has no len()");
    return v.list->size();
  case Kind::Dict:
    return v.dict->size();
  default:
    fail("object of type '" + typeName(v) + "' has no len()");
  }
}

bool isPythonSpace(const std::string &ch) {
  if (ch.size() == 1) {
    unsigned char c = ch[0];
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  }
  static const char *const wide[] = {
      "\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\xa8",
      "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char *w : wide)
    if (ch == w)
      return true;
  // U+2000..U+200A
  return ch.size() == 3 && ch[0] == '\xe2' && ch[1] == '\x80' &&
         static_cast<unsigned char>(ch[2]) >= 0x80 &&
         static_cast<unsigned char>(ch[2]) <= 0x8a;
}

std::string stripText(const std::string &s, const std::string *chars, bool left,
                      bool right) {
  std::vector<std::string> cs = characters(s);
  std::vector<std::string> set;
  if (chars)
    set = characters(*chars);
  auto strippable = [&](const std::string &ch) {
    return chars ? std::find(set.begin(), set.end(), ch) != set.end()
                 : isPythonSpace(ch);
  };
  size_t begin = 0, end = cs.size();
  while (left && begin < end && strippable(cs[begin]))
    ++begin;
  while (right && end > begin && strippable(cs[end - 1]))
    --end;
  std::string out;
  for (size_t i = begin; i < end; ++i)
    out += cs[i];
  return out;
}

//===----------------------------------------------------------------------===//
// json.dumps
//===----------------------------------------------------------------------===//

static std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

namespace {
struct JsonWriter {
  int indent;
  std::string itemSep, keySep;
  bool sortKeys;
  std::string out;

  void newline(int level) {
    if (indent >= 0)
      out += "\n" + std::string(indent * level, ' ');
  }

  void write(const Value &v, int level) {
    switch (v.kind) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += v.boolean ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(v.integer);
      return;
    case Kind::Float:
      out += std::isnan(v.real)   ? "NaN"
             : std::isinf(v.real) ? (v.real < 0 ? "-Infinity" : "Infinity")
                                  : floatRepr(v.real);
      return;
    case Kind::String:
      out += jsonString(v.str);
      return;
    case Kind::List:
    case Kind::Tuple:
      writeList(*v.list, level);
      return;
    case Kind::Dict:
      writeDict(*v.dict, level);
      return;
    default:
      fail("Object of type " + typeName(v) + " is not JSON serializable");
    }
  }

  void writeList(const ValueList &items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += itemSep;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out += "]";
  }

  void writeDict(const Dict &dict, int level) {
    if (dict.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value> *> entries;
    for (const auto &entry : dict)
      entries.push_back(&entry);
    if (sortKeys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto *a, auto *b) { return a->first < b->first; });
    out += "{";
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i)
        out += itemSep;
      newline(level + 1);
      out += jsonString(entries[i]->first) + keySep;
      write(entries[i]->second, level + 1);
    }
    newline(level);
    out += "}";
  }
};
} // namespace

std::string toJson(const Value &v, int indent, const std::string &itemSep,
                   const std::string &keySep, bool sortKeys) {
  JsonWriter writer{indent, itemSep, keySep, sortKeys, ""};
  writer.write(v, 0);
  return writer.out;
}

} // namespace xfmr::rt::jinja
