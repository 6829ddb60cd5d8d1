// nuvec: rules of the Reduce (and, or, sum, prod, max, min) and ArgReduce (argmin, argmax)
// families: shapes, vjp, jvp, vmap, equivalence. Derivatives follow shared/seeds/000_*.txt:
// prod is exact with zeros; max/min split ties evenly in reverse mode and take the first
// extreme in forward mode.
#include <typeinfo>

#include "primitives/primitives.h"

namespace nuvec {

namespace {

// The input's shape with `axes` set to 1 (the keepdims output of a reduction).
Shape keepdims_shape(const Shape& in, const std::vector<int>& axes) {
  Shape out = in;
  for (int a : axes) out[a] = 1;
  return out;
}

// Axes of an unbatched input shifted past a batch axis inserted at `batch`.
std::vector<int> shift_axes(const std::vector<int>& axes, int batch) {
  std::vector<int> out;
  for (int a : axes) out.push_back(a >= batch ? a + 1 : a);
  return out;
}

// d out / d x of prod over axes (out keeps dims): out / x without zeros; with exactly one
// zero in the reduced slice, the product of the others at the zero and 0 elsewhere; with
// more zeros, 0 everywhere.
array prod_weights(const array& x, const array& out, const std::vector<int>& axes) {
  array zero = equal(x, zeros_like(x));
  array zeros = sum(astype(zero, x.dtype()), axes, true);
  array others = prod(where(zero, ones_like(x), x), axes, true);
  array only_zero = logical_and(zero, equal(zeros, ones_like(zeros)));
  return where(
      equal(zeros, zeros_like(zeros)),
      divide(out, x),
      where(only_zero, others, zeros_like(x)));
}

// d out / d x of max/min in reverse mode: the ties of the extreme share the derivative.
array extreme_weights(const array& x, const array& out, const std::vector<int>& axes) {
  array mask = astype(equal(x, out), x.dtype());
  return divide(mask, sum(mask, axes, true));
}

// A one-hot mask (x's dtype) of the first max (or min) over axes, in row-major order of
// the reduced axes: forward mode takes the tangent there.
array first_extreme(const array& x, const std::vector<int>& axes, bool is_max) {
  std::vector<int> kept, perm;
  std::vector<bool> reduced(x.ndim(), false);
  for (int a : axes) reduced[a] = true;
  Shape rows_shape;
  for (int d = 0; d < static_cast<int>(x.ndim()); ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      rows_shape.push_back(x.shape()[d]);
    }
  }
  int reduced_size = 1;
  for (int a : axes) {
    perm.push_back(a);
    reduced_size *= x.shape()[a];
  }
  rows_shape.push_back(reduced_size);
  array moved = transpose(x, perm);
  array rows = reshape(moved, rows_shape);
  array index = is_max ? argmax(rows, -1, true) : argmin(rows, -1, true);
  array positions = arange(0.0, static_cast<double>(reduced_size), 1.0, uint32);
  array onehot = astype(equal(positions, index), x.dtype());
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  return transpose(reshape(onehot, moved.shape()), inverse);
}

} // namespace

// ---------------------------------------------------------------------------------------
// Reduce

const char* Reduce::name() const {
  switch (op_) {
    case ReduceOp::And: return "And";
    case ReduceOp::Or: return "Or";
    case ReduceOp::Sum: return "Sum";
    case ReduceOp::Prod: return "Prod";
    case ReduceOp::Max: return "Max";
    case ReduceOp::Min: return "Min";
  }
  return "Reduce";
}

std::vector<Shape> Reduce::output_shapes(const std::vector<array>& inputs) {
  return {keepdims_shape(inputs[0].shape(), axes_)};
}

std::vector<array> Reduce::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& x = primals[0];
  const array& g = cotangents[0];
  auto one = [&](array v) { return std::vector<array>(argnums.size(), v); };
  switch (op_) {
    case ReduceOp::Sum: return one(broadcast_to(g, x.shape()));
    case ReduceOp::Prod: {
      array w = prod_weights(x, outputs[0], axes_);
      if (x.dtype() == complex64) w = conjugate(w);
      return one(multiply(g, w));
    }
    case ReduceOp::Max:
    case ReduceOp::Min: return one(multiply(g, extreme_weights(x, outputs[0], axes_)));
    case ReduceOp::And:
    case ReduceOp::Or: return one(zeros_like(x));
  }
  return {};
}

std::vector<array> Reduce::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array& x = primals[0];
  const array& t = tangents[0];
  switch (op_) {
    case ReduceOp::Sum: return {sum(t, axes_, true)};
    case ReduceOp::Prod: {
      array out = prod(x, axes_, true);
      return {sum(multiply(t, prod_weights(x, out, axes_)), axes_, true)};
    }
    case ReduceOp::Max:
    case ReduceOp::Min:
      return {sum(multiply(t, first_extreme(x, axes_, op_ == ReduceOp::Max)), axes_, true)};
    case ReduceOp::And:
    case ReduceOp::Or: return {zeros(keepdims_shape(x.shape(), axes_), bool_)};
  }
  return {};
}

std::pair<std::vector<array>, std::vector<int>> Reduce::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int batch = axes[0];
  // Unbatched: reduce as is. Batched: the same reduction, its axes shifted past the batch
  // axis, which the keepdims output keeps in place.
  std::vector<int> red = batch < 0 ? axes_ : shift_axes(axes_, batch);
  Shape shape = keepdims_shape(x.shape(), red);
  array out(shape, x.dtype(), std::make_shared<Reduce>(stream(), op_, red), {x});
  return {{out}, {batch}};
}

bool Reduce::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const Reduce&>(other);
  return op_ == o.op_ && axes_ == o.axes_;
}

// ---------------------------------------------------------------------------------------
// ArgReduce

const char* ArgReduce::name() const {
  switch (op_) {
    case ArgReduceOp::ArgMin: return "ArgMin";
    case ArgReduceOp::ArgMax: return "ArgMax";
  }
  return "ArgReduce";
}

std::vector<Shape> ArgReduce::output_shapes(const std::vector<array>& inputs) {
  return {keepdims_shape(inputs[0].shape(), {axis_})};
}

std::vector<array> ArgReduce::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // Integer outputs: no derivative flows back (zero, as the seed's None).
  return std::vector<array>(argnums.size(), zeros_like(primals[0]));
}

std::vector<array> ArgReduce::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return {zeros(keepdims_shape(primals[0].shape(), {axis_}), uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgReduce::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int batch = axes[0];
  int axis = (batch >= 0 && axis_ >= batch) ? axis_ + 1 : axis_;
  array out(
      keepdims_shape(x.shape(), {axis}),
      uint32,
      std::make_shared<ArgReduce>(stream(), op_, axis),
      {x});
  return {{out}, {batch}};
}

bool ArgReduce::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const ArgReduce&>(other);
  return op_ == o.op_ && axis_ == o.axis_;
}

} // namespace nuvec
