// nuvec: the 14 element types, their categories and type promotion (MLX's dtype.h API;
// the promotion table is MLX's, see promote_types in src/core/dtype.cpp).
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

#include "nuvec/types/complex.h"
#include "nuvec/types/half_types.h"

namespace nuvec {

/// An element type: a tag (Val) and its size in bytes.
struct Dtype {
  /// The 14 dtypes, in MLX's order.
  enum class Val {
    bool_,
    uint8,
    uint16,
    uint32,
    uint64,
    int8,
    int16,
    int32,
    int64,
    float16,
    float32,
    float64,
    bfloat16,
    complex64,
  };

  /// NumPy's kind characters: b(ool), u(nsigned), i(nt), f(loat), V (bfloat16), c(omplex).
  enum class Kind { b, u, i, f, V, c };

  /// The abstract categories of NumPy's hierarchy, used by issubdtype.
  enum class Category {
    complexfloating,
    floating,
    inexact,
    signedinteger,
    unsignedinteger,
    integer,
    number,
    generic
  };

  constexpr explicit Dtype(Val val, uint8_t size) : val_(val), size_(size) {}
  constexpr operator Val() const { return val_; }
  /// The tag (MLX's Dtype::val()).
  constexpr Val val() const { return val_; }
  /// Bytes per element (MLX's Dtype::size()).
  constexpr uint8_t size() const { return size_; }

 private:
  Val val_;
  uint8_t size_;
};

inline constexpr Dtype bool_{Dtype::Val::bool_, sizeof(bool)};
inline constexpr Dtype uint8{Dtype::Val::uint8, sizeof(uint8_t)};
inline constexpr Dtype uint16{Dtype::Val::uint16, sizeof(uint16_t)};
inline constexpr Dtype uint32{Dtype::Val::uint32, sizeof(uint32_t)};
inline constexpr Dtype uint64{Dtype::Val::uint64, sizeof(uint64_t)};
inline constexpr Dtype int8{Dtype::Val::int8, sizeof(int8_t)};
inline constexpr Dtype int16{Dtype::Val::int16, sizeof(int16_t)};
inline constexpr Dtype int32{Dtype::Val::int32, sizeof(int32_t)};
inline constexpr Dtype int64{Dtype::Val::int64, sizeof(int64_t)};
inline constexpr Dtype float16{Dtype::Val::float16, sizeof(uint16_t)};
inline constexpr Dtype float32{Dtype::Val::float32, sizeof(float)};
inline constexpr Dtype float64{Dtype::Val::float64, sizeof(double)};
inline constexpr Dtype bfloat16{Dtype::Val::bfloat16, sizeof(uint16_t)};
inline constexpr Dtype complex64{Dtype::Val::complex64, sizeof(complex64_t)};

inline constexpr Dtype::Category complexfloating = Dtype::Category::complexfloating;
inline constexpr Dtype::Category floating = Dtype::Category::floating;
inline constexpr Dtype::Category inexact = Dtype::Category::inexact;
inline constexpr Dtype::Category signedinteger = Dtype::Category::signedinteger;
inline constexpr Dtype::Category unsignedinteger = Dtype::Category::unsignedinteger;
inline constexpr Dtype::Category integer = Dtype::Category::integer;
inline constexpr Dtype::Category number = Dtype::Category::number;
inline constexpr Dtype::Category generic = Dtype::Category::generic;

/// All 14 dtypes, in Val order (handy for tests and tables).
inline constexpr Dtype all_dtypes[] = {
    bool_, uint8, uint16, uint32, uint64, int8, int16,
    int32, int64, float16, float32, float64, bfloat16, complex64};

/// True when a and b are the same dtype.
inline constexpr bool operator==(const Dtype& a, const Dtype& b) {
  return a.val() == b.val();
}
inline constexpr bool operator!=(const Dtype& a, const Dtype& b) {
  return a.val() != b.val();
}

/// The smallest dtype both a and b convert to without loss where one exists (MLX's table:
/// e.g. uint64 with a signed integer gives float32, float16 with bfloat16 gives float32,
/// float64 with complex64 gives complex64). Source: MLX dtype.cpp.
Dtype promote_types(const Dtype& t1, const Dtype& t2);

/// Size of one element in bytes.
inline uint8_t size_of(const Dtype& t) {
  return t.size();
}

/// NumPy's kind of t (b, u, i, f, V for bfloat16, c).
Dtype::Kind kindof(const Dtype& t);

/// NumPy's issubdtype: whether a lies under b (dtypes compare equal, categories nest as
/// generic > number > {integer > {signed, unsigned}, inexact > {floating, complexfloating}}).
bool issubdtype(const Dtype& a, const Dtype& b);
bool issubdtype(const Dtype::Category& a, const Dtype& b);
bool issubdtype(const Dtype& a, const Dtype::Category& b);
bool issubdtype(const Dtype::Category& a, const Dtype::Category& b);

/// The array-protocol type string of t ("<f4", "|b1", ...), as NumPy's __array_interface__.
std::string dtype_to_array_protocol(const Dtype& t);
/// The inverse of dtype_to_array_protocol. Throws std::invalid_argument for unknown strings.
Dtype dtype_from_array_protocol(std::string_view t);

/// MLX's name of t: "float32", "bool", ...
std::string dtype_name(const Dtype& t);

/// The default dtype of an array made from a C++ element type: bool, the fixed-width
/// integers, float16_t, bfloat16_t, float and complex64_t map to their own dtype; `double`
/// maps to float32, as in MLX (`array(0.5)`, `full(s, 1.0)`, `x * 0.5` are float32). Ask
/// for float64 explicitly (`array(0.5, float64)`). Source: MLX dtype.h, TypeToDtype.
template <typename T>
struct TypeToDtype {
  operator Dtype();
};

namespace detail {
/// The dtype whose element storage is exactly T (double is float64 here): how host values
/// are read when an array is built from them, or written by item<T>().
template <typename T>
Dtype host_dtype() {
  if constexpr (std::is_same_v<std::remove_cv_t<T>, double>) {
    return float64;
  } else {
    return TypeToDtype<std::remove_cv_t<T>>();
  }
}
} // namespace detail

/// Prints MLX's name of a dtype (`float32`) or category (`floating`).
std::ostream& operator<<(std::ostream& os, const Dtype& d);
std::ostream& operator<<(std::ostream& os, const Dtype::Category& c);

} // namespace nuvec
