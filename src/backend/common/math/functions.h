// nuvec: the math library of the math layer, one overload set for host and device. Real
// functions are templates over float and double that call the C library's float or double
// function (expf, exp), which both libm and CUDA provide — CUDA's accurate versions, never
// the __expf-style intrinsics. Complex ones call the complex library (types.h). Overloads
// are constrained templates, so an argument never converts implicitly: complex64_t's
// implicit conversion to float cannot select a real function.
//
// Where the targets differ, on purpose:
// - erfinv: CUDA has erfinvf/erfinv; libm has none, so the host uses Giles's approximation
//   refined by Newton steps.
// - exp_f32 is the host's libm-free float exp (within 1 ulp), which vectorises; the Exp functor
//   uses it on the host (unary.h). Everything else (sigmoid, logaddexp, the scans) calls the
//   library's correctly rounded-to-0.5-ulp exp: a long logcumsumexp drifts measurably with
//   a 1-ulp exp.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

#include "backend/common/math/types.h"

NUVEC_MATH_BEGIN

#define NUVEC_MATH_REAL1(name)                                                 \
  template <Real T>                                                            \
  NUVEC_HD T name(T x) {                                                       \
    if constexpr (std::is_same_v<T, float>) return ::name##f(x);               \
    else return ::name(x);                                                     \
  }
#define NUVEC_MATH_REAL2(name)                                                 \
  template <Real T>                                                            \
  NUVEC_HD T name(T x, T y) {                                                  \
    if constexpr (std::is_same_v<T, float>) return ::name##f(x, y);            \
    else return ::name(x, y);                                                  \
  }
#define NUVEC_MATH_COMPLEX1(name)                                              \
  template <Complex T>                                                         \
  NUVEC_HD T name(const T& z) {                                                \
    return T(cstd::name(arith(z)));                                            \
  }

NUVEC_MATH_REAL1(fabs)
NUVEC_MATH_REAL1(floor)
NUVEC_MATH_REAL1(ceil)
NUVEC_MATH_REAL1(rint) // half to even under the default rounding mode, as NumPy's round
NUVEC_MATH_REAL1(expm1)
NUVEC_MATH_REAL1(log1p)
NUVEC_MATH_REAL1(log2)
NUVEC_MATH_REAL1(erf)
NUVEC_MATH_REAL2(fmod)
NUVEC_MATH_REAL2(copysign)
NUVEC_MATH_REAL2(pow)
NUVEC_MATH_REAL2(atan2)

// Real and complex.
NUVEC_MATH_REAL1(sqrt)
NUVEC_MATH_COMPLEX1(sqrt)
NUVEC_MATH_REAL1(log)
NUVEC_MATH_COMPLEX1(log)
NUVEC_MATH_REAL1(log10)
NUVEC_MATH_COMPLEX1(log10)
NUVEC_MATH_REAL1(sin)
NUVEC_MATH_COMPLEX1(sin)
NUVEC_MATH_REAL1(cos)
NUVEC_MATH_COMPLEX1(cos)
NUVEC_MATH_REAL1(tan)
NUVEC_MATH_COMPLEX1(tan)
NUVEC_MATH_REAL1(asin)
NUVEC_MATH_COMPLEX1(asin)
NUVEC_MATH_REAL1(acos)
NUVEC_MATH_COMPLEX1(acos)
NUVEC_MATH_REAL1(atan)
NUVEC_MATH_COMPLEX1(atan)
NUVEC_MATH_REAL1(sinh)
NUVEC_MATH_COMPLEX1(sinh)
NUVEC_MATH_REAL1(cosh)
NUVEC_MATH_COMPLEX1(cosh)
NUVEC_MATH_REAL1(tanh)
NUVEC_MATH_COMPLEX1(tanh)
NUVEC_MATH_REAL1(asinh)
NUVEC_MATH_COMPLEX1(asinh)
NUVEC_MATH_REAL1(acosh)
NUVEC_MATH_COMPLEX1(acosh)
NUVEC_MATH_REAL1(atanh)
NUVEC_MATH_COMPLEX1(atanh)
NUVEC_MATH_COMPLEX1(exp)
NUVEC_MATH_COMPLEX1(conj)

#undef NUVEC_MATH_REAL1
#undef NUVEC_MATH_REAL2
#undef NUVEC_MATH_COMPLEX1

/// |z| (float32) of a complex number.
template <Complex T>
NUVEC_HD float abs(const T& z) {
  return cstd::abs(arith(z));
}

/// z ** w for complex numbers, with NumPy's zeros: z ** 0 is 1 (0 ** 0 too) and 0 ** w is 0
/// for real w > 0 (exp(w · log 0) would give NaN for both).
template <Complex T>
NUVEC_HD T pow(const T& z, const T& w) {
  const complex_lib_t zc = arith(z), wc = arith(w);
  if (wc.real() == 0 && wc.imag() == 0) return T(complex_lib_t(1.0f, 0.0f));
  if (zc.real() == 0 && zc.imag() == 0 && wc.imag() == 0 && wc.real() > 0) return T(complex_lib_t(0.0f, 0.0f));
  return T(cstd::pow(zc, wc));
}

/// Whether x is +-inf.
template <Real T>
NUVEC_HD bool is_inf(T x) {
  return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
}

/// e^x for float32 without calling libm, so the host loops vectorise: x = n ln2 + r with
/// |r| <= ln2/2 (Cody and Waite's two-part ln2), e^r = 1 + r + r^2 P(r) with Cephes's expf
/// polynomial (P of degree 5, a minimax fit), 2^n applied as two exact power-of-two factors
/// so that results down to the subnormals round once. Within 1 ulp of the correctly rounded
/// e^x for every float, with or without FMA contraction (checked exhaustively;
/// tests/math_layer_test.cpp samples it and the edges): +-0 give 1, -inf and x < ln(2^-150)
/// give 0, +inf and x > ln(FLT_MAX) give inf, NaN gives NaN, as expf does. Branch-free: the
/// clamps and the NaN test are selects, which GCC turns into vector blends or masks.
NUVEC_HD inline float exp_f32(float x) {
  constexpr float log2e = 1.44269504088896341f;
  constexpr float ln2_hi = 0.693359375f; // ln 2 split so n * ln2_hi is exact
  constexpr float ln2_lo = -2.12194440e-4f;
  constexpr float round_magic = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
  float xc = x > -104.0f ? x : -104.0f; // NaN becomes -104 here and is restored below
  xc = xc < 89.0f ? xc : 89.0f;
  float fn = (xc * log2e + round_magic) - round_magic;
  float r = (xc - fn * ln2_hi) - fn * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t n = static_cast<int32_t>(fn);
  int32_t n1 = n >> 1; // n in [-150, 129]: both halves stay in the normal exponent range
  int32_t n2 = n - n1;
  float s1 = __builtin_bit_cast(float, (n1 + 127) << 23);
  float s2 = __builtin_bit_cast(float, (n2 + 127) << 23);
  float y = p * s1 * s2;
  return x != x ? x : y;
}

/// e^x: the C library's expf / exp (libm on the host, CUDA's on the device).
template <Real T>
NUVEC_HD T exp(T x) {
  if constexpr (std::is_same_v<T, float>) return ::expf(x);
  else return ::exp(x);
}

/// The inverse error function: ±1 give ±inf, |x| > 1 and NaN give NaN. CUDA's erfinvf /
/// erfinv on the device; on the host Giles's single-precision approximation ("Approximating
/// the erfinv function", GPU Computing Gems, 2011) as a start, then two Newton steps on erf
/// in double, which make it accurate for float64 too.
template <Real T>
NUVEC_HD T erfinv(T x) {
#if NUVEC_MATH_DEVICE
  if constexpr (std::is_same_v<T, float>) return ::erfinvf(x);
  else return ::erfinv(x);
#else
  if (x != x) return x;
  if (x <= T(-1)) {
    return x == T(-1) ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
  }
  if (x >= T(1)) {
    return x == T(1) ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
  }
  double xd = static_cast<double>(x);
  double w = -::log((1.0 - xd) * (1.0 + xd));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = ::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * xd;
  // Newton on f(y) = erf(y) - x, f'(y) = 2/sqrt(pi) e^{-y^2}.
  for (int i = 0; i < 2; ++i) {
    double err = ::erf(y) - xd;
    y -= err / (1.1283791670955126 * ::exp(-y * y));
  }
  return static_cast<T>(y);
#endif
}

NUVEC_MATH_END
