// nuvec: printing of arrays, shapes, dtypes, devices and streams (MLX's utils.h), and the
// print options.
#pragma once

#include <ostream>
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

/// Digits printed after the decimal point for floating arrays (default 6, as MLX).
void set_printoptions_precision(int precision);

/// The dtype both arrays (or all arrays) promote to.
Dtype result_type(const std::vector<array>& arrays);

/// Normalises `axis` for `ndim` dimensions (negative from the end); throws
/// std::out_of_range naming `op` when out of range.
int normalize_axis_index(int axis, int ndim, const char* op);

} // namespace nuvec
