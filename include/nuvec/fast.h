// nuvec: fused operations (MLX's fast.h API, namespace nuvec::fast). Each op's meaning is its
// fallback graph of ordinary ops (shared/seeds/001, MLX's fallbacks). Fused ops are built on
// src/fast/fast_primitive.h: the op records one fused node where a CPU or CUDA kernel covers
// the case and returns the fallback otherwise; derivatives and vmap derive from the fallback.
// softmax and logsumexp (declared in ops.h, as MLX), rms_norm, add_rms_norm and layer_norm
// run fused kernels on the CPU and the GPU (src/backend/{cpu,cuda}/fast/), with dedicated
// backward kernels for the norms.
#pragma once

#include <optional>
#include <utility>

#include "nuvec/array.h"
#include "nuvec/stream.h"

namespace nuvec::fast {

/// Root-mean-square normalisation over the last axis:
///   y = x / sqrt(mean(x², axis=-1) + eps) · weight,
/// with the statistics in float32 for float16/bfloat16 inputs, the normalised value rounded
/// back to x's dtype, then scaled by weight (no weight: scale 1).
/// Shapes: x (..., D) with at least one axis; weight (D,). Dtype: the promotion of x and
/// weight, which must be real floating. Throws std::invalid_argument naming rms_norm for a
/// 0-d x, a weight that is not 1-d of size D, or a non-floating dtype. Runs one RmsNorm node
/// (src/fast/norms.h: a fused pass per row on the CPU and the GPU; its gradient is the
/// RmsNormVjp kernel). Source: MLX's fast::rms_norm.
array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s = {});

/// The residual add of a transformer block fused with the next norm:
///   h = x + residual,   y = rms_norm(h, weight, eps),
/// returned as {h, y}, h rounded to the dtype before it is normalised. Shapes: x and residual
/// (..., D) (equal shapes take the fused AddRmsNorm kernel; broadcasting ones, or a weight
/// that promotes the dtype further, the composition); weight (D,). Dtype: the promotion of x,
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
/// back to x's dtype before weight and bias. Shapes: x (..., D) with at least one axis; weight
/// and bias (D,), each optional. Dtype: the promotion of x, weight and bias, which must be
/// real floating. Throws std::invalid_argument naming layer_norm for a 0-d x, a weight or bias
/// that is not 1-d of size D, or a non-floating dtype. Runs one LayerNorm node (a fused pass
/// per row; its gradient is the LayerNormVjp kernel). Source: MLX's fast::layer_norm.
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
/// dtype); freqs [dims / 2] (exactly one of base and freqs). Throws std::invalid_argument
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
/// around the rows) whose fallback and rules are the seed's composition (RmsNorm and Rope
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

/// Cross entropy of class scores against class indices, per row of the last axis:
///   loss = logsumexp(logits, -1) − logits[..., target],
/// a negative target counting from the end (t + C); a target outside [−C, C) picks nothing
/// (its loss is the logsumexp). Shapes: logits (..., C) with at least one axis; targets
/// (...) (the logits' shape without the last axis), any integer dtype. The loss is float32
/// (float64 for float64 logits), computed in that dtype whatever the logits' dtype. Throws
/// std::invalid_argument naming cross_entropy for mismatched shapes, non-floating logits or
/// non-integer targets. One CrossEntropy node (one read of the logits); its gradient for
/// the logits, g · (softmax − onehot), is the one-pass CrossEntropyVjp kernel; there is none
/// for the targets. nuvec's own (shared/seeds/001); nn::losses::cross_entropy uses it.
array cross_entropy(const array& logits, const array& targets, StreamOrDevice s = {});

} // namespace nuvec::fast
