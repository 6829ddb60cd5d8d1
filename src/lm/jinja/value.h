// Values of the Jinja interpreter behind nuvec::lm::ChatTemplate: the Python objects a Jinja2
// template sees (None, bool, int, float, str, list, dict and jinja2's default Undefined), plus
// namespace objects, loop objects and callables. Printing, equality, ordering and truth follow
// Python 3 (str(), repr(), ==, <, bool()); tojson follows json.dumps as transformers calls it
// (transformers/utils/chat_template_utils.py: ensure_ascii=False, sort_keys=False).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace nuvec::lm::jinja {

class Value;
class Interpreter;
struct Dict;
struct LoopInfo;
struct Callable;
using List = std::vector<Value>;

// A Python-level error of the template at render time (TypeError, UndefinedError, ...); the
// interpreter adds the template line when it reaches ChatTemplate::render.
struct RenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// raise_exception(message) from the template: propagates with exactly `message` as what().
struct RaisedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Loop, Callable };

  Value() : v_(UndefinedV{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(std::int64_t(i)) {}
  Value(std::int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}

  // Undefined carrying the message jinja2 would raise when it is used (e.g. "'x' is undefined").
  static Value undefined(std::string hint = {});
  static Value none();
  static Value list(List items);
  static Value dict(Dict d);
  static Value namespace_(Dict d);
  static Value loop(std::shared_ptr<LoopInfo> l);
  static Value callable(std::shared_ptr<Callable> c);

  Kind kind() const { return Kind(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // Numeric value of a bool, int or float.
  double to_double() const;
  const std::string& str() const { return std::get<std::string>(v_); }
  const List& items() const { return std::get<ListP>(v_)->items; }
  const Dict& dict() const;
  Dict& ns() const;  // a namespace's attributes (mutable through {% set ns.x = ... %})
  LoopInfo& loop() const { return *std::get<LoopP>(v_); }
  const Callable& fn() const { return *std::get<CallableP>(v_); }
  const std::string& undefined_hint() const { return std::get<UndefinedV>(v_).hint; }
  // Identity of a shared object (list, dict, namespace, loop, callable); nullptr otherwise.
  const void* identity() const;
  // Nesting depth: 0 for a scalar, 1 + the deepest element for a list, dict or namespace.
  int depth() const;

 private:
  struct UndefinedV {
    std::string hint;
  };
  struct NoneV {};
  struct ListBox {
    List items;
    int depth;
  };
  using ListP = std::shared_ptr<const ListBox>;
  using DictP = std::shared_ptr<const Dict>;
  struct NamespaceP {
    std::shared_ptr<Dict> d;
  };
  using LoopP = std::shared_ptr<LoopInfo>;
  using CallableP = std::shared_ptr<Callable>;
  std::variant<UndefinedV, NoneV, bool, std::int64_t, double, std::string, ListP, DictP, NamespaceP,
               LoopP, CallableP>
      v_;
};

// Containers nested deeper than this are refused (RecursionError), so that printing, comparing,
// serialising and freeing them stays within the C++ stack. Python's own limit is 1000 frames.
constexpr int kMaxValueDepth = 500;

// An insertion-ordered str -> value mapping (Python dict with string keys).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  int depth = 1;  // maintained by Value::dict, Value::namespace_ and namespace_set
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value v);
};

// {% set ns.key = v %}: sets a namespace attribute. Throws RenderError when `ns` would nest
// deeper than kMaxValueDepth.
void namespace_set(const Value& ns, std::string key, Value v);

// The `loop` variable of a for loop.
struct LoopInfo {
  std::int64_t index0 = 0, length = 0;
  std::shared_ptr<const List> items;
};

// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// A function, bound method or macro. `caller` is the body of a {% call %} block, if any.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, Args&, const Value* caller)> fn;
};

// Python's bool(), str(), repr() and type(x).__name__.
bool truthy(const Value& v);
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
std::string type_name(const Value& v);
std::string float_repr(double d);

// Python's == (numbers across bool/int/float, containers by content; Undefined equals Undefined).
bool equals(const Value& a, const Value& b);
// Python's ordering for <, <=, >, >=: negative, zero or positive. Throws RenderError (TypeError)
// for unorderable types and for Undefined operands.
int compare(const Value& a, const Value& b, const char* op = "<");

// json.dumps(v, ensure_ascii=..., indent=indent, separators=separators, sort_keys=...), the
// arguments of transformers' tojson filter (defaults ensure_ascii=False, sort_keys=False).
// `indent` is nullopt for none; `separators` are (item, key) separators, defaulted as Python does.
std::string to_json(const Value& v, const std::optional<std::string>& indent,
                    const std::optional<std::pair<std::string, std::string>>& separators,
                    bool ensure_ascii = false, bool sort_keys = false);

// JSON (an ordered_json keeps the object key order, as Python's json.loads does) to a Value.
Value from_json(const nlohmann::ordered_json& j);

// Throws the error jinja2 raises when an Undefined is used where a value is needed.
[[noreturn]] void fail_undefined(const Value& v);

// ---- UTF-8 strings as Python str: indexing, length and case by code point ------------------

std::vector<std::string_view> utf8_chars(std::string_view s);
std::size_t utf8_length(std::string_view s);
bool is_py_space(char32_t c);
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
char32_t utf8_decode(std::string_view ch);
void append_utf8(std::string& out, char32_t c);

} // namespace nuvec::lm::jinja
