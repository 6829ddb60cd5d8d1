// The host-and-device math layer (src/backend/common/math/) compiled on its own by g++,
// without CUDA: it must need no nuvec host header (array, dtype) and no standard container,
// so that nvcc and NVRTC can compile the same text. Then: its functors agree with the op
// tables' dtype rules for every op and element type, a few of its rules by value, and the
// host's float exp within 1 ulp everywhere, saturating where expf does.
#include "backend/common/math/cast.h"
#include "backend/common/math/elementwise.h"
#include "backend/common/math/reduce.h"
#include "backend/common/math/scan.h"

// Nothing above may have pulled in a container or nuvec's array (a declaration named
// `array` in namespace nuvec would clash with the class).
#if defined(_GLIBCXX_VECTOR) || defined(_GLIBCXX_MAP) || defined(_GLIBCXX_UNORDERED_MAP) || \
    defined(_GLIBCXX_SET) || defined(_GLIBCXX_UNORDERED_SET) || defined(_GLIBCXX_DEQUE) ||  \
    defined(_GLIBCXX_LIST) || defined(_GLIBCXX_ARRAY) || defined(_GLIBCXX_MEMORY) ||         \
    defined(_GLIBCXX_FUNCTIONAL)
#error "the math layer must not include standard containers"
#endif
// (The host's <complex> brings <string> and <stdexcept> along in libstdc++; that is the
// host's complex library. CUDA compilers read cuda::std::complex instead.)
namespace nuvec {
[[maybe_unused]] constexpr int array = 0;
} // namespace nuvec

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "nuvec/types/complex.h"
#include "nuvec/types/half_types.h"

namespace nuvec {
namespace {

using math::result_elem_t;

// The element type the op table says an op writes for element type T.
template <typename T>
using real_of_complex_t = std::conditional_t<math::Complex<T>, float, T>;
template <ResultKind kind, typename T>
using table_elem_t = std::conditional_t<
    kind == ResultKind::Bool, bool,
    std::conditional_t<kind == ResultKind::RealOfComplex, real_of_complex_t<T>, T>>;

template <typename Op, ResultKind kind, int Arity, typename... Ts>
constexpr bool agrees() {
  return ([] {
    using C = math::compute_t<Ts>;
    if constexpr (Arity == 1 && std::is_invocable_v<Op, C>) {
      return std::is_same_v<result_elem_t<Op, Ts, 1>, table_elem_t<kind, Ts>>;
    } else if constexpr (Arity == 2 && std::is_invocable_v<Op, C, C>) {
      return std::is_same_v<result_elem_t<Op, Ts, 2>, table_elem_t<kind, Ts>>;
    } else {
      return true; // the dtype is rejected by the kernels
    }
  }() && ...);
}

#define NUVEC_ALL_ELEMENTS bool, uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, \
    int32_t, int64_t, float16_t, bfloat16_t, float, double, complex64_t

// Every row of each table: the functor's result type is the row's dtype rule.
#define NUVEC_CHECK_UNARY(o, functor, kind)                                             \
  static_assert(agrees<math::functor, ResultKind::kind, 1, NUVEC_ALL_ELEMENTS>(),        \
                "unary " #o ": the functor's result disagrees with the op table");
NUVEC_UNARY_OPS(NUVEC_CHECK_UNARY)
#undef NUVEC_CHECK_UNARY
#define NUVEC_CHECK_BINARY(o, kind)                                                     \
  static_assert(agrees<math::o, ResultKind::kind, 2, NUVEC_ALL_ELEMENTS>(),              \
                "binary " #o ": the functor's result disagrees with the op table");
NUVEC_BINARY_OPS(NUVEC_CHECK_BINARY)
#undef NUVEC_CHECK_BINARY

// The float math every float dtype supports is there for float and double.
static_assert(std::is_invocable_v<math::Exp, float> && std::is_invocable_v<math::Exp, double>);
static_assert(std::is_invocable_v<math::Exp, complex64_t>);
static_assert(!std::is_invocable_v<math::Expm1, complex64_t>); // no complex expm1 (MLX)
static_assert(!std::is_invocable_v<math::Sqrt, int32_t>); // the ops cast integers first

// f(args...) as double where the functor takes them, NaN where it rejects them.
template <typename... Args>
auto apply_or_nan(Args... args) {
  return [=](auto f) {
    if constexpr (std::is_invocable_v<decltype(f), Args...>) return double(f(args...));
    else return double(NAN);
  };
}

TEST(MathLayer, VisitReachesEveryRowsFunctor) {
  // Each op's visit hands over the functor of its own row.
  EXPECT_EQ(math::visit(UnaryOp::Negative, apply_or_nan(2.5)), -2.5);
  EXPECT_EQ(math::visit(UnaryOp::Square, apply_or_nan(3.0)), 9.0);
  EXPECT_EQ(math::visit(UnaryOp::Imag, apply_or_nan(complex64_t(1, 4))), 4.0);
  EXPECT_EQ(math::visit(UnaryOp::Real, apply_or_nan(complex64_t(1, 4))), 1.0);
  EXPECT_TRUE(std::isnan(math::visit(UnaryOp::Imag, apply_or_nan(2.0))));
  EXPECT_EQ(math::visit(BinaryOp::Subtract, apply_or_nan(7.0, 2.0)), 5.0);
  EXPECT_EQ(math::visit(BinaryOp::ArcTan2, apply_or_nan(1.0, 1.0)), std::atan2(1.0, 1.0));
  EXPECT_THROW(math::visit(static_cast<UnaryOp>(1000), apply_or_nan(1.0)), std::logic_error);
  EXPECT_THROW(math::visit(static_cast<BinaryOp>(-1), apply_or_nan(1.0, 1.0)), std::logic_error);
  EXPECT_STREQ(unary_op_name(UnaryOp::ErfInv), "ErfInv");
  EXPECT_STREQ(binary_op_name(BinaryOp::NaNEqual), "NaNEqual");
}

TEST(MathLayer, IntegerRulesAreNumPys) {
  EXPECT_EQ(math::FloorDivide{}(-7, 2), -4);
  EXPECT_EQ(math::Remainder{}(-7, 2), 1);
  EXPECT_EQ(math::FloorDivide{}(int32_t(INT32_MIN), -1), INT32_MIN); // wraps, no trap
  EXPECT_EQ(math::FloorDivide{}(5, 0), 0);
  EXPECT_EQ(math::Add{}(int8_t(127), int8_t(1)), int8_t(-128));
  EXPECT_EQ(math::LeftShift{}(int32_t(1), int32_t(-1)), 0);
  EXPECT_EQ(math::RightShift{}(int32_t(-8), int32_t(40)), -1);
  EXPECT_EQ(math::Power{}(int64_t(3), int64_t(5)), 243);
  EXPECT_EQ(math::Power{}(int64_t(-1), int64_t(-3)), -1);
  EXPECT_EQ(math::Abs{}(int16_t(INT16_MIN)), INT16_MIN);
}

TEST(MathLayer, FloatRulesAreNumPys) {
  EXPECT_EQ(math::FloorDivide{}(-7.5, 2.0), -4.0);
  EXPECT_EQ(math::Remainder{}(-7.5, 2.0), 0.5);
  EXPECT_TRUE(std::signbit(math::Remainder{}(4.0, -2.0)));
  EXPECT_TRUE(std::isnan(math::Maximum{}(1.0f, NAN)));
  EXPECT_TRUE(std::isnan(math::Minimum{}(NAN, 1.0f)));
  EXPECT_EQ(math::Round{}(2.5), 2.0); // half to even
  EXPECT_EQ(math::LogAddExp{}(-INFINITY, -INFINITY), -INFINITY);
  EXPECT_NEAR(math::ErfInv{}(0.5), 0.4769362762044699, 1e-15);
  EXPECT_EQ(math::ErfInv{}(1.0f), INFINITY);
  // Complex numbers order lexicographically.
  EXPECT_TRUE(math::Less{}(complex64_t(1, 5), complex64_t(2, -1)));
  EXPECT_TRUE(math::Less{}(complex64_t(1, 1), complex64_t(1, 2)));
  EXPECT_EQ(math::Maximum{}(complex64_t(1, 2), complex64_t(1, 3)), complex64_t(1, 3));
  // A complex NaN (either part) propagates from either side, as a real one does.
  for (auto nan_z : {complex64_t(NAN, 0), complex64_t(0, NAN)}) {
    EXPECT_TRUE(math::is_nan(math::Maximum{}(nan_z, complex64_t(1, 0))));
    EXPECT_TRUE(math::is_nan(math::Maximum{}(complex64_t(1, 0), nan_z)));
    EXPECT_TRUE(math::is_nan(math::Minimum{}(complex64_t(-5, 0), nan_z)));
    EXPECT_TRUE(math::is_nan(math::LogAddExp{}(complex64_t(INFINITY, 0), nan_z)));
    EXPECT_TRUE(math::is_nan(math::LogAddExp{}(nan_z, complex64_t(INFINITY, 0))));
  }
}

TEST(MathLayer, HostExpIsWithinOneUlpAndSaturatesAsExpf) {
  // exp_f32 (the host's float exp) against exp in double, rounded once: every 251st float
  // (all 2^32 pass, checked once by hand) and every float within 4096 ulps of the edges:
  // ln(FLT_MAX) (overflow), ln(2^-126) (subnormal results), ln(2^-149) and ln(2^-150) (the
  // last nonzero result), 0. It must give inf and 0 for exactly the inputs expf does.
  auto check = [](float x) {
    const float got = math::Exp{}(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got)) << x;
      return;
    }
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const float libm = std::exp(x);
    EXPECT_EQ(std::isinf(got), std::isinf(libm)) << std::hexfloat << x;
    EXPECT_EQ(got == 0.0f, libm == 0.0f) << std::hexfloat << x;
    int32_t a, b;
    std::memcpy(&a, &want, 4);
    std::memcpy(&b, &got, 4);
    EXPECT_LE(std::abs(static_cast<int64_t>(a) - b), 1) << std::hexfloat << x;
  };
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 251) {
    float x;
    const uint32_t bits = static_cast<uint32_t>(u);
    std::memcpy(&x, &bits, 4);
    check(x);
  }
  for (float edge : {88.7228391f, -87.3365448f, -103.278931f, -103.972077f, 0.0f}) {
    float lo = edge, hi = edge;
    for (int i = 0; i < 4096; ++i) {
      check(lo = std::nextafter(lo, -INFINITY));
      check(hi = std::nextafter(hi, INFINITY));
    }
  }
  EXPECT_EQ(math::Exp{}(0.0f), 1.0f);
  EXPECT_EQ(math::Exp{}(-0.0f), 1.0f);
  EXPECT_EQ(math::Exp{}(1e-45f), 1.0f);
  EXPECT_EQ(math::Exp{}(-INFINITY), 0.0f);
  EXPECT_EQ(math::Exp{}(-200.0f), 0.0f);
  EXPECT_EQ(math::Exp{}(INFINITY), INFINITY);
  EXPECT_EQ(math::Exp{}(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(math::Exp{}(NAN)));
  EXPECT_TRUE(std::isnan(math::Exp{}(-NAN)));
}

TEST(MathLayer, CastsAreNumPys) {
  EXPECT_EQ(math::cast_to<uint8_t>(-1.0), 255);
  EXPECT_EQ(math::cast_to<int8_t>(1e10), 127);
  EXPECT_EQ(math::cast_to<int32_t>(NAN), 0);
  EXPECT_EQ(math::cast_to<bool>(complex64_t(0, 1)), true);
  EXPECT_EQ(math::cast_to<float>(complex64_t(3, 4)), 3.0f);
  EXPECT_EQ(static_cast<float>(math::cast_to<float16_t>(65520.0f)), INFINITY);
  EXPECT_EQ(math::cast_to<complex64_t>(float16_t(1.5f)), complex64_t(1.5f, 0));
}

TEST(MathLayer, ReduceAndScanCombinersPropagateNaN) {
  math::Combine<ReduceOp::Max, float> mx;
  EXPECT_TRUE(std::isnan(mx(1.0f, NAN)));
  EXPECT_TRUE(std::isnan(mx(NAN, 1.0f)));
  EXPECT_EQ(mx(mx.init(), -3.0f), -3.0f);
  math::Combine<ReduceOp::Min, complex64_t> mn;
  EXPECT_EQ(mn(complex64_t(1, 2), complex64_t(1, -2)), complex64_t(1, -2));
  // Complex NaN wins from either side (the kernels feed elements in on the right).
  math::Combine<ReduceOp::Max, complex64_t> cmx;
  EXPECT_TRUE(math::is_nan(cmx(cmx.init(), complex64_t(NAN, 0))));
  EXPECT_TRUE(math::is_nan(cmx(complex64_t(NAN, 0), complex64_t(1, 0))));
  EXPECT_TRUE(math::is_nan(mn(complex64_t(1, 0), complex64_t(0, NAN))));
  EXPECT_EQ((math::Combine<ReduceOp::Sum, int32_t>{}(INT32_MAX, 1)), INT32_MIN);
  math::ScanCombine<ScanOp::Max, double> cm;
  EXPECT_TRUE(std::isnan(cm(NAN, 5.0))); // a NaN prefix stays
  EXPECT_TRUE(std::isnan(cm(5.0, NAN)));
  EXPECT_EQ(cm(cm.init(), -1e300), -1e300);
  math::ScanCombine<ScanOp::LogAddExp, double> lse;
  EXPECT_NEAR(lse(std::log(2.0), std::log(3.0)), std::log(5.0), 1e-15);
  EXPECT_EQ(lse(lse.init(), 1.0), 1.0);
  EXPECT_EQ((math::ScanCombine<ScanOp::Sum, int64_t>{}(INT64_MAX, 1)), INT64_MIN);
}

} // namespace
} // namespace nuvec
