// nuvec: the fused ops' rule for rows that name one target (paged_write's slots, and
// gated_delta_slots' fallback): the last row naming it is the one that lands, as the kernels
// keep it. A scatter with repeated targets lands one of them in an order it does not promise,
// and its vjp gives every repeat the cotangent; redirecting the overwritten rows to a scratch
// target first gives the graph (the op's meaning, its vjp and jvp) the kernels' answer.
#pragma once

#include "nuvec/ops.h"

namespace nuvec::fast::detail {

/// targets [N] int32: row i's target, in [0, n) (others are passed through unchanged; they
/// are dropped or refused elsewhere). Returns targets with `scratch` for every row that a
/// later row with the same target overwrites. Found with a scatter_max of row indices over
/// the n targets, so it costs O(N + n).
inline array last_writer_targets(const array& targets, int n, int scratch, StreamOrDevice s = {}) {
  const int rows = targets.shape(0);
  const array row_ids = arange(rows, int32, s);
  // Rows outside [0, n) share an extra bin n, so they never displace a row in range.
  const array in_range = logical_and(greater_equal(targets, array(0, int32), s), less(targets, array(n, int32), s), s);
  const array bin = where(in_range, targets, array(n, int32), s);
  const array last = scatter_max(full({n + 1}, array(-1, int32), int32, s), bin, reshape(row_ids, {rows, 1}, s), 0, s);
  const array overwritten = logical_and(in_range, not_equal(take(last, bin, 0, s), row_ids, s), s);
  return where(overwritten, array(scratch, int32), targets, s);
}

} // namespace nuvec::fast::detail
