//===- Interpreter.cpp - renders a parsed Jinja2 template -----------------===//
//
// Part of xfmr.
//
// Walks the syntax tree with Jinja2's runtime rules: a `for` body is a new
// scope for every iteration (what it sets is gone after the iteration,
// while `if` bodies share their enclosing scope), names not found are
// Undefined (printing as "", false, iterable and empty, an error for any
// other use), `a.b` prefers Python attributes (methods) and then keys,
// `a[b]` the reverse, and a failed item lookup is Undefined.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace xfmr::rt::jinja {

namespace {

enum class Flow { Normal, Break, Continue };

class Interpreter {
public:
  explicit Interpreter(const Dict &context) {
    frames.emplace_back();
    for (const auto &[key, value] : context)
      frames.back()[key] = value;
    frames.emplace_back(); // the template's own `set`s
  }

  std::string run(const Body &body) {
    std::string out;
    if (exec(body, out) != Flow::Normal)
      fail("'break' or 'continue' outside of a loop");
    return out;
  }

private:
  using Frame = std::map<std::string, Value>;
  std::vector<Frame> frames;
  int loopDepth = 0;
  int macroDepth = 0;

  /// Runs `fn` with a new innermost scope.
  template <typename Fn> auto scoped(Fn fn) {
    frames.emplace_back();
    struct Pop {
      std::vector<Frame> &frames;
      ~Pop() { frames.pop_back(); }
    } pop{frames};
    return fn();
  }

  //===--------------------------------------------------------------------===//
  // Statements
  //===--------------------------------------------------------------------===//

  Flow exec(const Body &body, std::string &out) {
    for (const NodePtr &node : body) {
      Flow flow;
      try {
        flow = execNode(*node, out);
      } catch (Failure &f) {
        if (f.loc.line == 0)
          f.loc = node->loc;
        throw;
      }
      if (flow != Flow::Normal)
        return flow;
    }
    return Flow::Normal;
  }

  Flow execNode(const Node &n, std::string &out) {
    switch (n.type) {
    case Node::Text:
      out += n.text;
      return Flow::Normal;
    case Node::Output:
      out += toStr(eval(*n.expr));
      return Flow::Normal;
    case Node::If:
      return exec(truthy(eval(*n.expr)) ? n.body : n.elseBody, out);
    case Node::For:
      execFor(n, out);
      return Flow::Normal;
    case Node::Set:
      assign(*n.target, eval(*n.expr), n.loc);
      return Flow::Normal;
    case Node::SetBlock:
      assign(*n.target, renderBlock(n), n.loc);
      return Flow::Normal;
    case Node::Macro: {
      Value macro;
      macro.kind = Kind::Callable;
      macro.callable = std::make_shared<Callable>();
      macro.callable->name = n.text;
      macro.callable->macro = &n;
      frames.back()[n.text] = macro;
      return Flow::Normal;
    }
    case Node::FilterBlock:
      out += toStr(renderBlock(n));
      return Flow::Normal;
    case Node::Break:
    case Node::Continue:
      if (loopDepth == 0)
        fail("'" + std::string(n.type == Node::Break ? "break" : "continue") +
                 "' outside of a loop",
             n.loc);
      return n.type == Node::Break ? Flow::Break : Flow::Continue;
    case Node::Block:
      return exec(n.body, out);
    }
    return Flow::Normal;
  }

  /// The output of a set or filter block's body, through its filter.
  Value renderBlock(const Node &n) {
    std::string text;
    scoped([&] { return exec(n.body, text); });
    Value block = Value::fromString(text);
    if (!n.filter)
      return block;
    return scoped([&] {
      frames.back()["__block__"] = block;
      return eval(*n.filter);
    });
  }

  void assign(const Expr &target, const Value &value, Loc loc) {
    if (target.type == Expr::Name) {
      frames.back()[target.name] = value;
      return;
    }
    if (target.type == Expr::Getattr) {
      Value ns = lookup(target.args[0]->name);
      if (ns.kind != Kind::Namespace)
        fail("can only assign attributes of a namespace", loc);
      for (auto &entry : *ns.dict)
        if (entry.first == target.name) {
          entry.second = value;
          return;
        }
      ns.dict->emplace_back(target.name, value);
      return;
    }
    ValueList items = unpackable(value, target.args.size(), loc);
    for (size_t i = 0; i < items.size(); ++i)
      assign(*target.args[i], items[i], loc);
  }

  static ValueList unpackable(const Value &value, size_t n, Loc loc) {
    if (value.kind == Kind::Dict || value.kind == Kind::Undefined ||
        value.isString() || value.isSequence()) {
      ValueList items = iterate(value);
      if (items.size() == n)
        return items;
      fail(items.size() < n
               ? "not enough values to unpack (expected " + std::to_string(n) +
                     ", got " + std::to_string(items.size()) + ")"
               : "too many values to unpack (expected " + std::to_string(n) +
                     ")",
           loc);
    }
    fail("cannot unpack non-iterable " + typeName(value) + " object", loc);
  }

  void execFor(const Node &n, std::string &out) {
    ValueList items = iterate(eval(*n.expr));
    if (n.cond)
      items = filterItems(n, std::move(items));
    if (items.empty()) {
      exec(n.elseBody, out);
      return;
    }
    ++loopDepth;
    for (size_t i = 0; i < items.size(); ++i) {
      Flow flow = scoped([&] {
        frames.back()["loop"] = loopValue(items, i);
        assign(*n.target, items[i], n.loc);
        return exec(n.body, out);
      });
      if (flow == Flow::Break)
        break;
    }
    --loopDepth;
  }

  ValueList filterItems(const Node &n, ValueList items) {
    ValueList kept;
    for (const Value &item : items)
      if (scoped([&] {
            assign(*n.target, item, n.loc);
            return truthy(eval(*n.cond));
          }))
        kept.push_back(item);
    return kept;
  }

  static Value loopValue(const ValueList &items, size_t i) {
    int64_t n = items.size(), k = i;
    Dict loop = {
        {"index0", Value::fromInt(k)},
        {"index", Value::fromInt(k + 1)},
        {"revindex0", Value::fromInt(n - k - 1)},
        {"revindex", Value::fromInt(n - k)},
        {"first", Value::fromBool(k == 0)},
        {"last", Value::fromBool(k == n - 1)},
        {"length", Value::fromInt(n)},
        {"depth", Value::fromInt(1)},
        {"depth0", Value::fromInt(0)},
        {"previtem", k > 0 ? items[i - 1] : Value::undefined("previtem")},
        {"nextitem", k + 1 < n ? items[i + 1] : Value::undefined("nextitem")},
    };
    Value value = Value::fromDict(std::move(loop));
    value.str = "loop"; // a LoopContext, which does not print as a dict
    return value;
  }

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  Value lookup(const std::string &name) {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end())
        return found->second;
    }
    if (isGlobalFunction(name)) {
      Value fn;
      fn.kind = Kind::Callable;
      fn.callable = std::make_shared<Callable>();
      fn.callable->name = name;
      return fn;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  /// Runs `fn`; a Failure without a location gets `loc`.
  template <typename Fn> Value at(Loc loc, Fn fn) {
    try {
      return fn();
    } catch (Failure &f) {
      if (f.loc.line == 0)
        f.loc = loc;
      throw;
    }
  }

  Value eval(const Expr &e) {
    switch (e.type) {
    case Expr::Const:
      return e.value;
    case Expr::Name:
      return lookup(e.name);
    case Expr::List:
    case Expr::Tuple: {
      ValueList items;
      for (const ExprPtr &arg : e.args)
        items.push_back(eval(*arg));
      return Value::fromList(std::move(items),
                             e.type == Expr::List ? Kind::List : Kind::Tuple);
    }
    case Expr::DictLit:
      return evalDict(e);
    case Expr::And: {
      Value left = eval(*e.args[0]);
      return truthy(left) ? eval(*e.args[1]) : left;
    }
    case Expr::Or: {
      Value left = eval(*e.args[0]);
      return truthy(left) ? left : eval(*e.args[1]);
    }
    case Expr::Cond:
      if (truthy(eval(*e.args[0])))
        return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2])
                       : Value::undefined("the inline if-expression on "
                                          "line " +
                                          std::to_string(e.loc.line) +
                                          " evaluated to false and no else "
                                          "section was defined.");
    default:
      return at(e.loc, [&] { return evalOperation(e); });
    }
  }

  Value evalDict(const Expr &e) {
    Dict dict;
    for (size_t i = 0; i < e.args.size(); ++i) {
      Value key = eval(*e.args[i]);
      if (!key.isString())
        fail("only string keys are supported in dict literals", e.loc);
      Value value = eval(*e.args2[i]);
      bool replaced = false;
      for (auto &entry : dict)
        if (entry.first == key.str) {
          entry.second = value;
          replaced = true;
        }
      if (!replaced)
        dict.emplace_back(key.str, value);
    }
    return Value::fromDict(std::move(dict));
  }

  Value evalOperation(const Expr &e) {
    switch (e.type) {
    case Expr::Getattr:
      return getAttr(eval(*e.args[0]), e.name);
    case Expr::Getitem:
      return getItem(eval(*e.args[0]), eval(*e.args[1]));
    case Expr::Slice:
      return evalSlice(e);
    case Expr::Unary:
      return unary(e.name, eval(*e.args[0]));
    case Expr::Binary: {
      Value left = eval(*e.args[0]);
      Value right = eval(*e.args[1]);
      return binary(e.name, left, right);
    }
    case Expr::Compare:
      return evalCompare(e);
    case Expr::Call:
      return evalCall(e);
    case Expr::Filter: {
      Value input = eval(*e.args[0]);
      auto [args, kwargs] = evalArgs(e, 1);
      return applyFilter(e.name, input, args, kwargs);
    }
    case Expr::Test: {
      Value input = eval(*e.args[0]);
      auto [args, kwargs] = evalArgs(e, 1);
      if (!kwargs.empty())
        fail("keyword arguments to tests are not supported");
      return Value::fromBool(applyTest(e.name, input, args) != e.negated);
    }
    default:
      fail("unexpected expression");
    }
  }

  std::pair<Args, Kwargs> evalArgs(const Expr &e, size_t from) {
    Args args;
    Kwargs kwargs;
    for (size_t i = from; i < e.args.size(); ++i)
      args.push_back(eval(*e.args[i]));
    for (const auto &[key, expr] : e.kwargs)
      kwargs.emplace_back(key, eval(*expr));
    return {args, kwargs};
  }

  static Value undefinedMember(const Value &obj, const std::string &name) {
    return Value::undefined("'" + typeName(obj) +
                            " object' has no attribute '" + name + "'");
  }

  static Value boundMethod(const Value &obj, const std::string &name) {
    Value fn;
    fn.kind = Kind::Callable;
    fn.callable = std::make_shared<Callable>();
    fn.callable->name = name;
    fn.callable->self = std::make_shared<Value>(obj);
    return fn;
  }

  static Value getAttr(const Value &obj, const std::string &name) {
    if (obj.isUndefined())
      fail(obj.str.empty() ? "undefined value has no attribute '" + name + "'"
                           : obj.str);
    if (hasMethod(obj, name))
      return boundMethod(obj, name);
    if (obj.kind == Kind::Dict || obj.kind == Kind::Namespace) {
      if (const Value *v = findKey(*obj.dict, name))
        return *v;
    }
    return undefinedMember(obj, name);
  }

  static Value getItem(const Value &obj, const Value &key) {
    if (obj.isUndefined())
      fail(obj.str.empty() ? "undefined value has no item" : obj.str);
    if (obj.kind == Kind::Dict || obj.kind == Kind::Namespace) {
      if (key.isString())
        if (const Value *v = findKey(*obj.dict, key.str))
          return *v;
    } else if ((obj.isSequence() && !obj.generator) || obj.isString()) {
      if (key.isIntegral()) {
        int64_t i = key.kind == Kind::Bool ? key.boolean : key.integer;
        if (obj.isString()) {
          std::vector<std::string> chars = characters(obj.str);
          int64_t n = chars.size();
          if (i < 0)
            i += n;
          if (i >= 0 && i < n)
            return Value::fromString(chars[i]);
        } else {
          int64_t n = obj.list->size();
          if (i < 0)
            i += n;
          if (i >= 0 && i < n)
            return (*obj.list)[i];
        }
        return Value::undefined("index out of range");
      }
    }
    if (key.isString())
      return getAttr(obj, key.str);
    return undefinedMember(obj, toStr(key));
  }

  Value evalSlice(const Expr &e) {
    Value obj = eval(*e.args[0]);
    int64_t bounds[3];
    bool given[3];
    for (int k = 0; k < 3; ++k) {
      given[k] = false;
      if (!e.args[k + 1])
        continue;
      Value v = eval(*e.args[k + 1]);
      if (v.isNone())
        continue;
      if (!v.isIntegral())
        fail("slice indices must be integers or None");
      bounds[k] = v.kind == Kind::Bool ? v.boolean : v.integer;
      given[k] = true;
    }
    if (obj.isUndefined())
      fail(obj.str.empty() ? "undefined value has no item" : obj.str);
    if (!(obj.isSequence() && !obj.generator) && !obj.isString())
      return undefinedMember(obj, "slice");
    if (obj.isSequence() && !obj.str.empty())
      fail("slicing a " + obj.str.substr(0, obj.str.find('(')) +
           " is not supported");
    return slice(obj, given, bounds);
  }

  /// Python's obj[start:stop:step].
  static Value slice(const Value &obj, const bool given[3],
                     const int64_t bounds[3]) {
    std::vector<std::string> chars;
    if (obj.isString())
      chars = characters(obj.str);
    int64_t n = obj.isString() ? chars.size() : obj.list->size();
    int64_t step = given[2] ? bounds[2] : 1;
    if (step == 0)
      fail("slice step cannot be zero");
    auto clamp = [&](int64_t v, bool isGiven, int64_t dflt) {
      if (!isGiven)
        return dflt;
      if (v < 0)
        v += n;
      if (step > 0)
        return std::min(std::max<int64_t>(v, 0), n);
      return std::min(std::max<int64_t>(v, -1), n - 1);
    };
    int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : n - 1);
    int64_t stop = clamp(bounds[1], given[1], step > 0 ? n : -1);
    std::string text;
    ValueList items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.isString())
        text += chars[i];
      else
        items.push_back((*obj.list)[i]);
    }
    if (obj.isString())
      return Value::fromString(text);
    return Value::fromList(std::move(items), obj.kind);
  }

  static Value unary(const std::string &op, const Value &v) {
    if (op == "not")
      return Value::fromBool(!truthy(v));
    if (!v.isNumber())
      fail("bad operand type for unary " + op + ": '" + typeName(v) + "'");
    if (op == "+")
      return v.kind == Kind::Bool ? Value::fromInt(v.boolean) : v;
    if (v.kind == Kind::Float)
      return Value::fromFloat(-v.real);
    return intArithmetic("-", 0, intOf(v));
  }

  static int64_t intOf(const Value &v) {
    return v.kind == Kind::Bool ? v.boolean : v.integer;
  }

  [[noreturn]] static void badOperands(const std::string &op, const Value &a,
                                       const Value &b) {
    if (a.isUndefined() || b.isUndefined()) {
      const Value &u = a.isUndefined() ? a : b;
      fail(u.str.empty() ? "undefined value in '" + op + "'" : u.str);
    }
    fail("unsupported operand type(s) for " + op + ": '" + typeName(a) +
         "' and '" + typeName(b) + "'");
  }

  static Value binary(const std::string &op, const Value &a, const Value &b) {
    if (op == "~")
      return Value::fromString(toStr(a) + toStr(b));
    if (a.isNumber() && b.isNumber())
      return arithmetic(op, a, b);
    if (op == "+") {
      if (a.isString() && b.isString())
        return Value::fromString(a.str + b.str);
      if (a.isSequence() && a.kind == b.kind && !a.generator && !b.generator &&
          a.str.empty() && b.str.empty()) {
        ValueList items = *a.list;
        items.insert(items.end(), b.list->begin(), b.list->end());
        return Value::fromList(std::move(items), a.kind);
      }
    }
    if (op == "*" && (a.isIntegral() || b.isIntegral()))
      return repeat(a.isIntegral() ? b : a, intOf(a.isIntegral() ? a : b), op,
                    a, b);
    if (op == "%" && a.isString())
      return Value::fromString(percentFormat(a.str, b));
    badOperands(op, a, b);
  }

  static Value repeat(const Value &seq, int64_t times, const std::string &op,
                      const Value &a, const Value &b) {
    if (seq.isString()) {
      std::string out;
      for (int64_t i = 0; i < times; ++i)
        out += seq.str;
      return Value::fromString(out);
    }
    if (seq.isSequence() && !seq.generator && seq.str.empty()) {
      ValueList items;
      for (int64_t i = 0; i < times; ++i)
        items.insert(items.end(), seq.list->begin(), seq.list->end());
      return Value::fromList(std::move(items), seq.kind);
    }
    badOperands(op, a, b);
  }

  static Value arithmetic(const std::string &op, const Value &a,
                          const Value &b) {
    bool ints = a.isIntegral() && b.isIntegral();
    if (op == "/") {
      if (asDouble(b) == 0)
        fail("division by zero");
      return Value::fromFloat(asDouble(a) / asDouble(b));
    }
    if (ints)
      return intArithmetic(op, intOf(a), intOf(b));
    double x = asDouble(a), y = asDouble(b);
    if (op == "+")
      return Value::fromFloat(x + y);
    if (op == "-")
      return Value::fromFloat(x - y);
    if (op == "*")
      return Value::fromFloat(x * y);
    if (op == "**")
      return Value::fromFloat(std::pow(x, y));
    if (y == 0)
      fail("float division by zero");
    if (op == "//")
      return Value::fromFloat(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0)))
      r += y;
    return Value::fromFloat(r);
  }

  /// Python ints are unbounded; ours are 64-bit and say so on overflow.
  static void checkOverflow(bool overflow) {
    if (overflow)
      fail("integer overflow (ints are 64-bit here)");
  }

  static Value intArithmetic(const std::string &op, int64_t x, int64_t y) {
    int64_t r;
    if (op == "+") {
      checkOverflow(__builtin_add_overflow(x, y, &r));
      return Value::fromInt(r);
    }
    if (op == "-") {
      checkOverflow(__builtin_sub_overflow(x, y, &r));
      return Value::fromInt(r);
    }
    if (op == "*") {
      checkOverflow(__builtin_mul_overflow(x, y, &r));
      return Value::fromInt(r);
    }
    if (op == "**") {
      if (y < 0)
        return Value::fromFloat(std::pow(double(x), double(y)));
      r = 1;
      for (int64_t i = 0; i < y && r != 0; ++i)
        checkOverflow(__builtin_mul_overflow(r, x, &r));
      return Value::fromInt(r);
    }
    if (y == 0)
      fail("integer division or modulo by zero");
    checkOverflow(x == INT64_MIN && y == -1);
    int64_t q = x / y;
    r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return Value::fromInt(op == "//" ? q : r);
  }

  static bool contains(const Value &container, const Value &item) {
    if (container.isString()) {
      if (!item.isString())
        fail("'in <string>' requires string as left operand, not " +
             typeName(item));
      return container.str.find(item.str) != std::string::npos;
    }
    if (container.kind == Kind::Dict || container.kind == Kind::Namespace) {
      if (item.isSequence() && item.kind == Kind::List)
        fail("unhashable type: 'list'");
      if (item.kind == Kind::Dict)
        fail("unhashable type: 'dict'");
      return item.isString() && findKey(*container.dict, item.str);
    }
    for (const Value &v : iterate(container))
      if (equals(v, item))
        return true;
    return false;
  }

  static bool compare(const std::string &op, const Value &a, const Value &b) {
    if (op == "==")
      return equals(a, b);
    if (op == "!=")
      return !equals(a, b);
    if (op == "in")
      return contains(b, a);
    if (op == "notin")
      return !contains(b, a);
    if (a.isUndefined() || b.isUndefined())
      badOperands(op, a, b);
    if (op == "<")
      return lessThan(a, b);
    if (op == ">")
      return lessThan(b, a);
    if (op == "<=")
      return !lessThan(b, a);
    return !lessThan(a, b);
  }

  Value evalCompare(const Expr &e) {
    Value left = eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1]);
      if (!compare(e.ops[i], left, right))
        return Value::fromBool(false);
      left = right;
    }
    return Value::fromBool(true);
  }

  Value evalCall(const Expr &e) {
    Value fn = eval(*e.args[0]);
    auto [args, kwargs] = evalArgs(e, 1);
    if (fn.kind != Kind::Callable) {
      if (fn.isUndefined())
        fail(fn.str.empty() ? "calling an undefined value" : fn.str);
      fail("'" + typeName(fn) + "' object is not callable");
    }
    const Callable &c = *fn.callable;
    if (c.macro)
      return callMacro(*c.macro, args, kwargs);
    if (c.self)
      return callMethod(*c.self, c.name, args, kwargs);
    return callGlobal(c.name, args, kwargs);
  }

  Value callMacro(const Node &macro, const Args &args, const Kwargs &kwargs) {
    // Jinja2 stops at Python's recursion limit; so do we, well before the
    // C++ stack would.
    if (macroDepth >= 100)
      fail("macro calls nested deeper than 100 (recursion?)");
    ++macroDepth;
    struct Leave {
      int &depth;
      ~Leave() { --depth; }
    } leave{macroDepth};
    if (args.size() > macro.params.size())
      fail("macro '" + macro.text + "' takes not more than " +
           std::to_string(macro.params.size()) + " argument(s)");
    // A macro sees the template's variables and its parameters.
    std::vector<Frame> saved(frames.begin() + 2, frames.end());
    frames.resize(2);
    frames.emplace_back();
    int outerLoopDepth = loopDepth;
    loopDepth = 0;
    struct Restore {
      Interpreter &self;
      std::vector<Frame> &saved;
      int depth;
      ~Restore() {
        self.frames.resize(2);
        self.frames.insert(self.frames.end(), saved.begin(), saved.end());
        self.loopDepth = depth;
      }
    } restore{*this, saved, outerLoopDepth};
    std::string out;
    bindParams(macro, args, kwargs);
    exec(macro.body, out);
    return Value::fromString(out);
  }

  void bindParams(const Node &macro, const Args &args, const Kwargs &kwargs) {
    for (const auto &[key, value] : kwargs) {
      bool known = false;
      for (const std::string &p : macro.params)
        known |= p == key;
      if (!known)
        fail("macro '" + macro.text + "' takes no keyword argument '" + key +
             "'");
    }
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const std::string &p = macro.params[i];
      Value v = Value::undefined("parameter '" + p + "' was not provided");
      if (i < args.size())
        v = args[i];
      else if (auto it =
                   std::find_if(kwargs.begin(), kwargs.end(),
                                [&](const auto &kw) { return kw.first == p; });
               it != kwargs.end())
        v = it->second;
      else if (macro.defaults[i])
        v = eval(*macro.defaults[i]);
      frames.back()[p] = v;
    }
  }
};

} // namespace

std::string render(const Body &body, const Dict &context) {
  return Interpreter(context).run(body);
}

} // namespace xfmr::rt::jinja
