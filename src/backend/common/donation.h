// nuvec: buffer donation — an op whose output has its input's shape and dtype and rewrites
// only part of it (slice_update, norm_rope's cache write) reuses the input's buffer when
// nothing else can see it (array::is_donatable), instead of copying the rest of it. The
// layout rule is shared here; each backend adds where the bytes must live (the CPU writes
// the host copy, a GPU the device copy, and the other copy would go stale).
#pragma once

#include "nuvec/array.h"

namespace nuvec {

/// Whether in's layout lets `out` take over its buffer as it is: dense and row-contiguous from
/// the buffer's start, with out's shape and dtype. Who else owns the buffer is the backend's
/// check (array::is_donatable, or on a GPU stream its own holds discounted).
inline bool donation_layout_ok(const array& in, const array& out) {
  return in.dtype() == out.dtype() && in.shape() == out.shape() && in.flags().row_contiguous &&
      in.offset() == 0 && in.data_size() == in.size();
}

} // namespace nuvec
