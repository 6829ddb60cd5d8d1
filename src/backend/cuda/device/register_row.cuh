// nuvec: a row held in registers by a group of TPR threads (a warp's lanes or a whole
// block), the core of the memory-bound row kernels (Softmax, LogSumExp): thread `lane`
// holds vectors lane, lane + TPR, ... of the row as packed elements (vector.cuh Packed:
// 16 registers for 4 vectors of any element type), all loaded before the first use, so
// that the kernel fits the 40-48 register budgets that keep 1280-1536 threads an SM
// resident. On the H200 that is what moves a bf16 row kernel from half the copy bandwidth
// to near all of it. Host-free device code.
#pragma once

#include <cstdint>

#include "backend/common/math/functions.h"
#include "backend/common/math/types.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/device/warp.cuh"

namespace nuvec::cu {

/// The row's vectors a thread holds: VPT vectors of W = kVec<T> elements. Only for rows
/// that start on a 16-byte boundary and hold a whole number of vectors (nv of them).
template <typename T, int TPR, int VPT>
struct RegisterRow {
  static constexpr int W = kVec<T>;
  using A = math::compute_t<T>;
  Packed<T, W> v[VPT];
  int nv;
  int lane;

  /// Loads the thread's vectors of the row at src (nv vectors); padding slots stay unread.
  __device__ __forceinline__ void load(const T* src, int nvec, int group_lane) {
    nv = nvec;
    lane = group_lane;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (valid(k)) v[k] = load_packed<W, Load::ReadOnly>(src + index(k) * W);
    }
  }
  /// The vector index in the row of the thread's k-th slot, and whether the row has it.
  __device__ __forceinline__ int index(int k) const { return k * TPR + lane; }
  __device__ __forceinline__ bool valid(int k) const { return index(k) < nv; }
  /// Element j of slot k, in the compute type.
  __device__ __forceinline__ A at(int k, int j) const { return acc_at(v[k], j); }

  /// f(acc, x) folded over the thread's elements of the row, in order.
  template <typename F>
  __device__ __forceinline__ A fold(A acc, const F& f) const {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (valid(k)) {
#pragma unroll
        for (int j = 0; j < W; ++j) acc = f(acc, at(k, j));
      }
    }
    return acc;
  }

  /// Writes g(x) for every element of the thread's vectors to the row at dst.
  template <typename G>
  __device__ __forceinline__ void store_map(T* dst, const G& g) const {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (valid(k)) {
        Vec<T, W> y;
#pragma unroll
        for (int j = 0; j < W; ++j) y[j] = store_as<T>(g(at(k, j)));
        store_vec<W>(dst + index(k) * W, y);
      }
    }
  }
};

/// exp(x − m) for a row's sums and weights, m the row's max. 16-bit element types take one
/// FFMA and one ex2.approx.ftz: their results round to 8 or 11 bits, and the approximation's
/// error (about 2^-22, plus the rounding of the argument x·log2e − m·log2e, under 2^-16 for
/// |x − m| < 2^7) stays far under that half ulp; the library's expf costs a range reduction
/// per element that made the bf16 softmax and logsumexp issue-bound on the H200. Results
/// under 2^-126 flush to 0. float32 and float64 rows keep math::exp, the math layer's exp.
/// Special values as exp(x − m): −inf gives 0, a −inf or +inf max with an equal x gives NaN.
template <typename T>
struct ShiftedExp {
  using A = math::compute_t<T>;
  A m;
  A neg_m_log2e;
  __device__ __forceinline__ explicit ShiftedExp(A max) : m(max), neg_m_log2e(-max * A(1.4426950408889634)) {}
  __device__ __forceinline__ A operator()(A x) const {
    if constexpr (sizeof(T) == 2) {
      float y;
      asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(fmaf(x, 1.4426950408889634f, neg_m_log2e)));
      return y;
    } else {
      return math::exp(x - m);
    }
  }
};

/// Combines v over a row's group of TPR threads (a warp's lanes when TPR <= 32, else the
/// whole block, whose `smem` holds one T per warp); every thread of the group gets it.
template <int TPR, typename T, typename F>
__device__ __forceinline__ T group_allreduce(T v, const F& f, T* smem) {
  if constexpr (TPR > kWarpSize) return block_allreduce(v, f, smem);
  else return warp_allreduce(v, TPR, f);
}

/// Threads of a block that holds several warp-sized rows.
constexpr int kRowWarpBlock = 128;

/// The smallest register configuration whose capacity covers a row of n elements, passed to
/// `launch.template operator()<TPR, VPT, BLOCK>()`: a warp per row with 1, 2 or 4 vectors a
/// lane (kRowWarpBlock / 32 rows a block), then a block per row of 64 to 1024 threads with
/// 4 vectors each. Returns false (launching nothing) for longer rows. Host code.
template <typename T, typename L>
bool launch_register_row(int64_t n, const L& launch) {
  constexpr int64_t W = kVec<T>;
  constexpr int kVpt = 4;
  const int64_t vecs = (n + W - 1) / W;
  if (vecs <= 32) return launch.template operator()<32, 1, kRowWarpBlock>(), true;
  if (vecs <= 64) return launch.template operator()<32, 2, kRowWarpBlock>(), true;
  if (vecs <= 128) return launch.template operator()<32, 4, kRowWarpBlock>(), true;
  if (vecs <= 64 * kVpt) return launch.template operator()<64, kVpt, 64>(), true;
  if (vecs <= 128 * kVpt) return launch.template operator()<128, kVpt, 128>(), true;
  if (vecs <= 256 * kVpt) return launch.template operator()<256, kVpt, 256>(), true;
  if (vecs <= 512 * kVpt) return launch.template operator()<512, kVpt, 512>(), true;
  // 1024 threads hold at most 4 x 8 floats each here: within the 64 registers a thread may
  // use at that block size.
  if (vecs <= 1024 * kVpt) return launch.template operator()<1024, kVpt, 1024>(), true;
  return false;
}

} // namespace nuvec::cu
