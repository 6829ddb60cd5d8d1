// nuvec: rules of the Binary and DivMod families (name, shapes, vjp, jvp, vmap, equivalence).
// Each op's derivative is one diagonal partial per input serving both modes
// (shared/seeds/000_*.txt, `elementwise_partial`); reverse mode evaluates it on conjugated
// primals (MLX's complex convention). Ties of maximum/minimum go to b, as MLX.
#include <optional>
#include <typeinfo>

#include "primitives/elementwise.h"
#include "primitives/sum_to.h"

namespace nuvec {

namespace {

// `∂out/∂input_i · v` (inputs a, b of one shape; out the op's output). nullopt where the op
// has no derivative (comparisons, logical and bitwise ops, floor division).
std::optional<array> binary_partial(
    BinaryOp op, const array& a, const array& b, const array& out, int i, const array& v) {
  auto c = [&](double k) { return scalar_like(k, a); };
  auto mask = [&](const array& m) { return astype(m, a.dtype()); };
  switch (op) {
    case BinaryOp::Add: return v;
    case BinaryOp::Subtract: return i == 0 ? v : negative(v);
    case BinaryOp::Multiply: return multiply(v, i == 0 ? b : a);
    case BinaryOp::Divide:
      return i == 0 ? divide(v, b) : negative(divide(multiply(v, a), square(b)));
    // a mod b = a - b floor(a / b): 1 for a, -floor(a / b) for b (MLX's rule).
    case BinaryOp::Remainder:
      return i == 0 ? v : negative(multiply(v, floor_divide(a, b)));
    case BinaryOp::Power:
      if (i == 0) return multiply(v, multiply(b, power(a, subtract(b, c(1)))));
      // log(a) a^b, taken as 0 where a <= 0 (MLX).
      return multiply(v, multiply(log(where(greater(a, c(0)), a, c(1))), out));
    case BinaryOp::Maximum:
      return multiply(v, mask(i == 0 ? greater(a, b) : less_equal(a, b)));
    case BinaryOp::Minimum:
      return multiply(v, mask(i == 0 ? less(a, b) : greater_equal(a, b)));
    case BinaryOp::LogAddExp: {
      // e^a / (e^a + e^b): the sigmoid of a - b for reals (finite at infinities), e^(a - out)
      // for complex operands (no complex sigmoid).
      array s = a.dtype() == complex64 ? exp(subtract(a, out)) : sigmoid(subtract(a, b));
      return multiply(v, i == 0 ? s : subtract(c(1), s));
    }
    case BinaryOp::ArcTan2: {
      array r2 = add(square(a), square(b));
      return i == 0 ? divide(multiply(v, b), r2) : negative(divide(multiply(v, a), r2));
    }
    case BinaryOp::FloorDivide:
    case BinaryOp::Equal:
    case BinaryOp::NaNEqual:
    case BinaryOp::NotEqual:
    case BinaryOp::Less:
    case BinaryOp::LessEqual:
    case BinaryOp::Greater:
    case BinaryOp::GreaterEqual:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift: return std::nullopt;
  }
  return std::nullopt;
}

// A Binary node's inputs have the output's shape, except that either may be 0-d (the op
// layer leaves scalars unbroadcast: one node fewer per `x * 2`, and the kernels read a 0-d
// input as a scalar).
array record_binary(const Stream& s, BinaryOp op, const array& a, const array& b) {
  return array(broadcast_shapes(a.shape(), b.shape()), binary_output_dtype(op, a.dtype()),
               std::make_shared<Binary>(s, op), {a, b});
}

std::vector<array> record_divmod(const Stream& s, const array& a, const array& b) {
  return array::make_arrays({a.shape(), a.shape()}, {a.dtype(), a.dtype()},
                            std::make_shared<DivMod>(s), {a, b});
}

} // namespace

// ---------------------------------------------------------------------------------------
// Binary

const char* Binary::name() const {
  return binary_op_name(op_);
}

std::vector<Shape> Binary::output_shapes(const std::vector<array>& inputs) {
  return {broadcast_shapes(inputs[0].shape(), inputs[1].shape())};
}

std::vector<array> Binary::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  array a = conjugate(primals[0]), b = conjugate(primals[1]);
  array out = conjugate(outputs[0]);
  std::vector<array> grads;
  for (int i : argnums) {
    auto d = binary_partial(op_, a, b, out, i, cotangents[0]);
    // A 0-d input was broadcast inside the kernel: its cotangent sums over the output.
    grads.push_back(d ? sum_to(*d, primals[i].shape()) : zeros_like(primals[i]));
  }
  return grads;
}

std::vector<array> Binary::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array &a = primals[0], &b = primals[1];
  array out = record_binary(stream(), op_, a, b);
  std::optional<array> total;
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto d = binary_partial(op_, a, b, out, argnums[k], tangents[k]);
    if (d) total = total ? add(*total, *d) : *d;
  }
  // No partial (comparisons, floor_divide...): zeros in the tangent's dtype, not the output's
  // (a comparison's bool), as MLX (its issue 3081).
  if (!total) return {zeros(out.shape(), tangents.empty() ? out.dtype() : tangents[0].dtype())};
  // Only a 0-d input had a tangent: the product is 0-d too.
  return {total->shape() == out.shape() ? *total : broadcast_to(*total, out.shape())};
}

std::pair<std::vector<array>, std::vector<int>> Binary::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  auto in = batch_to_front(inputs, axes, stream());
  return {{record_binary(stream(), op_, in[0], in[1])}, {any_batched(axes) ? 0 : -1}};
}

bool Binary::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(Binary) && static_cast<const Binary&>(other).op() == op_;
}

// ---------------------------------------------------------------------------------------
// DivMod: outputs (floor_divide(a, b), remainder(a, b)). The quotient is piecewise constant
// (zero derivative); the remainder follows Remainder's rule.

const char* DivMod::name() const {
  return "DivMod";
}

std::vector<Shape> DivMod::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape(), inputs[0].shape()};
}

std::vector<array> DivMod::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // The quotient's cotangent contributes nothing.
  const array& g = cotangents[1];
  std::vector<array> grads;
  for (int i : argnums) {
    grads.push_back(i == 0 ? g : negative(multiply(g, outputs[0])));
  }
  return grads;
}

std::vector<array> DivMod::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array &a = primals[0], &b = primals[1];
  std::optional<array> total;
  for (size_t k = 0; k < argnums.size(); ++k) {
    array d = argnums[k] == 0 ? tangents[k] : negative(multiply(tangents[k], floor_divide(a, b)));
    total = total ? add(*total, d) : d;
  }
  array zero = zeros_like(a);
  return {zero, total ? *total : zero};
}

std::pair<std::vector<array>, std::vector<int>> DivMod::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  auto in = batch_to_front(inputs, axes, stream());
  int axis = any_batched(axes) ? 0 : -1;
  return {record_divmod(stream(), in[0], in[1]), {axis, axis}};
}

bool DivMod::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(DivMod);
}

} // namespace nuvec
