// nuvec: element conversions of the CUDA kernels between a device element type and the type
// its arithmetic runs in (math::compute_t: float for __half and __nv_bfloat16). The
// conversion rule between dtypes (astype) is math::cast_to, shared with the host
// (src/backend/common/math/cast.h); these are the two steps around a functor call.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/common/math/types.h"
#include "backend/cuda/device/vector.cuh"

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

/// Element j of a packed vector in the compute type. bfloat16 is the high half of a float32,
/// so its elements are read straight from the 32-bit words with a shift or a mask (the
/// generic element() then to_acc() moves each element through a 16-bit register, which
/// cost a bf16 rms_norm kernel 38 bytes of spills at 32 registers a thread). j must be a
/// compile-time constant after unrolling.
template <typename T, int N>
__device__ __forceinline__ math::compute_t<T> acc_at(const Packed<T, N>& v, int j) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N % 2 == 0) {
    uint32_t w;
    memcpy(&w, reinterpret_cast<const char*>(&v.w) + (j / 2) * 4, 4);
    return __uint_as_float(j % 2 == 0 ? w << 16 : w & 0xffff0000u);
  } else {
    return to_acc(element(v, j));
  }
}

} // namespace nuvec::cu
