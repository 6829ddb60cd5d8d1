// nuvec: rules of the shape family (Reshape, Transpose, Broadcast, Squeeze, ExpandDims):
// output shapes, vjp, jvp, vmap, equivalence. Derivatives follow shared/seeds/000_*.txt
// (reshape back, inverse permutation, sum a broadcast back down, squeeze <-> expand_dims).
// vmap moves the batch axis to the front and applies the op with that axis prepended.
#include "core/errors.h"
#include "primitives/primitives.h"
#include "primitives/sum_to.h"

namespace nuvec {

namespace {

// The axes shifted past a batch axis at the front.
std::vector<int> shifted(const std::vector<int>& axes) {
  std::vector<int> out(axes);
  for (auto& a : out) a += 1;
  return out;
}

} // namespace

// ---- Reshape --------------------------------------------------------------------------

const char* Reshape::name() const { return "Reshape"; }

std::vector<Shape> Reshape::output_shapes(const std::vector<array>&) {
  return {shape_};
}

std::vector<array> Reshape::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {reshape(cotangents[0], primals[0].shape(), stream())};
}

std::vector<array> Reshape::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {reshape(tangents[0], shape_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Reshape::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  Shape shape = shape_;
  shape.insert(shape.begin(), x.shape()[0]);
  return {{reshape(x, shape, stream())}, {0}};
}

bool Reshape::is_equivalent(const Primitive& other) const {
  auto o = same_type<Reshape>(other);
  return o && o->shape_ == shape_;
}

// ---- Transpose ------------------------------------------------------------------------

const char* Transpose::name() const { return "Transpose"; }

std::vector<Shape> Transpose::output_shapes(const std::vector<array>& inputs) {
  Shape shape(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) shape[i] = inputs[0].shape()[axes_[i]];
  return {shape};
}

std::vector<array> Transpose::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  std::vector<int> inverse(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) inverse[axes_[i]] = static_cast<int>(i);
  return {transpose(cotangents[0], inverse, stream())};
}

std::vector<array> Transpose::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {transpose(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Transpose::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  std::vector<int> perm{0};
  for (int a : axes_) perm.push_back(a + 1);
  return {{transpose(x, perm, stream())}, {0}};
}

bool Transpose::is_equivalent(const Primitive& other) const {
  auto o = same_type<Transpose>(other);
  return o && o->axes_ == axes_;
}

// ---- Broadcast ------------------------------------------------------------------------

const char* Broadcast::name() const { return "Broadcast"; }

std::vector<Shape> Broadcast::output_shapes(const std::vector<array>&) {
  return {shape_};
}

std::vector<array> Broadcast::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {sum_to(cotangents[0], primals[0].shape())};
}

std::vector<array> Broadcast::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {broadcast_to(tangents[0], shape_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Broadcast::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // Batch first, then size-1 axes so the example's own axes align with the target's tail.
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  Shape shape = x.shape();
  size_t missing = shape_.size() - (x.ndim() - 1);
  shape.insert(shape.begin() + 1, missing, 1);
  Shape target = shape_;
  target.insert(target.begin(), x.shape()[0]);
  return {{broadcast_to(reshape(x, shape, stream()), target, stream())}, {0}};
}

bool Broadcast::is_equivalent(const Primitive& other) const {
  auto o = same_type<Broadcast>(other);
  return o && o->shape_ == shape_;
}

// ---- Squeeze --------------------------------------------------------------------------

const char* Squeeze::name() const { return "Squeeze"; }

std::vector<Shape> Squeeze::output_shapes(const std::vector<array>& inputs) {
  Shape shape;
  size_t j = 0;
  for (size_t i = 0; i < inputs[0].ndim(); ++i) {
    if (j < axes_.size() && axes_[j] == static_cast<int>(i)) {
      ++j;
    } else {
      shape.push_back(inputs[0].shape()[i]);
    }
  }
  return {shape};
}

std::vector<array> Squeeze::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {expand_dims(cotangents[0], axes_, stream())};
}

std::vector<array> Squeeze::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {squeeze(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Squeeze::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  return {{squeeze(x, shifted(axes_), stream())}, {0}};
}

bool Squeeze::is_equivalent(const Primitive& other) const {
  auto o = same_type<Squeeze>(other);
  return o && o->axes_ == axes_;
}

// ---- ExpandDims -----------------------------------------------------------------------

const char* ExpandDims::name() const { return "ExpandDims"; }

std::vector<Shape> ExpandDims::output_shapes(const std::vector<array>& inputs) {
  Shape shape(inputs[0].ndim() + axes_.size(), 1);
  size_t j = 0, src = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (j < axes_.size() && axes_[j] == static_cast<int>(i)) {
      ++j;
    } else {
      shape[i] = inputs[0].shape()[src++];
    }
  }
  return {shape};
}

std::vector<array> ExpandDims::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {squeeze(cotangents[0], axes_, stream())};
}

std::vector<array> ExpandDims::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {expand_dims(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> ExpandDims::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  return {{expand_dims(x, shifted(axes_), stream())}, {0}};
}

bool ExpandDims::is_equivalent(const Primitive& other) const {
  auto o = same_type<ExpandDims>(other);
  return o && o->axes_ == axes_;
}

} // namespace nuvec
