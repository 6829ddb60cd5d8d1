// nuvec::nn::losses: loss functions composed from public ops; formulas and defaults from
// MLX's python/mlx/nn/losses.py.
#include "core/errors.h"
#include "fast/logsumexp.h"
#include "nuvec/nn/activations.h"
#include "nuvec/fast.h"
#include "nuvec/nn/losses.h"
#include "nuvec/ops.h"
#include "nuvec/utils.h"

namespace nuvec::nn::losses {

namespace {

array scalar(double v, const array& x) {
  return array(v, issubdtype(x.dtype(), floating) ? x.dtype() : float32);
}

array reduce(const array& loss, const std::string& reduction, const char* op) {
  if (reduction == "none") return loss;
  if (reduction == "mean") return mean(loss);
  if (reduction == "sum") return sum(loss);
  throw_invalid_argument(op, "reduction must be \"none\", \"mean\" or \"sum\"; got \"", reduction, "\".");
}

void check_reduction(const std::string& reduction, const char* op) {
  if (reduction != "none" && reduction != "mean" && reduction != "sum") {
    throw_invalid_argument(op, "reduction must be \"none\", \"mean\" or \"sum\"; got \"", reduction, "\".");
  }
}

void check_same_shape(const array& a, const array& b, const char* what, const char* op) {
  if (a.shape() != b.shape()) {
    throw_invalid_argument(op, what, " must have the same shape; got ", a.shape(), " and ", b.shape(), ".");
  }
}

// The score x[target] along axis: integer targets of x's shape without axis.
array pick(const array& x, const array& targets, int axis, const char* op) {
  if (!issubdtype(targets.dtype(), integer)) {
    throw_invalid_argument(op, "class targets must have an integer dtype; got ", targets.dtype(), ".");
  }
  Shape expected = x.shape();
  expected.erase(expected.begin() + axis);
  if (targets.shape() != expected) {
    throw_invalid_argument(
        op, "class targets must have the inputs' shape without axis ", axis, " ", expected, "; got ",
        targets.shape(), ".");
  }
  return squeeze(take_along_axis(x, expand_dims(targets, axis), axis), axis);
}

} // namespace

array cross_entropy(
    const array& logits,
    const array& targets,
    const std::optional<array>& weights,
    int axis,
    float label_smoothing,
    const std::string& reduction) {
  const char* op = "cross_entropy";
  check_reduction(reduction, op);
  if (!(label_smoothing >= 0 && label_smoothing < 1)) {
    throw_invalid_argument(op, "label_smoothing must be in [0, 1); got ", label_smoothing, ".");
  }
  if (logits.ndim() == 0) throw_invalid_argument(op, "logits must have at least 1 dimension; got a scalar.");
  int ax = normalize_axis_index(axis, static_cast<int>(logits.ndim()), op);
  const bool class_targets = targets.ndim() + 1 == logits.ndim();
  if (class_targets && label_smoothing == 0 && issubdtype(logits.dtype(), floating) &&
      issubdtype(targets.dtype(), integer)) {
    // The fused CrossEntropy kernel (one read of the logits, a one-pass gradient), over the
    // classes moved to the last axis; the loss in the logits' dtype, as MLX returns it.
    const int last = static_cast<int>(logits.ndim()) - 1;
    array x = ax == last ? logits : moveaxis(logits, ax, last);
    array loss = astype(fast::cross_entropy(x, targets), logits.dtype());
    if (weights) {
      check_same_shape(*weights, loss, "weights and the per-example loss", op);
      loss = loss * *weights;
    }
    return reduce(loss, reduction, op);
  }
  // MLX's loss, lse − (1 − ls)·score − ls·mean(logits) with score the target's logit or
  // sum(logits · targets), computed on x = logits − max: the max cancels (but for
  // probabilities that do not sum to 1, whose term (1 − ls)·max·(1 − sum(targets)) is kept),
  // so large logits keep their digits where lse − score rounds lse at their magnitude first.
  const array m = fast::max_shift(logits, {ax});
  const array x = logits - m;
  const array lse = logsumexp(x, ax);
  const bool probabilities = targets.ndim() == logits.ndim();
  array score = array(0.0f);
  if (probabilities) {
    check_same_shape(logits, targets, "logits and probability targets", op);
    score = sum(x * targets, ax);
  } else {
    score = pick(x, targets, ax, op);
  }
  const double ls = label_smoothing;
  array loss = lse - (ls > 0 ? scalar(1.0 - ls, score) * score : score);
  if (ls > 0) loss = loss - scalar(ls, score) * mean(x, ax);
  if (probabilities) loss = loss + scalar(1.0 - ls, score) * squeeze(m, ax) * (scalar(1.0, score) - sum(targets, ax));
  if (weights) {
    check_same_shape(*weights, loss, "weights and the per-example loss", op);
    loss = loss * *weights;
  }
  return reduce(loss, reduction, op);
}

array nll_loss(const array& inputs, const array& targets, int axis, const std::string& reduction) {
  const char* op = "nll_loss";
  check_reduction(reduction, op);
  if (inputs.ndim() == 0) throw_invalid_argument(op, "inputs must have at least 1 dimension; got a scalar.");
  int ax = normalize_axis_index(axis, static_cast<int>(inputs.ndim()), op);
  return reduce(-pick(inputs, targets, ax, op), reduction, op);
}

array mse_loss(const array& predictions, const array& targets, const std::string& reduction) {
  const char* op = "mse_loss";
  check_reduction(reduction, op);
  check_same_shape(predictions, targets, "predictions and targets", op);
  return reduce(square(predictions - targets), reduction, op);
}

array l1_loss(const array& predictions, const array& targets, const std::string& reduction) {
  const char* op = "l1_loss";
  check_reduction(reduction, op);
  check_same_shape(predictions, targets, "predictions and targets", op);
  return reduce(abs(predictions - targets), reduction, op);
}

array binary_cross_entropy(
    const array& inputs,
    const array& targets,
    const std::optional<array>& weights,
    bool with_logits,
    const std::string& reduction) {
  const char* op = "binary_cross_entropy";
  check_reduction(reduction, op);
  check_same_shape(inputs, targets, "inputs and targets", op);
  array loss = inputs;
  if (with_logits) {
    loss = logaddexp(scalar(0.0, inputs), inputs) - inputs * targets;
  } else {
    // log is clamped at -100 so p = 0 or 1 gives a finite loss (MLX, after PyTorch).
    auto lo = scalar(-100.0, inputs);
    auto log_p = maximum(log(inputs), lo);
    auto log_q = maximum(log(scalar(1.0, inputs) - inputs), lo);
    loss = -(targets * log_p + (scalar(1.0, inputs) - targets) * log_q);
  }
  if (weights) {
    check_same_shape(*weights, loss, "weights and the loss", op);
    loss = loss * *weights;
  }
  return reduce(loss, reduction, op);
}

} // namespace nuvec::nn::losses
