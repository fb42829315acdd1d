//===- Parser.cpp - Jinja2 statements and expressions ---------------------===//
//
// Part of xfmr.
//
// A recursive-descent parser with jinja2/parser.py's grammar and
// precedence: conditional expressions, or, and, not, comparisons (`in`,
// `not in`), + -, ~, * / // %, ** (left-associative, as Jinja2 has it),
// unary - +, then primaries with postfix `.attr`, `[index]`, `[a:b:c]`,
// calls, `| filter` and `is test`. Statements the interpreter does not
// implement (extends, include, import, call blocks, with, ...) are parse
// errors naming the tag.
//
//===----------------------------------------------------------------------===//

#include "Jinja.h"

namespace xfmr::rt::jinja {

namespace {

class Parser {
public:
  explicit Parser(const std::vector<Token> &tokens) : toks(tokens) {}

  Body parseAll() {
    Body body = parseBody({});
    if (cur().type != Token::End)
      fail("unexpected tag", cur().loc);
    return body;
  }

private:
  const std::vector<Token> &toks;
  size_t at = 0;
  /// The end tags of the blocks being parsed, innermost last.
  std::vector<std::vector<std::string>> open;
  /// Nesting of expressions being parsed. Jinja2 itself gives up (Python's
  /// recursion limit) before 100 nested parentheses or blocks.
  int depth = 0;
  static constexpr int kMaxDepth = 200;

  struct Nested {
    Parser &p;
    explicit Nested(Parser &p) : p(p) {
      if (++p.depth > kMaxDepth)
        fail("nesting deeper than " + std::to_string(kMaxDepth) +
                 " is not supported",
             p.cur().loc);
    }
    ~Nested() { --p.depth; }
  };

  const Token &cur() const { return toks[at]; }
  const Token &peek(size_t n = 1) const {
    return toks[std::min(at + n, toks.size() - 1)];
  }
  const Token &next() { return toks[at < toks.size() - 1 ? at++ : at]; }

  bool isOp(const char *op) const {
    return cur().type == Token::Operator && cur().text == op;
  }
  bool isName(const char *name) const {
    return cur().type == Token::Name && cur().text == name;
  }
  bool skipOp(const char *op) {
    if (!isOp(op))
      return false;
    next();
    return true;
  }
  bool skipName(const char *name) {
    if (!isName(name))
      return false;
    next();
    return true;
  }
  static std::string describe(const Token &t) {
    switch (t.type) {
    case Token::End:
      return "end of template";
    case Token::BlockEnd:
      return "end of statement block";
    case Token::VariableEnd:
      return "end of print statement";
    case Token::String:
      return "string";
    case Token::Integer:
      return "integer";
    case Token::Float:
      return "float";
    default:
      return "'" + t.text + "'";
    }
  }
  void expectOp(const char *op) {
    if (!skipOp(op))
      fail(std::string("expected '") + op + "', got " + describe(cur()),
           cur().loc);
  }
  std::string expectName() {
    if (cur().type != Token::Name)
      fail("expected a name, got " + describe(cur()), cur().loc);
    return next().text;
  }
  void expectBlockEnd() {
    if (cur().type != Token::BlockEnd)
      fail("expected end of statement block, got " + describe(cur()),
           cur().loc);
    next();
  }

  static ExprPtr make(Expr::Type type, Loc loc) {
    auto e = std::make_shared<Expr>();
    e->type = type;
    e->loc = loc;
    return e;
  }
  static ExprPtr make(Expr::Type type, Loc loc, std::vector<ExprPtr> args,
                      std::string name = "") {
    ExprPtr e = make(type, loc);
    e->args = std::move(args);
    e->name = std::move(name);
    return e;
  }

  //===--------------------------------------------------------------------===//
  // Statements
  //===--------------------------------------------------------------------===//

  /// Nodes up to a `{% name %}` tag whose name is in `ends` (left as the
  /// current token, after `{%`), or the end of the template when `ends` is
  /// empty.
  Body parseBody(const std::vector<std::string> &ends) {
    Nested nested(*this);
    open.push_back(ends);
    struct Pop {
      std::vector<std::vector<std::string>> &open;
      ~Pop() { open.pop_back(); }
    } pop{open};
    Body body;
    while (true) {
      const Token &t = cur();
      if (t.type == Token::End) {
        if (!ends.empty())
          fail("unexpected end of template, expected '" + ends.front() + "'",
               t.loc);
        return body;
      }
      if (t.type == Token::Data) {
        auto n = std::make_shared<Node>();
        n->type = Node::Text;
        n->loc = t.loc;
        n->text = t.text;
        body.push_back(n);
        next();
      } else if (t.type == Token::VariableBegin) {
        next();
        auto n = std::make_shared<Node>();
        n->type = Node::Output;
        n->loc = cur().loc;
        n->expr = parseTuple(true);
        if (cur().type != Token::VariableEnd)
          fail("expected end of print statement, got " + describe(cur()),
               cur().loc);
        next();
        body.push_back(n);
      } else {
        next(); // {%
        if (cur().type == Token::Name)
          for (const std::string &end : ends)
            if (cur().text == end)
              return body;
        body.push_back(parseStatement());
      }
    }
  }

  /// Parses the body of a block ending in `{% end %}`; consumes the end tag.
  Body parseBlockTo(const char *end) {
    Body body = parseBody({end});
    next();
    expectBlockEnd();
    return body;
  }

  NodePtr parseStatement() {
    if (cur().type != Token::Name)
      fail("tag name expected", cur().loc);
    const Token &t = next();
    auto n = std::make_shared<Node>();
    n->loc = t.loc;
    const std::string &tag = t.text;
    if (tag == "if")
      return parseIf(n);
    if (tag == "for")
      return parseFor(n);
    if (tag == "set")
      return parseSet(n);
    if (tag == "macro")
      return parseMacro(n);
    if (tag == "filter")
      return parseFilterBlock(n);
    if (tag == "break" || tag == "continue") {
      n->type = tag == "break" ? Node::Break : Node::Continue;
      expectBlockEnd();
      return n;
    }
    if (tag == "generation") {
      n->type = Node::Block;
      expectBlockEnd();
      n->body = parseBlockTo("endgeneration");
      return n;
    }
    bool known = tag == "elif" || tag == "else" || tag.rfind("end", 0) == 0;
    if (!known)
      fail("the '" + tag + "' tag is not supported", t.loc);
    std::string expected;
    for (const std::string &end : open.back())
      expected += (expected.empty() ? "" : " or ") + ("'" + end + "'");
    fail("unexpected '" + tag + "'" +
             (expected.empty() ? "" : ", expected " + expected),
         t.loc);
  }

  NodePtr parseIf(NodePtr n) {
    n->type = Node::If;
    n->expr = parseTuple(true);
    expectBlockEnd();
    n->body = parseBody({"elif", "else", "endif"});
    const Token &t = next();
    if (t.text == "elif") {
      auto elif = std::make_shared<Node>();
      elif->loc = t.loc;
      n->elseBody.push_back(parseIf(elif));
      return n;
    }
    expectBlockEnd();
    if (t.text == "else")
      n->elseBody = parseBlockTo("endif");
    return n;
  }

  NodePtr parseFor(NodePtr n) {
    n->type = Node::For;
    n->target = parseAssignTarget(true);
    if (!skipName("in"))
      fail("expected 'in', got " + describe(cur()), cur().loc);
    n->expr = parseTuple(false, true);
    if (skipName("if"))
      n->cond = parseExpression(true);
    if (isName("recursive"))
      fail("recursive loops are not supported", cur().loc);
    expectBlockEnd();
    n->body = parseBody({"endfor", "else"});
    bool hasElse = next().text == "else";
    expectBlockEnd();
    if (hasElse)
      n->elseBody = parseBlockTo("endfor");
    return n;
  }

  NodePtr parseSet(NodePtr n) {
    n->target = parseAssignTarget(false);
    if (skipOp("=")) {
      n->type = Node::Set;
      n->expr = parseTuple(true);
      expectBlockEnd();
      return n;
    }
    if (n->target->type != Expr::Name)
      fail("expected '='", cur().loc);
    n->type = Node::SetBlock;
    if (isOp("|"))
      n->filter = parseFilters(blockInput(cur().loc));
    expectBlockEnd();
    n->body = parseBlockTo("endset");
    return n;
  }

  static ExprPtr blockInput(Loc loc) {
    ExprPtr e = make(Expr::Name, loc);
    e->name = "__block__";
    return e;
  }

  NodePtr parseFilterBlock(NodePtr n) {
    n->type = Node::FilterBlock;
    ExprPtr node = parseOneFilter(blockInput(cur().loc));
    while (skipOp("|"))
      node = parseOneFilter(node);
    n->filter = node;
    expectBlockEnd();
    n->body = parseBlockTo("endfilter");
    return n;
  }

  NodePtr parseMacro(NodePtr n) {
    n->type = Node::Macro;
    n->text = expectName();
    expectOp("(");
    while (!isOp(")")) {
      if (!n->params.empty())
        expectOp(",");
      n->params.push_back(expectName());
      n->defaults.push_back(skipOp("=") ? parseExpression(true) : nullptr);
    }
    next();
    expectBlockEnd();
    n->body = parseBlockTo("endmacro");
    return n;
  }

  /// A name, `ns.attr` (set only), or names separated by commas.
  ExprPtr parseAssignTarget(bool forLoop) {
    Loc loc = cur().loc;
    if (!forLoop && cur().type == Token::Name &&
        peek().type == Token::Operator && peek().text == ".") {
      ExprPtr ns = make(Expr::Name, loc);
      ns->name = next().text;
      next();
      ExprPtr attr = make(Expr::Getattr, loc, {ns});
      attr->name = expectName();
      return attr;
    }
    std::vector<ExprPtr> names;
    bool paren = skipOp("(");
    do {
      ExprPtr name = make(Expr::Name, cur().loc);
      name->name = expectName();
      names.push_back(name);
    } while (skipOp(",") && cur().type == Token::Name);
    if (paren)
      expectOp(")");
    if (names.size() == 1 && !paren)
      return names.front();
    return make(Expr::Tuple, loc, names);
  }

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  /// Expressions separated by commas (a tuple when there is a comma).
  ExprPtr parseTuple(bool withCondExpr, bool forIter = false) {
    Loc loc = cur().loc;
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skipOp(","))
          break;
        comma = true;
      }
      if (cur().type == Token::BlockEnd || cur().type == Token::VariableEnd ||
          isOp(")") || (forIter && isName("if")))
        break;
      items.push_back(parseExpression(withCondExpr));
    }
    if (!comma && items.size() == 1)
      return items.front();
    if (items.empty() && !comma)
      fail("expected an expression, got " + describe(cur()), cur().loc);
    return make(Expr::Tuple, loc, items);
  }

  ExprPtr parseExpression(bool withCondExpr) {
    Nested nested(*this);
    return withCondExpr ? parseCondExpr() : parseOr();
  }

  ExprPtr parseCondExpr() {
    ExprPtr expr = parseOr();
    while (isName("if")) {
      Loc loc = next().loc;
      ExprPtr cond = parseOr();
      ExprPtr otherwise = skipName("else") ? parseCondExpr() : nullptr;
      expr = make(Expr::Cond, loc, {cond, expr, otherwise});
    }
    return expr;
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) {
      Loc loc = next().loc;
      left = make(Expr::Or, loc, {left, parseAnd()});
    }
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) {
      Loc loc = next().loc;
      left = make(Expr::And, loc, {left, parseNot()});
    }
    return left;
  }

  ExprPtr parseNot() {
    Nested nested(*this);
    if (isName("not")) {
      Loc loc = next().loc;
      return make(Expr::Unary, loc, {parseNot()}, "not");
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    Loc loc = cur().loc;
    ExprPtr first = parseMath1();
    ExprPtr cmp = make(Expr::Compare, loc, {first});
    while (true) {
      std::string op;
      if (cur().type == Token::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
           cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = next().text;
      } else if (skipName("in")) {
        op = "in";
      } else if (isName("not") && peek().type == Token::Name &&
                 peek().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parseMath1());
    }
    return cmp->ops.empty() ? first : cmp;
  }

  ExprPtr parseBinaryLevel(ExprPtr (Parser::*operand)(),
                           std::initializer_list<const char *> ops) {
    ExprPtr left = (this->*operand)();
    while (cur().type == Token::Operator) {
      const char *match = nullptr;
      for (const char *op : ops)
        if (cur().text == op)
          match = op;
      if (!match)
        break;
      Loc loc = next().loc;
      left = make(Expr::Binary, loc, {left, (this->*operand)()}, match);
    }
    return left;
  }

  ExprPtr parseMath1() {
    return parseBinaryLevel(&Parser::parseConcat, {"+", "-"});
  }
  ExprPtr parseConcat() { return parseBinaryLevel(&Parser::parseMath2, {"~"}); }
  ExprPtr parseMath2() {
    return parseBinaryLevel(&Parser::parsePow, {"*", "/", "//", "%"});
  }
  ExprPtr parsePow() {
    return parseBinaryLevel(&Parser::parseUnaryWithFilter, {"**"});
  }
  ExprPtr parseUnaryWithFilter() { return parseUnary(true); }

  ExprPtr parseUnary(bool withFilter) {
    Nested nested(*this);
    ExprPtr node;
    if (isOp("-") || isOp("+")) {
      const Token &t = next();
      node = make(Expr::Unary, t.loc, {parseUnary(false)}, t.text);
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(node);
    if (withFilter)
      node = parseFilterChain(node);
    return node;
  }

  ExprPtr parsePrimary() {
    const Token &t = cur();
    switch (t.type) {
    case Token::Name:
      return parseNamePrimary();
    case Token::String: {
      ExprPtr e = make(Expr::Const, t.loc);
      std::string text;
      while (cur().type == Token::String)
        text += next().text;
      e->value = Value::fromString(text);
      return e;
    }
    case Token::Integer:
    case Token::Float: {
      ExprPtr e = make(Expr::Const, t.loc);
      e->value = t.type == Token::Integer ? Value::fromInt(t.integer)
                                          : Value::fromFloat(t.real);
      next();
      return e;
    }
    default:
      break;
    }
    if (skipOp("(")) {
      ExprPtr e = parseTuple(true);
      expectOp(")");
      return e;
    }
    if (isOp("["))
      return parseList();
    if (isOp("{"))
      return parseDict();
    fail("unexpected " + describe(t), t.loc);
  }

  ExprPtr parseNamePrimary() {
    const Token &t = next();
    ExprPtr e = make(Expr::Const, t.loc);
    if (t.text == "true" || t.text == "True")
      e->value = Value::fromBool(true);
    else if (t.text == "false" || t.text == "False")
      e->value = Value::fromBool(false);
    else if (t.text == "none" || t.text == "None")
      e->value = Value::none();
    else {
      e->type = Expr::Name;
      e->name = t.text;
    }
    return e;
  }

  ExprPtr parseList() {
    ExprPtr e = make(Expr::List, next().loc);
    while (!isOp("]")) {
      if (!e->args.empty()) {
        expectOp(",");
        if (isOp("]"))
          break;
      }
      e->args.push_back(parseExpression(true));
    }
    next();
    return e;
  }

  ExprPtr parseDict() {
    ExprPtr e = make(Expr::DictLit, next().loc);
    while (!isOp("}")) {
      if (!e->args.empty()) {
        expectOp(",");
        if (isOp("}"))
          break;
      }
      e->args.push_back(parseExpression(true));
      expectOp(":");
      e->args2.push_back(parseExpression(true));
    }
    next();
    return e;
  }

  ExprPtr parsePostfix(ExprPtr node) {
    while (true) {
      if (isOp(".")) {
        Loc loc = next().loc;
        if (cur().type == Token::Integer) {
          ExprPtr index = make(Expr::Const, cur().loc);
          index->value = Value::fromInt(next().integer);
          node = make(Expr::Getitem, loc, {node, index});
        } else {
          node = make(Expr::Getattr, loc, {node}, expectName());
        }
      } else if (isOp("[")) {
        node = parseSubscript(node);
      } else if (isOp("(")) {
        node = parseCall(node);
      } else {
        return node;
      }
    }
  }

  ExprPtr parseSubscript(ExprPtr node) {
    Loc loc = next().loc;
    std::vector<ExprPtr> parts(3);
    int colons = 0;
    while (!isOp("]")) {
      if (skipOp(":")) {
        if (++colons > 2)
          fail("unexpected ':'", cur().loc);
        continue;
      }
      if (isOp(","))
        fail("tuple subscripts are not supported", cur().loc);
      if (parts[colons])
        fail("expected ']', got " + describe(cur()), cur().loc);
      parts[colons] = parseExpression(true);
    }
    next();
    if (colons == 0) {
      if (!parts[0])
        fail("expected a subscript", loc);
      return make(Expr::Getitem, loc, {node, parts[0]});
    }
    return make(Expr::Slice, loc, {node, parts[0], parts[1], parts[2]});
  }

  /// `(args, name=value)` after `fn`, into `call` (args appended).
  void parseCallArgs(ExprPtr call) {
    expectOp("(");
    bool first = true;
    while (!isOp(")")) {
      if (!first)
        expectOp(",");
      first = false;
      if (isOp(")"))
        break;
      if (isOp("*") || isOp("**"))
        fail("*args and **kwargs are not supported", cur().loc);
      if (cur().type == Token::Name && peek().type == Token::Operator &&
          peek().text == "=") {
        std::string key = next().text;
        next();
        call->kwargs.emplace_back(key, parseExpression(true));
      } else {
        if (!call->kwargs.empty())
          fail("positional argument after keyword argument", cur().loc);
        call->args.push_back(parseExpression(true));
      }
    }
    next();
  }

  ExprPtr parseCall(ExprPtr fn) {
    ExprPtr call = make(Expr::Call, cur().loc, {fn});
    parseCallArgs(call);
    return call;
  }

  /// `| name(args)`, `is [not] test args` and calls after `node`.
  ExprPtr parseFilterChain(ExprPtr node) {
    while (true) {
      if (isOp("|")) {
        next();
        node = parseOneFilter(node);
      } else if (isName("is")) {
        node = parseTest(node);
      } else if (isOp("(")) {
        node = parseCall(node);
      } else {
        return node;
      }
    }
  }

  ExprPtr parseFilters(ExprPtr input) {
    next(); // |
    ExprPtr node = parseOneFilter(input);
    while (skipOp("|"))
      node = parseOneFilter(node);
    return node;
  }

  ExprPtr parseOneFilter(ExprPtr input) {
    Loc loc = cur().loc;
    std::string name = expectName();
    while (skipOp("."))
      name += "." + expectName();
    ExprPtr f = make(Expr::Filter, loc, {input}, name);
    if (isOp("("))
      parseCallArgs(f);
    return f;
  }

  ExprPtr parseTest(ExprPtr input) {
    Loc loc = next().loc; // is
    bool negated = skipName("not");
    std::string name = expectName();
    while (skipOp("."))
      name += "." + expectName();
    ExprPtr t = make(Expr::Test, loc, {input}, name);
    t->negated = negated;
    const Token &c = cur();
    if (isOp("(")) {
      parseCallArgs(t);
    } else if ((c.type == Token::Name || c.type == Token::String ||
                c.type == Token::Integer || c.type == Token::Float ||
                isOp("[") || isOp("{")) &&
               !isName("else") && !isName("or") && !isName("and")) {
      if (isName("is"))
        fail("You cannot chain multiple tests with is", c.loc);
      t->args.push_back(parsePostfix(parsePrimary()));
    }
    return t;
  }
};

} // namespace

Body parseTemplate(const std::vector<Token> &tokens) {
  return Parser(tokens).parseAll();
}

} // namespace xfmr::rt::jinja
