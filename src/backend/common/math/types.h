// nuvec: the element-type vocabulary of the math layer, for host and device alike:
// concepts by property (Real, Complex, Half, ...), the compute type, the wrapping unsigned
// type of integer arithmetic, the complex library, NaN tests, the order of complex numbers
// and the extreme values that serve as reduction identities.
//
// Element types are recognised by shape, not by name, so one text covers the host's
// float16_t/bfloat16_t/complex64_t and the device's __half/__nv_bfloat16/
// cuda::std::complex<float>: a complex type has real() and imag(); a half type is any other
// 2-byte class (both convert to and from float).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/common/math/config.h"

#if NUVEC_MATH_CUDA
#include <cuda/std/complex>
#else
#include <complex>
#endif

NUVEC_MATH_BEGIN

template <typename T>
concept Complex = !std::is_arithmetic_v<T> && requires(const T& z) {
  z.real();
  z.imag();
};
template <typename T>
concept Half = std::is_class_v<T> && !Complex<T> && sizeof(T) == 2;
template <typename T>
concept Real = std::is_floating_point_v<T>;
template <typename T>
concept Inexact = Real<T> || Complex<T>;
template <typename T>
concept Integer = std::is_integral_v<T>; // bool included
template <typename T>
concept Arith = Real<T> || Integer<T>;
template <typename T>
concept Number = Arith<T> || Complex<T>;
/// Element types with a NaN: the floating and complex types, halves included.
template <typename T>
concept Floating = Real<T> || Half<T> || Complex<T>;

/// The type arithmetic on T runs in: float for the half types (float16/bfloat16 compute
/// and accumulate in float32), T otherwise. Functors receive this type.
template <typename T>
using compute_t = std::conditional_t<Half<T>, float, T>;

/// The unsigned type signed-integer + - * run in: signed overflow is undefined in C++,
/// while NumPy and MLX wrap modulo 2^bits. At least `unsigned` wide, so that int8/int16
/// (and uint16 * uint16) never promote to a signed int that could overflow; converting back
/// to the signed type wraps (C++20).
template <typename T>
using wrap_uint_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// True for the integer types (bool excluded) whose + - * must wrap through wrap_uint_t.
template <typename T>
inline constexpr bool kWrapInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// ---- the complex library ---------------------------------------------------------------

#if NUVEC_MATH_CUDA
namespace cstd = ::cuda::std;
#else
namespace cstd = ::std;
#endif
/// The complex type whose operators and functions the functors use (the host's complex64_t
/// derives from it; on the device it is the element type itself).
using complex_lib_t = cstd::complex<float>;

/// x as the complex library's type for complex x (so that `a + b` resolves to its
/// operators; the host's complex64_t also converts to array, which would make it
/// ambiguous), x itself otherwise.
template <typename T>
NUVEC_HD const auto& arith(const T& x) {
  if constexpr (Complex<T>) return static_cast<const complex_lib_t&>(x);
  else return x;
}

// ---- order and NaN -----------------------------------------------------------------------

/// a < b: the usual order for real types, lexicographic (real, then imaginary part) for
/// complex, as NumPy and MLX sort complex numbers.
template <typename T>
NUVEC_HD bool less_than(const T& a, const T& b) {
  if constexpr (Complex<T>) return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  else return a < b;
}

/// Whether an element is NaN: either part for complex, never for integers and bool.
template <typename T>
NUVEC_HD bool is_nan(const T& v) {
  if constexpr (Complex<T>) return v.real() != v.real() || v.imag() != v.imag();
  else if constexpr (Half<T>) return static_cast<float>(v) != static_cast<float>(v);
  else if constexpr (Real<T>) return v != v;
  else return false;
}

/// A strict weak order with every NaN after every number (NaNs equivalent to each other):
/// NumPy's sort order.
template <typename T>
NUVEC_HD bool nan_last_less(const T& a, const T& b) {
  if constexpr (Floating<T>) {
    if (is_nan(b)) return !is_nan(a);
    if (is_nan(a)) return false;
  }
  if constexpr (Half<T>) return static_cast<float>(a) < static_cast<float>(b);
  else return less_than(a, b);
}

// ---- extremes ------------------------------------------------------------------------------

/// -inf for the floating types (both parts for complex), the lowest value otherwise: the
/// identity of max.
template <typename A>
NUVEC_HD A lowest_or_neg_inf() {
  if constexpr (Complex<A>) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    return A(-inf, -inf);
  } else if constexpr (std::numeric_limits<A>::has_infinity) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}

/// +inf for the floating types (both parts for complex), the largest value otherwise: the
/// identity of min.
template <typename A>
NUVEC_HD A max_or_inf() {
  if constexpr (Complex<A>) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    return A(inf, inf);
  } else if constexpr (std::numeric_limits<A>::has_infinity) {
    return std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::max();
  }
}

NUVEC_MATH_END
