// nuvec: logsumexp, its fallback graph and the rules of the LogSumExp fused primitive, and its
// backward LogSumExpVjp, whose fallback is the derivative of LogSumExp's fallback graph
// (MLX's LogSumExp::vjp: g · softmax(x)).
#include "fast/logsumexp.h"

#include <typeinfo>

#include "ops/ops_common.h"

namespace nuvec {

namespace fast {

array max_shift(const array& x, const std::vector<int>& axes, StreamOrDevice s) {
  array m = stop_gradient(max(x, axes, true, s), s);
  return where(isinf(m, s), zeros_like(m, s), m, s);
}

array logsumexp_graph(const array& x, const std::vector<int>& axes, StreamOrDevice s) {
  Dtype dt = x.dtype();
  Dtype acc = float_accumulate_type(dt);
  array xf = astype(x, acc, s);
  array m = max_shift(xf, axes, s);
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

std::vector<array> LogSumExp::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // The forward's output saves the kernels the row's max. A cotangent of another dtype than
  // x's keeps its precision through the fallback (the kernels take one dtype).
  const array& x = primals[0];
  const array& g = cotangents[0];
  return fast::record_or_fallback(
      issubdtype(x.dtype(), floating) && g.dtype() == x.dtype(), std::make_shared<LogSumExpVjp>(stream()),
      {x.shape()}, {x.dtype()}, {x, outputs[0], g});
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

// ---- LogSumExpVjp ----------------------------------------------------------------------

LogSumExpVjp::LogSumExpVjp(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        // The derivative of logsumexp_graph, step by step: its max (gradient-free, 0 where
        // infinite), exp's vjp (times the exponentials), sum's (broadcast) and log's (g / s).
        // lse (in[1]) does not enter: it is the kernels' shift, which the value ignores.
        const auto s = stream;
        const Dtype dt = in[0].dtype(), acc = float_accumulate_type(dt);
        array xf = astype(in[0], acc, s);
        array m = fast::max_shift(xf, {-1}, s);
        array e = exp(subtract(xf, m, s), s);
        array dx = multiply(divide(astype(in[2], acc, s), sum(e, -1, true, s), s), e, s);
        return std::vector<array>{acc != dt ? astype(dx, dt, s) : dx};
      }) {}

const char* LogSumExpVjp::name() const {
  return "LogSumExpVjp";
}

std::vector<Shape> LogSumExpVjp::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

bool LogSumExpVjp::is_equivalent(const Primitive& other) const {
  return same_type<LogSumExpVjp>(other) != nullptr;
}

} // namespace nuvec
