// nuvec: the depthwise conv1d fused primitives: DepthwiseConv1d (shared/seeds/001: conv1d with
// groups equal to the channels, in MLX's layout), which conv1d records, and CausalConv1dStep
// (nuvec's: one decode step of a causal depthwise conv, fast::causal_conv1d_step). Ops,
// fallbacks (the general convolution) and rules in src/fast/depthwise_conv1d.cpp; direct kernels
// in src/backend/cpu/fast/depthwise_conv1d.cpp and src/backend/cuda/fast/depthwise_conv1d.cu
// (their element rule in src/backend/common/math/depthwise_conv1d.h), tested against the
// fallbacks (tests/fast_depthwise_conv1d_test.cpp).
#pragma once

#include <tuple>

#include "backend/common/math/depthwise_conv1d.h"
#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// Whether conv1d(x, w, stride, padding, dilation, groups) is the depthwise conv the
/// DepthwiseConv1d kernels take: x [N, L, C] and w [C, K, 1] of one real floating dtype,
/// groups == C and padding >= 0 (a negative padding crops: the general path's). The caller
/// has checked the ranks.
bool is_depthwise_conv1d(const array& x, const array& w, int padding, int groups);

/// conv1d(x, w, stride, padding, dilation, C) for a call that is_depthwise_conv1d accepts and
/// conv1d has validated (the dilated kernel fits the padded input): one DepthwiseConv1d node,
/// y [N, l_out, C] in x's dtype with l_out = (L + 2·padding − dilation·(K − 1) − 1) / stride + 1.
array depthwise_conv1d(const array& x, const array& w, int stride, int padding, int dilation, StreamOrDevice s);

} // namespace fast

/// (x [N, L, C], w [C, K, 1], one real floating dtype) -> y [N, l_out, C] in that dtype:
///   y[n, o, c] = Σ_j w[c, j, 0] · x[n, o·stride + j·dilation − padding, c]
/// (zeros outside [0, L)), summed in float32 (float64 for float64) and rounded once. Its
/// fallback is conv_general with groups = C (the node conv1d recorded before it), which
/// gives vjp, jvp and vmap. Kernels (direct, no im2col): the CPU loop over (n, output
/// position, channel chunk) with the weight transposed to [K, C]; on the GPU a thread per
/// 16-byte vector of channels and two (bf16, float16) or four consecutive outputs.
class DepthwiseConv1d : public fast::FastPrimitive {
 public:
  DepthwiseConv1d(Stream stream, int stride, int padding, int dilation);
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<int, int, int> state() const { return {stride_, padding_, dilation_}; }
  /// The kernels' geometry for x of shape [N, L, C] and K taps.
  math::DepthwiseConv1dShape geometry(const Shape& x, int taps) const;

  NUVEC_FAST_PRIMITIVE()

 private:
  int stride_, padding_, dilation_;
};

/// (x [N, 1, C], w [C, K, 1], conv_state [N, K − 1, C], one real floating dtype) ->
/// (y [N, 1, C], new_state [N, K − 1, C]): with window = concatenate({conv_state, x}, 1),
/// y[n, 0, c] = Σ_j w[c, j, 0] · window[n, j, c] (float32 sums, float64 for float64) and
/// new_state = window[:, 1:, :]. Its fallback is that graph with conv_general (groups = C)
/// for the sum, which gives vjp, jvp and vmap. Kernels: one pass reading the state and x and
/// writing y and the new state (the CPU loop over (n, channel chunk); on the GPU a thread per
/// 16-byte vector of channels).
class CausalConv1dStep : public fast::FastPrimitive {
 public:
  explicit CausalConv1dStep(Stream stream);

  NUVEC_FAST_PRIMITIVE()
};

} // namespace nuvec
