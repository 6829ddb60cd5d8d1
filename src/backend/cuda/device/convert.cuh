// nuvec: element conversions of the CUDA kernels between a device element type and the type
// its arithmetic runs in (math::compute_t: float for __half and __nv_bfloat16). The
// conversion rule between dtypes (astype) is math::cast_to, shared with the host
// (src/backend/common/math/cast.h); these are the two steps around a functor call.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backend/common/math/types.h"

namespace nuvec::cu {

/// The compute value of an element: float for the half types, the element itself otherwise.
template <typename T>
__device__ __forceinline__ math::compute_t<T> to_acc(T v) {
  if constexpr (math::Half<T>) return static_cast<float>(v);
  else return v;
}

/// A functor result stored as element type O: rounded to nearest even into a half type,
/// else converted as the CPU loops' static_cast<O> does (the functors return O's compute
/// type or O itself).
template <typename O, typename R>
__device__ __forceinline__ O store_as(R r) {
  if constexpr (math::Half<O>) return O(static_cast<float>(r));
  else return static_cast<O>(r);
}

} // namespace nuvec::cu
