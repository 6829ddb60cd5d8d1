// nuvec: the step of the gated delta rule on one row of the state, one text for the CPU
// kernel (src/backend/cpu/fast/gated_delta.cpp) and the CUDA kernel
// (src/backend/cuda/fast/gated_delta.cu). The fallback (src/fast/gated_delta.cpp) runs
//   S ← g S;   S ← S + k (β (v − S k))ᵀ;   y = S q.
// Row i of S evolves on its own (k, q, g, β are the head's; v_i is the row's), and with
// s = S_i before the step:
//   (g s + δ k)·q = g (s·q) + δ (k·q),   δ = β (v_i − g (s·k)),
// so one pass over the row gives the three dot products s·k, s·q and k·q, a second applies
// s ← g s + δ k, and a kernel that splits the row over lanes reduces once a step instead of
// twice (before and after the update).
#pragma once

#include "backend/common/math/config.h"

NUVEC_MATH_BEGIN

/// Elements of a state row one GPU lane holds (a 16-byte vector of the half types); the GPU
/// kernel covers rows of up to kGatedDeltaMaxDk elements (32 lanes), multiples of it.
inline constexpr int kGatedDeltaLaneElems = 8;
inline constexpr int kGatedDeltaMaxDk = 32 * kGatedDeltaLaneElems;

/// δ and y of one row from the step's scalars and the row's three dot products (taken on the
/// row before the step): δ = β (v − g sk), y = g sq + δ kq.
template <typename A>
struct GatedDeltaRowStep {
  A delta, y;
};

template <typename A>
NUVEC_HD inline GatedDeltaRowStep<A> gated_delta_row_step(A g, A beta, A v, A sk, A sq, A kq) {
  const A delta = beta * (v - g * sk);
  return {delta, g * sq + delta * kq};
}

/// An element of the row after the step: g s + δ k.
template <typename A>
NUVEC_HD inline A gated_delta_update(A s, A g, A delta, A k) {
  return g * s + delta * k;
}

/// The backward of one row's step (GatedDeltaVjp's kernels). With p the row before the step,
/// d the cotangent of the row after it (y's part d += dy_i q already added), and the three
/// dot products kp = p·k, dk_ = d·k, dp = d·p:
///   u = v − g kp,  δ = β u,  dδ = d·k,  du = β dδ  (= dv_i),
///   dβ gets dδ u,  dg gets d·p − du kp,
///   dk gets δ d − g du p  (elementwise: delta · d_j − g_du · p_j),
///   the row's cotangent before the step: g (d − du k)  (gated_delta_row_back).
template <typename A>
struct GatedDeltaRowGrad {
  A delta, du, g_du, dbeta, dg;
};

template <typename A>
NUVEC_HD inline GatedDeltaRowGrad<A> gated_delta_row_grad(A g, A beta, A v, A kp, A dk_, A dp) {
  const A u = v - g * kp;
  const A du = beta * dk_;
  return {beta * u, du, g * du, dk_ * u, dp - du * kp};
}

/// An element of the row's cotangent before the step: g (d − du k).
template <typename A>
NUVEC_HD inline A gated_delta_row_back(A d, A g, A du, A k) {
  return g * (d - du * k);
}

NUVEC_MATH_END
