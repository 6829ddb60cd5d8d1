// nuvec::nn: activation functions (MLX's nn.relu, nn.gelu, ...), composed from public ops
// so they differentiate and batch like any graph. Call them qualified (nn::softmax): the
// names overlap with nuvec's ops of the same meaning.
#pragma once

#include "nuvec/array.h"

namespace nuvec::nn {

/// max(x, 0). Dtype: x's. Source: MLX nn.relu.
array relu(const array& x);
/// x * (1 + erf(x / sqrt(2))) / 2, the exact GELU. Floating x. Source: MLX nn.gelu.
array gelu(const array& x);
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh approximation.
/// Source: MLX nn.gelu_approx.
array gelu_approx(const array& x);
/// x * sigmoid(1.702 x). Source: MLX nn.gelu_fast_approx.
array gelu_fast_approx(const array& x);
/// x * sigmoid(x). Source: MLX nn.silu.
array silu(const array& x);
/// 1 / (1 + exp(-x)). Source: MLX nn.sigmoid.
array sigmoid(const array& x);
/// tanh(x).
array tanh(const array& x);
/// x where x > 0, else negative_slope x. Source: MLX nn.leaky_relu.
array leaky_relu(const array& x, float negative_slope = 0.01f);
/// exp(x - max) / sum(exp(x - max)) along axis (default last). Throws std::out_of_range for
/// a bad axis. Source: MLX nn.softmax.
array softmax(const array& x, int axis = -1);
/// x - logsumexp(x, axis, keepdims), computed as (x - max) - logsumexp(x - max) so that
/// large inputs keep their digits. Throws std::out_of_range for a bad
/// axis. Source: MLX nn.log_softmax.
array log_softmax(const array& x, int axis = -1);

} // namespace nuvec::nn
