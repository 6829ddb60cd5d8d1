// nuvec: the depthwise conv1d fused ops: DepthwiseConv1d, which conv1d records for a depthwise
// call (shared/seeds/001: its coverage, output shape and fallback, the general convolution
// with groups = C), and causal_conv1d_step (nuvec's: the decode update of a causal depthwise
// conv, whose meaning is conv1d on the window of the state and the new input, plus the slice
// that drops the window's oldest row). Rules (vjp, jvp, vmap) come from the fallbacks.
#include "fast/depthwise_conv1d.h"

#include "nuvec/fast.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// The general convolution the fused nodes stand for: conv1d's graph with groups = C, recorded
// through conv_general so that it never records a fused node again.
array depthwise_graph(const array& x, const array& w, int stride, int padding, int dilation, Stream s) {
  return conv_general(x, w, {stride}, {padding}, {padding}, {dilation}, {1}, x.shape(2), false, s);
}

} // namespace

namespace fast {

bool is_depthwise_conv1d(const array& x, const array& w, int padding, int groups) {
  const int c = x.shape(2);
  return groups == c && w.shape(0) == c && w.shape(2) == 1 && padding >= 0 &&
      issubdtype(x.dtype(), floating) && w.dtype() == x.dtype();
}

array depthwise_conv1d(const array& x, const array& w, int stride, int padding, int dilation, StreamOrDevice s) {
  const int64_t l_out = math::depthwise_out_length(x.shape(1), w.shape(1), stride, padding, dilation);
  const Shape shape = {x.shape(0), static_cast<int32_t>(l_out), x.shape(2)};
  auto primitive = std::make_shared<DepthwiseConv1d>(to_stream(s), stride, padding, dilation);
  return record_or_fallback(true, std::move(primitive), {shape}, {x.dtype()}, {x, w})[0];
}

std::pair<array, array> causal_conv1d_step(
    const array& x,
    const array& weight,
    const array& conv_state,
    StreamOrDevice s) {
  const char* op = "causal_conv1d_step";
  if (x.ndim() != 3 || x.shape(1) != 1 || x.shape(2) == 0) {
    throw_invalid_argument(op, "x must be [N, 1, C] (one step, C >= 1); got shape ", x.shape(), ".");
  }
  const int n = x.shape(0), c = x.shape(2);
  if (weight.ndim() != 3 || weight.shape(0) != c || weight.shape(1) < 1 || weight.shape(2) != 1) {
    throw_invalid_argument(op, "weight must be [C, K, 1] with x's C = ", c, " and K >= 1; got weight ",
                           weight.shape(), " for x ", x.shape(), ".");
  }
  const int k = weight.shape(1);
  if (conv_state.shape() != Shape{n, k - 1, c}) {
    throw_invalid_argument(op, "conv_state must be [N, K - 1, C] = ", Shape{n, k - 1, c}, "; got conv_state ",
                           conv_state.shape(), " for x ", x.shape(), " and weight ", weight.shape(), ".");
  }
  for (const array* a : {&x, &weight, &conv_state}) {
    if (!issubdtype(a->dtype(), floating)) {
      throw_invalid_argument(op, "x, weight and conv_state must be real floating; got ", x.dtype(), ", ",
                             weight.dtype(), " and ", conv_state.dtype(), ".");
    }
  }
  // The weight and the state in x's dtype: y and the new state keep it (a state kept in a
  // wider dtype holds earlier inputs of x's dtype, which the cast gives back exactly).
  const array w = astype(weight, x.dtype(), s), state = astype(conv_state, x.dtype(), s);
  auto outs = record_or_fallback(
      true, std::make_shared<CausalConv1dStep>(to_stream(s)), {x.shape(), state.shape()}, {x.dtype(), x.dtype()},
      {x, w, state});
  return {outs[0], outs[1]};
}

} // namespace fast

// ---- DepthwiseConv1d ------------------------------------------------------------------

DepthwiseConv1d::DepthwiseConv1d(Stream stream, int stride, int padding, int dilation)
    : FastPrimitive(stream, [=](const std::vector<array>& in) {
        return std::vector<array>{depthwise_graph(in[0], in[1], stride, padding, dilation, stream)};
      }),
      stride_(stride),
      padding_(padding),
      dilation_(dilation) {}

math::DepthwiseConv1dShape DepthwiseConv1d::geometry(const Shape& x, int taps) const {
  math::DepthwiseConv1dShape g{};
  g.batch = x[0];
  g.length = x[1];
  g.channels = x[2];
  g.taps = taps;
  g.stride = stride_;
  g.padding = padding_;
  g.dilation = dilation_;
  g.out_length = math::depthwise_out_length(g.length, taps, stride_, padding_, dilation_);
  return g;
}

const char* DepthwiseConv1d::name() const {
  return "DepthwiseConv1d";
}

std::vector<Shape> DepthwiseConv1d::output_shapes(const std::vector<array>& inputs) {
  const auto g = geometry(inputs[0].shape(), inputs[1].shape(1));
  return {{inputs[0].shape(0), static_cast<int32_t>(g.out_length), inputs[0].shape(2)}};
}

bool DepthwiseConv1d::is_equivalent(const Primitive& other) const {
  auto o = same_type<DepthwiseConv1d>(other);
  return o && o->state() == state();
}

// ---- CausalConv1dStep -----------------------------------------------------------------

CausalConv1dStep::CausalConv1dStep(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        // Inputs (x [N, 1, C], w [C, K, 1], state [N, K − 1, C]), one dtype.
        const array& x = in[0];
        const int n = x.shape(0), k = in[1].shape(1), c = x.shape(2);
        array window = concatenate({in[2], x}, 1, stream);
        return std::vector<array>{
            depthwise_graph(window, in[1], 1, 0, 1, stream), slice(window, {0, 1, 0}, {n, k, c}, stream)};
      }) {}

const char* CausalConv1dStep::name() const {
  return "CausalConv1dStep";
}

std::vector<Shape> CausalConv1dStep::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape(), inputs[2].shape()};
}

bool CausalConv1dStep::is_equivalent(const Primitive& other) const {
  return same_type<CausalConv1dStep>(other) != nullptr;
}

} // namespace nuvec
