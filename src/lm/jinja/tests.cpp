// jinja2's builtin tests (jinja2/tests.py, 3.1): `x is defined`, `x is string`, `x is divisibleby 3`...
// Python's isinstance checks on the template values; `sequence` and `iterable` hold for Undefined,
// as jinja2.runtime.Undefined has __len__, __getitem__ and __iter__.
#include "lm/jinja/builtins.h"
#include "lm/jinja/interpreter.h"

namespace nuvec::lm::jinja {

namespace {

const Value& other(const char* name, Args& a) {
  if (a.pos.size() + a.kw.size() != 1) throw RenderError(std::string("TypeError: test '") + name + "' takes one argument");
  return a.pos.empty() ? a.kw[0].second : a.pos[0];
}
void no_args(const char* name, Args& a) {
  if (!a.pos.empty() || !a.kw.empty()) throw RenderError(std::string("TypeError: test '") + name + "' takes no arguments");
}

bool t_defined(Interpreter&, const Value& v, Args& a) { return no_args("defined", a), !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, Args& a) { return no_args("undefined", a), v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, Args& a) { return no_args("none", a), v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, Args& a) { return no_args("boolean", a), v.is_bool(); }
bool t_false(Interpreter&, const Value& v, Args& a) { return no_args("false", a), v.is_bool() && !v.as_bool(); }
bool t_true(Interpreter&, const Value& v, Args& a) { return no_args("true", a), v.is_bool() && v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, Args& a) { return no_args("integer", a), v.is_int(); }
bool t_float(Interpreter&, const Value& v, Args& a) { return no_args("float", a), v.is_float(); }
bool t_number(Interpreter&, const Value& v, Args& a) { return no_args("number", a), v.is_number(); }
bool t_string(Interpreter&, const Value& v, Args& a) { return no_args("string", a), v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, Args& a) { return no_args("mapping", a), v.is_dict(); }
bool t_sequence(Interpreter&, const Value& v, Args& a) {
  no_args("sequence", a);
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_iterable(Interpreter&, const Value& v, Args& a) {
  no_args("iterable", a);
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.kind() == Value::Kind::Loop;
}
bool t_callable(Interpreter&, const Value& v, Args& a) { return no_args("callable", a), v.is_callable(); }
bool t_escaped(Interpreter&, const Value&, Args& a) { return no_args("escaped", a), false; }
bool t_sameas(Interpreter&, const Value& v, Args& a) {
  const Value& o = other("sameas", a);
  if (v.identity() || o.identity()) return v.identity() == o.identity();
  return v.kind() == o.kind() && equals(v, o);
}
bool t_in(Interpreter&, const Value& v, Args& a) { return contains(other("in", a), v); }
bool t_eq(Interpreter&, const Value& v, Args& a) { return equals(v, other("eq", a)); }
bool t_ne(Interpreter&, const Value& v, Args& a) { return !equals(v, other("ne", a)); }
bool t_lt(Interpreter&, const Value& v, Args& a) { return compare(v, other("lt", a), "<") < 0; }
bool t_le(Interpreter&, const Value& v, Args& a) { return compare(v, other("le", a), "<=") <= 0; }
bool t_gt(Interpreter&, const Value& v, Args& a) { return compare(v, other("gt", a), ">") > 0; }
bool t_ge(Interpreter&, const Value& v, Args& a) { return compare(v, other("ge", a), ">=") >= 0; }
bool t_lower(Interpreter& in, const Value& v, Args& a) {
  no_args("lower", a);
  Args none;
  return truthy(in.call(in.getattr(Value(to_str(v)), "islower"), none));
}
bool t_upper(Interpreter& in, const Value& v, Args& a) {
  no_args("upper", a);
  Args none;
  return truthy(in.call(in.getattr(Value(to_str(v)), "isupper"), none));
}
std::int64_t int_value(const char* name, const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  return int_arg(name, v);
}
bool t_odd(Interpreter&, const Value& v, Args& a) { return no_args("odd", a), int_value("odd", v) % 2 != 0; }
bool t_even(Interpreter&, const Value& v, Args& a) { return no_args("even", a), int_value("even", v) % 2 == 0; }
bool t_divisibleby(Interpreter&, const Value& v, Args& a) {
  const std::int64_t d = int_value("divisibleby", other("divisibleby", a));
  if (d == 0) throw RenderError("ZeroDivisionError: integer division or modulo by zero");
  return int_value("divisibleby", v) % d == 0;
}
bool t_filter(Interpreter&, const Value& v, Args& a) { return no_args("filter", a), v.is_string() && find_filter(v.str()); }
bool t_test(Interpreter&, const Value& v, Args& a) { return no_args("test", a), v.is_string() && find_test(v.str()); }

struct TestEntry {
  const char* name;
  TestFn fn;
};

const TestEntry kTests[] = {
    {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"boolean", t_boolean},
    {"false", t_false},       {"true", t_true},           {"integer", t_integer},   {"float", t_float},
    {"number", t_number},     {"string", t_string},       {"mapping", t_mapping},   {"sequence", t_sequence},
    {"iterable", t_iterable}, {"callable", t_callable},   {"escaped", t_escaped},   {"sameas", t_sameas},
    {"in", t_in},             {"eq", t_eq},               {"equalto", t_eq},        {"==", t_eq},
    {"ne", t_ne},             {"!=", t_ne},               {"lt", t_lt},             {"lessthan", t_lt},
    {"<", t_lt},              {"le", t_le},               {"<=", t_le},             {"gt", t_gt},
    {"greaterthan", t_gt},    {">", t_gt},                {"ge", t_ge},             {">=", t_ge},
    {"lower", t_lower},       {"upper", t_upper},         {"odd", t_odd},           {"even", t_even},
    {"divisibleby", t_divisibleby}, {"filter", t_filter}, {"test", t_test},
};

} // namespace

TestFn find_test(std::string_view name) {
  for (const TestEntry& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

} // namespace nuvec::lm::jinja
