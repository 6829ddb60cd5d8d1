// Statement execution and expression evaluation, after the Python that jinja2/compiler.py
// generates: a for body and a macro body get their own scope (a set inside them is not seen
// outside, hence namespace()), if/else does not; attribute access tries the attribute then the
// item, subscription the item then the attribute (Environment.getattr/getitem); an Undefined
// prints as "" and fails when its attributes are read (jinja2.runtime.Undefined).
#include "lm/jinja/interpreter.h"

#include "lm/jinja/builtins.h"

namespace nuvec::lm::jinja {

namespace {

// Evaluation frames (statements and expressions) allowed on the C++ stack in one render.
constexpr int kMaxEvalDepth = 3000;

bool is_index(const Value& v) { return v.is_int() || v.is_bool(); }

} // namespace

struct Interpreter::Depth {
  Interpreter& in;
  explicit Depth(Interpreter& i) : in(i) {
    if (++in.depth_ > kMaxEvalDepth)
      throw RenderError("RecursionError: template evaluation nested deeper than " + std::to_string(kMaxEvalDepth) + " levels");
  }
  ~Depth() { --in.depth_; }
};

std::string Interpreter::render(const Body& body, const Dict& context) {
  root_ = std::make_shared<Scope>();
  root_->vars = context;
  std::string out;
  exec(body, root_, out);
  root_.reset();
  return out;
}

Interpreter::~Interpreter() {
  for (const Value& ns : namespaces_) ns.ns().entries.clear();
}

void Interpreter::count_step() {
  if (++steps_ > limits_.max_iterations)
    throw RenderError("the render exceeded " + std::to_string(limits_.max_iterations) +
                      " loop iterations and macro calls (ChatTemplate::Options::max_iterations)");
}

std::chrono::system_clock::time_point Interpreter::now() const {
  return limits_.clock ? limits_.clock() : std::chrono::system_clock::now();
}

// ---- statements -----------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec(const Body& body, const ScopeP& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopeP& scope, std::string& out) {
  Depth depth(*this);
  if (s.line) line_ = s.line;
  switch (s.kind) {
    case StmtKind::Text: out += s.text; return Flow::Normal;
    case StmtKind::Output: out += to_str(eval(*s.expr, scope)); return Flow::Normal;
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, scope))) return exec(body, scope, out);
      return exec(s.else_body, scope, out);
    case StmtKind::For: exec_for(s, scope, out); return Flow::Normal;
    case StmtKind::Set: {
      Value v = eval(*s.expr, scope);
      if (!s.attr.empty()) {
        Value ns = lookup(scope, s.targets[0]);
        if (!ns.is_namespace())
          throw RenderError("TemplateRuntimeError: cannot assign attribute on non-namespace object");
        namespace_set(ns, s.attr, std::move(v));
      } else {
        bind_targets(s.targets, v, *scope);
      }
      return Flow::Normal;
    }
    case StmtKind::SetBlock: {
      std::string captured;
      exec(s.body, std::make_shared<Scope>(Scope{{}, scope}), captured);
      Value v(std::move(captured));
      if (s.expr) v = apply_filters(*s.expr, scope, std::move(v));
      scope->vars.set(s.targets[0], std::move(v));
      return Flow::Normal;
    }
    case StmtKind::Macro: scope->vars.set(s.name, make_macro(s, scope)); return Flow::Normal;
    case StmtKind::CallBlock: {
      const Expr& call_expr = *s.expr;
      Value callee = eval(*call_expr.a, scope);
      Args args = eval_args(call_expr, scope);
      // `caller` renders the block's body with the caller's arguments, in the current scope.
      const Stmt* stmt = &s;
      std::weak_ptr<Scope> weak = scope;
      auto fn = std::make_shared<Callable>();
      fn->name = "caller";
      fn->fn = [stmt, weak](Interpreter& in, Args& a, const Value*) {
        return in.call_macro(*stmt, weak.lock(), a, nullptr);
      };
      Value caller = Value::callable(std::move(fn));
      line_ = s.line;
      out += to_str(call(callee, args, &caller));
      return Flow::Normal;
    }
    case StmtKind::FilterBlock: {
      std::string captured;
      exec(s.body, std::make_shared<Scope>(Scope{{}, scope}), captured);
      out += to_str(apply_filters(*s.expr, scope, Value(std::move(captured))));
      return Flow::Normal;
    }
    case StmtKind::With: {
      auto inner = std::make_shared<Scope>(Scope{{}, scope});
      for (const auto& [name, expr] : s.params) inner->vars.set(name, eval(*expr, scope));
      return exec(s.body, inner, out);
    }
    case StmtKind::Scope: return exec(s.body, scope, out);
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Interpreter::exec_for(const Stmt& s, const ScopeP& scope, std::string& out) {
  List all = iterate(eval(*s.expr, scope));
  auto items = std::make_shared<List>();
  if (s.cond) {
    for (Value& v : all) {
      count_step();
      auto probe = std::make_shared<Scope>(Scope{{}, scope});
      bind_targets(s.targets, v, *probe);
      if (truthy(eval(*s.cond, probe))) items->push_back(std::move(v));
    }
  } else {
    *items = std::move(all);
  }
  auto info = std::make_shared<LoopInfo>();
  info->length = std::int64_t(items->size());
  info->items = items;
  for (std::size_t i = 0; i < items->size(); ++i) {
    count_step();
    auto iter = std::make_shared<Scope>(Scope{{}, scope});
    bind_targets(s.targets, (*items)[i], *iter);
    // A fresh loop object per iteration, so one stored away keeps its own position.
    auto at = std::make_shared<LoopInfo>(*info);
    at->index0 = std::int64_t(i);
    iter->vars.set("loop", Value::loop(std::move(at)));
    if (exec(s.body, iter, out) == Flow::Break) break;
  }
  if (items->empty()) exec(s.else_body, scope, out);
}

void Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  if (targets.size() == 1) {
    scope.vars.set(targets[0], v);
    return;
  }
  List parts = iterate(v);
  if (parts.size() != targets.size())
    throw RenderError(std::string("ValueError: ") + (parts.size() > targets.size() ? "too many" : "not enough") +
                      " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                      std::to_string(parts.size()) + ")");
  for (std::size_t i = 0; i < targets.size(); ++i) scope.vars.set(targets[i], std::move(parts[i]));
}

Value Interpreter::apply_filters(const Expr& chain, const ScopeP& scope, Value placeholder) {
  placeholders_.push_back(std::move(placeholder));
  struct Pop {
    std::vector<Value>& v;
    ~Pop() { v.pop_back(); }
  } pop{placeholders_};
  return eval(chain, scope);
}

// ---- macros and calls -----------------------------------------------------------------------

Value Interpreter::make_macro(const Stmt& s, const ScopeP& scope) {
  const Stmt* stmt = &s;
  // A weak reference: the scope holds the macro, so a strong one would never be freed.
  std::weak_ptr<Scope> weak = scope;
  auto fn = std::make_shared<Callable>();
  fn->name = s.name;
  fn->fn = [stmt, weak](Interpreter& in, Args& args, const Value* caller) {
    return in.call_macro(*stmt, weak.lock(), args, caller);
  };
  return Value::callable(std::move(fn));
}

Value Interpreter::call_macro(const Stmt& s, const ScopeP& closure, Args& args, const Value* caller) {
  if (calls_ >= limits_.max_call_depth)
    throw RenderError("RecursionError: macro calls nested deeper than " + std::to_string(limits_.max_call_depth) +
                      " (ChatTemplate::Options::max_call_depth)");
  count_step();
  const std::string what = s.kind == StmtKind::Macro ? "macro '" + s.name + "'" : "caller";
  auto scope = std::make_shared<Scope>(Scope{{}, closure ? closure : root_});
  const std::size_t np = s.params.size();
  if (args.pos.size() > np && !s.uses_varargs)
    throw RenderError("TypeError: " + what + " takes not more than " + std::to_string(np) + " argument(s)");
  std::vector<bool> bound(np, false);
  List varargs;
  for (std::size_t i = 0; i < args.pos.size(); ++i) {
    if (i < np) {
      scope->vars.set(s.params[i].first, std::move(args.pos[i]));
      bound[i] = true;
    } else {
      varargs.push_back(std::move(args.pos[i]));
    }
  }
  Dict kwargs;
  for (auto& [key, v] : args.kw) {
    std::size_t i = 0;
    while (i < np && s.params[i].first != key) ++i;
    if (i < np) {
      if (bound[i]) throw RenderError("TypeError: " + what + " got multiple values for argument '" + key + "'");
      scope->vars.set(key, std::move(v));
      bound[i] = true;
    } else if (key == "caller" && s.uses_caller) {
      scope->vars.set(key, std::move(v));
    } else if (s.uses_kwargs) {
      kwargs.set(key, std::move(v));
    } else {
      throw RenderError("TypeError: " + what + " takes no keyword argument '" + key + "'");
    }
  }
  ++calls_;
  struct Unwind {
    int& c;
    ~Unwind() { --c; }
  } unwind{calls_};
  for (std::size_t i = 0; i < np; ++i) {
    if (bound[i]) continue;
    const auto& [name, def] = s.params[i];
    scope->vars.set(name, def ? eval(*def, scope) : Value::undefined("parameter '" + name + "' was not provided"));
  }
  if (s.uses_varargs) scope->vars.set("varargs", Value::list(std::move(varargs)));
  if (s.uses_kwargs) scope->vars.set("kwargs", Value::dict(std::move(kwargs)));
  if (caller) {
    scope->vars.set("caller", *caller);
  } else if (s.uses_caller && !scope->vars.find("caller")) {
    scope->vars.set("caller", Value::undefined("No caller defined"));
  }
  std::string out;
  exec(s.body, scope, out);
  return Value(std::move(out));
}

Value Interpreter::call(const Value& callee, Args& args, const Value* caller) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) throw RenderError("TypeError: '" + type_name(callee) + "' object is not callable");
  return callee.fn().fn(*this, args, caller);
}

Args Interpreter::eval_args(const Expr& e, const ScopeP& scope) {
  Args args;
  args.pos.reserve(e.items.size());
  for (const auto& a : e.items) args.pos.push_back(eval(*a, scope));
  for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a, scope));
  return args;
}

// ---- expressions ----------------------------------------------------------------------------

Value Interpreter::lookup(const ScopeP& scope, const std::string& name) {
  for (const Scope* s = scope.get(); s; s = s->parent.get())
    if (const Value* v = s->vars.find(name)) return *v;
  if (auto g = global_value(name)) return *g;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: fail_undefined(obj);
    case Value::Kind::Dict: {
      if (auto m = method_of(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::Namespace: {
      if (const Value* v = obj.ns().find(name)) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    case Value::Kind::Loop: {
      const LoopInfo& l = obj.loop();
      const std::int64_t i = l.index0, n = l.length;
      if (name == "index") return Value(i + 1);
      if (name == "index0") return Value(i);
      if (name == "revindex") return Value(n - i);
      if (name == "revindex0") return Value(n - i - 1);
      if (name == "first") return Value(i == 0);
      if (name == "last") return Value(i == n - 1);
      if (name == "length") return Value(n);
      if (name == "depth") return Value(1);
      if (name == "depth0") return Value(0);
      if (name == "previtem")
        return i > 0 ? (*l.items)[std::size_t(i - 1)] : Value::undefined("there is no previous item");
      if (name == "nextitem")
        return i + 1 < n ? (*l.items)[std::size_t(i + 1)] : Value::undefined("there is no next item");
      if (name == "cycle") {
        auto fn = std::make_shared<Callable>();
        fn->name = "loop.cycle";
        fn->fn = [i](Interpreter&, Args& a, const Value*) {
          if (a.pos.empty()) throw RenderError("TypeError: no items for cycling given");
          return a.pos[std::size_t(i) % a.pos.size()];
        };
        return Value::callable(std::move(fn));
      }
      return Value::undefined("'LoopContext object' has no attribute '" + name + "'");
    }
    case Value::Kind::String:
    case Value::Kind::List:
      if (auto m = method_of(obj, name)) return *m;
      [[fallthrough]];
    default: return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
  }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: fail_undefined(obj);
    case Value::Kind::Dict:
      if (key.is_string()) {
        if (const Value* v = obj.dict().find(key.str())) return *v;
        if (auto m = method_of(obj, key.str())) return *m;
      }
      return Value::undefined("'dict object' has no attribute " + to_repr(key));
    case Value::Kind::List:
    case Value::Kind::String:
      if (is_index(key)) {
        const std::int64_t raw = key.is_bool() ? key.as_bool() : key.as_int();
        if (obj.is_list()) {
          const auto n = std::int64_t(obj.items().size());
          const std::int64_t i = raw < 0 ? raw + n : raw;
          if (i >= 0 && i < n) return obj.items()[std::size_t(i)];
        } else {
          auto chars = utf8_chars(obj.str());
          const auto n = std::int64_t(chars.size());
          const std::int64_t i = raw < 0 ? raw + n : raw;
          if (i >= 0 && i < n) return Value(std::string(chars[std::size_t(i)]));
        }
        return Value::undefined("'" + type_name(obj) + " object' has no element " + to_repr(key));
      }
      if (key.is_string()) return getattr(obj, key.str());
      return Value::undefined("'" + type_name(obj) + " object' has no element " + to_repr(key));
    case Value::Kind::Namespace:
    case Value::Kind::Loop:
      if (key.is_string()) return getattr(obj, key.str());
      [[fallthrough]];
    default: return Value::undefined("'" + type_name(obj) + " object' has no attribute " + to_repr(key));
  }
}

Value Interpreter::eval(const Expr& e, const ScopeP& scope) {
  Depth depth(*this);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: return lookup(scope, e.name);
    case ExprKind::List: {
      List items;
      items.reserve(e.items.size());
      for (const auto& i : e.items) items.push_back(eval(*i, scope));
      return Value::list(std::move(items));
    }
    case ExprKind::Dict: {
      Dict d;
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i], scope);
        d.set(k.is_string() ? k.str() : to_str(k), eval(*e.items[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::GetAttr: {
      Value obj = eval(*e.a, scope);
      line_ = e.line;
      return getattr(obj, e.name);
    }
    case ExprKind::GetItem: {
      Value obj = eval(*e.a, scope);
      Value key = eval(*e.b, scope);
      line_ = e.line;
      return getitem(obj, key);
    }
    case ExprKind::Slice: {
      Value obj = eval(*e.a, scope);
      Value start = e.b ? eval(*e.b, scope) : Value::none();
      Value stop = e.c ? eval(*e.c, scope) : Value::none();
      Value step = e.d ? eval(*e.d, scope) : Value::none();
      line_ = e.line;
      return slice(obj, start, stop, step);
    }
    case ExprKind::Call: {
      Value callee = eval(*e.a, scope);
      Args args = eval_args(e, scope);
      line_ = e.line;
      return call(callee, args, nullptr);
    }
    case ExprKind::Filter: {
      Value v = e.a->kind == ExprKind::Placeholder ? placeholders_.back() : eval(*e.a, scope);
      Args args = eval_args(e, scope);
      line_ = e.line;
      return e.filter(*this, v, args);
    }
    case ExprKind::Test: {
      Value v = eval(*e.a, scope);
      Args args = eval_args(e, scope);
      line_ = e.line;
      return Value(e.test(*this, v, args) != e.negated);
    }
    case ExprKind::Not: return Value(!truthy(eval(*e.a, scope)));
    case ExprKind::Neg:
    case ExprKind::Pos: return negate(eval(*e.a, scope), e.kind == ExprKind::Neg);
    case ExprKind::Binary: {
      Value a = eval(*e.a, scope);
      Value b = eval(*e.b, scope);
      line_ = e.line;
      if (e.op == BinOp::Concat) return Value(to_str(a) + to_str(b));
      return binary_op(e.op, a, b);
    }
    case ExprKind::And: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? eval(*e.b, scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? a : eval(*e.b, scope);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0], scope);
      for (std::size_t i = 0; i < e.cmps.size(); ++i) {
        Value right = eval(*e.items[i + 1], scope);
        line_ = e.line;
        bool r = false;
        switch (e.cmps[i]) {
          case CmpOp::Eq: r = equals(left, right); break;
          case CmpOp::Ne: r = !equals(left, right); break;
          case CmpOp::Lt: r = compare(left, right, "<") < 0; break;
          case CmpOp::Le: r = compare(left, right, "<=") <= 0; break;
          case CmpOp::Gt: r = compare(left, right, ">") > 0; break;
          case CmpOp::Ge: r = compare(left, right, ">=") >= 0; break;
          case CmpOp::In: r = contains(right, left); break;
          case CmpOp::NotIn: r = !contains(right, left); break;
        }
        if (!r) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::Cond:
      if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::Placeholder: return placeholders_.back();
  }
  return Value();
}

} // namespace nuvec::lm::jinja
