// nuvec tests: creation and copy ops (arange, linspace, astype, as_strided, copy, full and
// its shorthands, eye, identity, tri, tril, triu, meshgrid): values against NumPy's rules
// written out here, every dtype pair for astype, buffer sharing, errors, derivatives and
// batching through the generic checker.
#include <cmath>
#include <cstring>
#include <limits>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

std::vector<double> values_of(const array& a) {
  return to_vector(a);
}

} // namespace

// ---- arange ---------------------------------------------------------------------------

TEST(Arange, OverloadsAndDtypes) {
  auto a = arange(5);
  EXPECT_EQ(a.dtype(), int32);
  expect_close(a, {5}, {0, 1, 2, 3, 4}, 0, 0);
  auto b = arange(2, 6);
  EXPECT_EQ(b.dtype(), int32);
  expect_close(b, {4}, {2, 3, 4, 5}, 0, 0);
  auto c = arange(5, 0, -2);
  EXPECT_EQ(c.dtype(), int32);
  expect_close(c, {3}, {5, 3, 1}, 0, 0);
  auto d = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(d.dtype(), float32);
  expect_close(d, {4}, {0, 0.25, 0.5, 0.75}, 0, 0);
  auto e = arange(3.0);
  EXPECT_EQ(e.dtype(), float32);
  expect_close(e, {3}, {0, 1, 2}, 0, 0);
  auto f = arange(1.0, 3.0);
  EXPECT_EQ(f.dtype(), float32);
  expect_close(f, {2}, {1, 2}, 0, 0);
  auto g = arange(4.0, float64);
  EXPECT_EQ(g.dtype(), float64);
  expect_close(g, {4}, {0, 1, 2, 3}, 0, 0);
  auto h = arange(-1.0, 1.0, float16);
  EXPECT_EQ(h.dtype(), float16);
  expect_close(h, {2}, {-1, 0}, 0, 0);
  auto i = arange(1.0, 0.0, -0.3, float64);
  expect_close(i, {4}, {1.0, 0.7, 0.4, 0.1}, 1e-12, 1e-12);
  for (Dtype t : {uint8, uint16, uint32, uint64, int8, int16, int64, bfloat16, complex64}) {
    auto x = arange(0.0, 6.0, 2.0, t);
    EXPECT_EQ(x.dtype(), t);
    expect_close(x, {3}, {0, 2, 4}, 0, 0);
  }
}

TEST(Arange, IntegerStepsFollowNumPy) {
  // The step is the difference of the first two values, each cast (NumPy's rule).
  expect_close(arange(0.0, 5.0, 1.5, int32), {4}, {0, 1, 2, 3}, 0, 0);
  expect_close(arange(0.5, 5.0, 1.5, int32), {3}, {0, 2, 4}, 0, 0);
}

TEST(Arange, EmptyAndInfiniteStep) {
  EXPECT_EQ(arange(5, 0).shape(), (Shape{0}));
  EXPECT_EQ(arange(0.0, 1.0, -1.0).shape(), (Shape{0}));
  eval(arange(5, 0));
  double inf = std::numeric_limits<double>::infinity();
  expect_close(arange(2.0, 10.0, inf), {1}, {2}, 0, 0);
  EXPECT_EQ(arange(2.0, 10.0, -inf).shape(), (Shape{0}));
}

TEST(Arange, Errors) {
  double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  expect_throws_naming<std::invalid_argument>([] { arange(0.0, 1.0, 0.0); }, "[arange]");
  expect_throws_naming<std::invalid_argument>([] { arange(0, 3, 0); }, "[arange]");
  expect_throws_naming<std::invalid_argument>([&] { arange(0.0, 1.0, nan); }, "[arange]");
  expect_throws_naming<std::invalid_argument>([&] { arange(nan, 1.0); }, "[arange]");
  expect_throws_naming<std::invalid_argument>([&] { arange(0.0, inf); }, "[arange]");
  expect_throws_naming<std::invalid_argument>([&] { arange(-inf, 0.0, 1.0); }, "[arange]");
  expect_throws_naming<std::invalid_argument>([] { arange(3.0, bool_); }, "[arange]");
}

// ---- linspace -------------------------------------------------------------------------

TEST(Linspace, Values) {
  auto a = linspace(0.0, 1.0, 5);
  EXPECT_EQ(a.dtype(), float32);
  expect_close(a, {5}, {0, 0.25, 0.5, 0.75, 1.0}, 1e-7, 1e-7);
  auto b = linspace(-1.0, 2.0, 7, float64);
  expect_close(b, {7}, {-1, -0.5, 0, 0.5, 1, 1.5, 2}, 1e-12, 1e-12);
  expect_close(linspace(3.0, 7.0, 1, float64), {1}, {3});
  EXPECT_EQ(linspace(3.0, 7.0, 0).shape(), (Shape{0}));
  EXPECT_EQ(linspace(0.0, 1.0).shape(), (Shape{50}));
  expect_close(linspace(0.0, 10.0, 3, int32), {3}, {0, 5, 10}, 0, 0);
  expect_throws_naming<std::invalid_argument>([] { linspace(0.0, 1.0, -1); }, "[linspace]");
}

// ---- astype ---------------------------------------------------------------------------

TEST(AsType, NoOpWhenDtypeMatches) {
  auto a = randn({3});
  EXPECT_EQ(astype(a, float64).id(), a.id());
}

TEST(AsType, EveryDtypePair) {
  // Small non-negative integers are exact in every dtype.
  std::vector<double> src = {0, 1, 2, 3, 7, 100};
  for (Dtype from : all_dtypes) {
    auto x = astype(array(src.begin(), {2, 3}, float64), from);
    std::vector<double> in = src;
    if (from == bool_) {
      for (auto& v : in) v = v != 0;
    }
    for (Dtype to : all_dtypes) {
      SCOPED_TRACE(dtype_name(from) + " -> " + dtype_name(to));
      auto y = astype(x, to);
      EXPECT_EQ(y.dtype(), to);
      std::vector<double> expected = in;
      if (to == bool_) {
        for (auto& v : expected) v = v != 0;
      }
      expect_close(y, {2, 3}, expected, 0, 0);
    }
  }
}

TEST(AsType, RoundTrips) {
  for (Dtype t : all_dtypes) {
    SCOPED_TRACE(dtype_name(t));
    auto x = randint({4, 5}, 0, 100, int64);
    auto back = astype(astype(astype(x, t), float64), int64);
    if (t == bool_) {
      expect_allclose(back, astype(astype(x, bool_), int64), 0, 0);
    } else if (t == int8 || t == uint8 || t == float16 || t == bfloat16) {
      expect_allclose(back, x, 0, 0); // 0..100 is exact in these too
    } else {
      expect_allclose(back, x, 0, 0);
    }
  }
  // Floats survive a trip through float64 exactly; float32 -> float16 rounds.
  auto f = randn({6}, float32);
  expect_allclose(astype(astype(f, float64), float32), f, 0, 0);
  auto h = astype(array({0.1}, float64), float16);
  expect_close(h, {1}, {0.0999755859375}, 0, 0);
  auto bf = astype(array({3.14159}, float64), bfloat16);
  expect_close(bf, {1}, {3.140625}, 0, 0);
}

TEST(AsType, FloatToIntTruncatesAndToBool) {
  auto x = array({-2.7, -0.5, 0.5, 2.7, 3.99}, float64);
  expect_close(astype(x, int32), {5}, {-2, 0, 0, 2, 3}, 0, 0);
  expect_close(astype(x, int8), {5}, {-2, 0, 0, 2, 3}, 0, 0);
  expect_close(astype(astype(x, float32), int64), {5}, {-2, 0, 0, 2, 3}, 0, 0);
  expect_close(astype(array({0.5, 2.7, 255.9}), uint8), {3}, {0, 2, 255}, 0, 0);
  double nan = std::nan("");
  auto b = astype(array({0.0, -0.0, 0.1, -3.0, nan}, float64), bool_);
  EXPECT_EQ(b.dtype(), bool_);
  expect_close(b, {5}, {0, 0, 1, 1, 1}, 0, 0);
  expect_close(astype(array({0, 5, -1}, int32), bool_), {3}, {0, 1, 1}, 0, 0);
}

TEST(AsType, Complex) {
  auto x = array({1.5, -2.0}, float64);
  auto c = astype(x, complex64);
  auto parts = view(c, float32); // (re, im) pairs
  expect_close(parts, {4}, {1.5, 0, -2.0, 0}, 0, 0);
  auto z = array(std::complex<float>(2.5f, -1.0f));
  expect_close(astype(z, float32), {}, {2.5}, 0, 0);
  expect_close(astype(z, int32), {}, {2}, 0, 0);
  expect_close(astype(z, bool_), {}, {1}, 0, 0);
}

TEST(AsType, StridedInputs) {
  auto x = randn({3, 4});
  auto v = values_of(x);
  auto t = astype(transpose(x), float32);
  std::vector<double> expected;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) expected.push_back(v[i * 4 + j]);
  expect_close(t, {4, 3}, expected, 1e-6, 1e-7);
  auto b = astype(broadcast_to(array({1.5, -1.5}, float64), {3, 2}), int32);
  expect_close(b, {3, 2}, {1, -1, 1, -1, 1, -1}, 0, 0);
}

// ---- as_strided -----------------------------------------------------------------------

TEST(AsStrided, Values) {
  auto x = randn({3, 4});
  auto v = values_of(x);
  auto w = as_strided(x, {3, 3}, {4, 1}, 1);
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) expected.push_back(v[1 + 4 * i + j]);
  expect_close(w, {3, 3}, expected, 0, 0);
  // Sliding windows over a vector, and a broadcast-like zero stride.
  auto y = randn({6});
  auto vy = values_of(y);
  auto win = as_strided(y, {4, 3}, {1, 1}, 0);
  expected.clear();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) expected.push_back(vy[i + j]);
  expect_close(win, {4, 3}, expected, 0, 0);
  expect_close(as_strided(y, {2, 2}, {0, 2}, 1), {2, 2}, {vy[1], vy[3], vy[1], vy[3]}, 0, 0);
  // A non-contiguous input is addressed in its row-major order.
  auto t = transpose(x);
  auto tv = values_of(t);
  expect_close(as_strided(t, {2, 2}, {3, 1}, 0), {2, 2}, {tv[0], tv[1], tv[3], tv[4]}, 0, 0);
}

TEST(AsStrided, SharesContiguousBuffer) {
  auto x = randn({12});
  auto w = as_strided(x, {3, 2}, {4, 2}, 1);
  eval(x, w);
  EXPECT_EQ(w.data_shared_ptr(), x.data_shared_ptr());
  EXPECT_EQ(static_cast<const double*>(w.raw_data()), x.data<double>() + 1);
  EXPECT_FALSE(w.flags().row_contiguous);
}

TEST(AsStrided, Errors) {
  expect_throws_naming<std::invalid_argument>(
      [] { as_strided(zeros({4}), {2, 2}, {1}, 0); }, "[as_strided]");
}

// ---- copy / full ----------------------------------------------------------------------

TEST(Copy, SharesBuffer) {
  auto x = randn({2, 3});
  auto y = copy(x);
  eval(x, y);
  EXPECT_EQ(y.data_shared_ptr(), x.data_shared_ptr());
  expect_allclose(y, x, 0, 0);
  EXPECT_NE(y.id(), x.id());
}

TEST(Full, Values) {
  auto a = full({2, 3}, array(2.5, float64));
  EXPECT_EQ(a.dtype(), float64);
  expect_close(a, {2, 3}, std::vector<double>(6, 2.5), 0, 0);
  eval(a);
  EXPECT_TRUE(a.flags().row_contiguous);
  auto b = full({2, 3}, array({1, 2, 3}, int32), float32);
  EXPECT_EQ(b.dtype(), float32);
  expect_close(b, {2, 3}, {1, 2, 3, 1, 2, 3}, 0, 0);
  auto c = full({3, 2}, 7, int16);
  EXPECT_EQ(c.dtype(), int16);
  expect_close(c, {3, 2}, std::vector<double>(6, 7), 0, 0);
  auto d = full({2, 2}, array({1.5, -2.5}, {2, 1}, float64), int32);
  expect_close(d, {2, 2}, {1, 1, -2, -2}, 0, 0);
  EXPECT_EQ(full({0, 3}, 1.0f).shape(), (Shape{0, 3}));
  expect_close(full({}, 4.0f), {}, {4});
}

TEST(Full, ZerosOnesAndLike) {
  auto z = zeros({2, 2});
  EXPECT_EQ(z.dtype(), float32);
  expect_close(z, {2, 2}, {0, 0, 0, 0}, 0, 0);
  auto o = ones({3}, int8);
  EXPECT_EQ(o.dtype(), int8);
  expect_close(o, {3}, {1, 1, 1}, 0, 0);
  EXPECT_EQ(ones({2}).dtype(), float32);
  auto x = randn({2, 3});
  auto zl = zeros_like(x), ol = ones_like(x);
  EXPECT_EQ(zl.dtype(), float64);
  EXPECT_EQ(ol.shape(), (Shape{2, 3}));
  expect_close(zl, {2, 3}, std::vector<double>(6, 0), 0, 0);
  expect_close(ol, {2, 3}, std::vector<double>(6, 1), 0, 0);
  auto fl = full_like(astype(x, int32), array(2.9));
  EXPECT_EQ(fl.dtype(), int32);
  expect_close(fl, {2, 3}, std::vector<double>(6, 2), 0, 0);
  expect_close(ones({2}, bool_), {2}, {1, 1}, 0, 0);
  expect_close(zeros({2}, complex64), {2}, {0, 0}, 0, 0);
}

TEST(Full, Errors) {
  expect_throws_naming<std::invalid_argument>(
      [] { full({2, 3}, array({1.0, 2.0}, float64)); }, "[full]");
  expect_throws_naming<std::invalid_argument>([] { full({-1, 3}, 1.0f); }, "[full]");
  expect_throws_naming<std::invalid_argument>([] { zeros({2, -2}); }, "[full]");
}

// ---- eye / identity / tri / tril / triu -----------------------------------------------

TEST(Eye, Values) {
  auto i3 = eye(3);
  EXPECT_EQ(i3.dtype(), float32);
  expect_close(i3, {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0);
  expect_close(eye(2, 4, 1), {2, 4}, {0, 1, 0, 0, 0, 0, 1, 0}, 0, 0);
  expect_close(eye(3, 2, -1, int32), {3, 2}, {0, 0, 1, 0, 0, 1}, 0, 0);
  expect_close(eye(2, 3), {2, 3}, {1, 0, 0, 0, 1, 0}, 0, 0);
  EXPECT_EQ(eye(2, int64).dtype(), int64);
  expect_close(eye(2, 2, 5), {2, 2}, {0, 0, 0, 0}, 0, 0);
  auto id = identity(2, float64);
  EXPECT_EQ(id.dtype(), float64);
  expect_close(id, {2, 2}, {1, 0, 0, 1}, 0, 0);
  expect_close(identity(1), {1, 1}, {1}, 0, 0);
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
  expect_throws_naming<std::invalid_argument>([] { eye(-1); }, "[eye]");
  expect_throws_naming<std::invalid_argument>([] { eye(2, -3); }, "[eye]");
  expect_throws_naming<std::invalid_argument>([] { identity(-2); }, "[identity]");
}

TEST(Tri, Values) {
  expect_close(tri(3, 4, 0, float32), {3, 4}, {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0}, 0, 0);
  expect_close(tri(3, 3, -1, int32), {3, 3}, {0, 0, 0, 1, 0, 0, 1, 1, 0}, 0, 0);
  expect_close(tri(2, bool_), {2, 2}, {1, 0, 1, 1}, 0, 0);
  expect_throws_naming<std::invalid_argument>([] { tri(-1, 2, 0, float32); }, "[tri]");
}

TEST(Tril, Values) {
  auto x = randn({2, 3, 4});
  auto v = values_of(x);
  for (int k : {-1, 0, 2}) {
    std::vector<double> lo, up;
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) {
          double e = v[(b * 3 + i) * 4 + j];
          lo.push_back(j - i <= k ? e : 0);
          up.push_back(j - i >= k ? e : 0);
        }
    expect_close(tril(x, k), {2, 3, 4}, lo, 0, 0);
    expect_close(triu(x, k), {2, 3, 4}, up, 0, 0);
  }
  expect_throws_naming<std::invalid_argument>([] { tril(zeros({3})); }, "[tril]");
  expect_throws_naming<std::invalid_argument>([] { triu(array(1.0f)); }, "[triu]");
}

// ---- meshgrid -------------------------------------------------------------------------

TEST(Meshgrid, XyAndIj) {
  auto x = array({1.0, 2.0, 3.0}, float64);
  auto y = array({10.0, 20.0}, float64);
  auto xy = meshgrid({x, y});
  ASSERT_EQ(xy.size(), 2u);
  expect_close(xy[0], {2, 3}, {1, 2, 3, 1, 2, 3}, 0, 0);
  expect_close(xy[1], {2, 3}, {10, 10, 10, 20, 20, 20}, 0, 0);
  auto ij = meshgrid({x, y}, false, "ij");
  expect_close(ij[0], {3, 2}, {1, 1, 2, 2, 3, 3}, 0, 0);
  expect_close(ij[1], {3, 2}, {10, 20, 10, 20, 10, 20}, 0, 0);
  auto sp = meshgrid({x, y}, true);
  EXPECT_EQ(sp[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(sp[1].shape(), (Shape{2, 1}));
  auto three = meshgrid({x, y, array({5.0}, float64)}, false, "ij");
  EXPECT_EQ(three[2].shape(), (Shape{3, 2, 1}));
  expect_close(meshgrid({x})[0], {3}, {1, 2, 3}, 0, 0);
  expect_throws_naming<std::invalid_argument>([&] { meshgrid({x, y}, false, "yx"); }, "[meshgrid]");
}

// ---- derivatives and batching ---------------------------------------------------------

TEST(CreationRules, AsTypeDerivatives) {
  // The cotangent is cast back to the input's dtype; the tangent forward.
  auto x = randn({4}, float32);
  auto f = [](const std::vector<array>& a) { return std::vector<array>{astype(a[0], float64)}; };
  auto cot = randn({4}, float64);
  auto [outs, g] = vjp(f, {x}, {cot});
  EXPECT_EQ(g[0].dtype(), float32);
  expect_allclose(g[0], astype(cot, float32), 0, 0);
  auto [jo, jt] = jvp(f, {x}, {x});
  EXPECT_EQ(jt[0].dtype(), float64);
  expect_allclose(jt[0], astype(x, float64), 0, 0);
  // Through a float32 round trip the cotangent comes back as float64, rounded once.
  auto cot3 = randn({3});
  auto [o2, g2] = vjp(
      [](const std::vector<array>& a) {
        return std::vector<array>{astype(astype(a[0], float32), float64)};
      },
      {randn({3})}, {cot3});
  EXPECT_EQ(g2[0].dtype(), float64);
  expect_allclose(g2[0], cot3, 1e-6, 1e-7);
}

TEST(CreationRules, Gradients) {
  check_grad([](const std::vector<array>& x) { return copy(x[0]); }, {randn({2, 3})});
  check_grad([](const std::vector<array>& x) { return full({2, 3}, x[0]); }, {randn({})});
  check_grad([](const std::vector<array>& x) { return full({2, 3}, x[0], float64); }, {randn({3})});
  check_grad([](const std::vector<array>& x) { return as_strided(x[0], {4, 3}, {1, 1}, 0); },
             {randn({6})});
  check_grad([](const std::vector<array>& x) { return as_strided(x[0], {2, 2}, {2, 0}, 1); },
             {randn({2, 3})});
  check_grad([](const std::vector<array>& x) { return tril(x[0], 1); }, {randn({3, 4})});
  check_grad([](const std::vector<array>& x) { return triu(x[0], -1); }, {randn({2, 3, 3})});
}

TEST(CreationRules, Vmap) {
  using V = std::vector<array>;
  check_vmap([](const V& x) { return V{astype(x[0], float32)}; }, {randn({3, 4})}, {1});
  check_vmap([](const V& x) { return V{copy(x[0])}; }, {randn({3, 4})}, {0});
  check_vmap([](const V& x) { return V{full({2, 3}, x[0])}; }, {randn({5, 3})}, {0});
  check_vmap([](const V& x) { return V{full({2, 3}, x[0])}; }, {randn({5})}, {0});
  check_vmap([](const V& x) { return V{as_strided(x[0], {3, 2}, {1, 2}, 1)}; },
             {randn({7, 4})}, {1});
  check_vmap([](const V& x) { return V{as_strided(x[0], {2, 2}, {3, 1}, 0)}; },
             {randn({2, 3, 5})}, {2});
  check_vmap([](const V& x) { return V{tril(x[0])}; }, {randn({3, 3, 4})}, {1});
}
