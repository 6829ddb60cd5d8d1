// Byte-level BPE training written as a tokenizer.json. The rules are Hugging Face tokenizers'
// BpeTrainer (tokenizers/src/models/bpe/trainer.rs: do_train, count_pairs; word.rs:
// Word::merge) and its serialisation (models/bpe/serialization.rs, tokenizer/serialization.rs).
#include "nuvec/lm/bpe_trainer.h"

#include "lm/byte_level.h"
#include "nuvec/lm/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace nuvec::lm {

namespace {

using ojson = nlohmann::ordered_json;

// The pre-tokenizer split pattern of GPT-4 (cl100k), Llama-3 and Qwen2/3 tokenizer.json files.
const char* kSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("[lm.") + fn + "] " + what);
}

// The pre_tokenizer of the written file, as tokenizers serialises
// Sequence([Split(Regex(p), "isolated"), ByteLevel(add_prefix_space=False, use_regex=False)]).
ojson pre_tokenizer_json() {
  ojson split = {{"type", "Split"},
                 {"pattern", {{"Regex", kSplitPattern}}},
                 {"behavior", "Isolated"},
                 {"invert", false}};
  ojson byte_level = {{"type", "ByteLevel"},
                      {"add_prefix_space", false},
                      {"trim_offsets", true},
                      {"use_regex", false}};
  return {{"type", "Sequence"}, {"pretokenizers", ojson::array({split, byte_level})}};
}

// A tokenizer with that pre-tokenizer and an empty model: its pre_tokenize() is the training
// split (tokenizers' Tokenizer::train runs the normalizer and pre-tokenizer only), so the
// corpus is cut by exactly the code that later encodes.
const Tokenizer& splitter() {
  static const Tokenizer t = [] {
    ojson j = {{"model", {{"type", "BPE"}, {"vocab", ojson::object()}, {"merges", ojson::array()}}},
               {"pre_tokenizer", pre_tokenizer_json()}};
    return Tokenizer::from_json_string(j.dump());
  }();
  return t;
}

// Pre-tokens (byte-level strings) and how often each occurs, in order of first occurrence
// (trainer.rs BpeTrainer::feed).
struct WordCounts {
  std::vector<std::string> words;
  std::vector<uint64_t> counts;
  std::unordered_map<std::string, uint32_t> index;

  // `where` names the sequence in the error for invalid UTF-8.
  void add(const std::string& text, const char* fn, const std::function<std::string()>& where) {
    std::vector<std::string> pieces;
    try {
      pieces = splitter().pre_tokenize(text);
    } catch (const std::invalid_argument& e) {
      fail(fn, where() + " cannot be pre-tokenized: " + e.what());
    }
    for (auto& p : pieces) {
      auto [it, fresh] = index.try_emplace(p, uint32_t(words.size()));
      if (fresh) {
        words.push_back(std::move(p));
        counts.push_back(1);
      } else {
        ++counts[it->second];
      }
    }
  }
};

std::vector<std::string> checked_specials(const BpeTrainerOptions& o, const char* fn) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < o.special_tokens.size(); ++i) {
    const std::string& s = o.special_tokens[i];
    if (s.empty())
      fail(fn, "special_tokens[" + std::to_string(i) + "] must not be empty; got \"\".");
    try {
      splitter().pre_tokenize(s); // validates UTF-8
    } catch (const std::invalid_argument&) {
      fail(fn, "special_tokens[" + std::to_string(i) + "] must be valid UTF-8.");
    }
    if (seen.insert(s).second) out.push_back(s);
  }
  if (o.min_frequency < 0)
    fail(fn, "min_frequency must be >= 0; got " + std::to_string(o.min_frequency) + ".");
  const size_t need = 256 + out.size();
  if (o.vocab_size < 0 || size_t(o.vocab_size) < need)
    fail(fn, "vocab_size must be at least 256 + the number of special tokens (" +
                 std::to_string(need) + "); got " + std::to_string(o.vocab_size) + ".");
  return out;
}

uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }
uint32_t pair_left(uint64_t k) { return uint32_t(k >> 32); }
uint32_t pair_right(uint64_t k) { return uint32_t(k); }

// Word::merge (word.rs): replaces each (c1, c2) left to right without overlap by `repl`
// and reports the pair changes (-1 for a pair destroyed, +1 for one created; the merged
// pair itself is not reported, as there).
template <class Change>
void merge_word(std::vector<uint32_t>& s, uint32_t c1, uint32_t c2, uint32_t repl,
                Change&& change) {
  const size_t n = s.size();
  size_t w = 0, r = 0;
  while (r < n) {
    if (s[r] == c1 && r + 1 < n && s[r + 1] == c2) {
      if (w > 0) {
        change(pair_key(s[w - 1], c1), -1);
        change(pair_key(s[w - 1], repl), +1);
      }
      s[w++] = repl;
      r += 2;
      if (r < n) {
        change(pair_key(c2, s[r]), -1);
        change(pair_key(repl, s[r]), +1);
      }
    } else {
      s[w++] = s[r++];
    }
  }
  s.resize(w);
}

// A queue entry (trainer.rs `Merge`): a pair, its count when pushed and the words that may
// hold it. The queue pops the highest count, then the smallest (left id, right id).
struct Entry {
  int64_t count;
  uint64_t pair;
  std::vector<uint32_t> pos;
};
bool lower_priority(const Entry& x, const Entry& y) {
  return x.count != y.count ? x.count < y.count : x.pair > y.pair;
}

struct Trained {
  std::vector<std::string> tokens;                   // id -> token (byte-level string)
  std::vector<std::pair<uint32_t, uint32_t>> merges; // in rank order
};

// trainer.rs BpeTrainer::do_train with the settings of bpe_trainer.h.
Trained train(const WordCounts& wc, const std::vector<std::string>& specials,
              const BpeTrainerOptions& o) {
  Trained t;
  std::unordered_map<std::string, uint32_t> to_id;
  auto add_token = [&](const std::string& s) {
    auto [it, fresh] = to_id.try_emplace(s, uint32_t(t.tokens.size()));
    if (fresh) t.tokens.push_back(s);
    return it->second;
  };
  // 1. Special tokens; 2. the alphabet (ByteLevel.alphabet(), which covers every character
  // of a byte-level pre-token) sorted by code point.
  for (const auto& s : specials) add_token(s);
  std::vector<std::pair<uint32_t, std::string>> alphabet;
  for (const auto& c : detail::byte_level_chars()) {
    const auto* u = reinterpret_cast<const unsigned char*>(c.data());
    uint32_t cp = c.size() == 1 ? u[0] : ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu);
    alphabet.emplace_back(cp, c);
  }
  std::sort(alphabet.begin(), alphabet.end());
  for (const auto& [cp, c] : alphabet) add_token(c);

  // 3. Words as symbol ids (a character that equals a special token takes its id, as there).
  std::vector<std::vector<uint32_t>> words(wc.words.size());
  for (size_t i = 0; i < wc.words.size(); ++i) {
    const std::string& w = wc.words[i];
    for (size_t k = 0; k < w.size();) {
      const auto b = static_cast<unsigned char>(w[k]);
      size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      words[i].push_back(to_id.at(w.substr(k, len)));
      k += len;
    }
  }
  const std::vector<uint64_t>& counts = wc.counts;

  // 4. Pair counts and, per pair, the words holding it.
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (uint32_t i = 0; i < words.size(); ++i) {
    const auto& s = words[i];
    for (size_t k = 0; k + 1 < s.size(); ++k) {
      uint64_t p = pair_key(s[k], s[k + 1]);
      pair_counts[p] += int64_t(counts[i]);
      auto& v = where[p];
      if (v.empty() || v.back() != i) v.push_back(i);
    }
  }
  std::vector<Entry> queue;
  auto push = [&](Entry e) {
    queue.push_back(std::move(e));
    std::push_heap(queue.begin(), queue.end(), lower_priority);
  };
  auto flush_where = [&] {
    for (auto& [p, pos] : where) {
      int64_t c = pair_counts[p];
      if (c > 0) push({c, p, std::move(pos)});
    }
    where.clear();
  };
  flush_where();

  // 5. Merges.
  const int64_t min_frequency = o.min_frequency;
  while (t.tokens.size() < size_t(o.vocab_size) && !queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), lower_priority);
    Entry top = std::move(queue.back());
    queue.pop_back();
    const int64_t current = pair_counts[top.pair];
    if (top.count != current) { // stale: re-queue with the present count
      top.count = current;
      push(std::move(top));
      continue;
    }
    if (top.count < 1 || min_frequency > top.count) break;
    const uint32_t a = pair_left(top.pair), b = pair_right(top.pair);
    const uint32_t id = add_token(t.tokens[a] + t.tokens[b]);
    t.merges.emplace_back(a, b);
    for (uint32_t i : top.pos) {
      const int64_t cnt = int64_t(counts[i]);
      merge_word(words[i], a, b, id, [&](uint64_t p, int change) {
        pair_counts[p] += change * cnt;
        if (change > 0) {
          auto& v = where[p];
          if (v.empty() || v.back() != i) v.push_back(i);
        }
      });
    }
    flush_where();
  }

  // A pair learned twice keeps its last rank (do_train collects the merges into a map keyed
  // by pair; the serialiser orders them by rank).
  std::unordered_map<uint64_t, size_t> last;
  for (size_t r = 0; r < t.merges.size(); ++r)
    last[pair_key(t.merges[r].first, t.merges[r].second)] = r;
  std::vector<std::pair<uint32_t, uint32_t>> kept;
  for (size_t r = 0; r < t.merges.size(); ++r)
    if (last[pair_key(t.merges[r].first, t.merges[r].second)] == r) kept.push_back(t.merges[r]);
  t.merges = std::move(kept);
  return t;
}

// The tokenizer.json of tokenizers >= 0.20 (Tokenizer::save, keys in its order).
std::string to_json(const Trained& t, const std::vector<std::string>& specials) {
  ojson added = ojson::array();
  for (size_t i = 0; i < specials.size(); ++i)
    added.push_back({{"id", i},
                     {"content", specials[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  ojson model = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", false},
                 {"vocab", ojson::object()},
                 {"merges", ojson::array()}};
  // ordered_json's operator[] searches linearly; the tokens are distinct, so append directly.
  auto& vocab = model["vocab"].get_ref<ojson::object_t&>();
  vocab.reserve(t.tokens.size());
  for (size_t id = 0; id < t.tokens.size(); ++id) vocab.emplace_back(t.tokens[id], ojson(id));
  auto& merges = model["merges"].get_ref<ojson::array_t&>();
  merges.reserve(t.merges.size());
  for (const auto& [a, b] : t.merges) merges.push_back(ojson::array({t.tokens[a], t.tokens[b]}));
  ojson j = {{"version", "1.0"},
             {"truncation", nullptr},
             {"padding", nullptr},
             {"added_tokens", std::move(added)},
             {"normalizer", nullptr},
             {"pre_tokenizer", pre_tokenizer_json()},
             {"post_processor", nullptr},
             {"decoder",
              {{"type", "ByteLevel"},
               {"add_prefix_space", true},
               {"trim_offsets", true},
               {"use_regex", true}}},
             {"model", std::move(model)}};
  return j.dump(2);
}

std::string train_counted(const WordCounts& wc, const std::vector<std::string>& specials,
                          const BpeTrainerOptions& o, const char* fn, const std::string& what) {
  if (wc.words.empty()) fail(fn, "the corpus must hold at least one pre-token; got " + what + ".");
  return to_json(train(wc, specials, o), specials);
}

} // namespace

std::string train_bpe_tokenizer_json(const std::vector<std::string>& texts,
                                     const BpeTrainerOptions& options) {
  const char* fn = "train_bpe_tokenizer_json";
  const auto specials = checked_specials(options, fn);
  WordCounts wc;
  for (size_t i = 0; i < texts.size(); ++i)
    wc.add(texts[i], fn, [i] { return "texts[" + std::to_string(i) + "]"; });
  return train_counted(
      wc, specials, options, fn,
      texts.empty() ? std::string("no text") : std::to_string(texts.size()) + " empty text(s)");
}

std::string train_bpe_tokenizer_json_from_files(const std::vector<std::string>& paths,
                                                const BpeTrainerOptions& options) {
  const char* fn = "train_bpe_tokenizer_json_from_files";
  const auto specials = checked_specials(options, fn);
  WordCounts wc;
  for (const auto& path : paths) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error(std::string("[lm.") + fn + "] cannot open '" + path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    if (f.bad())
      throw std::runtime_error(std::string("[lm.") + fn + "] cannot read '" + path + "'");
    const std::string text = ss.str();
    size_t line = 0;
    for (size_t a = 0; a < text.size(); ++line) {
      size_t e = text.find('\n', a);
      size_t b = e == std::string::npos ? text.size() : e + 1;
      wc.add(text.substr(a, b - a), fn,
             [&] { return "line " + std::to_string(line + 1) + " of '" + path + "'"; });
      a = b;
    }
  }
  return train_counted(
      wc, specials, options, fn,
      paths.empty() ? std::string("no file") : std::to_string(paths.size()) + " empty file(s)");
}

} // namespace nuvec::lm
