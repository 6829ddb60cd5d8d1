// nuvec: fused operations (MLX's fast.h API, namespace nuvec::fast). Each op's meaning is its
// fallback graph of ordinary ops (shared/seeds/001, MLX's fallbacks). Fused ops are built on
// src/fast/fast_primitive.h: the op records one fused node where a CPU or CUDA kernel covers
// the case and returns the fallback otherwise; derivatives and vmap derive from the fallback.
// Every op here, and softmax and logsumexp (declared in ops.h, as MLX), has kernels on the
// CPU and the GPU (src/backend/{cpu,cuda}/fast/): the norms, rope and norm_rope, attention
// (vector, tiled and, on sm_90a, warp-specialised kernels; the composed route where none
// covers), the paged ops, gated delta and the depthwise conv step; dedicated backward
// kernels for the norms, attention and gated delta.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "nuvec/array.h"
#include "nuvec/stream.h"

namespace nuvec::fast {

/// Root-mean-square normalisation over the last axis:
///   y = x / sqrt(mean(x², axis=-1) + eps) · weight,
/// with the statistics in float32 for float16/bfloat16 inputs, the normalised value rounded
/// to the result's dtype (x's, or the promotion with a wider weight: MLX's fallback rounds to
/// that out type too), then scaled by weight (no weight: scale 1).
/// Shapes: x (..., D) with at least one axis; weight (D,). Dtype: the promotion of x and
/// weight, which must be real floating. Throws std::invalid_argument naming rms_norm for a
/// 0-d x, a weight that is not 1-d of size D, or a non-floating dtype. Runs one RmsNorm node
/// (src/fast/norms.h: a fused pass per row on the CPU and the GPU; its gradient is the
/// RmsNormVjp kernel). Source: MLX's fast::rms_norm.
array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s = {});

/// The residual add of a transformer block fused with the next norm:
///   h = x + residual,   y = rms_norm(h, weight, eps),
/// returned as {h, y}: h in the promotion of x and residual (rounded to it before it is
/// normalised), y in that promoted further with weight. Shapes: x and residual (..., D)
/// (equal shapes take the fused AddRmsNorm kernel; broadcasting ones, or a weight that
/// promotes the dtype further, the composition); weight (D,). Dtype: the promotion of x,
/// residual and weight. Throws std::invalid_argument as add and rms_norm do. nuvec's own
/// (shared/seeds/001); its gradient runs through the RmsNorm rule.
std::pair<array, array> add_rms_norm(
    const array& x,
    const array& residual,
    const std::optional<array>& weight,
    float eps,
    StreamOrDevice s = {});

/// Layer normalisation over the last axis:
///   y = (x - mean(x)) / sqrt(var(x) + eps) · weight + bias   (population variance),
/// with the statistics in float32 for float16/bfloat16 inputs and the normalised value rounded
/// to the result's dtype (the promotion of x, weight and bias) before weight and bias.
/// Shapes: x (..., D) with at least one axis; weight and bias (D,), each optional. Dtype: the
/// promotion of x, weight and bias, which must be real floating. Throws std::invalid_argument
/// naming layer_norm for a 0-d x, a weight or bias that is not 1-d of size D, or a
/// non-floating dtype. Runs one LayerNorm node (a fused pass per row; its gradient is the
/// LayerNormVjp kernel). Source: MLX's fast::layer_norm.
array layer_norm(
    const array& x,
    const std::optional<array>& weight,
    const std::optional<array>& bias,
    float eps,
    StreamOrDevice s = {});

/// Rotary position embeddings (Su et al., "RoFormer", 2021) of the first `dims` features of
/// every row of x [B, ..., T, D]: row (b, ..., t) is at position p = (offset[b] + t) · scale,
/// and its feature pairs (i, i + dims/2) — or (2i, 2i + 1) when `traditional` — are rotated by
/// the angle p · inv_freq_i, with inv_freq_i = base^(−2i / dims) or 1 / freqs[i]; the other
/// features pass through. cos and sin are rounded to x's dtype and the rotation runs in it
/// (MLX's fallback). Shapes: x with at least 3 axes; offset a scalar or [B] (any integer
/// dtype; positions are int32, so an offset outside it saturates rather than wraps); freqs [dims / 2] (exactly one of base and freqs). Throws std::invalid_argument
/// naming rope for fewer than 3 axes, a non-floating x, dims odd, non-positive or above D, a
/// bad offset, or both or neither of base and freqs. One Rope node (CPU and CUDA kernels); its
/// gradient is the inverse rotation (none for offset and freqs). Source: MLX's fast::rope.
array rope(
    const array& x,
    int dims,
    bool traditional,
    std::optional<float> base,
    float scale,
    int offset,
    const std::optional<array>& freqs = std::nullopt,
    StreamOrDevice s = {});
/// rope with the offset an array: a scalar, or one offset per batch row ([B]).
array rope(
    const array& x,
    int dims,
    bool traditional,
    std::optional<float> base,
    float scale,
    const array& offset,
    const std::optional<array>& freqs = std::nullopt,
    StreamOrDevice s = {});

/// The rotation of norm_rope: rope's parameters (exactly one of base and freqs).
struct Rotation {
  int dims;
  bool traditional;
  std::optional<float> base;
  float scale = 1.0f;
  std::optional<array> freqs;
};

/// The query/key preparation of an attention layer in one call: each row of x [B, H, L, D]
/// RMS-normalised when `eps` is given (with `weight` [D] if given: y = rms_norm(x, weight,
/// eps)), then rotated as rope at position offset + l. With `cache` [B, H, Lmax, D] the rows
/// are written into it at positions offset ... offset + L − 1 and the updated cache is
/// returned; else the rotated rows. Dtype: x's (the cache must have it). Throws
/// std::invalid_argument naming norm_rope for x not 4-d, a weight without eps, a negative
/// offset, or a cache of another dtype, other B, H or D, or too short to hold the rows; and as
/// rms_norm and rope do. Source: nuvec's own (shared/seeds/001). Runs one NormRope node (one
/// CPU loop, one CUDA kernel: rows normalised, rotated and written into a copy of the cache
/// around the rows, or into the cache's own buffer when nothing else refers to it — the
/// caller replaced its handle with the result, as a decode loop does; array::is_donatable) whose fallback and rules are the seed's composition (RmsNorm and Rope
/// nodes and a slice_update); normalised rows that do not split into 16-byte vectors, or
/// longer than a warp holds (256 vectors: 2048 bf16/float16, 1024 float32 or 512 float64
/// features), take that composition.
array norm_rope(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const Rotation& rotation,
    int offset,
    const std::optional<array>& cache = std::nullopt,
    StreamOrDevice s = {});

/// norm_rope with the offset an array, rope's: a scalar, or one per batch row ([B], any
/// integer dtype, saturated to int32 as rope's) — row (b, h, l) rotated at position offset[b] + l — and no cache (a paged
/// KV cache is written by paged_write; the serving engine's tokens are batch rows of their
/// own, each at its position). Throws std::invalid_argument naming norm_rope as the other
/// overload does, and for an offset that is not an integer scalar or [B]. One NormRope node
/// (the same kernels, reading each row's offset) whose fallback and rules are rms_norm then
/// rope with these offsets.
array norm_rope(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const Rotation& rotation,
    const array& offset,
    StreamOrDevice s = {});

/// Cross entropy of class scores against class indices, per row of the last axis:
///   loss = logsumexp(logits, -1) − logits[..., target],
/// a negative target counting from the end (t + C); a target outside [−C, C) picks nothing
/// (its loss is the logsumexp). Shapes: logits (..., C) with at least one axis; targets
/// (...) (the logits' shape without the last axis), any integer dtype. The loss is float32
/// (float64 for float64 logits), computed in that dtype whatever the logits' dtype. Throws
/// std::invalid_argument naming cross_entropy for mismatched shapes, non-floating logits,
/// non-integer targets, or rows with no classes (C = 0; with no rows either, the loss is
/// empty). One CrossEntropy node (one read of the logits); its gradient for
/// the logits, g · (softmax − onehot), is the one-pass CrossEntropyVjp kernel; there is none
/// for the targets. nuvec's own (shared/seeds/001); nn::losses::cross_entropy uses it.
array cross_entropy(const array& logits, const array& targets, StreamOrDevice s = {});

/// Options of nuvec's scaled_dot_product_attention overload (MLX's arguments plus nuvec's):
///  - mask_mode: "" (no mask, or `mask` when given), "causal" (query i sees keys
///    j <= i + Lk − Lq: the queries are the last Lq positions) or "array" (`mask`);
///  - mask: bool (true attends) or additive (a dtype promoting to the attention's),
///    broadcastable to [B, Hq, Lq, Lk];
///  - sinks: [Hq], one extra logit per query head in each row's softmax that takes
///    probability mass but adds no value (gpt-oss's attention sinks);
///  - window: with "causal", each query sees only its `window` most recent keys
///    (sliding-window attention, Mistral/Gemma); at least 1;
///  - max_score_bytes: a cap on the memory the composed route's score matrices take (it
///    holds about four score-sized arrays at once: scores, masked scores, a float32 copy,
///    probabilities); above it the route runs in blocks of query rows (default
///    kDefaultMaxScoreBytes). The fused routes never materialise scores;
///  - force_fused: run a fused kernel even where the plan would compose (throws
///    std::invalid_argument where none covers the call).
struct AttentionOptions {
  std::string mask_mode;
  std::optional<array> mask;
  std::optional<array> sinks;
  std::optional<int> window;
  std::optional<size_t> max_score_bytes;
  bool force_fused = false;
};

/// The score-matrix cap of the composed route when AttentionOptions::max_score_bytes is not
/// given: 512 MiB.
inline constexpr size_t kDefaultMaxScoreBytes = size_t(512) << 20;

/// How attention runs (plan_attention):
///  - Vector: the CUDA decode kernels (Lq <= 8): `passes` 1, or 2 with the keys split into
///    `key_blocks` blocks when batch × heads cannot fill the GPU;
///  - Tiled: the fused kernel for longer queries: on the GPU the tensor-core flash-attention
///    kernel (on Hopper, when `warp_specialized`, the TMA/wgmma kernel with a producer and two
///    consumer warpgroups; else the mma.sync one), on the CPU the online-softmax loop over key
///    blocks (which serves every Lq);
///  - Composed: the fallback graph of ordinary ops, in blocks of `query_rows` query rows
///    when the whole score matrix would exceed the cap.
enum class AttentionRoute { Vector, Tiled, Composed };

/// The plan of one attention call.
struct AttentionPlan {
  AttentionRoute route = AttentionRoute::Composed;
  int passes = 0;     ///< Vector: 1 or 2.
  int key_blocks = 1; ///< Vector with 2 passes: key blocks of the first pass.
  int query_rows = 0; ///< Composed: query rows per block (Lq when not split).
  /// Tiled on a compute capability 9.0 GPU: the warp-specialised Hopper kernel (float16,
  /// bfloat16; D == Dv 64, 128 or 256; no array mask; every row sees a key) rather than the
  /// mma.sync one, unless the environment variable NUVEC_ATTENTION_HOPPER is 0 (read when the
  /// op is called). Its launcher still runs the mma.sync kernel for strides that are not
  /// whole 16-byte vectors, unaligned buffers, and builds without sm_90a code.
  bool warp_specialized = false;
  size_t scratch_bytes = 0;          ///< Device or host scratch the kernels allocate.
  size_t max_intermediate_bytes = 0; ///< The largest array the route materialises.
  bool capped = false;               ///< Whether max_score_bytes changed the plan.
};

/// Scaled dot-product attention (Vaswani et al. 2017) with grouped-query heads:
///   out = softmax(scale · q kᵀ + mask) v,
/// q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] → [B, Hq, Lq, Dv]; Hq a multiple
/// of Hkv (query head h uses key head h / (Hq / Hkv)); the softmax in float32. mask_mode ""
/// (mask_arr used when given), "causal" (aligned at the end: query i sees keys
/// j <= i + Lk − Lq) or "array"; mask_arr bool (true attends; a row with nothing visible
/// attends uniformly, as MLX's fallback) or additive, broadcastable to [B, Hq, Lq, Lk]; sinks
/// [Hq] one logit per head in the softmax without a value. An empty output (B, Hq, Lq or Dv 0)
/// is empty; no key (Lk 0) gives zeros, as MLX's composed fallback (D 0 with keys: the mean
/// of v, every score being 0). Dtype: the promotion of q, k and v (real floating). Throws
/// std::invalid_argument naming scaled_dot_product_attention for inputs not 4-D, mismatched
/// batch, D or key/value heads, Hq not a multiple of Hkv, an unknown mask_mode, a mask with
/// "causal", "array" without a mask, a mask that does not broadcast or promote, sinks not
/// [Hq]. MLX's signature exactly (nuvec's options, force_fused among them, are the
/// AttentionOptions overload's). Runs the plan_attention route. Gradients for q, k, v and
/// sinks (a CUDA backward kernel from the saved log-sum-exp; the composed graph's elsewhere)
/// and for an additive mask (the composed graph's, on every route). Source: MLX's fast::scaled_dot_product_attention.
array scaled_dot_product_attention(
    const array& queries,
    const array& keys,
    const array& values,
    float scale,
    const std::string& mask_mode = "",
    std::optional<array> mask_arr = {},
    const std::optional<array>& sinks = {},
    StreamOrDevice s = {});

/// scaled_dot_product_attention with nuvec's options (sliding window, score cap, force_fused).
array scaled_dot_product_attention(
    const array& queries,
    const array& keys,
    const array& values,
    float scale,
    const AttentionOptions& options,
    StreamOrDevice s = {});

/// The route scaled_dot_product_attention takes for these shapes, dtype and options on the
/// stream's device, validated as the op validates them (same exceptions). nuvec's own.
AttentionPlan plan_attention(
    const Shape& q,
    const Shape& k,
    const Shape& v,
    Dtype dtype,
    const AttentionOptions& options,
    StreamOrDevice s = {});

/// Attention of new queries over a paged KV cache (vLLM's PagedAttention, Kwon et al. 2023):
/// q [B, Hq, L, D]; k_cache, v_cache [blocks, Hkv, block_size, D]; block_tables
/// [B, max_blocks] and lengths [B] integers. Sequence b's cache position p lives in block
/// block_tables[b, p / block_size] (ids clamped to [0, blocks)) at slot p % block_size;
/// query l of sequence b sees positions p < lengths[b] − L + 1 + l (lengths clamped to
/// [0, max_blocks · block_size]). A query that sees no position (lengths[b] < L − l, a
/// length of 0) attends uniformly over all max_blocks · block_size listed positions, stale
/// ones included, as masked attention's empty rows do. Output [B, Hq, L, D] in q's dtype.
/// Throws std::invalid_argument naming paged_attention for shapes that do not fit, Hq not a
/// multiple of Hkv, non-integer tables or lengths, tables or lengths of another batch,
/// empty caches or a block size of 0. An empty q (B, Hq, L or D 0) gives an empty result.
/// Table entries and lengths past int32 saturate before the clamp. CUDA kernels for D
/// 64/128/256 and power-of-two block sizes: float16/bfloat16 decode (at most 16 query rows
/// per key head) on the tensor-core decode kernel; float16/bfloat16 prefill on sm_90a with
/// blocks of at least 8 on the Hopper flash-attention kernel (NUVEC_ATTENTION_HOPPER=0: not);
/// the rest (float32, prefill) on a CUDA-core paged kernel. Elsewhere the fallback (the listed
/// blocks gathered, then masked attention). nuvec's own (seed 001).
array paged_attention(
    const array& q,
    const array& k_cache,
    const array& v_cache,
    const array& block_tables,
    const array& lengths,
    float scale,
    StreamOrDevice s = {});

/// paged_attention with gpt-oss's options: sinks [Hq] (any floating dtype, cast to q's —
/// scaled_dot_product_attention instead takes sinks of a dtype that promotes to its own; one
/// extra logit per query head in each row's softmax, as AttentionOptions::sinks) and window
/// (at least 1: query l of sequence b sees only its `window` most recent positions, those p
/// with e − window <= p < e for its end e = lengths[b] − L + 1 + l, as a "causal" window of
/// scaled_dot_product_attention). Either may be absent. Throws as paged_attention, and
/// std::invalid_argument naming paged_attention for sinks not [Hq] floating or a window
/// below 1. A row that sees nothing gives 0 with sinks (the sink takes all the mass), else
/// attends uniformly, as without them. Kernel: on the GPU, float16 and bfloat16 decode (at
/// most 16 query rows per key head, e.g. the serving engine's one-token rows; D 64, 128 or
/// 256; a power-of-two block size; max_blocks · block_size at most 2^30) runs the tensor-core
/// decode kernel with the window and sinks in its key loop and epilogue; other calls run the
/// fallback graph (the listed blocks gathered, then scaled_dot_product_attention with the
/// mask and the sinks). nuvec's own.
array paged_attention(
    const array& q,
    const array& k_cache,
    const array& v_cache,
    const array& block_tables,
    const array& lengths,
    float scale,
    const std::optional<array>& sinks,
    std::optional<int> window = std::nullopt,
    StreamOrDevice s = {});

/// The paged cache with rows written: cache [blocks, Hkv, block_size, D], values [N, Hkv, D]
/// (cast to the cache's dtype), slots [N] integers (block · block_size + offset); returns the
/// updated cache (out[s / block_size, :, s % block_size] = values[n] for s = slots[n]; a slot
/// out of range, negative ones included, writes nothing — vLLM's padding slot is −1 —
/// unlike gated_delta_slots, which counts negative slots from the end; of rows naming one
/// slot the last lands, and only it gets a gradient). Throws
/// std::invalid_argument naming paged_write for shapes that do not fit or non-integer slots. One scatter kernel after a copy of the cache, or into
/// the cache itself when nothing else refers to it (array::is_donatable) (CPU
/// and CUDA). nuvec's own (seed 001).
array paged_write(const array& cache, const array& values, const array& slots, StreamOrDevice s = {});

/// One decode step of a causal depthwise conv1d (the short convolution of Mamba and of
/// Qwen3-Next's Gated DeltaNet layers), in MLX's [N, L, C] layout. With
/// window = concatenate({conv_state, x}, 1) (the last K − 1 inputs and this one):
///   y[n, 0, c] = Σ_{j < K} weight[c, j, 0] · window[n, j, c],   new_state = window[:, 1:, :],
/// which is conv1d(window, weight, 1, 0, 1, C) and a slice; a decode loop that starts from a
/// zero state and feeds each step's new_state to the next gives the outputs of
/// conv1d(x_all, weight, 1, K − 1, 1, C) sliced to the first L positions (the causal conv).
/// Shapes: x [N, 1, C] with C >= 1; weight [C, K, 1] with K >= 1; conv_state [N, K − 1, C]
/// (K = 1: [N, 0, C]). Returns {y [N, 1, C], new_state [N, K − 1, C]}. Dtypes: all real
/// floating; weight and conv_state are cast to x's dtype, y and new_state have it; the sum
/// runs in float32 (float64 for float64) and is rounded once. Throws std::invalid_argument
/// naming causal_conv1d_step, with the shapes, for x not [N, 1, C], a weight not [C, K, 1]
/// with x's C, a conv_state not [N, K − 1, C], or a non-floating dtype. Source: nuvec's own
/// (issue 14): the update of transformers' torch_causal_conv1d_update and of mlx-lm's conv
/// cache, without the activation. Runs one CausalConv1dStep node: one pass that reads the
/// state and x and writes y and the new state (the CPU loop over the thread pool; on the GPU
/// one thread per 16-byte vector of channels); its fallback (the conv and slice above, with
/// the general convolution) gives the gradients for x, weight and conv_state, jvp and vmap.
std::pair<array, array> causal_conv1d_step(
    const array& x,
    const array& weight,
    const array& conv_state,
    StreamOrDevice s = {});

/// The gated delta rule (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks"; the linear
/// attention of Qwen3-Next's Gated DeltaNet layers), run over T steps from `state`:
///   S ← g_t · S;   S ← S + k_t (β_t (v_t − S k_t))ᵀ;   y_t = S q_t,
/// per batch b and value head h, with S the [Dv, Dk] state of (b, h) and k_t, q_t the vectors of
/// key head h / (Hv / Hk) (each key head serves Hv / Hk consecutive value heads). g is the
/// multiplicative decay, in (0, 1] in the models (transformers' Qwen3-Next passes a log-decay:
/// pass its exp); any real value is taken (0 resets the state; the GPU's chunked kernel takes a
/// decay below e^-80 in magnitude as e^-80, with its sign).
/// Shapes: q, k [B, T, Hk, Dk]; v [B, T, Hv, Dv] with Hv a multiple of Hk; g, beta [B, T, Hv];
/// state [B, Hv, Dv, Dk]. Returns {y [B, T, Hv, Dv] in q's dtype, the final state in state's
/// dtype}. The recurrence runs in float32 (float64 when an input is float64) whatever the
/// inputs' dtypes. Throws std::invalid_argument naming gated_delta for non-floating inputs or
/// shapes that disagree (Hv not a multiple of Hk, g or beta not [B, T, Hv], a state not
/// [B, Hv, Dv, Dk]). Kernels: one GatedDelta node where q, k and v share a dtype; the CPU runs
/// the recurrence over the thread pool (one task per (b, h), the state in cache), the GPU one
/// pass over T with each state row in registers (Dk a multiple of 8 up to 256, not float64;
/// elsewhere the fallback), and from T = 64 on (Dk a multiple of 8 up to 128, Dv a multiple of
/// 16) the chunked form: the WY representation of 64 steps at a time (Yang et al.,
/// flash-linear-attention's chunk_gated_delta_rule) built for all chunks in parallel, then one
/// pass over the chunks carrying the state, in float32. Rules (vjp, jvp) from the fallback
/// graph (the recurrence step by step from ordinary ops, mlx-lm's gated_delta_ops), except the
/// vjp: a backward kernel (GatedDeltaVjp, the recurrence run backwards from checkpoints) on
/// the CPU and on a GPU (NUVEC_GATED_DELTA_VJP_GPU=0: the fallback's rule there); vmap folds
/// the batch into B.
/// nuvec's own (shared/seeds/001).
std::pair<array, array> gated_delta(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    StreamOrDevice s = {});

/// gated_delta with every step's state: returns {y [B, T, Hv, Dv], states [B, T, Hv, Dv, Dk]}
/// (states[:, t] is the state after step t, in state's dtype). Same checks and rules; on the GPU
/// always the recurrent kernel (it writes every step's state anyway).
std::pair<array, array> gated_delta_steps(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    StreamOrDevice s = {});

/// gated_delta over a pool of states (continuous batching): sequence b starts from
/// pool[slots[b]] and its final state is written back there. pool [P, Hv, Dv, Dk]; slots [B]
/// integers in [-P, P) (negative ones count from the end), distinct. Returns {y, the updated
/// pool} (rows not named by slots are the pool's). Throws std::invalid_argument naming
/// gated_delta_slots for a pool or slots of the wrong shape or non-integer slots (and as
/// gated_delta for the rest), std::out_of_range at evaluation for a slot outside the pool
/// (at the call when the pool is empty and slots are not),
/// and std::invalid_argument at evaluation for two slots naming one row (their sequences would
/// race on it; the kernels check, on the CPU and the GPU). Kernels: as gated_delta, the named
/// rows read and written in the same pass, into the pool's own buffer when nothing else
/// refers to it (array::is_donatable, as paged_write), else into a copy; the fallback (q, k,
/// v of different dtypes; on the GPU also float64 or a Dk the kernels do not cover) takes the
/// rows, runs gated_delta and puts them back, and does not check repeats: the last
/// sequence naming a row lands there, and only its state gets a gradient.
std::pair<array, array> gated_delta_slots(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& pool,
    const array& slots,
    StreamOrDevice s = {});

} // namespace nuvec::fast
