// nuvec tests: reductions (sum, prod, max, min, mean, var, std, all, any, argmin/argmax,
// logsumexp, softmax, count_nonzero, median) against float64 references computed here,
// over axes, layouts and dtypes; NaN rules; errors; derivatives and batching via checker.h.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "backend/common/reduce_plan.h"
#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Group = std::vector<double>;

// The reference: values of x (row-major, shape) grouped by output position (row-major over
// the keepdims shape), each group in row-major order; returns the keepdims shape too.
std::vector<Group> groups(const std::vector<double>& x, const Shape& shape, const std::vector<int>& axes_in, Shape& keep) {
  int nd = static_cast<int>(shape.size());
  std::vector<bool> red(nd, false);
  for (int a : axes_in) red[(a % nd + nd) % nd] = true;
  keep = shape;
  for (int d = 0; d < nd; ++d) {
    if (red[d]) keep[d] = 1;
  }
  size_t out_n = 1;
  for (auto k : keep) out_n *= k;
  std::vector<Group> g(out_n);
  std::vector<int> idx(nd, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    size_t o = 0;
    for (int d = 0; d < nd; ++d) o = o * keep[d] + (red[d] ? 0 : idx[d]);
    g[o].push_back(x[i]);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

Shape squeezed(const Shape& shape, const std::vector<int>& axes) {
  int nd = static_cast<int>(shape.size());
  std::vector<bool> red(nd, false);
  for (int a : axes) red[(a % nd + nd) % nd] = true;
  Shape out;
  for (int d = 0; d < nd; ++d) {
    if (!red[d]) out.push_back(shape[d]);
  }
  return out;
}

// Reference reduction of array x over axes with f applied per group.
std::pair<Shape, std::vector<double>> reference(
    const array& x,
    const std::vector<int>& axes,
    bool keepdims,
    const std::function<double(const Group&)>& f) {
  Shape keep;
  auto g = groups(to_vector(x), x.shape(), axes, keep);
  std::vector<double> out;
  for (auto& gr : g) out.push_back(f(gr));
  return {keepdims ? keep : squeezed(x.shape(), axes), out};
}

double ref_sum(const Group& g) {
  return std::accumulate(g.begin(), g.end(), 0.0);
}
double ref_prod(const Group& g) {
  double p = 1;
  for (double v : g) p *= v;
  return p;
}
double ref_max(const Group& g) {
  double m = -kInf;
  for (double v : g) {
    if (std::isnan(v)) return kNaN;
    m = std::max(m, v);
  }
  return m;
}
double ref_min(const Group& g) {
  double m = kInf;
  for (double v : g) {
    if (std::isnan(v)) return kNaN;
    m = std::min(m, v);
  }
  return m;
}
double ref_mean(const Group& g) {
  return ref_sum(g) / g.size();
}
double ref_var(const Group& g, int ddof) {
  double mu = ref_mean(g), ss = 0;
  for (double v : g) ss += (v - mu) * (v - mu);
  return ss / (static_cast<double>(g.size()) - ddof);
}
double ref_lse(const Group& g) {
  double m = ref_max(g);
  if (std::isinf(m)) return m;
  double s = 0;
  for (double v : g) s += std::exp(v - m);
  return m + std::log(s);
}
double ref_median(Group g) {
  for (double v : g) {
    if (std::isnan(v)) return kNaN;
  }
  std::sort(g.begin(), g.end());
  size_t n = g.size();
  return n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]);
}

const std::vector<std::vector<int>> kAxesSets = {
    {}, {0}, {1}, {3}, {-1}, {0, 2}, {1, 3}, {-1, -3}, {2, 1}, {0, 1, 2}, {0, 1, 2, 3}};

// The inputs every axes test runs on: contiguous, transposed, broadcast, strided-sliced and
// reversed (negative strides, which the plan flips: reduce_plan.h ReduceOrder::Any) views of
// shape (2, 3, 4, 5).
std::vector<std::pair<std::string, array>> layouts(Dtype dtype) {
  std::vector<std::pair<std::string, array>> out;
  out.emplace_back("contiguous", randn({2, 3, 4, 5}, dtype));
  out.emplace_back("transposed", transpose(randn({5, 3, 2, 4}, dtype), {2, 1, 3, 0}));
  out.emplace_back("broadcast", broadcast_to(randn({1, 3, 1, 5}, dtype), {2, 3, 4, 5}));
  out.emplace_back(
      "sliced", slice(randn({4, 3, 8, 5}, dtype), Shape{0, 0, 1, 0}, Shape{4, 3, 8, 5}, Shape{2, 1, 2, 1}));
  out.emplace_back(
      "reversed",
      transpose(slice(randn({5, 3, 2, 4}, dtype), Shape{4, 0, 1, 3}, Shape{-100, 3, -100, -100}, Shape{-1, 1, -1, -1}),
                {2, 1, 3, 0}));
  return out;
}

} // namespace

// ---------------------------------------------------------------------------------------
// Values over axes and layouts

TEST(Reduce, SumProdMaxMinMeanOverAxesAndLayouts) {
  for (Dtype dt : {float32, float64}) {
    double tol = dt == float32 ? 1e-5 : 1e-12;
    for (auto& [name, x] : layouts(dt)) {
      for (auto& axes : kAxesSets) {
        for (bool keep : {false, true}) {
          SCOPED_TRACE(name + " axes size " + std::to_string(axes.size()) + " keepdims " + std::to_string(keep));
          auto [s1, r1] = reference(x, axes, keep, ref_sum);
          expect_close(sum(x, axes, keep), s1, r1, tol, tol);
          auto [s2, r2] = reference(x, axes, keep, ref_prod);
          expect_close(prod(x, axes, keep), s2, r2, tol, tol);
          auto [s3, r3] = reference(x, axes, keep, ref_max);
          expect_close(max(x, axes, keep), s3, r3, 0, 0);
          auto [s4, r4] = reference(x, axes, keep, ref_min);
          expect_close(min(x, axes, keep), s4, r4, 0, 0);
          auto [s5, r5] = reference(x, axes, keep, ref_mean);
          expect_close(mean(x, axes, keep), s5, r5, tol, tol);
          EXPECT_EQ(sum(x, axes, keep).dtype(), dt);
        }
      }
    }
  }
}

TEST(Reduce, VarStdWithDdof) {
  auto x = randn({3, 4, 6}, float64);
  for (auto axes : std::vector<std::vector<int>>{{0}, {-1}, {0, 2}, {0, 1, 2}}) {
    for (int ddof : {0, 1, 2}) {
      auto [s, r] = reference(x, axes, false, [&](const Group& g) { return ref_var(g, ddof); });
      expect_close(var(x, axes, false, ddof), s, r, 1e-12, 1e-12);
      std::vector<double> sd;
      for (double v : r) sd.push_back(std::sqrt(v));
      expect_close(nuvec::std(x, axes, false, ddof), s, sd, 1e-12, 1e-12);
    }
  }
  // Int input: float32 output. A large offset does not cancel (two-pass).
  auto xi = randint({50}, -5, 5, int32);
  EXPECT_EQ(var(xi).dtype(), float32);
  auto big = add(randn({1000}, float32), array(1.0e4f));
  auto [s, r] = reference(big, {0}, false, [](const Group& g) { return ref_var(g, 0); });
  expect_close(var(big), s, r, 1e-3, 1e-3);
  // ddof >= N: division by zero gives inf (or NaN), as NumPy.
  auto two = array({1.0, 2.0});
  EXPECT_TRUE(std::isinf(var(two, false, 2).item<double>()));
}

TEST(Reduce, Overloads) {
  auto x = randn({3, 4}, float32);
  auto v = to_vector(x);
  double total = std::accumulate(v.begin(), v.end(), 0.0);
  expect_close(sum(x), {}, {total}, 1e-5, 1e-5);
  expect_close(sum(x, true), {1, 1}, {total}, 1e-5, 1e-5);
  auto [s, r] = reference(x, {-1}, false, ref_sum);
  expect_close(sum(x, -1), s, r, 1e-5, 1e-5);
  auto [sk, rk] = reference(x, {0}, true, ref_max);
  expect_close(max(x, 0, true), sk, rk, 0, 0);
  expect_close(min(x), {}, {ref_min(v)}, 0, 0);
  expect_close(prod(x, true), {1, 1}, {ref_prod(v)}, 1e-5, 1e-6);
  expect_close(mean(x, 1), {3}, reference(x, {1}, false, ref_mean).second, 1e-5, 1e-6);
  // A 0-d input reduces to itself.
  expect_close(sum(array(2.5f)), {}, {2.5});
  expect_close(max(array(2.5f)), {}, {2.5});
}

// ---------------------------------------------------------------------------------------
// Dtypes

TEST(Reduce, OutputDtypes) {
  EXPECT_EQ(sum(array({true, false, true})).dtype(), int32);
  EXPECT_EQ(sum(astype(array({1, 2}), int8)).dtype(), int32);
  EXPECT_EQ(sum(astype(array({1, 2}), int16)).dtype(), int32);
  EXPECT_EQ(sum(astype(array({1, 2}), uint8)).dtype(), uint32);
  EXPECT_EQ(sum(astype(array({1, 2}), uint16)).dtype(), uint32);
  EXPECT_EQ(sum(astype(array({1, 2}), int64)).dtype(), int64);
  EXPECT_EQ(sum(astype(array({1, 2}), float16)).dtype(), float16);
  EXPECT_EQ(mean(array({1, 2})).dtype(), float32);
  EXPECT_EQ(mean(astype(array({1, 2}), bfloat16)).dtype(), bfloat16);
  EXPECT_EQ(max(astype(array({1, 2}), int8)).dtype(), int8);
  EXPECT_EQ(all(array({1, 2})).dtype(), bool_);
  EXPECT_EQ(argmax(array({1, 2})).dtype(), uint32);
  EXPECT_EQ(count_nonzero(array({1, 0})).dtype(), int32);
  EXPECT_EQ(logsumexp(array({1, 2})).dtype(), float32);
}

TEST(Reduce, IntegerAndBoolSumsAreExact) {
  // 300 int8 values of up to 127 overflow int8 but not the int32 accumulator.
  auto x8 = randint({300}, 100, 127, int8);
  auto v = to_vector(x8);
  expect_close(sum(x8), {}, {ref_sum(v)}, 0, 0);
  auto xu = randint({20, 30}, 200, 255, uint8);
  auto [s, r] = reference(xu, {1}, false, ref_sum);
  expect_close(sum(xu, 1), s, r, 0, 0);
  auto b = greater(randn({7, 9}), array(0.0));
  auto [sb, rb] = reference(b, {0}, false, ref_sum);
  expect_close(sum(b, 0), sb, rb, 0, 0);
  auto xi = randint({4, 5}, -1000, 1000, int64);
  auto [si, ri] = reference(xi, {0, 1}, false, ref_sum);
  expect_close(sum(xi), si, ri, 0, 0);
  auto xp = randint({3, 4}, -3, 3, int32);
  auto [sp2, rp2] = reference(xp, {1}, false, ref_prod);
  expect_close(prod(xp, 1), sp2, rp2, 0, 0);
  auto [smx, rmx] = reference(xi, {1}, false, ref_max);
  expect_close(max(xi, 1), smx, rmx, 0, 0);
}

TEST(Reduce, HalfTypesAccumulateInFloat32) {
  for (Dtype dt : {float16, bfloat16}) {
    // 4096 values near 1: a half accumulator would stall at 2048 (float16) or 256 (bf16).
    auto x = uniform({4096}, 0.5, 1.5, dt);
    auto v = to_vector(x);
    auto got = sum(x);
    EXPECT_EQ(got.dtype(), dt);
    expect_close(got, {}, {ref_sum(v)}, 1e-2, 0);
    auto y = uniform({64, 33}, -1, 1, dt);
    for (auto axes : std::vector<std::vector<int>>{{0}, {1}}) {
      auto [s, r] = reference(y, axes, false, ref_sum);
      expect_close(sum(y, axes), s, r, 1e-2, 2e-2);
      auto [sm, rm] = reference(y, axes, false, ref_max);
      expect_close(max(y, axes), sm, rm, 0, 0);
      auto [smean, rmean] = reference(y, axes, false, ref_mean);
      expect_close(mean(y, axes), smean, rmean, 1e-2, 1e-2);
    }
    // 100000 values near 1: their float16 total (~1e5) overflows 65504, yet the mean, the
    // variance and logsumexp are small; NumPy computes them through float32.
    auto z = uniform({100000}, 0.5, 1.5, dt);
    auto vz = to_vector(z);
    double m = ref_sum(vz) / vz.size(), ss = 0, se = 0;
    for (double e : vz) {
      ss += (e - m) * (e - m);
      se += std::exp(e);
    }
    using Case = std::pair<array, double>;
    for (auto [got, want] : std::vector<Case>{{mean(z), m}, {var(z), ss / vz.size()}, {logsumexp(z), std::log(se)}}) {
      EXPECT_EQ(got.dtype(), dt);
      expect_close(got, {}, {want}, 1e-2, 0);
    }
  }
}

TEST(Reduce, Float32SumsAreAccurate) {
  // Pairwise/blocked accumulation: errors stay near float32 rounding of the result.
  auto x = uniform({1 << 20}, 0, 1, float32);
  auto v = to_vector(x);
  expect_close(sum(x), {}, {ref_sum(v)}, 2e-7, 0);
  // A long column reduction (blocked over rows).
  auto c = uniform({200000, 3}, 0, 1, float32);
  auto [s, r] = reference(c, {0}, false, ref_sum);
  expect_close(sum(c, 0), s, r, 2e-7, 0);
  // A strided (general) reduction.
  auto t = transpose(uniform({3, 100000}, 0, 1, float32));
  auto [st, rt] = reference(t, {0}, false, ref_sum);
  expect_close(sum(t, 0), st, rt, 2e-7, 0);
}

TEST(Reduce, ComplexSumAndProd) {
  auto re = randn({3, 4}, float32), im = randn({3, 4}, float32);
  auto z = add(astype(re, complex64), multiply(astype(im, complex64), array(complex64_t(0.0f, 1.0f))));
  auto s = sum(z, 1);
  EXPECT_EQ(s.dtype(), complex64);
  auto [sr, rr] = reference(re, {1}, false, ref_sum);
  auto [si, ri] = reference(im, {1}, false, ref_sum);
  expect_close(real(s), sr, rr, 1e-5, 1e-5);
  expect_close(imag(s), si, ri, 1e-5, 1e-5);
}

// ---------------------------------------------------------------------------------------
// NaN, inf, empty

TEST(Reduce, NaNPropagatesThroughMaxMinAndSums) {
  auto x = randn({4, 6}, float32);
  // A NaN in row 1 (not first) and row 3 (first).
  std::vector<double> v = to_vector(x);
  v[1 * 6 + 3] = kNaN;
  v[3 * 6 + 0] = kNaN;
  auto xn = astype(array(v.begin(), {4, 6}), float32);
  for (auto axes : std::vector<std::vector<int>>{{1}, {0}, {0, 1}}) {
    auto [s, r] = reference(xn, axes, false, ref_max);
    expect_close(max(xn, axes), s, r, 0, 0);
    auto [s2, r2] = reference(xn, axes, false, ref_min);
    expect_close(min(xn, axes), s2, r2, 0, 0);
    auto [s3, r3] = reference(xn, axes, false, ref_sum);
    expect_close(sum(xn, axes), s3, r3, 1e-5, 1e-5);
  }
  auto am = to_vector(argmax(xn, 1));
  EXPECT_EQ(am[1], 3); // NumPy: the first NaN wins
  EXPECT_EQ(am[3], 0);
  auto an = to_vector(argmin(xn, 1));
  EXPECT_EQ(an[1], 3);
  // Long contiguous rows (the vectorised lanes): a NaN anywhere wins; -inf rows stay -inf.
  for (Dtype dt : {float32, float64}) {
    auto longrow = to_vector(randn({3, 1001}));
    longrow[1 * 1001 + 517] = kNaN;
    for (int k = 0; k < 1001; ++k) longrow[2 * 1001 + k] = -kInf;
    auto lr = astype(array(longrow.begin(), {3, 1001}), dt);
    auto [s, r] = reference(lr, {1}, false, ref_max);
    expect_close(max(lr, 1), s, r, 0, 0);
    auto [s2, r2] = reference(lr, {1}, false, ref_min);
    expect_close(min(lr, 1), s2, r2, 0, 0);
  }
  // Half types too.
  auto h = astype(array({1.0, kNaN, 3.0}), float16);
  EXPECT_TRUE(std::isnan(max(h).item<float>()));
}

TEST(Reduce, EmptyReductions) {
  auto e = zeros({0, 3});
  expect_close(sum(e, 0), {3}, {0, 0, 0});
  expect_close(prod(e, 0), {3}, {1, 1, 1});
  expect_close(all(e, 0), {3}, {1, 1, 1});
  expect_close(any(e, 0), {3}, {0, 0, 0});
  EXPECT_EQ(sum(e, 1).shape(), Shape{0});
  EXPECT_EQ(max(e, 1).shape(), Shape{0}); // nothing reduced to an empty slice: no error
  auto m = to_vector(mean(e, 0));
  EXPECT_TRUE(std::isnan(m[0]));
}

TEST(Reduce, AllAny) {
  auto x = randint({5, 6}, 0, 2, int32);
  x = multiply(x, randint({5, 6}, 1, 3, int32)); // non-zero values other than 1
  for (auto axes : std::vector<std::vector<int>>{{0}, {1}, {0, 1}, {-1}}) {
    auto [s, r] = reference(x, axes, false, [](const Group& g) {
      return std::all_of(g.begin(), g.end(), [](double v) { return v != 0; }) ? 1.0 : 0.0;
    });
    expect_close(all(x, axes), s, r, 0, 0);
    auto [s2, r2] = reference(x, axes, true, [](const Group& g) {
      return std::any_of(g.begin(), g.end(), [](double v) { return v != 0; }) ? 1.0 : 0.0;
    });
    expect_close(any(x, axes, true), s2, r2, 0, 0);
  }
  EXPECT_TRUE(all(array({true, true})).item<bool>());
  EXPECT_FALSE(any(array({0.0f, 0.0f})).item<bool>());
  EXPECT_TRUE(any(array({0.0f, kNaN})).item<bool>());
}

// ---------------------------------------------------------------------------------------
// argmin, argmax

TEST(ArgReduce, FirstExtremeAlongAxes) {
  // Small integers: plenty of ties, so "first" matters.
  for (auto& [name, x] : layouts(float32)) {
    auto xi = astype(multiply(x, array(2.0f)), int32);
    for (int axis : {0, 1, 2, 3, -1, -2}) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(name + " axis " + std::to_string(axis));
        auto first = [](bool is_max) {
          return [is_max](const Group& g) {
            size_t best = 0;
            for (size_t i = 1; i < g.size(); ++i) {
              if (is_max ? g[i] > g[best] : g[i] < g[best]) best = i;
            }
            return static_cast<double>(best);
          };
        };
        auto [s, r] = reference(xi, {axis}, keep, first(true));
        expect_close(argmax(xi, axis, keep), s, r, 0, 0);
        auto [s2, r2] = reference(xi, {axis}, keep, first(false));
        expect_close(argmin(xi, axis, keep), s2, r2, 0, 0);
        auto [s3, r3] = reference(x, {axis}, keep, first(true));
        expect_close(argmax(x, axis, keep), s3, r3, 0, 0);
      }
    }
  }
  // Flattened.
  auto y = randn({3, 5}, float64);
  auto v = to_vector(y);
  double expect = std::max_element(v.begin(), v.end()) - v.begin();
  expect_close(argmax(y), {}, {expect}, 0, 0);
  expect_close(argmax(y, true), {1, 1}, {expect}, 0, 0);
  double expect_min = std::min_element(v.begin(), v.end()) - v.begin();
  expect_close(argmin(y), {}, {expect_min}, 0, 0);
}

// ---------------------------------------------------------------------------------------
// logsumexp, softmax, count_nonzero, median

TEST(Reduce, LogSumExp) {
  for (auto& [name, x] : layouts(float64)) {
    for (auto& axes : kAxesSets) {
      auto [s, r] = reference(x, axes, false, ref_lse);
      expect_close(logsumexp(x, axes), s, r, 1e-12, 1e-12);
    }
  }
  // Large values do not overflow; infinite rows; NaN propagates.
  auto big = array({1000.0, 1000.0, -kInf, 0.0}, {2, 2});
  expect_close(logsumexp(big, 1), {2}, {1000.0 + std::log(2.0), 0.0}, 1e-6, 1e-5);
  auto rows = array({-kInf, -kInf, kInf, 1.0, kNaN, 1.0, kInf, -kInf}, {4, 2});
  expect_close(logsumexp(rows, 1), {4}, {-kInf, kInf, kNaN, kInf});
  expect_close(logsumexp(rows, 1, true), {4, 1}, {-kInf, kInf, kNaN, kInf});
  EXPECT_EQ(logsumexp(array({1, 2, 3})).dtype(), float32);
}

TEST(Reduce, Softmax) {
  auto x = randn({3, 4, 5}, float64);
  for (auto axes : std::vector<std::vector<int>>{{-1}, {0}, {0, 2}, {0, 1, 2}}) {
    auto lse = reference(x, axes, true, ref_lse);
    // softmax = exp(x - lse) with lse broadcast back.
    auto expected = exp(subtract(x, array(lse.second.begin(), lse.first, float64)));
    expect_allclose(softmax(x, axes), expected, 1e-12, 1e-12);
  }
  expect_allclose(softmax(x), exp(subtract(x, logsumexp(x, true))), 1e-12, 1e-12);
  expect_allclose(softmax(x, 1), exp(subtract(x, logsumexp(x, 1, true))), 1e-12, 1e-12);
  // Stable for large inputs.
  auto big = array({1000.0f, 1000.0f});
  expect_close(softmax(big), {2}, {0.5, 0.5});
  // Half inputs, plain and precise.
  auto h = randn({4, 16}, float16);
  auto ref = exp(subtract(astype(h, float64), logsumexp(astype(h, float64), 1, true)));
  for (bool precise : {false, true}) {
    auto got = softmax(h, 1, precise);
    EXPECT_EQ(got.dtype(), float16);
    expect_allclose(got, ref, 1e-2, 2e-3);
  }
  EXPECT_EQ(softmax(array({1, 2})).dtype(), float32);
}

TEST(Reduce, CountNonzero) {
  auto x = multiply(randn({4, 5}), randint({4, 5}, 0, 1, float64));
  for (auto axes : std::vector<std::vector<int>>{{0}, {1}, {0, 1}}) {
    auto [s, r] = reference(x, axes, false, [](const Group& g) {
      return static_cast<double>(std::count_if(g.begin(), g.end(), [](double v) { return v != 0; }));
    });
    expect_close(count_nonzero(x, axes), s, r, 0, 0);
  }
  expect_close(count_nonzero(x, 1, true), {4, 1}, reference(x, {1}, true, [](const Group& g) {
    return static_cast<double>(std::count_if(g.begin(), g.end(), [](double v) { return v != 0; }));
  }).second, 0, 0);
  EXPECT_EQ(count_nonzero(array({0.0, kNaN, 2.0})).item<int>(), 2);
}

TEST(Reduce, Median) {
  for (auto shape : std::vector<Shape>{{5, 7}, {4, 6}}) {
    auto x = randn(shape, float64);
    for (auto axes : std::vector<std::vector<int>>{{0}, {1}, {-1}, {0, 1}}) {
      for (bool keep : {false, true}) {
        auto [s, r] = reference(x, axes, keep, ref_median);
        expect_close(median(x, axes, keep), s, r, 1e-12, 1e-12);
      }
    }
  }
  auto v = array({3.0, 1.0, kNaN, 2.0, 5.0, 4.0}, {2, 3});
  expect_close(median(v, 1), {2}, {kNaN, 4.0});
  auto i = array({4, 1, 3, 2});
  EXPECT_EQ(median(i).dtype(), float32);
  expect_close(median(i), {}, {2.5});
  expect_close(median(transpose(randint({3, 4}, 0, 0, float32))), {}, {0.0});
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(Reduce, Errors) {
  auto x = randn({2, 3}, float32);
  expect_throws_naming<std::out_of_range>([&] { sum(x, 2); }, "[sum]");
  expect_throws_naming<std::out_of_range>([&] { sum(x, -3); }, "[sum]");
  expect_throws_naming<std::out_of_range>([&] { mean(x, std::vector<int>{0, 5}); }, "[mean]");
  expect_throws_naming<std::invalid_argument>([&] { sum(x, std::vector<int>{0, -2}); }, "[sum]");
  expect_throws_naming<std::invalid_argument>([&] { prod(x, std::vector<int>{1, 1}); }, "[prod]");
  expect_throws_naming<std::out_of_range>([&] { max(x, 3); }, "[max]");
  expect_throws_naming<std::out_of_range>([&] { min(x, -4); }, "[min]");
  expect_throws_naming<std::out_of_range>([&] { argmax(x, 2); }, "[argmax]");
  expect_throws_naming<std::out_of_range>([&] { argmin(x, -3); }, "[argmin]");
  expect_throws_naming<std::out_of_range>([&] { var(x, 2); }, "[var]");
  expect_throws_naming<std::out_of_range>([&] { nuvec::std(x, 2); }, "[std]");
  expect_throws_naming<std::out_of_range>([&] { all(x, 2); }, "[all]");
  expect_throws_naming<std::out_of_range>([&] { any(x, 2); }, "[any]");
  expect_throws_naming<std::out_of_range>([&] { logsumexp(x, 2); }, "[logsumexp]");
  expect_throws_naming<std::out_of_range>([&] { softmax(x, 2); }, "[softmax]");
  expect_throws_naming<std::out_of_range>([&] { count_nonzero(x, 2); }, "[count_nonzero]");
  expect_throws_naming<std::out_of_range>([&] { median(x, 2); }, "[median]");
  auto e = zeros({0, 3});
  expect_throws_naming<std::invalid_argument>([&] { max(e); }, "[max]");
  expect_throws_naming<std::invalid_argument>([&] { min(e, 0); }, "[min]");
  expect_throws_naming<std::invalid_argument>([&] { argmax(e); }, "[argmax]");
  expect_throws_naming<std::invalid_argument>([&] { argmin(e, 0); }, "[argmin]");
}

// ---------------------------------------------------------------------------------------
// Derivatives

using Fn = std::function<array(const std::vector<array>&)>;

TEST(ReduceGrad, SumMeanVarStd) {
  auto x = randn({3, 4, 5});
  for (auto axes : std::vector<std::vector<int>>{{0}, {-1}, {0, 2}, {0, 1, 2}}) {
    check_grad([&](const std::vector<array>& in) { return sum(in[0], axes); }, {x});
    check_grad([&](const std::vector<array>& in) { return mean(in[0], axes, true); }, {x});
    check_grad([&](const std::vector<array>& in) { return var(in[0], axes, false, 1); }, {x});
    check_grad([&](const std::vector<array>& in) { return nuvec::std(in[0], axes); }, {x});
  }
  // Through a transposed input.
  check_grad([](const std::vector<array>& in) { return sum(transpose(in[0]), 1); }, {x});
}

TEST(ReduceGrad, ProdWithAndWithoutZeros) {
  auto x = uniform({3, 4}, 0.5, 1.5);
  for (int axis : {0, 1}) {
    check_grad([&](const std::vector<array>& in) { return prod(in[0], axis); }, {x});
  }
  check_grad([](const std::vector<array>& in) { return prod(in[0]); }, {x});
  // One zero in some rows, two in another: the exact rule, not out / x.
  std::vector<double> v = to_vector(x);
  v[0 * 4 + 1] = 0; // row 0: one zero
  v[2 * 4 + 0] = 0; // row 2: two zeros
  v[2 * 4 + 3] = 0;
  auto xz = array(v.begin(), {3, 4}, float64);
  check_grad([](const std::vector<array>& in) { return prod(in[0], 1); }, {xz});
  check_grad([](const std::vector<array>& in) { return prod(in[0], 0, true); }, {xz});
  // Explicitly: d prod / dx at the lone zero is the product of the others.
  auto g = grad([](const array& a) { return sum(prod(a, 1)); })(xz);
  auto gv = to_vector(g);
  double others = v[0] * v[2] * v[3];
  EXPECT_NEAR(gv[1], others, 1e-12);
  EXPECT_EQ(gv[0], 0.0);
  EXPECT_EQ(gv[2 * 4 + 0], 0.0);
  EXPECT_EQ(gv[2 * 4 + 1], 0.0);
}

TEST(ReduceGrad, MaxMinWithoutTies) {
  auto x = randn({3, 4, 5});
  for (auto axes : std::vector<std::vector<int>>{{0}, {-1}, {0, 2}}) {
    check_grad([&](const std::vector<array>& in) { return max(in[0], axes); }, {x});
    check_grad([&](const std::vector<array>& in) { return min(in[0], axes, true); }, {x});
  }
}

TEST(ReduceGrad, MaxMinTiesFollowTheSeedRule) {
  // Row 0: a three-way tie for the max; row 1: a two-way tie for the min.
  auto x = array({1.0, 3.0, 3.0, 0.0, 3.0, -2.0, 5.0, -2.0, 4.0, 1.0}, {2, 5}, float64);
  auto cot = array({2.0, 3.0}, float64);
  // Reverse mode splits ties evenly.
  auto [o1, gmax] = vjp([](const array& a) { return max(a, 1); }, x, cot);
  expect_close(gmax, {2, 5}, {0, 2.0 / 3, 2.0 / 3, 0, 2.0 / 3, 0, 3, 0, 0, 0}, 1e-12, 1e-12);
  auto [o2, gmin] = vjp([](const array& a) { return min(a, 1); }, x, cot);
  expect_close(gmin, {2, 5}, {0, 0, 0, 2, 0, 1.5, 0, 1.5, 0, 0}, 1e-12, 1e-12);
  // Forward mode takes the tangent at the first extreme.
  auto t = array({10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0}, {2, 5});
  auto [o3, jmax] = jvp([](const array& a) { return max(a, 1); }, x, t);
  expect_close(jmax, {2}, {20.0, 70.0});
  auto [o4, jmin] = jvp([](const array& a) { return min(a, 1); }, x, t);
  expect_close(jmin, {2}, {40.0, 60.0});
  // Over several axes the first is in row-major order of the reduced axes.
  auto y = array({1.0, 7.0, 7.0, 7.0}, {2, 2});
  auto [o5, jall] = jvp([](const array& a) { return max(a); }, y, array({1.0, 2.0, 3.0, 4.0}, {2, 2}));
  expect_close(jall, {}, {2.0});
}

TEST(ReduceGrad, LogSumExpAndSoftmax) {
  auto x = randn({3, 5});
  for (auto axes : std::vector<std::vector<int>>{{0}, {1}, {0, 1}}) {
    check_grad([&](const std::vector<array>& in) { return logsumexp(in[0], axes); }, {x});
    check_grad([&](const std::vector<array>& in) { return softmax(in[0], axes); }, {x});
  }
}

// ---------------------------------------------------------------------------------------
// Batching

TEST(ReduceVmap, ReductionsAgainstALoop) {
  auto x = randn({4, 3, 5});
  using VFn = std::function<std::vector<array>(const std::vector<array>&)>;
  std::vector<VFn> fns = {
      [](const std::vector<array>& in) { return std::vector<array>{sum(in[0], 0)}; },
      [](const std::vector<array>& in) { return std::vector<array>{prod(in[0], -1, true)}; },
      [](const std::vector<array>& in) { return std::vector<array>{max(in[0])}; },
      [](const std::vector<array>& in) { return std::vector<array>{min(in[0], 1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{mean(in[0], 0)}; },
      [](const std::vector<array>& in) { return std::vector<array>{var(in[0], 1, false, 1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{argmax(in[0], 1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{argmin(in[0])}; },
      [](const std::vector<array>& in) { return std::vector<array>{logsumexp(in[0], 0)}; },
      [](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], 1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{all(greater(in[0], array(0.0)), 1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{any(greater(in[0], array(0.0)))}; },
      [](const std::vector<array>& in) { return std::vector<array>{median(in[0], 1)}; },
  };
  for (size_t i = 0; i < fns.size(); ++i) {
    SCOPED_TRACE("function " + std::to_string(i));
    check_vmap(fns[i], {x}, {0}, 1e-10, 1e-12);
    check_vmap(fns[i], {x}, {1}, 1e-10, 1e-12);
    check_vmap(fns[i], {x}, {2}, 1e-10, 1e-12);
  }
}

// max/min of complex arrays propagate NaN (either part) wherever it sits, as NumPy's and as
// the real dtypes do; so do element-wise maximum/minimum from either side.
TEST(Reduce, ComplexMaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  array z = array({complex64_t(1, 0), complex64_t(nan, 0), complex64_t(3, 1)});
  array w = array({complex64_t(1, 0), complex64_t(2, 0), complex64_t(0, nan)});
  for (const array& a : {z, w}) {
    auto hi = max(a).item<complex64_t>(), lo = min(a).item<complex64_t>();
    EXPECT_TRUE(std::isnan(hi.real()) || std::isnan(hi.imag()));
    EXPECT_TRUE(std::isnan(lo.real()) || std::isnan(lo.imag()));
  }
  EXPECT_EQ(max(array({complex64_t(1, 5), complex64_t(2, -1)})).item<complex64_t>(), complex64_t(2, -1));
  array one = array({complex64_t(1, 0)});
  array bad = array({complex64_t(nan, 0)});
  EXPECT_TRUE(std::isnan(maximum(one, bad).item<complex64_t>().real()));
  EXPECT_TRUE(std::isnan(maximum(bad, one).item<complex64_t>().real()));
  EXPECT_TRUE(std::isnan(minimum(one, bad).item<complex64_t>().real()));
}

// The shared plan (backend/common/reduce_plan.h): ReduceOrder::Any flips negative reduced
// strides onto `base` and orders reduced dims densest-innermost, so a reversed, transposed
// dense block is one contiguous run; ReduceOrder::Keep (arg_reduce) keeps the index order.
TEST(ReducePlan, AnyOrderFlipsAndSortsReducedDims) {
  // A (4, 3) row-major block read transposed and reversed along both axes: shape (3, 4),
  // strides (-1, -3), data pointer at the block's last element (offset 11).
  const Shape shape{3, 4};
  const Strides strides{-1, -3};
  auto any = make_reduce_plan(shape, strides, {0, 1}, ReduceOrder::Any);
  EXPECT_EQ(any.kind, ReduceKind::Row);
  EXPECT_EQ(any.base, -11);
  EXPECT_EQ(any.reduce_size, 12);
  EXPECT_EQ(any.reduced_shape, (std::vector<int64_t>{12}));
  EXPECT_EQ(any.reduced_strides, (Strides{1}));
  auto keep = make_reduce_plan(shape, strides, {0, 1}, ReduceOrder::Keep);
  EXPECT_EQ(keep.kind, ReduceKind::General);
  EXPECT_EQ(keep.base, 0);
  EXPECT_EQ(keep.reduced_strides, (Strides{-1, -3}));
  // Kept dims are never reordered: the column plan of a row-major (6, 5) sum over axis 0.
  auto col = make_reduce_plan(Shape{6, 5}, Strides{5, 1}, {0}, ReduceOrder::Any);
  EXPECT_EQ(col.kind, ReduceKind::Column);
  EXPECT_EQ(col.kept_shape, (std::vector<int64_t>{5}));
  // A broadcast reduced dim goes outermost, behind which the dense dims still merge.
  auto bc = make_reduce_plan(Shape{2, 3, 4}, Strides{4, 0, 1}, {0, 1, 2}, ReduceOrder::Any);
  EXPECT_EQ(bc.reduced_shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(bc.reduced_strides, (Strides{0, 1}));
}
