// nuvec: the attention fused primitives (shared/seeds/001: scaled_dot_product_attention,
// paged_attention, paged_write). The ops, their checks, fallback graphs and rules are in
// src/fast/attention.cpp; the planner that picks a route in src/fast/attention_plan.{h,cpp};
// the kernels in src/backend/cpu/fast/attention.cpp and src/backend/cuda/fast/attention*.cu,
// sharing the geometry of src/backend/common/attention.h. Tests: tests/fast_attention*_test.cpp.
#pragma once

#include <cstdint>
#include <tuple>

#include "backend/common/attention.h"
#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// What one fused attention node computes, beyond its inputs. A causal mask aligns the
/// queries with the last Lq keys: query i sees key j when j <= i + Lk - Lq, and with a
/// window w only when also j > i + Lk - Lq - w. An array mask (bool: true attends; else
/// added to the scores) is one of the inputs, broadcast to [B, Hq, Lq, Lk].
struct AttentionParams {
  float scale = 1.0f;
  bool causal = false;
  /// 0: no window; else the number of most recent keys a query sees (with causal only).
  int window = 0;
  /// An array mask input (never together with causal: the op refuses that pair).
  bool has_mask = false;
  bool has_sinks = false;
  /// The vector kernel's passes over the keys (1 or 2), or 0 for the tiled kernel / the CPU
  /// loop. Set by the planner.
  int passes = 0;
  /// Key blocks of the first of two vector passes (1 otherwise). Set by the planner.
  int key_blocks = 1;
  /// With passes 0 on the GPU: the Hopper kernel (attention_hopper.cu) rather than the
  /// mma.sync one (attention_tiled.cu). Set by the planner (AttentionPlan::warp_specialized).
  bool hopper = false;

  bool operator==(const AttentionParams&) const = default;
};

/// The attention graph of ordinary ops (MLX's fallback, sinks folded into the softmax):
/// inputs {q, k, v[, mask][, sinks]} with the mask broadcast to [B, Hq, Lq, Lk]; query i
/// sees keys up to i + offset under causal (offset = Lk - Lq unless given), cut to the
/// window. Returns {out [B, Hq, Lq, Dv] in q's dtype, lse [B, Hq, Lq] float32 (float64 for
/// float64): the log of the softmax's denominator of the scaled, masked scores, sinks
/// included}.
std::vector<array> attention_graph(
    const std::vector<array>& inputs,
    const AttentionParams& p,
    std::optional<int> offset,
    StreamOrDevice s);

/// The kernels' view of a ScaledDotProductAttention node's inputs (sizes, strides, flags):
/// inputs {q, k, v[, mask][, sinks]} as evaluated; q, k and v must have a contiguous last
/// axis (an eval copies one that does not, with its backend's as_row_contiguous, first).
/// Host code.
attention::Geometry attention_geometry(const std::vector<array>& inputs, const AttentionParams& p);

/// The dtype of the lse output: float64 for float64 attention, float32 otherwise.
Dtype attention_lse_dtype(Dtype dt);

/// Query rows per key head ((Hq / Hkv) · L) up to which PagedAttention's tensor-core decode
/// kernel takes a call (src/backend/cuda/fast/attention_decode.h). Calls with sinks or a
/// window record a PagedAttention node only within it; the op's graph serves the rest.
inline constexpr int64_t kPagedDecodeRows = 16;

/// Whether PagedAttention's tensor-core decode kernel (paged_attention_tc) takes a call of
/// `rows` query rows per key head over `capacity` = max_blocks · block_size positions:
/// float16 or bfloat16, D 64, 128 or 256, rows <= kPagedDecodeRows, capacity <= 2^30. The op
/// (which records sinks and windows only where this holds) and the kernel ask the same rule.
inline bool paged_decode_covers(Dtype dtype, int64_t d, int64_t rows, int64_t capacity) {
  return (dtype == float16 || dtype == bfloat16) && (d == 64 || d == 128 || d == 256) && rows <= kPagedDecodeRows &&
      capacity <= (int64_t(1) << 30);
}

} // namespace fast

/// Fused scaled dot-product attention: inputs {q [B, Hq, Lq, D], k [B, Hkv, Lk, D],
/// v [B, Hkv, Lk, Dv][, mask broadcast to [B, Hq, Lq, Lk] (bool or q's dtype)][, sinks
/// [Hq] in q's dtype]}, one dtype (float16, bfloat16, float32; float64 runs the fallback on
/// the CPU); Hq a multiple of Hkv (query head h reads key head h / (Hq / Hkv)). Outputs
/// {out [B, Hq, Lq, Dv] in q's dtype, lse [B, Hq, Lq] float32}:
///   s_ij = scale · q_i · k_j (+ mask_ij, or hidden where a bool mask is false or the causal
///   window excludes j),  lse_i = log(exp(sink) + Σ_j exp(s_ij)),
///   out_i = Σ_j exp(s_ij − lse_i) v_j,
/// in float32 whatever the input dtype. A row that sees no key (every key hidden) attends
/// uniformly to all Lk keys, as the fallback's where(mask, scores, lowest) does; an
/// additive mask of −inf everywhere gives NaN, as the fallback's softmax does. Kernels: CPU,
/// an online-softmax loop over key blocks (src/backend/cpu/fast/attention.cpp); CUDA, the
/// vector kernels for Lq <= 8 (one or two passes) and the tiled tensor-core kernel
/// (src/backend/cuda/fast/attention_*.cu), chosen by params.passes, and on sm_90a with
/// params.hopper the warp-specialised one (attention_hopper.cu). Rules: vjp the
/// AttentionVjp kernel on the GPU, the fallback's elsewhere; jvp from the fallback; vmap
/// folds the batch into B.
class ScaledDotProductAttention : public fast::FastPrimitive {
 public:
  ScaledDotProductAttention(Stream stream, fast::AttentionParams params);
  /// From the fields of AttentionParams in order (export's rebuild from state()).
  ScaledDotProductAttention(Stream stream, float scale, bool causal, int window, bool has_mask, bool has_sinks, int passes, int key_blocks)
      : ScaledDotProductAttention(stream, fast::AttentionParams{scale, causal, window, has_mask, has_sinks, passes, key_blocks}) {}
  const fast::AttentionParams& params() const { return params_; }
  /// The parameters, in constructor order (MLX's state(); read by export). `hopper` is left
  /// out: an imported graph runs the mma.sync kernel, which every CUDA device has.
  std::tuple<float, bool, int, bool, bool, int, int> state() const {
    return {params_.scale, params_.causal, params_.window, params_.has_mask, params_.has_sinks, params_.passes, params_.key_blocks};
  }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()

 private:
  fast::AttentionParams params_;
};

/// The backward of ScaledDotProductAttention (FlashAttention-2's, Dao 2023): inputs
/// {q, k, v[, mask][, sinks], out, lse, dout}, outputs {dq, dk, dv[, dsinks]} with the
/// inputs' shapes and dtypes. The scores are recomputed from the saved lse:
///   p_ij = exp(s_ij − lse_i),  delta_i = dout_i · out_i,
///   dv_j = Σ_i p_ij dout_i,  ds_ij = p_ij (dout_i · v_j − delta_i),
///   dq_i = scale Σ_j ds_ij k_j,  dk_j = scale Σ_i ds_ij q_i,
///   dsinks_h = −Σ_{b,i} exp(sink_h − lse_i) delta_i,
/// in float32. GPU kernel (src/backend/cuda/fast/attention_backward.cu); recorded only on
/// the GPU (elsewhere the forward's vjp is the fallback's). Rules from its fallback.
class ScaledDotProductAttentionVjp : public fast::FastPrimitive {
 public:
  ScaledDotProductAttentionVjp(Stream stream, fast::AttentionParams params);
  /// From the fields of AttentionParams in order (export's rebuild from state()).
  ScaledDotProductAttentionVjp(Stream stream, float scale, bool causal, int window, bool has_mask, bool has_sinks, int passes, int key_blocks)
      : ScaledDotProductAttentionVjp(stream, fast::AttentionParams{scale, causal, window, has_mask, has_sinks, passes, key_blocks}) {}
  const fast::AttentionParams& params() const { return params_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<float, bool, int, bool, bool, int, int> state() const {
    return {params_.scale, params_.causal, params_.window, params_.has_mask, params_.has_sinks, params_.passes, params_.key_blocks};
  }

  NUVEC_FAST_PRIMITIVE()

 private:
  fast::AttentionParams params_;
};

/// Attention over a paged KV cache: inputs {q [B, Hq, L, D], k_cache and v_cache
/// [blocks, Hkv, block_size, D], block_tables [B, max_blocks] int32, lengths [B] int32[,
/// sinks [Hq] in q's dtype]}; output [B, Hq, L, D] in q's dtype. Sequence b's position p lives
/// in block block_tables[b, p / block_size] (clamped to [0, blocks)), slot p % block_size;
/// query l sees positions p < e = lengths[b] − L + 1 + l (lengths clamped to [0, max_blocks ·
/// block_size]), and with a window (> 0) only those with p >= e − window; the sinks join each
/// row's softmax (fast::paged_attention). CUDA kernels for D 64/128/256 and power-of-two block
/// sizes: float16 and bfloat16 decode (at most kPagedDecodeRows query rows per key head) on
/// the contiguous decode kernel's tensor-core body with paged row addressing
/// (attention_vector.cu, through attention_decode.h), float16 and bfloat16 prefill on sm_90a
/// (unless NUVEC_ATTENTION_HOPPER=0) on attention_hopper.cu (block sizes of at least 8), the rest
/// (float32, prefill) on src/backend/cuda/fast/paged_attention.cu; the fallback (gather, then
/// masked attention) elsewhere. Nodes with a window or sinks are recorded only where the decode kernel covers
/// them.
class PagedAttention : public fast::FastPrimitive {
 public:
  explicit PagedAttention(Stream stream, float scale, int window = 0, bool has_sinks = false);
  float scale() const { return scale_; }
  int window() const { return window_; }
  bool has_sinks() const { return has_sinks_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<float, int, bool> state() const { return {scale_, window_, has_sinks_}; }

  NUVEC_FAST_PRIMITIVE()

 private:
  float scale_;
  int window_;
  bool has_sinks_;
};

/// Writes new rows into a paged cache: inputs {cache [blocks, Hkv, block_size, D], values
/// [N, Hkv, D] in the cache's dtype, slots [N] int32}; output the cache with
/// out[s / block_size, h, s % block_size, :] = values[n, h, :] for s = slots[n]; slots
/// outside [0, blocks · block_size) write nothing; of repeated slots the last row lands (the
/// fallback graph's rule too, last_writer.h). A copy of the cache, or the cache itself when
/// donated, then a scatter kernel (CPU and CUDA).
class PagedWrite : public fast::FastPrimitive {
 public:
  explicit PagedWrite(Stream stream);

  NUVEC_FAST_PRIMITIVE()
};

} // namespace nuvec
