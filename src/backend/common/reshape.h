// nuvec: NumPy's no-copy reshape rule, shared by the CPU and GPU Reshape: the strides that
// read an array's elements in row-major order as a new shape, when its layout allows it.
#pragma once

#include <optional>

#include "backend/common/strided.h"
#include "nuvec/array.h"

namespace nuvec {

/// Strides that read `in` in row-major order as `shape`, when its layout allows it without
/// a copy (each group of old dimensions merged into new ones must be contiguous within
/// itself). Follows NumPy's no-copy reshape rule.
inline std::optional<Strides> reshape_strides(const array& in, const Shape& shape) {
  Strides out(shape.size(), 1);
  if (in.size() == 0) return row_strides(shape);
  Shape od;
  Strides os;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (in.shape()[i] != 1) {
      od.push_back(in.shape()[i]);
      os.push_back(in.strides()[i]);
    }
  }
  const size_t on = od.size(), nn = shape.size();
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nn && oi < on) {
    int64_t np = shape[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        np *= shape[nj++];
      } else {
        op *= od[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k) {
      if (os[k] != od[k + 1] * os[k + 1]) return std::nullopt;
    }
    out[nj - 1] = os[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) out[k - 1] = out[k] * shape[k];
    ni = nj++;
    oi = oj++;
  }
  int64_t last = ni >= 1 ? out[ni - 1] : 1;
  for (size_t k = ni; k < nn; ++k) out[k] = last;
  return out;
}

} // namespace nuvec
