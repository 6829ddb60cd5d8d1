// nuvec: warp and block reductions of the CUDA kernels (reduce, arg_reduce, softmax,
// logsumexp and the fused row kernels to come): shuffles of any trivially copyable value, a
// butterfly all-reduce over a group of lanes, a fixed-order reduction into a group's first
// thread, and a block-wide all-reduce. Every combiner `f(a, b)` is a functor of two values
// of the same type (math::Combine, an online-softmax merge, an argmax candidate pick).
// Host-free device code.
#pragma once

#include <cstring>

namespace nuvec::cu {

/// Threads in a warp.
constexpr int kWarpSize = 32;

namespace detail {
// A value as 32-bit words (one shuffle each): types narrower than 4 bytes take one word.
template <typename T>
struct ShflWords {
  static constexpr int n = sizeof(T) < 4 ? 1 : int((sizeof(T) + 3) / 4);
  int w[n];
};
template <typename T, typename S>
__device__ __forceinline__ T shuffle_words(const T& v, const S& shfl) {
  detail::ShflWords<T> in{}, out;
  memcpy(in.w, &v, sizeof(T));
#pragma unroll
  for (int k = 0; k < ShflWords<T>::n; ++k) out.w[k] = shfl(in.w[k]);
  T r;
  memcpy(&r, out.w, sizeof(T));
  return r;
}
} // namespace detail

/// __shfl_down_sync / __shfl_up_sync / __shfl_xor_sync over the full warp for any trivially
/// copyable T (moved bit for bit, as 32-bit words), within groups of `width` lanes (a power
/// of two <= 32). Every lane of the warp must call them.
template <typename T>
__device__ __forceinline__ T shfl_down(const T& v, unsigned delta, int width = kWarpSize) {
  return detail::shuffle_words(v, [&](int w) { return __shfl_down_sync(0xffffffffu, w, delta, width); });
}
template <typename T>
__device__ __forceinline__ T shfl_up(const T& v, unsigned delta, int width = kWarpSize) {
  return detail::shuffle_words(v, [&](int w) { return __shfl_up_sync(0xffffffffu, w, delta, width); });
}
template <typename T>
__device__ __forceinline__ T shfl_xor(const T& v, int mask, int width = kWarpSize) {
  return detail::shuffle_words(v, [&](int w) { return __shfl_xor_sync(0xffffffffu, w, mask, width); });
}

/// Combines v over each group of `width` consecutive lanes (a power of two <= 32) by a
/// butterfly: every lane of the group gets the result. f must be commutative (the lanes of a
/// pair combine in opposite orders).
template <typename T, typename F>
__device__ __forceinline__ T warp_allreduce(T v, int width, const F& f) {
  for (int o = width / 2; o > 0; o >>= 1) v = f(v, shfl_xor(v, o, width));
  return v;
}

/// Combines the values of each group of L consecutive threads (L a power of two <= the block
/// size) into the group's first thread, in a fixed order (deterministic: a tree over the
/// warp, then the warps' results left to right). Every thread of the block must call it with
/// the same L (full-warp shuffles, and barriers when L > 32); `smem` holds one T per warp.
template <typename T, typename F>
__device__ __forceinline__ T group_reduce(T v, int L, const F& f, T* smem) {
  const int width = L < kWarpSize ? L : kWarpSize;
  for (int o = width / 2; o > 0; o >>= 1) v = f(v, shfl_down(v, o));
  if (L > kWarpSize) {
    const int warp = threadIdx.x / kWarpSize;
    __syncthreads(); // readers of smem from the previous round are done
    if (threadIdx.x % kWarpSize == 0) smem[warp] = v;
    __syncthreads();
    if (threadIdx.x % L == 0) {
      v = smem[warp];
      for (int w = 1; w < L / kWarpSize; ++w) v = f(v, smem[warp + w]);
    }
  }
  return v;
}

/// Combines v over the whole block (every thread calls it; blockDim.x a multiple of 32):
/// each warp all-reduces, then every thread combines the warps' results itself (left to
/// right, so every thread gets the same value), which saves a second barrier-and-broadcast.
/// `smem` holds one T per warp; the leading barrier lets a previous use of it finish.
template <typename T, typename F>
__device__ __forceinline__ T block_allreduce(T v, const F& f, T* smem) {
  v = warp_allreduce(v, kWarpSize, f);
  __syncthreads();
  if (threadIdx.x % kWarpSize == 0) smem[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  T r = smem[0];
  for (int w = 1; w < int(blockDim.x) / kWarpSize; ++w) r = f(r, smem[w]);
  return r;
}

} // namespace nuvec::cu
