// nuvec: atomics of the CUDA kernels beyond the hardware's: a read-modify-write of any 1-,
// 2-, 4- or 8-byte element through a compare-and-swap loop (the scatter reductions' combine
// rules use it where no native atomic computes the same result). Host-free device code.
#pragma once

#include <cuda/std/bit>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/device/vector.cuh"

namespace nuvec::cu {

/// Atomically replaces *addr by f(*addr) through a compare-and-swap loop: on the element's
/// own word for 4- and 8-byte types, on the aligned 32-bit word holding it for 1- and 2-byte
/// types (the neighbouring bytes are written back unchanged, atomically).
template <typename T, typename F>
__device__ __forceinline__ void atomic_update(T* addr, F f) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using W = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
    W* word = reinterpret_cast<W*>(addr);
    W old = *reinterpret_cast<volatile W*>(word);
    while (true) {
      W next = cuda::std::bit_cast<W>(f(cuda::std::bit_cast<T>(old)));
      if (next == old) return; // nothing to change (e.g. max below the slot)
      W seen = atomicCAS(word, old, next);
      if (seen == old) return;
      old = seen;
    }
  } else {
    using B = typename RawWord<int(sizeof(T))>::type;
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
    const unsigned int shift = static_cast<unsigned int>(a & 3) * 8;
    const unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *reinterpret_cast<volatile unsigned int*>(word);
    while (true) {
      T cur = cuda::std::bit_cast<T>(static_cast<B>((old & mask) >> shift));
      unsigned int bits = static_cast<unsigned int>(cuda::std::bit_cast<B>(f(cur)));
      unsigned int next = (old & ~mask) | ((bits << shift) & mask);
      if (next == old) return;
      unsigned int seen = atomicCAS(word, old, next);
      if (seen == old) return;
      old = seen;
    }
  }
}

} // namespace nuvec::cu
