// nuvec: the layout plan shared by every element-wise style loop: merge dimensions that are
// contiguous in all operands, then walk the remaining ones with an N-d counter. Backend-
// neutral (no threads, no kernels), so CPU loops and CUDA launches plan the same way.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// A shape with one stride vector per operand, after merging collapsible dimensions.
/// Extents are 64-bit: merged dimensions of arrays over 2^31 elements overflow int32.
struct StridedPlan {
  std::vector<int64_t> shape;
  std::vector<Strides> strides; // strides[k] for operand k, in elements
};

/// Merges adjacent dimensions i, i+1 whenever every operand has
/// strides[i] == strides[i+1] * shape[i+1] (so the pair walks like one dimension), and drops
/// size-1 dimensions. The result has at least one dimension.
inline StridedPlan collapse_dims(const Shape& shape, const std::vector<Strides>& strides) {
  StridedPlan plan;
  plan.strides.resize(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !plan.shape.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k) {
      merge = plan.strides[k].back() == strides[k][d] * shape[d];
    }
    if (merge) {
      plan.shape.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) plan.strides[k].back() = strides[k][d];
    } else {
      plan.shape.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) plan.strides[k].push_back(strides[k][d]);
    }
  }
  if (plan.shape.empty()) {
    plan.shape.push_back(1);
    for (auto& s : plan.strides) s.push_back(0);
  }
  return plan;
}

/// Calls f(offsets) for every index of the plan in row-major order, where offsets[k] is
/// operand k's element offset. The innermost dimension is handed to `inner(offsets, n,
/// inner_strides)` as one run so that loops over it can vectorise.
template <size_t N, typename Inner>
void for_each_run(const StridedPlan& plan, Inner&& inner) {
  const int nd = static_cast<int>(plan.shape.size());
  const int64_t n = plan.shape[nd - 1];
  int64_t inner_strides[N];
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][nd - 1];
  int64_t outer = 1;
  for (int d = 0; d < nd - 1; ++d) outer *= plan.shape[d];
  if (n == 0 || outer == 0) return;
  std::vector<int32_t> idx(nd > 1 ? nd - 1 : 1, 0);
  int64_t offsets[N] = {};
  for (int64_t o = 0; o < outer; ++o) {
    inner(static_cast<const int64_t*>(offsets), n, static_cast<const int64_t*>(inner_strides));
    // Advance the N-d counter over the outer dimensions.
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < plan.shape[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += plan.strides[k][d];
        break;
      }
      idx[d] = 0;
      for (size_t k = 0; k < N; ++k) offsets[k] -= plan.strides[k][d] * (plan.shape[d] - 1);
    }
  }
}

/// Row-major strides of a shape (size-0 and size-1 dimensions get the stride they would
/// have with size 1).
inline Strides row_strides(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  }
  return s;
}

/// Strides for reading `a` as if broadcast to `shape` (0 along broadcast dimensions).
inline Strides broadcast_strides(const array& a, const Shape& shape) {
  Strides out(shape.size(), 0);
  size_t off = shape.size() - a.ndim();
  for (size_t i = 0; i < a.ndim(); ++i) {
    out[off + i] = a.shape()[i] == 1 ? 0 : a.strides()[i];
  }
  return out;
}

} // namespace nuvec
