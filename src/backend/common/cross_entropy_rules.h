// nuvec: cross_entropy's per-row rules, one text for the CPU and CUDA kernels (NUVEC_HD):
// which class a target picks, and the loss and the softmax terms of its gradient written so
// that large logits keep their digits. With lse = max + log_sum (log_sum = log Σ exp(x −
// max)) and x_t the target's logit, lse − x_t rounds lse at the logits' magnitude first:
// for 1e6 + [2, −1] float32 gives 0.0625 where the loss is 0.0486, and for [1e8, 1e8] it gives
// 0 and a gradient of [0, 1]. (max − x_t) + log_sum and exp((x − x_t) − loss) do not (the
// differences of large logits are exact). The fallback graphs follow the same order.
#pragma once

#include <cstdint>

#include "backend/common/math/config.h"

namespace nuvec {

/// The class a target picks among `classes`, or -1 for none: a negative target counts from
/// the end, and one outside [-classes, classes) picks no class (the fallback graph's one-hot
/// has no hit for it).
NUVEC_HD inline int64_t class_index(int32_t target, int64_t classes) {
  const int64_t y = target < 0 ? int64_t(target) + classes : int64_t(target);
  return y >= 0 && y < classes ? y : -1;
}

} // namespace nuvec

// In the math layer's namespace (math/config.h): its g++ and nvcc instantiations stay apart.
NUVEC_MATH_BEGIN

/// A row's loss from its logsumexp in parts and the target's logit (0 when the target picks
/// no class: the loss is then the logsumexp). Non-finite rows follow lse − x_t: a NaN gives
/// NaN, a max of ±inf comes with log_sum 0.
template <typename A>
NUVEC_HD A cross_entropy_loss(A max, A log_sum, A target_logit) {
  return (max - target_logit) + log_sum;
}

/// The exponent of a logit's softmax term in the gradient, x − lse with lse = loss +
/// target_logit, computed as (x − target_logit) − loss.
template <typename A>
NUVEC_HD A cross_entropy_exponent(A x, A loss, A target_logit) {
  return (x - target_logit) - loss;
}

NUVEC_MATH_END
