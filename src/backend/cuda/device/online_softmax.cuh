// nuvec: the online (max, sum of exp) accumulation of softmax-style row kernels (Softmax,
// LogSumExp; later the attention kernels): one pass keeps a running max m and the sum s of
// exp(x - m), rescaled whenever the max grows (Milakov and Gimelshein, "Online normalizer
// calculation for softmax", 2018). Host-free device code.
#pragma once

#include <limits>

#include "backend/common/math/functions.h"

namespace nuvec::cu {

template <typename A>
__device__ __forceinline__ A neg_inf() {
  return math::lowest_or_neg_inf<A>();
}

// Max that lets NaN lose: a NaN still reaches the row's sum (exp(NaN - m)), which makes the
// row NaN, and keeping it out of the max keeps the online rescaling free of NaN - NaN cases.
template <typename A>
__device__ __forceinline__ A max_no_nan(A a, A b) {
  return b > a ? b : a;
}

// Running (max m, sum s of exp(x - m)) of one thread's elements. A -inf element adds
// nothing (exp(-inf - m) is 0 for any m but -inf, where the composed formula's NaN comes
// from the final pass instead: exp(-inf - -inf) / 0); a +inf element poisons s with NaN, as
// inf - inf does in the composed formula; a NaN element poisons s through exp.
template <typename A>
__device__ __forceinline__ void online_add(A& m, A& s, A v) {
  if (v > m) {
    const A inf = std::numeric_limits<A>::infinity();
    s = s * math::exp(m - v) + (v == inf ? std::numeric_limits<A>::quiet_NaN() : A(1));
    m = v;
  } else if (v != neg_inf<A>()) {
    s += math::exp(v - m);
  }
}

// Merges (m2, s2) into (m, s). A part with max -inf has s 0 or NaN and is taken as is.
template <typename A>
__device__ __forceinline__ void online_merge(A& m, A& s, A m2, A s2) {
  const A mm = max_no_nan(m, m2);
  const A a = m == neg_inf<A>() ? s : s * math::exp(m - mm);
  const A b = m2 == neg_inf<A>() ? s2 : s2 * math::exp(m2 - mm);
  m = mm;
  s = a + b;
}

/// A running (max m, sum s of exp(x - m)) pair, as the warp and block reductions
/// (device/warp.cuh) move it.
template <typename A>
struct OnlineMaxSum {
  A m;
  A s;
};

/// The combiner of OnlineMaxSum pairs for device/warp.cuh (online_merge; commutative).
struct OnlineMerge {
  template <typename A>
  __device__ __forceinline__ OnlineMaxSum<A> operator()(OnlineMaxSum<A> a, const OnlineMaxSum<A>& b) const {
    online_merge(a.m, a.s, b.m, b.s);
    return a;
  }
};

} // namespace nuvec::cu
