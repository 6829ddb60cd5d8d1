// Regression tests for issue 9's silent wrong answers (code written for MLX must mean the
// same) and for the MLX API added with it. Expected values come from MLX's rules or from
// NumPy 1.24 (printed with np.pad, np.hanning, ... and pasted here).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <typeinfo>

#include "nuvec/nuvec.h"
#include "nuvec/version.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

// ---------------------------------------------------------------------------------------
// 1. eval / item / data / printing inside a transform keep the traced graph attached.

TEST(MlxConformance, ItemInsideGradKeepsTheGradient) {
  auto loss = [](const array& x) {
    array y = sum(square(x));
    float seen = y.item<float>(); // what a training loop logs
    EXPECT_GT(seen, 0.0f);
    return y;
  };
  array x = array({1.0f, -2.0f, 3.0f});
  expect_close(grad(loss)(x), {3}, {2.0, -4.0, 6.0});
}

TEST(MlxConformance, EvalDataAndPrintInsideVjpJvpKeepTheGraph) {
  auto f = [](const std::vector<array>& xs) {
    array h = multiply(xs[0], xs[0]); // an intermediate evaluated mid-trace
    eval(h);
    EXPECT_EQ(h.data<float>()[1], 4.0f);
    std::ostringstream os;
    os << h;
    EXPECT_FALSE(os.str().empty());
    return std::vector<array>{sum(multiply(h, xs[0]))}; // sum x^3
  };
  array x = array({1.0f, 2.0f});
  auto [outs, grads] = vjp(f, {x}, {array(1.0f)});
  expect_close(grads[0], {2}, {3.0, 12.0});
  auto [outs2, tangents] = jvp(f, {x}, {array({1.0f, 1.0f})});
  expect_close(tangents[0], {}, {15.0});
  // The same function evaluated outside a transform still detaches (no graph kept alive).
  array h = multiply(x, x);
  eval(h);
  EXPECT_FALSE(h.has_primitive());
}

TEST(MlxConformance, ContainerReuseDoesNotStackCopiesAndGradOfGradStaysAttached) {
  // MLX's "container reuse" case: a function that stores its tracer in the caller's container
  // hands that tracer back on the next call; it must not gain one Copy per call.
  array x = ones({8});
  std::vector<array> container = {array(1.0f)};
  auto g = grad([&container](const std::vector<array>& in) {
    container[0] = in[0];
    return sum(in[1]);
  });
  for (int i = 0; i < 4; ++i) eval(g({container[0], x}));
  int copies = 0;
  for (array a = container[0]; a.has_primitive(); a = a.inputs()[0]) {
    copies += typeid(a.primitive()) == typeid(Copy);
    if (a.inputs().empty()) break;
  }
  EXPECT_EQ(copies, 1);
  // The tracer of an enclosing grad is a pending Copy too, but live: grad(grad(exp)) = exp.
  auto expfn = [](const array& v) { return exp(v); };
  EXPECT_NEAR(grad(grad(expfn))(array(1.0f)).item<float>(), std::exp(1.0f), 1e-5);
  EXPECT_NEAR(grad(grad(grad(expfn)))(array(0.5f)).item<float>(), std::exp(0.5f), 1e-5);
}

// ---------------------------------------------------------------------------------------
// 2. A C++ double makes float32, as MLX's TypeToDtype<double>.

TEST(MlxConformance, DoubleScalarsAreFloat32) {
  EXPECT_EQ(array(0.5).dtype(), float32);
  EXPECT_EQ(array({1.0, 2.0}).dtype(), float32);
  EXPECT_EQ(array({1.0, 2.0, 3.0, 4.0}, {2, 2}).dtype(), float32);
  EXPECT_EQ(full({2}, 1.0).dtype(), float32);
  array x = array({1.0f, 2.0f});
  EXPECT_EQ((x + 1.0).dtype(), float32);
  EXPECT_EQ((x * 0.5).dtype(), float32);
  EXPECT_EQ((array({1, 2}) * 0.5).dtype(), float32);
  expect_close(x * 0.5, {2}, {0.5, 1.0});
  // float64 stays available by asking for it, and values round-trip through item<double>.
  array d(0.1, float64);
  EXPECT_EQ(d.dtype(), float64);
  EXPECT_EQ(d.item<double>(), 0.1);
  EXPECT_EQ((array(1.0, float64) * 0.5).dtype(), float64);
  EXPECT_EQ(array(0.1).item<float>(), 0.1f);
}

// ---------------------------------------------------------------------------------------
// 3. Overload sets: searchsorted's side is a string, count_nonzero's bool is keepdims.

template <typename T>
concept SearchsortedTakes =
    requires(const array& a, T side) { searchsorted(a, a, side); };

TEST(MlxConformance, SearchsortedSideIsAString) {
  static_assert(SearchsortedTakes<const char*>);
  static_assert(SearchsortedTakes<std::string>);
  static_assert(!SearchsortedTakes<bool>, "a bool side must not compile (it meant right)");
  static_assert(!SearchsortedTakes<int>);
  array a = array({1, 2, 2, 3});
  array v = array({2});
  EXPECT_EQ(searchsorted(a, v, "left").item<uint32_t>(), 1u);
  EXPECT_EQ(searchsorted(a, v).item<uint32_t>(), 1u);
  EXPECT_EQ(searchsorted(a, v, "right").item<uint32_t>(), 3u);
  EXPECT_EQ(searchsorted(a, v, std::string("right")).item<uint32_t>(), 3u);
  expect_throws_naming<std::invalid_argument>([&] { searchsorted(a, v, "middle"); }, "[searchsorted]");
}

TEST(MlxConformance, CountNonzeroBoolIsKeepdims) {
  array a = array({1, 0, 2, 0, 0, 3}, {2, 3});
  array k = count_nonzero(a, true);
  EXPECT_EQ(k.shape(), (Shape{1, 1}));
  EXPECT_EQ(k.item<int>(), 3);
  EXPECT_EQ(count_nonzero(a, false).shape(), Shape{});
  expect_close(count_nonzero(a, 1), {2}, {2, 1});
}

// ---------------------------------------------------------------------------------------
// 4. masked_scatter aligns a lower-rank mask with the leading axes.

TEST(MlxConformance, MaskedScatterAlignsLeadingAxes) {
  array self = zeros({2, 3}, int32);
  array mask = array({false, true});
  array src = array({7, 8, 9});
  expect_close(masked_scatter(self, mask, src), {2, 3}, {0, 0, 0, 7, 8, 9});
  // A full-rank mask is unchanged by the rule.
  array m2 = array({true, false, true, false, false, true}, {2, 3});
  expect_close(masked_scatter(self, m2, src), {2, 3}, {7, 0, 8, 0, 0, 9});
  expect_throws_naming<std::invalid_argument>(
      [&] { masked_scatter(self, array({true, false, true}), src); }, "[masked_scatter]");
}

// ---------------------------------------------------------------------------------------
// 6. Float to unsigned casts wrap modulo 2^bits; signed targets clamp; NaN gives 0.

TEST(MlxConformance, FloatToUnsignedWraps) {
  array f = array({-1.0f, 256.0f, 300.0f, -255.5f, 255.9f});
  expect_close(astype(f, uint8), {5}, {255, 0, 44, 1, 255}, 0, 0);
  EXPECT_EQ(astype(array(-1.0f), uint32).item<uint32_t>(), 4294967295u);
  EXPECT_EQ(astype(array(-1.0f), uint16).item<uint16_t>(), 65535u);
  EXPECT_EQ(astype(array(-2.0, float64), uint64).item<uint64_t>(), UINT64_MAX - 1);
  EXPECT_EQ(astype(array(NAN), uint8).item<uint8_t>(), 0u);
  EXPECT_EQ(astype(array(1e10f), int32).item<int32_t>(), INT32_MAX);
  EXPECT_EQ(astype(array(-3.7f), int8).item<int8_t>(), -3);
}

// ---------------------------------------------------------------------------------------
// MLX API added for the suite and MLX's examples.

TEST(MlxConformance, FlipLinspaceFullLike) {
  array x = array({0, 1, 2, 3, 4, 5}, {2, 3});
  expect_close(flip(x, 0), {2, 3}, {3, 4, 5, 0, 1, 2}, 0, 0);
  expect_close(flip(x, -1), {2, 3}, {2, 1, 0, 5, 4, 3}, 0, 0);
  EXPECT_THROW(flip(x, 2), std::invalid_argument);
  expect_close(linspace(2, 3, 4, false), {4}, {2.0, 2.25, 2.5, 2.75});
  expect_close(linspace(0, 10, 5, true, int32), {5}, {0, 2, 5, 7, 10}, 0, 0);
  EXPECT_EQ(linspace(0, 1, 3).dtype(), float32);
  array b = array({1, 2, 3}, int16);
  EXPECT_EQ(full_like(b, 2.5).dtype(), int16);
  EXPECT_EQ(full_like(b, 2.5, float32).dtype(), float32);
  expect_close(full_like(b, 2.5, float32), {3}, {2.5, 2.5, 2.5});
  EXPECT_EQ(zeros_like(b, float16).dtype(), float16);
  EXPECT_EQ(ones_like(b, bool_).dtype(), bool_);
}

TEST(MlxConformance, PadReflectSymmetricEdgeMatchNumPy) {
  array x = array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  expect_close(pad(x, {{7, 3}}, array(0.0f), "reflect"), {15},
      {2, 3, 4, 5, 4, 3, 2, 1, 2, 3, 4, 5, 4, 3, 2});
  expect_close(pad(x, {{7, 3}}, array(0.0f), "symmetric"), {15},
      {4, 5, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 5, 4, 3});
  expect_close(pad(x, {{2, 9}}, array(0.0f), "edge"), {16},
      {1, 1, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5});
  array m = reshape(arange(6.0f), {2, 3});
  expect_close(pad(m, {{1, 2}, {3, 1}}, array(0.0f), "reflect"), {5, 7},
      {4, 5, 4, 3, 4, 5, 4, 1, 2, 1, 0, 1, 2, 1, 4, 5, 4, 3, 4, 5, 4,
       1, 2, 1, 0, 1, 2, 1, 4, 5, 4, 3, 4, 5, 4});
  EXPECT_THROW(pad(x, {{1, 1}}, array(0.0f), "wrap"), std::invalid_argument);
  const int imax = 2147483647;
  EXPECT_THROW(pad(zeros({8}), {0}, Shape{imax}, Shape{imax}), std::overflow_error);
  // The gradient of a reflect pad folds the mirrored cotangents back.
  auto g = grad([](const array& a) { return sum(pad(a, {{2, 0}}, array(0.0f), "reflect")); })(x);
  expect_close(g, {5}, {1, 2, 2, 1, 1});
}

// Flattening or inferring a dimension past int32 throws instead of wrapping to a negative
// extent (the lazy graph is never evaluated, so nothing is allocated). MLX #2681, #3327.
TEST(MlxConformance, ShapeProductsPastInt32Throw) {
  array a = zeros({1 << 30, 2});
  EXPECT_THROW(flatten(a), std::overflow_error);
  EXPECT_THROW(reshape(a, {-1}), std::overflow_error);
  EXPECT_THROW(take(a, array({0u}, uint32)), std::overflow_error);
  EXPECT_THROW(sort(a), std::overflow_error);
  EXPECT_THROW(cumsum(a), std::overflow_error);
  EXPECT_EQ(flatten(a, 0, 0).shape(), (Shape{1 << 30, 2}));
  EXPECT_EQ(reshape(a, {-1, 4}).shape(), (Shape{1 << 29, 4}));
}

TEST(MlxConformance, WindowsMatchNumPy) {
  expect_close(hanning(7), {7}, {0.0, 0.25, 0.75, 1.0, 0.75, 0.25, 0.0}, 1e-6, 1e-6);
  expect_close(hamming(6), {6},
      {0.08, 0.3978521825875242, 0.912147817412476, 0.912147817412476, 0.3978521825875242, 0.08},
      1e-6, 1e-6);
  expect_close(bartlett(5), {5}, {0.0, 0.5, 1.0, 0.5, 0.0}, 1e-6, 1e-6);
  expect_close(blackman(6), {6},
      {0.0, 0.2007701432625305, 0.8492298567374695, 0.8492298567374695, 0.2007701432625305, 0.0},
      1e-6, 1e-6);
  EXPECT_EQ(hanning(0).size(), 0u);
  expect_close(hamming(1), {1}, {1.0});
}

TEST(MlxConformance, ArrayApiOps) {
  expect_close(trunc(array({-2.7f, -0.5f, 0.0f, 0.5f, 2.7f})), {5}, {-2, 0, 0, 0, 2});
  EXPECT_EQ(trunc(array({3, -4})).dtype(), int32);
  EXPECT_THROW(positive(array(true)), std::invalid_argument);
  expect_close(positive(array({-1.5f, 2.0f})), {2}, {-1.5, 2.0});
  expect_close(logical_xor(array({true, true, false, false}), array({true, false, true, false})),
      {4}, {0, 1, 1, 0}, 0, 0);
  array a = array({1, 2, 3, 4, 5, 6}, {2, 3});
  array b = array({7, 8, 9, 10, 11, 12}, {2, 3});
  expect_close(vecdot(a, b), {2}, {50, 167}, 0, 0);
  expect_close(vecdot(a, b, 0), {3}, {47, 71, 99}, 0, 0);
  array c = array({complex64_t{1, 2}, complex64_t{3, 4}});
  array d = array({complex64_t{5, 6}, complex64_t{7, 8}});
  complex64_t v = vecdot(c, d).item<complex64_t>(); // np.vdot: 70 - 8j
  EXPECT_FLOAT_EQ(v.real(), 70.0f);
  EXPECT_FLOAT_EQ(v.imag(), -8.0f);
  EXPECT_THROW(vecdot(array(1), array({1})), std::invalid_argument);
  array e = zeros({2, 3, 4});
  EXPECT_EQ(number_of_elements(e, {0, 2}, false).item<int>(), 8);
  EXPECT_EQ(number_of_elements(e, {0, 2}, true).item<int>(), 3);
  EXPECT_EQ(number_of_elements(e, {1}, false, float32).dtype(), float32);
  array s = cumsum(array({100, 100, 100}, int8), 0, false, true, int32);
  EXPECT_EQ(s.dtype(), int32);
  expect_close(s, {3}, {100, 200, 300}, 0, 0);
}

TEST(MlxConformance, UtilsFinfoIinfoResultTypeVersion) {
  EXPECT_EQ(finfo(float16).max, 65504.0);
  EXPECT_EQ(finfo(complex64).dtype, float32);
  EXPECT_EQ(finfo(bfloat16).smallest_normal, std::ldexp(1.0, -126));
  EXPECT_EQ(finfo(float32).eps, static_cast<double>(std::numeric_limits<float>::epsilon()));
  EXPECT_THROW(finfo{int32}, std::invalid_argument);
  EXPECT_EQ(iinfo(uint64).max, UINT64_MAX);
  EXPECT_EQ(iinfo(int8).min, -128);
  EXPECT_THROW(iinfo{float32}, std::invalid_argument);
  EXPECT_EQ(result_type(array(1), array(1.0f)), float32);
  EXPECT_EQ(result_type(array(true), array(1, int8), array(1, uint8)), int16);
  EXPECT_EQ(normalize_axis_index(-1, 3), 2);
  expect_throws_naming<std::invalid_argument>([] { normalize_axis_index(3, 3, "sort"); }, "[sort]");
  std::ostringstream v;
  v << NUVEC_VERSION_MAJOR << "." << NUVEC_VERSION_MINOR << "." << NUVEC_VERSION_PATCH;
  EXPECT_EQ(version(), v.str());
  EXPECT_EQ(float32.size(), 4);
  EXPECT_EQ(int16.val(), Dtype::Val::int16);
  complex64_t z{1.5f, 2.0f};
  float re = z; // MLX's implicit conversion to the real part
  EXPECT_EQ(re, 1.5f);
}

TEST(MlxConformance, FftShiftAxesAndNormF) {
  array x = reshape(arange(6.0f), {2, 3});
  expect_close(fft::fftshift(x, {1}), {2, 3}, {2, 0, 1, 5, 3, 4});
  expect_close(fft::ifftshift(x, {1}), {2, 3}, {1, 2, 0, 4, 5, 3});
  EXPECT_THROW(fft::fftshift(x, {2}), std::invalid_argument);
  EXPECT_NEAR(linalg::norm(x, "f").item<float>(), std::sqrt(55.0f), 1e-5);
}

TEST(MlxConformance, VariadicAsyncEval) {
  array a = exp(array({0.0f, 1.0f}));
  array b = add(a, a);
  async_eval(a, b);
  b.wait();
  expect_close(b, {2}, {2.0, 2.0 * std::exp(1.0)});
}

TEST(MlxConformance, ComplexLogAddExp) {
  // MLX accepts complex logaddexp: the lexicographic max plus log(1 + e^(min - max)).
  const float inf = std::numeric_limits<float>::infinity();
  auto one = logaddexp(array(complex64_t{1, 1}), array(complex64_t{-inf, -inf}));
  EXPECT_EQ(one.dtype(), complex64);
  EXPECT_EQ(one.item<complex64_t>(), (complex64_t{1, 1}));
  auto a = array({complex64_t{0.5f, 0.2f}, complex64_t{-1.0f, 2.0f}, complex64_t{3.0f, -0.7f}});
  auto b = array({complex64_t{0.1f, -0.3f}, complex64_t{2.0f, 0.5f}, complex64_t{3.0f, 0.4f}});
  auto got = logaddexp(a, b);
  auto want = log(add(exp(a), exp(b)));
  EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6).item<bool>()) << got << want;
  // Its derivative, e^(a - out), in reverse mode on conjugated primals (MLX's convention).
  auto f = [&](const array& x) { return logaddexp(x, b); };
  auto g = vjp(f, a, ones({3}, complex64)).second;
  EXPECT_TRUE(allclose(g, conjugate(divide(exp(a), add(exp(a), exp(b)))), 1e-5, 1e-6).item<bool>());
}

TEST(MlxConformance, RollSumsShiftsIn64Bits) {
  // NumPy's roll: np.roll([1, 2, 3, 4], [2**31 - 1, 2**31 - 1]) rolls by (2^32 - 2) mod 4 = 2.
  // MLX throws std::overflow_error here (docs/MLX-DIFFERENCES.md); INT_MIN stays the identity.
  const int imax = 2147483647;
  array x = array({1, 2, 3, 4});
  EXPECT_TRUE(array_equal(roll(x, Shape{imax, imax}), array({3, 4, 1, 2})).item<bool>());
  EXPECT_TRUE(array_equal(roll(x, Shape{imax, imax}, 0), array({3, 4, 1, 2})).item<bool>());
  EXPECT_TRUE(array_equal(roll(x, -imax - 1), x).item<bool>());
  EXPECT_THROW(tile(zeros({2}), {imax}), std::overflow_error);
}

// ---------------------------------------------------------------------------------------
// From MLX's test_ops.py and test_autograd.py, translated by a helper (seventeenth session):
// values NumPy 1.24 printed for the same calls.

TEST(MlxConformance, ComplexVarianceIsRealAsNumPy) {
  // np.var / np.std of complex64: the mean of |x - mean|², float32 (x² would be complex).
  array c = array({complex64_t{1, 2}, complex64_t{-3, -4}, complex64_t{0.5f, -0.25f}});
  EXPECT_EQ(var(c).dtype(), float32);
  EXPECT_NEAR(var(c).item<float>(), 9.291667f, 1e-5);
  EXPECT_NEAR(nuvec::std(c).item<float>(), 3.0482235f, 1e-5);
}

TEST(MlxConformance, JoinedAxesPastInt32Throw) {
  // The joined size was summed in int32 and wrapped: 4 · 2^30 gave shape (0,), then a crash.
  const std::vector<array> parts(4, zeros({1 << 30}, bool_));
  EXPECT_THROW(concatenate(parts, 0), std::overflow_error);
  EXPECT_THROW(repeat(zeros({1 << 30}, bool_), 4, 0), std::overflow_error);
  EXPECT_THROW(kron(zeros({1 << 16}, bool_), zeros({1 << 16}, bool_)), std::overflow_error);
}

TEST(MlxConformance, PadReflectsInNumPysRounds) {
  // A pad wider than the axis is filled in rounds that mirror what is there so far, so it
  // is not periodic when the two sides differ (np.pad(np.arange(n), (lo, hi), mode)).
  auto padded = [](int n, int lo, int hi, const char* mode) {
    return pad(arange(n, int32), {{lo, hi}}, array(0), mode);
  };
  auto expect = [](const array& got, std::vector<int> want) {
    EXPECT_TRUE(array_equal(got, array(want.begin(), {static_cast<int>(want.size())}, int32)).item<bool>()) << got;
  };
  expect(padded(3, 9, 1, "reflect"), {1, 2, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1});
  expect(padded(4, 2, 11, "symmetric"), {1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1});
  expect(padded(2, 7, 3, "reflect"), {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0});
}

TEST(MlxConformance, ComplexPowerLog1pAndRound) {
  // NumPy: 0j ** 0j is 1, 0j ** 2 is 0 (exp(w · log 0) gave NaN); log1p and round take
  // complex input (MLX and NumPy), log1p keeping the digits of small values.
  EXPECT_EQ(power(array(complex64_t{0, 0}), array(complex64_t{0, 0})).item<complex64_t>(), (complex64_t{1, 0}));
  EXPECT_EQ(power(array(complex64_t{0, 0}), array(complex64_t{2, 0})).item<complex64_t>(), (complex64_t{0, 0}));
  const complex64_t a = log1p(array(complex64_t{0.5f, 1.0f})).item<complex64_t>();
  EXPECT_NEAR(a.real(), 0.5893275f, 1e-6);
  EXPECT_NEAR(a.imag(), 0.5880026f, 1e-6);
  // Small z against NumPy's complex128 answer (its complex64 log1p, log(1 + z) in float32,
  // gives 1.001353e-05: four digits).
  const complex64_t small = log1p(array(complex64_t{1e-5f, 2e-5f})).item<complex64_t>();
  EXPECT_NEAR(small.real(), 1.0000149743732775e-05, 1e-11);
  EXPECT_NEAR(small.imag(), 1.9999799494101e-05, 1e-11);
  const array r = round(array({complex64_t{22.2f, 3.6f}, complex64_t{18.5f, 98.2f}}));
  EXPECT_TRUE(array_equal(r, array({complex64_t{22, 4}, complex64_t{18, 98}})).item<bool>()) << r;
}

TEST(MlxConformance, ValueErrorsAndIntegerLinspace) {
  // MLX raises ValueError (std::invalid_argument) here, not an axis error.
  EXPECT_THROW(softmax(array(1.0f), -1), std::invalid_argument);
  EXPECT_THROW(median(array({0, 1, 2, 3, 4}), {0, 1}), std::invalid_argument);
  // NumPy floors linspace's values for integer dtypes ([-5, -2, 1, 5]); a cast truncated.
  EXPECT_TRUE(array_equal(linspace(-5.0, 5.0, 4, true, int32), array({-5, -2, 1, 5})).item<bool>());
}

TEST(MlxConformance, ComparisonTangentsTakeTheTangentsDtype) {
  // jvp of a comparison: zeros of the input tangent's dtype, not bool (MLX issue 3081).
  auto t = jvp([](const array& x) { return greater(x, array(0.0f)); }, array({1.0f, -2.0f, 3.0f}), ones({3})).second;
  EXPECT_EQ(t.dtype(), float32);
  EXPECT_EQ(sum(abs(t)).item<float>(), 0.0f);
}
