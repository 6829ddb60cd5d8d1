// The str, dict and list methods a template may call (Python 3's str/dict/list; jinja2's
// ImmutableSandboxedEnvironment refuses the mutating ones: sandbox.py's modifies_known_mutable),
// and the globals of transformers' chat template environment: jinja2's range (capped at
// sandbox.MAX_RANGE), dict and namespace, plus transformers' raise_exception and strftime_now.
#include "lm/jinja/builtins.h"
#include "lm/jinja/interpreter.h"

#include <unicode/uchar.h>

#include <ctime>

namespace nuvec::lm::jinja {

using Method = Value (*)(Interpreter&, const Value& self, Args&);

std::vector<Value> bind_args(const char* fname, Args& args,
                             std::initializer_list<std::pair<const char*, std::optional<Value>>> params) {
  const std::size_t n = params.size();
  if (args.pos.size() > n)
    throw RenderError(std::string("TypeError: ") + fname + "() takes at most " + std::to_string(n) +
                      " argument(s) (" + std::to_string(args.pos.size()) + " given)");
  std::vector<Value> out(n);
  std::vector<bool> set(n, false);
  for (std::size_t i = 0; i < args.pos.size(); ++i) {
    out[i] = std::move(args.pos[i]);
    set[i] = true;
  }
  for (auto& [key, v] : args.kw) {
    std::size_t i = 0;
    for (const auto& p : params) {
      if (key == p.first) break;
      ++i;
    }
    if (i == n) throw RenderError(std::string("TypeError: ") + fname + "() got an unexpected keyword argument '" + key + "'");
    if (set[i]) throw RenderError(std::string("TypeError: ") + fname + "() got multiple values for argument '" + key + "'");
    out[i] = std::move(v);
    set[i] = true;
  }
  std::size_t i = 0;
  for (const auto& p : params) {
    if (!set[i]) {
      if (!p.second) throw RenderError(std::string("TypeError: ") + fname + "() missing required argument '" + p.first + "'");
      out[i] = *p.second;
    }
    ++i;
  }
  return out;
}

std::int64_t int_arg(const char* fname, const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  throw RenderError(std::string("TypeError: ") + fname + "() expects an integer argument, got '" + type_name(v) + "'");
}

const std::string& str_arg(const char* fname, const Value& v) {
  if (!v.is_string())
    throw RenderError(std::string("TypeError: ") + fname + "() expects a str argument, got '" + type_name(v) + "'");
  return v.str();
}

namespace {

std::optional<std::string> opt_str(const char* fname, const Value& v) {
  if (v.is_none()) return std::nullopt;
  return str_arg(fname, v);
}

// Code-point index of byte offset `b` of `s`.
std::int64_t cp_index(const std::string& s, std::size_t b) { return std::int64_t(utf8_length(std::string_view(s).substr(0, b))); }

// ---- str ----

Value m_strip(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("strip", a, {{"chars", Value::none()}});
  return Value(py_strip(s.str(), opt_str("strip", p[0]), true, true));
}
Value m_lstrip(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("lstrip", a, {{"chars", Value::none()}});
  return Value(py_strip(s.str(), opt_str("lstrip", p[0]), true, false));
}
Value m_rstrip(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("rstrip", a, {{"chars", Value::none()}});
  return Value(py_strip(s.str(), opt_str("rstrip", p[0]), false, true));
}

List split_ws(const std::string& s, std::int64_t maxsplit, bool from_right) {
  auto cs = utf8_chars(s);
  std::vector<std::pair<std::size_t, std::size_t>> words;  // [begin, end) in chars
  for (std::size_t i = 0; i < cs.size();) {
    while (i < cs.size() && is_py_space(utf8_decode(cs[i]))) ++i;
    if (i == cs.size()) break;
    std::size_t j = i;
    while (j < cs.size() && !is_py_space(utf8_decode(cs[j]))) ++j;
    words.emplace_back(i, j);
    i = j;
  }
  auto text = [&](std::size_t b, std::size_t e) {
    return b >= e ? std::string() : std::string(cs[b].data(), cs[e - 1].data() + cs[e - 1].size());
  };
  List out;
  const std::size_t n = words.size();
  if (maxsplit < 0 || std::size_t(maxsplit) + 1 >= n) {
    for (auto [b, e] : words) out.emplace_back(text(b, e));
    return out;
  }
  const std::size_t keep = std::size_t(maxsplit);
  // The unsplit remainder keeps its whitespace on the far side, as CPython's split does.
  if (!from_right) {
    for (std::size_t k = 0; k < keep; ++k) out.emplace_back(text(words[k].first, words[k].second));
    out.emplace_back(text(words[keep].first, cs.size()));
  } else {
    out.emplace_back(text(0, words[n - 1 - keep].second));
    for (std::size_t k = n - keep; k < n; ++k) out.emplace_back(text(words[k].first, words[k].second));
  }
  return out;
}

List split_sep(const std::string& s, const std::string& sep, std::int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw RenderError("ValueError: empty separator");
  std::vector<std::size_t> cuts;
  if (!from_right) {
    for (std::size_t p = s.find(sep); p != std::string::npos && (maxsplit < 0 || std::int64_t(cuts.size()) < maxsplit);
         p = s.find(sep, p + sep.size()))
      cuts.push_back(p);
  } else {
    std::size_t end = s.size();
    while (maxsplit < 0 || std::int64_t(cuts.size()) < maxsplit) {
      if (end < sep.size()) break;
      const std::size_t p = s.rfind(sep, end - sep.size());
      if (p == std::string::npos) break;
      cuts.insert(cuts.begin(), p);
      end = p;
    }
  }
  List out;
  std::size_t prev = 0;
  for (std::size_t c : cuts) {
    out.emplace_back(s.substr(prev, c - prev));
    prev = c + sep.size();
  }
  out.emplace_back(s.substr(prev));
  return out;
}

Value m_split(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("split", a, {{"sep", Value::none()}, {"maxsplit", Value(-1)}});
  const std::int64_t maxsplit = int_arg("split", p[1]);
  if (p[0].is_none()) return Value::list(split_ws(s.str(), maxsplit, false));
  return Value::list(split_sep(s.str(), str_arg("split", p[0]), maxsplit, false));
}
Value m_rsplit(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("rsplit", a, {{"sep", Value::none()}, {"maxsplit", Value(-1)}});
  const std::int64_t maxsplit = int_arg("rsplit", p[1]);
  if (p[0].is_none()) return Value::list(split_ws(s.str(), maxsplit, true));
  return Value::list(split_sep(s.str(), str_arg("rsplit", p[0]), maxsplit, true));
}
Value m_splitlines(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("splitlines", a, {{"keepends", Value(false)}});
  const bool keep = truthy(p[0]);
  List out;
  const std::string& t = s.str();
  std::size_t b = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '\n' && t[i] != '\r') continue;
    std::size_t e = i + 1;
    if (t[i] == '\r' && e < t.size() && t[e] == '\n') ++e;
    out.emplace_back(t.substr(b, (keep ? e : i) - b));
    b = e;
    i = e - 1;
  }
  if (b < t.size()) out.emplace_back(t.substr(b));
  return Value::list(std::move(out));
}

// The [start, end) byte range of s[start:end] with Python's index rules.
std::pair<std::size_t, std::size_t> byte_range(const char* fname, const std::string& s, const Value& start, const Value& end) {
  auto cs = utf8_chars(s);
  const auto n = std::int64_t(cs.size());
  auto clamp = [&](const Value& v, std::int64_t dflt) {
    if (v.is_none()) return dflt;
    std::int64_t i = int_arg(fname, v);
    if (i < 0) i += n;
    return std::max<std::int64_t>(0, std::min(i, n));
  };
  const std::int64_t b = clamp(start, 0), e = std::max(b, clamp(end, n));
  auto off = [&](std::int64_t i) { return i >= n ? s.size() : std::size_t(cs[std::size_t(i)].data() - s.data()); };
  return {off(b), off(e)};
}

Value affix(const char* fname, const Value& s, Args& a, bool prefix) {
  auto p = bind_args(fname, a, {{"prefix", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
  const auto [b, e] = byte_range(fname, s.str(), p[1], p[2]);
  const std::string_view part = std::string_view(s.str()).substr(b, e - b);
  List options = p[0].is_list() ? p[0].items() : List{p[0]};
  for (const Value& o : options) {
    const std::string& x = str_arg(fname, o);
    if (x.size() <= part.size() && (prefix ? part.substr(0, x.size()) == x : part.substr(part.size() - x.size()) == x))
      return Value(true);
  }
  return Value(false);
}
Value m_startswith(Interpreter&, const Value& s, Args& a) { return affix("startswith", s, a, true); }
Value m_endswith(Interpreter&, const Value& s, Args& a) { return affix("endswith", s, a, false); }

Value m_replace(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("replace", a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value(-1)}});
  const std::string &from = str_arg("replace", p[0]), &to = str_arg("replace", p[1]);
  std::int64_t count = int_arg("replace", p[2]);
  const std::string& t = s.str();
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    for (std::string_view c : utf8_chars(t)) {
      if (count-- == 0) {
        out += std::string(c.data(), t.data() + t.size() - c.data());
        return Value(std::move(out));
      }
      out += to;
      out += c;
    }
    if (count != 0) out += to;
    return Value(std::move(out));
  }
  std::size_t prev = 0;
  for (std::size_t q = t.find(from); q != std::string::npos && count != 0; q = t.find(from, prev), --count) {
    out += t.substr(prev, q - prev) + to;
    prev = q + from.size();
  }
  out += t.substr(prev);
  return Value(std::move(out));
}

Value m_upper(Interpreter&, const Value& s, Args& a) {
  bind_args("upper", a, {});
  return Value(py_upper(s.str()));
}
Value m_lower(Interpreter&, const Value& s, Args& a) {
  bind_args("lower", a, {});
  return Value(py_lower(s.str()));
}
Value m_title(Interpreter&, const Value& s, Args& a) {
  bind_args("title", a, {});
  return Value(py_title(s.str()));
}
Value m_capitalize(Interpreter&, const Value& s, Args& a) {
  bind_args("capitalize", a, {});
  return Value(py_capitalize(s.str()));
}

Value find_impl(const char* fname, const Value& s, Args& a, bool reverse, bool must) {
  auto p = bind_args(fname, a, {{"sub", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
  const std::string& sub = str_arg(fname, p[0]);
  const auto [b, e] = byte_range(fname, s.str(), p[1], p[2]);
  const std::string_view part = std::string_view(s.str()).substr(b, e - b);
  const std::size_t q = reverse ? part.rfind(sub) : part.find(sub);
  if (q == std::string_view::npos) {
    if (must) throw RenderError("ValueError: substring not found");
    return Value(-1);
  }
  return Value(cp_index(s.str(), b + q));
}
Value m_find(Interpreter&, const Value& s, Args& a) { return find_impl("find", s, a, false, false); }
Value m_rfind(Interpreter&, const Value& s, Args& a) { return find_impl("rfind", s, a, true, false); }
Value m_index(Interpreter&, const Value& s, Args& a) { return find_impl("index", s, a, false, true); }
Value m_rindex(Interpreter&, const Value& s, Args& a) { return find_impl("rindex", s, a, true, true); }

Value m_count(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("count", a, {{"sub", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
  const std::string& sub = str_arg("count", p[0]);
  const auto [b, e] = byte_range("count", s.str(), p[1], p[2]);
  const std::string_view part = std::string_view(s.str()).substr(b, e - b);
  if (sub.empty()) return Value(std::int64_t(utf8_length(part) + 1));
  std::int64_t n = 0;
  for (std::size_t q = part.find(sub); q != std::string_view::npos; q = part.find(sub, q + sub.size())) ++n;
  return Value(n);
}

Value m_join(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("join", a, {{"iterable", std::nullopt}});
  std::string out;
  bool first = true;
  for (const Value& v : iterate(p[0])) {
    if (!v.is_string())
      throw RenderError("TypeError: sequence item: expected str instance, " + type_name(v) + " found");
    if (!first) out += s.str();
    out += v.str();
    first = false;
  }
  return Value(std::move(out));
}

template <class Pred>
Value all_chars(const Value& s, Args& a, const char* fname, Pred pred) {
  bind_args(fname, a, {});
  if (s.str().empty()) return Value(false);
  for (std::string_view c : utf8_chars(s.str()))
    if (!pred(UChar32(utf8_decode(c)))) return Value(false);
  return Value(true);
}
Value m_isdigit(Interpreter&, const Value& s, Args& a) { return all_chars(s, a, "isdigit", [](UChar32 c) { return bool(u_isdigit(c)); }); }
Value m_isalpha(Interpreter&, const Value& s, Args& a) { return all_chars(s, a, "isalpha", [](UChar32 c) { return bool(u_isalpha(c)); }); }
Value m_isalnum(Interpreter&, const Value& s, Args& a) { return all_chars(s, a, "isalnum", [](UChar32 c) { return bool(u_isalnum(c)); }); }
Value m_isspace(Interpreter&, const Value& s, Args& a) { return all_chars(s, a, "isspace", [](UChar32 c) { return is_py_space(char32_t(c)); }); }

Value cased_check(const Value& s, Args& a, const char* fname, bool want_lower) {
  bind_args(fname, a, {});
  bool any = false;
  for (std::string_view c : utf8_chars(s.str())) {
    const UChar32 x = UChar32(utf8_decode(c));
    if (u_isupper(x) || u_istitle(x)) {
      if (want_lower) return Value(false);
      any = true;
    } else if (u_islower(x)) {
      if (!want_lower) return Value(false);
      any = true;
    }
  }
  return Value(any);
}
Value m_islower(Interpreter&, const Value& s, Args& a) { return cased_check(s, a, "islower", true); }
Value m_isupper(Interpreter&, const Value& s, Args& a) { return cased_check(s, a, "isupper", false); }

Value pad(const char* fname, const Value& s, Args& a, int where) {
  auto p = bind_args(fname, a, {{"width", std::nullopt}, {"fillchar", Value(" ")}});
  const std::int64_t width = int_arg(fname, p[0]);
  const std::string& fill = str_arg(fname, p[1]);
  if (utf8_length(fill) != 1) throw RenderError("TypeError: The fill character must be exactly one character long");
  const auto n = std::int64_t(utf8_length(s.str()));
  if (width <= n) return s;
  const std::int64_t total = width - n;
  // center: as CPython's pad(), the extra character goes left when the width is odd and n even.
  std::int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += s.str();
  for (std::int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}
Value m_center(Interpreter&, const Value& s, Args& a) { return pad("center", s, a, 0); }
Value m_ljust(Interpreter&, const Value& s, Args& a) { return pad("ljust", s, a, -1); }
Value m_rjust(Interpreter&, const Value& s, Args& a) { return pad("rjust", s, a, 1); }

Value m_zfill(Interpreter&, const Value& s, Args& a) {
  auto p = bind_args("zfill", a, {{"width", std::nullopt}});
  const std::int64_t width = int_arg("zfill", p[0]);
  const std::string& t = s.str();
  const auto n = std::int64_t(utf8_length(t));
  if (width <= n) return s;
  const bool sign = !t.empty() && (t[0] == '+' || t[0] == '-');
  return Value((sign ? t.substr(0, 1) : "") + std::string(std::size_t(width - n), '0') + t.substr(sign ? 1 : 0));
}

Value fix(const char* fname, const Value& s, Args& a, bool prefix) {
  auto p = bind_args(fname, a, {{prefix ? "prefix" : "suffix", std::nullopt}});
  const std::string &t = s.str(), &x = str_arg(fname, p[0]);
  if (x.size() > t.size()) return s;
  if (prefix) return t.compare(0, x.size(), x) == 0 ? Value(t.substr(x.size())) : s;
  return t.compare(t.size() - x.size(), x.size(), x) == 0 ? Value(t.substr(0, t.size() - x.size())) : s;
}
Value m_removeprefix(Interpreter&, const Value& s, Args& a) { return fix("removeprefix", s, a, true); }
Value m_removesuffix(Interpreter&, const Value& s, Args& a) { return fix("removesuffix", s, a, false); }

Value partition(const char* fname, const Value& s, Args& a, bool reverse) {
  auto p = bind_args(fname, a, {{"sep", std::nullopt}});
  const std::string &t = s.str(), &sep = str_arg(fname, p[0]);
  if (sep.empty()) throw RenderError("ValueError: empty separator");
  const std::size_t q = reverse ? t.rfind(sep) : t.find(sep);
  if (q == std::string::npos)
    return reverse ? Value::list({Value(""), Value(""), s}) : Value::list({s, Value(""), Value("")});
  return Value::list({Value(t.substr(0, q)), Value(sep), Value(t.substr(q + sep.size()))});
}
Value m_partition(Interpreter&, const Value& s, Args& a) { return partition("partition", s, a, false); }
Value m_rpartition(Interpreter&, const Value& s, Args& a) { return partition("rpartition", s, a, true); }

// str.format with {}, {0} and {name} fields (no conversions or format specs).
Value m_format(Interpreter&, const Value& s, Args& a) {
  const std::string& t = s.str();
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{' && i + 1 < t.size() && t[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (t[i] == '}' && i + 1 < t.size() && t[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (t[i] == '{') {
      const std::size_t close = t.find('}', i);
      if (close == std::string::npos) throw RenderError("ValueError: Single '{' encountered in format string");
      const std::string field = t.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos)
        throw RenderError("ValueError: format specs and conversions in str.format are not supported");
      const Value* v = nullptr;
      if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
        const std::size_t k = field.empty() ? auto_index++ : std::stoul(field);
        if (k >= a.pos.size()) throw RenderError("IndexError: Replacement index " + std::to_string(k) + " out of range");
        v = &a.pos[k];
      } else {
        for (const auto& [key, x] : a.kw)
          if (key == field) v = &x;
        if (!v) throw RenderError("KeyError: '" + field + "'");
      }
      out += to_str(*v);
      i = close;
    } else {
      out += t[i];
    }
  }
  return Value(std::move(out));
}

// ---- dict ----

Value m_get(Interpreter&, const Value& d, Args& a) {
  auto p = bind_args("get", a, {{"key", std::nullopt}, {"default", Value::none()}});
  if (p[0].is_string())
    if (const Value* v = d.dict().find(p[0].str())) return *v;
  return p[1];
}
Value m_keys(Interpreter&, const Value& d, Args& a) {
  bind_args("keys", a, {});
  return Value::list(iterate(d));
}
Value m_values(Interpreter&, const Value& d, Args& a) {
  bind_args("values", a, {});
  List out;
  for (const auto& [k, v] : d.dict().entries) out.push_back(v);
  return Value::list(std::move(out));
}
Value m_items(Interpreter&, const Value& d, Args& a) {
  bind_args("items", a, {});
  List out;
  for (const auto& [k, v] : d.dict().entries) out.push_back(Value::list({Value(k), v}));
  return Value::list(std::move(out));
}
Value m_copy(Interpreter&, const Value& d, Args& a) {
  bind_args("copy", a, {});
  return d.is_dict() ? Value::dict(d.dict()) : Value::list(d.items());
}

// ---- list ----

Value m_list_index(Interpreter&, const Value& l, Args& a) {
  auto p = bind_args("index", a, {{"value", std::nullopt}});
  for (std::size_t i = 0; i < l.items().size(); ++i)
    if (equals(l.items()[i], p[0])) return Value(std::int64_t(i));
  throw RenderError("ValueError: " + to_repr(p[0]) + " is not in list");
}
Value m_list_count(Interpreter&, const Value& l, Args& a) {
  auto p = bind_args("count", a, {{"value", std::nullopt}});
  std::int64_t n = 0;
  for (const Value& v : l.items()) n += equals(v, p[0]);
  return Value(n);
}

struct MethodEntry {
  const char* name;
  Method fn;
};

const MethodEntry kStrMethods[] = {
    {"strip", m_strip},       {"lstrip", m_lstrip},         {"rstrip", m_rstrip},
    {"split", m_split},       {"rsplit", m_rsplit},         {"splitlines", m_splitlines},
    {"startswith", m_startswith}, {"endswith", m_endswith}, {"replace", m_replace},
    {"upper", m_upper},       {"lower", m_lower},           {"casefold", m_lower},
    {"title", m_title},       {"capitalize", m_capitalize}, {"find", m_find},
    {"rfind", m_rfind},       {"index", m_index},           {"rindex", m_rindex},
    {"count", m_count},       {"join", m_join},             {"isdigit", m_isdigit},
    {"isdecimal", m_isdigit}, {"isnumeric", m_isdigit},     {"isalpha", m_isalpha},
    {"isalnum", m_isalnum},   {"isspace", m_isspace},       {"islower", m_islower},
    {"isupper", m_isupper},   {"center", m_center},         {"ljust", m_ljust},
    {"rjust", m_rjust},       {"zfill", m_zfill},           {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix}, {"partition", m_partition}, {"rpartition", m_rpartition},
    {"format", m_format},
};
const MethodEntry kDictMethods[] = {{"get", m_get}, {"keys", m_keys}, {"values", m_values}, {"items", m_items}, {"copy", m_copy}};
const MethodEntry kListMethods[] = {{"index", m_list_index}, {"count", m_list_count}, {"copy", m_copy}};
const char* kDictUnsafe[] = {"pop", "popitem", "setdefault", "update", "clear"};
const char* kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

Value bind_method(const Value& self, const std::string& name, Method fn) {
  auto c = std::make_shared<Callable>();
  c->name = type_name(self) + "." + name;
  c->fn = [self, fn](Interpreter& in, Args& a, const Value*) { return fn(in, self, a); };
  return Value::callable(std::move(c));
}

Value unsafe_method(const Value& self, const std::string& name) {
  auto c = std::make_shared<Callable>();
  c->name = type_name(self) + "." + name;
  const std::string what = "SecurityError: access to attribute '" + name + "' of '" + type_name(self) + "' object is unsafe.";
  c->fn = [what](Interpreter&, Args&, const Value*) -> Value { throw RenderError(what); };
  return Value::callable(std::move(c));
}

} // namespace

std::optional<Value> method_of(const Value& obj, const std::string& name) {
  auto find = [&](const auto& table) -> std::optional<Value> {
    for (const MethodEntry& m : table)
      if (name == m.name) return bind_method(obj, name, m.fn);
    return std::nullopt;
  };
  if (obj.is_string()) return find(kStrMethods);
  if (obj.is_dict()) {
    for (const char* u : kDictUnsafe)
      if (name == u) return unsafe_method(obj, name);
    return find(kDictMethods);
  }
  if (obj.is_list()) {
    for (const char* u : kListUnsafe)
      if (name == u) return unsafe_method(obj, name);
    return find(kListMethods);
  }
  return std::nullopt;
}

// ---- globals --------------------------------------------------------------------------------

namespace {

Value g_range(Interpreter& in, Args& a, const Value*) {
  if (!a.kw.empty()) throw RenderError("TypeError: range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    throw RenderError("TypeError: range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
  std::int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = int_arg("range", a.pos[0]);
  } else {
    start = int_arg("range", a.pos[0]);
    stop = int_arg("range", a.pos[1]);
    if (a.pos.size() == 3) step = int_arg("range", a.pos[2]);
  }
  if (step == 0) throw RenderError("ValueError: range() arg 3 must not be zero");
  const std::int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                  : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (n > 100000)
    throw RenderError("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List out;
  out.reserve(std::size_t(n));
  for (std::int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
  (void)in;
  return Value::list(std::move(out));
}

Dict kwargs_dict(Args& a, const char* fname) {
  Dict d;
  if (a.pos.size() > 1) throw RenderError(std::string("TypeError: ") + fname + "() expected at most 1 positional argument");
  if (a.pos.size() == 1) {
    if (!a.pos[0].is_dict()) throw RenderError(std::string("TypeError: ") + fname + "() expects a mapping");
    d = a.pos[0].dict();
  }
  for (auto& [k, v] : a.kw) d.set(k, std::move(v));
  return d;
}

Value g_dict(Interpreter&, Args& a, const Value*) { return Value::dict(kwargs_dict(a, "dict")); }
Value g_namespace(Interpreter& in, Args& a, const Value*) {
  Value ns = Value::namespace_(kwargs_dict(a, "namespace"));
  in.track_namespace(ns);
  return ns;
}

Value g_raise_exception(Interpreter&, Args& a, const Value*) {
  auto p = bind_args("raise_exception", a, {{"message", std::nullopt}});
  throw RaisedError(to_str(p[0]));
}

Value g_strftime_now(Interpreter& in, Args& a, const Value*) {
  auto p = bind_args("strftime_now", a, {{"format", std::nullopt}});
  const std::string& fmt = str_arg("strftime_now", p[0]);
  const std::time_t t = std::chrono::system_clock::to_time_t(in.now());
  std::tm local{};
  localtime_r(&t, &local);
  if (fmt.empty()) return Value("");
  std::string buf(256, '\0');
  for (;;) {
    const std::size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &local);
    if (n > 0 || buf.size() > 65536) return Value(buf.substr(0, n));
    buf.resize(buf.size() * 4);
  }
}

Value make_global(const char* name, Value (*fn)(Interpreter&, Args&, const Value*)) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = fn;
  return Value::callable(std::move(c));
}

} // namespace

std::optional<Value> global_value(const std::string& name) {
  static const std::pair<const char*, Value> globals[] = {
      {"range", make_global("range", g_range)},
      {"dict", make_global("dict", g_dict)},
      {"namespace", make_global("namespace", g_namespace)},
      {"raise_exception", make_global("raise_exception", g_raise_exception)},
      {"strftime_now", make_global("strftime_now", g_strftime_now)},
  };
  for (const auto& [n, v] : globals)
    if (name == n) return v;
  return std::nullopt;
}

} // namespace nuvec::lm::jinja
