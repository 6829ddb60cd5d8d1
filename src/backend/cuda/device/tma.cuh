// nuvec: Hopper's asynchronous data movement for warp-specialised kernels: the tensor memory
// accelerator (TMA: cp.async.bulk.tensor, a tile of a global tensor described by a
// CUtensorMap copied into shared memory by one thread), the shared-memory barriers
// (mbarrier) its copies complete on, named barriers for a warpgroup, and setmaxnreg (the
// register reallocation between producer and consumer warpgroups). Thin PTX wrappers (PTX
// ISA: "Tensor copy", "mbarrier", "setmaxnreg"); used by the Hopper attention forward
// (fast/attention_hopper.cu).
//
// The barrier protocol the kernels follow (CUTLASS's PipelineTmaAsync, written out): a
// "full" barrier per stage (count 1) on which the producer arrives with the stage's byte
// count (arrive_expect_tx) before issuing its copies, each copy completing its bytes on it;
// an "empty" barrier per stage (count: the consumer warps) on which each consumer warp
// arrives once it no longer reads the stage. Use i of a stage waits for phase parity
// (i / stages) & 1 on "full"; the producer waits on "empty" with the opposite parity, so its
// first pass over the stages does not block (a fresh barrier's preceding phase, parity 1,
// counts as complete).
//
// The TMA with CU_TENSOR_MAP_SWIZZLE_128B and a box 64 16-bit elements wide writes a box of R
// rows as R x 128 bytes with 16-byte chunk c of row r at r · 128 + ((c ^ (r % 8)) · 16): the
// 128-byte-swizzled panel of device/wgmma.cuh, so a tile copied as one box per 64 columns is
// a wgmma operand as it lands. Rows and columns outside the tensor arrive as zeros (and still
// count their bytes).
// Host-free device code; the PTX needs sm_90 (setmaxnreg sm_90a: NUVEC_WGMMA_AVAILABLE).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/device/wgmma.cuh"

namespace nuvec::cu {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

/// Initialises the mbarrier at shared address `bar` to expect `count` arrivals a phase.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/// Makes the initialised barriers visible to the other threads' and the copy engine's
/// operations (followed by a __syncthreads).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// Arrives on `bar` and adds `bytes` to the transaction count its current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/// Arrives on `bar` (one of the count arrivals of its phase).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/// Whether the phase of `bar` with the given parity has completed (one bounded wait).
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

/// Waits until the phase of `bar` with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

/// One TMA copy of the box at coordinates (c0 innermost .. c3) of the 4-d tensor `map` into
/// shared memory at `dst` (1024-byte aligned for the 128-byte swizzle), completing its bytes
/// on the mbarrier `bar`. `map` is the address of a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

/// Named barrier ID (1 .. 15; 0 is __syncthreads) over THREADS threads (a multiple of 32).
/// Immediate operands, so that ptxas reserves only the barriers a kernel names.
template <int ID, int THREADS>
__device__ __forceinline__ void bar_sync() {
  static_assert(ID >= 1 && ID <= 15 && THREADS % 32 == 0, "a named barrier and whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

/// Arrives on named barrier ID (of THREADS threads, counting the arrivals and the waiters)
/// without waiting: the producer side of a bar.sync elsewhere.
template <int ID, int THREADS>
__device__ __forceinline__ void bar_arrive() {
  static_assert(ID >= 1 && ID <= 15 && THREADS % 32 == 0, "a named barrier and whole warps");
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

#endif

#if defined(NUVEC_WGMMA_AVAILABLE)

/// setmaxnreg.inc / .dec: the calling warpgroup's register count per thread becomes N (a
/// multiple of 8 in 24 .. 256), taken from or returned to the multiprocessor's pool. All four
/// warps of the warpgroup execute it together.
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

#endif

} // namespace nuvec::cu
