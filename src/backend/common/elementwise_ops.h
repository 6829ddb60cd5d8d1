// nuvec: the math layer of the element-wise families: one functor per UnaryOp/BinaryOp and
// `visit(op, f)` mapping the enum to them. Semantics: NumPy's for plain math (floor division
// and remainder round toward -inf, integer division by zero gives 0, NaN propagates through
// maximum/minimum), MLX's elsewhere. Host-only today; NUVEC_HD marks what CUDA will share.
#pragma once

#include <stdexcept>

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/common/dispatch.h"
#include "primitives/primitives.h"

#ifndef NUVEC_HD
#define NUVEC_HD
#endif

namespace nuvec::ew {

// Functors receive the compute type: acc_t<T> (float for the half types). A functor that is
// not invocable with a type does not support that dtype; the loops turn that into an error.
template <typename T>
concept Real = std::is_floating_point_v<T>;
template <typename T>
concept Complex = is_complex_v<T>;
template <typename T>
concept Inexact = Real<T> || Complex<T>;
template <typename T>
concept Integer = std::is_integral_v<T>; // bool included
template <typename T>
concept Arith = Real<T> || Integer<T>;
template <typename T>
concept Number = Arith<T> || Complex<T>;

/// Complex operands as std::complex<float>, so that operators resolve to the standard ones
/// (complex64_t also converts to array, which would make `a + b` ambiguous).
template <typename T>
NUVEC_HD const auto& arith(const T& x) {
  if constexpr (Complex<T>) return static_cast<const std::complex<float>&>(x);
  else return x;
}

/// The unsigned type signed-integer arithmetic runs in: signed overflow is undefined in C++,
/// while NumPy and MLX wrap modulo 2^bits. At least `unsigned` wide, so that int8/int16
/// (and uint16 * uint16) never promote to a signed int that could overflow; converting back
/// to the signed type wraps (C++20).
template <typename T>
using wrap_uint_t = std::conditional_t<
    (sizeof(T) < sizeof(unsigned)),
    unsigned,
    std::make_unsigned_t<T>>;

/// True for the integer types (bool excluded) whose + - * must wrap through wrap_uint_t.
template <typename T>
inline constexpr bool kWrapInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// e^x for float32 without calling libm, so the loop vectorises: x = n ln2 + r with
/// |r| <= ln2/2, e^r by a degree-6 polynomial (Cephes's expf coefficients, a minimax fit),
/// 2^n applied as two exact power-of-two factors so results down to the subnormals round
/// once. Max error ~1 ulp; overflow gives inf, underflow 0, NaN stays NaN.
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
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float y = p * s1 * s2;
  return x != x ? x : y;
}

// ---------------------------------------------------------------------------------------
// Unary

struct Abs {
  template <Number T>
  NUVEC_HD auto operator()(T x) const {
    if constexpr (Complex<T>) return std::abs(x);
    else if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (Real<T>) return std::fabs(x);
    else return static_cast<T>(x < 0 ? wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(x) : x);
  }
};
struct Negative {
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(x));
    else if constexpr (std::is_same_v<T, bool>) return x;
    else return static_cast<T>(-x);
  }
};
struct Sign {
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) {
      float m = std::abs(x);
      return m == 0 ? T(0) : T(x.real() / m, x.imag() / m);
    } else if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (std::is_unsigned_v<T>) {
      return x > 0 ? T(1) : T(0);
    } else if constexpr (Real<T>) {
      return x != x ? x : static_cast<T>((x > 0) - (x < 0));
    } else {
      return static_cast<T>((x > 0) - (x < 0));
    }
  }
};
struct Floor {
  template <Arith T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Real<T>) return std::floor(x);
    else return x;
  }
};
struct Ceil {
  template <Arith T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Real<T>) return std::ceil(x);
    else return x;
  }
};
/// Half to even (the default rounding mode), as NumPy's round.
struct Round {
  template <Arith T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Real<T>) return std::nearbyint(x);
    else return x;
  }
};
struct Sqrt {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return T(1.0f / std::sqrt(arith(x))); }
};
struct Square {
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(x) * wrap_uint_t<T>(x));
    else return static_cast<T>(arith(x) * arith(x));
  }
};
struct Exp {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return exp_f32(x);
    else return std::exp(x);
  }
};
struct Expm1 {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return std::expm1(x); }
};
struct Log {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::log(x); }
};
struct Log2 {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) return T(std::log(x) / 0.693147180559945309f);
    else return std::log2(x);
  }
};
struct Log10 {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::log10(x); }
};
struct Log1p {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return std::log1p(x); }
};
struct Sin {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::sin(x); }
};
struct Cos {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::cos(x); }
};
struct Tan {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::tan(x); }
};
struct ArcSin {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::asin(x); }
};
struct ArcCos {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::acos(x); }
};
struct ArcTan {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::atan(x); }
};
struct Sinh {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::sinh(x); }
};
struct Cosh {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::cosh(x); }
};
struct Tanh {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::tanh(x); }
};
struct ArcSinh {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::asinh(x); }
};
struct ArcCosh {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::acosh(x); }
};
struct ArcTanh {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return std::atanh(x); }
};
/// 1 / (1 + e^-x), written so neither branch overflows.
struct Sigmoid {
  template <Real T>
  NUVEC_HD T operator()(T x) const {
    if (x >= 0) return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  }
};
struct Erf {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return std::erf(x); }
};
/// The inverse error function: Giles's single-precision approximation ("Approximating the
/// erfinv function", GPU Computing Gems, 2011) as a start, then Newton steps on erf in
/// double, which make it accurate for float64 too.
struct ErfInv {
  template <Real T>
  NUVEC_HD T operator()(T x) const {
    if (x != x) return x;
    if (x <= T(-1)) return x == T(-1) ? -std::numeric_limits<T>::infinity()
                                      : std::numeric_limits<T>::quiet_NaN();
    if (x >= T(1)) return x == T(1) ? std::numeric_limits<T>::infinity()
                                    : std::numeric_limits<T>::quiet_NaN();
    double xd = static_cast<double>(x);
    double w = -std::log((1.0 - xd) * (1.0 + xd));
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
      w = std::sqrt(w) - 3.0;
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
      double err = std::erf(y) - xd;
      y -= err / (1.1283791670955126 * std::exp(-y * y));
    }
    return static_cast<T>(y);
  }
};
struct LogicalNot {
  template <Number T>
  NUVEC_HD bool operator()(T x) const {
    if constexpr (Complex<T>) return x.real() == 0 && x.imag() == 0;
    else return !x;
  }
};
struct BitwiseInvert {
  template <Integer T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return !x;
    else return static_cast<T>(~x);
  }
};
struct Conjugate {
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) return std::conj(x);
    else return x;
  }
};
struct RealPart {
  template <Complex T>
  NUVEC_HD float operator()(T x) const { return x.real(); }
};
struct ImagPart {
  template <Complex T>
  NUVEC_HD float operator()(T x) const { return x.imag(); }
};

/// Calls f(Functor{}) for the functor of op.
template <typename F>
decltype(auto) visit(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::Abs: return f(Abs{});
    case UnaryOp::Negative: return f(Negative{});
    case UnaryOp::Sign: return f(Sign{});
    case UnaryOp::Floor: return f(Floor{});
    case UnaryOp::Ceil: return f(Ceil{});
    case UnaryOp::Round: return f(Round{});
    case UnaryOp::Sqrt: return f(Sqrt{});
    case UnaryOp::Rsqrt: return f(Rsqrt{});
    case UnaryOp::Square: return f(Square{});
    case UnaryOp::Exp: return f(Exp{});
    case UnaryOp::Expm1: return f(Expm1{});
    case UnaryOp::Log: return f(Log{});
    case UnaryOp::Log2: return f(Log2{});
    case UnaryOp::Log10: return f(Log10{});
    case UnaryOp::Log1p: return f(Log1p{});
    case UnaryOp::Sin: return f(Sin{});
    case UnaryOp::Cos: return f(Cos{});
    case UnaryOp::Tan: return f(Tan{});
    case UnaryOp::ArcSin: return f(ArcSin{});
    case UnaryOp::ArcCos: return f(ArcCos{});
    case UnaryOp::ArcTan: return f(ArcTan{});
    case UnaryOp::Sinh: return f(Sinh{});
    case UnaryOp::Cosh: return f(Cosh{});
    case UnaryOp::Tanh: return f(Tanh{});
    case UnaryOp::ArcSinh: return f(ArcSinh{});
    case UnaryOp::ArcCosh: return f(ArcCosh{});
    case UnaryOp::ArcTanh: return f(ArcTanh{});
    case UnaryOp::Sigmoid: return f(Sigmoid{});
    case UnaryOp::Erf: return f(Erf{});
    case UnaryOp::ErfInv: return f(ErfInv{});
    case UnaryOp::LogicalNot: return f(LogicalNot{});
    case UnaryOp::BitwiseInvert: return f(BitwiseInvert{});
    case UnaryOp::Conjugate: return f(Conjugate{});
    case UnaryOp::Real: return f(RealPart{});
    case UnaryOp::Imag: return f(ImagPart{});
  }
  // The switch is exhaustive (-Werror=switch); an out-of-range value is a logic error,
  // never a silent other op.
  throw std::logic_error("[visit] unknown UnaryOp");
}

// ---------------------------------------------------------------------------------------
// Binary

struct Add {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) + wrap_uint_t<T>(b));
    else return static_cast<T>(arith(a) + arith(b));
  }
};
struct Subtract {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a != b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) - wrap_uint_t<T>(b));
    else return static_cast<T>(arith(a) - arith(b));
  }
};
struct Multiply {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) * wrap_uint_t<T>(b));
    else return static_cast<T>(arith(a) * arith(b));
  }
};
/// True division on inexact types (the op layer casts integers to float first).
struct Divide {
  template <Inexact T>
  NUVEC_HD T operator()(T a, T b) const { return T(arith(a) / arith(b)); }
};
/// NumPy's floor division: rounds toward -inf; integer division by zero gives 0.
struct FloorDivide {
  template <Arith T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return b ? a : false;
    } else if constexpr (Real<T>) {
      if (b == 0) return a / b;
      T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
      if (div == 0) return std::copysign(T(0), a / b);
      T fl = std::floor(div);
      return div - fl > T(0.5) ? fl + T(1) : fl;
    } else if constexpr (std::is_unsigned_v<T>) {
      return b == 0 ? T(0) : static_cast<T>(a / b);
    } else {
      if (b == 0) return T(0);
      // min / -1 traps; negating through the unsigned type wraps it to min, as NumPy.
      if (b == T(-1)) return static_cast<T>(wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(a));
      T q = static_cast<T>(a / b);
      return static_cast<T>((a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);
    }
  }
};
/// NumPy's remainder: the result has the divisor's sign; integer remainder by zero is 0,
/// float remainder by zero NaN.
struct Remainder {
  template <Arith T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else if constexpr (Real<T>) {
      if (b == 0) return std::fmod(a, b);
      T mod = std::fmod(a, b);
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
      } else {
        mod = std::copysign(T(0), b);
      }
      return mod;
    } else if constexpr (std::is_unsigned_v<T>) {
      return b == 0 ? T(0) : static_cast<T>(a % b);
    } else {
      if (b == 0 || b == T(-1)) return T(0);
      T r = static_cast<T>(a % b);
      return static_cast<T>((r != 0 && ((r < 0) != (b < 0))) ? r + b : r);
    }
  }
};
/// a ** b. Integers: exact by squaring (wrapping on overflow); a negative exponent gives
/// 1 / a^|b| truncated (0 unless |a| == 1).
struct Power {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (Inexact<T>) {
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      using U = std::make_unsigned_t<T>;
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) {
          if (a == 1) return T(1);
          if (a == -1) return (b & 1) ? T(-1) : T(1);
          return T(0);
        }
      }
      U base = static_cast<U>(a), result = 1;
      for (auto e = static_cast<U>(b); e; e >>= 1) {
        if (e & 1) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
      }
      return static_cast<T>(result);
    }
  }
};
/// NaN-propagating maximum (NumPy's maximum); complex numbers compare lexicographically.
struct Maximum {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (Real<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a > b ? a : b;
  }
};
struct Minimum {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (Real<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? a : b;
  }
};
/// log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities return themselves. Complex
/// operands (MLX's rule): the lexicographic max plus log(1 + e^(min - max)), and the max
/// itself when the min is -inf or the max +inf (both on the real axis).
struct LogAddExp {
  template <Real T>
  NUVEC_HD T operator()(T a, T b) const {
    if (a != a || b != b) return a + b;
    T hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == lo && std::isinf(hi)) return hi; // inf - inf would be NaN below
    return hi + std::log1p(std::exp(lo - hi));
  }
  template <Complex T>
  NUVEC_HD T operator()(T a, T b) const {
    using C = std::complex<float>;
    const C x = arith(a), y = arith(b);
    const bool x_hi = x.real() > y.real() || (x.real() == y.real() && x.imag() > y.imag());
    const C hi = x_hi ? x : y, lo = x_hi ? y : x;
    const float inf = std::numeric_limits<float>::infinity();
    if (lo == C(-inf) || hi == C(inf)) return T(hi);
    return T(hi + std::log(C(1) + std::exp(lo - hi)));
  }
};
struct ArcTan2 {
  template <Real T>
  NUVEC_HD T operator()(T a, T b) const { return std::atan2(a, b); }
};
struct Equal {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return arith(a) == arith(b); }
};
/// Equality with NaN equal to NaN (array_equal with equal_nan).
struct NaNEqual {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const {
    if constexpr (Real<T>) return a == b || (a != a && b != b);
    else if constexpr (Complex<T>) {
      auto same = [](float x, float y) { return x == y || (x != x && y != y); };
      return same(a.real(), b.real()) && same(a.imag(), b.imag());
    } else return a == b;
  }
};
struct NotEqual {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return arith(a) != arith(b); }
};
struct Less {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return a < b; }
};
struct LessEqual {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return a <= b; }
};
struct Greater {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return a > b; }
};
struct GreaterEqual {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return a >= b; }
};
struct LogicalAnd {
  template <Integer T>
  NUVEC_HD bool operator()(T a, T b) const { return a && b; }
};
struct LogicalOr {
  template <Integer T>
  NUVEC_HD bool operator()(T a, T b) const { return a || b; }
};
struct BitwiseAnd {
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitwiseOr {
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitwiseXor {
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
/// Shifts by a count outside [0, bits) give 0 (or -1 for right shifts of negatives), as
/// NumPy's, instead of C++'s undefined behaviour.
struct LeftShift {
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr int bits = 8 * sizeof(T);
      if (b < 0 || b >= bits) return T(0);
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) << b));
    }
  }
};
struct RightShift {
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr int bits = 8 * sizeof(T);
      if (b < 0 || b >= bits) return (std::is_signed_v<T> && a < 0) ? T(-1) : T(0);
      return static_cast<T>(a >> b);
    }
  }
};

/// Calls f(Functor{}) for the functor of op.
template <typename F>
decltype(auto) visit(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Add: return f(Add{});
    case BinaryOp::Subtract: return f(Subtract{});
    case BinaryOp::Multiply: return f(Multiply{});
    case BinaryOp::Divide: return f(Divide{});
    case BinaryOp::FloorDivide: return f(FloorDivide{});
    case BinaryOp::Remainder: return f(Remainder{});
    case BinaryOp::Power: return f(Power{});
    case BinaryOp::Maximum: return f(Maximum{});
    case BinaryOp::Minimum: return f(Minimum{});
    case BinaryOp::LogAddExp: return f(LogAddExp{});
    case BinaryOp::ArcTan2: return f(ArcTan2{});
    case BinaryOp::Equal: return f(Equal{});
    case BinaryOp::NaNEqual: return f(NaNEqual{});
    case BinaryOp::NotEqual: return f(NotEqual{});
    case BinaryOp::Less: return f(Less{});
    case BinaryOp::LessEqual: return f(LessEqual{});
    case BinaryOp::Greater: return f(Greater{});
    case BinaryOp::GreaterEqual: return f(GreaterEqual{});
    case BinaryOp::LogicalAnd: return f(LogicalAnd{});
    case BinaryOp::LogicalOr: return f(LogicalOr{});
    case BinaryOp::BitwiseAnd: return f(BitwiseAnd{});
    case BinaryOp::BitwiseOr: return f(BitwiseOr{});
    case BinaryOp::BitwiseXor: return f(BitwiseXor{});
    case BinaryOp::LeftShift: return f(LeftShift{});
    case BinaryOp::RightShift: return f(RightShift{});
  }
  throw std::logic_error("[visit] unknown BinaryOp"); // exhaustive switch above
}

/// The element type a functor writes for input element type T: T itself when the functor
/// returns T's compute type (so half types round back), else what it returns (bool for
/// comparisons, float for |complex|).
template <typename Op, typename T, typename... More>
using result_elem_t = std::conditional_t<
    std::is_same_v<std::invoke_result_t<Op, acc_t<T>, More...>, acc_t<T>>,
    T,
    std::invoke_result_t<Op, acc_t<T>, More...>>;

} // namespace nuvec::ew
