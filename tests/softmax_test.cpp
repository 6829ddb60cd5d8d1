// nuvec tests: softmax along the last axis through the Softmax primitive (src/primitives/
// softmax.cpp and its kernels) against a float64 reference computed here, row by row, with
// the composed formula's semantics (NumPy / MLX): exp(x - max) / sum(exp(x - max)), so a row
// of all -inf, or one holding NaN or +inf, is NaN throughout. Dtypes float32, float64,
// float16, bfloat16; contiguous, transposed, sliced and broadcast inputs; long rows and many
// rows; derivatives and batching through tests/checker.h. Runs on the default device (the
// CPU, or the GPU when NUVEC_TEST_DEVICE=gpu).
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/softmax.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Softmax over the last axis of x's values (row-major, rows of n), in float64.
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t n) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * n < x.size(); ++r) {
    const double* row = x.data() + r * n;
    double m = -kInf;
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
      nan = nan || std::isnan(row[i]);
      if (row[i] > m) m = row[i];
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(row[i] - m); // -inf - -inf is NaN
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = nan ? kNaN : std::exp(row[i] - m) / s;
  }
  return y;
}

// Tolerances of a dtype's result against the float64 reference: the output rounding of the
// dtype (half types round once, from float32) plus the reference's own summation order.
struct Tol {
  double rtol, atol;
};
Tol tol_of(Dtype t) {
  if (t == float64) return {1e-12, 1e-15};
  if (t == float32) return {2e-6, 1e-12};
  if (t == float16) return {1e-3, 1e-7};
  return {8e-3, 1e-7}; // bfloat16
}

// Checks softmax(x, -1) against the reference on x's own (already rounded) values.
void check_against_reference(const array& x, bool precise = false) {
  array y = softmax(x, -1, precise);
  EXPECT_EQ(y.dtype(), x.dtype());
  auto t = tol_of(x.dtype());
  const int64_t n = x.shape(-1);
  expect_close(y, x.shape(), ref_softmax(to_vector(x), n), t.rtol, t.atol);
}

const std::vector<Dtype> kFloatTypes = {float32, float64, float16, bfloat16};

// Normal values scaled so that rows are far from uniform (exercises the max shift).
array values(const Shape& shape, Dtype t) {
  return astype(multiply(randn(shape), array(3.0)), t);
}

TEST(Softmax, BuildsThePrimitiveOnlyForTheLastAxis) {
  auto x = randn({3, 4});
  auto y = softmax(x, -1);
  ASSERT_TRUE(y.has_primitive());
  EXPECT_STREQ(y.primitive().name(), "Softmax");
  EXPECT_STREQ(softmax(x, 1).primitive().name(), "Softmax");
  EXPECT_STREQ(softmax(randn({6})).primitive().name(), "Softmax"); // all axes of 1-D
  EXPECT_STRNE(softmax(x, 0).primitive().name(), "Softmax");
  EXPECT_STRNE(softmax(x, std::vector<int>{0, 1}).primitive().name(), "Softmax");
  // Integers become float32 first (as today); the primitive sees a float input.
  auto yi = softmax(array({1, 2, 3}), 0);
  EXPECT_EQ(yi.dtype(), float32);
  EXPECT_STREQ(yi.primitive().name(), "Softmax");
  expect_close(yi, {3}, ref_softmax({1, 2, 3}, 3), 2e-6, 1e-12);
}

TEST(Softmax, AgainstFloat64ReferenceAllDtypes) {
  for (Dtype t : kFloatTypes) {
    for (Shape shape : std::vector<Shape>{{1}, {7}, {5, 1}, {7, 33}, {4, 5, 37}, {3, 256}, {2, 3, 1000}}) {
      SCOPED_TRACE(dtype_name(t) + " shape of " + std::to_string(shape.size()) + " dims, last " +
                   std::to_string(shape.back()));
      check_against_reference(values(shape, t));
      check_against_reference(values(shape, t), /*precise=*/true);
    }
  }
}

TEST(Softmax, NonContiguousInputs) {
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    auto base = values({24, 40}, t);
    eval(base);
    check_against_reference(transpose(base)); // last axis strided
    check_against_reference(slice(base, {1, 2}, {23, 39}, {2, 3})); // stepped both ways
    check_against_reference(slice(base, {3, 0}, {20, 40}, {3, 1})); // dense rows, row gaps
    check_against_reference(flip(base, std::vector<int>{1})); // negative stride on the last axis
    check_against_reference(slice(base, {0, 1}, {24, 40})); // misaligned row starts
    check_against_reference(broadcast_to(slice(base, {5, 0}, {6, 40}), {6, 40})); // stride 0
    check_against_reference(transpose(reshape(base, {4, 6, 40}), {1, 0, 2}));
  }
}

TEST(Softmax, InfinitiesAndNaN) {
  // Row 0: some -inf (exactly 0 out); row 1: all -inf (NaN); row 2: a NaN (NaN row);
  // row 3: a +inf (NaN row, inf - inf); row 4: huge finite values (no overflow).
  std::vector<double> v = {
      1.0, -kInf, 2.0, -kInf, 0.5,    //
      -kInf, -kInf, -kInf, -kInf, -kInf, //
      1.0, kNaN, 2.0, 3.0, 4.0,        //
      1.0, kInf, 2.0, 3.0, 4.0,        //
      1e30, 1e30, -1e30, 0.0, 1e30};
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    auto x = astype(array(v.begin(), {5, 5}, float64), t);
    check_against_reference(x);
    auto y = to_vector(softmax(x, -1));
    EXPECT_EQ(y[1], 0.0);
    EXPECT_EQ(y[3], 0.0);
    for (int i = 5; i < 20; ++i) EXPECT_TRUE(std::isnan(y[i])) << "element " << i;
  }
  // Sparse -inf over long rows (every kernel path sees some).
  for (Dtype t : kFloatTypes) {
    for (int n : {37, 4096, 40000}) {
      auto x = values({3, n}, t);
      auto mask = less(uniform({3, n}, 0, 1), array(0.3));
      check_against_reference(where(mask, array(-kInf, t), x));
    }
  }
}

TEST(Softmax, LongRows) {
  for (Dtype t : kFloatTypes) {
    for (int n : {8192, 100000}) {
      SCOPED_TRACE(dtype_name(t) + " n=" + std::to_string(n));
      check_against_reference(values({2, n}, t));
    }
    check_against_reference(values({3, 8191}, t)); // not a multiple of any vector width
  }
}

TEST(Softmax, ManyRows) {
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    check_against_reference(values({5000, 24}, t));
    check_against_reference(values({64, 33, 17}, t));
    check_against_reference(values({300, 2048}, t));
  }
}

TEST(Softmax, EmptyAndDegenerate) {
  for (Dtype t : kFloatTypes) {
    auto a = softmax(zeros({0, 5}, t), -1);
    EXPECT_EQ(a.shape(), (Shape{0, 5}));
    EXPECT_EQ(a.dtype(), t);
    auto b = softmax(zeros({3, 0}, t), -1);
    EXPECT_EQ(b.shape(), (Shape{3, 0}));
    eval(a, b);
    // One column: every finite element is 1.
    expect_close(softmax(values({4, 1}, t), -1), {4, 1}, {1, 1, 1, 1});
  }
}

TEST(Softmax, MatchesTheComposedPathOnOtherAxes) {
  // softmax over axis 0 is composed; over the last axis of the transpose it is the primitive.
  auto x = randn({6, 9});
  expect_allclose(softmax(x, 0), transpose(softmax(transpose(x), -1)), 1e-12, 1e-15);
  auto h = values({6, 9}, bfloat16);
  expect_allclose(softmax(h, 0), transpose(softmax(transpose(h), -1)), 8e-3, 1e-7);
}

TEST(Softmax, Equivalence) {
  Stream s = default_stream(default_device());
  Softmax a(s, false), b(s, false), c(s, true);
  EXPECT_TRUE(a.is_equivalent(b));
  EXPECT_FALSE(a.is_equivalent(c));
  EXPECT_STREQ(a.name(), "Softmax");
}

TEST(Softmax, BadAxis) {
  auto x = randn({2, 3});
  expect_throws_naming<std::out_of_range>([&] { softmax(x, 2); }, "[softmax]");
  expect_throws_naming<std::invalid_argument>([&] { softmax(x, std::vector<int>{1, -1}); }, "[softmax]");
}

TEST(SoftmaxGrad, VjpAndJvp) {
  check_grad([](const std::vector<array>& in) { return softmax(in[0], -1); }, {randn({3, 5})});
  check_grad([](const std::vector<array>& in) { return softmax(in[0], -1); }, {randn({2, 3, 4})});
  check_grad([](const std::vector<array>& in) { return softmax(in[0]); }, {randn({6})});
  // Composed with other ops, on a transposed input.
  check_grad(
      [](const std::vector<array>& in) { return multiply(softmax(transpose(in[0]), -1), in[1]); },
      {randn({4, 3}), randn({3, 4})});
  // The rules are differentiable again: the vjp of softmax, differentiated.
  check_grad(
      [](const std::vector<array>& in) {
        auto f = [](const std::vector<array>& xs) { return std::vector<array>{softmax(xs[0], -1)}; };
        return vjp(f, {in[0]}, {in[1]}).second[0];
      },
      {randn({2, 4}), randn({2, 4})});
  // Rows with -inf entries: those entries have zero derivative; the rest is finite.
  auto x = array({0.5, -kInf, 1.0, -0.2}, {1, 4});
  auto g = grad(std::function<array(const array&)>([](const array& a) {
    return sum(multiply(softmax(a, -1), array({1.0, 2.0, 3.0, 4.0}, {1, 4})));
  }))(x);
  auto gv = to_vector(g);
  EXPECT_EQ(gv[1], 0.0);
  for (double v : gv) EXPECT_TRUE(std::isfinite(v));
}

TEST(SoftmaxGrad, HalfTypesKeepTheirDtype) {
  for (Dtype t : {float16, bfloat16, float32}) {
    auto x = values({3, 7}, t);
    auto f = [](const std::vector<array>& xs) { return std::vector<array>{softmax(xs[0], -1)}; };
    auto ct = astype(randn({3, 7}), t);
    auto [outs, vjps] = vjp(f, {x}, {ct});
    EXPECT_EQ(vjps[0].dtype(), t);
    // Against the rule y * (g - sum(g * y)) in float64 on the rounded output y: the rule
    // runs in float32 and rounds once, so only that last rounding separates them.
    SCOPED_TRACE(dtype_name(t));
    auto ct64 = astype(ct, float64), y64 = astype(outs[0], float64);
    auto expected = multiply(y64, subtract(ct64, sum(multiply(ct64, y64), -1, true)));
    auto tol = tol_of(t);
    expect_allclose(vjps[0], expected, tol.rtol, 1e-6);
    // jvp is derived from the fallback graph, whose float32 softmax is not rounded to the
    // half type before the rule: against the rule on the exact output, one rounding apart.
    auto [jouts, jvps] = jvp(f, {x}, {ct});
    EXPECT_EQ(jvps[0].dtype(), t);
    auto y_exact = softmax(astype(x, float64), -1);
    auto expected_exact = multiply(y_exact, subtract(ct64, sum(multiply(ct64, y_exact), -1, true)));
    expect_allclose(jvps[0], expected_exact, tol.rtol, 1e-6);
  }
}

TEST(SoftmaxVmap, AgainstALoop) {
  auto f = [](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], -1)}; };
  auto x = randn({4, 3, 5});
  check_vmap(f, {x}, {0});
  check_vmap(f, {x}, {1});
  check_vmap(f, {x}, {2}); // the batch axis is the last one: it must move away
  // Nested with a second, unbatched input and a derivative inside.
  auto g = [](const std::vector<array>& in) {
    auto h = [&](const std::vector<array>& xs) {
      return std::vector<array>{multiply(softmax(xs[0], -1), in[1])};
    };
    return std::vector<array>{vjp(h, {in[0]}, {ones_like(in[0])}).second[0]};
  };
  check_vmap(g, {randn({3, 5, 4}), randn({5})}, {2, -1});
  check_vmap(g, {randn({3, 2, 5}), randn({5})}, {0, -1});
}

} // namespace
} // namespace nuvec::testing
