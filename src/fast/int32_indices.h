// nuvec: integer index arrays narrowed to int32 for the fused kernels without wrapping.
#pragma once
#include <cstdint>
#include <limits>

#include "nuvec/ops.h"

namespace nuvec::fast::detail {

/// `indices` (any integer dtype) as int32, values outside int32's range saturated to its
/// smallest or largest: a plain cast would wrap 2^32 + 1 to 1, a valid row or length, where
/// the value lies past every pool or table (the ops clamp or reject it as they document).
inline array saturate_to_int32(const array& indices, StreamOrDevice s = {}) {
  const Dtype dt = indices.dtype();
  if (dt == int32 || size_of(dt) < 4) return astype(indices, int32, s);
  array x = minimum(indices, array(std::numeric_limits<int32_t>::max(), dt), s);
  if (issubdtype(dt, signedinteger)) x = maximum(x, array(std::numeric_limits<int32_t>::min(), dt), s);
  return astype(x, int32, s);
}

} // namespace nuvec::fast::detail
