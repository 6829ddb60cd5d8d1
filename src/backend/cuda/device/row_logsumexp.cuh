// nuvec: the logsumexp of one row by a group of TPR threads (a warp's lanes, or a whole
// block when TPR > 32), the core of the LogSumExp and CrossEntropy kernels. One pass of
// online (max, sum) accumulation (online_softmax.cuh): 16-byte vectors where the row is
// aligned, the running sum rescaled only when a vector raises the running max; then the
// group's parts merged by shuffles and, across warps, shared memory.
// Semantics (the LogSumExp fallback's): NaN anywhere gives NaN; a row whose max is ±inf
// gives that infinity; else max + log(sum(exp(x − max))). Host-free device code.
#pragma once

#include <cstdint>
#include <limits>

#include "backend/common/math/functions.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/device/warp.cuh"

namespace nuvec::cu {

/// A row's logsumexp in two parts: max + log_sum, log_sum = log(sum(exp(x − max))).
template <typename A>
struct LseParts {
  A max, log_sum;
};

/// The logsumexp (in math::compute_t<T>) of src[0, n) in parts, returned to every thread of
/// the group; `lane` is the thread's index in its group. Every thread of the block must call
/// it (src null for a group past the last row: it then contributes the identity).
/// `aligned`: src is 16-byte aligned and n a multiple of 16 / sizeof(T). The special cases
/// come with log_sum 0: {NaN, 0} for a NaN anywhere, {±inf, 0} for a max of ±inf.
template <typename T, int TPR>
__device__ __forceinline__ LseParts<math::compute_t<T>> row_logsumexp_parts(const T* src, int64_t n, int lane,
                                                                            bool aligned) {
  using A = math::compute_t<T>;
  constexpr int W = vec_elems<T>();
  constexpr int kWidth = TPR < 32 ? TPR : 32;
  A m = neg_inf<A>(), s = 0;
  int nan = 0;
  if (src) {
    if (aligned) {
      // kUnroll vectors are loaded before any is used: a thread keeps that many loads in
      // flight (one at a time ran LogSumExp at 0.22 of the copy bandwidth on the H200).
      constexpr int kUnroll = 4;
      const int64_t nv = n / W;
      for (int64_t v0 = lane; v0 < nv; v0 += int64_t(kUnroll) * TPR) {
        Packed<T, W> raw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (v0 + u * TPR < nv) raw[u] = load_packed<W, Load::ReadOnly>(src + (v0 + u * TPR) * W);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (v0 + u * TPR < nv) {
            A vm = neg_inf<A>();
#pragma unroll
            for (int j = 0; j < W; ++j) {
              const A a = acc_at(raw[u], j);
              nan |= a != a;
              vm = max_no_nan(vm, a);
            }
            // The running sum is rescaled only when the max grows (rarely, after the first
            // vectors), then the vector's terms added at the running max: one exp an
            // element, where merging each vector as a (max, sum) part took W + 2.
            if (vm > m) {
              if (m != neg_inf<A>()) s *= math::exp(m - vm);
              m = vm;
            }
            if (m != neg_inf<A>()) {
#pragma unroll
              for (int j = 0; j < W; ++j) s += math::exp(acc_at(raw[u], j) - m); // +inf: NaN, as online_add
            }
          }
        }
      }
    } else {
      for (int64_t i = lane; i < n; i += TPR) {
        const A v = to_acc(src[i]);
        nan |= v != v;
        online_add(m, s, v);
      }
    }
  }
  const auto either = [](int a, int b) { return a | b; };
  OnlineMaxSum<A> ms{m, s};
  if constexpr (TPR > 32) {
    __shared__ OnlineMaxSum<A> buf_ms[TPR / 32];
    __shared__ int buf_nan[TPR / 32];
    ms = block_allreduce(ms, OnlineMerge{}, buf_ms);
    nan = block_allreduce(nan, either, buf_nan);
  } else {
    ms = warp_allreduce(ms, kWidth, OnlineMerge{});
    nan = warp_allreduce(nan, kWidth, either);
  }
  if (nan) return {std::numeric_limits<A>::quiet_NaN(), A(0)};
  if (ms.m == std::numeric_limits<A>::infinity() || ms.m == neg_inf<A>()) return {ms.m, A(0)};
  return {ms.m, math::log(ms.s)};
}

/// The logsumexp of src[0, n): max + log_sum of row_logsumexp_parts (same arguments).
template <typename T, int TPR>
__device__ __forceinline__ math::compute_t<T> row_logsumexp(const T* src, int64_t n, int lane, bool aligned) {
  const auto p = row_logsumexp_parts<T, TPR>(src, n, lane, aligned);
  return p.max + p.log_sum;
}

} // namespace nuvec::cu
