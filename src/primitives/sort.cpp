// nuvec: rules of the Sort and ArgSort families: shapes, vjp, jvp, vmap, equivalence.
// Derivatives follow shared/seeds/000_*.txt: sorting permutes, so reverse mode scatters the
// cotangent back through argsort and forward mode gathers the tangent; argsort has none.
#include <typeinfo>

#include "primitives/primitives.h"

namespace nuvec {

namespace {
int shifted_axis(int axis, int batch) {
  return (batch >= 0 && axis >= batch) ? axis + 1 : axis;
}
} // namespace

// ---------------------------------------------------------------------------------------
// Sort

const char* Sort::name() const {
  return "Sort";
}

std::vector<Shape> Sort::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Sort::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& x = primals[0];
  array idx = stop_gradient(argsort(x, axis_));
  return {put_along_axis(zeros_like(x), idx, cotangents[0], axis_)};
}

std::vector<array> Sort::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  array idx = stop_gradient(argsort(primals[0], axis_));
  return {take_along_axis(tangents[0], idx, axis_)};
}

std::pair<std::vector<array>, std::vector<int>> Sort::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int axis = shifted_axis(axis_, axes[0]);
  array out(x.shape(), x.dtype(), std::make_shared<Sort>(stream(), axis), {x});
  return {{out}, {axes[0]}};
}

bool Sort::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this) && static_cast<const Sort&>(other).axis_ == axis_;
}

// ---------------------------------------------------------------------------------------
// ArgSort

const char* ArgSort::name() const {
  return "ArgSort";
}

std::vector<Shape> ArgSort::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> ArgSort::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  return {zeros_like(primals[0])};
}

std::vector<array> ArgSort::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return {zeros(primals[0].shape(), uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgSort::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int axis = shifted_axis(axis_, axes[0]);
  array out(x.shape(), uint32, std::make_shared<ArgSort>(stream(), axis), {x});
  return {{out}, {axes[0]}};
}

bool ArgSort::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this) && static_cast<const ArgSort&>(other).axis_ == axis_;
}

} // namespace nuvec
