// nuvec: the host-side glue of the CUDA kernel files (.cu only): the device element type of
// each dtype and a dtype dispatcher over them, and the builders of the strided indexers the
// kernels walk. Includes the device library (device/: indexing, vector loads, conversions,
// warp and block reductions) and the launch geometry (runtime/launch.h), which every kernel
// file uses.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/complex>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math/types.h"
#include "backend/common/strided.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/indexing.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/device/warp.cuh"
#include "backend/cuda/runtime/launch.h"
#include "backend/cuda/runtime/runtime.h"
#include "nuvec/dtype.h"

namespace nuvec::cu {

/// complex64 on the device (same layout as complex64_t: real, imaginary float).
using complex64 = cuda::std::complex<float>;

/// The device element type of a host element type: __half, __nv_bfloat16 and complex64 for
/// the half and complex types (same sizes and layouts), the type itself otherwise.
template <typename T>
struct device_type {
  using type = T;
};
template <>
struct device_type<float16_t> {
  using type = __half;
};
template <>
struct device_type<bfloat16_t> {
  using type = __nv_bfloat16;
};
template <>
struct device_type<complex64_t> {
  using type = complex64;
};
template <typename T>
using device_type_t = typename device_type<T>::type;
static_assert(sizeof(__half) == sizeof(float16_t) && sizeof(__nv_bfloat16) == sizeof(bfloat16_t));
static_assert(sizeof(complex64) == sizeof(complex64_t));

/// Calls f.template operator()<T>() with T the device element type of dtype (the host
/// dispatcher, dispatch_all_types, mapped through device_type_t).
template <typename F>
decltype(auto) dispatch_device_types(Dtype dtype, F&& f) {
  return dispatch_all_types(dtype, [&]<typename H>() -> decltype(auto) {
    return f.template operator()<device_type_t<H>>();
  });
}

/// dispatch_device_types over the real floating dtypes only (dispatch_float_types' rule and
/// error, "[op] the kernel takes real floating inputs; got <dtype>.").
template <typename F>
void dispatch_device_float_types(Dtype dtype, const char* op, F&& f) {
  dispatch_float_types(dtype, op, [&]<typename H>() { f.template operator()<device_type_t<H>>(); });
}

template <typename T>
inline constexpr bool is_half_device_v =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_complex_device_v = std::is_same_v<T, complex64>;
template <typename T>
inline constexpr bool is_float_device_v = std::is_floating_point_v<T> || is_half_device_v<T>;

/// The type arithmetic on T runs in on the device: float for the half types.
template <typename T>
using device_acc_t = math::compute_t<T>;

/// The indexer of dimensions [first, first + kMaxDims) (or to the end) of a merged plan
/// (callers that loop over leading dimensions on the host take them in pieces).
template <int N>
StridedIndexer<N> indexer_of(const StridedPlan& plan, size_t first = 0) {
  StridedIndexer<N> ix{};
  size_t nd = std::min(plan.shape.size() - first, size_t(kMaxDims));
  ix.ndim = static_cast<int>(nd);
  for (size_t d = 0; d < nd; ++d) {
    ix.shape[d] = plan.shape[first + d];
    for (int k = 0; k < N; ++k) ix.strides[k][d] = plan.strides[k][first + d];
  }
  return ix;
}

/// The indexer of a whole merged plan; throws std::invalid_argument naming `op` when more
/// than kMaxDims dimensions remain.
template <int N>
StridedIndexer<N> make_indexer(const StridedPlan& plan, const char* op) {
  if (plan.shape.size() > size_t(kMaxDims)) {
    throw std::invalid_argument(
        std::string("[") + op + "] the GPU kernels walk at most " + std::to_string(kMaxDims) +
        " non-mergeable dimensions; got " + std::to_string(plan.shape.size()) + ".");
  }
  return indexer_of<N>(plan);
}

/// Builds a one-operand indexer over (shape, strides), at most kMaxDims dimensions (the
/// callers check and take another path beyond that). An empty shape indexes one element.
inline StridedIndexer<1> make_indexer1(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  StridedIndexer<1> ix{};
  ix.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.shape[d] = shape[d];
    ix.strides[0][d] = strides[d];
  }
  return ix;
}

/// A one-dimensional indexer over n elements with the given per-operand strides (0 for a
/// broadcast scalar, 1 for a dense operand).
template <int N>
StridedIndexer<N> flat_indexer(int64_t n, const int64_t (&strides)[N]) {
  StridedIndexer<N> ix{};
  ix.ndim = 1;
  ix.shape[0] = n;
  for (int k = 0; k < N; ++k) ix.strides[k][0] = strides[k];
  return ix;
}

} // namespace nuvec::cu
