// nuvec: helpers shared by the op implementations: axis normalisation, dtype checks and the
// stream every op resolves.
#pragma once

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/errors.h"
#include "nuvec/ops.h"
#include "primitives/primitives.h"

namespace nuvec {

/// The axes, normalised to [0, ndim) and sorted. Throws std::invalid_argument for an axis
/// out of range (MLX's normalize_axis_index) or a repeated axis, naming `op`.
inline std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int a : axes) out.push_back(normalize_axis_index(a, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw_invalid_argument(op, "axes must be unique; got ", Shape(axes.begin(), axes.end()), ".");
  }
  return out;
}

/// normalize_axes for reductions (sum, max, argmax, logsumexp, softmax, ...), which report
/// an axis out of range as std::out_of_range, as MLX's compute_reduce_shape does.
inline std::vector<int> normalize_reduce_axes(const std::vector<int>& axes, int ndim, const char* op) {
  for (int a : axes) {
    if (a < -ndim || a >= ndim) {
      std::ostringstream msg;
      msg << "[" << op << "] axis " << a << " is out of bounds for an array with " << ndim
          << " dimensions.";
      throw std::out_of_range(msg.str());
    }
  }
  return normalize_axes(axes, ndim, op);
}

/// All axes of an ndim-dimensional array: 0, 1, ..., ndim - 1.
inline std::vector<int> all_axes(int ndim) {
  std::vector<int> axes(ndim);
  for (int i = 0; i < ndim; ++i) axes[i] = i;
  return axes;
}

/// The dtype sums and products (and their scans) accumulate and return in: small integers
/// widen to 32 bits (bool and signed to int32, unsigned to uint32), as MLX and NumPy.
inline Dtype sum_dtype(Dtype t) {
  switch (t.val()) {
    case Dtype::Val::bool_:
    case Dtype::Val::int8:
    case Dtype::Val::int16: return int32;
    case Dtype::Val::uint8:
    case Dtype::Val::uint16: return uint32;
    default: return t;
  }
}

/// The float dtype unary float math runs in for dtype t: t itself when inexact, else
/// float32 (MLX's rule for integer and bool inputs).
inline Dtype float_result_type(Dtype t) {
  return issubdtype(t, inexact) ? t : float32;
}

// The dtype mean, var and logsumexp compute in: float32 for the half types, whose kernels
// accumulate in float32 but whose totals would overflow float16 (65504) before the division
// (NumPy's rule); the result is rounded to the half type once, at the end.
inline Dtype float_accumulate_type(Dtype dt) {
  return (dt == float16 || dt == bfloat16) ? float32 : dt;
}

namespace detail {

/// take(a, indices, axis) whose out-of-range error (std::out_of_range at eval) names `op`, a
/// string literal: the ops whose meaning is a graph over take (gather_qqmm, the fallbacks of
/// gather_mm, gather_qmm and gated_delta_slots) report the index the caller passed under their
/// own name rather than take's.
array take(const array& a, const array& indices, int axis, const char* op, StreamOrDevice s = {});

} // namespace detail

} // namespace nuvec
