// nuvec: the class-index rule of cross_entropy's kernels (CPU and CUDA), one text for both
// (NUVEC_HD): a negative target counts from the end, and one outside [-classes, classes)
// picks no class (the fallback graph's one-hot has no hit for it).
#pragma once

#include <cstdint>

#include "backend/common/math/config.h"

namespace nuvec {

/// The class a target picks among `classes`, or -1 for none.
NUVEC_HD inline int64_t class_index(int32_t target, int64_t classes) {
  const int64_t y = target < 0 ? int64_t(target) + classes : int64_t(target);
  return y >= 0 && y < classes ? y : -1;
}

} // namespace nuvec
