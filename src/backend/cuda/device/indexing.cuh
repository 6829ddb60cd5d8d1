// nuvec: strided indexing of the CUDA kernels: the shape and per-operand strides a kernel
// walks (after the host merged what walks like one dimension, backend/common/strided.h),
// linear index -> element offsets, and the grid-stride loop. Host-free device code; the
// host builds indexers with cu::indexer_of / make_indexer (kernel_utils.cuh).
#pragma once

#include <cstdint>

namespace nuvec::cu {

/// Most dimensions a strided kernel walks after merging (arrays with more dimensions that
/// cannot be merged are copied to contiguous form first by the caller, or rejected).
constexpr int kMaxDims = 8;

/// Shape and N operands' strides, passed to kernels by value.
template <int N>
struct StridedIndexer {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];

  /// Element offsets of the operands at row-major linear index i.
  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t q = i / shape[d];
      int64_t r = i - q * shape[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
      i = q;
    }
  }
};

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

/// Whether an index space of n elements takes strided_offsets' 32-bit path.
__host__ __device__ __forceinline__ bool small_index_space(int64_t n) {
  return n <= int64_t(UINT32_MAX);
}

/// Element offsets of the N operands at row-major index i of ix's shape. One dimension
/// (contiguous, broadcast scalars, 1-d slices) needs no division; when the whole index space
/// fits in 32 bits (`small`: every dimension and index is below 2^32) the divisions run in
/// 32 bits, several times cheaper than 64-bit ones.
template <int N>
__device__ __forceinline__ void strided_offsets(
    const StridedIndexer<N>& ix,
    int64_t i,
    bool small,
    int64_t (&off)[N]) {
  if (ix.ndim == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = i * ix.strides[k][0];
    return;
  }
  if (!small) {
    ix.offsets(i, off);
    return;
  }
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  uint32_t rest = static_cast<uint32_t>(i);
  for (int d = ix.ndim - 1; d >= 0; --d) {
    uint32_t s = static_cast<uint32_t>(ix.shape[d]);
    uint32_t q = rest / s;
    int64_t r = rest - q * s;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += r * ix.strides[k][d];
    rest = q;
  }
}

/// Grid-stride loop over [0, n).
#define NUVEC_CUDA_KERNEL_LOOP(i, n)                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < int64_t(n);    \
       i += int64_t(blockDim.x) * gridDim.x)

} // namespace nuvec::cu
