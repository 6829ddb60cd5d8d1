// nuvec: rules of the creation family (Full, Arange): output shapes, vjp, jvp, vmap,
// equivalence. Full broadcasts its value input (its cotangent sums back); Arange has no
// inputs.
#include <cmath>
#include <stdexcept>

#include "core/errors.h"
#include "primitives/primitives.h"
#include "primitives/sum_to.h"

namespace nuvec {

// ---- Full -----------------------------------------------------------------------------

const char* Full::name() const { return "Full"; }

std::vector<Shape> Full::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Full::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {sum_to(cotangents[0], primals[0].shape())};
}

std::vector<array> Full::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> Full::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  array out(x.shape(), x.dtype(), std::make_shared<Full>(stream()), {x});
  return {{out}, {axes[0]}};
}

bool Full::is_equivalent(const Primitive& other) const {
  return same_type<Full>(other) != nullptr;
}

// ---- Arange ---------------------------------------------------------------------------

const char* Arange::name() const { return "Arange"; }

std::vector<Shape> Arange::output_shapes(const std::vector<array>&) {
  double n = std::ceil((stop_ - start_) / step_);
  return {{static_cast<int32_t>(std::max(n, 0.0))}};
}

std::vector<array> Arange::vjp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {}; // no inputs
}

// Arange has no inputs, so no tangent or batch axis can reach it; the transforms never
// call these rules (they skip nodes that depend on none of their inputs).
std::vector<array> Arange::jvp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&) {
  throw_invalid_argument("Arange", "a jvp must have a tangent input; got a node without inputs.");
}

std::pair<std::vector<array>, std::vector<int>> Arange::vmap(
    const std::vector<array>&,
    const std::vector<int>&) {
  throw_invalid_argument("Arange", "vmap must have a batched input; got a node without inputs.");
}

bool Arange::is_equivalent(const Primitive& other) const {
  auto o = same_type<Arange>(other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->step_ == step_;
}

} // namespace nuvec
