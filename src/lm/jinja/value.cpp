// Python semantics of the Jinja interpreter's values: str()/repr() (CPython Objects/unicodeobject.c
// and floatobject.c's repr: shortest round-trip digits, exponent form below 1e-4 and from 1e16),
// ==/< (Objects/object.c rich comparison) and json.dumps (Lib/json/encoder.py).
#include "lm/jinja/value.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace nuvec::lm::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.v_ = UndefinedV{std::move(hint)};
  return v;
}
Value Value::none() {
  Value v;
  v.v_ = NoneV{};
  return v;
}
namespace {

[[noreturn]] void too_deep() {
  throw RenderError("RecursionError: a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
}

int checked_depth(int child_depth) {
  if (child_depth + 1 > kMaxValueDepth) too_deep();
  return child_depth + 1;
}

int dict_depth(const Dict& d) {
  int deepest = 0;
  for (const auto& [k, v] : d.entries) deepest = std::max(deepest, v.depth());
  return checked_depth(deepest);
}

} // namespace

Value Value::list(List items) {
  int deepest = 0;
  for (const Value& x : items) deepest = std::max(deepest, x.depth());
  Value v;
  v.v_ = std::make_shared<const ListBox>(ListBox{std::move(items), checked_depth(deepest)});
  return v;
}
Value Value::dict(Dict d) {
  d.depth = dict_depth(d);
  Value v;
  v.v_ = std::make_shared<const Dict>(std::move(d));
  return v;
}
Value Value::namespace_(Dict d) {
  d.depth = dict_depth(d);
  Value v;
  v.v_ = NamespaceP{std::make_shared<Dict>(std::move(d))};
  return v;
}

int Value::depth() const {
  switch (kind()) {
    case Kind::List: return std::get<ListP>(v_)->depth;
    case Kind::Dict: return dict().depth;
    case Kind::Namespace: return ns().depth;
    default: return 0;
  }
}

void namespace_set(const Value& ns, std::string key, Value v) {
  Dict& d = ns.ns();
  d.depth = std::max(d.depth, checked_depth(v.depth()));
  d.set(std::move(key), std::move(v));
}
Value Value::loop(std::shared_ptr<LoopInfo> l) {
  Value v;
  v.v_ = std::move(l);
  return v;
}
Value Value::callable(std::shared_ptr<Callable> c) {
  Value v;
  v.v_ = std::move(c);
  return v;
}

const Dict& Value::dict() const { return *std::get<DictP>(v_); }
Dict& Value::ns() const { return *std::get<NamespaceP>(v_).d; }

double Value::to_double() const {
  switch (kind()) {
    case Kind::Bool: return as_bool() ? 1.0 : 0.0;
    case Kind::Int: return double(as_int());
    case Kind::Float: return as_float();
    default: throw RenderError("TypeError: a number is required, got '" + type_name(*this) + "'");
  }
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::List: return std::get<ListP>(v_).get();
    case Kind::Dict: return std::get<DictP>(v_).get();
    case Kind::Namespace: return std::get<NamespaceP>(v_).d.get();
    case Kind::Loop: return std::get<LoopP>(v_).get();
    case Kind::Callable: return std::get<CallableP>(v_).get();
    default: return nullptr;
  }
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}
void Dict::set(std::string key, Value v) {
  if (Value* old = find(key)) {
    *old = std::move(v);
  } else {
    entries.emplace_back(std::move(key), std::move(v));
  }
}

void fail_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  throw RenderError("UndefinedError: " + (hint.empty() ? std::string("value is undefined") : hint));
}

// ---- truth, printing ------------------------------------------------------------------------

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_float() != 0.0;
    case Value::Kind::String: return !v.str().empty();
    case Value::Kind::List: return !v.items().empty();
    case Value::Kind::Dict: return !v.dict().entries.empty();
    case Value::Kind::Namespace:
    case Value::Kind::Loop:
    case Value::Kind::Callable: return true;
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Loop: return "LoopContext";
    case Value::Kind::Callable: return "function";
  }
  return "object";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+20", "5e-05"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const auto e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    const std::string ae = std::to_string(std::abs(exp));
    return out + (ae.size() < 2 ? "0" : "") + ae;
  }
  if (exp < 0) return sign + "0." + std::string(std::size_t(-exp - 1), '0') + digits;
  if (digits.size() <= std::size_t(exp) + 1) return sign + digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  return sign + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
}

namespace {

bool py_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD) return false;
  // Zl, Zp and other separators, format and unassigned characters are escaped by repr().
  const int8_t cat = u_charType(UChar32(c));
  return cat != U_LINE_SEPARATOR && cat != U_PARAGRAPH_SEPARATOR && cat != U_FORMAT_CHAR &&
         cat != U_UNASSIGNED && cat != U_SURROGATE && cat != U_PRIVATE_USE_CHAR &&
         !(cat == U_SPACE_SEPARATOR && c != ' ') && cat != U_CONTROL_CHAR;
}

void append_hex(std::string& out, char32_t c) {
  static const char* hex = "0123456789abcdef";
  int width;
  if (c < 0x100) {
    out += "\\x";
    width = 2;
  } else if (c < 0x10000) {
    out += "\\u";
    width = 4;
  } else {
    out += "\\U";
    width = 8;
  }
  for (int i = width - 1; i >= 0; --i) out += hex[(c >> (4 * i)) & 0xF];
}

std::string str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (std::string_view ch : utf8_chars(s)) {
    const char32_t c = utf8_decode(ch);
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!py_printable(c)) {
      append_hex(out, c);
    } else {
      out += ch;
    }
  }
  return out + quote;
}

} // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::String: return v.str();
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return float_repr(v.as_float());
    case Value::Kind::String: return str_repr(v.str());
    case Value::Kind::List: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.items().size(); ++i) out += (i ? ", " : "") + to_repr(v.items()[i]);
      return out + "]";
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      const Dict& d = v.is_dict() ? v.dict() : v.ns();
      // A namespace can hold itself ({% set ns.me = ns %}): print the inner one as Python's
      // reprlib does.
      thread_local std::vector<const Dict*> printing;
      if (v.is_namespace() && std::find(printing.begin(), printing.end(), &d) != printing.end()) return "<Namespace {...}>";
      printing.push_back(&d);
      struct Pop {
        ~Pop() { printing.pop_back(); }
      } pop;
      std::string out = v.is_dict() ? "{" : "<Namespace {";
      for (std::size_t i = 0; i < d.entries.size(); ++i)
        out += (i ? ", " : "") + str_repr(d.entries[i].first) + ": " + to_repr(d.entries[i].second);
      return out + (v.is_dict() ? "}" : "}>");
    }
    case Value::Kind::Loop: return "<LoopContext>";
    case Value::Kind::Callable: return "<function " + v.fn().name + ">";
  }
  return "";
}

// ---- comparison -----------------------------------------------------------------------------

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    const std::int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const std::int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: {
      if (a.items().size() != b.items().size()) return false;
      for (std::size_t i = 0; i < a.items().size(); ++i)
        if (!equals(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case K::Dict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      const std::int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
      const std::int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const double x = a.to_double(), y = b.to_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : (a.str() == b.str() ? 0 : 1);
  if (a.is_list() && b.is_list()) {
    const List &x = a.items(), &y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw RenderError(std::string("TypeError: '") + op + "' not supported between instances of '" +
                    type_name(a) + "' and '" + type_name(b) + "'");
}

// ---- JSON -----------------------------------------------------------------------------------

namespace {

void json_char(std::string& out, unsigned char c) {
  static const char* hex = "0123456789abcdef";
  switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
      } else {
        out += char(c);
      }
  }
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (!ensure_ascii) {
    for (unsigned char c : s) json_char(out, c);
  } else {
    // Every non-ASCII character as \uXXXX, a surrogate pair above U+FFFF (Python's ensure_ascii).
    static const char* hex = "0123456789abcdef";
    auto u16 = [&](unsigned u) {
      out += "\\u";
      for (int k = 3; k >= 0; --k) out += hex[(u >> (4 * k)) & 0xF];
    };
    for (std::string_view ch : utf8_chars(s)) {
      const char32_t c = utf8_decode(ch);
      if (c < 0x80) {
        json_char(out, static_cast<unsigned char>(c));
      } else if (c < 0x10000) {
        u16(unsigned(c));
      } else {
        u16(0xD800 + unsigned((c - 0x10000) >> 10));
        u16(0xDC00 + unsigned((c - 0x10000) & 0x3FF));
      }
    }
  }
  out += '"';
}

struct JsonWriter {
  const std::optional<std::string>& indent;
  std::string item_sep, key_sep;
  bool ensure_ascii, sort_keys;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *indent;
  }

  void write(const Value& v, int level) {
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: {
        const double d = v.as_float();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
        return;
      }
      case Value::Kind::String: json_string(out, v.str(), ensure_ascii); return;
      case Value::Kind::List: {
        const List& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent) newline(level + 1);
          write(items[i], level + 1);
        }
        if (indent) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        const Dict& d = v.dict();
        if (d.entries.empty()) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : d.entries) entries.push_back(&e);
        if (sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
        out += '{';
        for (std::size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (indent) newline(level + 1);
          json_string(out, entries[i]->first, ensure_ascii);
          out += key_sep;
          write(entries[i]->second, level + 1);
        }
        if (indent) newline(level);
        out += '}';
        return;
      }
      case Value::Kind::Undefined:
      case Value::Kind::Namespace:
      case Value::Kind::Loop:
      case Value::Kind::Callable:
        throw RenderError("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
    }
  }
};

} // namespace

std::string to_json(const Value& v, const std::optional<std::string>& indent,
                    const std::optional<std::pair<std::string, std::string>>& separators, bool ensure_ascii,
                    bool sort_keys) {
  JsonWriter w{indent, indent ? "," : ", ", ": ", ensure_ascii, sort_keys, {}};
  if (separators) {
    w.item_sep = separators->first;
    w.key_sep = separators->second;
  }
  w.write(v, 0);
  return std::move(w.out);
}

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int level);

} // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int level) {
  using T = nlohmann::ordered_json::value_t;
  if (level >= kMaxValueDepth)
    throw std::invalid_argument("[lm.ChatTemplate] the context is nested deeper than " +
                                std::to_string(kMaxValueDepth) + " levels");
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<std::int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      return u <= std::uint64_t(INT64_MAX) ? Value(std::int64_t(u)) : Value(double(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, level + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.entries.emplace_back(k, from_json_at(e, level + 1));
      return Value::dict(std::move(d));
    }
    case T::binary:
    case T::discarded: break;
  }
  throw std::invalid_argument("[lm.ChatTemplate] context holds a JSON value of unsupported type");
}

} // namespace

} // namespace nuvec::lm::jinja
