// The CPU's vector versions (src/backend/cpu/simd.h) and the row reductions built on them
// (src/backend/cpu/fast/rows.h): every fused row kernel gives the same bits whichever version
// runs (baseline, AVX2, AVX-512: as many as this CPU has), for every floating dtype, forward
// and backward; order_key orders floats as their values; logsumexp_row against a float64
// loop (float32 within 1e-6 relative for rows up to 1e6) and its NaN and infinity rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/fast/rows.h"
#include "backend/cpu/simd.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// The versions this CPU can run, baseline first.
std::vector<cpu::Isa> versions() {
  const cpu::Isa widest = cpu::active_isa();
  std::vector<cpu::Isa> v;
  for (auto isa : {cpu::Isa::baseline, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (isa <= widest) v.push_back(isa);
  }
  return v;
}

// Runs f() under each version in turn, restoring the widest after.
template <typename F>
void for_each_version(F&& f) {
  const auto all = versions();
  for (auto isa : all) {
    cpu::set_isa(isa);
    SCOPED_TRACE("version " + std::to_string(static_cast<int>(isa)));
    f();
  }
  cpu::set_isa(all.back());
}

// The inputs of row_op_results: x, residual, weight, bias, cotangent, targets and the loss
// cotangent, evaluated once so that every version reads the same.
std::vector<array> row_op_inputs(Dtype dt, int n) {
  const int rows = 5;
  std::vector<array> in = {
      astype(add(multiply(randn({rows, n}), array(3.0, float64)), array(0.5, float64)), dt),
      astype(randn({rows, n}), dt),
      astype(randn({n}), dt),
      astype(randn({n}), dt),
      astype(randn({rows, n}), dt),
      randint({rows}, -n, n),
      astype(randn({rows}), dt == float64 ? float64 : float32)};
  eval(in);
  return in;
}

// The fused row ops' outputs and gradients on `in`, evaluated.
std::vector<std::vector<double>> row_op_results(const std::vector<array>& in) {
  const array &x = in[0], &g = in[4], &t = in[5];
  std::vector<array> out;
  auto norms = [&](const std::vector<array>& p) {
    auto [h, y] = fast::add_rms_norm(p[0], p[1], p[2], 1e-5f);
    return std::vector<array>{fast::rms_norm(p[0], p[2], 1e-5f), h, y, fast::layer_norm(p[0], p[2], p[3], 1e-5f)};
  };
  auto [ys, grads] = vjp(norms, {x, in[1], in[2], in[3]}, {g, g, g, g});
  out.insert(out.end(), ys.begin(), ys.end());
  out.insert(out.end(), grads.begin(), grads.end());
  auto [loss, dx] = vjp([&](const array& a) { return fast::cross_entropy(a, t); }, x, in[6]);
  out.push_back(loss);
  out.push_back(dx);
  out.push_back(logsumexp(x, std::vector<int>{-1}));
  if (x.dtype() == float32) out.push_back(exp(x));
  eval(out);
  std::vector<std::vector<double>> v;
  for (auto& o : out) v.push_back(to_vector(o));
  return v;
}

} // namespace

TEST(CpuRows, VersionsGiveTheSameBits) {
  if (versions().size() < 2) GTEST_SKIP() << "this CPU runs only the baseline version";
  for (Dtype dt : {float32, float64, bfloat16, float16}) {
    for (int n : {7, 1000 + 13}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      const auto in = row_op_inputs(dt, n);
      std::vector<std::vector<double>> first;
      for_each_version([&] {
        auto got = row_op_results(in);
        if (first.empty()) {
          first = got;
          return;
        }
        ASSERT_EQ(got.size(), first.size());
        for (size_t k = 0; k < got.size(); ++k) {
          ASSERT_EQ(got[k].size(), first[k].size());
          for (size_t i = 0; i < got[k].size(); ++i) {
            ASSERT_EQ(got[k][i], first[k][i]) << "output " << k << " element " << i;
          }
        }
      });
    }
  }
}

TEST(CpuRows, OrderKeyOrdersFloatsAsTheirValues) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float sorted[] = {-inf, -3e38f, -1.0f, -1e-40f, -0.0f, 0.0f, 1e-45f, 1e-40f, 1.0f, 3e38f, inf};
  for (size_t i = 0; i < std::size(sorted); ++i) {
    const float back = cpu::from_order_key<float>(cpu::order_key(sorted[i]));
    EXPECT_EQ(std::memcmp(&back, &sorted[i], sizeof(float)), 0) << sorted[i];
    if (i > 0) EXPECT_LT(cpu::order_key(sorted[i - 1]), cpu::order_key(sorted[i])) << sorted[i];
  }
  // NaNs sort beyond the infinities on their sign's side.
  EXPECT_GT(cpu::order_key(std::numeric_limits<float>::quiet_NaN()), cpu::order_key(inf));
  EXPECT_LT(cpu::order_key(-std::numeric_limits<float>::quiet_NaN()), cpu::order_key(-inf));
  EXPECT_LT(cpu::order_key(-2.0), cpu::order_key(-0.5));
  EXPECT_LT(cpu::order_key(-0.0), cpu::order_key(0.0));
  EXPECT_EQ(cpu::from_order_key<double>(cpu::order_key(-1e300)), -1e300);
}

TEST(CpuRows, LogSumExpRowAgainstAFloat64Loop) {
  uint64_t s = 99;
  auto next = [&] { // uniform in [-20, 20)
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0 * 40.0 - 20.0;
  };
  for_each_version([&] {
    for (int64_t n : {1, 2, 15, 16, 17, 33, 1000, 100003, 1000000}) {
      std::vector<float> xf(n);
      std::vector<double> xd(n);
      for (int64_t i = 0; i < n; ++i) xd[i] = xf[i] = static_cast<float>(next());
      double m = -INFINITY, sum = 0;
      for (double v : xd) m = std::max(m, v);
      for (double v : xd) sum += std::exp(v - m);
      const double want = m + std::log(sum);
      EXPECT_NEAR(cpu::logsumexp_row(xf.data(), n), want, 1e-6 * std::fabs(want)) << n;
      EXPECT_NEAR(cpu::logsumexp_row(xd.data(), n), want, 1e-12 * std::fabs(want)) << n;
    }
  });
}

TEST(CpuRows, LogSumExpRowNaNAndInfinities) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto lse = [](std::vector<float> v) { return cpu::logsumexp_row(v.data(), static_cast<int64_t>(v.size())); };
  for_each_version([&] {
    // NaN anywhere, of either sign, long rows or short, beside +inf or not: NaN.
    for (float q : {nan, -nan}) {
      EXPECT_TRUE(std::isnan(lse({1.0f, q, 2.0f})));
      EXPECT_TRUE(std::isnan(lse({inf, q})));
      EXPECT_TRUE(std::isnan(lse({-inf, q})));
      std::vector<float> row(1000, 0.5f);
      row[777] = q;
      EXPECT_TRUE(std::isnan(lse(row)));
    }
    EXPECT_EQ(lse({1.0f, inf, -inf}), inf);
    EXPECT_EQ(lse({-inf, -inf}), -inf);
    EXPECT_EQ(lse({}), -inf);
    EXPECT_EQ(lse({-inf, 3.0f}), 3.0f);
    EXPECT_FLOAT_EQ(lse({0.0f, 0.0f}), std::log(2.0f));
  });
}
