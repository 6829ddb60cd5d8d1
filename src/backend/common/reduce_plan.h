// nuvec: the backend-neutral reduction plan: split an input's dimensions into kept and
// reduced ones, merge what walks like one dimension, and pick the loop shape (row, column or
// general strided). The CPU loops (backend/cpu/reduce.cpp, arg_reduce.cpp) and the CUDA
// launches (backend/cuda/reduce.cu) read the same plan; the dimension merging is the one
// scans use too (append_merged_dim).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// How a reduction walks its input.
enum class ReduceKind {
  /// Each output reduces one contiguous run (the reduced dims merge into stride 1).
  Row,
  /// The innermost kept dim is contiguous: whole output rows accumulate at once, one input
  /// row (a contiguous run of `kept_shape.back()` elements) per reduced index.
  Column,
  /// Anything else: every output walks its reduced dims through their strides.
  General,
};

/// A reduction over some axes of a strided input, with a row-contiguous keepdims output.
/// Kept dims appear in output (row-major) order; both lists are merged where the input
/// strides allow and exclude size-1 dims (an empty list means one element).
struct ReducePlan {
  ReduceKind kind{ReduceKind::General};
  int64_t out_size{1}; // number of outputs
  int64_t reduce_size{1}; // elements reduced into each output
  int64_t base{0}; // element offset added to the input's data pointer (ReduceOrder::Any)
  // 64-bit extents: merged dims of arrays over 2^31 elements overflow int32.
  std::vector<int64_t> kept_shape;
  Strides kept_strides; // input strides of the kept dims
  std::vector<int64_t> reduced_shape;
  Strides reduced_strides; // input strides of the reduced dims
};

/// Appends dim (n, stride) to (shape, strides), merging it into the previous dim when the
/// pair walks like one dimension (previous stride == stride * n); size-1 dims are dropped.
inline void append_merged_dim(std::vector<int64_t>& shape, Strides& strides, int64_t n, int64_t stride) {
  if (n == 1) return;
  if (!shape.empty() && strides.back() == stride * n) {
    shape.back() *= n;
    strides.back() = stride;
    return;
  }
  shape.push_back(n);
  strides.push_back(stride);
}

/// Whether a reduction may visit its reduced elements in any order.
enum class ReduceOrder {
  /// In the input's index order (arg_reduce: the first extreme wins).
  Keep,
  /// In any order (every Reduce op is commutative): reduced dims with negative strides are
  /// flipped (`base` moves to the lowest address) and all are ordered by decreasing stride,
  /// broadcast (stride-0) dims outermost, before merging, so that a transposed or reversed
  /// input whose reduced part is dense reduces as one contiguous run.
  Any,
};

/// Plans reducing `axes` (sorted, non-negative) of an input with this shape and strides.
inline ReducePlan make_reduce_plan(
    const Shape& shape,
    const Strides& strides,
    const std::vector<int>& axes,
    ReduceOrder order = ReduceOrder::Keep) {
  ReducePlan plan;
  std::vector<bool> reduced(shape.size(), false);
  for (int a : axes) reduced[a] = true;
  std::vector<std::pair<int64_t, int64_t>> red; // (stride, size), ReduceOrder::Any
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t n = shape[d];
    int64_t s = strides[d];
    if (!reduced[d]) {
      plan.out_size *= n;
      append_merged_dim(plan.kept_shape, plan.kept_strides, n, s);
      continue;
    }
    plan.reduce_size *= n;
    if (order == ReduceOrder::Keep) {
      append_merged_dim(plan.reduced_shape, plan.reduced_strides, n, s);
      continue;
    }
    if (n == 1) continue;
    if (s < 0 && n > 0) {
      plan.base += (n - 1) * s;
      s = -s;
    }
    red.emplace_back(s, n);
  }
  if (order == ReduceOrder::Any) {
    std::stable_sort(red.begin(), red.end(), [](const auto& a, const auto& b) {
      if ((a.first == 0) != (b.first == 0)) return a.first == 0;
      return a.first > b.first;
    });
    for (auto& [s, n] : red) append_merged_dim(plan.reduced_shape, plan.reduced_strides, n, s);
  }
  if (plan.reduced_shape.size() == 1 && plan.reduced_strides[0] == 1) {
    plan.kind = ReduceKind::Row;
  } else if (plan.reduced_shape.empty()) {
    // Nothing to reduce (all reduced dims have size 1, or none): a copy, best done as rows
    // of length one.
    plan.kind = ReduceKind::Row;
  } else if (!plan.kept_shape.empty() && plan.kept_strides.back() == 1) {
    plan.kind = ReduceKind::Column;
  } else {
    plan.kind = ReduceKind::General;
  }
  return plan;
}

/// Calls f(offset) for the indices [begin, end) of (shape, strides) in row-major order, with
/// the element offset each maps to (a range of them can go to each thread).
template <typename F>
void for_each_offset_in(
    const std::vector<int64_t>& shape, const Strides& strides, int64_t begin, int64_t end, F&& f) {
  const int nd = static_cast<int>(shape.size());
  if (begin >= end) return;
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  int64_t rest = begin; // unravel begin
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
    off += idx[d] * strides[d];
  }
  for (int64_t i = begin; i < end; ++i) {
    f(off);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      idx[d] = 0;
      off -= strides[d] * (shape[d] - 1);
    }
  }
}

/// The number of indices of a shape (1 for an empty shape).
inline int64_t index_count(const std::vector<int64_t>& shape) {
  int64_t total = 1;
  for (auto n : shape) total *= n;
  return total;
}

/// Calls f(offset) for every index of (shape, strides) in row-major order, with the element
/// offset it maps to. An empty shape has one index (offset 0).
template <typename F>
void for_each_offset(const std::vector<int64_t>& shape, const Strides& strides, F&& f) {
  for_each_offset_in(shape, strides, 0, index_count(shape), std::forward<F>(f));
}

} // namespace nuvec
