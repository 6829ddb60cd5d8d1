// nuvec: rules of the Softmax primitive (softmax along the last axis): name, shapes, vjp,
// jvp, vmap, equivalence. The derivative is the softmax Jacobian applied to a vector,
// dy = y * (d - sum(d * y, -1)), for the cotangent (vjp) and the tangent (jvp), as MLX's
// Softmax rules.
#include <typeinfo>

#include "primitives/softmax.h"

namespace nuvec {

namespace {

// y * (d - sum(d * y, last axis)): the softmax Jacobian (symmetric) times d. Half types
// compute it in float32, as the composed softmax's derivative did (its graph ran in
// float32 between two casts), then round once.
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
  // The output is all the derivative needs (no second softmax is built).
  return {softmax_jacobian_product(outputs[0], cotangents[0], stream())};
}

std::vector<array> Softmax::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  // jvp does not see the outputs: y is rebuilt as one more node of this primitive (one
  // read and one write of x, cheaper than the composed formula).
  const array& x = primals[0];
  array y(x.shape(), x.dtype(), std::make_shared<Softmax>(stream(), precise_), {x});
  return {softmax_jacobian_product(y, tangents[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // The primitive normalises the last axis: a batch axis there would be mixed into the
  // rows, so it moves to the front; anywhere else it is just one more row index.
  array x = inputs[0];
  int bax = axes[0];
  if (bax >= 0 && bax == static_cast<int>(x.ndim()) - 1) {
    x = moveaxis(x, bax, 0, stream());
    bax = 0;
  }
  array out(x.shape(), x.dtype(), std::make_shared<Softmax>(stream(), precise_), {x});
  return {{out}, {bax}};
}

bool Softmax::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(Softmax)) return false;
  return precise_ == static_cast<const Softmax&>(other).precise_;
}

} // namespace nuvec
