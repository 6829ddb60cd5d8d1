// Byte-level BPE tokenizer of Hugging Face tokenizer.json files (see include/nuvec/lm/tokenizer.h
// for the sources of each rule).
#include "nuvec/lm/tokenizer.h"

#include "lm/byte_level.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace nuvec::lm {

using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[lm.Tokenizer] " + what);
}

// ---- UTF-8 helpers ----------------------------------------------------------------------

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Length of the valid UTF-8 character starting at s[i], 0 if invalid there. `*valid_prefix`
// gets the number of bytes that form a valid (possibly incomplete) prefix of a character
// (at least 1 for an invalid sequence, as from_utf8_lossy replaces the maximal invalid
// prefix by one U+FFFD); `*truncated` is set when the input ends inside a valid prefix.
size_t utf8_char_len(const std::string& s, size_t i, size_t* valid_prefix, bool* truncated) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  *truncated = false;
  *valid_prefix = 1;
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF; // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      *truncated = true;
      *valid_prefix = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *valid_prefix = k;
      return 0;
    }
  }
  return n;
}

bool is_valid_utf8(const std::string& s) {
  size_t i = 0, vp;
  bool tr;
  while (i < s.size()) {
    size_t n = utf8_char_len(s, i, &vp, &tr);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Rust's String::from_utf8_lossy: each maximal invalid prefix becomes U+FFFD. With
// `hold_incomplete`, an incomplete but valid prefix at the very end is not converted; its
// start is returned in *held (s.size() when nothing is held).
std::string utf8_lossy(const std::string& s, bool hold_incomplete, size_t* held) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0, vp;
  bool tr;
  if (held) *held = s.size();
  while (i < s.size()) {
    size_t n = utf8_char_len(s, i, &vp, &tr);
    if (n > 0) {
      out.append(s, i, n);
      i += n;
    } else if (tr && hold_incomplete) {
      if (held) *held = i;
      break;
    } else {
      out += "\xEF\xBF\xBD";
      i += vp;
    }
  }
  return out;
}

void check_utf8(const std::string& text) {
  if (!is_valid_utf8(text)) fail("input text is not valid UTF-8");
}

// Splits a UTF-8 string into its characters (each a UTF-8 string). Input must be valid.
std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0, vp;
  bool tr;
  while (i < s.size()) {
    size_t n = utf8_char_len(s, i, &vp, &tr);
    if (n == 0) n = 1; // not reached for valid input
    out.emplace_back(s, i, n);
    i += n;
  }
  return out;
}

// ---- GPT-2's bytes_to_unicode -----------------------------------------------------------

} // namespace

const std::array<std::string, 256>& detail::byte_level_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    int extra = 0;
    for (int b = 0; b < 256; ++b)
      append_utf8(t[b], direct[b] ? uint32_t(b) : uint32_t(256 + extra++));
    return t;
  }();
  return table;
}

namespace {

struct ByteTable {
  const std::array<std::string, 256>& to_char = detail::byte_level_chars(); // byte -> stand-in
  std::unordered_map<std::string, unsigned char> to_byte;
  ByteTable() {
    for (int b = 0; b < 256; ++b) to_byte[to_char[b]] = static_cast<unsigned char>(b);
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

std::string bytes_to_chars(const std::string& s) {
  const auto& t = byte_table();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) out += t.to_char[c];
  return out;
}

// ---- regex (PCRE2, UTF + UCP) -----------------------------------------------------------

struct Regex {
  pcre2_code* code = nullptr;
  explicit Regex(const std::string& pattern, bool literal = false) {
    int err = 0;
    PCRE2_SIZE off = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err,
                         &off, nullptr);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      fail("cannot compile regex '" + pattern + "' at offset " + std::to_string(off) + ": " +
           reinterpret_cast<const char*>(buf));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // optional speed-up; falls back silently
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() { pcre2_code_free(code); }

  // Non-overlapping matches [start, end) of the whole string, left to right; an empty match
  // advances by one character (tokenizers' regex split ignores empty matches).
  std::vector<std::pair<size_t, size_t>> find_all(const std::string& s) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    size_t pos = 0;
    while (pos <= s.size()) {
      // Subjects are valid UTF-8 (checked by encode/pre_tokenize, split on character
      // boundaries); without NO_UTF_CHECK each call re-validates the whole subject (O(n^2)).
      int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, PCRE2_NO_UTF_CHECK, md,
                           nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        pcre2_match_data_free(md);
        fail("regex match failed (PCRE2 error " + std::to_string(rc) + ")");
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t a = ov[0], b = ov[1];
      if (b > a) {
        out.emplace_back(a, b);
        pos = b;
      } else {
        // Empty match: step over one character.
        if (a >= s.size()) break;
        size_t vp;
        bool tr;
        size_t n = utf8_char_len(s, a, &vp, &tr);
        pos = a + (n ? n : 1);
      }
    }
    pcre2_match_data_free(md);
    return out;
  }
};

const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---- components -------------------------------------------------------------------------

enum class NormKind { NFC, NFD, NFKC, NFKD };

enum class SplitBehavior { Isolated, Removed, MergedWithPrevious, MergedWithNext };

struct PreTok {
  enum Kind { Split, ByteLevel } kind = Split;
  // Split
  std::shared_ptr<Regex> regex;
  SplitBehavior behavior = SplitBehavior::Isolated;
  // ByteLevel
  bool add_prefix_space = true;
  bool use_regex = true;
};

struct PostItem {
  bool is_sequence; // $A, otherwise special token ids
  std::vector<int> ids;
};

std::string type_of(const json& j, const std::string& what) {
  if (!j.is_object()) fail(what + " must be an object or null");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) fail(what + " has no string \"type\"");
  return it->get<std::string>();
}

bool get_bool(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) fail(std::string("field \"") + key + "\" must be a boolean");
  return it->get<bool>();
}

} // namespace

// ---- Impl -------------------------------------------------------------------------------

struct Tokenizer::Impl {
  std::unordered_map<std::string, int> vocab;
  std::unordered_map<int, std::string> id_to_vocab;
  // Merge (left id, right id) -> (rank, merged id).
  struct PairHash {
    size_t operator()(const std::pair<int, int>& p) const {
      return std::hash<uint64_t>()((uint64_t(uint32_t(p.first)) << 32) | uint32_t(p.second));
    }
  };
  std::unordered_map<std::pair<int, int>, std::pair<int, int>, PairHash> merges;
  bool ignore_merges = false;
  std::optional<int> unk_id;

  struct Added {
    int id;
    std::string content;
    bool special;
  };
  std::vector<Added> added;                          // sorted by content length, longest first
  std::unordered_map<std::string, int> added_by_content;
  std::unordered_map<int, size_t> added_by_id;       // id -> index in `added`
  std::array<std::vector<size_t>, 256> added_by_first; // first byte -> indices, longest first

  std::vector<NormKind> normalizers;
  std::vector<PreTok> pre_tokenizers;
  std::shared_ptr<Regex> gpt2_regex;

  bool has_post = false;
  std::vector<PostItem> post_single;
  bool byte_level_decoder = false;
  int max_id = -1;

  // -- parsing
  void parse_model(const json& m);
  void parse_added(const json& a);
  void parse_normalizer(const json& n);
  void parse_pre_tokenizer(const json& p);
  void parse_post_processor(const json& p);
  void parse_decoder(const json& d);
  int special_id(const std::string& name, const json* special_tokens) const;

  // -- encoding
  std::string normalize(const std::string& s) const;
  std::vector<std::string> pre_tokenize(const std::string& normalized) const;
  void bpe(const std::string& word, std::vector<int>& out) const;
  std::vector<int> encode(const std::string& text, bool add_special) const;

  // -- decoding
  bool known(int id) const { return added_by_id.count(id) || id_to_vocab.count(id); }
  const std::string& token(int id) const;
  bool is_special(int id) const {
    auto it = added_by_id.find(id);
    return it != added_by_id.end() && added[it->second].special;
  }
  // The decoder's bytes of one token (before the lossy UTF-8 conversion).
  std::string token_bytes(int id) const;
};

void Tokenizer::Impl::parse_model(const json& m) {
  if (!m.is_object()) fail("\"model\" must be an object");
  std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>()
                                                                  : std::string("BPE");
  if (type != "BPE") fail("unsupported model type '" + type + "'");
  auto v = m.find("vocab");
  if (v == m.end() || !v->is_object()) fail("model has no \"vocab\" object");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_number_integer()) fail("vocab entry '" + it.key() + "' has no integer id");
    int id = it.value().get<int>();
    if (id < 0) fail("vocab entry '" + it.key() + "' has a negative id");
    vocab[it.key()] = id;
    id_to_vocab[id] = it.key();
    max_id = std::max(max_id, id);
  }
  if (get_bool(m, "byte_fallback", false)) fail("unsupported BPE option byte_fallback=true");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(k);
    if (it != m.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      fail(std::string("unsupported BPE option ") + k);
  }
  ignore_merges = get_bool(m, "ignore_merges", false);
  if (auto u = m.find("unk_token"); u != m.end() && u->is_string()) {
    auto f = vocab.find(u->get<std::string>());
    if (f == vocab.end()) fail("unk_token '" + u->get<std::string>() + "' is not in the vocab");
    unk_id = f->second;
  }
  auto mg = m.find("merges");
  if (mg == m.end() || !mg->is_array()) fail("model has no \"merges\" array");
  int rank = 0;
  for (const auto& e : *mg) {
    std::string a, b;
    if (e.is_string()) {
      const auto& s = e.get_ref<const std::string&>();
      auto sp = s.find(' ');
      if (sp == std::string::npos) fail("merge '" + s + "' is not of the form \"a b\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      fail("merge #" + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || iab == vocab.end())
      fail("merge '" + a + " " + b + "' uses a token that is not in the vocab");
    // The first occurrence of a pair keeps its rank (later duplicates are ignored).
    merges.emplace(std::make_pair(ia->second, ib->second), std::make_pair(rank, iab->second));
    ++rank;
  }
}

void Tokenizer::Impl::parse_added(const json& a) {
  if (a.is_null()) return;
  if (!a.is_array()) fail("\"added_tokens\" must be an array");
  for (const auto& t : a) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string())
      fail("an added token lacks an integer \"id\" or a string \"content\"");
    Added x{t["id"].get<int>(), t["content"].get<std::string>(), get_bool(t, "special", false)};
    if (x.id < 0) fail("added token '" + x.content + "' has a negative id");
    if (x.content.empty()) fail("an added token has empty content");
    max_id = std::max(max_id, x.id);
    added.push_back(std::move(x));
  }
  std::stable_sort(added.begin(), added.end(), [](const Added& l, const Added& r) {
    return l.content.size() > r.content.size();
  });
  for (size_t i = 0; i < added.size(); ++i) {
    added_by_content[added[i].content] = added[i].id;
    added_by_id[added[i].id] = i;
    added_by_first[static_cast<unsigned char>(added[i].content[0])].push_back(i);
  }
}

void Tokenizer::Impl::parse_normalizer(const json& n) {
  if (n.is_null()) return;
  std::string type = type_of(n, "normalizer");
  if (type == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array())
      fail("normalizer Sequence has no \"normalizers\" array");
    for (const auto& x : n["normalizers"]) parse_normalizer(x);
  } else if (type == "NFC") {
    normalizers.push_back(NormKind::NFC);
  } else if (type == "NFD") {
    normalizers.push_back(NormKind::NFD);
  } else if (type == "NFKC") {
    normalizers.push_back(NormKind::NFKC);
  } else if (type == "NFKD") {
    normalizers.push_back(NormKind::NFKD);
  } else {
    fail("unsupported normalizer type '" + type + "'");
  }
}

void Tokenizer::Impl::parse_pre_tokenizer(const json& p) {
  if (p.is_null()) return;
  std::string type = type_of(p, "pre_tokenizer");
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
      fail("pre_tokenizer Sequence has no \"pretokenizers\" array");
    for (const auto& x : p["pretokenizers"]) parse_pre_tokenizer(x);
  } else if (type == "Split") {
    PreTok t;
    t.kind = PreTok::Split;
    auto pat = p.find("pattern");
    if (pat == p.end() || !pat->is_object()) fail("Split has no \"pattern\" object");
    if (pat->contains("Regex") && (*pat)["Regex"].is_string()) {
      t.regex = std::make_shared<Regex>((*pat)["Regex"].get<std::string>());
    } else if (pat->contains("String") && (*pat)["String"].is_string()) {
      t.regex = std::make_shared<Regex>((*pat)["String"].get<std::string>(), /*literal=*/true);
    } else {
      fail("Split pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
    std::string beh = p.contains("behavior") && p["behavior"].is_string()
                          ? p["behavior"].get<std::string>()
                          : std::string("Isolated");
    if (beh == "Isolated") t.behavior = SplitBehavior::Isolated;
    else if (beh == "Removed") t.behavior = SplitBehavior::Removed;
    else if (beh == "MergedWithPrevious") t.behavior = SplitBehavior::MergedWithPrevious;
    else if (beh == "MergedWithNext") t.behavior = SplitBehavior::MergedWithNext;
    else fail("unsupported Split behavior '" + beh + "'");
    if (get_bool(p, "invert", false)) fail("unsupported Split option invert=true");
    pre_tokenizers.push_back(std::move(t));
  } else if (type == "ByteLevel") {
    PreTok t;
    t.kind = PreTok::ByteLevel;
    t.add_prefix_space = get_bool(p, "add_prefix_space", true);
    t.use_regex = get_bool(p, "use_regex", true);
    if (t.use_regex && !gpt2_regex) gpt2_regex = std::make_shared<Regex>(kGpt2Pattern);
    pre_tokenizers.push_back(std::move(t));
  } else {
    fail("unsupported pre_tokenizer type '" + type + "'");
  }
}

int Tokenizer::Impl::special_id(const std::string& name, const json* special_tokens) const {
  if (auto f = added_by_content.find(name); f != added_by_content.end()) return f->second;
  if (auto f = vocab.find(name); f != vocab.end()) return f->second;
  fail("post_processor special token '" + name + "' is not a token");
}

void Tokenizer::Impl::parse_post_processor(const json& p) {
  if (p.is_null()) return;
  std::string type = type_of(p, "post_processor");
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array())
      fail("post_processor Sequence has no \"processors\" array");
    for (const auto& x : p["processors"]) parse_post_processor(x);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    if (has_post) fail("more than one id-changing post_processor");
    has_post = true;
    const json* specials = p.contains("special_tokens") ? &p["special_tokens"] : nullptr;
    auto ids_of = [&](const std::string& name) {
      if (specials && specials->is_object() && specials->contains(name)) {
        const json& st = (*specials)[name];
        if (!st.contains("ids") || !st["ids"].is_array())
          fail("special_tokens entry '" + name + "' has no \"ids\" array");
        std::vector<int> ids;
        for (const auto& i : st["ids"]) {
          if (!i.is_number_integer()) fail("special_tokens entry '" + name + "' has a bad id");
          ids.push_back(i.get<int>());
        }
        return ids;
      }
      return std::vector<int>{special_id(name, nullptr)};
    };
    auto single = p.find("single");
    if (single == p.end()) fail("TemplateProcessing has no \"single\" template");
    auto add_piece = [&](const std::string& kind, const std::string& id) {
      if (kind == "Sequence") {
        if (id != "A") fail("TemplateProcessing single template uses sequence '" + id + "'");
        post_single.push_back({true, {}});
      } else {
        post_single.push_back({false, ids_of(id)});
      }
    };
    if (single->is_string()) {
      // The string form: "<|begin_of_text|> $A", "$A:0", "[CLS]:0 $0".
      std::istringstream ss(single->get<std::string>());
      std::string w;
      while (ss >> w) {
        if (auto c = w.rfind(':'); c != std::string::npos && c > 0) w = w.substr(0, c);
        if (w == "$" || w == "$A" || w == "$a" || w == "$0") add_piece("Sequence", "A");
        else if (!w.empty() && w[0] == '$') add_piece("Sequence", w.substr(1));
        else add_piece("SpecialToken", w);
      }
    } else if (single->is_array()) {
      for (const auto& item : *single) {
        if (item.is_object() && item.contains("Sequence") && item["Sequence"].is_object() &&
            item["Sequence"].contains("id") && item["Sequence"]["id"].is_string()) {
          add_piece("Sequence", item["Sequence"]["id"].get<std::string>());
        } else if (item.is_object() && item.contains("SpecialToken") &&
                   item["SpecialToken"].is_object() && item["SpecialToken"].contains("id") &&
                   item["SpecialToken"]["id"].is_string()) {
          add_piece("SpecialToken", item["SpecialToken"]["id"].get<std::string>());
        } else {
          fail("TemplateProcessing template item is neither Sequence nor SpecialToken");
        }
      }
    } else {
      fail("TemplateProcessing \"single\" must be a string or an array");
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    if (has_post) fail("more than one id-changing post_processor");
    has_post = true;
    auto pair_id = [&](const char* k) {
      if (!p.contains(k) || !p[k].is_array() || p[k].size() != 2 || !p[k][1].is_number_integer())
        fail(type + " has no [token, id] \"" + k + "\"");
      return p[k][1].get<int>();
    };
    post_single.push_back({false, {pair_id("cls")}});
    post_single.push_back({true, {}});
    post_single.push_back({false, {pair_id("sep")}});
  } else {
    fail("unsupported post_processor type '" + type + "'");
  }
}

void Tokenizer::Impl::parse_decoder(const json& d) {
  if (d.is_null()) return;
  std::string type = type_of(d, "decoder");
  if (type == "ByteLevel") {
    byte_level_decoder = true;
  } else if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array() &&
             d["decoders"].size() == 1) {
    parse_decoder(d["decoders"][0]);
  } else {
    fail("unsupported decoder type '" + type + "'");
  }
}

std::string Tokenizer::Impl::normalize(const std::string& s) const {
  if (normalizers.empty() || s.empty()) return s;
  UErrorCode st = U_ZERO_ERROR;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  for (NormKind k : normalizers) {
    const icu::Normalizer2* n = nullptr;
    switch (k) {
      case NormKind::NFC: n = icu::Normalizer2::getNFCInstance(st); break;
      case NormKind::NFD: n = icu::Normalizer2::getNFDInstance(st); break;
      case NormKind::NFKC: n = icu::Normalizer2::getNFKCInstance(st); break;
      case NormKind::NFKD: n = icu::Normalizer2::getNFKDInstance(st); break;
    }
    if (U_FAILURE(st)) throw std::runtime_error("[lm.Tokenizer] ICU normalizer unavailable");
    if (n->isNormalized(u, st) && U_SUCCESS(st)) continue;
    st = U_ZERO_ERROR;
    u = n->normalize(u, st);
    if (U_FAILURE(st)) throw std::runtime_error("[lm.Tokenizer] ICU normalization failed");
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

namespace {

// Splits each piece by a regex with a split behaviour (tokenizers' NormalizedString::split).
std::vector<std::string> split_pieces(const std::vector<std::string>& pieces, const Regex& re,
                                      SplitBehavior beh) {
  std::vector<std::string> out;
  for (const auto& p : pieces) {
    auto ms = re.find_all(p);
    // Spans with a flag "is match".
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> spans;
    size_t prev = 0;
    for (auto [a, b] : ms) {
      if (a > prev) spans.push_back({{prev, a}, false});
      spans.push_back({{a, b}, true});
      prev = b;
    }
    if (prev < p.size()) spans.push_back({{prev, p.size()}, false});
    std::vector<std::string> local;
    switch (beh) {
      case SplitBehavior::Isolated:
        for (auto& [r, m] : spans) local.emplace_back(p, r.first, r.second - r.first);
        break;
      case SplitBehavior::Removed:
        for (auto& [r, m] : spans)
          if (!m) local.emplace_back(p, r.first, r.second - r.first);
        break;
      case SplitBehavior::MergedWithPrevious: {
        bool prev_match = false;
        for (auto& [r, m] : spans) {
          if (m && !local.empty() && !prev_match) local.back().append(p, r.first, r.second - r.first);
          else local.emplace_back(p, r.first, r.second - r.first);
          prev_match = m;
        }
        break;
      }
      case SplitBehavior::MergedWithNext: {
        bool prev_match = false;
        for (auto& [r, m] : spans) {
          if (!m && prev_match && !local.empty()) local.back().append(p, r.first, r.second - r.first);
          else local.emplace_back(p, r.first, r.second - r.first);
          prev_match = m;
        }
        break;
      }
    }
    for (auto& s : local)
      if (!s.empty()) out.push_back(std::move(s));
  }
  return out;
}

} // namespace

std::vector<std::string> Tokenizer::Impl::pre_tokenize(const std::string& normalized) const {
  std::vector<std::string> pieces;
  if (!normalized.empty()) pieces.push_back(normalized);
  bool mapped = false;
  for (const PreTok& t : pre_tokenizers) {
    if (t.kind == PreTok::Split) {
      if (mapped) fail("a Split after ByteLevel in the pre_tokenizer Sequence is not supported");
      pieces = split_pieces(pieces, *t.regex, t.behavior);
    } else {
      if (mapped) fail("two ByteLevel pre_tokenizers are not supported");
      if (t.add_prefix_space)
        for (auto& p : pieces)
          if (p[0] != ' ') p.insert(p.begin(), ' ');
      if (t.use_regex) pieces = split_pieces(pieces, *gpt2_regex, SplitBehavior::Isolated);
      for (auto& p : pieces) p = bytes_to_chars(p);
      mapped = true;
    }
  }
  return pieces;
}

void Tokenizer::Impl::bpe(const std::string& word, std::vector<int>& out) const {
  if (ignore_merges) {
    if (auto f = vocab.find(word); f != vocab.end()) {
      out.push_back(f->second);
      return;
    }
  }
  struct Sym {
    int id;
    int prev, next;
    bool alive;
  };
  std::vector<Sym> syms;
  for (const auto& c : utf8_chars(word)) {
    auto f = vocab.find(c);
    if (f != vocab.end()) {
      syms.push_back({f->second, -1, -1, true});
    } else if (unk_id) {
      // fuse_unk is not modelled: each unknown character is one unk.
      syms.push_back({*unk_id, -1, -1, true});
    }
    // tokenizers drops a character with neither a vocab entry nor an unk_token.
  }
  const int n = static_cast<int>(syms.size());
  for (int i = 0; i < n; ++i) {
    syms[i].prev = i - 1;
    syms[i].next = i + 1 < n ? i + 1 : -1;
  }
  // Min-heap of (rank, left position, merged id): lowest rank first, then leftmost
  // (tokenizers' models/bpe/word.rs Word::merge_all).
  using Cand = std::tuple<int, int, int>;
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
  auto push_pair = [&](int i) {
    if (i < 0 || syms[i].next < 0) return;
    auto f = merges.find({syms[i].id, syms[syms[i].next].id});
    if (f != merges.end()) q.emplace(f->second.first, i, f->second.second);
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!q.empty()) {
    auto [rank, i, new_id] = q.top();
    q.pop();
    if (!syms[i].alive || syms[i].next < 0) continue;
    int j = syms[i].next;
    auto f = merges.find({syms[i].id, syms[j].id});
    if (f == merges.end() || f->second.first != rank || f->second.second != new_id) continue;
    syms[i].id = new_id;
    syms[j].alive = false;
    syms[i].next = syms[j].next;
    if (syms[j].next >= 0) syms[syms[j].next].prev = i;
    push_pair(syms[i].prev);
    push_pair(i);
  }
  for (int i = 0; i < n; ++i)
    if (syms[i].alive) out.push_back(syms[i].id);
}

std::vector<int> Tokenizer::Impl::encode(const std::string& text, bool add_special) const {
  check_utf8(text);
  std::vector<int> ids;
  auto encode_plain = [&](size_t a, size_t b) {
    if (b <= a) return;
    for (const auto& w : pre_tokenize(normalize(text.substr(a, b - a)))) bpe(w, ids);
  };
  // Added tokens split the raw text first: at each position the longest matching content
  // (leftmost-longest, as the Aho-Corasick matcher of tokenizers' AddedVocabulary).
  size_t seg = 0, i = 0;
  while (i < text.size() && !added.empty()) {
    const Added* hit = nullptr;
    for (size_t k : added_by_first[static_cast<unsigned char>(text[i])]) {
      if (text.compare(i, added[k].content.size(), added[k].content) == 0) {
        hit = &added[k];
        break; // sorted longest first
      }
    }
    if (hit) {
      encode_plain(seg, i);
      ids.push_back(hit->id);
      i += hit->content.size();
      seg = i;
    } else {
      ++i;
    }
  }
  encode_plain(seg, text.size());
  if (!add_special || !has_post) return ids;
  std::vector<int> out;
  for (const auto& item : post_single) {
    if (item.is_sequence) out.insert(out.end(), ids.begin(), ids.end());
    else out.insert(out.end(), item.ids.begin(), item.ids.end());
  }
  return out;
}

const std::string& Tokenizer::Impl::token(int id) const {
  if (auto f = added_by_id.find(id); f != added_by_id.end()) return added[f->second].content;
  if (auto f = id_to_vocab.find(id); f != id_to_vocab.end()) return f->second;
  throw std::out_of_range("[lm.Tokenizer] token id " + std::to_string(id) +
                          " is not in the vocabulary (vocab_size " + std::to_string(max_id + 1) +
                          ")");
}

std::string Tokenizer::Impl::token_bytes(int id) const {
  const std::string& t = token(id);
  if (!byte_level_decoder) return t;
  // tokenizers' decoders/byte_level.rs: a token whose characters are all in the byte table
  // becomes those bytes; otherwise its own UTF-8.
  const auto& tab = byte_table().to_byte;
  std::string out;
  for (const auto& c : utf8_chars(t)) {
    auto f = tab.find(c);
    if (f == tab.end()) return t;
    out += static_cast<char>(f->second);
  }
  return out;
}

// ---- Tokenizer --------------------------------------------------------------------------

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("[lm.Tokenizer] cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw std::runtime_error("[lm.Tokenizer] cannot read '" + path + "'");
  return from_json_string(ss.str());
}

Tokenizer Tokenizer::from_json_string(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) fail("the top level is not a JSON object");
  auto impl = std::make_shared<Impl>();
  try {
    if (!j.contains("model") || j["model"].is_null()) fail("missing \"model\"");
    impl->parse_model(j["model"]);
    if (j.contains("added_tokens")) impl->parse_added(j["added_tokens"]);
    if (j.contains("normalizer")) impl->parse_normalizer(j["normalizer"]);
    if (j.contains("pre_tokenizer")) impl->parse_pre_tokenizer(j["pre_tokenizer"]);
    if (j.contains("post_processor")) impl->parse_post_processor(j["post_processor"]);
    if (j.contains("decoder")) impl->parse_decoder(j["decoder"]);
  } catch (const json::exception& e) {
    fail(std::string("malformed field: ") + e.what());
  }
  return Tokenizer(std::move(impl));
}

std::vector<int> Tokenizer::encode(const std::string& text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool skip_special_tokens) const {
  std::string raw;
  bool first = true;
  for (int id : ids) {
    if (!impl_->known(id)) impl_->token(id); // throws out_of_range
    if (skip_special_tokens && impl_->is_special(id)) continue;
    if (!impl_->byte_level_decoder && !first) raw += ' ';
    raw += impl_->token_bytes(id);
    first = false;
  }
  return utf8_lossy(raw, false, nullptr);
}

int Tokenizer::vocab_size() const { return impl_->max_id + 1; }

std::optional<int> Tokenizer::token_to_id(const std::string& token) const {
  if (auto f = impl_->added_by_content.find(token); f != impl_->added_by_content.end())
    return f->second;
  if (auto f = impl_->vocab.find(token); f != impl_->vocab.end()) return f->second;
  return std::nullopt;
}

std::string Tokenizer::id_to_token(int id) const { return impl_->token(id); }

std::optional<int> Tokenizer::bos_token_id() const {
  const auto& s = impl_->post_single;
  if (!impl_->has_post || s.empty() || s[0].is_sequence || s[0].ids.empty()) return std::nullopt;
  return s[0].ids[0];
}

std::vector<std::string> Tokenizer::pre_tokenize(const std::string& text) const {
  check_utf8(text);
  return impl_->pre_tokenize(impl_->normalize(text));
}

// ---- StreamingDecoder -------------------------------------------------------------------

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamingDecoder::push(int id) {
  const auto& impl = *tokenizer_.impl_;
  std::string bytes = impl.token_bytes(id); // throws out_of_range first
  if (skip_special_ && impl.is_special(id)) return {};
  if (!impl.byte_level_decoder && !first_) pending_ += ' ';
  first_ = false;
  pending_ += bytes;
  size_t held = pending_.size();
  std::string out = utf8_lossy(pending_, /*hold_incomplete=*/true, &held);
  pending_.erase(0, held);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = utf8_lossy(pending_, false, nullptr);
  pending_.clear();
  first_ = true;
  return out;
}

} // namespace nuvec::lm
