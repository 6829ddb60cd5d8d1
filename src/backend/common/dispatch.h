// nuvec: the dtype dispatcher shared by every backend loop: maps a Dtype to its C++ element
// type and calls a templated lambda, `f.template operator()<T>()`. No macros.
#pragma once

#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "backend/common/math/cast.h"
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

/// Calls f.template operator()<T>() for a real floating dtype (float16, bfloat16, float32,
/// float64); throws std::invalid_argument "[op] the kernel takes real floating inputs; got
/// <dtype>." for any other (the fused row kernels' coverage).
template <typename F>
void dispatch_float_types(Dtype dtype, const char* op, F&& f) {
  dispatch_all_types(dtype, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
      f.template operator()<T>();
    } else {
      std::ostringstream msg;
      msg << "[" << op << "] the kernel takes real floating inputs; got " << dtype << ".";
      throw std::invalid_argument(msg.str());
    }
  });
}

/// The type arithmetic on T is carried out in: float for the half types, T otherwise
/// (float16/bfloat16 accumulate in float32, as the issue and NumPy's pairwise sums do).
template <typename T>
using acc_t = math::compute_t<T>;

// The element rules of the math layer (src/backend/common/math/), under the names the
// host code uses.
using math::cast_to;
using math::nan_last_less;

/// Whether an element is NaN (either part for complex; never for integers and bool).
template <typename T>
inline bool is_nan_element(const T& v) {
  return math::is_nan(v);
}

} // namespace nuvec
