// nuvec: fused operations (MLX's fast.h API, namespace nuvec::fast). Each op's meaning is its
// fallback graph of ordinary ops (shared/seeds/001, MLX's fallbacks). Fused ops are built on
// src/fast/fast_primitive.h: the op records one fused node where a CPU or CUDA kernel covers
// the case and returns the fallback otherwise; derivatives and vmap derive from the fallback.
// softmax and logsumexp (declared in ops.h, as MLX) are the first on that base; rms_norm and
// layer_norm below still run their fallback graphs on every device (their kernels come with
// the issue "Fused ops I").
#pragma once

#include <optional>

#include "nuvec/array.h"
#include "nuvec/stream.h"

namespace nuvec::fast {

/// Root-mean-square normalisation over the last axis:
///   y = x / sqrt(mean(x², axis=-1) + eps) · weight,
/// with the statistics in float32 for float16/bfloat16 inputs, the normalised value rounded
/// back to x's dtype, then scaled by weight (no weight: scale 1).
/// Shapes: x (..., D) with at least one axis; weight (D,). Dtype: the promotion of x and
/// weight, which must be floating. Throws std::invalid_argument for a 0-d x, a weight that is
/// not 1-d of size D, or a non-floating dtype.
array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s = {});

/// Layer normalisation over the last axis:
///   y = (x - mean(x)) / sqrt(var(x) + eps) · weight + bias   (population variance),
/// with the statistics in float32 for float16/bfloat16 inputs and the normalised value rounded
/// back to x's dtype before weight and bias. Shapes: x (..., D) with at least one axis; weight
/// and bias (D,), each optional. Dtype: the promotion of x, weight and bias, which must be
/// floating. Throws std::invalid_argument for a 0-d x, a weight or bias that is not 1-d of
/// size D, or a non-floating dtype.
array layer_norm(
    const array& x,
    const std::optional<array>& weight,
    const std::optional<array>& bias,
    float eps,
    StreamOrDevice s = {});

} // namespace nuvec::fast
