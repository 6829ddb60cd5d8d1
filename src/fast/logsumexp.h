// nuvec: the LogSumExp fused primitive, log(sum(exp(x))) over the last axis in one node
// (one read of x instead of the graph's four passes). Fallback, op and rules in
// src/fast/logsumexp.cpp; kernels in src/backend/cpu/fast/logsumexp.cpp and
// src/backend/cuda/fast/logsumexp.cu, tested against the fallback (tests/fast_test.cpp).
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// The logsumexp graph over `axes` of x (ordinary ops), keeping the axes: m + log(sum(exp(x
/// - m))) with m the gradient-free max, replaced by 0 where infinite (so a row of -inf gives
/// -inf and a row holding +inf gives +inf; NaN propagates). Half inputs compute in float32
/// and round once. The meaning of the LogSumExp node (axes = {-1}) and what the op runs
/// for any other axes.
array logsumexp_graph(const array& x, const std::vector<int>& axes, StreamOrDevice s);

} // namespace fast

/// log(sum(exp(x), -1, keepdims=true)) of a real floating x (the op casts first), output
/// shape (..., 1) in x's dtype. Half inputs accumulate in float32. Rules: jvp, vjp from the
/// fallback; vmap keeps the kernel (trailing axis).
class LogSumExp : public fast::FastPrimitive {
 public:
  explicit LogSumExp(Stream stream);

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VMAP()
};

} // namespace nuvec
