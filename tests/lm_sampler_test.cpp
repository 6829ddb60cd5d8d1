// nuvec::lm::Sampler: each logits processor against transformers' definition worked out by
// hand on small logits, seeded draws, the distribution of draws, and bad options.
#include "nuvec/lm/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nuvec/ops.h"
#include "nuvec/transforms.h"

using namespace nuvec;
using nuvec::lm::Sampler;
using nuvec::lm::SamplingOptions;

namespace {

std::vector<float> row(const array& a) {
  array c = astype(a, float32);
  eval(c);
  return std::vector<float>(c.data<float>(), c.data<float>() + c.size());
}

array logits_of(std::vector<float> v) {
  return array(v.begin(), {1, int(v.size())}, float32);
}

const float kInf = std::numeric_limits<float>::infinity();

TEST(LmSampler, GreedyIsArgmaxOfThePenalisedLogits) {
  Sampler greedy;
  EXPECT_EQ(greedy(logits_of({0.1f, 3.0f, -1.0f, 2.5f})).item<int>(), 1);
  // CTRL's penalty (transformers' RepetitionPenaltyLogitsProcessor): positive logits of seen
  // tokens divided, negative ones multiplied.
  Sampler penalised(SamplingOptions{.repetition_penalty = 2.0f});
  array ctx = array({1, 2}, {1, 2}, int32);
  EXPECT_EQ(row(penalised.filtered_logits(logits_of({2.0f, 3.0f, -1.0f, 1.0f}), ctx)),
            (std::vector<float>{2.0f, 1.5f, -2.0f, 1.0f}));
  EXPECT_EQ(penalised(logits_of({2.0f, 3.0f, -1.0f, 1.0f}), ctx).item<int>(), 0);
}

TEST(LmSampler, TemperatureTopKTopPMinP) {
  std::vector<float> probs = {0.5f, 0.3f, 0.15f, 0.05f};
  std::vector<float> logp;
  for (float p : probs) logp.push_back(std::log(p));
  array x = logits_of(logp);
  auto kept = [&](SamplingOptions o) {
    std::vector<float> f = row(Sampler(o).filtered_logits(x));
    std::vector<int> k;
    for (size_t i = 0; i < f.size(); ++i) k.push_back(f[i] > -kInf ? 1 : 0);
    return k;
  };
  EXPECT_EQ(kept({.temperature = 1.0f}), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(kept({.temperature = 1.0f, .top_k = 2}), (std::vector<int>{1, 1, 0, 0}));
  // top_p 0.7: ascending cumulative sums 0.05, 0.2, 0.5, 1.0; those <= 0.3 go.
  EXPECT_EQ(kept({.temperature = 1.0f, .top_p = 0.7f}), (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(kept({.temperature = 1.0f, .top_p = 0.9f}), (std::vector<int>{1, 1, 1, 0}));
  // The most likely token always stays.
  EXPECT_EQ(kept({.temperature = 1.0f, .top_p = 1e-6f}), (std::vector<int>{1, 0, 0, 0}));
  // min_p 0.4: below 0.4 · 0.5 = 0.2 goes.
  EXPECT_EQ(kept({.temperature = 1.0f, .min_p = 0.4f}), (std::vector<int>{1, 1, 0, 0}));
  // Temperature divides.
  std::vector<float> t = row(Sampler({.temperature = 2.0f}).filtered_logits(x));
  for (size_t i = 0; i < t.size(); ++i) EXPECT_FLOAT_EQ(t[i], logp[i] / 2.0f);
}

TEST(LmSampler, SeededDrawsRepeatAndFollowTheDistribution) {
  std::vector<float> probs = {0.6f, 0.3f, 0.1f};
  std::vector<float> logp;
  for (float p : probs) logp.push_back(std::log(p));
  array x = logits_of(logp);
  Sampler a({.temperature = 1.0f, .seed = 7}), b({.temperature = 1.0f, .seed = 7});
  std::vector<int> counts(3, 0);
  const int n = 3000;
  for (int i = 0; i < n; ++i) {
    int ta = a(x).item<int>();
    ASSERT_EQ(ta, b(x).item<int>());
    counts[ta]++;
  }
  for (int i = 0; i < 3; ++i) {
    double expected = n * probs[i];
    EXPECT_NEAR(counts[i], expected, 5 * std::sqrt(expected)) << "token " << i;
  }
  // A batch of rows draws one token per row.
  array batch = concatenate({x, logits_of({-kInf, 0.0f, -kInf})}, 0);
  array t = Sampler({.temperature = 1.0f, .seed = 1})(batch);
  EXPECT_EQ(t.shape(), (Shape{2}));
  EXPECT_EQ(row(t)[1], 1.0f);
}

TEST(LmSampler, BadOptionsThrow) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), std::invalid_argument);
  EXPECT_THROW(Sampler({.top_k = -1}), std::invalid_argument);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), std::invalid_argument);
  EXPECT_THROW(Sampler({.top_p = 1.5f}), std::invalid_argument);
  EXPECT_THROW(Sampler({.min_p = 2.0f}), std::invalid_argument);
  EXPECT_THROW(Sampler({.repetition_penalty = 0.0f}), std::invalid_argument);
  EXPECT_THROW(Sampler()(array({1.0f, 2.0f})), std::invalid_argument);
}

} // namespace
