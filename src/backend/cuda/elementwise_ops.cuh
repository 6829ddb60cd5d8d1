// nuvec: the device side of the element-wise math: the element conversion rule (cast_to,
// NumPy's, as backend/common/dispatch.h), float32/float64 overloads of the CUDA math library,
// and one functor per UnaryOp/BinaryOp with `visit(op, f)`. Each functor restates the CPU
// functor of backend/common/elementwise_ops.h (the semantics' source) for the device types of
// kernel_utils.cuh: same rules, same supported dtypes (a functor not invocable with a compute
// type rejects that dtype), CUDA's accurate math functions instead of libm.
#pragma once

#include <stdexcept>

#include <cuda/std/complex>
#include <cuda/std/limits>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"

namespace nuvec::cu {

// ---------------------------------------------------------------------------------------
// Element conversions

/// A half value widened to float (the type half arithmetic runs in).
__device__ __forceinline__ float half_to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float half_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/// A float rounded to nearest-even into the half type H (NaN stays NaN, overflow is inf),
/// as float16_t/bfloat16_t's constructors do on the host.
template <typename H>
__device__ __forceinline__ H float_to_half(float v) {
  if constexpr (std::is_same_v<H, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

/// The compute value of an element: float for the half types, the element itself otherwise.
template <typename T>
__device__ __forceinline__ device_acc_t<T> to_acc(T v) {
  if constexpr (is_half_device_v<T>) return half_to_float(v);
  else return v;
}

/// A functor result stored as element type O: rounded into a half type, else converted as
/// the CPU loops' static_cast<O> does (the functors return O's compute type or O itself).
template <typename O, typename R>
__device__ __forceinline__ O store_as(R r) {
  if constexpr (is_half_device_v<O>) return float_to_half<O>(static_cast<float>(r));
  else return static_cast<O>(r);
}

/// Converts one element between device element types with the rules of nuvec::cast_to
/// (backend/common/dispatch.h, NumPy's): to bool is "!= 0" (either part for complex);
/// complex to real takes the real part; real to complex goes through float; halves convert
/// through float (so double -> half rounds twice, as on the host); float -> integer truncates
/// where it fits, gives 0 for NaN, wraps out-of-range values into unsigned targets modulo
/// 2^bits and clamps them to a signed target's range;
/// everything else is C++'s static_cast (integers wrap).
template <typename To, typename From>
__device__ __forceinline__ To cast_to(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_complex_device_v<From>) return v.real() != 0.0f || v.imag() != 0.0f;
    else if constexpr (is_half_device_v<From>) return half_to_float(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (is_complex_device_v<To>) {
    if constexpr (is_half_device_v<From>) return To(half_to_float(v), 0.0f);
    else return To(static_cast<float>(v), 0.0f);
  } else if constexpr (is_complex_device_v<From>) {
    return cast_to<To>(v.real());
  } else if constexpr (is_half_device_v<From>) {
    return cast_to<To>(half_to_float(v));
  } else if constexpr (is_half_device_v<To>) {
    return float_to_half<To>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // C++ leaves NaN and out-of-range conversions undefined; the host defines them this way
    // (backend/common/dispatch.h: unsigned targets wrap, signed ones clamp).
    if (!(v == v)) return To(0);
    if constexpr (std::is_unsigned_v<To>) {
      if (v >= static_cast<From>(18446744073709551616.0)) {
        return cuda::std::numeric_limits<To>::max();
      }
      if (v >= 0) return static_cast<To>(static_cast<unsigned long long>(v));
      if (v <= static_cast<From>(-9223372036854775808.0)) return To(0);
      return static_cast<To>(static_cast<unsigned long long>(static_cast<long long>(v)));
    }
    if (v <= static_cast<From>(cuda::std::numeric_limits<To>::lowest())) {
      return cuda::std::numeric_limits<To>::lowest();
    }
    if (v >= static_cast<From>(cuda::std::numeric_limits<To>::max())) {
      return cuda::std::numeric_limits<To>::max();
    }
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// ---------------------------------------------------------------------------------------
// The CUDA math library by overload: f(float) calls the accurate float32 function (expf, not
// the __expf intrinsic), f(double) the float64 one, so functors stay generic over Real T.

namespace dmath {

#define NUVEC_DMATH1(name)                                                             \
  __device__ __forceinline__ float name(float x) { return ::name##f(x); }              \
  __device__ __forceinline__ double name(double x) { return ::name(x); }
#define NUVEC_DMATH2(name)                                                             \
  __device__ __forceinline__ float name(float x, float y) { return ::name##f(x, y); }  \
  __device__ __forceinline__ double name(double x, double y) { return ::name(x, y); }

NUVEC_DMATH1(fabs)
NUVEC_DMATH1(floor)
NUVEC_DMATH1(ceil)
NUVEC_DMATH1(rint) // round half to even under the default rounding mode, as nearbyint
NUVEC_DMATH1(sqrt)
NUVEC_DMATH1(exp)
NUVEC_DMATH1(expm1)
NUVEC_DMATH1(log)
NUVEC_DMATH1(log2)
NUVEC_DMATH1(log10)
NUVEC_DMATH1(log1p)
NUVEC_DMATH1(sin)
NUVEC_DMATH1(cos)
NUVEC_DMATH1(tan)
NUVEC_DMATH1(asin)
NUVEC_DMATH1(acos)
NUVEC_DMATH1(atan)
NUVEC_DMATH1(sinh)
NUVEC_DMATH1(cosh)
NUVEC_DMATH1(tanh)
NUVEC_DMATH1(asinh)
NUVEC_DMATH1(acosh)
NUVEC_DMATH1(atanh)
NUVEC_DMATH1(erf)
NUVEC_DMATH1(erfinv)
NUVEC_DMATH2(fmod)
NUVEC_DMATH2(copysign)
NUVEC_DMATH2(pow)
NUVEC_DMATH2(atan2)

#undef NUVEC_DMATH1
#undef NUVEC_DMATH2

__device__ __forceinline__ bool isinf(float x) { return ::isinf(x); }
__device__ __forceinline__ bool isinf(double x) { return ::isinf(x); }

} // namespace dmath

// ---------------------------------------------------------------------------------------
// Functors. They receive the compute type (device_acc_t<T>: float for the half types).

namespace ew {

template <typename T>
concept Real = std::is_floating_point_v<T>;
template <typename T>
concept Complex = is_complex_device_v<T>;
template <typename T>
concept Inexact = Real<T> || Complex<T>;
template <typename T>
concept Integer = std::is_integral_v<T>; // bool included
template <typename T>
concept Arith = Real<T> || Integer<T>;
template <typename T>
concept Number = Arith<T> || Complex<T>;

/// The unsigned type integer + - * run in, so that they wrap modulo 2^bits as NumPy's do
/// (signed overflow is undefined in C++): at least `unsigned` wide so that narrow types never
/// promote to a signed int that could overflow.
template <typename T>
using wrap_uint_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// True for the integer types (bool excluded) whose + - * must wrap through wrap_uint_t.
template <typename T>
inline constexpr bool kWrapInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// NumPy's lexicographic order of complex numbers (complex64_t's operator<).
__device__ __forceinline__ bool complex_less(const complex64& a, const complex64& b) {
  return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
}

/// a < b for any Number: lexicographic for complex.
template <typename T>
__device__ __forceinline__ bool less_than(const T& a, const T& b) {
  if constexpr (Complex<T>) return complex_less(a, b);
  else return a < b;
}

/// Functors whose integer results depend only on the operands' bits, not on their
/// signedness, declare `static constexpr bool kSignFree = true`; the launchers then run
/// signed integers through the unsigned kernel of the same width (half the instantiations).
template <typename Op>
concept SignFree = Op::kSignFree;

// ---- unary ------------------------------------------------------------------------------

// Return types are spelled out: the host pass of nvcc, which reads them through
// std::invoke_result, does not see __device__ bodies and would deduce `auto` as void.

/// |x|: the magnitude (float32) for complex, wrapping for the most negative integer.
struct Abs {
  template <Number T>
  __device__ std::conditional_t<Complex<T>, float, T> operator()(T x) const {
    if constexpr (Complex<T>) return cuda::std::abs(x);
    else if constexpr (std::is_unsigned_v<T>) return x; // bool included
    else if constexpr (Real<T>) return dmath::fabs(x);
    else return static_cast<T>(x < 0 ? wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(x) : x);
  }
};
/// -x, wrapping for integers; bool is unchanged (the op layer rejects it).
struct Negative {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ T operator()(T x) const {
    if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(x));
    else if constexpr (std::is_same_v<T, bool>) return x;
    else return static_cast<T>(-x);
  }
};
/// -1, 0 or 1 (NaN stays NaN); x / |x| for complex (0 at 0).
struct Sign {
  template <Number T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) {
      float m = cuda::std::abs(x);
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
/// Rounding toward -inf; integers are unchanged.
struct Floor {
  template <Arith T>
  __device__ T operator()(T x) const {
    if constexpr (Real<T>) return dmath::floor(x);
    else return x;
  }
};
/// Rounding toward +inf; integers are unchanged.
struct Ceil {
  template <Arith T>
  __device__ T operator()(T x) const {
    if constexpr (Real<T>) return dmath::ceil(x);
    else return x;
  }
};
/// Half to even, as NumPy's round.
struct Round {
  template <Arith T>
  __device__ T operator()(T x) const {
    if constexpr (Real<T>) return dmath::rint(x);
    else return x;
  }
};
/// The principal square root.
struct Sqrt {
  template <Inexact T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return cuda::std::sqrt(x);
    else return dmath::sqrt(x);
  }
};
/// 1 / sqrt(x), correctly rounded division (not the rsqrt approximation), as on the host.
struct Rsqrt {
  template <Inexact T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return T(1.0f / cuda::std::sqrt(x));
    else return T(1) / dmath::sqrt(x);
  }
};
/// x * x, wrapping for integers.
struct Square {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(x) * wrap_uint_t<T>(x));
    else return static_cast<T>(x * x);
  }
};
/// e^x (expf / exp, the accurate library functions).
struct Exp {
  template <Inexact T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return cuda::std::exp(x);
    else return dmath::exp(x);
  }
};
/// e^x - 1, accurate near 0.
struct Expm1 {
  template <Real T>
  __device__ T operator()(T x) const { return dmath::expm1(x); }
};
/// The natural logarithm (principal branch for complex).
struct Log {
  template <Inexact T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return cuda::std::log(x);
    else return dmath::log(x);
  }
};
/// The base-2 logarithm; log(x) / ln 2 for complex, as the host.
struct Log2 {
  template <Inexact T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return T(cuda::std::log(x) / 0.693147180559945309f);
    else return dmath::log2(x);
  }
};
/// The base-10 logarithm.
struct Log10 {
  template <Inexact T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return cuda::std::log10(x);
    else return dmath::log10(x);
  }
};
/// log(1 + x), accurate near 0.
struct Log1p {
  template <Real T>
  __device__ T operator()(T x) const { return dmath::log1p(x); }
};

// The trigonometric and hyperbolic functions: the same shape for each.
#define NUVEC_EW_INEXACT_UNARY(Name, fn)                          \
  struct Name {                                                   \
    template <Inexact T>                                          \
    __device__ T operator()(T x) const {                          \
      if constexpr (Complex<T>) return cuda::std::fn(x);          \
      else return dmath::fn(x);                                   \
    }                                                             \
  };
NUVEC_EW_INEXACT_UNARY(Sin, sin)
NUVEC_EW_INEXACT_UNARY(Cos, cos)
NUVEC_EW_INEXACT_UNARY(Tan, tan)
NUVEC_EW_INEXACT_UNARY(ArcSin, asin)
NUVEC_EW_INEXACT_UNARY(ArcCos, acos)
NUVEC_EW_INEXACT_UNARY(ArcTan, atan)
NUVEC_EW_INEXACT_UNARY(Sinh, sinh)
NUVEC_EW_INEXACT_UNARY(Cosh, cosh)
NUVEC_EW_INEXACT_UNARY(Tanh, tanh)
NUVEC_EW_INEXACT_UNARY(ArcSinh, asinh)
NUVEC_EW_INEXACT_UNARY(ArcCosh, acosh)
NUVEC_EW_INEXACT_UNARY(ArcTanh, atanh)
#undef NUVEC_EW_INEXACT_UNARY

/// 1 / (1 + e^-x), written so neither branch overflows.
struct Sigmoid {
  template <Real T>
  __device__ T operator()(T x) const {
    if (x >= 0) return T(1) / (T(1) + dmath::exp(-x));
    T e = dmath::exp(x);
    return e / (T(1) + e);
  }
};
/// The error function.
struct Erf {
  template <Real T>
  __device__ T operator()(T x) const { return dmath::erf(x); }
};
/// The inverse error function: CUDA's erfinvf/erfinv (±1 give ±inf, |x| > 1 and NaN give
/// NaN, as the host's Giles-plus-Newton version).
struct ErfInv {
  template <Real T>
  __device__ T operator()(T x) const { return dmath::erfinv(x); }
};
/// x == 0 as bool (both parts for complex).
struct LogicalNot {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ bool operator()(T x) const {
    if constexpr (Complex<T>) return x.real() == 0 && x.imag() == 0;
    else return !x;
  }
};
/// ~x; logical not for bool.
struct BitwiseInvert {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return !x;
    else return static_cast<T>(~x);
  }
};
/// The complex conjugate; real inputs are unchanged.
struct Conjugate {
  template <Number T>
  __device__ T operator()(T x) const {
    if constexpr (Complex<T>) return cuda::std::conj(x);
    else return x;
  }
};
/// Re z (float32).
struct RealPart {
  template <Complex T>
  __device__ float operator()(T x) const { return x.real(); }
};
/// Im z (float32).
struct ImagPart {
  template <Complex T>
  __device__ float operator()(T x) const { return x.imag(); }
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

// ---- binary -----------------------------------------------------------------------------

/// a + b, wrapping for integers; logical or for bool.
struct Add {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) + wrap_uint_t<T>(b));
    else return static_cast<T>(a + b);
  }
};
/// a - b, wrapping for integers; a != b for bool.
struct Subtract {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a != b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) - wrap_uint_t<T>(b));
    else return static_cast<T>(a - b);
  }
};
/// a * b, wrapping for integers; logical and for bool.
struct Multiply {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) * wrap_uint_t<T>(b));
    else return static_cast<T>(a * b);
  }
};
/// True division on inexact types (the op layer casts integers to float first).
struct Divide {
  template <Inexact T>
  __device__ T operator()(T a, T b) const { return T(a / b); }
};
/// NumPy's floor division: rounds toward -inf; integer division by zero gives 0.
struct FloorDivide {
  template <Arith T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return b ? a : false;
    } else if constexpr (Real<T>) {
      if (b == 0) return a / b;
      T mod = dmath::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
      if (div == 0) return dmath::copysign(T(0), a / b);
      T fl = dmath::floor(div);
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
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else if constexpr (Real<T>) {
      if (b == 0) return dmath::fmod(a, b);
      T mod = dmath::fmod(a, b);
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
      } else {
        mod = dmath::copysign(T(0), b);
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
  __device__ T operator()(T a, T b) const {
    if constexpr (Complex<T>) {
      return cuda::std::pow(a, b);
    } else if constexpr (Real<T>) {
      return dmath::pow(a, b);
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
  __device__ T operator()(T a, T b) const {
    if constexpr (Real<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return less_than(b, a) ? a : b;
  }
};
/// NaN-propagating minimum (NumPy's minimum); complex numbers compare lexicographically.
struct Minimum {
  template <Number T>
  __device__ T operator()(T a, T b) const {
    if constexpr (Real<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return less_than(a, b) ? a : b;
  }
};
/// log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities return themselves.
struct LogAddExp {
  template <Real T>
  __device__ T operator()(T a, T b) const {
    if (a != a || b != b) return a + b;
    T hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == lo && dmath::isinf(hi)) return hi; // inf - inf would be NaN below
    return hi + dmath::log1p(dmath::exp(lo - hi));
  }
  /// Complex operands: the host's rule (backend/common/elementwise_ops.h).
  template <Complex T>
  __device__ T operator()(T a, T b) const {
    const bool b_hi = less_than(a, b);
    const T hi = b_hi ? b : a, lo = b_hi ? a : b;
    const float inf = cuda::std::numeric_limits<float>::infinity();
    if (lo == T(-inf) || hi == T(inf)) return hi;
    return hi + cuda::std::log(T(1) + cuda::std::exp(lo - hi));
  }
};
/// The angle of (b, a), in (-pi, pi].
struct ArcTan2 {
  template <Real T>
  __device__ T operator()(T a, T b) const { return dmath::atan2(a, b); }
};
/// a == b (both parts for complex; NaN unequal to everything).
struct Equal {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ bool operator()(T a, T b) const { return a == b; }
};
/// Equality with NaN equal to NaN (array_equal with equal_nan).
struct NaNEqual {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ bool operator()(T a, T b) const {
    if constexpr (Real<T>) {
      return a == b || (a != a && b != b);
    } else if constexpr (Complex<T>) {
      auto same = [](float x, float y) { return x == y || (x != x && y != y); };
      return same(a.real(), b.real()) && same(a.imag(), b.imag());
    } else {
      return a == b;
    }
  }
};
/// a != b.
struct NotEqual {
  static constexpr bool kSignFree = true;
  template <Number T>
  __device__ bool operator()(T a, T b) const { return a != b; }
};
// Orderings: complex64_t's lexicographic operators (<= is !(b < a), >= is !(a < b)).
struct Less {
  template <Number T>
  __device__ bool operator()(T a, T b) const { return less_than(a, b); }
};
struct LessEqual {
  template <Number T>
  __device__ bool operator()(T a, T b) const {
    if constexpr (Complex<T>) return !complex_less(b, a);
    else return a <= b;
  }
};
struct Greater {
  template <Number T>
  __device__ bool operator()(T a, T b) const { return less_than(b, a); }
};
struct GreaterEqual {
  template <Number T>
  __device__ bool operator()(T a, T b) const {
    if constexpr (Complex<T>) return !complex_less(a, b);
    else return a >= b;
  }
};
/// a && b as bool (integers and bool only, as the host).
struct LogicalAnd {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ bool operator()(T a, T b) const { return a && b; }
};
/// a || b as bool (integers and bool only, as the host).
struct LogicalOr {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ bool operator()(T a, T b) const { return a || b; }
};
/// a & b.
struct BitwiseAnd {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
/// a | b.
struct BitwiseOr {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
/// a ^ b.
struct BitwiseXor {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
/// Shifts by a count outside [0, bits) give 0 (or -1 for right shifts of negatives), as
/// NumPy's. Left shifts are sign-free: a negative count read unsigned is >= bits, and both
/// give 0.
struct LeftShift {
  static constexpr bool kSignFree = true;
  template <Integer T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr int bits = 8 * sizeof(T);
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) return T(0);
      }
      if (b >= bits) return T(0);
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) << b));
    }
  }
};
/// a >> b: arithmetic for signed types.
struct RightShift {
  template <Integer T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr int bits = 8 * sizeof(T);
      bool out_of_range = b >= bits;
      if constexpr (std::is_signed_v<T>) out_of_range = out_of_range || b < 0;
      if (out_of_range) {
        if constexpr (std::is_signed_v<T>) return a < 0 ? T(-1) : T(0);
        else return T(0);
      }
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

// ---- element types ------------------------------------------------------------------------

/// The element type a functor writes for input element type T: T when the functor returns
/// T's compute type (so half types round back), else what it returns (bool for predicates,
/// float for |complex|, Re and Im) — backend/common/elementwise_ops.h's result_elem_t.
template <typename Op, typename T, int Arity>
struct ResultElem;
template <typename Op, typename T>
struct ResultElem<Op, T, 1> {
  using R = std::invoke_result_t<Op, device_acc_t<T>>;
  using type = std::conditional_t<std::is_same_v<R, device_acc_t<T>>, T, R>;
};
template <typename Op, typename T>
struct ResultElem<Op, T, 2> {
  using R = std::invoke_result_t<Op, device_acc_t<T>, device_acc_t<T>>;
  using type = std::conditional_t<std::is_same_v<R, device_acc_t<T>>, T, R>;
};
template <typename Op, typename T, int Arity>
using result_elem_t = typename ResultElem<Op, T, Arity>::type;

/// The element type the kernels of Op run on for dtype element type T: the unsigned type of
/// the same width for signed integers under a SignFree op (identical bits), else T.
template <typename Op, typename T>
struct KernelElem {
  using type = T;
};
template <SignFree Op, typename T>
  requires(std::is_integral_v<T> && std::is_signed_v<T>)
struct KernelElem<Op, T> {
  using type = std::make_unsigned_t<T>;
};
template <typename Op, typename T>
using kernel_elem_t = typename KernelElem<Op, T>::type;

} // namespace ew

} // namespace nuvec::cu
