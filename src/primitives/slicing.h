// nuvec: slice arithmetic shared by the slicing primitives, kernels and ops: NumPy's bound
// normalisation (Python's slice.indices) and the length of a normalised slice.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nuvec/array.h"

namespace nuvec::slicing {

/// Clamps start/stop of one axis of size n the way Python's slice.indices does: negative
/// values count from the end; the result lies in [0, n] for step > 0 and [-1, n - 1] for
/// step < 0 (-1 meaning "before the first element").
inline void normalize_bounds(int32_t n, int32_t& start, int32_t& stop, int32_t step) {
  int64_t lo = step > 0 ? 0 : -1;
  int64_t hi = step > 0 ? n : n - 1;
  auto fix = [&](int32_t v) {
    int64_t x = v < 0 ? int64_t(v) + n : int64_t(v);
    return static_cast<int32_t>(std::clamp(x, lo, hi));
  };
  start = fix(start);
  stop = fix(stop);
}

/// The number of elements of the normalised slice start:stop:step.
inline int32_t slice_length(int32_t start, int32_t stop, int32_t step) {
  int64_t a = start, b = stop, s = step;
  if (s > 0) return b > a ? static_cast<int32_t>((b - a + s - 1) / s) : 0;
  return a > b ? static_cast<int32_t>((a - b - s - 1) / (-s)) : 0;
}

/// The shape of a normalised slice.
inline Shape slice_shape(const Shape& start, const Shape& stop, const Shape& strides) {
  Shape out(start.size());
  for (size_t i = 0; i < start.size(); ++i) out[i] = slice_length(start[i], stop[i], strides[i]);
  return out;
}

} // namespace nuvec::slicing
