//===- Jinja.h - values, tokens and syntax of the chat-template Jinja -----===//
//
// Part of xfmr.
//
// The internal interface of the Jinja2 interpreter behind ChatTemplate: the
// values templates compute with (Python's None, bool, int, float, str, list,
// tuple, dict, plus Jinja's Undefined, namespaces and callables), the lexer's
// tokens, the syntax tree and the entry points of each stage. Errors travel
// as a `Failure` exception inside the interpreter only; ChatTemplate turns
// them into an Error, so nothing is thrown across the runtime's API.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_JINJA_JINJA_H
#define XFMR_RUNTIME_JINJA_JINJA_H

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xfmr::rt::jinja {

/// A position in the template source, 1-based; line 0 means unknown.
struct Loc {
  int line = 0;
  int column = 0;
};

/// What stops parsing or rendering: a message and where in the template.
struct Failure {
  std::string message;
  Loc loc;
};

[[noreturn]] void fail(const std::string &message, Loc loc = {});

struct Value;
struct Callable;
using ValueList = std::vector<Value>;
/// A dict in insertion order (Python's), string keys only.
using Dict = std::vector<std::pair<std::string, Value>>;

enum class Kind {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Tuple,
  Dict,
  Namespace,
  Callable
};

/// A Python value as a template sees it. Lists and dicts are shared, as
/// Python shares them; only namespaces are ever modified after creation.
struct Value {
  Kind kind = Kind::Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  /// A String's text; for Undefined, what was undefined (for messages);
  /// for a List that is a range or dict view, how Python prints it
  /// ("range(0, 3)", "dict_items"); for the Dict of `loop`, "loop".
  std::string str;
  std::shared_ptr<ValueList> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Callable> callable;
  /// A List made by map/select/...: a Python generator, which is always
  /// true, has no len(), and is used up by one iteration.
  bool generator = false;

  static Value undefined(std::string hint = "") {
    Value v;
    v.str = std::move(hint);
    return v;
  }
  static Value none() { return withKind(Kind::None); }
  static Value fromBool(bool b) {
    Value v = withKind(Kind::Bool);
    v.boolean = b;
    return v;
  }
  static Value fromInt(int64_t i) {
    Value v = withKind(Kind::Int);
    v.integer = i;
    return v;
  }
  static Value fromFloat(double d) {
    Value v = withKind(Kind::Float);
    v.real = d;
    return v;
  }
  static Value fromString(std::string s) {
    Value v = withKind(Kind::String);
    v.str = std::move(s);
    return v;
  }
  static Value fromList(ValueList items, Kind kind = Kind::List) {
    Value v = withKind(kind);
    v.list = std::make_shared<ValueList>(std::move(items));
    return v;
  }
  static Value fromDict(Dict items, Kind kind = Kind::Dict) {
    Value v = withKind(kind);
    v.dict = std::make_shared<Dict>(std::move(items));
    return v;
  }

  bool isUndefined() const { return kind == Kind::Undefined; }
  bool isNone() const { return kind == Kind::None; }
  bool isString() const { return kind == Kind::String; }
  bool isSequence() const { return kind == Kind::List || kind == Kind::Tuple; }
  bool isMapping() const { return kind == Kind::Dict; }
  /// int or bool (a Python bool is an int).
  bool isIntegral() const { return kind == Kind::Int || kind == Kind::Bool; }
  bool isNumber() const { return isIntegral() || kind == Kind::Float; }

private:
  static Value withKind(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

/// Python's name of a value's type, as error messages print it.
std::string typeName(const Value &v);
/// bool(v).
bool truthy(const Value &v);
/// str(v): what `{{ v }}` prints.
std::string toStr(const Value &v);
/// repr(v).
std::string repr(const Value &v);
/// a == b, Python's rules (1 == 1.0 == True, Undefined == Undefined).
bool equals(const Value &a, const Value &b);
/// a < b for numbers, strings and sequences; an error for other kinds.
bool lessThan(const Value &a, const Value &b);
/// An int or float as a double (bool included).
double asDouble(const Value &v);
/// The items `for x in v` visits: a list's elements, a dict's keys, a
/// string's characters; nothing for Undefined; an error for other kinds.
ValueList iterate(const Value &v);
/// len(v).
int64_t length(const Value &v);
/// Looks up a dict's key; nullptr when absent.
const Value *findKey(const Dict &dict, const std::string &key);
/// json.dumps(v, ensure_ascii=false, indent, separators, sort_keys).
std::string toJson(const Value &v, int indent, const std::string &itemSep,
                   const std::string &keySep, bool sortKeys);
/// Python's repr of a float ("0.1", "1e+20", "inf").
std::string floatRepr(double d);

// Unicode helpers over UTF-8 text.
/// The code points of `s`, each as its UTF-8 bytes.
std::vector<std::string> characters(const std::string &s);
/// Python's str.isspace() for one character.
bool isPythonSpace(const std::string &ch);
/// Python's `fmt % arg` (a tuple gives several arguments, a dict %(key)s).
std::string percentFormat(const std::string &fmt, const Value &arg);

enum class CaseOp { Upper, Lower, Capitalize, PythonTitle, JinjaTitle };
/// str.upper/lower/capitalize/title and Jinja's title filter; an error
/// for characters outside the tables of CaseMapping.cpp.
std::string caseMap(const std::string &s, CaseOp op);
/// str.strip/lstrip/rstrip; `chars` null strips Python whitespace.
std::string stripText(const std::string &s, const std::string *chars, bool left,
                      bool right);

//===----------------------------------------------------------------------===//
// Tokens and syntax
//===----------------------------------------------------------------------===//

struct Token {
  enum Type {
    Data,
    VariableBegin,
    VariableEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Operator,
    End
  };
  Type type;
  std::string text; ///< data, name, operator, or a string's decoded value
  Loc loc;
  int64_t integer = 0;
  double real = 0;
};

/// Splits `source` as Jinja2's lexer does with trim_blocks and lstrip_blocks
/// (comments dropped, raw blocks as data).
std::vector<Token> tokenize(const std::string &source);

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

/// An expression node. One struct for all kinds keeps the tree small to
/// write; each kind documents the fields it uses.
struct Expr {
  enum Type {
    Const,   ///< value
    Name,    ///< name
    List,    ///< args
    Tuple,   ///< args
    DictLit, ///< keyArgs (key exprs in args, values in args2)
    Getattr, ///< args[0] . name
    Getitem, ///< args[0] [ args[1] ]
    Slice,   ///< args[0] [ args[1] : args[2] : args[3] ] (null parts)
    Unary,   ///< name ("-", "+", "not") args[0]
    Binary,  ///< args[0] name args[1] (+ - * / // % ** ~)
    And,     ///< args[0] and args[1]
    Or,      ///< args[0] or args[1]
    Compare, ///< args[0] ops[i] args[i+1] ...
    Cond,    ///< args[1] if args[0] else args[2] (args[2] may be null)
    Call,    ///< args[0](args[1:], kwargs)
    Filter,  ///< args[0] | name(args[1:], kwargs)
    Test     ///< args[0] is [not] name(args[1:]); negated
  };
  Type type;
  Loc loc;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<ExprPtr> args2;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Node;
using NodePtr = std::shared_ptr<Node>;
using Body = std::vector<NodePtr>;

/// A statement or text.
struct Node {
  enum Type {
    Text,        ///< text
    Output,      ///< {{ expr }}
    If,          ///< if expr: body else elseBody
    For,         ///< for target in expr [if cond]: body else elseBody
    Set,         ///< set target = expr
    SetBlock,    ///< set target: body (then filter, when filter is set)
    Macro,       ///< macro name(params = defaults): body
    FilterBlock, ///< filter: body through `filter` (input `__block__`)
    Break,
    Continue,
    Block ///< body as is ({% generation %})
  };
  Type type;
  Loc loc;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr cond;
  ExprPtr filter;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
  Body body;
  Body elseBody;
};

/// Parses a token stream into a template body.
Body parseTemplate(const std::vector<Token> &tokens);

/// A macro or builtin function value.
struct Callable {
  std::string name;
  /// A bound method's receiver ("strip" of a string), for Kind::Callable
  /// values made by attribute lookup.
  std::shared_ptr<Value> self;
  const Node *macro = nullptr;
};

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

/// Applies filter `name`; a filter the interpreter does not know is an error
/// naming it (never a different rendering).
Value applyFilter(const std::string &name, const Value &input, const Args &args,
                  const Kwargs &kwargs);
/// Applies test `name`.
bool applyTest(const std::string &name, const Value &input, const Args &args);
/// Whether `name` is a test the interpreter knows (select/reject check).
bool hasTest(const std::string &name);
/// Calls method `name` of a string, dict or list.
Value callMethod(const Value &self, const std::string &name, const Args &args,
                 const Kwargs &kwargs);
/// Whether `self.name` is a method the interpreter knows.
bool hasMethod(const Value &self, const std::string &name);
/// Calls a global function (range, namespace, dict, raise_exception,
/// strftime_now).
Value callGlobal(const std::string &name, const Args &args,
                 const Kwargs &kwargs);
/// Whether `name` is a global function.
bool isGlobalFunction(const std::string &name);

/// Renders a parsed template with `context` as its variables.
std::string render(const Body &body, const Dict &context);

} // namespace xfmr::rt::jinja

#endif // XFMR_RUNTIME_JINJA_JINJA_H
