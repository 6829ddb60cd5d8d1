// Python operators on template values (ops.cpp), jinja2's builtin filters (builtins.cpp, after
// jinja2/filters.py) and tests (tests.cpp, after jinja2/tests.py), the str/dict/list methods and
// the globals of transformers' environment (methods.cpp).
#pragma once

#include "lm/jinja/ast.h"

#include <initializer_list>
#include <optional>
#include <string_view>

namespace nuvec::lm::jinja {

// ---- operators (ops.cpp) ----
Value binary_op(BinOp op, const Value& a, const Value& b);
Value negate(const Value& v, bool minus);
// `item in container`.
bool contains(const Value& container, const Value& item);
// Python iter(): list items, dict keys, str characters; Undefined is empty.
List iterate(const Value& v);
// obj[start:stop:step] for str and list; None (or absent) bounds as Python's.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python's str % args.
std::string percent_format(const std::string& fmt, const Value& args);

// ---- filters (builtins.cpp) and tests (tests.cpp): nullptr for an unknown name ----
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// ---- methods and globals (methods.cpp) ----
// obj.name as a bound method of a str, dict or list; nullopt when there is no such method.
std::optional<Value> method_of(const Value& obj, const std::string& name);
// range, dict, namespace, raise_exception, strftime_now; nullopt for other names.
std::optional<Value> global_value(const std::string& name);

// Binds `args` to a Python signature: parameter names in order with their defaults (nullopt:
// required). Throws RenderError (TypeError) for unknown keywords, extra or missing arguments.
std::vector<Value> bind_args(const char* fname, Args& args,
                             std::initializer_list<std::pair<const char*, std::optional<Value>>> params);
// An int argument (bool accepted, as Python does).
std::int64_t int_arg(const char* fname, const Value& v);
// A str argument.
const std::string& str_arg(const char* fname, const Value& v);

} // namespace nuvec::lm::jinja
