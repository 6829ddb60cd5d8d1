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

// ---- Base-2 states (the attention kernels) ----------------------------------------------
// The attention kernels fold log2(e) into the query scale, so a score x stands for e^(x ln 2)
// and each weight is one exp2 (MUFU.EX2) instead of expf's range reduction. A state is the
// running max m of the scores seen (NaN scores lose, as in max_no_nan; −inf until a finite or
// +inf score arrives) and l = Σ exp2(x − base(m)); a partial unnormalised output o = Σ
// exp2(x − base(m)) v rides along, rescaled by the factors these return. Merging is
// commutative and associative up to rounding, so warps, blocks and key blocks (the
// flash-decoding split) combine in any order.

/// What exp2 arguments are taken relative to for a running max m: m, or 0 while m is −inf,
/// so that a −inf score gets weight exp2(−inf − 0) = 0 where −inf − m would be NaN. A +inf
/// max gives NaN weights (inf − inf): a +inf score makes the row NaN, as the composed
/// softmax does; a NaN score poisons l through its own weight.
__device__ __forceinline__ float exp2_base(float m) {
  return m == -std::numeric_limits<float>::infinity() ? 0.0f : m;
}

/// exp2 as CUDA's exp2f (within 2 ulp, denormal results kept): the default of the helpers
/// below. Kernels whose weights are summed against a max weight of 1 may pass a faster one
/// (mma.cuh's exp2_approx: one ex2.approx.ftz, denormals flushed to 0).
struct Exp2f {
  __device__ __forceinline__ float operator()(float x) const { return exp2f(x); }
};

/// Adds N base-2 scores s (−inf for hidden keys: they weigh 0) to the state (m, l).
/// Overwrites each s[k] with its weight exp2(s[k] − base(new m)) and returns the factor the
/// previous unnormalised output must be multiplied by (0 when no score counted before).
template <int N, typename Exp2 = Exp2f>
__device__ __forceinline__ float online_add_exp2(float& m, float& l, float (&s)[N], Exp2 exp2 = {}) {
  float mx = m;
#pragma unroll
  for (int k = 0; k < N; ++k) mx = fmaxf(mx, s[k]);
  const float base = exp2_base(mx);
  const float alpha = exp2(m - base);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    s[k] = exp2(s[k] - base);
    sum += s[k];
  }
  l = l * alpha + sum;
  m = mx;
  return alpha;
}

/// Merges the base-2 state (m2, l2) into (m, l). Returns the factors {x, y} of the two parts'
/// unnormalised outputs: the merged output is x · o + y · o2. A part that saw nothing (m −inf,
/// l 0) weighs 0; NaN in either l stays NaN.
template <typename Exp2 = Exp2f>
__device__ __forceinline__ float2 online_merge_exp2(float& m, float& l, float m2, float l2, Exp2 exp2 = {}) {
  const float mx = fmaxf(m, m2);
  const float base = exp2_base(mx);
  const float x = exp2(m - base), y = exp2(m2 - base);
  m = mx;
  l = l * x + l2 * y;
  return make_float2(x, y);
}

} // namespace nuvec::cu
