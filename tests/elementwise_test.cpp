// nuvec tests: the element-wise ops (unary math, binary arithmetic, comparisons, logical and
// bitwise ops, where, divmod, tests and clip/isclose) against float64 references written here
// with <cmath> and NumPy's semantics, on fresh random inputs; the promotion table; errors;
// derivatives and batching through tests/checker.h, driven by tables of op records.
#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <string>

#include "checker.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using UnaryFn = std::function<array(const array&)>;
using BinaryFn = std::function<array(const array&, const array&)>;

// ---- references -------------------------------------------------------------------------

// Row-major strides of a shape.
std::vector<int64_t> dense_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

Shape ref_broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The flat index into `in` (row-major) of output position `flat` of `out` under broadcasting.
int64_t source_index(const Shape& in, const Shape& out, int64_t flat) {
  auto ost = dense_strides(out), ist = dense_strides(in);
  int64_t idx = 0;
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t coord = (flat / ost[d]) % out[d];
    if (d >= off && in[d - off] != 1) idx += coord * ist[d - off];
  }
  return idx;
}

// f applied to a and b broadcast together, in float64.
std::vector<double> binary_ref(const array& a, const array& b,
                               const std::function<double(double, double)>& f, Shape* shape) {
  *shape = ref_broadcast(a.shape(), b.shape());
  auto va = to_vector(a), vb = to_vector(b);
  int64_t n = 1;
  for (auto d : *shape) n *= d;
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = f(va[source_index(a.shape(), *shape, i)], vb[source_index(b.shape(), *shape, i)]);
  }
  return out;
}

std::vector<double> unary_ref(const array& a, const std::function<double(double)>& f) {
  auto v = to_vector(a);
  for (auto& x : v) x = f(x);
  return v;
}

// Relative tolerance of a float dtype's results (a few ulps; half types carry ~3 digits).
double tol(Dtype t) {
  if (t == float64) return 1e-12;
  if (t == float16) return 4e-3;
  if (t == bfloat16) return 2e-2;
  return 3e-6;
}

array from(const std::vector<double>& v, Dtype t) {
  return astype(array(v.begin(), Shape{static_cast<int>(v.size())}, float64), t);
}

double numpy_floor_div(double a, double b) {
  return std::floor(a / b);
}
double numpy_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// ---- op tables --------------------------------------------------------------------------

struct UnaryCase {
  const char* name;
  UnaryFn fn;
  std::function<double(double)> ref;
  double lo, hi; // the input domain, away from singularities
  bool differentiable = true;
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"abs", [](const array& x) { return abs(x); }, [](double x) { return std::fabs(x); }, -3, 3},
      {"negative", [](const array& x) { return negative(x); }, [](double x) { return -x; }, -3, 3},
      {"square", [](const array& x) { return square(x); }, [](double x) { return x * x; }, -3, 3},
      {"sqrt", [](const array& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.2, 4},
      {"rsqrt", [](const array& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.2, 4},
      {"reciprocal", [](const array& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, 0.5, 3},
      {"exp", [](const array& x) { return exp(x); }, [](double x) { return std::exp(x); }, -5, 5},
      {"expm1", [](const array& x) { return expm1(x); }, [](double x) { return std::expm1(x); }, -2, 2},
      {"log", [](const array& x) { return log(x); }, [](double x) { return std::log(x); }, 0.5, 3},
      {"log2", [](const array& x) { return log2(x); }, [](double x) { return std::log2(x); }, 0.5, 3},
      {"log10", [](const array& x) { return log10(x); }, [](double x) { return std::log10(x); }, 0.5, 3},
      {"log1p", [](const array& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, -0.5, 3},
      {"sin", [](const array& x) { return sin(x); }, [](double x) { return std::sin(x); }, -3, 3},
      {"cos", [](const array& x) { return cos(x); }, [](double x) { return std::cos(x); }, -3, 3},
      {"tan", [](const array& x) { return tan(x); }, [](double x) { return std::tan(x); }, -1.2, 1.2},
      {"arcsin", [](const array& x) { return arcsin(x); }, [](double x) { return std::asin(x); }, -0.9, 0.9},
      {"arccos", [](const array& x) { return arccos(x); }, [](double x) { return std::acos(x); }, -0.9, 0.9},
      {"arctan", [](const array& x) { return arctan(x); }, [](double x) { return std::atan(x); }, -3, 3},
      {"sinh", [](const array& x) { return sinh(x); }, [](double x) { return std::sinh(x); }, -2, 2},
      {"cosh", [](const array& x) { return cosh(x); }, [](double x) { return std::cosh(x); }, -2, 2},
      {"tanh", [](const array& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -2, 2},
      {"arcsinh", [](const array& x) { return arcsinh(x); }, [](double x) { return std::asinh(x); }, -3, 3},
      {"arccosh", [](const array& x) { return arccosh(x); }, [](double x) { return std::acosh(x); }, 1.2, 4},
      {"arctanh", [](const array& x) { return arctanh(x); }, [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {"sigmoid", [](const array& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -5, 5},
      {"erf", [](const array& x) { return erf(x); }, [](double x) { return std::erf(x); }, -2, 2},
      {"erfinv", [](const array& x) { return erfinv(x); }, nullptr, -0.9, 0.9},
      {"degrees", [](const array& x) { return degrees(x); }, [](double x) { return x * 180 / std::numbers::pi; }, -3, 3},
      {"radians", [](const array& x) { return radians(x); }, [](double x) { return x * std::numbers::pi / 180; }, -200, 200},
      {"sign", [](const array& x) { return sign(x); }, [](double x) { return double((x > 0) - (x < 0)); }, -3, 3, false},
      {"floor", [](const array& x) { return floor(x); }, [](double x) { return std::floor(x); }, -5, 5, false},
      {"ceil", [](const array& x) { return ceil(x); }, [](double x) { return std::ceil(x); }, -5, 5, false},
      {"round", [](const array& x) { return round(x); }, [](double x) { return std::nearbyint(x); }, -5, 5, false},
  };
  return cases;
}

struct BinaryCase {
  const char* name;
  BinaryFn fn;
  std::function<double(double, double)> ref;
  double alo, ahi, blo, bhi;
  bool differentiable = true;
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](const array& a, const array& b) { return add(a, b); }, [](double a, double b) { return a + b; }, -3, 3, -3, 3},
      {"subtract", [](const array& a, const array& b) { return subtract(a, b); }, [](double a, double b) { return a - b; }, -3, 3, -3, 3},
      {"multiply", [](const array& a, const array& b) { return multiply(a, b); }, [](double a, double b) { return a * b; }, -3, 3, -3, 3},
      {"divide", [](const array& a, const array& b) { return divide(a, b); }, [](double a, double b) { return a / b; }, -3, 3, 0.5, 3},
      {"power", [](const array& a, const array& b) { return power(a, b); }, [](double a, double b) { return std::pow(a, b); }, 0.5, 2, -2, 2},
      {"maximum", [](const array& a, const array& b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); }, -3, 3, -3, 3},
      {"minimum", [](const array& a, const array& b) { return minimum(a, b); }, [](double a, double b) { return std::min(a, b); }, -3, 3, -3, 3},
      {"logaddexp", [](const array& a, const array& b) { return logaddexp(a, b); }, [](double a, double b) { return std::log(std::exp(a) + std::exp(b)); }, -3, 3, -3, 3},
      {"arctan2", [](const array& a, const array& b) { return arctan2(a, b); }, [](double a, double b) { return std::atan2(a, b); }, -3, 3, 0.5, 3},
      {"remainder", [](const array& a, const array& b) { return remainder(a, b); }, numpy_mod, -5, 5, 0.7, 2},
      {"floor_divide", [](const array& a, const array& b) { return floor_divide(a, b); }, numpy_floor_div, -5, 5, 0.7, 2, false},
  };
  return cases;
}

const Dtype kFloatTypes[] = {float32, float64, float16, bfloat16};

// ---- unary ------------------------------------------------------------------------------

TEST(Unary, ValuesOverFloatDtypesAndLayouts) {
  for (const auto& c : unary_cases()) {
    if (!c.ref) continue;
    for (Dtype t : kFloatTypes) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(t));
      array x = uniform({3, 4, 5}, c.lo, c.hi, t);
      array y = c.fn(x);
      EXPECT_EQ(y.dtype(), t);
      expect_close(y, x.shape(), unary_ref(x, c.ref), tol(t), tol(t));
      // Transposed and broadcast inputs.
      array xt = transpose(x, {2, 0, 1});
      expect_close(c.fn(xt), xt.shape(), unary_ref(xt, c.ref), tol(t), tol(t));
      array xb = broadcast_to(uniform({1, 5}, c.lo, c.hi, t), {4, 5});
      expect_close(c.fn(xb), xb.shape(), unary_ref(xb, c.ref), tol(t), tol(t));
    }
  }
}

TEST(Unary, ErfInvInvertsErf) {
  for (Dtype t : {float32, float64}) {
    array x = uniform({200}, -0.999, 0.999, t);
    auto v = to_vector(x);
    auto y = to_vector(erfinv(x));
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_NEAR(std::erf(y[i]), v[i], t == float64 ? 1e-14 : 1e-6) << v[i];
    }
  }
  expect_close(erfinv(array({-1.0f, 1.0f, 0.0f, 2.0f})), {4}, {-kInf, kInf, 0.0, kNaN});
}

TEST(Unary, IntegerInputsComputeInFloat32) {
  array xi = randint({10}, 1, 9, int32);
  for (const auto& c : unary_cases()) {
    if (!c.ref || std::string(c.name) == "abs" || std::string(c.name) == "negative" ||
        std::string(c.name) == "square" || std::string(c.name) == "sign" ||
        std::string(c.name) == "floor" || std::string(c.name) == "ceil" ||
        std::string(c.name) == "round") {
      continue;
    }
    SCOPED_TRACE(c.name);
    array y = c.fn(xi);
    EXPECT_EQ(y.dtype(), float32);
    auto v = unary_ref(xi, c.ref);
    // Inputs outside the domain give NaN in both.
    expect_close(y, xi.shape(), v, 3e-6, 3e-6);
  }
  // Integer-preserving ops keep the dtype and are exact.
  for (Dtype t : {int32, int64, int8}) {
    array x = randint({20}, -9, 9, t);
    EXPECT_EQ(abs(x).dtype(), t);
    expect_close(abs(x), {20}, unary_ref(x, [](double v) { return std::fabs(v); }), 0, 0);
    expect_close(negative(x), {20}, unary_ref(x, [](double v) { return -v; }), 0, 0);
    expect_close(square(x), {20}, unary_ref(x, [](double v) { return v * v; }), 0, 0);
    expect_close(sign(x), {20}, unary_ref(x, [](double v) { return double((v > 0) - (v < 0)); }), 0, 0);
    EXPECT_EQ(floor(x).dtype(), t);
    expect_close(round(x), {20}, to_vector(x), 0, 0);
  }
  expect_close(abs(array({200, 3}, uint8)), {2}, {200, 3}, 0, 0);
}

TEST(Unary, NanInfEdgeCases) {
  array x = array({0.0f, -0.0f, 1.0f, -1.0f, float(kInf), float(-kInf), float(kNaN)});
  expect_close(exp(x), {7}, {1, 1, std::exp(1.0), std::exp(-1.0), kInf, 0, kNaN});
  expect_close(log(x), {7}, {-kInf, -kInf, 0, kNaN, kInf, kNaN, kNaN});
  expect_close(sqrt(x), {7}, {0, 0, 1, kNaN, kInf, kNaN, kNaN});
  expect_close(tanh(x), {7}, {0, 0, std::tanh(1.0), -std::tanh(1.0), 1, -1, kNaN});
  expect_close(sigmoid(x), {7}, {0.5, 0.5, 1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(1.0)), 1, 0, kNaN});
  // exp(-100) is a float32 subnormal: compare to its spacing.
  expect_close(sigmoid(array({-100.0f, 100.0f})), {2}, {std::exp(-100.0), 1}, 1e-5, 3e-45);
  expect_close(sign(x), {7}, {0, 0, 1, -1, 1, -1, kNaN});
  expect_close(abs(x), {7}, {0, 0, 1, 1, kInf, kInf, kNaN});
  expect_close(floor(x), {7}, {0, 0, 1, -1, kInf, -kInf, kNaN});
  // Tests.
  expect_close(isnan(x), {7}, {0, 0, 0, 0, 0, 0, 1});
  expect_close(isinf(x), {7}, {0, 0, 0, 0, 1, 1, 0});
  expect_close(isfinite(x), {7}, {1, 1, 1, 1, 0, 0, 0});
  expect_close(isposinf(x), {7}, {0, 0, 0, 0, 1, 0, 0});
  expect_close(isneginf(x), {7}, {0, 0, 0, 0, 0, 1, 0});
  EXPECT_EQ(isnan(x).dtype(), bool_);
  array xi = array({1, 2}, int32);
  expect_close(isnan(xi), {2}, {0, 0});
  expect_close(isinf(xi), {2}, {0, 0});
  expect_close(isfinite(xi), {2}, {1, 1});
  // nan_to_num, with defaults and given values, per dtype.
  for (Dtype t : {float32, float64, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(t));
    array xt = astype(x, t);
    double big = t == float16 ? 65504.0 : t == float64 ? std::numeric_limits<double>::max()
                 : t == bfloat16 ? 3.3895313892515355e38 : std::numeric_limits<float>::max();
    expect_close(nan_to_num(xt), {7}, {0, 0, 1, -1, big, -big, 0}, 1e-6, 0);
    expect_close(nan_to_num(xt, 5.0f, 7.0f, -9.0f), {7}, {0, 0, 1, -1, 7, -9, 5});
  }
}

// exp's float32 polynomial: at most 2 ulp from the correctly rounded result over the whole
// range, including overflow, underflow into subnormals, infinities and NaN. The array is
// large enough to take the two-thread path.
TEST(Unary, ExpFloat32WithinTwoUlp) {
  const int n = (1 << 21) + 37;
  std::vector<float> v(n);
  std::uniform_real_distribution<double> dist(-110.0, 95.0);
  for (auto& x : v) x = static_cast<float>(dist(rng()));
  const float specials[] = {0.0f, -0.0f, 88.72283f, 88.72284f, 89.0f, -87.33654f, -103.97f,
                            -103.98f, -104.0f, -149.0f, 1e-30f, -1e-30f, 0.5f, 1.0f, -1.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f};
  for (size_t i = 0; i < std::size(specials); ++i) v[i] = specials[i];
  array x(v.begin(), Shape{n}, float32);
  array y = exp(x);
  eval(y);
  const float* got = y.data<float>();
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    double ref = std::exp(static_cast<double>(v[i]));
    if (std::isnan(v[i])) {
      ASSERT_TRUE(std::isnan(got[i]));
      continue;
    }
    float rounded = static_cast<float>(ref);
    if (std::isinf(rounded)) {
      ASSERT_EQ(got[i], rounded) << "x = " << v[i];
      continue;
    }
    float next = std::nextafter(rounded, std::numeric_limits<float>::infinity());
    double ulp = static_cast<double>(next) - static_cast<double>(rounded);
    double err = std::abs(static_cast<double>(got[i]) - ref) / ulp;
    worst = std::max(worst, err);
    ASSERT_LE(err, 2.0) << "x = " << v[i] << " got " << got[i] << " want " << ref;
  }
  std::cerr << "[exp float32] worst error " << worst << " ulp\n";
}

TEST(Unary, RoundHalfToEvenAndDecimals) {
  expect_close(round(array({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 3.7f})), {6}, {0, 2, 2, -0.0, -2, 4}, 0, 0);
  array x = uniform({50}, -100, 100, float64);
  expect_close(round(x, 2), {50}, unary_ref(x, [](double v) { return std::nearbyint(v * 100) / 100; }), 1e-14, 1e-14);
  expect_close(round(x, -1), {50}, unary_ref(x, [](double v) { return std::nearbyint(v / 10) * 10; }), 1e-14, 1e-14);
  expect_close(round(array({1234, -1250}, int32), -2), {2}, {1200, -1200}, 0, 0);
  EXPECT_EQ(round(array({1234}, int32), -2).dtype(), int32);
  // Negative decimals divide by a whole power of ten: multiplying by the inexact 1e-9 and
  // dividing it back lands just below 2e9, which the cast to int32 truncated to 1999999999.
  array big = array({2147483647, 1999999999, -2147483647 - 1, 1500000001}, int32);
  expect_close(round(big, -9), {4}, unary_ref(big, [](double v) { return std::nearbyint(v / 1e9) * 1e9; }), 0, 0);
  array xl = uniform({200}, -1e12, 1e12, float64);
  expect_close(round(xl, -3), {200}, unary_ref(xl, [](double v) { return std::nearbyint(v / 1e3) * 1e3; }), 0, 0);
}

TEST(Unary, LogicalNotAndBitwiseInvert) {
  expect_close(logical_not(array({0.0f, 2.0f, -1.0f})), {3}, {1, 0, 0});
  EXPECT_EQ(logical_not(array({1, 0}, int32)).dtype(), bool_);
  expect_close(bitwise_invert(array({0, 5, -6}, int32)), {3}, {-1, -6, 5}, 0, 0);
  expect_close(bitwise_invert(array({0, 5}, uint8)), {2}, {255, 250}, 0, 0);
  array b = astype(array({1, 0}, int32), bool_);
  EXPECT_EQ(bitwise_invert(b).dtype(), bool_);
  expect_close(bitwise_invert(b), {2}, {0, 1});
  expect_close(!b, {2}, {0, 1});
  expect_close(~array({1}, int8), {1}, {-2});
}

TEST(Unary, Complex) {
  std::vector<std::complex<float>> zs = {{1, 2}, {-0.5f, 0.25f}, {0, -1}, {3, 0}};
  array z(zs.begin(), Shape{4}, complex64);
  auto check = [&](const array& got, const std::function<std::complex<double>(std::complex<double>)>& f) {
    ASSERT_EQ(got.dtype(), complex64);
    auto re = to_vector(real(got)), im = to_vector(imag(got));
    for (size_t i = 0; i < zs.size(); ++i) {
      auto want = f(std::complex<double>(zs[i]));
      EXPECT_NEAR(re[i], want.real(), 1e-5 * (1 + std::abs(want)));
      EXPECT_NEAR(im[i], want.imag(), 1e-5 * (1 + std::abs(want)));
    }
  };
  check(exp(z), [](auto w) { return std::exp(w); });
  check(log(z), [](auto w) { return std::log(w); });
  check(sqrt(z), [](auto w) { return std::sqrt(w); });
  check(sin(z), [](auto w) { return std::sin(w); });
  check(conjugate(z), [](auto w) { return std::conj(w); });
  check(negative(z), [](auto w) { return -w; });
  check(square(z), [](auto w) { return w * w; });
  check(multiply(z, z), [](auto w) { return w * w; });
  check(add(z, array(1.0f)), [](auto w) { return w + 1.0; });
  check(divide(z, array(std::complex<float>(1, 1))), [](auto w) { return w / std::complex<double>(1, 1); });
  array m = abs(z);
  EXPECT_EQ(m.dtype(), float32);
  expect_close(m, {4}, {std::sqrt(5.0), std::abs(std::complex<double>(-0.5, 0.25)), 1, 3});
  EXPECT_EQ(real(z).dtype(), float32);
  expect_close(real(z), {4}, {1, -0.5, 0, 3});
  expect_close(imag(z), {4}, {2, 0.25, -1, 0});
  expect_close(equal(z, conjugate(z)), {4}, {0, 0, 0, 1});
  // Real inputs: conjugate and real are the identity, imag is zero.
  array x = uniform({5}, -1, 1, float32);
  expect_close(conjugate(x), {5}, to_vector(x), 0, 0);
  expect_close(imag(x), {5}, std::vector<double>(5, 0.0));
}

// ---- binary -----------------------------------------------------------------------------

TEST(Binary, ValuesWithBroadcastingAndLayouts) {
  for (const auto& c : binary_cases()) {
    for (Dtype t : kFloatTypes) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(t));
      // floor_divide/remainder jump at integers: half-precision rounding of the inputs can
      // move a quotient across one, so keep them to float32/float64.
      if (!c.differentiable || std::string(c.name) == "remainder") {
        if (t == float16 || t == bfloat16) continue;
      }
      array a = uniform({3, 1, 5}, c.alo, c.ahi, t);
      array b = uniform({4, 1}, c.blo, c.bhi, t);
      Shape shape;
      auto want = binary_ref(a, b, c.ref, &shape);
      array y = c.fn(a, b);
      EXPECT_EQ(y.dtype(), t);
      expect_close(y, shape, want, tol(t), tol(t));
      // Same shapes, contiguous, then both transposed, then one transposed.
      array a2 = uniform({4, 6}, c.alo, c.ahi, t), b2 = uniform({4, 6}, c.blo, c.bhi, t);
      expect_close(c.fn(a2, b2), {4, 6}, binary_ref(a2, b2, c.ref, &shape), tol(t), tol(t));
      array at = transpose(a2), bt = transpose(b2);
      expect_close(c.fn(at, bt), {6, 4}, binary_ref(at, bt, c.ref, &shape), tol(t), tol(t));
      array b3 = uniform({6, 4}, c.blo, c.bhi, t);
      expect_close(c.fn(at, b3), {6, 4}, binary_ref(at, b3, c.ref, &shape), tol(t), tol(t));
      // Scalars on either side.
      array s = uniform({}, c.blo, c.bhi, t);
      expect_close(c.fn(a2, s), {4, 6}, binary_ref(a2, s, c.ref, &shape), tol(t), tol(t));
      array sa = uniform({}, c.alo, c.ahi, t);
      expect_close(c.fn(sa, b2), {4, 6}, binary_ref(sa, b2, c.ref, &shape), tol(t), tol(t));
    }
  }
}

TEST(Binary, LargeContiguousTakesTheParallelPath) {
  const int n = (1 << 21) + 5;
  array a = uniform({n}, -2, 2, float32), b = uniform({n}, -2, 2, float32);
  auto va = to_vector(a), vb = to_vector(b);
  auto s = to_vector(add(a, b)), p = to_vector(multiply(a, b));
  for (int i = 0; i < n; i += 997) {
    ASSERT_EQ(s[i], double(float(va[i] + vb[i])));
    ASSERT_EQ(p[i], double(float(va[i] * vb[i])));
  }
  ASSERT_EQ(s[n - 1], double(float(va[n - 1] + vb[n - 1])));
}

TEST(Binary, NanPropagationAndInfinities) {
  array a = array({float(kNaN), 1.0f, float(kNaN), float(kInf), float(-kInf), 2.0f});
  array b = array({1.0f, float(kNaN), float(kNaN), float(kInf), float(-kInf), 3.0f});
  expect_close(maximum(a, b), {6}, {kNaN, kNaN, kNaN, kInf, -kInf, 3});
  expect_close(minimum(a, b), {6}, {kNaN, kNaN, kNaN, kInf, -kInf, 2});
  expect_close(logaddexp(a, b), {6}, {kNaN, kNaN, kNaN, kInf, -kInf, std::log(std::exp(2.0) + std::exp(3.0))});
  expect_close(logaddexp(array({1000.0f, -1000.0f}), array({1000.0f, 0.0f})), {2},
               {1000 + std::log(2.0), 0});
  expect_close(divide(array({1.0f, -1.0f, 0.0f}), array({0.0f, 0.0f, 0.0f})), {3}, {kInf, -kInf, kNaN});
  expect_close(remainder(array({1.0f}), array({0.0f})), {1}, {kNaN});
}

TEST(Binary, IntegerDivisionFloorsTowardNegativeInfinity) {
  for (Dtype t : {int32, int64, int8, int16}) {
    SCOPED_TRACE(dtype_name(t));
    array a = randint({40}, -50, 50, t);
    array b = randint({40}, -7, 7, t);
    auto va = to_vector(a), vb = to_vector(b);
    std::vector<double> q(40), r(40);
    for (int i = 0; i < 40; ++i) {
      q[i] = vb[i] == 0 ? 0 : std::floor(va[i] / vb[i]);
      r[i] = vb[i] == 0 ? 0 : va[i] - vb[i] * std::floor(va[i] / vb[i]);
    }
    EXPECT_EQ(floor_divide(a, b).dtype(), t);
    expect_close(floor_divide(a, b), {40}, q, 0, 0);
    expect_close(remainder(a, b), {40}, r, 0, 0);
    expect_close(a % b, {40}, r, 0, 0);
    auto qr = divmod(a, b);
    expect_close(qr[0], {40}, q, 0, 0);
    expect_close(qr[1], {40}, r, 0, 0);
    // True division returns float32.
    array d = divide(a, b);
    EXPECT_EQ(d.dtype(), float32);
  }
  // Overflow corner: min / -1 wraps instead of trapping.
  expect_close(floor_divide(array({-128}, int8), array({-1}, int8)), {1}, {-128}, 0, 0);
  // Unsigned.
  array ua = randint({30}, 0, 255, uint8), ub = randint({30}, 0, 9, uint8);
  auto va = to_vector(ua), vb = to_vector(ub);
  std::vector<double> q(30), r(30);
  for (int i = 0; i < 30; ++i) {
    q[i] = vb[i] == 0 ? 0 : std::floor(va[i] / vb[i]);
    r[i] = vb[i] == 0 ? 0 : std::fmod(va[i], vb[i]);
  }
  expect_close(floor_divide(ua, ub), {30}, q, 0, 0);
  expect_close(remainder(ua, ub), {30}, r, 0, 0);
  // Floats: the remainder takes the divisor's sign; divmod agrees with the two ops.
  array fa = uniform({30}, -10, 10, float64), fb = uniform({30}, -3, 3, float64);
  Shape shape;
  expect_close(remainder(fa, fb), {30}, binary_ref(fa, fb, numpy_mod, &shape), 1e-12, 1e-12);
  auto fqr = divmod(fa, fb);
  expect_close(fqr[0], {30}, binary_ref(fa, fb, numpy_floor_div, &shape), 0, 0);
  expect_close(fqr[1], {30}, binary_ref(fa, fb, numpy_mod, &shape), 1e-12, 1e-12);
}

TEST(Binary, IntegerArithmeticPowerAndComparisons) {
  for (Dtype t : {int32, int64, uint8}) {
    SCOPED_TRACE(dtype_name(t));
    array a = randint({3, 4}, 0, 12, t), b = randint({4}, 0, 3, t);
    Shape shape;
    auto wrap = [t](double v) {
      return t == uint8 ? std::fmod(std::fmod(v, 256.0) + 256.0, 256.0) : v;
    };
    expect_close(add(a, b), {3, 4}, binary_ref(a, b, [&](double x, double y) { return wrap(x + y); }, &shape), 0, 0);
    expect_close(multiply(a, b), {3, 4}, binary_ref(a, b, [&](double x, double y) { return wrap(x * y); }, &shape), 0, 0);
    expect_close(subtract(a, b), {3, 4}, binary_ref(a, b, [&](double x, double y) { return wrap(x - y); }, &shape), 0, 0);
    expect_close(power(a, b), {3, 4}, binary_ref(a, b, [&](double x, double y) { return wrap(std::pow(x, y)); }, &shape), 0, 0);
    expect_close(maximum(a, b), {3, 4}, binary_ref(a, b, [](double x, double y) { return std::max(x, y); }, &shape), 0, 0);
    expect_close(less(a, b), {3, 4}, binary_ref(a, b, [](double x, double y) { return double(x < y); }, &shape), 0, 0);
    expect_close(greater_equal(a, b), {3, 4}, binary_ref(a, b, [](double x, double y) { return double(x >= y); }, &shape), 0, 0);
    expect_close(a == b, {3, 4}, binary_ref(a, b, [](double x, double y) { return double(x == y); }, &shape), 0, 0);
    expect_close(a != b, {3, 4}, binary_ref(a, b, [](double x, double y) { return double(x != y); }, &shape), 0, 0);
    expect_close(a <= b, {3, 4}, binary_ref(a, b, [](double x, double y) { return double(x <= y); }, &shape), 0, 0);
    expect_close(a > b, {3, 4}, binary_ref(a, b, [](double x, double y) { return double(x > y); }, &shape), 0, 0);
    EXPECT_EQ(less(a, b).dtype(), bool_);
  }
  expect_close(power(array({2, -2, 3}, int32), array({-1, 3, 0}, int32)), {3}, {0, -8, 1}, 0, 0);
  // Float comparisons with NaN are false except !=.
  array n = array({float(kNaN), 1.0f});
  expect_close(equal(n, n), {2}, {0, 1});
  expect_close(not_equal(n, n), {2}, {1, 0});
  expect_close(less(n, array(2.0f)), {2}, {0, 1});
}

// Signed overflow is undefined in C++; NumPy and MLX wrap modulo 2^bits. The reference wraps
// through the unsigned type here; the sanitizer build (-fsanitize=undefined) flags any kernel
// that still overflows a signed type.
template <typename T>
void check_wrapping_arithmetic(Dtype t) {
  using U = std::make_unsigned_t<T>;
  constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  std::vector<T> av = {hi, lo, hi, lo, T(hi - 1), T(-1), T(lo + 1), T(12345)};
  std::vector<T> bv = {T(1), T(-1), hi, lo, T(3), lo, T(-7), hi};
  const int n = static_cast<int>(av.size());
  array a(av.begin(), {n}, t), b(bv.begin(), {n}, t);
  auto w = [](uint64_t v) { return static_cast<T>(static_cast<U>(v)); };
  auto expect_exact = [&](array got, auto ref, const char* what) {
    SCOPED_TRACE(what);
    got = contiguous(got);
    eval(got);
    ASSERT_EQ(got.dtype(), t);
    for (int i = 0; i < n; ++i) EXPECT_EQ(got.data<T>()[i], ref(av[i], bv[i])) << "i = " << i;
  };
  expect_exact(add(a, b), [&](T x, T y) { return w(uint64_t(U(x)) + U(y)); }, "add");
  expect_exact(subtract(a, b), [&](T x, T y) { return w(uint64_t(U(x)) - U(y)); }, "subtract");
  expect_exact(multiply(a, b), [&](T x, T y) { return w(uint64_t(U(x)) * U(y)); }, "multiply");
  expect_exact(square(a), [&](T x, T) { return w(uint64_t(U(x)) * U(x)); }, "square");
  expect_exact(negative(a), [&](T x, T) { return w(uint64_t(0) - U(x)); }, "negative");
  expect_exact(abs(a), [&](T x, T) { return x < 0 ? w(uint64_t(0) - U(x)) : x; }, "abs");
  expect_exact(floor_divide(a, full({n}, -1, t)), [&](T x, T) { return w(uint64_t(0) - U(x)); }, "floor_divide by -1");
  // Sums and products of the same dtype wrap the same way.
  array s = sum(a), p = prod(b);
  eval(s, p);
  U su = 0, pu = 1;
  for (int i = 0; i < n; ++i) {
    su = static_cast<U>(uint64_t(su) + U(av[i]));
    pu = static_cast<U>(uint64_t(pu) * U(bv[i]));
  }
  EXPECT_EQ(s.item<T>(), static_cast<T>(su));
  EXPECT_EQ(p.item<T>(), static_cast<T>(pu));
}

TEST(Binary, SignedIntegerOverflowWraps) {
  check_wrapping_arithmetic<int32_t>(int32);
  check_wrapping_arithmetic<int64_t>(int64);
  // uint16 * uint16 promotes to int in C++, where 65535 * 65535 overflows.
  array u = array({65535, 40000}, uint16);
  expect_close(multiply(u, u), {2}, {double((65535u * 65535u) & 0xffff), double((40000u * 40000u) & 0xffff)}, 0, 0);
  expect_close(square(u), {2}, {double((65535u * 65535u) & 0xffff), double((40000u * 40000u) & 0xffff)}, 0, 0);
}

TEST(Binary, LogicalAndBitwise) {
  array a = randint({5, 6}, -40, 40, int32), b = randint({6}, 0, 40, int32);
  Shape shape;
  auto iref = [&](auto f) { return binary_ref(a, b, f, &shape); };
  auto as_i = [](double x) { return static_cast<int64_t>(x); };
  expect_close(bitwise_and(a, b), {5, 6}, iref([&](double x, double y) { return double(as_i(x) & as_i(y)); }), 0, 0);
  expect_close(a | b, {5, 6}, iref([&](double x, double y) { return double(as_i(x) | as_i(y)); }), 0, 0);
  expect_close(a ^ b, {5, 6}, iref([&](double x, double y) { return double(as_i(x) ^ as_i(y)); }), 0, 0);
  expect_close(logical_and(a, b), {5, 6}, iref([](double x, double y) { return double(x != 0 && y != 0); }), 0, 0);
  expect_close(a || b, {5, 6}, iref([](double x, double y) { return double(x != 0 || y != 0); }), 0, 0);
  EXPECT_EQ(logical_or(a, b).dtype(), bool_);
  // Shifts, including counts past the width (0, or -1 for negative right shifts).
  array v = array({1, -8, 5, -3, 7}, int32), sh = array({3, 1, 40, 40, 0}, int32);
  expect_close(left_shift(v, sh), {5}, {8, -16, 0, 0, 7}, 0, 0);
  expect_close(right_shift(v, sh), {5}, {0, -4, 0, -1, 7}, 0, 0);
  expect_close(array({200}, uint8) << array({1}, uint8), {1}, {144}, 0, 0);
  array bt = astype(array({1, 1, 0}, int32), bool_), bf = astype(array({1, 0, 0}, int32), bool_);
  EXPECT_EQ(bitwise_and(bt, bf).dtype(), bool_);
  expect_close(bitwise_xor(bt, bf), {3}, {0, 1, 0});
  EXPECT_EQ(left_shift(bt, bf).dtype(), uint8);
  expect_close(left_shift(bt, bf), {3}, {2, 1, 0}, 0, 0);
}

// MLX's promotion table on binary ops.
TEST(Binary, PromotionTable) {
  struct Row { Dtype a, b, want; };
  const Row rows[] = {
      {uint64, int8, float32}, {float16, bfloat16, float32}, {int8, uint8, int16},
      {bool_, int8, int8}, {bool_, bool_, bool_}, {uint8, uint16, uint16},
      {int32, uint32, int64}, {uint16, int16, int32}, {int64, uint32, int64},
      {int32, float16, float16}, {int64, bfloat16, bfloat16}, {float32, float64, float64},
      {float64, complex64, complex64}, {int32, complex64, complex64}, {uint64, uint8, uint64},
      {float16, float32, float32}, {bool_, float16, float16}, {int8, int16, int16},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(dtype_name(r.a) + " + " + dtype_name(r.b));
    array a = astype(array({1, 2}, int32), r.a), b = astype(array({1, 0}, int32), r.b);
    EXPECT_EQ(add(a, b).dtype(), r.want);
    EXPECT_EQ(add(b, a).dtype(), r.want);
    EXPECT_EQ(maximum(a, b).dtype(), r.want);
    EXPECT_EQ(less(a, b).dtype(), bool_);
  }
  EXPECT_EQ(divide(array({1}, int8), array({2}, int8)).dtype(), float32);
  EXPECT_EQ(divide(array({1}, int32), array({2.0f})).dtype(), float32);
  EXPECT_EQ(divide(astype(array({1}, int32), float16), array({2}, int32)).dtype(), float16);
  EXPECT_EQ(arctan2(array({1}, int32), array({2}, int32)).dtype(), float32);
  EXPECT_EQ(add(astype(array({1}, int32), bfloat16), array({2.0f})).dtype(), float32);
  // Mixed-dtype values are computed in the promoted type.
  expect_close(add(array({250}, uint8), array({-3}, int8)), {1}, {247}, 0, 0);
  expect_close(divide(array({7}, int32), array({2}, int32)), {1}, {3.5}, 0, 0);
}

TEST(Binary, ComplexComparisonsAndPower) {
  array z = array(std::complex<float>(1, 2));
  array w = array(std::complex<float>(1, 3));
  expect_close(less(z, w), {}, {1});
  expect_close(equal(z, z), {}, {1});
  auto p = power(z, array(std::complex<float>(2, 0)));
  auto want = std::pow(std::complex<double>(1, 2), 2.0);
  expect_close(real(p), {}, {want.real()}, 1e-5, 1e-5);
  expect_close(imag(p), {}, {want.imag()}, 1e-5, 1e-5);
}

// ---- where, clip, isclose, array_equal ----------------------------------------------------

TEST(Select, WhereBroadcastsAndPromotes) {
  array c = greater(uniform({3, 1}, -1, 1), array(0.0));
  array x = uniform({1, 4}, -1, 1, float32);
  array y = randint({3, 4}, -5, 5, int32);
  array out = where(c, x, y);
  EXPECT_EQ(out.dtype(), float32);
  auto vc = to_vector(c), vx = to_vector(x), vy = to_vector(y);
  std::vector<double> want(12);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want[i * 4 + j] = vc[i] ? vx[j] : vy[i * 4 + j];
  }
  expect_close(out, {3, 4}, want, 0, 0);
  // Transposed operands and a non-bool condition.
  array xt = transpose(uniform({4, 3}, -1, 1, float64));
  array cond = randint({3, 4}, 0, 1, int32);
  auto vct = to_vector(cond), vxt = to_vector(xt), vy2 = to_vector(y);
  for (int i = 0; i < 12; ++i) want[i] = vct[i] ? vxt[i] : vy2[i];
  expect_close(where(cond, xt, y), {3, 4}, want, 0, 0);
  // Scalars everywhere.
  expect_close(where(array(true), array(1.0f), array(2.0f)), {}, {1});
}

TEST(Select, ClipIsCloseAllCloseArrayEqual) {
  array a = uniform({20}, -3, 3, float32);
  auto va = to_vector(a);
  std::vector<double> want;
  for (double v : va) want.push_back(std::min(std::max(v, -1.0), 1.5));
  expect_close(clip(a, array(-1.0f), array(1.5f)), {20}, want, 0, 0);
  want.clear();
  for (double v : va) want.push_back(std::max(v, 0.0));
  expect_close(clip(a, array(0.0f)), {20}, want, 0, 0);
  want.clear();
  for (double v : va) want.push_back(std::min(v, 0.0));
  expect_close(clip(a, std::nullopt, array(0.0f)), {20}, want, 0, 0);
  // isclose: the NumPy rule, infinities only close to themselves, NaN by equal_nan.
  array x = array({1.0f, 1.0f, float(kInf), float(kInf), float(kNaN), 1.0f, 0.0f});
  array y = array({1.0f + 1e-6f, 1.1f, float(kInf), float(-kInf), float(kNaN), float(kInf), 1e-9f});
  expect_close(isclose(x, y), {7}, {1, 0, 1, 0, 0, 0, 1});
  expect_close(isclose(x, y, 1e-5, 1e-8, true), {7}, {1, 0, 1, 0, 1, 0, 1});
  EXPECT_FALSE(allclose(x, y).item<bool>());
  array r = uniform({10}, -1, 1, float64);
  EXPECT_TRUE(allclose(r, add(r, array(1e-9))).item<bool>());
  EXPECT_FALSE(allclose(r, add(r, array(1e-3))).item<bool>());
  // array_equal: shapes, dtypes, NaNs.
  EXPECT_TRUE(array_equal(array({1, 2}, int32), array({1.0f, 2.0f})).item<bool>());
  EXPECT_FALSE(array_equal(array({1, 2}, int32), array({1, 2, 3}, int32)).item<bool>());
  EXPECT_FALSE(array_equal(array({1.0f, float(kNaN)}), array({1.0f, float(kNaN)})).item<bool>());
  EXPECT_TRUE(array_equal(array({1.0f, float(kNaN)}), array({1.0f, float(kNaN)}), true).item<bool>());
}

// ---- errors -----------------------------------------------------------------------------

TEST(Errors, BadInputNamesTheOp) {
  array a = zeros({2, 3}), b = zeros({4});
  expect_throws_naming<std::invalid_argument>([&] { add(a, b); }, "[add]");
  expect_throws_naming<std::invalid_argument>([&] { multiply(a, b); }, "[multiply]");
  expect_throws_naming<std::invalid_argument>([&] { divide(a, b); }, "[divide]");
  expect_throws_naming<std::invalid_argument>([&] { less(a, b); }, "[less]");
  expect_throws_naming<std::invalid_argument>([&] { where(a, a, b); }, "[where]");
  expect_throws_naming<std::invalid_argument>([&] { divmod(a, b); }, "[divmod]");
  expect_throws_naming<std::invalid_argument>([&] { bitwise_and(a, a); }, "[bitwise_and]");
  expect_throws_naming<std::invalid_argument>([&] { bitwise_or(array({1}, int32), a); }, "[bitwise_or]");
  expect_throws_naming<std::invalid_argument>([&] { bitwise_xor(a, a); }, "[bitwise_xor]");
  expect_throws_naming<std::invalid_argument>([&] { left_shift(a, a); }, "[left_shift]");
  expect_throws_naming<std::invalid_argument>([&] { right_shift(a, a); }, "[right_shift]");
  expect_throws_naming<std::invalid_argument>([&] { bitwise_invert(a); }, "[bitwise_invert]");
  expect_throws_naming<std::invalid_argument>([&] { negative(astype(a, bool_)); }, "[negative]");
  expect_throws_naming<std::invalid_argument>([&] { clip(a); }, "[clip]");
  array z = astype(a, complex64);
  expect_throws_naming<std::invalid_argument>([&] { floor(z); }, "[floor]");
  expect_throws_naming<std::invalid_argument>([&] { erf(z); }, "[erf]");
  expect_throws_naming<std::invalid_argument>([&] { remainder(z, z); }, "[remainder]");
  expect_throws_naming<std::invalid_argument>([&] { floor_divide(z, z); }, "[floor_divide]");
  expect_throws_naming<std::invalid_argument>([&] { arctan2(z, z); }, "[arctan2]");
  // logaddexp takes complex input, as MLX (tests/mlx_conformance_test.cpp).
  expect_throws_naming<std::invalid_argument>([&] { logaddexp(z, ones({7, 7})); }, "[logaddexp]");
  // round and log1p take complex input too, as MLX (tests/mlx_conformance_test.cpp).
  expect_throws_naming<std::invalid_argument>([&] { isclose(a, b); }, "[isclose]");
}

// ---- derivatives and batching ---------------------------------------------------------

TEST(Transforms, UnaryGradAndVmap) {
  for (const auto& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    auto f = [&](const std::vector<array>& xs) { return c.fn(xs[0]); };
    if (c.differentiable) {
      check_grad(f, {uniform({2, 3}, c.lo, c.hi)}, {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-6});
    }
    auto fv = [&](const std::vector<array>& xs) { return std::vector<array>{c.fn(xs[0])}; };
    check_vmap(fv, {uniform({3, 2, 4}, c.lo, c.hi)}, {1});
    check_vmap(fv, {uniform({2, 3}, c.lo, c.hi)}, {0});
  }
}

TEST(Transforms, BinaryGradAndVmap) {
  for (const auto& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    auto f = [&](const std::vector<array>& xs) { return c.fn(xs[0], xs[1]); };
    if (c.differentiable) {
      check_grad(f, {uniform({2, 3}, c.alo, c.ahi), uniform({2, 3}, c.blo, c.bhi)});
      // Broadcasting: the cotangent of b is summed over the broadcast axis.
      check_grad(f, {uniform({2, 3}, c.alo, c.ahi), uniform({3}, c.blo, c.bhi)});
    }
    auto fv = [&](const std::vector<array>& xs) { return std::vector<array>{c.fn(xs[0], xs[1])}; };
    check_vmap(fv, {uniform({3, 2}, c.alo, c.ahi), uniform({3, 2}, c.blo, c.bhi)}, {0, 0});
    check_vmap(fv, {uniform({2, 3}, c.alo, c.ahi), uniform({3, 2}, c.blo, c.bhi)}, {1, 0});
    check_vmap(fv, {uniform({4, 2}, c.alo, c.ahi), uniform({2}, c.blo, c.bhi)}, {0, -1});
    check_vmap(fv, {uniform({2}, c.alo, c.ahi), uniform({2, 4}, c.blo, c.bhi)}, {-1, 1});
    // Operands of different ranks: a batched 0-d one against an unbatched [4] (the batch axis
    // was aligned with the 4), and a batched [2] against an unbatched [3, 2].
    check_vmap(fv, {uniform({3}, c.alo, c.ahi), uniform({4}, c.blo, c.bhi)}, {0, -1});
    check_vmap(fv, {uniform({5, 2}, c.alo, c.ahi), uniform({3, 2}, c.blo, c.bhi)}, {0, -1});
    check_vmap(fv, {uniform({4, 3}, c.alo, c.ahi), uniform({3}, c.blo, c.bhi)}, {-1, 0});
  }
}

TEST(Transforms, WhereAndDivmodGradAndVmap) {
  array cond = greater(uniform({2, 3}, -1, 1), array(0.0));
  auto fw = [&](const std::vector<array>& xs) { return where(cond, xs[0], xs[1]); };
  check_grad(fw, {uniform({2, 3}, -2, 2), uniform({2, 3}, -2, 2)});
  check_grad(fw, {uniform({2, 3}, -2, 2), uniform({3}, -2, 2)});
  auto fwv = [](const std::vector<array>& xs) {
    return std::vector<array>{where(xs[0], xs[1], xs[2])};
  };
  array bc = greater(uniform({4, 3}, -1, 1), array(0.0));
  check_vmap(fwv, {bc, uniform({4, 3}, -1, 1), uniform({3}, -1, 1)}, {0, 0, -1});
  check_vmap(fwv, {greater(uniform({3}, -1, 1), array(0.0)), uniform({3, 4}, -1, 1),
                   uniform({4, 3}, -1, 1)}, {-1, 1, 0});
  check_vmap(fwv, {greater(uniform({5}, -1, 1), array(0.0)), uniform({3, 4}, -1, 1), uniform({4}, -1, 1)},
             {0, -1, -1});
  // divmod: the remainder's derivative (1 for a, -floor(a / b) for b); the quotient's is 0.
  auto fr = [](const std::vector<array>& xs) { return divmod(xs[0], xs[1])[1]; };
  check_grad(fr, {uniform({2, 3}, 0.1, 5), uniform({2, 3}, 1.1, 2)});
  auto fq = [](const std::vector<array>& xs) { return divmod(xs[0], xs[1])[0]; };
  check_grad(fq, {uniform({2, 3}, 0.1, 5), uniform({2, 3}, 1.1, 2)});
  auto fdv = [](const std::vector<array>& xs) { return divmod(xs[0], xs[1]); };
  check_vmap(fdv, {uniform({3, 2}, -5, 5), uniform({3, 2}, 0.7, 2)}, {0, 0});
  check_vmap(fdv, {uniform({2, 3}, -5, 5), uniform({2}, 0.7, 2)}, {1, -1});
}

TEST(Transforms, SecondDerivatives) {
  auto scalar_sum = [](const array& y) { return sum(y); };
  array x = uniform({5}, -2, 2);
  auto vx = to_vector(x);
  // d²/dx² sin = -sin, d²/dx² exp = exp.
  auto d_sin = grad([&](const std::vector<array>& xs) { return scalar_sum(sin(xs[0])); });
  auto dd_sin = grad([&](const std::vector<array>& xs) { return scalar_sum(d_sin(xs)[0]); });
  expect_close(dd_sin({x})[0], {5}, unary_ref(x, [](double v) { return -std::sin(v); }), 1e-12, 1e-12);
  auto d_exp = grad([&](const std::vector<array>& xs) { return scalar_sum(exp(xs[0])); });
  auto dd_exp = grad([&](const std::vector<array>& xs) { return scalar_sum(d_exp(xs)[0]); });
  expect_close(dd_exp({x})[0], {5}, unary_ref(x, [](double v) { return std::exp(v); }), 1e-12, 1e-12);
  // f(x, y) = sum(x² y): ∂f/∂x = 2xy, and ∂/∂y of sum(∂f/∂x) = 2x.
  array y = uniform({5}, -2, 2);
  auto df_dx = grad([](const std::vector<array>& xs) {
    return sum(multiply(multiply(xs[0], xs[0]), xs[1]));
  }, 0);
  auto d2 = grad([&](const std::vector<array>& xs) { return sum(df_dx(xs)[0]); }, 1);
  expect_close(d2({x, y})[0], {5}, unary_ref(x, [](double v) { return 2 * v; }), 1e-12, 1e-12);
}

} // namespace
} // namespace nuvec::testing

// Complex reverse mode uses one convention everywhere (gradient = dL/dx + i dL/dy): a loss
// through imag() and multiply must agree with the real partial derivatives.
TEST(ComplexGradients, ImagAndRealAgreeWithPartials) {
  using namespace nuvec;
  auto z = astype(nuvec::testing::randn({5}), complex64) +
      multiply(array(complex64_t(0.0f, 1.0f)), astype(nuvec::testing::randn({5}), complex64));
  auto w = astype(nuvec::testing::randn({5}), complex64) +
      multiply(array(complex64_t(0.0f, 1.0f)), astype(nuvec::testing::randn({5}), complex64));
  eval(z, w);
  // L = sum(Im(z w) + 2 Re(z w)); with z = x + iy, w = u + iv:
  // dL/dx = v + 2u, dL/dy = u - 2v.
  std::function<array(const array&)> loss = [&](const array& a) {
    auto p = multiply(a, w);
    return sum(add(imag(p), multiply(array(2.0f), real(p))));
  };
  auto g = grad(loss)(z);
  auto wr = nuvec::testing::to_vector(real(w)), wi = nuvec::testing::to_vector(imag(w));
  std::vector<double> ex(5), ey(5);
  for (int i = 0; i < 5; ++i) {
    ex[i] = wi[i] + 2 * wr[i];
    ey[i] = wr[i] - 2 * wi[i];
  }
  nuvec::testing::expect_close(real(g), {5}, ex, 1e-5, 1e-5);
  nuvec::testing::expect_close(imag(g), {5}, ey, 1e-5, 1e-5);
}
