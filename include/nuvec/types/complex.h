// nuvec: complex64_t, a pair of float32 (real, imaginary), the element type of complex64.
#pragma once

#include <complex>
#include <ostream>
#include <type_traits>

namespace nuvec {

/// A complex number of two float32 parts; std::complex<float> with implicit conversions
/// from real scalars so that kernels can mix it with other element types.
struct complex64_t : public std::complex<float> {
  complex64_t() : std::complex<float>() {}
  complex64_t(float re, float im) : std::complex<float>(re, im) {}
  complex64_t(const std::complex<float>& c) : std::complex<float>(c) {}
  complex64_t(const std::complex<double>& c)
      : std::complex<float>(float(c.real()), float(c.imag())) {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  complex64_t(T v) : std::complex<float>(static_cast<float>(v), 0.0f) {}
  /// The real part, implicitly, as MLX's complex64_t converts (so `float f = c;` and
  /// `doctest::Approx(c)` compile as they do against MLX).
  operator float() const { return real(); }
  template <
      typename T,
      typename = std::enable_if_t<
          (std::is_arithmetic_v<T> || std::is_convertible_v<T, float>) &&
          !std::is_same_v<T, float>>>
  explicit operator T() const {
    return static_cast<T>(real());
  }
};

inline bool operator<(const complex64_t& a, const complex64_t& b) {
  // Lexicographic order, as NumPy and MLX sort complex numbers.
  return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
}
inline bool operator>(const complex64_t& a, const complex64_t& b) { return b < a; }
inline bool operator<=(const complex64_t& a, const complex64_t& b) { return !(b < a); }
inline bool operator>=(const complex64_t& a, const complex64_t& b) { return !(a < b); }

} // namespace nuvec
