// The Jinja lexer (jinja2/lexer.py, 3.1): newlines normalised and one trailing newline dropped;
// "{%-"/"-%}" strip the whitespace around a tag, "{%+"/"+%}" keep it; lstrip_blocks drops the
// indentation before a block or comment tag that starts its line; trim_blocks drops the newline
// after one. String literals are decoded as Python's unicode-escape codec does.
#include "lm/jinja/lexer.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace nuvec::lm::jinja {

void syntax_error(int line, const std::string& what) {
  throw std::invalid_argument("[lm.ChatTemplate] line " + std::to_string(line) + ": " + what);
}

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(const std::string& source) {
    // Newlines normalised to \n and one trailing newline dropped, as jinja2's tokeniter does.
    src_.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Item> run() {
    const std::size_t n = src_.size();
    while (pos_ < n) {
      std::size_t start = pos_;
      while (start + 1 < n && !(src_[start] == '{' && src_[start + 1] != 0 && std::strchr("{%#", src_[start + 1])))
        ++start;
      if (start + 1 >= n) {
        emit_text(src_.substr(pos_));
        break;
      }
      const char kind = src_[start + 1];
      std::size_t p = start + 2;
      char sign = 0;
      if (p < n && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      std::string text = src_.substr(pos_, start - pos_);
      if (sign == '-') {
        while (!text.empty() && is_ws(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        const std::size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
            std::all_of(text.begin() + l_pos, text.end(), is_ws))
          text.erase(l_pos);
      }
      std::size_t raw_body = 0;
      if (kind == '%' && is_raw_open(p, &raw_body)) {
        emit_text(text);
        lex_raw(start, raw_body);
        continue;
      }
      emit_text(text);
      pos_ = p;
      if (kind == '#') {
        lex_comment(start);
      } else {
        lex_tag(kind == '{' ? Item::Var : Item::Block, start);
      }
    }
    return std::move(items_);
  }

  int line_at(std::size_t p) const {
    return int(std::upper_bound(line_starts_.begin(), line_starts_.end(), p) - line_starts_.begin());
  }

 private:
  void emit_text(std::string text) {
    if (!text.empty()) items_.push_back({Item::Text, std::move(text), {}, 0});
  }

  bool starts(std::size_t p, const char* s) const { return src_.compare(p, std::strlen(s), s) == 0; }

  void skip_ws(std::size_t& p) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
  }

  // {% raw %} at `p` (just after "{%" and its sign); `*body` gets the offset of its content.
  bool is_raw_open(std::size_t p, std::size_t* body) const {
    skip_ws(p);
    if (!starts(p, "raw")) return false;
    p += 3;
    skip_ws(p);
    if (starts(p, "-%}")) {
      p += 3;
      skip_ws(p);
    } else if (starts(p, "%}")) {
      p += 2;
    } else {
      return false;
    }
    *body = p;
    return true;
  }

  void lex_raw(std::size_t open, std::size_t body) {
    for (std::size_t q = src_.find("{%", body); q != std::string::npos; q = src_.find("{%", q + 2)) {
      std::size_t p = q + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      skip_ws(p);
      if (!starts(p, "endraw")) continue;
      p += 6;
      skip_ws(p);
      std::string text = src_.substr(body, q - body);
      if (starts(p, "+%}")) {
        p += 3;
      } else if (starts(p, "-%}")) {
        p += 3;
        skip_ws(p);
      } else if (starts(p, "%}")) {
        p += 2;
        if (p < src_.size() && src_[p] == '\n') ++p;
      } else {
        continue;
      }
      if (sign == '-') {
        while (!text.empty() && is_ws(text.back())) text.pop_back();
      } else if (sign != '+') {
        const std::size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        const bool line_starting = body > 0 && src_[body - 1] == '\n';
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && std::all_of(text.begin() + l_pos, text.end(), is_ws))
          text.erase(l_pos);
      }
      emit_text(text);
      pos_ = p;
      line_starting_ = src_[p - 1] == '\n';
      return;
    }
    syntax_error(line_at(open), "missing end of raw directive");
  }

  void lex_comment(std::size_t open) {
    const std::size_t q = src_.find("#}", pos_);
    if (q == std::string::npos) syntax_error(line_at(open), "missing end of comment tag");
    std::size_t p = q + 2;
    if (q > pos_ && src_[q - 1] == '-') {
      skip_ws(p);
    } else if (!(q > pos_ && src_[q - 1] == '+')) {
      if (p < src_.size() && src_[p] == '\n') ++p;
    }
    pos_ = p;
    line_starting_ = src_[p - 1] == '\n';
  }

  void lex_tag(Item::Kind kind, std::size_t open) {
    Item item{kind, {}, {}, line_at(open)};
    std::vector<char> brackets;
    const std::size_t n = src_.size();
    for (;;) {
      if (pos_ >= n)
        syntax_error(item.line, std::string("unexpected end of template, expected the end of the ") +
                                    (kind == Item::Var ? "print statement ('}}')" : "statement ('%}')"));
      if (brackets.empty()) {
        std::size_t p = pos_;
        bool closed = false;
        if (kind == Item::Var) {
          if (starts(p, "-}}")) {
            p += 3;
            skip_ws(p);
            closed = true;
          } else if (starts(p, "}}")) {
            p += 2;
            closed = true;
          }
        } else if (starts(p, "+%}")) {
          p += 3;
          closed = true;
        } else if (starts(p, "-%}")) {
          p += 3;
          skip_ws(p);
          closed = true;
        } else if (starts(p, "%}")) {
          p += 2;
          if (p < n && src_[p] == '\n') ++p;
          closed = true;
        }
        if (closed) {
          item.tokens.push_back({Tok::End, {}, {}, line_at(pos_)});
          pos_ = p;
          line_starting_ = src_[p - 1] == '\n';
          items_.push_back(std::move(item));
          return;
        }
      }
      const char c = src_[pos_];
      const int line = line_at(pos_);
      if (is_ws(c)) {
        ++pos_;
      } else if (is_digit(c)) {
        item.tokens.push_back(lex_number(line));
      } else if (is_name_start(c)) {
        std::size_t e = pos_;
        while (e < n && is_name_char(src_[e])) ++e;
        item.tokens.push_back({Tok::Name, src_.substr(pos_, e - pos_), {}, line});
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        item.tokens.push_back(lex_string(line));
      } else {
        static const char* ops2[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* o : ops2)
          if (starts(pos_, o)) op = o;
        if (op.empty() && std::strchr("+-/*%~[](){}<>=.:|,;", c)) op = std::string(1, c);
        if (op.empty()) syntax_error(line, std::string("unexpected char '") + c + "'");
        if (op == "(" || op == "[" || op == "{") {
          brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (brackets.empty()) syntax_error(line, "unexpected '" + op + "'");
          if (brackets.back() != op[0])
            syntax_error(line, "unexpected '" + op + "', expected '" + brackets.back() + "'");
          brackets.pop_back();
        }
        item.tokens.push_back({Tok::Op, op, {}, line});
        pos_ += op.size();
      }
    }
  }

  // Digits with single underscores between them, from `p`; returns the end.
  std::size_t digits_end(std::size_t p) const {
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
      ++p;
    return p;
  }

  Token lex_number(int line) {
    const std::size_t n = src_.size();
    if (src_[pos_] == '0' && pos_ + 1 < n && std::strchr("xXoObB", src_[pos_ + 1])) {
      const int base = std::strchr("xX", src_[pos_ + 1]) ? 16 : std::strchr("oO", src_[pos_ + 1]) ? 8 : 2;
      std::size_t e = pos_ + 2;
      std::int64_t v = 0;
      for (; e < n; ++e) {
        const char c = src_[e];
        if (c == '_') continue;
        const int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
        if (d >= base) break;
        v = v * base + d;
      }
      pos_ = e;
      return {Tok::Int, {}, Value(v), line};
    }
    std::size_t e = digits_end(pos_);
    bool is_float = false;
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && e + 1 < n && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits_end(e + 1);
      is_float = true;
    }
    if (!after_dot && e < n && (src_[e] == 'e' || src_[e] == 'E')) {
      std::size_t x = e + 1;
      if (x < n && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < n && is_digit(src_[x])) {
        e = digits_end(x);
        is_float = true;
      }
    }
    std::string text;
    for (std::size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    pos_ = e;
    if (is_float) return {Tok::Float, text, Value(std::stod(text)), line};
    try {
      return {Tok::Int, text, Value(std::int64_t(std::stoll(text))), line};
    } catch (const std::out_of_range&) {
      syntax_error(line, "integer literal " + text + " is out of range");
    }
  }

  Token lex_string(int line) {
    const char quote = src_[pos_];
    std::size_t p = pos_ + 1;
    std::string out;
    const std::size_t n = src_.size();
    while (p < n && src_[p] != quote) {
      if (src_[p] != '\\') {
        out += src_[p++];
        continue;
      }
      if (p + 1 >= n) break;
      const char e = src_[p + 1];
      p += 2;
      // Python's unicode-escape codec, as jinja2 decodes string literals.
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          std::uint32_t cp = 0;
          for (int k = 0; k < len; ++k, ++p) {
            const char c = p < n ? src_[p] : 0;
            const int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d < 0) syntax_error(line, std::string("truncated \\") + e + " escape in a string literal");
            cp = cp * 16 + std::uint32_t(d);
          }
          if (cp > 0x10FFFF) syntax_error(line, "illegal Unicode character in a string literal");
          append_utf8(out, char32_t(cp));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t cp = std::uint32_t(e - '0');
            for (int k = 0; k < 2 && p < n && src_[p] >= '0' && src_[p] <= '7'; ++k, ++p) cp = cp * 8 + (src_[p] - '0');
            append_utf8(out, char32_t(cp));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    if (p >= n) syntax_error(line, "unterminated string literal");
    pos_ = p + 1;
    return {Tok::String, std::move(out), {}, line};
  }

  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Item> items_;
  std::size_t pos_ = 0;
  bool line_starting_ = true;
};

} // namespace

std::vector<Item> lex_template(const std::string& source) { return Lexer(source).run(); }

} // namespace nuvec::lm::jinja
