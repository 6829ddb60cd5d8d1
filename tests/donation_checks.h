// Helpers of the buffer-donation tests (array::is_donatable): a source that nothing else
// refers to, and a way to see whether an op kept writing into its buffer.
#pragma once

#include <memory>

#include "nuvec/array.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec::testing {

/// A fresh evaluated copy of `values` in a buffer of its own on the default device
/// (device-only on a GPU), which the caller's handle alone refers to.
inline array fresh_buffer(const array& values) {
  array a = add(values, array(0.0f, values.dtype()));
  eval(a);
  return a;
}

/// A watch on a's buffer that does not own it (so it does not block donation): compare with
/// data_shared_ptr() after the op; it expires if the buffer was freed.
inline std::weak_ptr<array::Data> watch_buffer(const array& a) {
  return a.data_shared_ptr();
}

} // namespace nuvec::testing
