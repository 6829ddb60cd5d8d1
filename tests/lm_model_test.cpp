// nuvec::lm models against transformers: tiny random checkpoints of each architecture and
// transformers' logits and greedy continuations for them, written once on a machine with
// transformers by scripts/lm_make_fixtures.py and stored in tests/data/lm/ (see the README
// there). Also the cache (incremental decoding equals the whole-sequence pass), chunked
// prefill, quantized checkpoints (nuvec-lm convert's layout) and bad checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <optional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lm_fixture.h"
#include "nuvec/io.h"
#include "nuvec/lm/convert.h"
#include "nuvec/lm/generate.h"
#include "nuvec/lm/lm.h"
#include "nuvec/lm/model.h"
#include "nuvec/ops.h"
#include "nuvec/random.h"
#include "nuvec/transforms.h"

using namespace nuvec;
using namespace nuvec::lm;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& arch) {
  return nuvec::testing::lm_fixture(arch);
}

// max |a - b| / max |b|: the relative error of a whole logits array.
double relative_error(const array& a, const array& b) {
  array a64 = astype(a, float32), b64 = astype(b, float32);
  double num = max(abs(subtract(a64, b64))).item<float>();
  double den = max(abs(b64)).item<float>();
  return num / den;
}

// relative_error of each row of [L, V] logits: one value per position.
std::vector<double> row_errors(const array& a, const array& b) {
  array a32 = astype(a, float32), b32 = astype(b, float32);
  array num = max(abs(subtract(a32, b32)), -1), den = max(abs(b32), -1);
  eval({num, den});
  std::vector<double> out(num.size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = double(num.data<float>()[j]) / double(den.data<float>()[j]);
  return out;
}

// The per-prompt rule of a half-type check (LogitsMatchTheReference explains it): `err` is
// nuvec's relative distance from transformers' half-type logits, `theirs` the distance of
// those from transformers' float32 logits. Empty when they pass, else why not.
std::string half_type_prompt_mismatch(double err, double theirs, double tol) {
  if (!(theirs < 0.1)) {
    std::printf("[reference] transformers' own logits are %.3g from float32: a decision flipped; judged by the mean\n",
                theirs);
    return "";
  }
  const double bound = std::max(tol, 1.5 * theirs);
  if (err <= bound) return "";
  return std::to_string(err) + " from transformers' logits, beyond max(" + std::to_string(tol) +
         ", 1.5 x their own distance from float32 " + std::to_string(theirs) + ")";
}

// The directory-level rule of a half-type check (LogitsMatchTheReference explains it): the
// per-position distances from transformers' float32 logits of nuvec's half-type logits (own)
// and of transformers' (theirs), all prompts together. Empty when they pass, else why not.
std::string half_type_mismatch(const std::vector<double>& own, const std::vector<double>& theirs) {
  if (own.empty() || own.size() != theirs.size()) {
    return "no positions to compare (" + std::to_string(own.size()) + " and " + std::to_string(theirs.size()) + ")";
  }
  // The mean of the smallest nine tenths: a few positions where a decision flipped on one side
  // only do not decide the verdict.
  auto trimmed_mean = [](std::vector<double> d) {
    std::sort(d.begin(), d.end());
    const size_t keep = d.size() - d.size() / 10;
    double sum = 0;
    for (size_t j = 0; j < keep; ++j) sum += d[j];
    return sum / keep;
  };
  const double own_mean = trimmed_mean(own), theirs_mean = trimmed_mean(theirs);
  std::printf("[reference] mean distance from float32 over the closest %zu of %zu positions: nuvec %.3g, transformers %.3g\n",
              own.size() - own.size() / 10, own.size(), own_mean, theirs_mean);
  if (!(theirs_mean < 0.25)) {
    return "transformers' own logits are on average " + std::to_string(theirs_mean) +
           " from float32: too chaotic in this dtype to judge (lm_make_fixtures.py --conditioned)";
  }
  if (!(own_mean <= 1.5 * theirs_mean + 1e-2)) {
    return "nuvec's logits are on average " + std::to_string(own_mean) + " from float32, transformers' " +
           std::to_string(theirs_mean);
  }
  return "";
}

std::vector<int> ids_of(const array& a) {
  array c = astype(a, int32);
  eval(c);
  return std::vector<int>(c.data<int32_t>(), c.data<int32_t>() + c.size());
}

struct Reference {
  std::vector<array> prompts, logits, greedy, margins;
};

Reference read_reference(const std::string& dir) {
  auto [arrays, meta] = load_safetensors(dir + "/reference.safetensors");
  Reference r;
  for (int i = 0; arrays.count("prompt_" + std::to_string(i)); ++i) {
    auto k = std::to_string(i);
    r.prompts.push_back(arrays.at("prompt_" + k));
    r.logits.push_back(arrays.at("logits_" + k));
    r.greedy.push_back(arrays.at("greedy_" + k));
    r.margins.push_back(arrays.at("margin_" + k));
  }
  return r;
}

class Architectures : public ::testing::TestWithParam<std::string> {};

// The logits of every prompt equal transformers' (float32, 1e-4 relative), and greedy
// continuations of 64 tokens match token for token while transformers' top-2 margin is clear
// of float32 noise (a near tie may go either way in any two implementations).
TEST_P(Architectures, LogitsAndGreedyMatchTransformers) {
  const std::string dir = fixture(GetParam());
  Model model = Model::load(dir, float32);
  Reference ref = read_reference(dir);
  ASSERT_EQ(ref.prompts.size(), 3u);
  for (size_t i = 0; i < ref.prompts.size(); ++i) {
    const array& prompt = ref.prompts[i];
    array logits = model(reshape(prompt, {1, prompt.shape(0)}));
    EXPECT_LT(relative_error(reshape(logits, ref.logits[i].shape()), ref.logits[i]), 1e-4)
        << GetParam() << " prompt " << i;

    GenerationOptions options;
    options.max_tokens = ref.greedy[i].shape(0);
    options.stop_at_eos = false;
    GenerationResult out = generate_tokens(model, ids_of(prompt), options);
    std::vector<int> expected = ids_of(ref.greedy[i]);
    array margins = ref.margins[i];
    eval(margins);
    ASSERT_EQ(out.tokens.size(), expected.size());
    for (size_t t = 0; t < expected.size(); ++t) {
      if (out.tokens[t] != expected[t]) {
        EXPECT_LT(margins.data<float>()[t], 1e-3f)
            << GetParam() << " prompt " << i << ": greedy token " << t << " differs (" << out.tokens[t]
            << " vs " << expected[t] << ") with transformers' margin " << margins.data<float>()[t];
        break; // after a legitimate tie the continuations diverge
      }
    }
  }
}

// Decoding with the cache, one token at a time and in chunks of prefill, gives the logits of
// the whole sequence in one pass.
TEST_P(Architectures, CacheMatchesWholeSequence) {
  Model model = Model::load(fixture(GetParam()), float32);
  Reference ref = read_reference(fixture(GetParam()));
  const array& prompt = ref.prompts[2];
  const int L = prompt.shape(0);
  array tokens = reshape(prompt, {1, L});
  array whole = model(tokens);
  for (int chunk : {1, 5, 16}) {
    Cache cache = model.make_cache(1, 4); // grows on demand
    std::vector<array> parts;
    for (int s = 0; s < L; s += chunk) {
      int e = std::min(L, s + chunk);
      parts.push_back(model(slice(tokens, {0, s}, {1, e}), &cache));
      eval(parts.back());
    }
    EXPECT_EQ(cache.offset, L);
    EXPECT_LT(relative_error(concatenate(parts, 1), whole), 1e-5) << "chunk " << chunk;
  }
}

// Two sequences in one batch give each one's own logits.
TEST_P(Architectures, BatchRowsAreIndependent) {
  Model model = Model::load(fixture(GetParam()), float32);
  Reference ref = read_reference(fixture(GetParam()));
  array a = reshape(ref.prompts[1], {1, 7});
  array b = reshape(slice(ref.prompts[2], {3}, {10}), {1, 7});
  array both = model(concatenate({a, b}, 0));
  EXPECT_LT(relative_error(slice(both, {0, 0, 0}, {1, 7, both.shape(2)}), model(a)), 1e-5);
  EXPECT_LT(relative_error(slice(both, {1, 0, 0}, {2, 7, both.shape(2)}), model(b)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Lm, Architectures, ::testing::Values("llama", "qwen3", "qwen3_moe", "qwen3_next", "gpt_oss"));

// Checkpoints named at run time, each with transformers' answers computed beside it on the
// machine that runs the test (scripts/lm_make_fixtures.py --reference; scripts/lm_gpu_check.sh
// runs both on the H200): NUVEC_LM_CHECK="DIR:DTYPE:FILE,..." loads DIR in DTYPE (float32,
// bfloat16 or float16) and compares with DIR/FILE. Issue 17's bf16 check of every
// architecture against transformers' bf16 model, and its check that a checkpoint written by
// `nuvec-lm train` gives transformers' logits. Nothing to run when the variable is unset.
struct ReferenceCheck {
  std::string dir, dtype, file;
};

std::vector<ReferenceCheck> reference_checks() {
  std::vector<ReferenceCheck> out;
  const char* env = std::getenv("NUVEC_LM_CHECK");
  std::string spec = env ? env : "";
  size_t at = 0;
  while (at < spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(at, end - at);
    const size_t c1 = item.find(':'), c2 = item.find(':', c1 == std::string::npos ? c1 : c1 + 1);
    if (c1 != std::string::npos && c2 != std::string::npos) {
      out.push_back({item.substr(0, c1), item.substr(c1 + 1, c2 - c1 - 1), item.substr(c2 + 1)});
    } else if (!item.empty()) {
      out.push_back({item, "float32", "reference.safetensors"});
    }
    at = end + 1;
  }
  return out;
}

class ReferenceDirs : public ::testing::TestWithParam<ReferenceCheck> {};

// Logits within the dtype's tolerance of transformers' (1e-4 relative in float32; 3e-2 in
// the half types, where both sides round every layer's output to 8 or 11 bits in their own
// order); greedy tokens in float32 as LogitsAndGreedyMatchTransformers. In the half types
// the greedy agreement is printed, not asserted: a near tie in bf16 goes either way.
// Where DIR also holds transformers' float32 answers (reference.safetensors, the same
// prompts), the distances of both sides' half-type logits from those measure how far a
// correct half-type run lands for this model, and the logits pass if
//  - per prompt whose transformers' half-type logits are within 0.1 of float32: within
//    max(3e-2, 1.5 × that distance) of transformers' (two correct runs with independent
//    roundings differ by about √2 times the distance of each from float32). Past 0.1 a
//    discrete decision (a router's top-k) went the other way in transformers' run, and the
//    prompt is judged only through the mean below;
//  - over the directory: nuvec's mean per-position distance from float32 (over the closest
//    nine tenths of the positions on each side, so that a few decisions flipped on one side
//    only do not decide) is at most 1.5 times transformers' plus 1e-2; and transformers' own
//    mean is below 0.25, else the fixture is too chaotic in that dtype to judge anything
//    (scripts/lm_make_fixtures.py --conditioned makes copies that are not: the top-2 MoE
//    fixtures route positions the other way after rounding only the weights).
// The decode path (prefill of all but the last token, then one step through the cache) is
// judged the same way at the last position.
// Logits unrelated to the model (zeros, garbage) are 1 or more from float32 at every position,
// so their mean misses 1.5 · 0.25 + 1e-2.
TEST_P(ReferenceDirs, LogitsMatchTheReference) {
  const ReferenceCheck& c = GetParam();
  const Dtype dtype = c.dtype == "bfloat16" ? bfloat16 : c.dtype == "float16" ? float16 : float32;
  Model model = Model::load(c.dir, dtype);
  auto [arrays, meta] = load_safetensors(c.dir + "/" + c.file);
  const double tol = dtype == float32 ? 1e-4 : 3e-2;
  std::optional<std::unordered_map<std::string, array>> exact;
  if (dtype != float32 && c.file != "reference.safetensors" && fs::exists(c.dir + "/reference.safetensors")) {
    exact = load_safetensors(c.dir + "/reference.safetensors").first;
  }
  int prompts = 0;
  std::vector<double> own_j, theirs_j; // per position, every prompt
  for (int i = 0; arrays.count("prompt_" + std::to_string(i)); ++i, ++prompts) {
    const auto k = std::to_string(i);
    const array& prompt = arrays.at("prompt_" + k);
    const array& want = arrays.at("logits_" + k);
    array logits = model(reshape(prompt, {1, prompt.shape(0)}));
    const double err = relative_error(reshape(logits, want.shape()), want);
    std::optional<array> truth;
    if (exact && exact->count("logits_" + k) && exact->count("prompt_" + k) &&
        array_equal(exact->at("prompt_" + k), prompt).item<bool>()) {
      truth = exact->at("logits_" + k);
      const array mine = reshape(logits, truth->shape());
      const double own = relative_error(mine, *truth);
      const double theirs = relative_error(want, *truth);
      std::printf("[reference] %s %s prompt %d: from float32, nuvec %.3g, transformers %.3g\n", c.dir.c_str(),
                  c.dtype.c_str(), i, own, theirs);
      EXPECT_EQ(half_type_prompt_mismatch(err, theirs, tol), "") << c.dir << " (" << c.dtype << ") prompt " << i;
      for (double d : row_errors(mine, *truth)) own_j.push_back(d);
      for (double d : row_errors(want, *truth)) theirs_j.push_back(d);
    } else {
      EXPECT_LT(err, tol) << c.dir << " (" << c.dtype << ") prompt " << i;
    }
    if (const int L = prompt.shape(0); L > 1) {
      Cache cache = model.make_cache(1, L);
      model(reshape(slice(prompt, {0}, {L - 1}), {1, L - 1}), &cache);
      array step = model(reshape(slice(prompt, {L - 1}, {L}), {1, 1}), &cache);
      auto last = [&](const array& a) { return slice(a, {L - 1, 0}, {L, a.shape(1)}); };
      const array want_last = last(want);
      const double step_err = relative_error(reshape(step, want_last.shape()), want_last);
      std::printf("[reference] %s %s prompt %d: decode step's logits %.3g from transformers'\n", c.dir.c_str(),
                  c.dtype.c_str(), i, step_err);
      if (truth) {
        EXPECT_EQ(half_type_prompt_mismatch(step_err, relative_error(want_last, last(*truth)), tol), "")
            << c.dir << " (" << c.dtype << ") prompt " << i << ", decode step";
      } else {
        EXPECT_LT(step_err, tol) << c.dir << " (" << c.dtype << ") prompt " << i << ", decode step";
      }
    }
    GenerationOptions options;
    options.max_tokens = arrays.at("greedy_" + k).shape(0);
    options.stop_at_eos = false;
    GenerationResult out = generate_tokens(model, ids_of(prompt), options);
    std::vector<int> expected = ids_of(arrays.at("greedy_" + k));
    array margins = astype(arrays.at("margin_" + k), float32);
    eval(margins);
    size_t same = 0;
    while (same < expected.size() && same < out.tokens.size() && out.tokens[same] == expected[same]) ++same;
    std::printf("[reference] %s %s prompt %d: logits relative error %.3g, greedy tokens equal for %zu of %zu\n",
                c.dir.c_str(), c.dtype.c_str(), i, err, same, expected.size());
    if (dtype == float32 && same < expected.size()) {
      EXPECT_LT(margins.data<float>()[same], 1e-3f)
          << c.dir << " prompt " << i << ": greedy token " << same << " differs with transformers' margin "
          << margins.data<float>()[same];
    }
  }
  EXPECT_GT(prompts, 0) << c.dir << "/" << c.file << " holds no prompt_0";
  if (exact) {
    EXPECT_EQ(half_type_mismatch(own_j, theirs_j), "") << c.dir << " (" << c.dtype << ")";
  }
}

// The half-type rules on made-up logits [41, 384] (the fixtures' 1 + 7 + 33 positions): the
// mean rule passes rounding-sized differences and near ties flipped at three positions, and
// refuses zeros, unrelated logits, an offset of 3% of the largest logit, and a reference too
// chaotic to judge; the per-prompt rule's bound is max(tol, 1.5 × transformers' distance).
TEST(ReferenceRule, HalfTypeMismatchJudgesDistances) {
  array truth = random::normal({41, 384}, float32, 0.0f, 3.0f, random::key(1));
  const float top = max(abs(truth)).item<float>();
  auto noisy = [&](float scale, int seed) {
    return add(truth, random::normal(truth.shape(), float32, 0.0f, scale, random::key(seed)));
  };
  const array theirs = astype(astype(noisy(0.02f, 2), bfloat16), float32);
  auto judge = [&](const array& mine, const array& ref) {
    return half_type_mismatch(row_errors(mine, truth), row_errors(ref, truth));
  };
  EXPECT_EQ(judge(astype(astype(noisy(0.03f, 3), bfloat16), float32), theirs), "");
  // Three positions decided the other way: their logits are other rows'.
  array flipped = concatenate({slice(truth, {0, 0}, {5, 384}), slice(truth, {30, 0}, {33, 384}),
                               slice(truth, {8, 0}, {41, 384})}, 0);
  EXPECT_EQ(judge(flipped, theirs), "");
  // Flips at a fifth of the positions are more than near ties.
  array many = concatenate({slice(truth, {0, 0}, {5, 384}), slice(truth, {20, 0}, {28, 384}),
                            slice(truth, {13, 0}, {41, 384})}, 0);
  EXPECT_NE(judge(many, theirs), "");
  EXPECT_NE(judge(zeros_like(truth), theirs), "");
  EXPECT_NE(judge(random::normal(truth.shape(), float32, 0.0f, 3.0f, random::key(4)), theirs), "");
  EXPECT_NE(judge(add(truth, array(0.03f * top)), theirs), "");
  EXPECT_NE(judge(truth, random::normal(truth.shape(), float32, 0.0f, 3.0f, random::key(5))), "");
  EXPECT_NE(half_type_mismatch({}, {}), "");

  EXPECT_EQ(half_type_prompt_mismatch(0.029, 0.01, 3e-2), "");
  EXPECT_NE(half_type_prompt_mismatch(0.031, 0.01, 3e-2), "");
  EXPECT_EQ(half_type_prompt_mismatch(0.059, 0.04, 3e-2), "");
  EXPECT_NE(half_type_prompt_mismatch(0.061, 0.04, 3e-2), "");
  EXPECT_EQ(half_type_prompt_mismatch(0.9, 0.5, 3e-2), ""); // transformers flipped: the mean judges
}

INSTANTIATE_TEST_SUITE_P(Env, ReferenceDirs, ::testing::ValuesIn(reference_checks()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferenceDirs);

// The tokenizer trained by the tokenizers library gives that library's ids on 2000 lines of
// mixed text (emoji, CJK, code, whitespace runs), and decodes them back.
TEST(LmTokenizer, MatchesTheTokenizersLibrary) {
  Tokenizer tok = Tokenizer::from_file(fixture("llama") + "/tokenizer.json");
  std::ifstream f((fs::path(fixture("")) / "tokenizer_cases.json"));
  nlohmann::json cases = nlohmann::json::parse(f);
  ASSERT_GE(cases.size(), 1000u);
  int mismatches = 0;
  for (auto& c : cases) {
    std::string text = c["text"];
    std::vector<int> expected = c["ids"];
    std::vector<int> got = tok.encode(text, false);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "ids differ for " << nlohmann::json(text).dump();
    }
    EXPECT_EQ(tok.decode(got), text);
  }
  EXPECT_EQ(mismatches, 0);
}

// A quantized checkpoint in mlx-lm's layout (what nuvec-lm convert writes) loads, runs
// quantized_matmul / gather_qmm, and gives the logits of the model whose weights are the
// dequantized ones.
TEST_P(Architectures, QuantizedCheckpointMatchesDequantizedWeights) {
  const std::string src = fixture(GetParam());
  Reference ref = read_reference(src);
  array tokens = reshape(ref.prompts[2], {1, ref.prompts[2].shape(0)});
  for (int bits : {4, 8}) {
    const std::string dst = (fs::temp_directory_path() / ("nuvec_lm_q_" + GetParam())).string();
    fs::remove_all(dst);
    convert(src, dst, QuantizationSpec{32, bits, "affine"}, float32);
    Model q = Model::load(dst);
    ASSERT_TRUE(q.config().quantization.has_value());
    EXPECT_EQ(q.config().quantization->bits, bits);
    EXPECT_EQ(q.weights().at("model.embed_tokens.weight").dtype(), uint32);
    // The same model with every quantized module dequantized.
    WeightMap plain;
    for (auto& [name, a] : q.weights()) {
      const std::string stem = name.size() > 7 ? name.substr(0, name.size() - 7) : name;
      if (name.size() > 7 && name.substr(name.size() - 7) == ".weight" && q.weights().count(stem + ".scales")) {
        plain.insert_or_assign(
            name, dequantize(a, q.weights().at(stem + ".scales"), q.weights().at(stem + ".biases"), 32, bits));
      } else if (name.find(".scales") == std::string::npos && name.find(".biases") == std::string::npos) {
        plain.insert_or_assign(name, a);
      }
    }
    ModelConfig plain_config = q.config();
    plain_config.quantization.reset();
    plain_config.quantization_overrides.clear();
    Model d(plain_config, plain);
    EXPECT_LT(relative_error(q(tokens), d(tokens)), 1e-4) << bits << " bits";
    if (bits == 8 && q.config().num_experts == 0) {
      // 8-bit weights stay close to the float model (a check that nothing is scrambled; 4 bits
      // of these random weights move the logits too far for a bound that means anything, and
      // in a mixture of experts a router logit moved by rounding can pick another expert,
      // which changes a token's output discontinuously).
      EXPECT_LT(relative_error(q(tokens), reshape(ref.logits[2], {1, ref.prompts[2].shape(0), -1})), 0.05);
    }
    fs::remove_all(dst);
  }
}

// generate(): the streamed pieces add up to the text, which is the decoded tokens; a stop
// string ends generation and is left out, also when it spans several tokens.
TEST(LmGenerate, StreamsTextAndStopsAtStopStrings) {
  auto [model, tokenizer] = nuvec::lm::load(fixture("llama"), float32);
  std::vector<int> prompt = tokenizer.encode("the people of the world", false);
  GenerationOptions options;
  options.max_tokens = 40;
  options.stop_at_eos = false;
  std::string streamed;
  GenerationResult full = generate(model, tokenizer, prompt, options, [&](const std::string& piece) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(streamed, full.text);
  EXPECT_EQ(full.text, tokenizer.decode(full.tokens, true));
  EXPECT_EQ(full.finish_reason, "length");
  ASSERT_GT(full.text.size(), 20u);
  const std::string stop = full.text.substr(full.text.size() / 2, 4);
  options.stop_strings = {"never in the text \x01", stop};
  streamed.clear();
  GenerationResult cut = generate(model, tokenizer, prompt, options, [&](const std::string& piece) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(cut.finish_reason, "stop");
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed, cut.text);
  EXPECT_LT(cut.tokens.size(), full.tokens.size());
  // A callback returning false stops after that piece.
  int pieces = 0;
  GenerationResult early = generate(model, tokenizer, prompt, GenerationOptions{.max_tokens = 40, .stop_at_eos = false},
                                    [&](const std::string&) { return ++pieces < 3; });
  EXPECT_EQ(early.finish_reason, "stop");
  EXPECT_LT(early.tokens.size(), full.tokens.size());
}

// generate_tokens queues step i + 1 before it reads step i's token (no repetition penalty):
// the tokens equal a loop that samples, reads and feeds one token at a time with the same
// seeded sampler, and the queued step past a stop changes nothing.
TEST(LmGenerate, PipelinedDecodeEqualsAStepByStepLoop) {
  Model model = Model::load(fixture("llama"), float32);
  Reference ref = read_reference(fixture("llama"));
  const std::vector<int> prompt = ids_of(ref.prompts[2]);
  const int n = int(prompt.size()), steps = 24;
  GenerationOptions options;
  options.max_tokens = steps;
  options.stop_at_eos = false;
  options.sampling.temperature = 0.9f;
  options.sampling.top_k = 40;
  options.sampling.seed = 7;
  GenerationResult got = generate_tokens(model, prompt, options);

  Sampler sampler(options.sampling);
  Cache cache = model.make_cache(1, n + steps);
  array logits = model(array(prompt.begin(), {1, n}, int32), &cache);
  std::vector<int> want;
  for (int i = 0; i < steps; ++i) {
    const int L = logits.shape(1), V = logits.shape(2);
    array next = sampler(reshape(slice(logits, {0, L - 1, 0}, {1, L, V}), {1, V}));
    want.push_back(next.item<int>());
    logits = model(array({want.back()}, {1, 1}, int32), &cache);
  }
  EXPECT_EQ(got.tokens, want);
  // Stopped by the callback after 5 tokens: the first 5.
  int seen = 0;
  GenerationResult early = generate_tokens(model, prompt, options, [&](int) { return ++seen < 5; });
  EXPECT_EQ(early.tokens, std::vector<int>(want.begin(), want.begin() + 5));
}

// Bad checkpoints end with a clear exception, never a crash.
TEST(LmModel, BadCheckpointsThrowClearly) {
  const std::string src = fixture("qwen3");
  const std::string dir = (fs::temp_directory_path() / "nuvec_lm_bad").string();
  auto fresh = [&] {
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (auto& e : fs::directory_iterator(src)) {
      fs::copy(e.path(), fs::path(dir) / e.path().filename());
    }
  };
  auto message = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  // A truncated shard.
  fresh();
  fs::resize_file(fs::path(dir) / "model.safetensors", fs::file_size(fs::path(dir) / "model.safetensors") / 2);
  EXPECT_NE(message([&] { Model::load(dir); }).find("model.safetensors"), std::string::npos);
  // A missing shard named by an index.
  fresh();
  {
    std::ofstream f(fs::path(dir) / "model.safetensors.index.json");
    f << R"({"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}})";
  }
  EXPECT_NE(message([&] { Model::load(dir); }).find("missing file"), std::string::npos);
  // An unsupported architecture.
  fresh();
  {
    std::ofstream f(fs::path(dir) / "config.json");
    f << R"({"model_type": "bert", "architectures": ["BertModel"], "vocab_size": 10})";
  }
  EXPECT_NE(message([&] { Model::load(dir); }).find("unsupported model_type 'bert'"), std::string::npos);
  // A tensor missing from the checkpoint.
  fresh();
  {
    WeightMap w = load_weights(src);
    w.erase("model.layers.1.mlp.up_proj.weight");
    fs::remove(fs::path(dir) / "model.safetensors");
    save_weights(dir, w);
  }
  EXPECT_NE(message([&] { Model::load(dir); }).find("model.layers.1.mlp.up_proj.weight"), std::string::npos);
  // A tokenizer with more tokens than the embedding has rows.
  fresh();
  {
    std::ifstream in(fs::path(src) / "tokenizer.json");
    nlohmann::json t = nlohmann::json::parse(in);
    t["added_tokens"].push_back({{"id", 1000}, {"content", "<|extra|>"}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
    std::ofstream out(fs::path(dir) / "tokenizer.json");
    out << t.dump();
  }
  EXPECT_NE(message([&] { nuvec::lm::load(dir); }).find("vocab"), std::string::npos);
  // A prompt longer than the context.
  Model model = Model::load(src, float32);
  std::vector<int> long_prompt(model.config().max_position_embeddings, 5);
  EXPECT_NE(message([&] { generate_tokens(model, long_prompt, {}); }).find("context"), std::string::npos);
  fs::remove_all(dir);
}

} // namespace

// The concatenated projections (q/k/v and gate/up as one product each, Model's run_weights)
// give the separate products' logits for every architecture, and are made for the ones with
// dense attention and MLP layers.
TEST(LmFusedProjections, EqualTheSeparateProducts) {
  for (const char* arch : {"llama", "qwen3", "qwen3_moe", "qwen3_next", "gpt_oss"}) {
    Model model = Model::load(fixture(arch), float32);
    Reference ref = read_reference(fixture(arch));
    array tokens = reshape(ref.prompts[2], {1, ref.prompts[2].shape(0)});
    array fused = model(tokens);
    array separate = Model::forward(model.config(), model.weights(), tokens);
    EXPECT_LT(relative_error(fused, separate), 1e-5) << arch; // float32 products of other widths sum in other orders
  }
  Model llama = Model::load(fixture("llama"), float32);
  EXPECT_EQ(llama.run_weights().count("model.layers.0.self_attn.q_proj+k_proj+v_proj.weight"), 1u);
  EXPECT_EQ(llama.run_weights().count("model.layers.1.mlp.gate_proj+up_proj.weight@T"), 1u);
  Model gpt = Model::load(fixture("gpt_oss"), float32);
  EXPECT_EQ(gpt.run_weights().count("model.layers.0.self_attn.q_proj+k_proj+v_proj.bias"), 1u);
}

// Modules that do not agree (here one bias in another dtype) are not fused at all: no fused
// module missing a part (which would drop the biases), and the logits are the separate ones.
TEST(LmFusedProjections, ModulesThatDisagreeStaySeparate) {
  Model loaded = Model::load(fixture("gpt_oss"), float32);
  WeightMap w = loaded.weights();
  const std::string k_bias = "model.layers.0.self_attn.k_proj.bias";
  w.insert_or_assign(k_bias, astype(w.at(k_bias), float16));
  Model model(loaded.config(), w);
  EXPECT_EQ(model.run_weights().count("model.layers.0.self_attn.q_proj+k_proj+v_proj.weight"), 0u);
  EXPECT_EQ(model.run_weights().count("model.layers.1.self_attn.q_proj+k_proj+v_proj.weight"), 1u);
  Reference ref = read_reference(fixture("gpt_oss"));
  array tokens = reshape(ref.prompts[1], {1, ref.prompts[1].shape(0)});
  EXPECT_LT(relative_error(model(tokens), Model::forward(model.config(), w, tokens)), 1e-6);
}
