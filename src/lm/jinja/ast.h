// The syntax tree of a parsed Jinja template (the node set of jinja2/nodes.py that chat templates
// use), and the parser entry point. The parser follows jinja2/parser.py's grammar and precedence;
// the lexer follows jinja2/lexer.py with trim_blocks=True and lstrip_blocks=True, as transformers'
// chat template environment sets them.
#pragma once

#include "lm/jinja/value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nuvec::lm::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A filter or test of the builtin tables (builtins.cpp).
using FilterFn = Value (*)(Interpreter&, const Value&, Args&);
using TestFn = bool (*)(Interpreter&, const Value&, Args&);

enum class ExprKind {
  Literal,      // value
  Name,         // name
  List,         // items
  Dict,         // items: key, value, key, value, ...
  GetAttr,      // a.name
  GetItem,      // a[b]
  Slice,        // a[b:c:d], each of b, c, d optional
  Call,         // a(items..., kwargs...)
  Filter,       // a | name(items..., kwargs...)
  Test,         // a is [not] name(items..., kwargs...)
  Not,          // not a
  Neg,          // -a
  Pos,          // +a
  Binary,       // a op b
  And,          // a and b
  Or,           // a or b
  Compare,      // items[0] cmps[0] items[1] cmps[1] items[2] ...
  Cond,         // b if a else c
  Placeholder,  // the text of a {% filter %} or {% set x | f %} block
};

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat };
enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  BinOp op = BinOp::Add;
  std::vector<CmpOp> cmps;
  bool negated = false;  // is not
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

enum class StmtKind {
  Text,         // text
  Output,       // {{ expr }}
  If,           // branches (cond, body)..., else_body
  For,          // for targets in expr [if cond]: body, else_body
  Set,          // set targets = expr; or ns.attr = expr (targets = {ns}, attr)
  SetBlock,     // set targets[0] [| filters]: body  (expr is the filter chain or null)
  Macro,        // macro name(params): body
  CallBlock,    // call(params) expr: body
  FilterBlock,  // filter expr: body
  With,         // with params: body
  Scope,        // body in the current scope ({% generation %})
  Break,
  Continue,
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  // Macro, CallBlock: parameters with optional defaults; With: the assignments.
  std::vector<std::pair<std::string, ExprPtr>> params;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

// Parses `source` (newlines normalised as jinja2 does). Throws std::invalid_argument
// ("[lm.ChatTemplate] line N: ...") for syntax errors, unknown tags, filters or tests, unclosed
// blocks and nesting beyond `max_depth`.
Body parse_template(const std::string& source, int max_depth);

} // namespace nuvec::lm::jinja
