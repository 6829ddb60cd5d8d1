// nuvec: the GatedDelta fused primitive (shared/seeds/001's gated_delta, gated_delta_steps and
// gated_delta_slots): the gated delta rule over T steps. Ops, checks, fallback graph and rules
// in src/fast/gated_delta.cpp; its backward GatedDeltaVjp; the per-row steps both backends
// run in src/backend/common/math/gated_delta.h; kernels in src/backend/cpu/fast/gated_delta.cpp
// (both primitives), src/backend/cuda/fast/gated_delta.cu (+ gated_delta_chunked.cu) and
// src/backend/cuda/fast/gated_delta_vjp.cu, tested against the fallback, its vjp and a float64
// loop (tests/fast_gated_delta_test.cpp).
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

/// What a GatedDelta node returns beside y, and where its states live.
enum class GatedDeltaMode {
  final_state, // (q, k, v, g, beta, state [B, Hv, Dv, Dk]) -> (y, the final state)
  steps,       // same inputs -> (y, every step's state [B, T, Hv, Dv, Dk])
  slots,       // (q, k, v, g, beta, pool [P, Hv, Dv, Dk], slots int32 [B]) -> (y, the pool with
               // row slots[b] replaced by sequence b's final state)
};

/// (q, k [B, T, Hk, Dk] and v [B, T, Hv, Dv] of one real floating dtype; g, beta [B, T, Hv]
/// and the state (or pool) of any real floating dtypes) -> y [B, T, Hv, Dv] in q's dtype and
/// the state output in the state's dtype. Per (b, h) and row i of the [Dv, Dk] state S, with
/// g, β, v_i of step t and k, q of key head h / (Hv / Hk):
///   δ_i = β (v_i − g S_i·k),   y_i = g S_i·q + δ_i k·q,   S_i ← g S_i + δ_i k,
/// the fallback's S ← gS; S ← S + k(β(v − Sk))ᵀ; y = Sq with y computed from the old row
/// (one reduction per step instead of two), in float32 (float64 when an input is float64).
/// Kernels: the CPU's one task per (b, h) over the thread pool; the GPU's one pass over T with
/// a group of lanes per state row (8 elements each) in registers, or from T = 64 on (not the
/// steps mode) the chunked WY form (src/backend/cuda/fast/gated_delta_chunked.cu). Rules (vjp, jvp) from the
/// fallback, except the final-state mode's vjp: a GatedDeltaVjp node (the recurrence run
/// backwards) on the CPU and on a GPU (NUVEC_GATED_DELTA_VJP_GPU=0 takes the fallback's rule
/// there); vmap folds the batch axis into B (the slots mode batches its
/// fallback).
class GatedDelta : public fast::FastPrimitive {
 public:
  GatedDelta(Stream stream, GatedDeltaMode mode);
  /// From state() (export's import); throws std::invalid_argument for an unknown mode.
  GatedDelta(Stream stream, int mode);
  GatedDeltaMode mode() const { return mode_; }
  /// The mode as an integer (MLX's state(); read by export).
  int state() const { return static_cast<int>(mode_); }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()

 private:
  GatedDeltaMode mode_;
};

/// The backward of GatedDelta's final-state mode: inputs {q, k, v, g, beta, state (as
/// GatedDelta's), dy [B, T, Hv, Dv], dstate [B, Hv, Dv, Dk] (the cotangents of y and of the
/// final state)}, outputs {dq, dk, dv, dg, dbeta, dstate0} with the shapes and dtypes of the
/// first six inputs. Per (b, h), from the last step back, with S_t the state after step t,
/// P = S_{t−1} and D the cotangent of S_t:
///   D += dy_t q_tᵀ,  dq_t += S_tᵀ dy_t,
///   u = v_t − g P k,  δ = β u,  dδ = D k,  du = β dδ = dv_t,
///   dβ_t = dδ·u,  dg_t = ⟨D, P⟩ − du·(P k),  dk_t += Dᵀ δ − g Pᵀ du,
///   D ← g (D − du k_tᵀ)   (the cotangent of S_{t−1}; dstate0 at the end),
/// dq and dk summed over the Hv / Hk value heads of each key head; in float32 (float64 when an
/// input is). The states are recomputed forwards from checkpoints every kGatedDeltaVjpChunk
/// steps, one chunk at a time (memory O(T / C + C) states per head, not O(T)). Kernel: CPU,
/// one task per (b, key head) over the thread pool (src/backend/cpu/fast/gated_delta.cpp);
/// CUDA, one block per (b, value head) (src/backend/cuda/fast/gated_delta_vjp.cu; Dk <= 256,
/// the cotangent state in shared memory, not float64; else on the host); both step rows with
/// src/backend/common/math/gated_delta.h. Rules: the fallback's (the vjp of GatedDelta's
/// graph).
class GatedDeltaVjp : public fast::FastPrimitive {
 public:
  explicit GatedDeltaVjp(Stream stream);

  NUVEC_FAST_PRIMITIVE()
};

/// Steps between the checkpoints of GatedDeltaVjp's recomputed states.
inline constexpr int kGatedDeltaVjpChunk = 64;

/// Whether the GPU kernel covers keys of dk features of q's dtype (the state's and the
/// decays' dtypes are any real floating type but float64 there).
bool gated_delta_gpu_covers(int dk, Dtype dtype);

} // namespace nuvec
