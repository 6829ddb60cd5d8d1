// nuvec: the primitive families, published in include/nuvec/primitive_families.h (MLX's
// primitives.h is public too: its tests build nodes by hand).
#pragma once

#include "nuvec/primitive_families.h"

namespace nuvec {

/// `other` as a P when it is one (the first step of every is_equivalent), else null.
template <typename P>
const P* same_type(const Primitive& other) {
  return dynamic_cast<const P*>(&other);
}

} // namespace nuvec
