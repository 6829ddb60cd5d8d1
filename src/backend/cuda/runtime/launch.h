// nuvec: launch geometry of the CUDA kernels (host side): grid sizes for grid-stride kernels,
// the resident-block count of a kernel, and the block size of the reduction-style kernels.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime/runtime.h"

namespace nuvec::cu {

/// Threads per block of every reduction-style kernel (Reduce, ArgReduce, Scan; a multiple of
/// the warp size; the shared-memory layouts of those kernels assume exactly this many).
constexpr int kReduceThreads = 256;

/// Blocks count for n elements at `threads` per block, capped at a few waves of the SMs
/// (kernels use grid-stride loops). Implemented in device.cpp.
unsigned grid_for(size_t n, unsigned threads);

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

/// The minimum-blocks argument of __launch_bounds__ that keeps `threads` threads of blocks of
/// `block` threads resident on an SM (so the compiler caps registers at 65536 / threads),
/// within the 32 blocks an SM can hold.
constexpr int min_blocks_for(int threads, int block) {
  return threads / block > 32 ? 32 : (threads / block < 1 ? 1 : threads / block);
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
