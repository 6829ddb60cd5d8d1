// nuvec: rules of the graph-plumbing family (Copy, Contiguous, StopGradient, Depends,
// AsStrided): nodes that pass values through, re-lay them out or order the graph. Derivatives
// follow shared/seeds/000_*.txt: identities pass the cotangent through, stop_gradient's is
// zero, depends routes cotangents to its passed-through inputs only.
#include <cmath>
#include <stdexcept>

#include "core/errors.h"
#include "primitives/primitives.h"
#include "primitives/sum_to.h"

namespace nuvec {

// ---- Copy -----------------------------------------------------------------------------

const char* Copy::name() const { return "Copy"; }

std::vector<Shape> Copy::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Copy::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {cotangents[0]};
}

std::vector<array> Copy::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> Copy::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return {{copy(inputs[0], stream())}, {axes[0]}};
}

bool Copy::is_equivalent(const Primitive& other) const {
  return same_type<Copy>(other) != nullptr;
}

// ---- Contiguous -----------------------------------------------------------------------

const char* Contiguous::name() const { return "Contiguous"; }

std::vector<Shape> Contiguous::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Contiguous::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {cotangents[0]};
}

std::vector<array> Contiguous::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> Contiguous::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return {{contiguous(inputs[0], allow_col_major_, stream())}, {axes[0]}};
}

bool Contiguous::is_equivalent(const Primitive& other) const {
  auto o = same_type<Contiguous>(other);
  return o && o->allow_col_major_ == allow_col_major_;
}

// ---- StopGradient ---------------------------------------------------------------------

const char* StopGradient::name() const { return "StopGradient"; }

std::vector<Shape> StopGradient::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> StopGradient::vjp(
    const std::vector<array>& primals,
    const std::vector<array>&,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::vector<array> StopGradient::jvp(
    const std::vector<array>& primals,
    const std::vector<array>&,
    const std::vector<int>&) {
  return {zeros_like(primals[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> StopGradient::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return {{stop_gradient(inputs[0], stream())}, {axes[0]}};
}

bool StopGradient::is_equivalent(const Primitive& other) const {
  return same_type<StopGradient>(other) != nullptr;
}

// ---- Depends --------------------------------------------------------------------------

const char* Depends::name() const { return "Depends"; }

std::vector<Shape> Depends::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  for (int i = 0; i < num_outputs_; ++i) shapes.push_back(inputs[i].shape());
  return shapes;
}

std::vector<array> Depends::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  std::vector<array> vjps;
  for (int arg : argnums) {
    vjps.push_back(
        arg < static_cast<int>(cotangents.size()) ? cotangents[arg]
                                                  : zeros_like(primals[arg], stream()));
  }
  return vjps;
}

std::vector<array> Depends::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::vector<array> out;
  for (int i = 0; i < num_outputs_; ++i) {
    auto it = std::find(argnums.begin(), argnums.end(), i);
    out.push_back(
        it != argnums.end() ? tangents[it - argnums.begin()] : zeros_like(primals[i], stream()));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Depends::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  std::vector<array> passed(inputs.begin(), inputs.begin() + num_outputs_);
  std::vector<array> deps(inputs.begin() + num_outputs_, inputs.end());
  return {depends(passed, deps), std::vector<int>(axes.begin(), axes.begin() + num_outputs_)};
}

bool Depends::is_equivalent(const Primitive& other) const {
  auto o = same_type<Depends>(other);
  return o && o->num_outputs_ == num_outputs_;
}

// ---- AsStrided ------------------------------------------------------------------------

const char* AsStrided::name() const { return "AsStrided"; }

std::vector<Shape> AsStrided::output_shapes(const std::vector<array>&) {
  return {shape_};
}

std::vector<array> AsStrided::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  // Each output element reads one flat input position: scatter-add the cotangent there
  // (positions read several times accumulate).
  const array& x = primals[0];
  Dtype idx_type = x.size() > static_cast<size_t>(INT32_MAX) ? int64 : int32;
  array positions = as_strided(
      arange(0.0, static_cast<double>(x.size()), 1.0, idx_type, stream()), shape_, strides_,
      offset_, stream());
  array flat_idx = reshape(positions, {-1}, stream());
  array flat_g = reshape(cotangents[0], {-1}, stream());
  array acc = zeros({static_cast<int32_t>(x.size())}, cotangents[0].dtype(), stream());
  array g = scatter_add_axis(acc, flat_idx, flat_g, 0, stream());
  return {reshape(g, x.shape(), stream())};
}

std::vector<array> AsStrided::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {as_strided(tangents[0], shape_, strides_, offset_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsStrided::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // Each batch element is a row of a (B, N) row-major matrix: prepend a batch axis of
  // stride N to the view.
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  int64_t n = 1;
  for (size_t i = 1; i < x.ndim(); ++i) n *= x.shape()[i];
  Shape shape = shape_;
  Strides strides = strides_;
  shape.insert(shape.begin(), x.shape()[0]);
  strides.insert(strides.begin(), n);
  return {{as_strided(x, shape, strides, offset_, stream())}, {0}};
}

bool AsStrided::is_equivalent(const Primitive& other) const {
  auto o = same_type<AsStrided>(other);
  return o && o->shape_ == shape_ && o->strides_ == strides_ && o->offset_ == offset_;
}

} // namespace nuvec
