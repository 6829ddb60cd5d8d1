// nuvec: rules of Select, where(condition, x, y) (name, shapes, vjp, jvp, vmap,
// equivalence). The partial for x is the cotangent/tangent where the condition holds, for y
// where it does not; the condition has none (shared/seeds/000_*.txt).
#include <optional>
#include <typeinfo>

#include "primitives/elementwise.h"

namespace nuvec {

namespace {

// `∂out/∂input_i · v`; nullopt for the condition.
std::optional<array> select_partial(const array& cond, int i, const array& v) {
  array zero = scalar_like(0, v);
  if (i == 1) return where(cond, v, zero);
  if (i == 2) return where(cond, zero, v);
  return std::nullopt;
}

} // namespace

const char* Select::name() const {
  return "Select";
}

std::vector<Shape> Select::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Select::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  std::vector<array> grads;
  for (int i : argnums) {
    auto d = select_partial(primals[0], i, cotangents[0]);
    grads.push_back(d ? *d : zeros_like(primals[i]));
  }
  return grads;
}

std::vector<array> Select::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::optional<array> total;
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto d = select_partial(primals[0], argnums[k], tangents[k]);
    if (d) total = total ? add(*total, *d) : *d;
  }
  return {total ? *total : zeros_like(primals[1])};
}

std::pair<std::vector<array>, std::vector<int>> Select::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  auto in = batch_to_front(inputs, axes, stream());
  array out(in[0].shape(), in[1].dtype(), std::make_shared<Select>(stream()), in);
  return {{out}, {any_batched(axes) ? 0 : -1}};
}

bool Select::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(Select);
}

} // namespace nuvec
