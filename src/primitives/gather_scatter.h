// nuvec: the general indexing families (MLX's Gather and Scatter, plus the rank helper of
// masked_scatter). Rules in src/primitives/gather_scatter.cpp (MLX's primitives.cpp rules,
// as summarised in shared/seeds/000_*.txt for the axis forms); CPU kernels in
// src/backend/cpu/gather_scatter.cpp.
#pragma once

#include "primitives/primitives.h"

namespace nuvec {

/// Windows of a at index positions: inputs (a, idx_0, ..., idx_{k-1}), the indices already
/// broadcast to one shape I (any integer dtypes); output I + slice_sizes. `op` is the public
/// op that recorded it ("gather", "take"), named by the kernel's index range error.
class Gather : public Primitive {
 public:
  Gather(Stream stream, std::vector<int> axes, Shape slice_sizes, const char* op = "gather")
      : Primitive(stream), axes_(std::move(axes)), slice_sizes_(std::move(slice_sizes)), op_(op) {}
  const std::vector<int>& axes() const { return axes_; }
  const Shape& slice_sizes() const { return slice_sizes_; }
  const char* op() const { return op_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<std::vector<int>, Shape, const char*> state() const { return {axes_, slice_sizes_, op_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_; // normalised, unique
  Shape slice_sizes_;     // one per dimension of a
  const char* op_;        // a string literal; diagnostic only (not part of equivalence)
};

/// How a scatter combines an update with the value already at its position. (The axis
/// forms' ScatterReduce in primitives.h has only None and Sum; this one is separate so that
/// adding modes here does not touch ScatterAxis.)
enum class ScatterMode { None, Sum, Prod, Max, Min };

/// a with windows combined with updates: inputs (a, idx_0, ..., idx_{k-1}, updates), the
/// indices broadcast to shape I, updates of shape I + U (U[d] <= a.shape[d]) and a's dtype.
class Scatter : public Primitive {
 public:
  Scatter(Stream stream, ScatterMode mode, std::vector<int> axes)
      : Primitive(stream), mode_(mode), axes_(std::move(axes)) {}
  ScatterMode mode() const { return mode_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<ScatterMode, std::vector<int>> state() const { return {mode_, axes_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  ScatterMode mode_;
  std::vector<int> axes_; // normalised, unique
};

/// For a bool mask: the number of true elements before each position (int32), counted in
/// row-major order over the dimensions from `start_axis` on, separately for every index of
/// the leading ones (masked_scatter's ranks; batching adds leading dimensions). Integer
/// output, so no derivative flows through it.
class MaskedRank : public Primitive {
 public:
  MaskedRank(Stream stream, int start_axis) : Primitive(stream), start_axis_(start_axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  int state() const { return start_axis_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int start_axis_;
};

} // namespace nuvec
