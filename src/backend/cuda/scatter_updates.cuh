// nuvec: the scatter step shared by ScatterAxis (indexing.cu) and Scatter (gather_scatter.cu):
// write or combine located updates into an output that already holds its initial values.
// An `Addr` policy maps update number e (row-major over the updates) to the output and update
// element offsets, or says the update lands outside (skipped). Overwrites keep the last update
// in e order for each position, as the CPU's sequential loops do (src/backend/cpu/
// gather_scatter.cpp, indexing.cpp): a first pass claims each position with atomicMax of e, a
// second writes only the winners. Reductions combine through index_utils.cuh's atomics.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "backend/cuda/index_utils.cuh"
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

namespace detail {

constexpr unsigned kScatterThreads = 256;

/// winner[o] = max over the updates e landing on o of e + 1 (0: none).
template <typename Addr, typename Ord>
__global__ void scatter_claim_kernel(Addr addr, Ord* winner, int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t o, u;
    if (addr.locate(e, o, u)) atomicMax(winner + o, static_cast<Ord>(e + 1));
  }
}

/// out[o] = upd[u] for the updates that won their position (all of them without winner).
template <typename Addr, typename U, typename Ord>
__global__ void scatter_assign_kernel(
    Addr addr,
    const U* upd,
    U* out,
    const Ord* winner,
    int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t o, u;
    if (addr.locate(e, o, u) && (winner == nullptr || winner[o] == static_cast<Ord>(e + 1))) {
      out[o] = upd[u];
    }
  }
}

/// out[o] = combine(op, out[o], upd[u]) atomically for every update.
template <typename Addr, typename T>
__global__ void scatter_combine_kernel(
    Addr addr,
    const T* upd,
    T* out,
    ScatterOp op,
    int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t o, u;
    if (addr.locate(e, o, u)) atomic_combine(out + o, upd[u], op);
  }
}

/// The overwrite: with may_collide, claims (Ord per output element) then writes winners.
template <typename Addr, typename Ord>
void scatter_overwrite(
    const Addr& addr,
    int64_t total,
    const void* upd,
    void* out,
    size_t itemsize,
    int64_t out_size,
    bool may_collide) {
  const unsigned blocks = grid_for(static_cast<size_t>(total), kScatterThreads);
  Ord* winner = nullptr;
  if (may_collide) {
    winner = static_cast<Ord*>(scratch(sizeof(Ord) * static_cast<size_t>(out_size)));
    NUVEC_CUDA_CHECK(cudaMemsetAsync(winner, 0, sizeof(Ord) * static_cast<size_t>(out_size), stream()));
    scatter_claim_kernel<Addr, Ord><<<blocks, kScatterThreads, 0, stream()>>>(addr, winner, total);
    check_launch("scatter_claim_kernel");
  }
  dispatch_bits(itemsize, [&]<typename U>() {
    scatter_assign_kernel<Addr, U, Ord><<<blocks, kScatterThreads, 0, stream()>>>(
        addr, static_cast<const U*>(upd), static_cast<U*>(out), winner, total);
    check_launch("scatter_assign_kernel");
  });
}

} // namespace detail

/// Scatters `total` updates located by addr (see the file comment) from upd into out, a
/// device buffer of out_size elements of dtype holding the initial values: overwriting when
/// op is empty (may_collide: whether two updates can land on one position, which costs a
/// claim pass over an out_size scratch buffer), else combining with *op.
template <typename Addr>
void scatter_updates(
    const Addr& addr,
    int64_t total,
    const void* upd,
    void* out,
    Dtype dtype,
    int64_t out_size,
    std::optional<ScatterOp> op,
    bool may_collide) {
  if (total == 0 || out_size == 0) return;
  if (!op) {
    // 32-bit claims where the update count allows: half the scratch and memset traffic.
    if (total < int64_t(std::numeric_limits<uint32_t>::max())) {
      detail::scatter_overwrite<Addr, unsigned int>(
          addr, total, upd, out, size_of(dtype), out_size, may_collide);
    } else {
      detail::scatter_overwrite<Addr, unsigned long long>(
          addr, total, upd, out, size_of(dtype), out_size, may_collide);
    }
    return;
  }
  dispatch_device_types(dtype, [&]<typename T>() {
    detail::scatter_combine_kernel<Addr, T>
        <<<grid_for(static_cast<size_t>(total), detail::kScatterThreads), detail::kScatterThreads, 0,
           stream()>>>(addr, static_cast<const T*>(upd), static_cast<T*>(out), *op, total);
    check_launch("scatter_combine_kernel");
  });
}

} // namespace nuvec::cu
