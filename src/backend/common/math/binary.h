// nuvec: one functor per BinaryOp, for the CPU and CUDA kernels alike, and `visit(op, f)`,
// generated from the op table (include/nuvec/op_tables.h). Semantics: NumPy's for plain
// math (floor division and remainder round toward -inf, integer division by zero gives 0,
// NaN propagates through maximum/minimum, complex numbers order lexicographically), MLX's
// elsewhere. Functors receive the compute type (compute_t), as in unary.h.
#pragma once

#include "backend/common/math/unary.h"

NUVEC_MATH_BEGIN

/// a + b, wrapping for integers; logical or for bool.
struct Add {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) + wrap_uint_t<T>(b));
    else return T(arith(a) + arith(b));
  }
};
/// a - b, wrapping for integers; a != b for bool.
struct Subtract {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a != b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) - wrap_uint_t<T>(b));
    else return T(arith(a) - arith(b));
  }
};
/// a * b, wrapping for integers; logical and for bool.
struct Multiply {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else if constexpr (kWrapInt<T>) return static_cast<T>(wrap_uint_t<T>(a) * wrap_uint_t<T>(b));
    else return T(arith(a) * arith(b));
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
      T mod = math::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
      if (div == 0) return math::copysign(T(0), a / b);
      T fl = math::floor(div);
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
      if (b == 0) return math::fmod(a, b);
      T mod = math::fmod(a, b);
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
      } else {
        mod = math::copysign(T(0), b);
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
      return math::pow(a, b);
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
/// NaN-propagating maximum (kMax) or minimum, NumPy's maximum/minimum: a NaN operand (a
/// complex one with either part NaN) is the result, whichever side it is on; complex numbers
/// compare lexicographically.
template <bool kMax>
struct Extremum {
  template <Number T>
  NUVEC_HD T operator()(T a, T b) const {
    if constexpr (Inexact<T>) {
      if (is_nan(a)) return a;
      if (is_nan(b)) return b;
    }
    return (kMax ? less_than(b, a) : less_than(a, b)) ? a : b;
  }
};
struct Maximum : Extremum<true> {};
struct Minimum : Extremum<false> {};
/// log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities return themselves. Complex
/// operands (MLX's rule): the lexicographic max plus log(1 + e^(min - max)), and the max
/// itself when the min is -inf or the max +inf (both on the real axis).
struct LogAddExp {
  template <Real T>
  NUVEC_HD T operator()(T a, T b) const {
    if (a != a || b != b) return a + b;
    T hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == lo && math::is_inf(hi)) return hi; // inf - inf would be NaN below
    return hi + math::log1p(math::exp(lo - hi));
  }
  template <Complex T>
  NUVEC_HD T operator()(T a, T b) const {
    using C = complex_lib_t;
    // NaN propagates, as for real operands (the order below would drop it on one side).
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    const bool b_hi = less_than(a, b);
    const C hi = arith(b_hi ? b : a), lo = arith(b_hi ? a : b);
    const float inf = std::numeric_limits<float>::infinity();
    if (lo == C(-inf) || hi == C(inf)) return T(hi);
    return T(hi + cstd::log(C(1) + cstd::exp(lo - hi)));
  }
};
/// The angle of (b, a), in (-pi, pi].
struct ArcTan2 {
  template <Real T>
  NUVEC_HD T operator()(T a, T b) const { return math::atan2(a, b); }
};
/// a == b (both parts for complex; NaN unequal to everything).
struct Equal {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return arith(a) == arith(b); }
};
/// Equality with NaN equal to NaN (array_equal with equal_nan).
struct NaNEqual {
  static constexpr bool kSignFree = true;
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const {
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
  NUVEC_HD bool operator()(T a, T b) const { return arith(a) != arith(b); }
};
// Orderings: lexicographic for complex (<= is !(b < a), >= is !(a < b)).
struct Less {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return less_than(a, b); }
};
struct LessEqual {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const {
    if constexpr (Complex<T>) return !less_than(b, a);
    else return a <= b;
  }
};
struct Greater {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const { return less_than(b, a); }
};
struct GreaterEqual {
  template <Number T>
  NUVEC_HD bool operator()(T a, T b) const {
    if constexpr (Complex<T>) return !less_than(a, b);
    else return a >= b;
  }
};
/// a && b as bool (integers and bool only).
struct LogicalAnd {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD bool operator()(T a, T b) const { return a && b; }
};
/// a || b as bool (integers and bool only).
struct LogicalOr {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD bool operator()(T a, T b) const { return a || b; }
};
/// a & b.
struct BitwiseAnd {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
/// a | b.
struct BitwiseOr {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
/// a ^ b.
struct BitwiseXor {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
/// Shifts by a count outside [0, bits) give 0 (or -1 for right shifts of negatives), as
/// NumPy's, instead of C++'s undefined behaviour. Left shifts are sign-free: a negative
/// count read unsigned is >= bits, and both give 0.
struct LeftShift {
  static constexpr bool kSignFree = true;
  template <Integer T>
  NUVEC_HD T operator()(T a, T b) const {
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
  NUVEC_HD T operator()(T a, T b) const {
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

/// Calls f(Functor{}) for the functor of op (generated from the op table).
template <typename F>
decltype(auto) visit(BinaryOp op, F&& f) {
  switch (op) {
#define NUVEC_MATH_VISIT(o, kind) \
  case BinaryOp::o: return f(o{});
    NUVEC_BINARY_OPS(NUVEC_MATH_VISIT)
#undef NUVEC_MATH_VISIT
  }
  throw_unknown_op("BinaryOp");
}

NUVEC_MATH_END
