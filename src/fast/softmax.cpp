// nuvec: softmax, its fallback graph and the rules of the Softmax fused primitive, and its
// backward SoftmaxVjp. The derivative is the softmax Jacobian applied to a vector,
// y * (d - sum(d * y, -1)), written from the output for the cotangent (MLX's Softmax vjp) as
// one SoftmaxVjp node whose fallback is that formula; jvp comes from the fallback.
#include "fast/softmax.h"

#include <typeinfo>

#include "ops/ops_common.h"

namespace nuvec {

namespace fast {

array softmax_graph(const array& x, const std::vector<int>& axes, StreamOrDevice s) {
  Dtype dt = x.dtype();
  // Half inputs normalise in float32: a float16 denominator overflows past 65504 terms
  // (NumPy's answer over MLX's; `precise` is kept for API compatibility).
  bool widen = dt == float16 || dt == bfloat16;
  array xf = astype(x, widen ? float32 : dt, s);
  array m = stop_gradient(max(xf, axes, true, s), s);
  array e = exp(subtract(xf, m, s), s);
  array out = divide(e, sum(e, axes, true, s), s);
  return widen ? astype(out, dt, s) : out;
}

} // namespace fast

Softmax::Softmax(Stream stream, bool precise)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        return std::vector<array>{fast::softmax_graph(in[0], {-1}, stream)};
      }),
      precise_(precise) {}

array softmax(const array& a, const std::vector<int>& axes, bool precise, StreamOrDevice s) {
  if (a.ndim() == 0 && !axes.empty()) {
    // MLX refuses it as a value error (test_ops.py), not as an axis out of range.
    throw_invalid_argument("softmax", "a 0-d array has no axis to normalise over; got axes of size ", axes.size(), ".");
  }
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "softmax");
  Dtype dt = float_result_type(a.dtype());
  if (a.size() == 0) return astype(a, dt, s);
  array in = astype(a, dt, s);
  // Over the last axis of a real floating input, one Softmax node (one read, one write)
  // instead of the five passes of the graph; its kernels widen half types to float32
  // themselves, so the result is the graph's (NaN for a row of all -inf, as NumPy).
  // (Complex inputs have no kernel: the node's fallback runs instead.)
  if (ax.size() != 1 || ax[0] != static_cast<int>(a.ndim()) - 1) return fast::softmax_graph(in, ax, s);
  return fast::record_or_fallback(
      issubdtype(dt, floating), std::make_shared<Softmax>(to_stream(s), precise), {in.shape()}, {dt},
      {in})[0];
}
array softmax(const array& a, bool precise, StreamOrDevice s) {
  return softmax(a, all_axes(static_cast<int>(a.ndim())), precise, s);
}
array softmax(const array& a, int axis, bool precise, StreamOrDevice s) {
  return softmax(a, std::vector<int>{axis}, precise, s);
}

namespace {

// y * (d - sum(d * y, last axis)): the softmax Jacobian (symmetric) times d, the SoftmaxVjp
// fallback. Half types compute it in float32, as the Softmax fallback's derivative does, then
// round once.
array softmax_jacobian_product(const array& y, const array& d, const Stream& s) {
  Dtype dt = y.dtype();
  bool widen = dt == float16 || dt == bfloat16;
  array yf = widen ? astype(y, float32, s) : y;
  array df = astype(d, yf.dtype(), s);
  array dot = sum(multiply(df, yf, s), -1, true, s);
  array out = multiply(yf, subtract(df, dot, s), s);
  return out.dtype() == dt ? out : astype(out, dt, s);
}

} // namespace

const char* Softmax::name() const {
  return "Softmax";
}

std::vector<Shape> Softmax::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Softmax::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // The output is all the derivative needs (no second softmax is built). A cotangent of
  // another dtype than y's keeps its precision through the fallback (the kernels take one).
  const array& y = outputs[0];
  const array& d = cotangents[0];
  return fast::record_or_fallback(
      issubdtype(y.dtype(), floating) && d.dtype() == y.dtype(), std::make_shared<SoftmaxVjp>(stream()),
      {y.shape()}, {y.dtype()}, {y, d});
}

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return vmap_trailing(inputs, axes, 1, [&](const std::vector<array>& in) {
    return std::vector<array>{
        array(in[0].shape(), in[0].dtype(), std::make_shared<Softmax>(stream(), precise_), {in[0]})};
  });
}

bool Softmax::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(Softmax)) return false;
  return precise_ == static_cast<const Softmax&>(other).precise_;
}

// ---- SoftmaxVjp ------------------------------------------------------------------------

SoftmaxVjp::SoftmaxVjp(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        return std::vector<array>{softmax_jacobian_product(in[0], in[1], stream)};
      }) {}

const char* SoftmaxVjp::name() const {
  return "SoftmaxVjp";
}

std::vector<Shape> SoftmaxVjp::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

bool SoftmaxVjp::is_equivalent(const Primitive& other) const {
  return same_type<SoftmaxVjp>(other) != nullptr;
}

} // namespace nuvec
