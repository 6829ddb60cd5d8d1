// Jinja tokens -> syntax tree: the grammar and operator precedence of jinja2/parser.py (3.1), with
// the loopcontrols extension (break, continue) and transformers' {% generation %} tag, as
// transformers compiles chat templates (utils/chat_template_utils.py).
#include "lm/jinja/ast.h"
#include "lm/jinja/builtins.h"
#include "lm/jinja/lexer.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <stdexcept>

namespace nuvec::lm::jinja {

namespace {

// ---- parser ---------------------------------------------------------------------------------

ExprPtr make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

void scan_names(const Expr* e, Stmt& macro);

void scan_body_names(const Body& body, Stmt& macro) {
  for (const auto& s : body) {
    scan_names(s->expr.get(), macro);
    scan_names(s->cond.get(), macro);
    for (const auto& [c, b] : s->branches) {
      scan_names(c.get(), macro);
      scan_body_names(b, macro);
    }
    for (const auto& [n, d] : s->params) scan_names(d.get(), macro);
    scan_body_names(s->body, macro);
    scan_body_names(s->else_body, macro);
  }
}

// Marks which of varargs, kwargs and caller a macro body refers to (jinja2 accepts extra
// arguments only when it does).
void scan_names(const Expr* e, Stmt& macro) {
  if (!e) return;
  if (e->kind == ExprKind::Name) {
    macro.uses_varargs |= e->name == "varargs";
    macro.uses_kwargs |= e->name == "kwargs";
    macro.uses_caller |= e->name == "caller";
  }
  for (const Expr* c : {e->a.get(), e->b.get(), e->c.get(), e->d.get()}) scan_names(c, macro);
  for (const auto& c : e->items) scan_names(c.get(), macro);
  for (const auto& [k, c] : e->kwargs) scan_names(c.get(), macro);
}

class Parser {
 public:
  Parser(std::vector<Item> items, int max_depth) : items_(std::move(items)), max_depth_(max_depth) {}

  Body parse() {
    std::string end;
    return parse_body({}, "", 0, &end);
  }

 private:
  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser, int line) : p(parser) {
      if (++p.depth_ > p.max_depth_)
        syntax_error(line, "template nested too deeply (more than " + std::to_string(p.max_depth_) + " levels)");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- token cursor within the current tag ----
  const Token& cur() const { return (*toks_)[tp_]; }
  const Token& peek(std::size_t k = 1) const { return (*toks_)[std::min(tp_ + k, toks_->size() - 1)]; }
  bool at_op(const char* op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool at_name(const char* name) const { return cur().kind == Tok::Name && cur().text == name; }
  bool at_end() const { return cur().kind == Tok::End; }
  const Token& next() {
    const Token& t = cur();
    if (t.kind != Tok::End) ++tp_;
    return t;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "end of tag";
      case Tok::String: return "string literal";
      case Tok::Int:
      case Tok::Float: return "number '" + t.text + "'";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void unexpected(const std::string& expected = {}) const {
    syntax_error(cur().line, "unexpected " + describe(cur()) + (expected.empty() ? "" : ", expected " + expected));
  }
  void expect_op(const char* op) {
    if (!at_op(op)) unexpected(std::string("'") + op + "'");
    next();
  }
  void expect_end() {
    if (!at_end()) unexpected("end of tag");
  }
  std::string expect_name() {
    if (cur().kind != Tok::Name) unexpected("a name");
    return next().text;
  }
  bool skip_name(const char* name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  // ---- statements ----

  // Parses items until a block tag named in `ends`; `*end` gets that name. At the end of the
  // template with `ends` non-empty, reports the block `what` opened at `open_line`.
  Body parse_body(std::initializer_list<const char*> ends, const char* what, int open_line, std::string* end) {
    DepthGuard guard(*this, open_line);
    Body body;
    while (ip_ < items_.size()) {
      Item& item = items_[ip_++];
      if (item.kind == Item::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->text = std::move(item.text);
        body.push_back(std::move(s));
        continue;
      }
      toks_ = &item.tokens;
      tp_ = 0;
      if (item.kind == Item::Var) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = item.line;
        s->expr = parse_tuple(true, false);
        expect_end();
        body.push_back(std::move(s));
        continue;
      }
      if (cur().kind != Tok::Name) unexpected("a tag name");
      const std::string tag = cur().text;
      for (const char* e : ends) {
        if (tag == e) {
          next();
          *end = tag;
          return body;
        }
      }
      body.push_back(parse_statement(tag, item.line));
    }
    if (ends.size() != 0) {
      std::string expected;
      for (const char* e : ends) expected += std::string(expected.empty() ? "" : " or ") + "'" + e + "'";
      syntax_error(open_line, std::string("unexpected end of template: the '") + what + "' block opened here was never closed (expected " + expected + ")");
    }
    return body;
  }

  StmtPtr parse_statement(const std::string& tag, int line) {
    auto s = std::make_unique<Stmt>();
    s->line = line;
    next();
    std::string end;
    if (tag == "if") {
      s->kind = StmtKind::If;
      for (;;) {
        ExprPtr cond = parse_tuple(false, false);
        expect_end();
        Body b = parse_body({"elif", "else", "endif"}, "if", line, &end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") continue;
        if (end == "else") {
          expect_end();
          s->else_body = parse_body({"endif"}, "if", line, &end);
        }
        expect_end();
        return s;
      }
    }
    if (tag == "for") {
      s->kind = StmtKind::For;
      s->targets = parse_targets();
      if (!skip_name("in")) unexpected("'in'");
      s->expr = parse_tuple(false, false, "recursive");
      if (skip_name("if")) s->cond = parse_tuple(true, false);
      if (at_name("recursive")) syntax_error(cur().line, "recursive for loops are not supported");
      expect_end();
      ++loops_;
      s->body = parse_body({"endfor", "else"}, "for", line, &end);
      --loops_;
      if (end == "else") {
        expect_end();
        s->else_body = parse_body({"endfor"}, "for", line, &end);
      }
      expect_end();
      return s;
    }
    if (tag == "set") {
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == ".") {
        s->kind = StmtKind::Set;
        s->targets = {next().text};
        next();
        s->attr = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true, false);
        expect_end();
        return s;
      }
      s->targets = parse_targets();
      if (at_op("=")) {
        next();
        s->kind = StmtKind::Set;
        s->expr = parse_tuple(true, false);
        expect_end();
        return s;
      }
      if (s->targets.size() != 1) unexpected("'='");
      s->kind = StmtKind::SetBlock;
      if (at_op("|")) s->expr = parse_filter(make(ExprKind::Placeholder, line), false);
      expect_end();
      s->body = parse_body({"endset"}, "set", line, &end);
      expect_end();
      return s;
    }
    if (tag == "macro") {
      s->kind = StmtKind::Macro;
      s->name = expect_name();
      parse_params(*s);
      expect_end();
      const int saved = loops_;
      loops_ = 0;
      s->body = parse_body({"endmacro"}, "macro", line, &end);
      loops_ = saved;
      expect_end();
      scan_body_names(s->body, *s);
      for (const auto& [n, d] : s->params) scan_names(d.get(), *s);
      return s;
    }
    if (tag == "call") {
      s->kind = StmtKind::CallBlock;
      if (at_op("(")) parse_params(*s);
      s->expr = parse_expression(true);
      if (s->expr->kind != ExprKind::Call) syntax_error(line, "expected a call after {% call %}");
      expect_end();
      const int saved = loops_;
      loops_ = 0;
      s->body = parse_body({"endcall"}, "call", line, &end);
      loops_ = saved;
      expect_end();
      return s;
    }
    if (tag == "filter") {
      s->kind = StmtKind::FilterBlock;
      s->expr = parse_filter(make(ExprKind::Placeholder, line), true);
      expect_end();
      s->body = parse_body({"endfilter"}, "filter", line, &end);
      expect_end();
      return s;
    }
    if (tag == "with") {
      s->kind = StmtKind::With;
      while (!at_end()) {
        if (!s->params.empty()) expect_op(",");
        std::string name = expect_name();
        expect_op("=");
        s->params.emplace_back(std::move(name), parse_expression(true));
      }
      s->body = parse_body({"endwith"}, "with", line, &end);
      expect_end();
      return s;
    }
    if (tag == "generation") {
      s->kind = StmtKind::Scope;
      expect_end();
      s->body = parse_body({"endgeneration"}, "generation", line, &end);
      expect_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loops_ == 0) syntax_error(line, "'" + tag + "' outside of a for loop");
      s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
      expect_end();
      return s;
    }
    static const char* unsupported[] = {"include", "import", "from", "extends", "block", "do", "autoescape", "trans", "pluralize"};
    for (const char* u : unsupported)
      if (tag == u) syntax_error(line, "the '" + tag + "' tag is not supported");
    syntax_error(line, "unknown tag '" + tag + "'");
  }

  // for/set targets: a name, or names separated by commas, optionally in parentheses.
  std::vector<std::string> parse_targets() {
    const bool paren = at_op("(");
    if (paren) next();
    std::vector<std::string> names{expect_name()};
    while (at_op(",")) {
      next();
      if (cur().kind != Tok::Name || at_name("in")) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    while (!at_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (at_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (at_op("=")) {
        next();
        def = parse_expression(true);
      } else if (!s.params.empty() && s.params.back().second) {
        syntax_error(cur().line, "non-default argument follows default argument");
      }
      s.params.emplace_back(std::move(name), std::move(def));
    }
    next();
  }

  // ---- expressions (jinja2/parser.py precedence) ----

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this, cur().line);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  // A comma-separated tuple (a list value) or a single expression.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const char* extra_end = nullptr) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    for (;;) {
      if (!args.empty()) expect_op(",");
      if (at_end() || at_op(")") || (extra_end && at_name(extra_end))) break;
      args.push_back(parse_expression(with_condexpr));
      if (at_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) unexpected("an expression");
    }
    auto e = make(ExprKind::List, line);
    e->items = std::move(args);
    return e;
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (at_name("if")) {
      const int line = next().line;
      auto c = make(ExprKind::Cond, line);
      c->a = parse_or();
      c->b = std::move(e);
      if (skip_name("else")) c->c = parse_expression(true);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind kind, ExprPtr l, ExprPtr r, int line) {
    auto e = make(kind, line);
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      e = binary(ExprKind::Or, std::move(e), parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      e = binary(ExprKind::And, std::move(e), parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this, cur().line);
      auto e = make(ExprKind::Not, next().line);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> operands;
    std::vector<CmpOp> ops;
    for (;;) {
      static const std::pair<const char*, CmpOp> table[] = {{"==", CmpOp::Eq}, {"!=", CmpOp::Ne}, {"<", CmpOp::Lt},
                                                            {"<=", CmpOp::Le}, {">", CmpOp::Gt}, {">=", CmpOp::Ge}};
      std::optional<CmpOp> op;
      for (const auto& [t, o] : table)
        if (at_op(t)) op = o;
      if (op) {
        next();
      } else if (at_name("in")) {
        next();
        op = CmpOp::In;
      } else if (at_name("not") && peek().kind == Tok::Name && peek().text == "in") {
        next();
        next();
        op = CmpOp::NotIn;
      } else {
        break;
      }
      ops.push_back(*op);
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = make(ExprKind::Compare, line);
    e->items.push_back(std::move(first));
    for (auto& o : operands) e->items.push_back(std::move(o));
    e->cmps = std::move(ops);
    return e;
  }

  ExprPtr arith(BinOp op, ExprPtr l, ExprPtr r, int line) {
    auto e = binary(ExprKind::Binary, std::move(l), std::move(r), line);
    e->op = op;
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      const BinOp op = t.text == "+" ? BinOp::Add : BinOp::Sub;
      e = arith(op, std::move(e), parse_concat(), t.line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (at_op("~")) {
      const int line = next().line;
      e = arith(BinOp::Concat, std::move(e), parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      const BinOp op = t.text == "*" ? BinOp::Mul : t.text == "/" ? BinOp::Div : t.text == "//" ? BinOp::FloorDiv : BinOp::Mod;
      e = arith(op, std::move(e), parse_pow(), t.line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (at_op("**")) {
      const int line = next().line;
      e = arith(BinOp::Pow, std::move(e), parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      DepthGuard guard(*this, cur().line);
      const Token& t = next();
      e = make(t.text == "-" ? ExprKind::Neg : ExprKind::Pos, t.line);
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case Tok::Name: {
        next();
        auto e = make(ExprKind::Literal, t.line);
        if (t.text == "true" || t.text == "True") {
          e->value = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::Name;
          e->name = t.text;
        }
        return e;
      }
      case Tok::String: {
        auto e = make(ExprKind::Literal, t.line);
        std::string s;
        while (cur().kind == Tok::String) s += next().text;
        e->value = Value(std::move(s));
        return e;
      }
      case Tok::Int:
      case Tok::Float: {
        auto e = make(ExprKind::Literal, t.line);
        e->value = next().value;
        return e;
      }
      case Tok::Op: {
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[" || t.text == "{") {
          const bool is_list = t.text == "[";
          const char* close = is_list ? "]" : "}";
          auto e = make(is_list ? ExprKind::List : ExprKind::Dict, next().line);
          while (!at_op(close)) {
            if (!e->items.empty()) {
              expect_op(",");
              if (at_op(close)) break;
            }
            e->items.push_back(parse_expression(true));
            if (!is_list) {
              expect_op(":");
              e->items.push_back(parse_expression(true));
            }
          }
          next();
          return e;
        }
        break;
      }
      case Tok::End: break;
    }
    unexpected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (at_op(".") || at_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (at_op("|")) {
        e = parse_filter(std::move(e), false);
      } else if (at_name("is")) {
        e = parse_test(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token& t = next();
    if (t.text == ".") {
      if (cur().kind == Tok::Name) {
        auto e = make(ExprKind::GetAttr, t.line);
        e->a = std::move(obj);
        e->name = next().text;
        return e;
      }
      if (cur().kind != Tok::Int) unexpected("a name or number after '.'");
      auto e = make(ExprKind::GetItem, t.line);
      e->a = std::move(obj);
      e->b = make(ExprKind::Literal, t.line);
      e->b->value = next().value;
      return e;
    }
    // '[' index or slice ']'
    ExprPtr start, stop, step;
    bool slice = false;
    if (!at_op(":")) start = parse_expression(true);
    if (at_op(":")) {
      slice = true;
      next();
      if (!at_op("]") && !at_op(":")) stop = parse_expression(true);
      if (at_op(":")) {
        next();
        if (!at_op("]")) step = parse_expression(true);
      }
    }
    if (at_op(",")) syntax_error(cur().line, "tuple subscripts are not supported");
    expect_op("]");
    auto e = make(slice ? ExprKind::Slice : ExprKind::GetItem, t.line);
    e->a = std::move(obj);
    e->b = std::move(start);
    e->c = std::move(stop);
    e->d = std::move(step);
    return e;
  }

  // '(' args ')' into e->items and e->kwargs.
  void parse_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (!e.items.empty() || !e.kwargs.empty()) {
        expect_op(",");
        if (at_op(")")) break;
      }
      if (at_op("*") || at_op("**")) syntax_error(cur().line, "*args and **kwargs in calls are not supported");
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) syntax_error(cur().line, "positional argument follows keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(ExprKind::Call, cur().line);
    e->a = std::move(callee);
    parse_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (at_op(".") && peek().kind == Tok::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr arg, bool start_inline) {
    while (at_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const int line = cur().line;
      auto e = make(ExprKind::Filter, line);
      e->name = dotted_name();
      e->filter = find_filter(e->name);
      if (!e->filter) syntax_error(line, "no filter named '" + e->name + "'");
      e->a = std::move(arg);
      if (at_op("(")) parse_args(*e);
      arg = std::move(e);
    }
    return arg;
  }

  ExprPtr parse_test(ExprPtr arg) {
    const int line = next().line;
    auto e = make(ExprKind::Test, line);
    e->negated = skip_name("not");
    e->name = dotted_name();
    e->test = find_test(e->name);
    if (!e->test) syntax_error(line, "no test named '" + e->name + "'");
    e->a = std::move(arg);
    if (at_op("(")) {
      parse_args(*e);
    } else if ((cur().kind == Tok::Name && !at_name("else") && !at_name("or") && !at_name("and")) ||
               cur().kind == Tok::String || cur().kind == Tok::Int || cur().kind == Tok::Float ||
               at_op("(") || at_op("[") || at_op("{")) {
      ExprPtr a = parse_primary();
      e->items.push_back(parse_postfix(std::move(a)));
    }
    return e;
  }

  std::vector<Item> items_;
  std::size_t ip_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  std::size_t tp_ = 0;
  int depth_ = 0, max_depth_;
  int loops_ = 0;
};

} // namespace

Body parse_template(const std::string& source, int max_depth) {
  return Parser(lex_template(source), max_depth).parse();
}

} // namespace nuvec::lm::jinja
