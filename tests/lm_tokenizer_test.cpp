// nuvec::lm::Tokenizer: byte-level BPE from Hugging Face tokenizer.json files. The tokenizer
// files are built here (no download): the 256 byte-level symbols (id = byte value) plus
// hand-written merges, worked out by hand below.
#include "nuvec/lm/tokenizer.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

using nuvec::lm::StreamingDecoder;
using nuvec::lm::Tokenizer;
using json = nlohmann::json;

namespace {

// GPT-2's bytes_to_unicode (openai/gpt-2 src/encoder.py), written again independently of the
// library: printable bytes stand for themselves, the rest map to U+0100 onwards in order.
std::string byte_char(int b) {
  auto direct = [](int x) {
    return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
  };
  int cp = b;
  if (!direct(b)) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!direct(x)) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// Byte-level form of a UTF-8 string ("Ġ" for a space etc.).
std::string bl(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += byte_char(c);
  return out;
}

// Merges in rank order; ids 256, 257, ... in this order.
const std::vector<std::pair<std::string, std::string>>& merge_list() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"h", "e"},                          // 256 he
      {"l", "l"},                          // 257 ll
      {"he", "ll"},                        // 258 hell
      {"hell", "o"},                       // 259 hello
      {bl(" "), "w"},                      // 260 Ġw
      {"o", "r"},                          // 261 or
      {bl(" w"), "or"},                    // 262 Ġwor
      {"l", "d"},                          // 263 ld
      {bl(" wor"), "ld"},                  // 264 Ġworld
      {"b", "c"},                          // 265 bc   (ranked before "a b")
      {"a", "b"},                          // 266 ab
      {"a", "a"},                          // 267 aa
      {byte_char(0xF0), byte_char(0x9F)},  // 268 ðŁ  (first two bytes of most emoji)
      {bl(" "), "t"},                      // 269 Ġt
      {bl(" t"), "h"},                     // 270 Ġth
      {bl(" th"), "e"},                    // 271 Ġthe
  };
  return m;
}

constexpr int kHello = 259, kSpaceWorld = 264, kBc = 265, kAb = 266, kAa = 267, kF09F = 268;
constexpr int kSpaceT = 269, kHe = 256;
constexpr int kSpaceHelloWhole = 280; // in the vocab, not reachable by merges
constexpr int kEot = 300, kBot = 301, kAddedE = 302;

struct Options {
  std::string pre = "gpt2"; // "gpt2" | "llama3"
  bool add_prefix_space = false;
  bool ignore_merges = false;
  bool merges_as_pairs = false;
  bool swap_bc_ab = false;  // give "a b" the better rank
  bool template_bos = false;
  bool nfc = false;
};

json make_tokenizer(const Options& o) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  auto merges = merge_list();
  for (size_t i = 0; i < merges.size(); ++i)
    vocab[merges[i].first + merges[i].second] = 256 + int(i);
  vocab[bl(" hello")] = kSpaceHelloWhole;
  vocab["<|endoftext|>"] = kEot; // GPT-2 also has its special token in the model vocab
  if (o.swap_bc_ab) std::swap(merges[9], merges[10]);
  json jm = json::array();
  for (auto& [a, b] : merges) {
    if (o.merges_as_pairs) jm.push_back(json::array({a, b}));
    else jm.push_back(a + " " + b);
  }
  json model = {{"type", "BPE"},       {"dropout", nullptr},     {"unk_token", nullptr},
                {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""},
                {"fuse_unk", false},   {"byte_fallback", false}, {"ignore_merges", o.ignore_merges},
                {"vocab", vocab},      {"merges", jm}};
  auto added = [](int id, const std::string& c, bool special) {
    return json{{"id", id},         {"content", c},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false},  {"normalized", false}, {"special", special}};
  };
  json j = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens",
             json::array({added(kEot, "<|endoftext|>", true), added(kBot, "<|begin_of_text|>", true),
                          added(kAddedE, "<|e", false)})},
            {"normalizer", o.nfc ? json{{"type", "NFC"}} : json(nullptr)},
            {"model", model},
            {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                         {"use_regex", true}}}};
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", o.add_prefix_space},
                     {"trim_offsets", true}, {"use_regex", o.pre == "gpt2"}};
  if (o.pre == "gpt2") {
    j["pre_tokenizer"] = byte_level;
  } else {
    // Llama-3's pattern.
    std::string re =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           json::array({json{{"type", "Split"},
                                             {"pattern", {{"Regex", re}}},
                                             {"behavior", "Isolated"},
                                             {"invert", false}},
                                        byte_level})}};
  }
  json bl_post = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
                  {"use_regex", true}};
  if (o.template_bos) {
    json tp = {{"type", "TemplateProcessing"},
               {"single", json::array({json{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                       json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
               {"pair", json::array()},
               {"special_tokens",
                {{"<|begin_of_text|>",
                  {{"id", "<|begin_of_text|>"}, {"ids", {kBot}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
    j["post_processor"] = {{"type", "Sequence"}, {"processors", json::array({bl_post, tp})}};
  } else {
    j["post_processor"] = bl_post;
  }
  return j;
}

Tokenizer make(const Options& o = {}) { return Tokenizer::from_json_string(make_tokenizer(o).dump()); }

Options llama3() {
  Options o;
  o.pre = "llama3";
  o.ignore_merges = true;
  o.template_bos = true;
  return o;
}

std::vector<int> bytes_ids(const std::string& s) {
  std::vector<int> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

const std::vector<std::string> kRoundTrip = {
    "",
    " ",
    "\n",
    "hello world",
    "Héllo, wörld! naïve café — Ærøskøbing",
    "你好世界, 日本語のテキスト, 한국어",
    "🙂👍🏽 emoji 🇫🇷 and a ZWJ 👩‍👩‍👧",
    "def f(x):\n\tif x:\n\t\treturn x  +  1\n\n\n    # done\r\n",
    "   leading and trailing   ",
    "many     spaces\t\t\ttabs\n\n\n\nnewlines",
    "I'm  here!!\n\n 123 你好 🙂",
    "numbers 1234567890 3.14159 -42",
    "the theory of the other",
};

} // namespace

TEST(LmTokenizer, HelloWorldExactIds) {
  Tokenizer t = make();
  // "hello" -> he, ll, hell, hello; " world" -> Ġw, or, Ġwor, ld, Ġworld.
  EXPECT_EQ(t.encode("hello world"), (std::vector<int>{kHello, kSpaceWorld}));
  EXPECT_EQ(t.decode({kHello, kSpaceWorld}), "hello world");
  // No merge reaches "Ġhello" without ignore_merges: Ġ + hello.
  EXPECT_EQ(t.encode(" hello"), (std::vector<int>{32, kHello}));
  // Unmerged letters stay single bytes.
  EXPECT_EQ(t.encode("xyz"), (std::vector<int>{'x', 'y', 'z'}));
  EXPECT_EQ(t.token_to_id(bl(" world")), kSpaceWorld);
  EXPECT_EQ(t.id_to_token(kSpaceWorld), bl(" world"));
  EXPECT_EQ(t.id_to_token(kEot), "<|endoftext|>");
  EXPECT_EQ(t.token_to_id("<|begin_of_text|>"), kBot);
  EXPECT_FALSE(t.token_to_id("nope").has_value());
  EXPECT_EQ(t.vocab_size(), 303);
  EXPECT_FALSE(t.bos_token_id().has_value());
}

TEST(LmTokenizer, MergesAppliedByRank) {
  Tokenizer t = make();
  // "b c" (rank 9) beats "a b" (rank 10): a + bc. Left-to-right greedy would give ab + c.
  EXPECT_EQ(t.encode("abc"), (std::vector<int>{'a', kBc}));
  // " the": "h e" (rank 0) merges before "Ġ t" (13), so Ġth/Ġthe are never reached:
  // Ġt + he. Merging the leftmost pair first would give Ġthe.
  EXPECT_EQ(t.encode(" the"), (std::vector<int>{kSpaceT, kHe}));
  // Equal ranks: leftmost first. aaa -> aa a; aaaa -> aa aa.
  EXPECT_EQ(t.encode("aaa"), (std::vector<int>{kAa, 'a'}));
  EXPECT_EQ(t.encode("aaaa"), (std::vector<int>{kAa, kAa}));
  // The rank is the position in the merges list: swapping the two lines swaps the result.
  Options o;
  o.swap_bc_ab = true;
  EXPECT_EQ(make(o).encode("abc"), (std::vector<int>{kAb, 'c'}));
}

TEST(LmTokenizer, MergesAsPairsSameAsStrings) {
  Options o;
  o.merges_as_pairs = true;
  Tokenizer a = make(), b = make(o);
  for (const auto& s : kRoundTrip) EXPECT_EQ(a.encode(s), b.encode(s)) << s;
  EXPECT_EQ(b.encode("hello world"), (std::vector<int>{kHello, kSpaceWorld}));
}

TEST(LmTokenizer, Gpt2PreTokenizerSplits) {
  Tokenizer t = make();
  // GPT-2's pattern: "I" "'m" then of the two spaces only the first is taken by \s+(?!\S)
  // (the second belongs to " here"), "!!", "\n\n" (the space before 123 is left to " 123"),
  // " 123", " 你好" (letters), " 🙂" (a symbol).
  std::vector<std::string> want;
  for (const char* p : {"I", "'m", " ", " here", "!!", "\n\n", " 123", " 你好", " 🙂"})
    want.push_back(bl(p));
  EXPECT_EQ(t.pre_tokenize("I'm  here!!\n\n 123 你好 🙂"), want);
  // Case-sensitive contractions; numbers in one run.
  EXPECT_EQ(t.pre_tokenize("I'M 12345"),
            (std::vector<std::string>{"I", "'", "M", bl(" 12345")}));
  EXPECT_EQ(t.pre_tokenize("trailing  "), (std::vector<std::string>{"trailing", bl("  ")}));
  EXPECT_TRUE(t.pre_tokenize("").empty());
}

TEST(LmTokenizer, AddPrefixSpace) {
  Options o;
  o.add_prefix_space = true;
  Tokenizer t = make(o);
  EXPECT_EQ(t.pre_tokenize("hello world"), (std::vector<std::string>{bl(" hello"), bl(" world")}));
  EXPECT_EQ(t.encode("hello"), (std::vector<int>{32, kHello}));
  EXPECT_EQ(t.pre_tokenize(" x"), (std::vector<std::string>{bl(" x")})); // no second space
}

TEST(LmTokenizer, Llama3SplitRegexAndIgnoreMerges) {
  Tokenizer t = make(llama3());
  // Case-insensitive contractions, digits in groups of at most three.
  EXPECT_EQ(t.pre_tokenize("I'M 12345"),
            (std::vector<std::string>{"I", "'M", bl(" "), "123", "45"}));
  EXPECT_EQ(t.pre_tokenize("hi!\n\n there"),
            (std::vector<std::string>{"hi", "!" + bl("\n\n"), bl(" there")}));
  // ignore_merges: "Ġhello" is in the vocab, so it is one token although no merge builds it.
  EXPECT_EQ(t.encode(" hello", false), (std::vector<int>{kSpaceHelloWhole}));
  EXPECT_EQ(t.encode("hello hello", false), (std::vector<int>{kHello, kSpaceHelloWhole}));
  // Without ignore_merges (same vocab and pre-tokenizer): Ġ + hello.
  Options o = llama3();
  o.ignore_merges = false;
  EXPECT_EQ(make(o).encode(" hello", false), (std::vector<int>{32, kHello}));
}

TEST(LmTokenizer, PostProcessorBos) {
  Tokenizer t = make(llama3());
  EXPECT_EQ(t.bos_token_id(), kBot);
  EXPECT_EQ(t.encode("hello world"), (std::vector<int>{kBot, kHello, kSpaceWorld}));
  EXPECT_EQ(t.encode("hello world", false), (std::vector<int>{kHello, kSpaceWorld}));
  EXPECT_EQ(t.encode(""), (std::vector<int>{kBot}));
  EXPECT_TRUE(t.encode("", false).empty());
  EXPECT_EQ(t.decode(t.encode("hello world")), "<|begin_of_text|>hello world");
  EXPECT_EQ(t.decode(t.encode("hello world"), true), "hello world");
  // The ByteLevel post-processor alone (GPT-2) adds nothing.
  EXPECT_EQ(make().encode("hello world", true), make().encode("hello world", false));
}

TEST(LmTokenizer, SpecialTokensInText) {
  Tokenizer t = make();
  const std::string s = "hello<|endoftext|> world";
  EXPECT_EQ(t.encode(s), (std::vector<int>{kHello, kEot, kSpaceWorld}));
  EXPECT_EQ(t.decode(t.encode(s)), s);
  EXPECT_EQ(t.decode(t.encode(s), true), "hello world");
  // Longest match first: "<|endoftext|>" wins over the added token "<|e".
  EXPECT_EQ(t.encode("<|e<|endoftext|>x<|ex"),
            (std::vector<int>{kAddedE, kEot, 'x', kAddedE, 'x'}));
  // A non-special added token is kept by skip_special_tokens.
  EXPECT_EQ(t.decode({kAddedE, kEot, kBot}, true), "<|e");
  // Special tokens are recognised also without add_special_tokens.
  EXPECT_EQ(t.encode("<|begin_of_text|>hello", false), (std::vector<int>{kBot, kHello}));
  // Text between special tokens is pre-tokenized on its own (" world" keeps its space).
  Tokenizer l = make(llama3());
  EXPECT_EQ(l.encode("hello<|endoftext|> world"),
            (std::vector<int>{kBot, kHello, kEot, kSpaceWorld}));
}

TEST(LmTokenizer, RoundTrip) {
  for (const Options& o : {Options{}, llama3(), [] {
         Options x;
         x.merges_as_pairs = true;
         x.nfc = true;
         return x;
       }()}) {
    Tokenizer t = make(o);
    for (const auto& s : kRoundTrip) {
      auto ids = t.encode(s, false);
      EXPECT_EQ(t.decode(ids), s) << s;
      EXPECT_EQ(t.decode(t.encode(s, true), true), s) << s;
      // Every byte survives: the token count is at most the byte count.
      EXPECT_LE(ids.size(), s.size()) << s;
    }
  }
  // Without merges hitting, each byte is its own token.
  EXPECT_EQ(make().encode("🙂", false), (std::vector<int>{kF09F, 0x99, 0x82}));
  EXPECT_EQ(make().encode("é", false), bytes_ids("é"));
}

TEST(LmTokenizer, NfcNormalizer) {
  Options o;
  o.nfc = true;
  Tokenizer t = make(o);
  const std::string composed = "caf\xC3\xA9", decomposed = "cafe\xCC\x81";
  EXPECT_EQ(t.encode(decomposed), t.encode(composed));
  EXPECT_EQ(t.encode(composed), bytes_ids(composed));
  EXPECT_EQ(t.decode(t.encode(decomposed)), composed);
  // Without a normalizer the decomposed form keeps its bytes.
  EXPECT_EQ(make().encode(decomposed), bytes_ids(decomposed));
}

TEST(LmTokenizer, StreamingDecoderHoldsIncompleteUtf8) {
  Tokenizer t = make();
  auto ids = t.encode("hi🙂!");
  // 🙂 = F0 9F 99 82: the merge ðŁ covers F0 9F, then two single-byte tokens.
  ASSERT_EQ(ids, (std::vector<int>{'h', 'i', kF09F, 0x99, 0x82, '!'}));
  StreamingDecoder d(t);
  EXPECT_EQ(d.push(ids[0]), "h");
  EXPECT_EQ(d.push(ids[1]), "i");
  EXPECT_EQ(d.push(ids[2]), "");
  EXPECT_EQ(d.push(ids[3]), "");
  EXPECT_EQ(d.push(ids[4]), "🙂");
  EXPECT_EQ(d.push(ids[5]), "!");
  EXPECT_EQ(d.finish(), "");
  // An incomplete character at the end becomes one U+FFFD, as decode does.
  EXPECT_EQ(d.push(kF09F), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({kF09F}), "\xEF\xBF\xBD");
  // A byte that cannot start a character is replaced at once.
  EXPECT_EQ(d.push(0x80), "\xEF\xBF\xBD");
  EXPECT_EQ(d.finish(), "");
  // Special tokens: content, or nothing when skipped; out-of-range ids throw.
  EXPECT_EQ(d.push(kEot), "<|endoftext|>");
  StreamingDecoder skip(t, true);
  EXPECT_EQ(skip.push(kEot), "");
  EXPECT_THROW(skip.push(100000), std::out_of_range);
  // The pieces add up to decode() for every round-trip text.
  for (const auto& s : kRoundTrip) {
    StreamingDecoder sd(t);
    std::string acc;
    for (int id : t.encode(s)) acc += sd.push(id);
    acc += sd.finish();
    EXPECT_EQ(acc, s);
  }
}

TEST(LmTokenizer, FromFile) {
  const std::string path = ::testing::TempDir() + "lm_tokenizer_test_tokenizer.json";
  {
    std::ofstream f(path);
    f << make_tokenizer(llama3()).dump(2);
  }
  Tokenizer t = Tokenizer::from_file(path);
  EXPECT_EQ(t.encode("hello world"), (std::vector<int>{kBot, kHello, kSpaceWorld}));
  std::remove(path.c_str());
  EXPECT_THROW(Tokenizer::from_file(path), std::runtime_error);
}

namespace {
std::string error_of(const std::string& text) {
  try {
    Tokenizer::from_json_string(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}
} // namespace

TEST(LmTokenizer, BadInput) {
  json j = make_tokenizer({});
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  EXPECT_NE(error_of(j.dump()).find("unsupported pre_tokenizer type 'Metaspace'"), std::string::npos)
      << error_of(j.dump());
  j = make_tokenizer({});
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of(j.dump()).find("unsupported model type 'WordPiece'"), std::string::npos);
  j = make_tokenizer({});
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of(j.dump()).find("'Lowercase'"), std::string::npos);
  j = make_tokenizer({});
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of(j.dump()).find("unsupported decoder type 'WordPiece'"), std::string::npos);
  j = make_tokenizer({});
  j["model"]["byte_fallback"] = true;
  EXPECT_NE(error_of(j.dump()).find("byte_fallback"), std::string::npos);
  // Malformed JSON, no model, a merge outside the vocab, a bad regex.
  EXPECT_NE(error_of("{\"model\": ").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of("{}").find("model"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("not a JSON object"), std::string::npos);
  j = make_tokenizer({});
  j["model"]["merges"].push_back("zz qq");
  EXPECT_NE(error_of(j.dump()).find("not in the vocab"), std::string::npos);
  j = make_tokenizer({});
  j["model"]["vocab"] = json::array();
  EXPECT_NE(error_of(j.dump()).find("vocab"), std::string::npos);
  j = make_tokenizer(llama3());
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_NE(error_of(j.dump()).find("regex"), std::string::npos);
  // Out-of-range ids; invalid UTF-8 input.
  Tokenizer t = make();
  EXPECT_THROW(t.decode({kHello, 100000}), std::out_of_range);
  EXPECT_THROW(t.decode({-1}), std::out_of_range);
  EXPECT_THROW(t.decode({290}), std::out_of_range); // a gap below vocab_size()
  EXPECT_THROW(t.id_to_token(303), std::out_of_range);
  EXPECT_THROW(t.encode("bad \xFF byte"), std::invalid_argument);
  EXPECT_THROW(t.encode("cut \xF0\x9F"), std::invalid_argument);
}
