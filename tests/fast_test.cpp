// fast::rms_norm and fast::layer_norm (their fallback graphs for now): against float64 loops
// on odd sizes and every floating dtype, the checks, and their derivatives and batching.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "checker.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// Row-wise references in float64: rms (layer = false) or layer norm of x (rows x d).
std::vector<double> norm_ref(
    const std::vector<double>& x, int d, const std::vector<double>* w, const std::vector<double>* b,
    double eps, bool layer) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * d < x.size(); ++r) {
    double mu = 0, ss = 0;
    if (layer) {
      for (int j = 0; j < d; ++j) mu += x[r * d + j];
      mu /= d;
    }
    for (int j = 0; j < d; ++j) ss += (x[r * d + j] - mu) * (x[r * d + j] - mu);
    double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int j = 0; j < d; ++j) {
      double v = (x[r * d + j] - mu) * inv;
      if (w) v *= (*w)[j];
      if (b) v += (*b)[j];
      y[r * d + j] = v;
    }
  }
  return y;
}

} // namespace

TEST(FastNorms, AgainstFloat64Loops) {
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    const double tol = dt == float32 ? 1e-5 : (dt == float64 ? 1e-12 : 2e-2);
    for (int d : {1, 7, 129}) {
      auto x = randn({3, 5, d}, dt);
      auto w = randn({d}, dt), b = randn({d}, dt);
      auto xv = to_vector(x), wv = to_vector(w), bv = to_vector(b);
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      auto y = fast::rms_norm(x, w, 1e-5f);
      EXPECT_EQ(y.dtype(), dt);
      expect_close(y, {3, 5, d}, norm_ref(xv, d, &wv, nullptr, double(1e-5f), false), tol, tol);
      expect_close(fast::rms_norm(x, std::nullopt, 1e-3f), {3, 5, d},
                   norm_ref(xv, d, nullptr, nullptr, double(1e-3f), false), tol, tol);
      auto z = fast::layer_norm(x, w, b, 1e-5f);
      EXPECT_EQ(z.dtype(), dt);
      expect_close(z, {3, 5, d}, norm_ref(xv, d, &wv, &bv, double(1e-5f), true), tol, tol);
      expect_close(fast::layer_norm(x, std::nullopt, b, 1e-5f), {3, 5, d},
                   norm_ref(xv, d, nullptr, &bv, double(1e-5f), true), tol, tol);
    }
  }
}

TEST(FastNorms, PromotionAndChecks) {
  auto x = randn({4, 6}, float16);
  EXPECT_EQ(fast::rms_norm(x, randn({6}, float32), 1e-5f).dtype(), float32);
  EXPECT_EQ(fast::layer_norm(x, std::nullopt, randn({6}, float32), 1e-5f).dtype(), float32);
  EXPECT_THROW(fast::rms_norm(array(1.0f), std::nullopt, 1e-5f), std::invalid_argument);
  EXPECT_THROW(fast::rms_norm(x, randn({5}), 1e-5f), std::invalid_argument);
  EXPECT_THROW(fast::rms_norm(x, randn({1, 6}), 1e-5f), std::invalid_argument);
  EXPECT_THROW(fast::layer_norm(x, std::nullopt, randn({7}), 1e-5f), std::invalid_argument);
  EXPECT_THROW(fast::layer_norm(array({1, 2, 3}), std::nullopt, std::nullopt, 1e-5f), std::invalid_argument);
}

TEST(FastNorms, GradientsAndVmap) {
  auto x = randn({3, 7}, float64), w = randn({7}, float64), b = randn({7}, float64);
  check_grad([](const std::vector<array>& in) { return fast::rms_norm(in[0], in[1], 1e-5f); }, {x, w});
  check_grad(
      [](const std::vector<array>& in) { return fast::layer_norm(in[0], in[1], in[2], 1e-5f); },
      {x, w, b});
  check_vmap(
      [](const std::vector<array>& in) {
        return std::vector<array>{fast::layer_norm(in[0], in[1], std::nullopt, 1e-5f)};
      },
      {randn({4, 3, 7}, float64), w}, {0, -1});
}
