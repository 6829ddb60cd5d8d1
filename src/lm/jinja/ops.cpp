// Python's operators on template values (CPython Objects/abstract.c, longobject.c, floatobject.c):
// + - * / // % ** with int/float promotion, floor division and modulo rounding toward negative
// infinity, str and list concatenation and repetition, `in`, iteration, slicing
// (PySlice_AdjustIndices) and printf-style str % args (Objects/unicodeobject.c).
#include "lm/jinja/builtins.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace nuvec::lm::jinja {

namespace {

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw RenderError(std::string("TypeError: unsupported operand type(s) for ") + op + ": '" + type_name(a) +
                    "' and '" + type_name(b) + "'");
}

std::int64_t as_i64(const Value& v) { return v.is_bool() ? v.as_bool() : v.as_int(); }
bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void overflow() { throw RenderError("OverflowError: integer result does not fit in 64 bits"); }

Value repeat(const Value& seq, std::int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  List out;
  for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out));
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

} // namespace

Value binary_op(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = is_integral(a) && is_integral(b);
  switch (op) {
    case BinOp::Add:
      if (ints) {
        std::int64_t r;
        if (__builtin_add_overflow(as_i64(a), as_i64(b), &r)) overflow();
        return Value(r);
      }
      if (nums) return Value(a.to_double() + b.to_double());
      if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
      if (a.is_list() && b.is_list()) {
        List out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(out));
      }
      if (a.is_string())
        throw RenderError("TypeError: can only concatenate str (not \"" + type_name(b) + "\") to str");
      if (a.is_list())
        throw RenderError("TypeError: can only concatenate list (not \"" + type_name(b) + "\") to list");
      unsupported("+", a, b);
    case BinOp::Sub:
      if (ints) {
        std::int64_t r;
        if (__builtin_sub_overflow(as_i64(a), as_i64(b), &r)) overflow();
        return Value(r);
      }
      if (nums) return Value(a.to_double() - b.to_double());
      unsupported("-", a, b);
    case BinOp::Mul:
      if (ints) {
        std::int64_t r;
        if (__builtin_mul_overflow(as_i64(a), as_i64(b), &r)) overflow();
        return Value(r);
      }
      if (nums) return Value(a.to_double() * b.to_double());
      if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, as_i64(b));
      if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(b, as_i64(a));
      unsupported("*", a, b);
    case BinOp::Div:
      if (!nums) unsupported("/", a, b);
      if (b.to_double() == 0) throw RenderError("ZeroDivisionError: division by zero");
      return Value(a.to_double() / b.to_double());
    case BinOp::FloorDiv:
      if (!nums) unsupported("//", a, b);
      if (ints) {
        const std::int64_t x = as_i64(a), y = as_i64(b);
        if (y == 0) throw RenderError("ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) overflow();
        std::int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value(q);
      }
      if (b.to_double() == 0) throw RenderError("ZeroDivisionError: float floor division by zero");
      return Value(std::floor(a.to_double() / b.to_double()));
    case BinOp::Mod:
      if (a.is_string()) return Value(percent_format(a.str(), b));
      if (!nums) unsupported("%", a, b);
      if (ints) {
        const std::int64_t x = as_i64(a), y = as_i64(b);
        if (y == 0) throw RenderError("ZeroDivisionError: integer division or modulo by zero");
        if (y == -1) return Value(std::int64_t(0));
        std::int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value(m);
      }
      if (b.to_double() == 0) throw RenderError("ZeroDivisionError: float modulo");
      return Value(py_fmod(a.to_double(), b.to_double()));
    case BinOp::Pow:
      if (!nums) unsupported("** or pow()", a, b);
      if (ints && as_i64(b) >= 0) {
        std::int64_t base = as_i64(a), e = as_i64(b), r = 1;
        while (e > 0) {
          if ((e & 1) && __builtin_mul_overflow(r, base, &r)) overflow();
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
        }
        return Value(r);
      }
      if (a.to_double() == 0 && b.to_double() < 0)
        throw RenderError("ZeroDivisionError: 0.0 cannot be raised to a negative power");
      return Value(std::pow(a.to_double(), b.to_double()));
    case BinOp::Concat: return Value(to_str(a) + to_str(b));
  }
  return Value();
}

Value negate(const Value& v, bool minus) {
  if (v.is_undefined()) fail_undefined(v);
  if (is_integral(v)) {
    if (!minus) return Value(as_i64(v));
    if (as_i64(v) == INT64_MIN) overflow();
    return Value(-as_i64(v));
  }
  if (v.is_float()) return Value(minus ? -v.as_float() : v.as_float());
  throw RenderError(std::string("TypeError: bad operand type for unary ") + (minus ? "-" : "+") + ": '" +
                    type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        throw RenderError("TypeError: 'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Value::Kind::Dict: return item.is_string() && container.dict().find(item.str()) != nullptr;
    default:
      throw RenderError("TypeError: argument of type '" + type_name(container) + "' is not iterable");
  }
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      List keys;
      keys.reserve(v.dict().entries.size());
      for (const auto& [k, x] : v.dict().entries) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (std::string_view c : utf8_chars(v.str())) chars.emplace_back(std::string(c));
      return chars;
    }
    default: throw RenderError("TypeError: '" + type_name(v) + "' object is not iterable");
  }
}

Value slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_list() && !obj.is_string()) {
    std::string hint = "'";  // (built piecewise: GCC 12 warns falsely on "'" + std::string&&)
    hint += type_name(obj);
    hint += " object' is not subscriptable";
    return Value::undefined(std::move(hint));
  }
  auto index = [](const Value& v) -> std::optional<std::int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!is_integral(v)) throw RenderError("TypeError: slice indices must be integers or None");
    return as_i64(v);
  };
  const std::optional<std::int64_t> s0 = index(start_v), s1 = index(stop_v), st = index(step_v);
  const std::int64_t step = st.value_or(1);
  if (step == 0) throw RenderError("ValueError: slice step cannot be zero");
  std::vector<std::string_view> chars;
  if (obj.is_string()) chars = utf8_chars(obj.str());
  const std::int64_t n = obj.is_string() ? std::int64_t(chars.size()) : std::int64_t(obj.items().size());
  auto adjust = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
    if (!v) return dflt;
    std::int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const std::int64_t start = adjust(s0, step < 0 ? n - 1 : 0);
  const std::int64_t stop = adjust(s1, step < 0 ? -1 : n);
  if (obj.is_string()) {
    std::string out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out += chars[std::size_t(i)];
    return Value(std::move(out));
  }
  List out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(obj.items()[std::size_t(i)]);
  return Value::list(std::move(out));
}

std::string percent_format(const std::string& fmt, const Value& args) {
  List values = args.is_list() ? args.items() : List{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw RenderError("ValueError: incomplete format");
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) spec += fmt[i++];
    while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.')) spec += fmt[i++];
    if (i >= fmt.size()) throw RenderError("ValueError: incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw RenderError("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        const std::string s = conv == 's' ? to_str(v) : to_repr(v);
        std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
        out += s.size() >= sizeof buf - 1 ? s : std::string(buf);
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number()) throw RenderError("TypeError: %" + std::string(1, conv) + " format: a number is required, not " + type_name(v));
        const long long x = v.is_float() ? (long long)v.as_float() : (long long)as_i64(v);
        std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), x);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v.is_number()) throw RenderError("TypeError: must be real number, not " + type_name(v));
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.to_double());
        out += buf;
        break;
      }
      default: throw RenderError(std::string("ValueError: unsupported format character '") + conv + "'");
    }
  }
  if (next < values.size() && args.is_list())
    throw RenderError("TypeError: not all arguments converted during string formatting");
  return out;
}

} // namespace nuvec::lm::jinja
