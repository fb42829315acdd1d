//===- Builtins.cpp - filters, tests, methods and globals -----------------===//
//
// Part of xfmr.
//
// The filters and tests of jinja2/filters.py and jinja2/tests.py that chat
// templates use, transformers' `tojson`, `raise_exception`, `strftime_now`
// and `namespace`, and the Python str/dict methods templates call. Each
// behaves as its Python original on the values chat templates pass;
// anything else (an unknown filter, a keyword a filter does not take, case
// mapping of non-ASCII text) is an error rather than a guess.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>

namespace xfmr::rt::jinja {

namespace {

/// Positional and keyword arguments bound to a Python-style signature.
class Params {
public:
  Params(const std::string &fn, std::vector<std::string> names,
         const Args &args, const Kwargs &kwargs)
      : fn(fn), names(std::move(names)), values(this->names.size()),
        given(this->names.size(), false) {
    if (args.size() > this->names.size())
      fail(fn + "() takes at most " + std::to_string(this->names.size()) +
           " argument(s), got " + std::to_string(args.size()));
    for (size_t i = 0; i < args.size(); ++i)
      set(i, args[i]);
    for (const auto &[key, value] : kwargs) {
      auto it = std::find(this->names.begin(), this->names.end(), key);
      if (it == this->names.end())
        fail(fn + "() got an unexpected keyword argument '" + key + "'");
      set(it - this->names.begin(), value);
    }
  }
  bool has(size_t i) const { return given[i]; }
  const Value &get(size_t i) const { return values[i]; }
  Value get(size_t i, Value dflt) const { return given[i] ? values[i] : dflt; }
  const Value &require(size_t i) const {
    if (!given[i])
      fail(fn + "() missing argument '" + names[i] + "'");
    return values[i];
  }
  std::string string(size_t i, const std::string &dflt) const {
    if (!given[i])
      return dflt;
    if (!values[i].isString())
      fail(fn + "(): '" + names[i] + "' must be a string");
    return values[i].str;
  }
  int64_t integer(size_t i, int64_t dflt) const {
    if (!given[i] || values[i].isNone())
      return dflt;
    if (!values[i].isIntegral())
      fail(fn + "(): '" + names[i] + "' must be an integer");
    return values[i].kind == Kind::Bool ? values[i].boolean : values[i].integer;
  }
  bool flag(size_t i, bool dflt) const {
    return given[i] ? truthy(values[i]) : dflt;
  }

private:
  void set(size_t i, const Value &v) {
    if (given[i])
      fail(fn + "() got multiple values for argument '" + names[i] + "'");
    values[i] = v;
    given[i] = true;
  }
  std::string fn;
  std::vector<std::string> names;
  std::vector<Value> values;
  std::vector<bool> given;
};

void noArgs(const std::string &fn, const Args &args, const Kwargs &kwargs) {
  Params(fn, {}, args, kwargs);
}

Value generator(ValueList items) {
  Value v = Value::fromList(std::move(items));
  v.generator = true;
  return v;
}

//===----------------------------------------------------------------------===//
// Strings
//===----------------------------------------------------------------------===//

std::string upper(const std::string &s) { return caseMap(s, CaseOp::Upper); }
std::string lower(const std::string &s) { return caseMap(s, CaseOp::Lower); }
std::string capitalize(const std::string &s) {
  return caseMap(s, CaseOp::Capitalize);
}
std::string pythonTitle(const std::string &s) {
  return caseMap(s, CaseOp::PythonTitle);
}
std::string jinjaTitle(const std::string &s) {
  return caseMap(s, CaseOp::JinjaTitle);
}

std::string replaceText(const std::string &s, const std::string &from,
                        const std::string &to, int64_t count) {
  std::string out;
  if (from.empty()) {
    std::vector<std::string> chars = characters(s);
    int64_t done = 0;
    for (const std::string &ch : chars) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += ch;
    }
    if (count < 0 || done < count)
      out += to;
    return out;
  }
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos)
      break;
    out += s.substr(pos, hit - pos) + to;
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

/// str.split(sep, maxsplit).
Value split(const std::string &s, const Value *sep, int64_t maxsplit) {
  ValueList parts;
  if (!sep || sep->isNone()) {
    std::vector<std::string> chars = characters(s);
    size_t i = 0;
    while (true) {
      while (i < chars.size() && isPythonSpace(chars[i]))
        ++i;
      if (i == chars.size())
        break;
      std::string word;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
        for (; i < chars.size(); ++i)
          word += chars[i];
        word = stripText(word, nullptr, false, true);
        parts.push_back(Value::fromString(word));
        break;
      }
      for (; i < chars.size() && !isPythonSpace(chars[i]); ++i)
        word += chars[i];
      parts.push_back(Value::fromString(word));
    }
    return Value::fromList(std::move(parts));
  }
  if (!sep->isString() || sep->str.empty())
    fail(sep->isString() ? "empty separator" : "split(): sep must be a string");
  size_t pos = 0;
  while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
    size_t hit = s.find(sep->str, pos);
    if (hit == std::string::npos)
      break;
    parts.push_back(Value::fromString(s.substr(pos, hit - pos)));
    pos = hit + sep->str.size();
  }
  parts.push_back(Value::fromString(s.substr(pos)));
  return Value::fromList(std::move(parts));
}

/// str.splitlines() (without keepends).
std::vector<std::string> splitLines(const std::string &s) {
  std::vector<std::string> lines;
  std::string line;
  std::vector<std::string> chars = characters(s);
  for (size_t i = 0; i < chars.size(); ++i) {
    const std::string &ch = chars[i];
    unsigned char c = ch[0];
    bool isBreak =
        (ch.size() == 1 && (c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
                            (c >= 0x1c && c <= 0x1e))) ||
        ch == "\xc2\x85" || ch == "\xe2\x80\xa8" || ch == "\xe2\x80\xa9";
    if (!isBreak) {
      line += ch;
      continue;
    }
    if (c == '\r' && i + 1 < chars.size() && chars[i + 1] == "\n")
      ++i;
    lines.push_back(line);
    line.clear();
  }
  if (!line.empty())
    lines.push_back(line);
  return lines;
}

bool matchesAffix(const std::string &s, const Value &affix, bool prefix) {
  auto one = [&](const Value &a) {
    if (!a.isString())
      fail(std::string(prefix ? "startswith" : "endswith") +
           " first arg must be str or a tuple of str");
    if (a.str.size() > s.size())
      return false;
    return prefix
               ? s.compare(0, a.str.size(), a.str) == 0
               : s.compare(s.size() - a.str.size(), a.str.size(), a.str) == 0;
  };
  if (affix.kind == Kind::Tuple) {
    for (const Value &a : *affix.list)
      if (one(a))
        return true;
    return false;
  }
  return one(affix);
}

Value stringMethod(const std::string &s, const std::string &name,
                   const Args &args, const Kwargs &kwargs) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(name, {"chars"}, args, kwargs);
    std::string chars = p.has(0) && !p.get(0).isNone() ? p.string(0, "") : "";
    bool custom = p.has(0) && !p.get(0).isNone();
    return Value::fromString(stripText(s, custom ? &chars : nullptr,
                                       name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    Params p(name, {"sep", "maxsplit"}, args, kwargs);
    return split(s, p.has(0) ? &p.get(0) : nullptr, p.integer(1, -1));
  }
  if (name == "startswith" || name == "endswith") {
    Params p(name, {"prefix"}, args, kwargs);
    return Value::fromBool(matchesAffix(s, p.require(0), name == "startswith"));
  }
  if (name == "replace") {
    Params p(name, {"old", "new", "count"}, args, kwargs);
    return Value::fromString(
        replaceText(s, p.string(0, ""), p.string(1, ""), p.integer(2, -1)));
  }
  if (name == "find" || name == "count") {
    Params p(name, {"sub"}, args, kwargs);
    std::string sub = p.string(0, "");
    if (name == "find") {
      size_t hit = s.find(sub);
      return Value::fromInt(
          hit == std::string::npos ? -1 : characters(s.substr(0, hit)).size());
    }
    if (sub.empty())
      return Value::fromInt(characters(s).size() + 1);
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string::npos;
         pos = s.find(sub, pos + sub.size()))
      ++n;
    return Value::fromInt(n);
  }
  if (name == "join") {
    Params p(name, {"iterable"}, args, kwargs);
    std::string out;
    ValueList items = iterate(p.require(0));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].isString())
        fail("sequence item " + std::to_string(i) +
             ": expected str instance, " + typeName(items[i]) + " found");
      out += (i ? s : "") + items[i].str;
    }
    return Value::fromString(out);
  }
  if (name == "splitlines") {
    noArgs(name, args, kwargs);
    ValueList lines;
    for (std::string &line : splitLines(s))
      lines.push_back(Value::fromString(std::move(line)));
    return Value::fromList(std::move(lines));
  }
  if (name == "format")
    fail("str.format() is not supported");
  noArgs(name, args, kwargs);
  if (name == "upper")
    return Value::fromString(upper(s));
  if (name == "lower")
    return Value::fromString(lower(s));
  if (name == "title")
    return Value::fromString(pythonTitle(s));
  if (name == "capitalize")
    return Value::fromString(capitalize(s));
  fail("str." + name + "() is not supported");
}

const char *const stringMethods[] = {
    "strip",   "lstrip", "rstrip",     "split", "startswith", "endswith",
    "replace", "find",   "count",      "join",  "splitlines", "upper",
    "lower",   "title",  "capitalize", "format"};

Value dictMethod(const Value &self, const std::string &name, const Args &args,
                 const Kwargs &kwargs) {
  if (name == "get") {
    Params p(name, {"key", "default"}, args, kwargs);
    const Value &key = p.require(0);
    if (key.isString())
      if (const Value *v = findKey(*self.dict, key.str))
        return *v;
    return p.get(1, Value::none());
  }
  noArgs(name, args, kwargs);
  ValueList items;
  for (const auto &[key, value] : *self.dict) {
    if (name == "keys")
      items.push_back(Value::fromString(key));
    else if (name == "values")
      items.push_back(value);
    else
      items.push_back(
          Value::fromList({Value::fromString(key), value}, Kind::Tuple));
  }
  // A dict view has a len() and a truth value, unlike a generator.
  Value view = Value::fromList(std::move(items));
  view.str = "dict_" + name;
  return view;
}

/// list.index(x) and list.count(x).
Value listMethod(const Value &self, const std::string &name, const Args &args,
                 const Kwargs &kwargs) {
  Params p(name, {"value"}, args, kwargs);
  const Value &x = p.require(0);
  int64_t count = 0;
  for (size_t i = 0; i < self.list->size(); ++i) {
    if (!equals((*self.list)[i], x))
      continue;
    if (name == "index")
      return Value::fromInt(i);
    ++count;
  }
  if (name == "index")
    fail(repr(x) + " is not in list");
  return Value::fromInt(count);
}

//===----------------------------------------------------------------------===//
// Filters
//===----------------------------------------------------------------------===//

using Filter =
    std::function<Value(const Value &, const Args &, const Kwargs &)>;

std::string requireText(const Value &v, const std::string &what) {
  if (v.kind == Kind::Namespace || v.kind == Kind::Callable)
    fail(what + " of a " + typeName(v) + " is not supported");
  return toStr(v);
}

Value filterDefault(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("default", {"default_value", "boolean"}, args, kwargs);
  bool useDefault = v.isUndefined() || (p.flag(1, false) && !truthy(v));
  return useDefault ? p.get(0, Value::fromString("")) : v;
}

Value filterTojson(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"},
           args, kwargs);
  if (p.flag(0, false))
    fail("tojson(ensure_ascii=True) is not supported");
  if (p.has(1) && !p.get(1).isNone() && !p.get(1).isIntegral())
    fail("tojson(): indent must be an integer");
  int indent = p.integer(1, -1);
  std::string itemSep = indent >= 0 ? "," : ", ", keySep = ": ";
  if (p.has(2) && !p.get(2).isNone()) {
    const Value &seps = p.get(2);
    if (!seps.isSequence() || seps.list->size() != 2 ||
        !(*seps.list)[0].isString() || !(*seps.list)[1].isString())
      fail("tojson(): separators must be two strings");
    itemSep = (*seps.list)[0].str;
    keySep = (*seps.list)[1].str;
  }
  return Value::fromString(
      toJson(v, indent, itemSep, keySep, p.flag(3, false)));
}

Value filterJoin(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("join", {"d", "attribute"}, args, kwargs);
  std::string sep = p.string(0, "");
  std::string out;
  ValueList items = iterate(v);
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (p.has(1))
      item = item.kind == Kind::Dict && p.get(1).isString()
                 ? (findKey(*item.dict, p.get(1).str)
                        ? *findKey(*item.dict, p.get(1).str)
                        : Value::undefined())
                 : Value::undefined();
    out += (i ? sep : "") + requireText(item, "join");
  }
  return Value::fromString(out);
}

Value filterIndent(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("indent", {"width", "first", "blank"}, args, kwargs);
  if (!v.isString()) // do_indent appends "\n" to its input
    fail("unsupported operand type(s) for +=: '" + typeName(v) + "' and 'str'");
  std::string pad = p.has(0) && p.get(0).isString()
                        ? p.get(0).str
                        : std::string(p.integer(0, 4), ' ');
  std::vector<std::string> lines = splitLines(requireText(v, "indent") + "\n");
  std::string out;
  if (p.flag(2, false)) {
    for (size_t i = 0; i < lines.size(); ++i)
      out += (i ? "\n" + pad : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i)
      out += "\n" + (lines[i].empty() ? "" : pad) + lines[i];
  }
  return Value::fromString(p.flag(1, false) ? pad + out : out);
}

/// The attribute/item `name` ("a.b" for nested, digits for indices) of
/// `v`, as Jinja's make_attrgetter.
Value attribute(const Value &v, const std::string &path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(
        start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.kind == Kind::Dict || cur.kind == Kind::Namespace) {
      const Value *found = findKey(*cur.dict, part);
      cur = found ? *found : Value::undefined("no attribute '" + part + "'");
    } else if (cur.isSequence() && !part.empty() &&
               part.find_first_not_of("0123456789") == std::string::npos) {
      size_t i = std::stoul(part);
      cur = i < cur.list->size() ? (*cur.list)[i] : Value::undefined();
    } else if (cur.isUndefined()) {
      fail(cur.str.empty() ? "undefined value has no attribute '" + part + "'"
                           : cur.str);
    } else {
      cur = Value::undefined("no attribute '" + part + "'");
    }
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  return cur;
}

Value filterMap(const Value &v, const Args &args, const Kwargs &kwargs) {
  ValueList out;
  if (!truthy(v)) // Jinja2 maps nothing over a false value (None, "", 0)
    return generator({});
  if (args.empty()) {
    Params p("map", {"attribute", "default"}, args, kwargs);
    std::string attr = p.string(0, "");
    for (const Value &item : iterate(v)) {
      Value got = attribute(item, attr);
      out.push_back(got.isUndefined() && p.has(1) ? p.get(1) : got);
    }
    return generator(std::move(out));
  }
  if (!args[0].isString())
    fail("map(): the filter name must be a string");
  Args rest(args.begin() + 1, args.end());
  for (const Value &item : iterate(v))
    out.push_back(applyFilter(args[0].str, item, rest, kwargs));
  return generator(std::move(out));
}

/// select/reject/selectattr/rejectattr.
Value filterSelect(const Value &v, const Args &args, const Kwargs &kwargs,
                   bool keep, bool byAttribute) {
  if (!kwargs.empty())
    fail("keyword arguments to select filters are not supported");
  size_t next = 0;
  std::string attr;
  if (byAttribute) {
    if (args.empty() || !args[0].isString())
      fail("selectattr/rejectattr need an attribute name");
    attr = args[next++].str;
  }
  std::string test;
  if (next < args.size()) {
    if (!args[next].isString())
      fail("the test name must be a string");
    test = args[next++].str;
  }
  Args testArgs(args.begin() + next, args.end());
  ValueList out;
  if (!truthy(v)) // Jinja2 selects nothing from a false value (None, "", 0)
    return generator({});
  for (const Value &item : iterate(v)) {
    Value subject = byAttribute ? attribute(item, attr) : item;
    bool passed =
        test.empty() ? truthy(subject) : applyTest(test, subject, testArgs);
    if (passed == keep)
      out.push_back(item);
  }
  return generator(std::move(out));
}

[[noreturn]] void undefinedUse(const Value &v) {
  fail(v.str.empty() ? "undefined value" : v.str);
}

Value filterInt(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("int", {"default", "base"}, args, kwargs);
  if (v.isUndefined()) // int(Undefined) raises
    undefinedUse(v);
  Value dflt = p.get(0, Value::fromInt(0));
  if (p.has(1) && p.integer(1, 10) != 10)
    fail("int(base=...) is not supported");
  if (v.isIntegral())
    return Value::fromInt(v.kind == Kind::Bool ? v.boolean : v.integer);
  if (v.kind == Kind::Float)
    return std::isfinite(v.real) ? Value::fromInt(int64_t(v.real)) : dflt;
  if (!v.isString())
    return dflt;
  std::string s = stripText(v.str, nullptr, true, true), digits;
  for (char c : s)
    if (c != '_')
      digits += c;
  char *end = nullptr;
  long long i = std::strtoll(digits.c_str(), &end, 10);
  if (!digits.empty() && *end == 0 && s.find("__") == std::string::npos)
    return Value::fromInt(i);
  // Python's float() takes no hexadecimal, unlike strtod.
  if (s.find_first_of("xXpP") != std::string::npos)
    return dflt;
  double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == 0 && std::isfinite(d))
    return Value::fromInt(int64_t(d));
  return dflt;
}

Value filterFloat(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("float", {"default"}, args, kwargs);
  if (v.isUndefined()) // float(Undefined) raises
    undefinedUse(v);
  if (v.isNumber())
    return Value::fromFloat(asDouble(v));
  if (v.isString()) {
    std::string s = stripText(v.str, nullptr, true, true);
    char *end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == 0 && s.find_first_of("xXpP") == std::string::npos)
      return Value::fromFloat(d);
  }
  return p.get(0, Value::fromFloat(0));
}

Value filterRound(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("round", {"precision", "method"}, args, kwargs);
  int64_t precision = p.integer(0, 0);
  std::string method = p.string(1, "common");
  double x = asDouble(v);
  if (method != "common") {
    if (method != "ceil" && method != "floor")
      fail("method must be common, ceil or floor");
    double scale = std::pow(10.0, double(precision));
    x = (method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) /
        scale;
    return Value::fromFloat(x);
  }
  if (v.isIntegral() && !p.has(0))
    return Value::fromInt(v.kind == Kind::Bool ? v.boolean : v.integer);
  // Python's round is correctly rounded, as printf is.
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", int(std::max<int64_t>(precision, 0)),
                x);
  if (precision < 0)
    fail("round() with a negative precision is not supported");
  return Value::fromFloat(std::strtod(buf, nullptr));
}

Value filterUnique(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("unique", {"case_sensitive", "attribute"}, args, kwargs);
  bool caseSensitive = p.flag(0, false);
  ValueList out, seen;
  for (const Value &item : iterate(v)) {
    Value key = p.has(1) ? attribute(item, p.string(1, "")) : item;
    if (key.isString() && !caseSensitive)
      key = Value::fromString(lower(key.str));
    if (key.kind == Kind::List || key.kind == Kind::Dict)
      fail("unhashable type: '" + typeName(key) + "'");
    bool dup = false;
    for (const Value &s : seen)
      dup |= equals(s, key);
    if (!dup) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

Value filterDictsort(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("dictsort", {"case_sensitive", "by", "reverse"}, args, kwargs);
  if (v.kind != Kind::Dict)
    fail("dictsort needs a dict");
  bool caseSensitive = p.flag(0, false),
       byValue = p.string(1, "key") == "value";
  ValueList items;
  for (const auto &[key, value] : *v.dict)
    items.push_back(
        Value::fromList({Value::fromString(key), value}, Kind::Tuple));
  auto keyOf = [&](const Value &item) {
    Value k = (*item.list)[byValue ? 1 : 0];
    return k.isString() && !caseSensitive ? Value::fromString(lower(k.str)) : k;
  };
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value &a, const Value &b) {
                     return lessThan(keyOf(a), keyOf(b));
                   });
  if (p.flag(2, false))
    std::reverse(items.begin(), items.end());
  return Value::fromList(std::move(items));
}

Value filterItems(const Value &v, const Args &args, const Kwargs &kwargs) {
  noArgs("items", args, kwargs);
  if (v.isUndefined())
    return generator({});
  if (v.kind != Kind::Dict)
    fail("Can only get item pairs from a mapping.");
  Value items = dictMethod(v, "items", {}, {});
  items.generator = true;
  return items;
}

Value firstOrLast(const Value &v, bool first) {
  if (!first && v.generator)
    fail("'generator' object is not reversible");
  ValueList items = iterate(v);
  if (items.empty())
    return Value::undefined(first ? "No first item, sequence was empty."
                                  : "No last item, sequence was empty.");
  return first ? items.front() : items.back();
}

Value filterSum(const Value &v, const Args &args, const Kwargs &kwargs) {
  Params p("sum", {"attribute", "start"}, args, kwargs);
  Value total = p.get(1, Value::fromInt(0));
  for (const Value &item : iterate(v)) {
    Value x = p.has(0) ? attribute(item, p.string(0, "")) : item;
    if (!total.isNumber() || !x.isNumber())
      fail("sum() supports numbers only");
    total =
        total.isIntegral() && x.isIntegral()
            ? Value::fromInt(int64_t(asDouble(total)) + int64_t(asDouble(x)))
            : Value::fromFloat(asDouble(total) + asDouble(x));
  }
  return total;
}

const std::map<std::string, Filter> &filters() {
  static const std::map<std::string, Filter> table = [] {
    std::map<std::string, Filter> t;
    auto text = [](const char *name, std::string (*fn)(const std::string &)) {
      return Filter([name, fn](const Value &v, const Args &a, const Kwargs &k) {
        noArgs(name, a, k);
        return Value::fromString(fn(requireText(v, name)));
      });
    };
    t["upper"] = text("upper", upper);
    t["lower"] = text("lower", lower);
    t["capitalize"] = text("capitalize", capitalize);
    t["title"] = text("title", jinjaTitle);
    t["trim"] = [](const Value &v, const Args &a, const Kwargs &k) {
      Params p("trim", {"chars"}, a, k);
      std::string chars = p.string(0, "");
      bool custom = p.has(0) && !p.get(0).isNone();
      return Value::fromString(stripText(
          requireText(v, "trim"), custom ? &chars : nullptr, true, true));
    };
    t["string"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("string", a, k);
      return Value::fromString(requireText(v, "string"));
    };
    t["safe"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("safe", a, k);
      return v;
    };
    t["length"] =
        t["count"] = [](const Value &v, const Args &a, const Kwargs &k) {
          noArgs("length", a, k);
          return Value::fromInt(length(v));
        };
    t["default"] = t["d"] = filterDefault;
    t["tojson"] = filterTojson;
    t["join"] = filterJoin;
    t["indent"] = filterIndent;
    t["map"] = filterMap;
    t["select"] = [](const Value &v, const Args &a, const Kwargs &k) {
      return filterSelect(v, a, k, true, false);
    };
    t["reject"] = [](const Value &v, const Args &a, const Kwargs &k) {
      return filterSelect(v, a, k, false, false);
    };
    t["selectattr"] = [](const Value &v, const Args &a, const Kwargs &k) {
      return filterSelect(v, a, k, true, true);
    };
    t["rejectattr"] = [](const Value &v, const Args &a, const Kwargs &k) {
      return filterSelect(v, a, k, false, true);
    };
    t["int"] = filterInt;
    t["float"] = filterFloat;
    t["round"] = filterRound;
    t["unique"] = filterUnique;
    t["dictsort"] = filterDictsort;
    t["items"] = filterItems;
    t["sum"] = filterSum;
    t["first"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("first", a, k);
      return firstOrLast(v, true);
    };
    t["last"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("last", a, k);
      return firstOrLast(v, false);
    };
    t["list"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("list", a, k);
      return Value::fromList(iterate(v));
    };
    t["reverse"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("reverse", a, k);
      if (v.isString()) {
        std::vector<std::string> chars = characters(v.str);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it)
          out += *it;
        return Value::fromString(out);
      }
      if (v.generator)
        fail("argument to reversed() must be a sequence");
      ValueList items = iterate(v);
      std::reverse(items.begin(), items.end());
      return generator(std::move(items));
    };
    t["replace"] = [](const Value &v, const Args &a, const Kwargs &k) {
      Params p("replace", {"old", "new", "count"}, a, k);
      return Value::fromString(
          replaceText(requireText(v, "replace"), toStr(p.require(0)),
                      toStr(p.require(1)), p.integer(2, -1)));
    };
    t["format"] = [](const Value &v, const Args &a, const Kwargs &k) {
      if (!a.empty() && !k.empty())
        fail("can't handle positional and keyword arguments at the same time");
      Value arg = k.empty() ? Value::fromList(a, Kind::Tuple)
                            : Value::fromDict(Dict(k.begin(), k.end()));
      return Value::fromString(percentFormat(requireText(v, "format"), arg));
    };
    t["abs"] = [](const Value &v, const Args &a, const Kwargs &k) {
      noArgs("abs", a, k);
      if (v.kind == Kind::Float)
        return Value::fromFloat(std::fabs(v.real));
      if (!v.isIntegral())
        fail("bad operand type for abs(): '" + typeName(v) + "'");
      int64_t i = v.kind == Kind::Bool ? v.boolean : v.integer;
      return Value::fromInt(i < 0 ? -i : i);
    };
    return t;
  }();
  return table;
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

bool testCompare(const std::string &name, const Value &v, const Args &args) {
  if (args.size() != 1)
    fail("test '" + name + "' takes one argument");
  const Value &o = args[0];
  if (name == "eq" || name == "equalto" || name == "==")
    return equals(v, o);
  if (name == "ne" || name == "!=")
    return !equals(v, o);
  if (name == "lt" || name == "lessthan" || name == "<")
    return lessThan(v, o);
  if (name == "gt" || name == "greaterthan" || name == ">")
    return lessThan(o, v);
  if (name == "le" || name == "<=")
    return !lessThan(o, v);
  if (name == "ge" || name == ">=")
    return !lessThan(v, o);
  if (name == "in") {
    if (o.isString() && v.isString())
      return o.str.find(v.str) != std::string::npos;
    if (o.kind == Kind::Dict)
      return v.isString() && findKey(*o.dict, v.str);
    for (const Value &item : iterate(o))
      if (equals(item, v))
        return true;
    return false;
  }
  if (name == "sameas")
    return equals(v, o) &&
           (v.isNone() || v.kind == Kind::Bool || v.isUndefined() ||
            v.list == o.list || v.dict == o.dict);
  if (name == "divisibleby") {
    if (!v.isNumber() || !o.isNumber())
      fail("divisibleby supports numbers only");
    if (asDouble(o) == 0)
      fail("integer division or modulo by zero");
    if (v.isIntegral() && o.isIntegral())
      return (v.kind == Kind::Bool ? v.boolean : v.integer) %
                 (o.kind == Kind::Bool ? o.boolean : o.integer) ==
             0;
    return std::fmod(asDouble(v), asDouble(o)) == 0;
  }
  fail("no test named '" + name + "'");
}

const char *const compareTests[] = {
    "eq",       "equalto", "==", "ne",          "!=",     "lt",
    "lessthan", "<",       "gt", "greaterthan", ">",      "le",
    "<=",       "ge",      ">=", "in",          "sameas", "divisibleby"};

bool testUnary(const std::string &name, const Value &v) {
  if (name == "defined")
    return !v.isUndefined();
  if (name == "undefined")
    return v.isUndefined();
  if (name == "none")
    return v.isNone();
  if (name == "boolean")
    return v.kind == Kind::Bool;
  if (name == "true")
    return v.kind == Kind::Bool && v.boolean;
  if (name == "false")
    return v.kind == Kind::Bool && !v.boolean;
  if (name == "integer")
    return v.kind == Kind::Int;
  if (name == "float")
    return v.kind == Kind::Float;
  if (name == "number")
    return v.isNumber();
  if (name == "string")
    return v.isString();
  if (name == "mapping")
    return v.kind == Kind::Dict;
  if (name == "iterable")
    return v.isUndefined() || v.isString() || v.isSequence() ||
           v.kind == Kind::Dict;
  if (name == "sequence")
    return v.isUndefined() || v.isString() ||
           (v.isSequence() && !v.generator) || v.kind == Kind::Dict;
  if (name == "callable")
    return v.kind == Kind::Callable;
  if (name == "lower" || name == "upper") {
    // str.islower()/isupper(): some cased character, none of the other case.
    std::string s = requireText(v, name), up = upper(s), low = lower(s);
    return up != low && s == (name == "lower" ? low : up);
  }
  if (name == "even" || name == "odd") {
    // value % 2 == 0 (even) or == 1 (odd), with Python's modulo.
    if (!v.isNumber())
      fail("test '" + name + "' needs a number");
    double r = std::fmod(asDouble(v), 2.0);
    if (r < 0)
      r += 2;
    return r == (name == "even" ? 0.0 : 1.0);
  }
  fail("no test named '" + name + "'");
}

const char *const unaryTests[] = {
    "defined",  "undefined", "none",   "boolean", "true",    "false",
    "integer",  "float",     "number", "string",  "mapping", "iterable",
    "sequence", "callable",  "lower",  "upper",   "even",    "odd"};

template <size_t N>
bool among(const std::string &name, const char *const (&names)[N]) {
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// Globals
//===----------------------------------------------------------------------===//

Value globalRange(const Args &args, const Kwargs &kwargs) {
  if (!kwargs.empty() || args.empty() || args.size() > 3)
    fail("range() takes 1 to 3 integer arguments");
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isIntegral())
      fail("range() arguments must be integers");
    v[args.size() == 1 ? 1 : i] =
        args[i].kind == Kind::Bool ? args[i].boolean : args[i].integer;
  }
  if (v[2] == 0)
    fail("range() arg 3 must not be zero");
  ValueList items;
  for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
    if (items.size() >= 100000)
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE "
           "(100000).");
    items.push_back(Value::fromInt(i));
  }
  Value range = Value::fromList(std::move(items));
  range.str = "range(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) +
              (v[2] == 1 ? "" : ", " + std::to_string(v[2])) + ")";
  return range;
}

/// namespace(...) and dict(...): a dict argument and/or keywords.
Value globalDict(const Args &args, const Kwargs &kwargs, bool ns) {
  Dict dict;
  if (args.size() > 1 || (args.size() == 1 && args[0].kind != Kind::Dict))
    fail(std::string(ns ? "namespace" : "dict") +
         "() takes a dict and/or keyword arguments");
  if (!args.empty())
    dict = *args[0].dict;
  for (const auto &[key, value] : kwargs) {
    if (ns && !key.empty() && key[0] == '_')
      fail("Chat templates cannot store underscore-prefixed attributes on a "
           "namespace, but got '" +
           key + "'. Please rename the attribute.");
    auto it = std::find_if(dict.begin(), dict.end(),
                           [&](const auto &e) { return e.first == key; });
    if (it != dict.end())
      it->second = value;
    else
      dict.emplace_back(key, value);
  }
  return Value::fromDict(std::move(dict), ns ? Kind::Namespace : Kind::Dict);
}

Value globalStrftime(const Args &args, const Kwargs &kwargs) {
  Params p("strftime_now", {"format"}, args, kwargs);
  std::string format = p.string(0, "");
  std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
  if (n == 0 && !format.empty())
    fail("strftime_now(): format too long or empty result");
  return Value::fromString(std::string(buf, n));
}

} // namespace

Value applyFilter(const std::string &name, const Value &input, const Args &args,
                  const Kwargs &kwargs) {
  const auto &table = filters();
  auto it = table.find(name);
  if (it == table.end())
    fail("no filter named '" + name + "'");
  return it->second(input, args, kwargs);
}

bool hasTest(const std::string &name) {
  return among(name, unaryTests) || among(name, compareTests);
}

bool applyTest(const std::string &name, const Value &input, const Args &args) {
  if (among(name, compareTests))
    return testCompare(name, input, args);
  if (!among(name, unaryTests))
    fail("no test named '" + name + "'");
  if (!args.empty())
    fail("test '" + name + "' takes no arguments");
  return testUnary(name, input);
}

bool hasMethod(const Value &self, const std::string &name) {
  if (self.kind == Kind::Dict && self.str == "loop")
    return name == "cycle";
  if (self.isString())
    return among(name, stringMethods);
  if (self.kind == Kind::Dict)
    return name == "items" || name == "keys" || name == "values" ||
           name == "get";
  if (self.isSequence() && !self.generator)
    return name == "index" || name == "count";
  return false;
}

Value callMethod(const Value &self, const std::string &name, const Args &args,
                 const Kwargs &kwargs) {
  if (self.kind == Kind::Dict && self.str == "loop") { // loop.cycle(a, b, ...)
    if (args.empty() || !kwargs.empty())
      fail("no items for cycling given");
    int64_t index = findKey(*self.dict, "index0")->integer;
    return args[index % args.size()];
  }
  if (self.isString())
    return stringMethod(self.str, name, args, kwargs);
  if (self.kind == Kind::Dict)
    return dictMethod(self, name, args, kwargs);
  if (self.isSequence())
    return listMethod(self, name, args, kwargs);
  fail(typeName(self) + "." + name + "() is not supported");
}

bool isGlobalFunction(const std::string &name) {
  return name == "range" || name == "namespace" || name == "dict" ||
         name == "raise_exception" || name == "strftime_now";
}

Value callGlobal(const std::string &name, const Args &args,
                 const Kwargs &kwargs) {
  if (name == "range")
    return globalRange(args, kwargs);
  if (name == "namespace" || name == "dict")
    return globalDict(args, kwargs, name == "namespace");
  if (name == "strftime_now")
    return globalStrftime(args, kwargs);
  Params p(name, {"message"}, args, kwargs);
  fail(toStr(p.require(0)));
}

} // namespace xfmr::rt::jinja
