// nuvec: the 16-bit floating-point element types float16_t (IEEE 754 binary16) and
// bfloat16_t (the top half of a binary32). Storage is the raw bits; arithmetic goes through
// float, rounding back to nearest-even, which is what IEEE conversion prescribes.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <type_traits>

namespace nuvec {

namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// binary32 -> binary16 bits, round to nearest even, overflow to infinity, NaN kept quiet.
inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) { // inf or nan
    return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (abs >= 0x477ff000u) { // rounds to >= 65520: overflow
    return sign | 0x7c00u;
  }
  if (abs < 0x38800000u) { // below the smallest normal half (2^-14): subnormal or zero
    // Adding 0.5 aligns the mantissa so the float adder does the rounding for us.
    float r = bits_float(abs) + 0.5f;
    return sign | static_cast<uint16_t>(float_bits(r) - 0x3f000000u);
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd; // rebias exponent (-112 << 23) and round to nearest even
  return sign | static_cast<uint16_t>(abs >> 13);
}

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    return bits_float(sign | 0x7f800000u | (mant << 13));
  }
  if (exp == 0) {
    // subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_bfloat_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u); // quiet NaN
  }
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

inline float bfloat_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

} // namespace detail

/// IEEE 754 binary16. Converts implicitly to float; arithmetic is done in float and rounded.
struct float16_t {
  uint16_t bits_{0};

  float16_t() = default;
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  float16_t(T v) : bits_(detail::float_to_half_bits(static_cast<float>(v))) {}
  operator float() const { return detail::half_bits_to_float(bits_); }

  static float16_t from_bits(uint16_t b) {
    float16_t h;
    h.bits_ = b;
    return h;
  }
};

/// bfloat16: 8 exponent bits, 7 mantissa bits. Converts implicitly to float.
struct bfloat16_t {
  uint16_t bits_{0};

  bfloat16_t() = default;
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  bfloat16_t(T v) : bits_(detail::float_to_bfloat_bits(static_cast<float>(v))) {}
  operator float() const { return detail::bfloat_bits_to_float(bits_); }

  static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits_ = b;
    return h;
  }
};

template <typename T>
inline constexpr bool is_half_v =
    std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

#define NUVEC_HALF_BINOP(H, OP)                                                   \
  inline H operator OP(H a, H b) { return H(float(a) OP float(b)); }             \
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>    \
  inline auto operator OP(H a, T b) {                                            \
    if constexpr (std::is_floating_point_v<T>) return T(float(a)) OP b;          \
    else return H(float(a) OP float(b));                                         \
  }                                                                              \
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>    \
  inline auto operator OP(T a, H b) {                                            \
    if constexpr (std::is_floating_point_v<T>) return a OP T(float(b));          \
    else return H(float(a) OP float(b));                                         \
  }

#define NUVEC_HALF_CMP(H, OP)                                                     \
  inline bool operator OP(H a, H b) { return float(a) OP float(b); }             \
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>    \
  inline bool operator OP(H a, T b) { return float(a) OP b; }                    \
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>    \
  inline bool operator OP(T a, H b) { return a OP float(b); }

#define NUVEC_HALF_OPS(H)                                       \
  NUVEC_HALF_BINOP(H, +)                                        \
  NUVEC_HALF_BINOP(H, -)                                        \
  NUVEC_HALF_BINOP(H, *)                                        \
  NUVEC_HALF_BINOP(H, /)                                        \
  NUVEC_HALF_CMP(H, ==)                                         \
  NUVEC_HALF_CMP(H, !=)                                         \
  NUVEC_HALF_CMP(H, <)                                          \
  NUVEC_HALF_CMP(H, <=)                                         \
  NUVEC_HALF_CMP(H, >)                                          \
  NUVEC_HALF_CMP(H, >=)                                         \
  inline H operator-(H a) {                                     \
    H r = a;                                                    \
    r.bits_ ^= 0x8000u;                                         \
    return r;                                                   \
  }                                                             \
  inline H& operator+=(H& a, H b) { return a = a + b; }         \
  inline H& operator-=(H& a, H b) { return a = a - b; }         \
  inline H& operator*=(H& a, H b) { return a = a * b; }         \
  inline H& operator/=(H& a, H b) { return a = a / b; }         \
  inline std::ostream& operator<<(std::ostream& os, H h) {      \
    return os << float(h);                                      \
  }

NUVEC_HALF_OPS(float16_t)
NUVEC_HALF_OPS(bfloat16_t)

#undef NUVEC_HALF_OPS
#undef NUVEC_HALF_CMP
#undef NUVEC_HALF_BINOP

} // namespace nuvec

namespace std {
template <>
class numeric_limits<nuvec::float16_t> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_signed = true;
  static nuvec::float16_t lowest() { return nuvec::float16_t::from_bits(0xfbff); }
  static nuvec::float16_t min() { return nuvec::float16_t::from_bits(0x0400); }
  static nuvec::float16_t max() { return nuvec::float16_t::from_bits(0x7bff); }
  static nuvec::float16_t epsilon() { return nuvec::float16_t::from_bits(0x1400); }
  static nuvec::float16_t infinity() { return nuvec::float16_t::from_bits(0x7c00); }
  static nuvec::float16_t quiet_NaN() { return nuvec::float16_t::from_bits(0x7e00); }
};
template <>
class numeric_limits<nuvec::bfloat16_t> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_signed = true;
  static nuvec::bfloat16_t lowest() { return nuvec::bfloat16_t::from_bits(0xff7f); }
  static nuvec::bfloat16_t min() { return nuvec::bfloat16_t::from_bits(0x0080); }
  static nuvec::bfloat16_t max() { return nuvec::bfloat16_t::from_bits(0x7f7f); }
  static nuvec::bfloat16_t epsilon() { return nuvec::bfloat16_t::from_bits(0x3c00); }
  static nuvec::bfloat16_t infinity() { return nuvec::bfloat16_t::from_bits(0x7f80); }
  static nuvec::bfloat16_t quiet_NaN() { return nuvec::bfloat16_t::from_bits(0x7fc0); }
};
} // namespace std
