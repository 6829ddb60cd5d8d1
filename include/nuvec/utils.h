// nuvec: printing of arrays, shapes, dtypes, devices and streams (MLX's utils.h), and the
// print options.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// Prints an evaluated copy of a as `array([[1, 2], [3, 4]], dtype=int32)`; evaluates a.
std::ostream& operator<<(std::ostream& os, array a);
/// Prints a shape as `(2, 3)`.
std::ostream& operator<<(std::ostream& os, const Shape& v);
/// Prints strides as `(12, 4, 1)`.
std::ostream& operator<<(std::ostream& os, const Strides& v);
/// Prints a list of ints as `(0, 2)` (axes in error messages).
std::ostream& operator<<(std::ostream& os, const std::vector<size_t>& v);

/// Significant digits printed for floating elements (default 6, as MLX and iostreams).
/// Throws std::invalid_argument for a negative precision.
void set_printoptions_precision(int precision);
/// MLX's spelling: sets the print precision when given; the default (nullopt) restores 6.
void set_printoptions(std::optional<int> precision = std::nullopt);

/// MLX's PrintFormatter: how elements print; `capitalize_bool` prints True/False (Python's
/// spelling) instead of true/false. One global instance (get_global_formatter).
struct PrintFormatter {
  bool capitalize_bool{false};
};
PrintFormatter& get_global_formatter();

/// Limits of a floating dtype (MLX's finfo): lowest and largest finite values, machine
/// epsilon, smallest positive normal. complex64 reports its float32 parts (array API).
/// Throws std::invalid_argument for a non-floating dtype. Source: MLX utils.h, NumPy finfo.
struct finfo {
  explicit finfo(Dtype dtype);
  Dtype dtype;
  double min;
  double max;
  double eps;
  double smallest_normal;
  int bits;
};

/// Limits of an integer dtype (MLX's iinfo; bool is not an integer). Throws
/// std::invalid_argument otherwise. Source: MLX utils.h, NumPy iinfo.
struct iinfo {
  explicit iinfo(Dtype dtype);
  Dtype dtype;
  int64_t min;
  uint64_t max;
  int bits;
};

/// The dtype all arrays promote to (MLX's promotion table, promote_types). Throws
/// std::invalid_argument for an empty list.
Dtype result_type(const std::vector<array>& arrays);
inline Dtype result_type(const array& a, const array& b) {
  return promote_types(a.dtype(), b.dtype());
}
inline Dtype result_type(const array& a, const array& b, const array& c) {
  return promote_types(result_type(a, b), c.dtype());
}

/// `axis` in [0, ndim) (negative counts from the end). Throws std::invalid_argument when
/// axis is not in [-ndim, ndim), the message prefixed by msg_prefix (an op name such as
/// "sort" is printed as "[sort]"). Source: MLX utils.h.
int normalize_axis_index(int axis, int ndim, const std::string& msg_prefix = "");

} // namespace nuvec
