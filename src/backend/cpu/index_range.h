// nuvec: the run-time range check of index values in the CPU gather/scatter kernels. MLX
// checks scalar indices when an op is called (std::out_of_range); array indices are data, so
// the kernels apply the same rule, -n <= i < n with negatives counted from the end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/errors.h"

namespace nuvec::cpu {

/// An index element as int64; uint64 values above int64's range become its maximum, which
/// stays out of range for any axis instead of wrapping to a negative (valid) index.
template <typename I>
inline int64_t index_value(I v) {
  if constexpr (std::is_same_v<I, uint64_t>) {
    return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
  } else {
    return static_cast<int64_t>(v);
  }
}

/// i made non-negative (i + n for negative i). Throws std::out_of_range naming op, the
/// index value, the axis and its size n unless -n <= i < n.
inline int64_t checked_index(int64_t i, int64_t n, int axis, const char* op) {
  if (i < -n || i >= n) [[unlikely]] {
    throw_out_of_range(
        op, "indices must lie in [", -n, ", ", n, ") along axis ", axis, " (of size ", n,
        "); got ", i, ".");
  }
  return i < 0 ? i + n : i;
}

} // namespace nuvec::cpu
