// nuvec: logsumexp, its fallback graph and the rules of the LogSumExp fused primitive.
#include "fast/logsumexp.h"

#include <typeinfo>

#include "ops/ops_common.h"

namespace nuvec {

namespace fast {

array logsumexp_graph(const array& x, const std::vector<int>& axes, StreamOrDevice s) {
  Dtype dt = x.dtype();
  Dtype acc = float_accumulate_type(dt);
  array xf = astype(x, acc, s);
  array m = stop_gradient(max(xf, axes, true, s), s);
  m = where(isinf(m, s), zeros_like(m, s), m, s);
  array out = add(log(sum(exp(subtract(xf, m, s), s), axes, true, s), s), m, s);
  return acc != dt ? astype(out, dt, s) : out;
}

} // namespace fast

LogSumExp::LogSumExp(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        return std::vector<array>{fast::logsumexp_graph(in[0], {-1}, stream)};
      }) {}

array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "logsumexp");
  if (a.size() == 0) {
    // MLX's rule (SciPy would give -inf); see docs/MLX-DIFFERENCES.md.
    throw_invalid_argument("logsumexp", "the input must not be empty; got shape ", a.shape(), ".");
  }
  Dtype dt = float_result_type(a.dtype());
  array in = astype(a, dt, s);
  // Over the last axis, one LogSumExp node where its kernels cover the dtype (real floating;
  // complex runs the node's fallback); other or several axes run the graph.
  array out = in;
  if (ax.size() == 1 && ax[0] == static_cast<int>(a.ndim()) - 1) {
    Shape shape = in.shape();
    shape.back() = 1;
    out = fast::record_or_fallback(
        issubdtype(dt, floating), std::make_shared<LogSumExp>(to_stream(s)), {shape}, {dt}, {in})[0];
  } else {
    out = fast::logsumexp_graph(in, ax, s);
  }
  return keepdims ? out : squeeze(out, ax, s);
}
array logsumexp(const array& a, bool keepdims, StreamOrDevice s) {
  return logsumexp(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array logsumexp(const array& a, StreamOrDevice s) {
  return logsumexp(a, false, s);
}
array logsumexp(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return logsumexp(a, std::vector<int>{axis}, keepdims, s);
}

const char* LogSumExp::name() const {
  return "LogSumExp";
}

std::vector<Shape> LogSumExp::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  shape.back() = 1;
  return {shape};
}

std::pair<std::vector<array>, std::vector<int>> LogSumExp::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return vmap_trailing(inputs, axes, 1, [&](const std::vector<array>& in) {
    return std::vector<array>{
        array(output_shapes(in)[0], in[0].dtype(), std::make_shared<LogSumExp>(stream()), {in[0]})};
  });
}

bool LogSumExp::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(LogSumExp);
}

} // namespace nuvec
