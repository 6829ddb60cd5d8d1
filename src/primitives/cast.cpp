// nuvec: rules of the cast family (AsType, View): output shapes, vjp, jvp, vmap, equivalence.
// Derivatives follow shared/seeds/000_*.txt: a cast passes the cotangent back cast to the
// input's dtype; a bit reinterpretation has none (it throws).
#include <cmath>
#include <stdexcept>

#include "core/errors.h"
#include "primitives/primitives.h"
#include "primitives/sum_to.h"

namespace nuvec {

namespace {

[[noreturn]] void no_bit_derivative() {
  throw_invalid_argument(
      "View", "a derivative must go through a value, not a bit reinterpretation; got a view.");
}

} // namespace

// ---- AsType ---------------------------------------------------------------------------

const char* AsType::name() const { return "AsType"; }

std::vector<Shape> AsType::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> AsType::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  return {astype(cotangents[0], primals[0].dtype(), stream())};
}

std::vector<array> AsType::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return {astype(tangents[0], dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsType::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return {{astype(inputs[0], dtype_, stream())}, {axes[0]}};
}

bool AsType::is_equivalent(const Primitive& other) const {
  auto o = same_type<AsType>(other);
  return o && o->dtype_ == dtype_;
}

// ---- View -----------------------------------------------------------------------------

const char* View::name() const { return "View"; }

std::vector<Shape> View::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  size_t ib = inputs[0].itemsize(), ob = size_of(dtype_);
  if (ib != ob && !shape.empty()) {
    shape.back() = static_cast<int32_t>(shape.back() * ib / ob);
  }
  return {shape};
}

std::vector<array> View::vjp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&,
    const std::vector<array>&) {
  no_bit_derivative();
}

std::vector<array> View::jvp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&) {
  no_bit_derivative();
}

std::pair<std::vector<array>, std::vector<int>> View::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array x = inputs[0];
  int ax = axes[0];
  // The last axis changes length; keep the batch axis away from it.
  if (ax == static_cast<int>(x.ndim()) - 1 && x.itemsize() != size_of(dtype_)) {
    x = moveaxis(x, ax, 0, stream());
    ax = 0;
  }
  return {{view(x, dtype_, stream())}, {ax}};
}

bool View::is_equivalent(const Primitive& other) const {
  auto o = same_type<View>(other);
  return o && o->dtype_ == dtype_;
}

} // namespace nuvec
