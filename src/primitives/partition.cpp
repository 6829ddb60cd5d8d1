// nuvec: rules of the Partition and ArgPartition primitives: shapes, vjp, jvp, vmap,
// equivalence. As for sort (shared/seeds/000_*.txt): partition permutes each line, so
// reverse mode scatters the cotangent back through argpartition and forward mode gathers
// the tangent; argpartition has zero derivatives.
#include <typeinfo>

#include "primitives/partition.h"

namespace nuvec {

namespace {
int shifted_axis(int axis, int batch) {
  return (batch >= 0 && axis >= batch) ? axis + 1 : axis;
}
} // namespace

// ---------------------------------------------------------------------------------------
// Partition

const char* Partition::name() const {
  return "Partition";
}

std::vector<Shape> Partition::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Partition::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& x = primals[0];
  array idx = stop_gradient(argpartition(x, kth_, axis_));
  return {put_along_axis(zeros_like(x), idx, cotangents[0], axis_)};
}

std::vector<array> Partition::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  array idx = stop_gradient(argpartition(primals[0], kth_, axis_));
  return {take_along_axis(tangents[0], idx, axis_)};
}

std::pair<std::vector<array>, std::vector<int>> Partition::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int axis = shifted_axis(axis_, axes[0]);
  array out(x.shape(), x.dtype(), std::make_shared<Partition>(stream(), kth_, axis), {x});
  return {{out}, {axes[0]}};
}

bool Partition::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const Partition&>(other);
  return o.kth_ == kth_ && o.axis_ == axis_;
}

// ---------------------------------------------------------------------------------------
// ArgPartition

const char* ArgPartition::name() const {
  return "ArgPartition";
}

std::vector<Shape> ArgPartition::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> ArgPartition::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  return {zeros_like(primals[0])};
}

std::vector<array> ArgPartition::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return {zeros(primals[0].shape(), uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgPartition::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int axis = shifted_axis(axis_, axes[0]);
  array out(x.shape(), uint32, std::make_shared<ArgPartition>(stream(), kth_, axis), {x});
  return {{out}, {axes[0]}};
}

bool ArgPartition::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const ArgPartition&>(other);
  return o.kth_ == kth_ && o.axis_ == axis_;
}

} // namespace nuvec
