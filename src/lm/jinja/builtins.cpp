// jinja2's builtin filters (jinja2/filters.py, 3.1), with
// transformers' tojson in place of jinja2's (utils/chat_template_utils.py: json.dumps with
// ensure_ascii=False, indent, separators, sort_keys=False, no HTML escaping). Filters missing
// here (groupby, slice, striptags, urlize, urlencode, wordwrap, xmlattr, filesizeformat, random)
// are reported as unknown when a template is parsed.
#include "lm/jinja/builtins.h"
#include "lm/jinja/interpreter.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace nuvec::lm::jinja {

namespace {

std::string soft_str(const Value& v) { return to_str(v); }

// jinja2's make_attrgetter: "a.b.0" looked up part by part with subscription semantics.
Value get_attribute(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_none()) return item;
  if (attribute.is_int()) return in.getitem(item, attribute);
  Value cur = item;
  const std::string& path = str_arg("attribute", attribute);
  std::size_t b = 0;
  for (;;) {
    const std::size_t e = path.find('.', b);
    const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = in.getitem(cur, digits ? Value(std::int64_t(std::stoll(part))) : Value(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

// The sort key of sort/unique/min/max: the attribute, lowercased unless case_sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = get_attribute(in, item, attribute);
  if (!case_sensitive && k.is_string()) return Value(py_lower(k.str()));
  return k;
}

Value f_abs(Interpreter&, const Value& v, Args& a) {
  bind_args("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) return negate(v, (v.is_int() ? v.as_int() : 0) < 0);
  throw RenderError("TypeError: bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("attr", a, {{"name", std::nullopt}});
  const std::string& name = str_arg("attr", p[0]);
  if (v.is_dict()) {
    if (auto m = method_of(v, name)) return *m;
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  return in.getattr(v, name);
}

Value f_batch(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("batch", a, {{"linecount", std::nullopt}, {"fill_with", Value::none()}});
  const std::int64_t n = int_arg("batch", p[0]);
  if (n <= 0) throw RenderError("ValueError: batch size must be positive");
  List out, cur;
  for (Value& x : iterate(v)) {
    cur.push_back(std::move(x));
    if (std::int64_t(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (!p[1].is_none())
      while (std::int64_t(cur.size()) < n) cur.push_back(p[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, Args& a) {
  bind_args("capitalize", a, {});
  return Value(py_capitalize(soft_str(v)));
}

Value f_center(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("center", a, {{"width", Value(80)}});
  Args args{{p[0]}, {}};
  return in.call(in.getattr(Value(soft_str(v)), "center"), args);
}

Value f_default(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("default", a, {{"default_value", Value("")}, {"boolean", Value(false)}});
  if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("dictsort", a, {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}});
  if (!v.is_dict()) throw RenderError("TypeError: dictsort expects a mapping, got '" + type_name(v) + "'");
  const std::string& by = str_arg("dictsort", p[1]);
  if (by != "key" && by != "value") throw RenderError("FilterArgumentError: You can only sort by either 'key' or 'value'");
  const bool cs = truthy(p[0]);
  List pairs;
  for (const auto& [k, x] : v.dict().entries) pairs.push_back(Value::list({Value(k), x}));
  auto key = [&](const Value& pair) {
    const Value& k = pair.items()[by == "key" ? 0 : 1];
    return (!cs && k.is_string()) ? Value(py_lower(k.str())) : k;
  };
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) { return compare(key(x), key(y)) < 0; });
  if (truthy(p[2])) std::reverse(pairs.begin(), pairs.end());
  return Value::list(std::move(pairs));
}

Value f_escape(Interpreter&, const Value& v, Args& a) {
  bind_args("escape", a, {});
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value f_first(Interpreter&, const Value& v, Args& a) {
  bind_args("first", a, {});
  List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, Args& a) {
  bind_args("last", a, {});
  List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// Python's float(str): optional sign, digits with single underscores, fraction, exponent, inf, nan.
std::optional<double> parse_float(const std::string& raw) {
  std::string s = py_strip(raw, std::nullopt, true, true), clean;
  if (s.empty()) return std::nullopt;
  std::size_t i = 0;
  if (s[i] == '+' || s[i] == '-') clean += s[i++];
  std::string rest = s.substr(i), low;
  for (char c : rest) low += char(std::tolower(static_cast<unsigned char>(c)));
  if (low == "inf" || low == "infinity" || low == "nan") return std::strtod((clean + low).c_str(), nullptr);
  bool digits = false, dot = false, exp = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      digits = true;
      clean += c;
    } else if (c == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
               std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    } else if (c == '.' && !dot && !exp) {
      dot = true;
      clean += c;
    } else if ((c == 'e' || c == 'E') && digits && !exp) {
      exp = true;
      clean += c;
      if (i + 1 < s.size() && (s[i + 1] == '+' || s[i + 1] == '-')) clean += s[++i];
      if (i + 1 >= s.size()) return std::nullopt;
      digits = false;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// Python's int(str, base).
std::optional<std::int64_t> parse_int(const std::string& raw, int base) {
  std::string s = py_strip(raw, std::nullopt, true, true);
  std::size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char x = char(std::tolower(static_cast<unsigned char>(s[i + 1])));
    const int pb = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
    if (pb && (base == pb || base == 0)) {
      base = pb;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (i >= s.size()) return std::nullopt;
  std::int64_t v = 0;
  for (std::size_t k = i; k < s.size(); ++k) {
    const char c = char(std::tolower(static_cast<unsigned char>(s[k])));
    if (c == '_' && k > i && k + 1 < s.size() && s[k + 1] != '_') continue;
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
  }
  return neg ? -v : v;
}

Value f_float(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("float", a, {{"default", Value(0.0)}});
  if (v.is_number()) return Value(v.to_double());
  if (v.is_string())
    if (auto d = parse_float(v.str())) return Value(*d);
  if (v.is_undefined()) fail_undefined(v);
  return p[0];
}

Value f_int(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("int", a, {{"default", Value(0)}, {"base", Value(10)}});
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(std::int64_t(v.as_bool()));
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return p[0];
    return Value(std::int64_t(std::trunc(v.as_float())));
  }
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), int(int_arg("int", p[1])))) return Value(*i);
    if (auto d = parse_float(v.str()); d && std::isfinite(*d)) return Value(std::int64_t(std::trunc(*d)));
  }
  return p[0];
}

Value f_indent(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("indent", a, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}});
  const std::string ind = p[0].is_string() ? p[0].str() : std::string(std::size_t(std::max<std::int64_t>(0, int_arg("indent", p[0]))), ' ');
  std::string s = soft_str(v) + "\n";
  std::vector<std::string> lines;
  std::size_t b = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    lines.push_back(s.substr(b, i - b));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    b = i + 1;
  }
  std::string rv;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (k) rv += "\n";
    if (k && (truthy(p[2]) || !lines[k].empty())) rv += ind;
    rv += lines[k];
  }
  if (truthy(p[1])) rv = ind + rv;
  return Value(std::move(rv));
}

Value f_items(Interpreter&, const Value& v, Args& a) {
  bind_args("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw RenderError("TypeError: Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, x] : v.dict().entries) out.push_back(Value::list({Value(k), x}));
  return Value::list(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("join", a, {{"d", Value("")}, {"attribute", Value::none()}});
  const std::string sep = soft_str(p[0]);
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += sep;
    out += to_str(get_attribute(in, x, p[1]));
    first = false;
  }
  return Value(std::move(out));
}

Value f_length(Interpreter&, const Value& v, Args& a) {
  bind_args("length", a, {});
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value(0);
    case Value::Kind::String: return Value(std::int64_t(utf8_length(v.str())));
    case Value::Kind::List: return Value(std::int64_t(v.items().size()));
    case Value::Kind::Dict: return Value(std::int64_t(v.dict().entries.size()));
    case Value::Kind::Loop: return Value(v.loop().length);
    default: throw RenderError("TypeError: object of type '" + type_name(v) + "' has no len()");
  }
}

Value f_list(Interpreter&, const Value& v, Args& a) {
  bind_args("list", a, {});
  return Value::list(iterate(v));
}

Value f_lower(Interpreter&, const Value& v, Args& a) {
  bind_args("lower", a, {});
  return Value(py_lower(soft_str(v)));
}

Value f_upper(Interpreter&, const Value& v, Args& a) {
  bind_args("upper", a, {});
  return Value(py_upper(soft_str(v)));
}

Value f_map(Interpreter& in, const Value& v, Args& a) {
  List out;
  if (a.pos.empty()) {
    auto p = bind_args("map", a, {{"attribute", std::nullopt}, {"default", Value::none()}});
    for (const Value& x : iterate(v)) {
      Value r = get_attribute(in, x, p[0]);
      out.push_back(r.is_undefined() && !p[1].is_none() ? p[1] : r);
    }
    return Value::list(std::move(out));
  }
  const std::string name = str_arg("map", a.pos[0]);
  const FilterFn f = find_filter(name);
  if (!f) throw RenderError("TemplateRuntimeError: No filter named '" + name + "'.");
  for (const Value& x : iterate(v)) {
    Args sub{{a.pos.begin() + 1, a.pos.end()}, a.kw};
    out.push_back(f(in, x, sub));
  }
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, Args& a, const char* fname, bool want_max) {
  auto p = bind_args(fname, a, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  List items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  std::size_t best = 0;
  Value best_key = sort_key(in, items[0], p[1], truthy(p[0]));
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(in, items[i], p[1], truthy(p[0]));
    const int c = compare(k, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}
Value f_max(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, "max", true); }
Value f_min(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, "min", false); }

Value f_pprint(Interpreter&, const Value& v, Args& a) {
  bind_args("pprint", a, {});
  return Value(to_repr(v));
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...).
Value select_impl(Interpreter& in, const Value& v, Args& a, bool by_attr, bool keep) {
  std::size_t k = 0;
  Value attribute = Value::none();
  if (by_attr) {
    if (a.pos.empty()) throw RenderError("TypeError: Missing parameter for attribute name");
    attribute = a.pos[k++];
  }
  TestFn test = nullptr;
  if (k < a.pos.size()) {
    const std::string name = str_arg("select", a.pos[k++]);
    test = find_test(name);
    if (!test) throw RenderError("TemplateRuntimeError: No test named '" + name + "'.");
  }
  List out;
  for (const Value& x : iterate(v)) {
    Value subject = get_attribute(in, x, attribute);
    Args sub{{a.pos.begin() + std::ptrdiff_t(k), a.pos.end()}, a.kw};
    const bool r = test ? test(in, subject, sub) : truthy(subject);
    if (r == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, Args& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, Args& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, Args& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, Args& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("replace", a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::none()}});
  Args args{{p[0], p[1], p[2].is_none() ? Value(-1) : p[2]}, {}};
  return in.call(in.getattr(Value(soft_str(v)), "replace"), args);
}

Value f_reverse(Interpreter&, const Value& v, Args& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    auto cs = utf8_chars(v.str());
    std::string out;
    for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
    return Value(std::move(out));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// Python's round(x, ndigits) on a float: correctly rounded, ties to even.
double py_round(double x, std::int64_t nd) {
  if (!std::isfinite(x)) return x;
  if (nd >= 0) {
    if (nd > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", int(nd), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, double(-nd));
  const double y = x / p;
  double r = std::nearbyint(y);  // ties to even under the default rounding mode
  return r * p;
}

Value f_round(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("round", a, {{"precision", Value(0)}, {"method", Value("common")}});
  const std::int64_t nd = int_arg("round", p[0]);
  const std::string& method = str_arg("round", p[1]);
  if (method != "common" && method != "ceil" && method != "floor")
    throw RenderError("FilterArgumentError: method must be common, ceil or floor");
  if (!v.is_number()) throw RenderError("TypeError: type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) return v.is_bool() ? Value(std::int64_t(v.as_bool())) : v;
    return Value(py_round(v.as_float(), nd));
  }
  const double scale = std::pow(10.0, double(nd));
  const double x = v.to_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interpreter&, const Value& v, Args& a) {
  bind_args("safe", a, {});
  return Value(soft_str(v));
}

Value f_sort(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("sort", a, {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  List items = iterate(v);
  std::vector<std::pair<Value, std::size_t>> keyed;
  for (std::size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(in, items[i], p[2], truthy(p[1])), i);
  const bool rev = truthy(p[0]);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  List out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, Args& a) {
  bind_args("string", a, {});
  return Value(soft_str(v));
}

Value f_sum(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("sum", a, {{"attribute", Value::none()}, {"start", Value(0)}});
  Value total = p[1];
  for (const Value& x : iterate(v)) total = binary_op(BinOp::Add, total, get_attribute(in, x, p[0]));
  return total;
}

Value f_title(Interpreter&, const Value& v, Args& a) {
  bind_args("title", a, {});
  // jinja2 splits on runs of [-\s({\[<] and capitalises each piece.
  const std::string text = soft_str(v);
  std::string out;
  bool start = true;
  for (std::string_view ch : utf8_chars(text)) {
    const char32_t c = utf8_decode(ch);
    const bool sep = is_py_space(c) || (c < 0x80 && std::string_view("-({[<").find(char(c)) != std::string_view::npos);
    if (sep) {
      out += ch;
    } else {
      out += start ? py_upper(ch) : py_lower(ch);
    }
    start = sep;
  }
  return Value(std::move(out));
}

Value f_tojson(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("tojson", a, {{"ensure_ascii", Value(false)}, {"indent", Value::none()},
                                   {"separators", Value::none()}, {"sort_keys", Value(false)}});
  std::optional<std::string> indent;
  if (p[1].is_string()) {
    indent = p[1].str();
  } else if (!p[1].is_none()) {
    indent = std::string(std::size_t(std::max<std::int64_t>(0, int_arg("tojson", p[1]))), ' ');
  }
  std::optional<std::pair<std::string, std::string>> seps;
  if (!p[2].is_none()) {
    if (!p[2].is_list() || p[2].items().size() != 2)
      throw RenderError("TypeError: tojson separators must be an (item_separator, key_separator) pair");
    seps = std::make_pair(str_arg("tojson", p[2].items()[0]), str_arg("tojson", p[2].items()[1]));
  }
  return Value(to_json(v, indent, seps, truthy(p[0]), truthy(p[3])));
}

Value f_trim(Interpreter&, const Value& v, Args& a) {
  auto p = bind_args("trim", a, {{"chars", Value::none()}});
  std::optional<std::string> chars;
  if (!p[0].is_none()) chars = str_arg("trim", p[0]);
  return Value(py_strip(soft_str(v), chars, true, true));
}

Value f_truncate(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("truncate", a, {{"length", Value(255)}, {"killwords", Value(false)}, {"end", Value("...")}, {"leeway", Value::none()}});
  const std::string s = soft_str(v);
  const std::int64_t length = int_arg("truncate", p[0]);
  const std::string& end = str_arg("truncate", p[2]);
  const std::int64_t leeway = p[3].is_none() ? 5 : int_arg("truncate", p[3]);
  const auto end_len = std::int64_t(utf8_length(end));
  if (length < end_len) throw RenderError("AssertionError: expected length >= " + std::to_string(end_len));
  if (std::int64_t(utf8_length(s)) <= length + leeway) return Value(s);
  std::string head = to_str(slice(Value(s), Value::none(), Value(length - end_len), Value::none()));
  if (!truthy(p[1])) {
    Args args{{Value(" "), Value(1)}, {}};
    head = in.call(in.getattr(Value(head), "rsplit"), args).items()[0].str();
  }
  return Value(head + end);
}

Value f_unique(Interpreter& in, const Value& v, Args& a) {
  auto p = bind_args("unique", a, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  List out, seen;
  for (const Value& x : iterate(v)) {
    Value k = sort_key(in, x, p[1], truthy(p[0]));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(std::move(k));
      out.push_back(x);
    }
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, Args& a) {
  bind_args("wordcount", a, {});
  const std::string text = soft_str(v);
  std::int64_t n = 0;
  bool in_word = false;
  for (std::string_view ch : utf8_chars(text)) {
    const UChar32 c = UChar32(utf8_decode(ch));
    const bool w = c == '_' || u_isalnum(c);
    n += w && !in_word;
    in_word = w;
  }
  return Value(n);
}

Value f_format(Interpreter&, const Value& v, Args& a) {
  if (!a.kw.empty() && !a.pos.empty())
    throw RenderError("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) throw RenderError("format with keyword arguments is not supported");
  return Value(percent_format(soft_str(v), Value::list(a.pos)));
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},           {"batch", f_batch},         {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},        {"d", f_default},           {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},            {"escape", f_escape},       {"first", f_first},
    {"float", f_float},       {"forceescape", f_escape},  {"format", f_format},       {"indent", f_indent},
    {"int", f_int},           {"items", f_items},         {"join", f_join},           {"last", f_last},
    {"length", f_length},     {"list", f_list},           {"lower", f_lower},         {"map", f_map},
    {"max", f_max},           {"min", f_min},             {"pprint", f_pprint},       {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},     {"round", f_round},
    {"safe", f_safe},         {"select", f_select},       {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string},     {"sum", f_sum},             {"title", f_title},         {"tojson", f_tojson},
    {"trim", f_trim},         {"truncate", f_truncate},   {"unique", f_unique},       {"upper", f_upper},
    {"wordcount", f_wordcount},
};

} // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

} // namespace nuvec::lm::jinja
