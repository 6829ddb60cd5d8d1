// nuvec: the primitives of nuvec::random (rules in src/primitives/random.cpp, CPU kernels in
// src/backend/cpu/random.cpp). Layout and rules follow MLX's RandomBits.
#pragma once

#include "primitives/primitives.h"

namespace nuvec {

/// Threefry-2x32 random bits. Input: keys of shape (K..., 2), uint32; output (K..., shape...)
/// of uint8 / uint16 / uint32 for width 1 / 2 / 4 bytes, each key filling its own block with
/// MLX's counter layout (src/backend/common/threefry.h). No derivative (zero); vmap batches
/// over keys.
class RandomBits : public Primitive {
 public:
  RandomBits(Stream stream, Shape shape, int width)
      : Primitive(stream), shape_(std::move(shape)), width_(width) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<Shape, int> state() const { return {shape_, width_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Shape shape_;
  int width_;
};

/// U diag(sqrt(S)) V^T from the SVD of each (n, n) matrix of the input (..., n, n): the
/// symmetric square root of a positive semi-definite covariance. float32 or float64;
/// computed in float64 by LAPACKE_dgesvd. No derivative (throws). No longer used:
/// random::multivariate_normal now builds MLX's graph on linalg::svd; kept until its
/// kernels (src/backend/cpu/random.cpp, no_gpu, cuda/runtime/on_host.cpp) are removed with it.
class CovarianceSqrt : public Primitive {
 public:
  explicit CovarianceSqrt(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

} // namespace nuvec
