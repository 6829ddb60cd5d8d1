// nuvec::lm::train_bpe_tokenizer_json: merges worked out by hand on tiny corpora, a brute-force
// trainer (recounting every pair per merge) as reference, round trips through the trained
// tokenizer, options and errors. With NUVEC_BPE_CHECK_CONFIG set, BpeTrainer.DISABLED_ExternalCheck (disabled: run by the script)
// trains on files for scripts/check_bpe_trainer.py (compared there with Hugging Face
// tokenizers); otherwise it is skipped.
#include "nuvec/lm/bpe_trainer.h"
#include "nuvec/lm/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using nuvec::lm::BpeTrainerOptions;
using nuvec::lm::Tokenizer;
using nuvec::lm::train_bpe_tokenizer_json;
using nuvec::lm::train_bpe_tokenizer_json_from_files;
using json = nlohmann::json;

namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

Merges merges_of(const json& j) {
  Merges out;
  for (const auto& m : j["model"]["merges"]) out.emplace_back(m[0], m[1]);
  return out;
}

// The classic BPE example (HF course): hug x10, pug x5, pun x12, bun x4, hugs x5, one word
// per text so that no space is attached.
std::vector<std::string> hug_corpus() {
  std::vector<std::string> t;
  auto add = [&](const char* w, int n) { t.insert(t.end(), n, w); };
  add("hug", 10);
  add("pug", 5);
  add("pun", 12);
  add("bun", 4);
  add("hugs", 5);
  return t;
}

// Mixed text: English prose, code, CJK, emoji, whitespace runs, CRLF.
std::vector<std::string> mixed_corpus() {
  const std::vector<std::string> lines = {
      "The quick brown fox jumps over the lazy dog.\n",
      "The lazy dog sleeps; the quick fox runs on and on.\n",
      "It's what they'll say: we're here, you've seen it, I'd go, I'm in.\n",
      "def train(words, counts):\n    return sorted(words, key=len)  # 42\n",
      "for (int i = 0; i < 1024; ++i) { sum += x[i] * 3.14159; }\r\n",
      "日本語のテキストも少し含めます。東京は日本の首都です。\n",
      "中文文本：你好，世界！今天天气很好。\n",
      "Emoji 😀😀 and 👍🏽 and 🇫🇷 flags\n",
      "   indented   with\t\ttabs and    spaces   \n\n\n",
      "Numbers 1234567 and 2024-01-01 and 3.5e-10\n",
  };
  std::vector<std::string> t;
  for (int r = 0; r < 6; ++r) t.insert(t.end(), lines.begin(), lines.end());
  return t;
}

// The byte-level form of a UTF-8 string, from the library's own pre-tokenizer-free view:
// the trained tokenizer's vocabulary strings are in this form.
std::string bl(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    int cp = c;
    bool direct = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
    if (!direct) {
      int n = 0;
      for (int x = 0; x < c; ++x)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) ++n;
      cp = 256 + n;
    }
    if (cp < 0x80) {
      out += char(cp);
    } else {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

// Brute-force BpeTrainer: after every merge all pairs are counted again; best = highest
// count, then smallest (left id, right id).
Merges brute_force(const std::vector<std::string>& texts, int vocab_size, int min_frequency,
                   int n_special, bool* repeated_token) {
  // Words from the library's pre-tokenizer (checked separately in lm_tokenizer_test).
  static const Tokenizer splitter = Tokenizer::from_json_string(
      train_bpe_tokenizer_json({"x"}, {.vocab_size = 256, .special_tokens = {}}));
  std::map<std::string, long> wc;
  for (const auto& t : texts)
    for (const auto& p : splitter.pre_tokenize(t)) ++wc[p];
  std::vector<std::string> vocab;
  std::map<std::string, int> id;
  for (int i = 0; i < n_special; ++i) vocab.push_back("<special" + std::to_string(i) + ">");
  std::vector<std::pair<int, std::string>> alpha;
  for (int b = 0; b < 256; ++b) {
    std::string c = bl(std::string(1, char(b)));
    int cp = c.size() == 1 ? c[0] : ((c[0] & 0x1F) << 6) | (c[1] & 0x3F);
    alpha.emplace_back(cp, c);
  }
  std::sort(alpha.begin(), alpha.end());
  for (auto& a : alpha) vocab.push_back(a.second);
  for (size_t i = 0; i < vocab.size(); ++i) id[vocab[i]] = int(i);
  std::vector<std::pair<std::vector<int>, long>> words;
  for (auto& [w, c] : wc) {
    std::vector<int> s;
    for (size_t k = 0; k < w.size();) {
      size_t len = (unsigned char)w[k] < 0x80 ? 1 : 2;
      s.push_back(id.at(w.substr(k, len)));
      k += len;
    }
    words.emplace_back(s, c);
  }
  Merges merges;
  *repeated_token = false;
  while (int(vocab.size()) < vocab_size) {
    std::map<std::pair<int, int>, long> pc;
    for (auto& [s, c] : words)
      for (size_t k = 0; k + 1 < s.size(); ++k) pc[{s[k], s[k + 1]}] += c;
    std::pair<int, int> best{-1, -1};
    long best_count = 0;
    for (auto& [p, c] : pc)
      if (c > best_count) best = p, best_count = c; // map order: first is the smallest pair
    if (best_count < 1 || best_count < min_frequency) break;
    std::string tok = vocab[best.first] + vocab[best.second];
    int nid;
    if (id.count(tok)) {
      *repeated_token = true;
      nid = id[tok];
    } else {
      nid = int(vocab.size());
      vocab.push_back(tok);
      id[tok] = nid;
    }
    merges.emplace_back(vocab[best.first], vocab[best.second]);
    for (auto& [s, c] : words) {
      std::vector<int> o;
      for (size_t k = 0; k < s.size(); ++k) {
        if (k + 1 < s.size() && s[k] == best.first && s[k + 1] == best.second) {
          o.push_back(nid);
          ++k;
        } else {
          o.push_back(s[k]);
        }
      }
      s = o;
    }
  }
  return merges;
}

template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected std::invalid_argument with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

} // namespace

TEST(BpeTrainer, HandWorkedMergesAndTieBreakById) {
  // Counts: u g 20, p u 17, u n 16, h u 15 -> "ug"; then u n 16, h ug 15, p u 12 -> "un";
  // h ug 15 -> "hug"; p un 12 -> "pun"; then p ug 5 and hug s 5 tie: ids (p=80, ug=257) <
  // (hug=259, s=83), so "pug" first although "hug"+"s" is the smaller string; b un 4 < 5 stops.
  json j =
      json::parse(train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = 1000, .min_frequency = 5}));
  Merges expect = {{"u", "g"}, {"u", "n"}, {"h", "ug"}, {"p", "un"}, {"p", "ug"}, {"hug", "s"}};
  EXPECT_EQ(merges_of(j), expect);
  const json& v = j["model"]["vocab"];
  EXPECT_EQ(v.size(), 1u + 256 + 6);
  EXPECT_EQ(v["<|endoftext|>"], 0);
  EXPECT_EQ(v["!"], 1); // alphabet sorted by code point: '!' first
  EXPECT_EQ(v["p"], 1 + 0x70 - 0x21);
  EXPECT_EQ(v[bl(" ")], 1 + 220); // "Ġ" = U+0120: 188 printable bytes and 32 before it
  EXPECT_EQ(v[bl("\xff")], 1 + 187);
  EXPECT_EQ(v[bl(std::string(1, '\0'))], 1 + 188);
  EXPECT_EQ(v["ug"], 257);
  EXPECT_EQ(v["un"], 258);
  EXPECT_EQ(v["hug"], 259);
  EXPECT_EQ(v["pun"], 260);
  EXPECT_EQ(v["pug"], 261);
  EXPECT_EQ(v["hugs"], 262);

  // The bytes' order is that of their characters, not of the bytes: "Ġ" (a space, byte
  // 0x20) comes after 'a', so (a, b) beats (Ġ, x) at equal counts.
  json k = json::parse(train_bpe_tokenizer_json({" x", " x", "ab", "ab"},
                                                {.vocab_size = 257, .special_tokens = {}}));
  EXPECT_EQ(merges_of(k), (Merges{{"a", "b"}}));
}

TEST(BpeTrainer, VocabIsWrittenInIdOrder) {
  std::string text = train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = 1000});
  using ojson = nlohmann::ordered_json;
  ojson j = ojson::parse(text);
  int expect = 0;
  for (const auto& [k, id] : j["model"]["vocab"].items()) EXPECT_EQ(id.get<int>(), expect++) << k;
  EXPECT_EQ(j.begin().key(), "version");
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"],
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+)"
            R"([\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][1]["type"], "ByteLevel");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"], false);
  EXPECT_EQ(j["decoder"]["type"], "ByteLevel");
  ASSERT_EQ(j["added_tokens"].size(), 1u);
  EXPECT_EQ(j["added_tokens"][0]["id"], 0);
  EXPECT_EQ(j["added_tokens"][0]["special"], true);
}

TEST(BpeTrainer, MinFrequencyStopsTraining) {
  // u g 20, u n 16, h ug 15, then p un 12 < 13.
  json j = json::parse(
      train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = 1000, .min_frequency = 13}));
  EXPECT_EQ(merges_of(j), (Merges{{"u", "g"}, {"u", "n"}, {"h", "ug"}}));
  // 0 and 1 both merge every pair that occurs, until each word is one token: ug un hug pun
  // pug hugs bun.
  for (int mf : {0, 1}) {
    json k = json::parse(
        train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = 1000, .min_frequency = mf}));
    auto m = merges_of(k);
    EXPECT_EQ(m.size(), 7u) << mf;
    Tokenizer t = Tokenizer::from_json_string(k.dump());
    for (const char* w : {"hug", "pug", "pun", "bun", "hugs"})
      EXPECT_EQ(t.encode(w).size(), 1u) << w;
  }
}

TEST(BpeTrainer, VocabSizeIsRespected) {
  for (int extra : {0, 1, 10, 60}) {
    std::string text = train_bpe_tokenizer_json(mixed_corpus(), {.vocab_size = 257 + extra});
    json j = json::parse(text);
    EXPECT_EQ(j["model"]["vocab"].size(), size_t(257 + extra));
    EXPECT_EQ(j["model"]["merges"].size(), size_t(extra));
    EXPECT_EQ(Tokenizer::from_json_string(text).vocab_size(), 257 + extra);
  }
}

TEST(BpeTrainer, MatchesBruteForceTrainer) {
  for (int mf : {2, 5}) {
    auto texts = mixed_corpus();
    const int vocab = 256 + 1 + 150;
    bool repeated = false;
    Merges ref = brute_force(texts, vocab, mf, 1, &repeated);
    ASSERT_FALSE(repeated) << "corpus makes a token twice; the comparison would not be exact";
    json j =
        json::parse(train_bpe_tokenizer_json(texts, {.vocab_size = vocab, .min_frequency = mf}));
    EXPECT_EQ(merges_of(j), ref) << "min_frequency " << mf;
  }
}

TEST(BpeTrainer, RoundTripsAnyText) {
  std::string text = train_bpe_tokenizer_json(mixed_corpus(), {.vocab_size = 600});
  Tokenizer t = Tokenizer::from_json_string(text);
  std::string all_bytes;
  for (int b = 1; b < 128; ++b) all_bytes += char(b);
  const std::vector<std::string> cases = {
      "The quick brown fox jumps over the lazy dog.",
      "def train(words, counts):\n    return sorted(words, key=len)  # 42\n",
      "東京は日本の首都です。你好，世界！한국어 텍스트",
      "Emoji 😀👍🏽🇫🇷🧑‍🧑‍🧒 unseen: 🦀🦀",
      "   \t\t  \n\n\r\n   x   \u00a0\u3000 y\v\f",
      "mixed<|endoftext|>special <|endoftext|><|endoftext|>",
      "Ünïcödé çà et là, ÀÉÎÕÜ, ß, ﬁ, Ω, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
      all_bytes,
      std::string("nul\0inside", 10),
      "",
  };
  for (const auto& s : cases) EXPECT_EQ(t.decode(t.encode(s)), s);
  // Training text is compressed: far fewer tokens than bytes.
  std::string line = "The lazy dog sleeps; the quick fox runs on and on.\n";
  EXPECT_LT(t.encode(line).size() * 3, line.size());
}

TEST(BpeTrainer, SpecialTokensAreSingleIds) {
  BpeTrainerOptions o{
      .vocab_size = 400,
      .special_tokens = {"<|begin_of_text|>", "<|end_of_text|>", "<|begin_of_text|>"}};
  std::string text = train_bpe_tokenizer_json(mixed_corpus(), o);
  json j = json::parse(text);
  ASSERT_EQ(j["added_tokens"].size(), 2u); // the repeat is dropped
  Tokenizer t = Tokenizer::from_json_string(text);
  EXPECT_EQ(t.token_to_id("<|begin_of_text|>"), 0);
  EXPECT_EQ(t.token_to_id("<|end_of_text|>"), 1);
  EXPECT_EQ(t.vocab_size(), 400);
  auto ids = t.encode("<|begin_of_text|>Hello<|end_of_text|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 1);
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "Hello");
  // No specials at all: the bytes start at id 0.
  json k = json::parse(
      train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = 256, .special_tokens = {}}));
  EXPECT_EQ(k["model"]["vocab"]["!"], 0);
  EXPECT_EQ(k["added_tokens"].size(), 0u);
  EXPECT_EQ(k["model"]["merges"].size(), 0u);
}

TEST(BpeTrainer, Deterministic) {
  auto texts = mixed_corpus();
  BpeTrainerOptions o{.vocab_size = 500};
  std::string a = train_bpe_tokenizer_json(texts, o);
  EXPECT_EQ(a, train_bpe_tokenizer_json(texts, o));
  // The order of the texts does not matter (only word counts do).
  std::mt19937 rng(7);
  std::shuffle(texts.begin(), texts.end(), rng);
  EXPECT_EQ(a, train_bpe_tokenizer_json(texts, o));
}

TEST(BpeTrainer, BothMergeFormsLoad) {
  std::string text = train_bpe_tokenizer_json(mixed_corpus(), {.vocab_size = 450});
  json j = json::parse(text);
  json old = j;
  old["model"]["merges"] = json::array();
  for (const auto& m : j["model"]["merges"])
    old["model"]["merges"].push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  Tokenizer a = Tokenizer::from_json_string(text), b = Tokenizer::from_json_string(old.dump());
  for (const auto& s : mixed_corpus()) EXPECT_EQ(a.encode(s), b.encode(s));
}

TEST(BpeTrainer, FilesAreReadByLines) {
  std::string path = ::testing::TempDir() + "bpe_trainer_corpus.txt";
  std::string all;
  std::vector<std::string> lines;
  for (const auto& s : mixed_corpus()) all += s;
  all += "no newline at the end";
  {
    std::ofstream f(path, std::ios::binary);
    f << all;
  }
  for (size_t a = 0; a < all.size();) {
    size_t e = all.find('\n', a);
    size_t b = e == std::string::npos ? all.size() : e + 1;
    lines.push_back(all.substr(a, b - a));
    a = b;
  }
  BpeTrainerOptions o{.vocab_size = 500};
  EXPECT_EQ(train_bpe_tokenizer_json_from_files({path}, o), train_bpe_tokenizer_json(lines, o));
  std::remove(path.c_str());
  EXPECT_THROW(train_bpe_tokenizer_json_from_files({path}, o), std::runtime_error);
}

TEST(BpeTrainer, BadOptionsThrow) {
  const std::string fn = "[lm.train_bpe_tokenizer_json]";
  expect_invalid(
      [] { train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = 256}); },
      fn + " vocab_size must be at least 256 + the number of special tokens (257); got 256.");
  expect_invalid(
      [] { train_bpe_tokenizer_json(hug_corpus(), {.vocab_size = -1, .special_tokens = {}}); },
      fn + " vocab_size");
  expect_invalid([] { train_bpe_tokenizer_json(hug_corpus(), {.min_frequency = -1}); },
                 fn + " min_frequency must be >= 0");
  expect_invalid(
      [] {
        train_bpe_tokenizer_json(hug_corpus(), {.special_tokens = {"<s>", ""}});
      },
      fn + " special_tokens[1] must not be empty");
  expect_invalid([] { train_bpe_tokenizer_json(hug_corpus(), {.special_tokens = {"\xff"}}); },
                 fn + " special_tokens[0] must be valid UTF-8");
  expect_invalid([] { train_bpe_tokenizer_json({}, {}); },
                 fn + " the corpus must hold at least one pre-token; got no text.");
  expect_invalid(
      [] {
        train_bpe_tokenizer_json({"", ""}, {});
      },
      fn + " the corpus must hold at least one pre-token");
  expect_invalid(
      [] {
        train_bpe_tokenizer_json({"ok", "bad \xc3\x28"}, {});
      },
      fn + " texts[1] cannot be pre-tokenized");
  expect_invalid([] { train_bpe_tokenizer_json_from_files({}, {}); },
                 "[lm.train_bpe_tokenizer_json_from_files] the corpus");
}

// For scripts/check_bpe_trainer.py: NUVEC_BPE_CHECK_CONFIG names a JSON file
// {"files": [...], "vocab_size": N, "min_frequency": M, "special_tokens": [...], "out": PATH};
// the tokenizer.json trained on the files is written to PATH.
TEST(BpeTrainer, DISABLED_ExternalCheck) {
  const char* cfg_path = std::getenv("NUVEC_BPE_CHECK_CONFIG");
  ASSERT_NE(cfg_path, nullptr) << "set NUVEC_BPE_CHECK_CONFIG (scripts/check_bpe_trainer.py does)";
  std::ifstream f(cfg_path);
  ASSERT_TRUE(f) << cfg_path;
  json cfg = json::parse(f);
  BpeTrainerOptions o;
  o.vocab_size = cfg.value("vocab_size", o.vocab_size);
  o.min_frequency = cfg.value("min_frequency", o.min_frequency);
  o.special_tokens = cfg.value("special_tokens", o.special_tokens);
  auto t0 = std::chrono::steady_clock::now();
  std::string text =
      train_bpe_tokenizer_json_from_files(cfg["files"].get<std::vector<std::string>>(), o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("trained %zu-token vocabulary in %.3f s\n",
              json::parse(text)["model"]["vocab"].size(), s);
  std::ofstream out(cfg["out"].get<std::string>(), std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good());
}
