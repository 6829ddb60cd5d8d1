// nuvec: the cotangent of a broadcast, summed back down to the operand's shape (the rule of
// shared/seeds/000_*.txt's `sum_to`), shared by the Broadcast and Full rules.
#pragma once

#include "nuvec/ops.h"

namespace nuvec {

/// g (of a shape `shape` broadcasts to) summed over the broadcast axes, reshaped to shape.
inline array sum_to(const array& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int extra = static_cast<int>(g.ndim()) - static_cast<int>(shape.size());
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(g.ndim()); ++i) {
    if (i < extra || (shape[i - extra] == 1 && g.shape()[i] != 1)) axes.push_back(i);
  }
  array summed = axes.empty() ? g : sum(g, axes, true);
  return reshape(summed, shape);
}

} // namespace nuvec
