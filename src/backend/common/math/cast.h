// nuvec: the element conversion rule of every cast, host and device (astype, copies into
// another dtype, scalars written into arrays): NumPy's.
#pragma once

#include "backend/common/math/types.h"

NUVEC_MATH_BEGIN

/// Converts one element between element types: to bool is "!= 0" (either part for
/// complex); complex to real takes the real part; real to complex goes through float;
/// halves convert through float (so double -> half rounds twice); float -> integer
/// truncates where the value fits, gives 0 for NaN, wraps out-of-range values into unsigned
/// targets modulo 2^bits through int64/uint64 (as NumPy, MLX and PyTorch do on x86:
/// -1.0 -> 255 for uint8) and clamps them to a signed target's range; everything else is
/// C++'s static_cast (integers wrap).
template <typename To, typename From>
NUVEC_HD To cast_to(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (Complex<From>) return v.real() != 0.0f || v.imag() != 0.0f;
    else if constexpr (Half<From>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (Complex<To>) {
    return To(static_cast<float>(v), 0.0f);
  } else if constexpr (Complex<From>) {
    return cast_to<To>(v.real());
  } else if constexpr (Half<From>) {
    return cast_to<To>(static_cast<float>(v));
  } else if constexpr (Half<To>) {
    return To(static_cast<float>(v)); // round to nearest even (NaN stays NaN, overflow inf)
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // C++ leaves NaN and out-of-range conversions undefined; define them as above.
    if (!(v == v)) return To(0);
    if constexpr (std::is_unsigned_v<To>) {
      if (v >= static_cast<From>(18446744073709551616.0)) return std::numeric_limits<To>::max();
      if (v >= 0) return static_cast<To>(static_cast<uint64_t>(v));
      if (v <= static_cast<From>(-9223372036854775808.0)) return To(0);
      return static_cast<To>(static_cast<uint64_t>(static_cast<int64_t>(v)));
    }
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

NUVEC_MATH_END
