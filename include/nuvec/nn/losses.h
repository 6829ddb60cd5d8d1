// nuvec::nn::losses: loss functions (MLX's nn.losses), composed from public ops. `reduction`
// is "none", "mean" or "sum" as in MLX; any other string throws std::invalid_argument
// naming the loss.
#pragma once

#include <optional>
#include <string>

#include "nuvec/array.h"

namespace nuvec::nn::losses {

/// Cross entropy of `logits` against `targets`: class indices (integer, logits' shape
/// without `axis`) or probabilities (logits' shape). With label smoothing ls: loss =
/// logsumexp(logits) - (1 - ls) score - ls mean(logits, axis), where score is logits[target]
/// or, for probabilities, sum(targets * logits, axis) (MLX's rule for both). Computed on
/// logits − max, so that large logits keep their digits; class indices without smoothing run
/// the fused fast::cross_entropy.
/// `weights` (the loss's shape) multiply the per-element losses before the reduction.
/// Default reduction "none" (MLX). Throws std::invalid_argument ("[cross_entropy] ...") for
/// mismatched shapes, ls outside [0, 1) or a bad reduction. Source: MLX nn.losses.cross_entropy.
array cross_entropy(
    const array& logits,
    const array& targets,
    const std::optional<array>& weights = std::nullopt,
    int axis = -1,
    float label_smoothing = 0.0f,
    const std::string& reduction = "none");

/// Negative log likelihood: -inputs[target] along axis, with inputs log-probabilities and
/// integer targets of inputs' shape without axis. Default reduction "none".
/// Throws std::invalid_argument ("[nll_loss] ..."). Source: MLX nn.losses.nll_loss.
array nll_loss(
    const array& inputs,
    const array& targets,
    int axis = -1,
    const std::string& reduction = "none");

/// (predictions - targets)^2, default reduction "mean". Shapes must match.
/// Throws std::invalid_argument ("[mse_loss] ..."). Source: MLX nn.losses.mse_loss.
array mse_loss(const array& predictions, const array& targets, const std::string& reduction = "mean");

/// |predictions - targets|, default reduction "mean". Shapes must match.
/// Throws std::invalid_argument ("[l1_loss] ..."). Source: MLX nn.losses.l1_loss.
array l1_loss(const array& predictions, const array& targets, const std::string& reduction = "mean");

/// Binary cross entropy. with_logits: log(1 + exp(x)) - x t (stable: logaddexp(0, x) - x t);
/// otherwise, with probabilities p: -(t max(log p, -100) + (1 - t) max(log(1 - p), -100)).
/// `weights` multiply the per-element losses. Default reduction "mean". Shapes must match.
/// Throws std::invalid_argument ("[binary_cross_entropy] ...").
/// Source: MLX nn.losses.binary_cross_entropy.
array binary_cross_entropy(
    const array& inputs,
    const array& targets,
    const std::optional<array>& weights = std::nullopt,
    bool with_logits = true,
    const std::string& reduction = "mean");

} // namespace nuvec::nn::losses
