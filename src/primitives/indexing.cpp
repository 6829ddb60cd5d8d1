// nuvec: rules of the GatherAxis (take_along_axis) and ScatterAxis (put_along_axis,
// scatter_add_axis) families: shapes, vjp, jvp, vmap, equivalence. Derivatives follow
// shared/seeds/000_*.txt: a gather's cotangent is scatter-added back (repeated indices
// accumulate); an overwriting scatter gives no gradient to the overwritten positions.
#include <optional>
#include <typeinfo>

#include "primitives/batching.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

} // namespace

// ---------------------------------------------------------------------------------------
// GatherAxis: inputs (a, indices), output of indices' shape.

const char* GatherAxis::name() const {
  return "GatherAxis";
}

std::vector<Shape> GatherAxis::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

std::vector<array> GatherAxis::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& a = primals[0];
  const array& idx = primals[1];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(array(
          a.shape(),
          a.dtype(),
          std::make_shared<ScatterAxis>(stream(), ScatterReduce::Sum, axis_),
          {zeros_like(a), idx, cotangents[0]}));
    } else {
      out.push_back(zeros_like(idx)); // indices: no derivative
    }
  }
  return out;
}

std::vector<array> GatherAxis::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array& idx = primals[1];
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) {
      return {array(
          idx.shape(),
          tangents[i].dtype(),
          std::make_shared<GatherAxis>(stream(), axis_),
          {tangents[i], idx})};
    }
  }
  return {zeros(idx.shape(), primals[0].dtype())};
}

std::pair<std::vector<array>, std::vector<int>> GatherAxis::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (!any_batched(axes)) {
    return {{take_along_axis(inputs[0], inputs[1], axis_)}, {-1}};
  }
  auto b = batch_first(inputs, axes);
  array out(
      b[1].shape(),
      b[0].dtype(),
      std::make_shared<GatherAxis>(stream(), axis_ + 1),
      {b[0], b[1]});
  return {{out}, {0}};
}

bool GatherAxis::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this) && static_cast<const GatherAxis&>(other).axis_ == axis_;
}

// ---------------------------------------------------------------------------------------
// ScatterAxis: inputs (a, indices, updates), updates of indices' shape, output of a's.

const char* ScatterAxis::name() const {
  return "ScatterAxis";
}

std::vector<Shape> ScatterAxis::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> ScatterAxis::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& a = primals[0];
  const array& idx = primals[1];
  const array& upd = primals[2];
  const array& g = cotangents[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      switch (reduce_) {
        case ScatterReduce::None:
          // Overwritten positions get no gradient: scatter zeros over them.
          out.push_back(array(
              a.shape(),
              g.dtype(),
              std::make_shared<ScatterAxis>(stream(), ScatterReduce::None, axis_),
              {g, idx, zeros_like(upd)}));
          break;
        case ScatterReduce::Sum: out.push_back(g); break;
      }
    } else if (i == 2) {
      // For None with duplicate indices every duplicate gets the position's cotangent,
      // as MLX's rule does.
      out.push_back(array(
          idx.shape(), g.dtype(), std::make_shared<GatherAxis>(stream(), axis_), {g, idx}));
    } else {
      out.push_back(zeros_like(idx)); // indices: no derivative
    }
  }
  return out;
}

std::vector<array> ScatterAxis::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::optional<array> ta, tu;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) ta = tangents[i];
    if (argnums[i] == 2) tu = tangents[i];
  }
  Dtype dt = ta ? ta->dtype() : tu ? tu->dtype() : primals[0].dtype();
  array a = ta ? *ta : zeros(primals[0].shape(), dt);
  array u = tu ? *tu : zeros(primals[2].shape(), dt);
  return {array(
      primals[0].shape(),
      dt,
      std::make_shared<ScatterAxis>(stream(), reduce_, axis_),
      {a, primals[1], u})};
}

std::pair<std::vector<array>, std::vector<int>> ScatterAxis::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (!any_batched(axes)) {
    array out(
        inputs[0].shape(),
        inputs[0].dtype(),
        std::make_shared<ScatterAxis>(stream(), reduce_, axis_),
        inputs);
    return {{out}, {-1}};
  }
  auto b = batch_first(inputs, axes);
  array out(
      b[0].shape(),
      b[0].dtype(),
      std::make_shared<ScatterAxis>(stream(), reduce_, axis_ + 1),
      b);
  return {{out}, {0}};
}

bool ScatterAxis::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const ScatterAxis&>(other);
  return reduce_ == o.reduce_ && axis_ == o.axis_;
}

} // namespace nuvec
