// nuvec: device building blocks shared by the reduction-style CUDA kernels (Reduce,
// ArgReduce, Scan): 16-byte vector loads, warp shuffles for every accumulator type, element
// conversions to and from the accumulator, one-operand strided offsets, and the resident-block count of a kernel.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/common/math/types.h"
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

/// Threads per block of every reduction-style kernel (a multiple of the warp size; the
/// shared-memory layouts of the kernels assume exactly this many).
constexpr int kReduceThreads = 256;

/// Elements of T in one 16-byte vector load.
template <typename T>
inline constexpr int kVec = sizeof(T) >= 16 ? 1 : int(16 / sizeof(T));

/// Loads kVec<T> elements from p, which must be 16-byte aligned, through the read-only
/// cache in a single 16-byte transaction.
template <typename T>
__device__ __forceinline__ void load_vec(const T* p, T (&v)[kVec<T>]) {
  static_assert(sizeof(T) * kVec<T> == 16, "load_vec: 16-byte vectors only");
  int4 raw = __ldg(reinterpret_cast<const int4*>(p));
  memcpy(&v[0], &raw, 16);
}

/// Element type -> accumulator type (device_acc_t): halves widen to float, the rest is a
/// no-op.
template <typename A, typename T>
__device__ __forceinline__ A to_acc(const T& v) {
  if constexpr (std::is_same_v<A, T>) return v;
  else return static_cast<A>(v);
}

/// Accumulator -> output element type (rounds to nearest for the half types).
template <typename T, typename A>
__device__ __forceinline__ T from_acc(const A& v) {
  if constexpr (std::is_same_v<A, T>) return v;
  else return static_cast<T>(v);
}

/// Warp shuffles (__shfl_*_sync over the full warp) for every accumulator type: types
/// narrower than 4 bytes travel as int, complex as two floats. Every lane of the warp must
/// call them.
template <typename A>
__device__ __forceinline__ A shfl_down(const A& v, unsigned delta) {
  if constexpr (is_complex_device_v<A>) {
    return A(__shfl_down_sync(0xffffffffu, v.real(), delta),
             __shfl_down_sync(0xffffffffu, v.imag(), delta));
  } else if constexpr (sizeof(A) < 4) {
    return static_cast<A>(__shfl_down_sync(0xffffffffu, static_cast<int>(v), delta));
  } else {
    return __shfl_down_sync(0xffffffffu, v, delta);
  }
}
template <typename A>
__device__ __forceinline__ A shfl_up(const A& v, unsigned delta) {
  if constexpr (is_complex_device_v<A>) {
    return A(__shfl_up_sync(0xffffffffu, v.real(), delta),
             __shfl_up_sync(0xffffffffu, v.imag(), delta));
  } else if constexpr (sizeof(A) < 4) {
    return static_cast<A>(__shfl_up_sync(0xffffffffu, static_cast<int>(v), delta));
  } else {
    return __shfl_up_sync(0xffffffffu, v, delta);
  }
}

/// Element offset of index i of a one-operand indexer (a multiply when one dimension is
/// left, the common case, instead of the 64-bit divisions of the general walk).
__device__ __forceinline__ int64_t offset_of(const StridedIndexer<1>& ix, int64_t i) {
  if (ix.ndim == 1) return i * ix.strides[0][0];
  int64_t off = 0;
  for (int d = ix.ndim - 1; d >= 0; --d) {
    const int64_t q = i / ix.shape[d];
    off += (i - q * ix.shape[d]) * ix.strides[0][d];
    i = q;
  }
  return off;
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

/// Blocks of `threads` threads of `kernel` resident on the whole device at once (blocks per
/// SM from the occupancy calculator, times the SM count; at least one per SM).
template <typename Kernel>
int resident_blocks(Kernel kernel, int threads) {
  int per_sm = 0;
  NUVEC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  if (per_sm < 1) per_sm = 1;
  return per_sm * device_props().multiProcessorCount;
}

/// Grid size for `blocks` blocks of work of a grid-stride kernel with `resident` blocks
/// resident at once: every block when there are at most 32 waves (the hardware scheduler
/// then balances blocks of uneven length), else 32 waves that loop over the rest.
inline unsigned grid_blocks(int64_t blocks, int resident) {
  const int64_t cap = int64_t(resident) * 32;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks < cap ? blocks : cap);
}

/// Smallest power of two >= v (v >= 1), capped at cap (a power of two).
inline int pow2_at_least(int64_t v, int cap) {
  int p = 1;
  while (p < cap && p < v) p <<= 1;
  return p;
}

/// ceil(a / b) for positive b.
inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace nuvec::cu
