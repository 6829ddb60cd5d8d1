// Python str semantics on UTF-8: characters are code points (len, indexing, slicing), str.isspace's
// whitespace (Objects/unicodectype.c), and case mappings from ICU (the Unicode data Python uses:
// full mappings for upper/lower, simple ones per character for title/capitalize).
#include "lm/jinja/value.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace nuvec::lm::jinja {

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) n = 1;  // invalid: one byte alone
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

char32_t utf8_decode(std::string_view ch) {
  const auto b0 = static_cast<unsigned char>(ch[0]);
  if (ch.size() == 1) return b0;
  char32_t c = b0 & (0x7F >> ch.size());
  for (std::size_t k = 1; k < ch.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(ch[k]) & 0x3F);
  return c;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<std::string_view> cs = utf8_chars(s);
  std::vector<std::string_view> set;
  if (chars) set = utf8_chars(*chars);
  auto strip_it = [&](std::string_view ch) {
    if (!chars) return is_py_space(utf8_decode(ch));
    for (auto x : set)
      if (x == ch) return true;
    return false;
  };
  std::size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_it(cs[b])) ++b;
  if (right)
    while (e > b && strip_it(cs[e - 1])) --e;
  if (b == e) return {};
  const char* begin = cs[b].data();
  const char* end = cs[e - 1].data() + cs[e - 1].size();
  return std::string(begin, end);
}

std::string py_upper(std::string_view s) {
  std::string out;
  icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), int32_t(s.size())))
      .toUpper(icu::Locale::getRoot())
      .toUTF8String(out);
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), int32_t(s.size())))
      .toLower(icu::Locale::getRoot())
      .toUTF8String(out);
  return out;
}

void append_utf8(std::string& out, char32_t c) { icu::UnicodeString(UChar32(c)).toUTF8String(out); }

namespace {

bool is_cased(char32_t c) { return u_isupper(UChar32(c)) || u_islower(UChar32(c)) || u_istitle(UChar32(c)); }

} // namespace

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (std::string_view ch : utf8_chars(s)) {
    const char32_t c = utf8_decode(ch);
    append_utf8(out, prev_cased ? char32_t(u_tolower(UChar32(c))) : char32_t(u_totitle(UChar32(c))));
    prev_cased = is_cased(c);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (std::string_view ch : utf8_chars(s)) {
    const char32_t c = utf8_decode(ch);
    append_utf8(out, first ? char32_t(u_totitle(UChar32(c))) : char32_t(u_tolower(UChar32(c))));
    first = false;
  }
  return out;
}

} // namespace nuvec::lm::jinja
