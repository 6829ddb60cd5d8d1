// Renders a parsed Jinja template: jinja2's runtime semantics (scoping of set/for/macro,
// Undefined, loop variables, macro calls) as the compiled Python of jinja2/compiler.py behaves
// under transformers' ImmutableSandboxedEnvironment.
#pragma once

#include "lm/jinja/ast.h"

#include <chrono>
#include <functional>

namespace nuvec::lm::jinja {

struct Limits {
  int max_call_depth;            // nesting of macro calls
  std::int64_t max_iterations;   // loop iterations plus macro calls in one render
  std::function<std::chrono::system_clock::time_point()> clock;  // strftime_now
};

class Interpreter {
 public:
  explicit Interpreter(const Limits& limits) : limits_(limits) {}
  // Empties the namespaces of the render, which may hold themselves ({% set ns.me = ns %}).
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with the variables of `context`. Throws RenderError (line() tells where) or
  // RaisedError (raise_exception).
  std::string render(const Body& body, const Dict& context);
  // The template line of the last statement or expression evaluated.
  int line() const { return line_; }

  // For the builtins: calls, attribute and item access as the template's own expressions do.
  Value call(const Value& callee, Args& args, const Value* caller = nullptr);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  std::chrono::system_clock::time_point now() const;
  // Counts one loop iteration or call against max_iterations.
  void count_step();
  // Registers a namespace() of this render, emptied when the render ends.
  void track_namespace(const Value& ns) { namespaces_.push_back(ns); }

 private:
  struct Scope {
    Dict vars;
    std::shared_ptr<Scope> parent;
  };
  using ScopeP = std::shared_ptr<Scope>;
  enum class Flow { Normal, Break, Continue };
  struct Depth;

  Flow exec(const Body& body, const ScopeP& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopeP& scope, std::string& out);
  void exec_for(const Stmt& s, const ScopeP& scope, std::string& out);
  Value eval(const Expr& e, const ScopeP& scope);
  Value lookup(const ScopeP& scope, const std::string& name);
  void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope);
  Args eval_args(const Expr& e, const ScopeP& scope);
  Value make_macro(const Stmt& s, const ScopeP& scope);
  Value call_macro(const Stmt& s, const ScopeP& closure, Args& args, const Value* caller);
  Value apply_filters(const Expr& chain, const ScopeP& scope, Value placeholder);

  Limits limits_;
  ScopeP root_;
  std::vector<Value> placeholders_;
  std::vector<Value> namespaces_;
  int line_ = 0;
  int depth_ = 0, calls_ = 0;
  std::int64_t steps_ = 0;
};

} // namespace nuvec::lm::jinja
