// nuvec: the steps batching rules share: finding the batch size, moving batch axes to the
// front, and giving unbatched inputs a leading batch axis (a broadcast view, no copy).
#pragma once

#include <vector>

#include "nuvec/ops.h"

namespace nuvec {

/// Whether any input is batched (axis >= 0; -1 means unbatched).
inline bool any_batched(const std::vector<int>& axes) {
  for (int a : axes) {
    if (a >= 0) return true;
  }
  return false;
}

/// The size of the batch: the extent of the first batched input's batch axis (1 when no
/// input is batched, so a leading axis added for it is harmless).
inline int batch_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  return 1;
}

/// x with its batch axis `axis` moved to the front, or, when unbatched (axis -1), with a
/// leading axis of size n (a broadcast view).
inline array with_batch_front(const array& x, int axis, int n) {
  if (axis >= 0) return moveaxis(x, axis, 0);
  Shape shape = x.shape();
  shape.insert(shape.begin(), n);
  return broadcast_to(expand_dims(x, 0), shape);
}

/// Every input with its batch axis at the front; unbatched inputs get a broadcast leading
/// axis when broadcast_unbatched, and are left as they are otherwise.
inline std::vector<array> batch_first(
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    bool broadcast_unbatched = true) {
  int n = batch_size(inputs, axes);
  std::vector<array> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0 || broadcast_unbatched) {
      out.push_back(with_batch_front(inputs[i], axes[i], n));
    } else {
      out.push_back(inputs[i]);
    }
  }
  return out;
}

} // namespace nuvec
