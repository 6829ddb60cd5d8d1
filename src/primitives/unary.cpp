// nuvec: rules of the Unary family (name, shapes, vjp, jvp, vmap, equivalence). The
// derivative of each op is one diagonal partial serving both modes (shared/seeds/000_*.txt,
// `elementwise_partial`); reverse mode evaluates it on conjugated primals, MLX's convention
// for complex inputs. Rules follow MLX's primitives.cpp.
#include <cmath>
#include <numbers>
#include <typeinfo>

#include "primitives/elementwise.h"

namespace nuvec {

namespace {

// `J · v` for the diagonal Jacobian of op at x (with output `out`). Ops without a derivative
// (rounding, integer and bool results) give zeros. Real and Imag are given in forward form;
// reverse mode handles them before calling this.
array unary_partial(UnaryOp op, const array& x, const array& out, const array& v) {
  auto c = [&](double k) { return scalar_like(k, x); };
  switch (op) {
    case UnaryOp::Abs: return multiply(v, sign(x));
    case UnaryOp::Negative: return negative(v);
    case UnaryOp::Sign:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseInvert: return zeros_like(out);
    case UnaryOp::Sqrt: return divide(v, multiply(c(2), out));
    case UnaryOp::Rsqrt: return multiply(v, divide(multiply(c(-0.5), out), x));
    case UnaryOp::Square: return multiply(v, multiply(c(2), x));
    case UnaryOp::Exp: return multiply(v, out);
    case UnaryOp::Expm1: return multiply(v, add(out, c(1)));
    case UnaryOp::Log: return divide(v, x);
    case UnaryOp::Log2: return divide(v, multiply(x, c(std::numbers::ln2)));
    case UnaryOp::Log10: return divide(v, multiply(x, c(std::numbers::ln10)));
    case UnaryOp::Log1p: return divide(v, add(x, c(1)));
    case UnaryOp::Sin: return multiply(v, cos(x));
    case UnaryOp::Cos: return negative(multiply(v, sin(x)));
    case UnaryOp::Tan: return divide(v, square(cos(x)));
    case UnaryOp::ArcSin: return multiply(v, rsqrt(subtract(c(1), square(x))));
    case UnaryOp::ArcCos: return negative(multiply(v, rsqrt(subtract(c(1), square(x)))));
    case UnaryOp::ArcTan: return divide(v, add(c(1), square(x)));
    case UnaryOp::Sinh: return multiply(v, cosh(x));
    case UnaryOp::Cosh: return multiply(v, sinh(x));
    case UnaryOp::Tanh: return multiply(v, subtract(c(1), square(out)));
    case UnaryOp::ArcSinh: return multiply(v, rsqrt(add(square(x), c(1))));
    case UnaryOp::ArcCosh: return multiply(v, rsqrt(subtract(square(x), c(1))));
    case UnaryOp::ArcTanh: return divide(v, subtract(c(1), square(x)));
    case UnaryOp::Sigmoid: return multiply(v, multiply(out, subtract(c(1), out)));
    case UnaryOp::Erf:
      return multiply(v, multiply(c(2.0 / std::sqrt(std::numbers::pi)), exp(negative(square(x)))));
    case UnaryOp::ErfInv:
      return multiply(v, multiply(c(std::sqrt(std::numbers::pi) / 2.0), exp(square(out))));
    case UnaryOp::Conjugate: return conjugate(v);
    case UnaryOp::Real: return real(v);
    case UnaryOp::Imag: return imag(v);
  }
  return zeros_like(out);
}

// z / |z| as complex64, 0 at z = 0: the reverse-mode derivative of |z|.
array complex_sign(const array& z, const array& magnitude) {
  array unit = divide(z, astype(magnitude, complex64));
  return where(equal(magnitude, scalar_like(0, magnitude)), array(0.0f, complex64), unit);
}

} // namespace

const char* Unary::name() const {
  return unary_op_name(op_);
}

std::vector<Shape> Unary::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Unary::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& x = primals[0];
  const array& g = cotangents[0];
  if (x.dtype() == complex64) {
    // Rules whose reverse form is not the forward one on conjugated primals (MLX's).
    if (op_ == UnaryOp::Abs) return {multiply(astype(g, complex64), complex_sign(x, outputs[0]))};
    if (op_ == UnaryOp::Real) return {astype(g, complex64)};
    if (op_ == UnaryOp::Imag) {
      // d Im(z) = dy: the conjugate convention's gradient is dL/dx + i dL/dy = i g. (MLX
      // returns -i g, which disagrees with its own Abs and Multiply rules.)
      return {multiply(array(complex64_t(0.0f, 1.0f), complex64), astype(g, complex64))};
    }
  }
  return {unary_partial(op_, conjugate(x), conjugate(outputs[0]), g)};
}

std::vector<array> Unary::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array& x = primals[0];
  if (op_ == UnaryOp::Abs && x.dtype() == complex64) {
    // d|z| = Re(conj(z) dz) / |z|, zero at z = 0.
    array mag = abs(x);
    array re = real(multiply(conjugate(x), tangents[0]));
    return {where(equal(mag, scalar_like(0, mag)), scalar_like(0, mag), divide(re, mag))};
  }
  // The output is recomputed lazily; the transforms do not hand outputs to jvp.
  array out = array(x.shape(), unary_output_dtype(op_, x.dtype()),
                    std::make_shared<Unary>(stream(), op_), {x});
  return {unary_partial(op_, x, out, tangents[0])};
}

std::pair<std::vector<array>, std::vector<int>> Unary::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array x = batch_to_front(inputs, axes, stream())[0];
  array out(x.shape(), unary_output_dtype(op_, x.dtype()), std::make_shared<Unary>(stream(), op_),
            {x});
  return {{out}, {any_batched(axes) ? 0 : -1}};
}

bool Unary::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(Unary) && static_cast<const Unary&>(other).op() == op_;
}

} // namespace nuvec
