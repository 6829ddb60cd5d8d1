// nuvec: the Softmax fused primitive, softmax along the last axis in one node (MLX builds
// the same primitive when softmax reduces the last axis). Fallback, op and rules in
// src/fast/softmax.cpp; kernels in src/backend/cpu/fast/softmax.cpp and
// src/backend/cuda/fast/softmax.cu, tested against the fallback (tests/fast_test.cpp). Its
// backward is the SoftmaxVjp primitive (kernels in the same CPU file and in
// src/backend/cuda/fast/softmax_vjp.cu, tested in tests/fast_softmax_vjp_test.cpp).
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// The softmax graph over `axes` of x (ordinary ops): exp(x - max(x)) / sum(exp(x - max(x))),
/// the max gradient-free; half inputs normalise in float32 and round once. The meaning of
/// the Softmax node (axes = {-1}) and what the op runs for any other axes.
array softmax_graph(const array& x, const std::vector<int>& axes, StreamOrDevice s);

} // namespace fast

/// exp(x - max(x)) / sum(exp(x - max(x))) along the last axis. The input already has the
/// output dtype, a real floating type (the op casts first). Half inputs always accumulate in
/// float32 and float64 in float64, whatever `precise` says: nuvec's softmax normalises half
/// inputs in float32 (see the softmax op); `precise` is kept so that two nodes built with
/// different flags are not merged, as in MLX. Rules: vjp a SoftmaxVjp node on the output
/// (no second softmax), jvp from the fallback, vmap keeps the kernel (trailing axis).
class Softmax : public fast::FastPrimitive {
 public:
  Softmax(Stream stream, bool precise);
  /// The flag the op was called with (no effect on the result; see the class comment).
  bool precise() const { return precise_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  bool state() const { return precise_; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()

 private:
  bool precise_;
};

/// (y, d) -> dx = y · (d − sum(d · y, −1, keepdims)): the softmax Jacobian (symmetric) applied
/// to d along the last axis, the backward of Softmax from its output y for the cotangent d.
/// Shapes: y and d alike, at least 1-d; dx has their shape. Dtypes: y and d one real floating
/// dtype, dx the same; half types compute in float32 and round once (the fallback's
/// arithmetic, softmax_jacobian_product in src/fast/softmax.cpp), float64 in float64.
/// Throws: std::invalid_argument from the kernels for a dtype other than real floating (the
/// op records the node only for those). Source: MLX's Softmax::vjp. Runs: per row, the dot
/// then the write (CPU, src/backend/cpu/fast/softmax.cpp; GPU, src/backend/cuda/fast/
/// softmax_vjp.cu: the row in registers, else streamed twice). Rules from the fallback
/// (second derivatives of softmax).
class SoftmaxVjp : public fast::FastPrimitive {
 public:
  explicit SoftmaxVjp(Stream stream);

  NUVEC_FAST_PRIMITIVE()
};

} // namespace nuvec
