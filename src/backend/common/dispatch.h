// nuvec: the dtype dispatcher shared by every backend loop: maps a Dtype to its C++ element
// type and calls a templated lambda, `f.template operator()<T>()`. No macros.
#pragma once

#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "nuvec/dtype.h"

namespace nuvec {

/// Calls f.template operator()<T>() with T the element type of dtype.
template <typename F>
decltype(auto) dispatch_all_types(Dtype dtype, F&& f) {
  switch (dtype.val()) {
    case Dtype::Val::bool_: return f.template operator()<bool>();
    case Dtype::Val::uint8: return f.template operator()<uint8_t>();
    case Dtype::Val::uint16: return f.template operator()<uint16_t>();
    case Dtype::Val::uint32: return f.template operator()<uint32_t>();
    case Dtype::Val::uint64: return f.template operator()<uint64_t>();
    case Dtype::Val::int8: return f.template operator()<int8_t>();
    case Dtype::Val::int16: return f.template operator()<int16_t>();
    case Dtype::Val::int32: return f.template operator()<int32_t>();
    case Dtype::Val::int64: return f.template operator()<int64_t>();
    case Dtype::Val::float16: return f.template operator()<float16_t>();
    case Dtype::Val::float32: return f.template operator()<float>();
    case Dtype::Val::float64: return f.template operator()<double>();
    case Dtype::Val::bfloat16: return f.template operator()<bfloat16_t>();
    case Dtype::Val::complex64: return f.template operator()<complex64_t>();
  }
  throw std::invalid_argument("[dispatch] unknown dtype.");
}

/// Element types by property, for `if constexpr` inside dispatched lambdas.
template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;
template <typename T>
inline constexpr bool is_float_v =
    std::is_floating_point_v<T> || is_half_v<T>;
template <typename T>
inline constexpr bool is_integral_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// The type arithmetic on T is carried out in: float for the half types, T otherwise
/// (float16/bfloat16 accumulate in float32, as the issue and NumPy's pairwise sums do).
template <typename T>
using acc_t = std::conditional_t<is_half_v<T>, float, T>;

/// Whether an element is NaN (either part for complex; never for integers and bool).
template <typename T>
inline bool is_nan_element(const T& v) {
  if constexpr (is_complex_v<T>) {
    return v.real() != v.real() || v.imag() != v.imag();
  } else if constexpr (is_float_v<T>) {
    return static_cast<double>(v) != static_cast<double>(v);
  } else {
    return false;
  }
}

/// A strict weak order with every NaN after every number (NaNs equivalent to each other):
/// NumPy's sort order.
template <typename T>
inline bool nan_last_less(const T& a, const T& b) {
  if constexpr (is_complex_v<T> || is_float_v<T>) {
    if (is_nan_element(b)) return !is_nan_element(a);
    if (is_nan_element(a)) return false;
  }
  return a < b;
}

/// Converts one element between element types with NumPy's rules: to bool is "!= 0",
/// complex to real drops the imaginary part, halves go through float.
template <typename To, typename From>
inline To cast_to(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_complex_v<From>) {
      return v.real() != 0 || v.imag() != 0;
    } else if constexpr (is_half_v<From>) {
      return static_cast<float>(v) != 0.0f;
    } else {
      return v != From(0);
    }
  } else if constexpr (is_complex_v<To>) {
    return To(static_cast<float>(v), 0.0f);
  } else if constexpr (is_complex_v<From>) {
    return cast_to<To>(v.real());
  } else if constexpr (is_half_v<From>) {
    return cast_to<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // Float to integer: C truncation where the value fits; NaN and out-of-range values are
    // undefined in C++, so define them: 0 for NaN; unsigned targets wrap modulo 2^bits
    // through int64/uint64 as NumPy, MLX and PyTorch do on x86 (-1.0 -> 255 for uint8);
    // signed targets clamp to their range.
    if (!(v == v)) return To(0);
    if constexpr (std::is_unsigned_v<To>) {
      if (v >= static_cast<From>(18446744073709551616.0)) return std::numeric_limits<To>::max();
      if (v >= 0) return static_cast<To>(static_cast<uint64_t>(v));
      if (v <= static_cast<From>(-9223372036854775808.0)) return To(0);
      return static_cast<To>(static_cast<uint64_t>(static_cast<int64_t>(v)));
    }
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) {
      return std::numeric_limits<To>::lowest();
    }
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

} // namespace nuvec
