// nuvec: one functor per UnaryOp, for the CPU and CUDA kernels alike, and `visit(op, f)`,
// generated from the op table (include/nuvec/op_tables.h). Semantics: NumPy's for plain
// math, MLX's elsewhere. A functor receives the compute type (compute_t: float for the half
// types); one that is not invocable with a type does not support that dtype, and the
// kernels turn that into an error.
//
// Return types are spelled out: nvcc's host pass reads them through std::invoke_result.
#pragma once

#include "backend/common/math/functions.h"
#include "nuvec/op_tables.h"

namespace nuvec::math {
/// Throws std::logic_error naming the family: an op enum value outside its table reached a
/// visit (defined in visit_error.cpp, so that this header needs no <stdexcept>).
[[noreturn]] void throw_unknown_op(const char* family);
} // namespace nuvec::math

NUVEC_MATH_BEGIN

// Functors whose integer results depend only on the operands' bits, not on their
// signedness, declare `static constexpr bool kSignFree = true`; the CUDA launchers then run
// signed integers through the unsigned kernel of the same width (half the instantiations).

/// |x|: the magnitude (float32) for complex, wrapping for the most negative integer.
struct Abs {
  template <Number T>
  NUVEC_HD std::conditional_t<Complex<T>, float, T> operator()(T x) const {
    if constexpr (Complex<T>) return math::abs(x);
    else if constexpr (std::is_unsigned_v<T>) return x; // bool included
    else if constexpr (Real<T>) return math::fabs(x);
    else return static_cast<T>(x < 0 ? wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(x) : x);
  }
};
/// -x, wrapping for integers; bool is unchanged (the op layer rejects it).
struct Negative {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(x));
    else if constexpr (std::is_same_v<T, bool>) return x;
    else return T(-arith(x));
  }
};
/// -1, 0 or 1 (NaN stays NaN); x / |x| for complex (0 at 0).
struct Sign {
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) {
      float m = math::abs(x);
      return m == 0 ? T(0.0f, 0.0f) : T(x.real() / m, x.imag() / m);
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
  NUVEC_HD T operator()(T x) const {
    if constexpr (Real<T>) return math::floor(x);
    else return x;
  }
};
/// Rounding toward +inf; integers are unchanged.
struct Ceil {
  template <Arith T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Real<T>) return math::ceil(x);
    else return x;
  }
};
/// Half to even, as NumPy's round; integers are unchanged.
struct Round {
  template <Arith T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Real<T>) return math::rint(x);
    else return x;
  }
};
/// The principal square root.
struct Sqrt {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return math::sqrt(x); }
};
/// 1 / sqrt(x), a correctly rounded division (not an rsqrt approximation).
struct Rsqrt {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) return T(1.0f / arith(math::sqrt(x)));
    else return T(1) / math::sqrt(x);
  }
};
/// x * x, wrapping for integers.
struct Square {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(x) * wrap_uint_t<T>(x));
    else return T(arith(x) * arith(x));
  }
};
/// e^x. float32 on the host runs exp_f32, the libm-free version that vectorises (within
/// ~1 ulp, as CUDA's expf on the device); everything else the library's exp.
struct Exp {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const {
#if !NUVEC_MATH_DEVICE
    if constexpr (std::is_same_v<T, float>) return exp_f32(x);
#endif
    return math::exp(x);
  }
};
/// e^x - 1, accurate near 0.
struct Expm1 {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return math::expm1(x); }
};
/// The natural logarithm (principal branch for complex).
struct Log {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return math::log(x); }
};
/// The base-2 logarithm; log(x) / ln 2 for complex.
struct Log2 {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) return T(arith(math::log(x)) / 0.693147180559945309f);
    else return math::log2(x);
  }
};
/// The base-10 logarithm.
struct Log10 {
  template <Inexact T>
  NUVEC_HD T operator()(T x) const { return math::log10(x); }
};
/// log(1 + x), accurate near 0.
struct Log1p {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return math::log1p(x); }
};

// The trigonometric and hyperbolic functions and their inverses: one shape for each.
#define NUVEC_MATH_INEXACT_UNARY(Name, fn)                 \
  struct Name {                                            \
    template <Inexact T>                                   \
    NUVEC_HD T operator()(T x) const { return math::fn(x); } \
  };
NUVEC_MATH_INEXACT_UNARY(Sin, sin)
NUVEC_MATH_INEXACT_UNARY(Cos, cos)
NUVEC_MATH_INEXACT_UNARY(Tan, tan)
NUVEC_MATH_INEXACT_UNARY(ArcSin, asin)
NUVEC_MATH_INEXACT_UNARY(ArcCos, acos)
NUVEC_MATH_INEXACT_UNARY(ArcTan, atan)
NUVEC_MATH_INEXACT_UNARY(Sinh, sinh)
NUVEC_MATH_INEXACT_UNARY(Cosh, cosh)
NUVEC_MATH_INEXACT_UNARY(Tanh, tanh)
NUVEC_MATH_INEXACT_UNARY(ArcSinh, asinh)
NUVEC_MATH_INEXACT_UNARY(ArcCosh, acosh)
NUVEC_MATH_INEXACT_UNARY(ArcTanh, atanh)
#undef NUVEC_MATH_INEXACT_UNARY

/// 1 / (1 + e^-x), written so neither branch overflows.
struct Sigmoid {
  template <Real T>
  NUVEC_HD T operator()(T x) const {
    if (x >= 0) return T(1) / (T(1) + math::exp(-x));
    T e = math::exp(x);
    return e / (T(1) + e);
  }
};
/// The error function.
struct Erf {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return math::erf(x); }
};
/// The inverse error function (functions.h).
struct ErfInv {
  template <Real T>
  NUVEC_HD T operator()(T x) const { return math::erfinv(x); }
};
/// x == 0 as bool (both parts for complex).
struct LogicalNot {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD bool operator()(T x) const {
    if constexpr (Complex<T>) return x.real() == 0 && x.imag() == 0;
    else return !x;
  }
};
/// ~x; logical not for bool.
struct BitwiseInvert {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return !x;
    else return static_cast<T>(~x);
  }
};
/// The complex conjugate; real inputs are unchanged.
struct Conjugate {
  template <Number T>
  NUVEC_HD T operator()(T x) const {
    if constexpr (Complex<T>) return math::conj(x);
    else return x;
  }
};
/// Re z (float32).
struct RealPart {
  template <Complex T>
  NUVEC_HD float operator()(T x) const { return x.real(); }
};
/// Im z (float32).
struct ImagPart {
  template <Complex T>
  NUVEC_HD float operator()(T x) const { return x.imag(); }
};

/// Calls f(Functor{}) for the functor of op (the switch is generated from the op table, so
/// it is exhaustive by construction; an out-of-range value throws, never runs another op).
template <typename F>
decltype(auto) visit(UnaryOp op, F&& f) {
  switch (op) {
#define NUVEC_MATH_VISIT(o, functor, kind) \
  case UnaryOp::o: return f(functor{});
    NUVEC_UNARY_OPS(NUVEC_MATH_VISIT)
#undef NUVEC_MATH_VISIT
  }
  throw_unknown_op("UnaryOp");
}

NUVEC_MATH_END
