// nuvec: rules of RandomBits and CovarianceSqrt: shapes, vjp, jvp, vmap, equivalence.
// Bits carry no derivative (MLX returns zeros); a batch of keys becomes a leading key axis,
// which RandomBits already supports (keys of shape (K..., 2)).
#include <typeinfo>

#include "core/errors.h"
#include "primitives/random.h"

namespace nuvec {

// ---------------------------------------------------------------------------------------
// RandomBits

const char* RandomBits::name() const {
  return "RandomBits";
}

std::vector<Shape> RandomBits::output_shapes(const std::vector<array>& inputs) {
  const Shape& k = inputs[0].shape();
  Shape out(k.begin(), k.end() - 1);
  out.insert(out.end(), shape_.begin(), shape_.end());
  return {out};
}

std::vector<array> RandomBits::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  return {zeros_like(primals[0])};
}

std::vector<array> RandomBits::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  auto shape = output_shapes(primals)[0];
  Dtype t = width_ == 1 ? uint8 : width_ == 2 ? uint16 : uint32;
  return {zeros(shape, t)};
}

std::pair<std::vector<array>, std::vector<int>> RandomBits::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // The batch axis goes first, so the batch is one more leading key dimension.
  array keys = axes[0] > 0 ? moveaxis(inputs[0], axes[0], 0) : inputs[0];
  Shape out_shape(keys.shape().begin(), keys.shape().end() - 1);
  out_shape.insert(out_shape.end(), shape_.begin(), shape_.end());
  Dtype t = width_ == 1 ? uint8 : width_ == 2 ? uint16 : uint32;
  array out(out_shape, t, std::make_shared<RandomBits>(stream(), shape_, width_), {keys});
  return {{out}, {axes[0] >= 0 ? 0 : -1}};
}

bool RandomBits::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const RandomBits&>(other);
  return o.shape_ == shape_ && o.width_ == width_;
}

// ---------------------------------------------------------------------------------------
// CovarianceSqrt

const char* CovarianceSqrt::name() const {
  return "CovarianceSqrt";
}

std::vector<Shape> CovarianceSqrt::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> CovarianceSqrt::vjp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&,
    const std::vector<array>&) {
  throw_invalid_argument(
      "multivariate_normal", "cov must not be differentiated (no derivative through the "
      "covariance factor); got a vjp request.");
}

std::vector<array> CovarianceSqrt::jvp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&) {
  throw_invalid_argument(
      "multivariate_normal", "cov must not be differentiated (no derivative through the "
      "covariance factor); got a jvp request.");
}

std::pair<std::vector<array>, std::vector<int>> CovarianceSqrt::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // Leading axes are batch axes already; only the last two are the matrix.
  array x = axes[0] > 0 ? moveaxis(inputs[0], axes[0], 0) : inputs[0];
  array out(x.shape(), x.dtype(), std::make_shared<CovarianceSqrt>(stream()), {x});
  return {{out}, {axes[0] >= 0 ? 0 : -1}};
}

bool CovarianceSqrt::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this);
}

} // namespace nuvec
