// nuvec::nn: activation functions composed from public ops; formulas from MLX's
// python/mlx/nn/layers/activations.py.
#include <cmath>

#include "fast/logsumexp.h"
#include "nuvec/nn/activations.h"
#include "nuvec/ops.h"

namespace nuvec::nn {

namespace {
// A scalar of x's dtype, so constants never promote float16/float32 inputs to float64.
array scalar(double v, const array& x) {
  return array(v, issubdtype(x.dtype(), floating) ? x.dtype() : float32);
}
} // namespace

array relu(const array& x) {
  return maximum(x, array(0, x.dtype()));
}

array gelu(const array& x) {
  return x * (scalar(1.0, x) + erf(x * scalar(M_SQRT1_2, x))) * scalar(0.5, x);
}

array gelu_approx(const array& x) {
  const double c = std::sqrt(2.0 / M_PI);
  auto inner = scalar(c, x) * (x + scalar(0.044715, x) * x * x * x);
  return scalar(0.5, x) * x * (scalar(1.0, x) + nuvec::tanh(inner));
}

array gelu_fast_approx(const array& x) {
  return x * nuvec::sigmoid(scalar(1.702, x) * x);
}

array silu(const array& x) {
  return x * nuvec::sigmoid(x);
}

array sigmoid(const array& x) {
  return nuvec::sigmoid(x);
}

array tanh(const array& x) {
  return nuvec::tanh(x);
}

array leaky_relu(const array& x, float negative_slope) {
  return where(x > array(0, x.dtype()), x, x * scalar(negative_slope, x));
}

array softmax(const array& x, int axis) {
  return nuvec::softmax(x, axis);
}

array log_softmax(const array& x, int axis) {
  // (x − max) − logsumexp(x − max): x − logsumexp(x) rounds the logsumexp at the inputs'
  // magnitude first ([1e8, 1e8] gave [0, 0], not −log 2). An infinite max shifts by 0 (max_shift).
  const array shifted = x - fast::max_shift(x, {axis});
  return shifted - logsumexp(shifted, axis, /*keepdims=*/true);
}

} // namespace nuvec::nn
