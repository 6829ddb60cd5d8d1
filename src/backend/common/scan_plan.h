// nuvec: the backend-neutral plan of a scan along one axis: the input around the axis, the
// dims before it (outer) and after it (inner) each merged where they walk like one
// (reduce_plan.h's append_merged_dim). The CPU loops (backend/cpu/scan.cpp) read its sizes of
// a row-contiguous input; the CUDA launches (backend/cuda/scan.cu) walk its strides.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/common/reduce_plan.h"
#include "nuvec/array.h"

namespace nuvec {

/// A scan of `len` elements along one axis (element i at i * stride), for each of
/// outer x inner positions around it.
struct ScanLayout {
  int64_t outer{1}, len{1}, inner{1};
  int64_t stride{1};
  std::vector<int64_t> outer_shape, outer_strides;
  std::vector<int64_t> inner_shape, inner_strides;
};

/// Plans scanning `axis` (non-negative) of an input with this shape and strides.
inline ScanLayout scan_layout(const Shape& shape, const Strides& strides, int axis) {
  ScanLayout l;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    const int64_t n = shape[d], s = strides[d];
    if (d < axis) {
      l.outer *= n;
      append_merged_dim(l.outer_shape, l.outer_strides, n, s);
    } else if (d > axis) {
      l.inner *= n;
      append_merged_dim(l.inner_shape, l.inner_strides, n, s);
    }
  }
  l.len = shape[axis];
  l.stride = strides[axis];
  return l;
}

} // namespace nuvec
