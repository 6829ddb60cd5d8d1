// nuvec: the LogSumExp fused primitive, log(sum(exp(x))) over the last axis in one node
// (one read of x instead of the graph's four passes). Fallback, op and rules in
// src/fast/logsumexp.cpp; kernels in src/backend/cpu/fast/logsumexp.cpp and
// src/backend/cuda/fast/logsumexp.cu, tested against the fallback (tests/fast_test.cpp). Its
// backward is the LogSumExpVjp primitive (kernels in the same CPU file and in
// src/backend/cuda/fast/softmax_vjp.cu, tested in tests/fast_softmax_vjp_test.cpp).
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// The shift that keeps exp(x − m) in range and large values' digits: the max of x over
/// `axes` (kept), gradient-free, replaced by 0 where infinite (a row of −inf or holding +inf
/// then keeps its infinity). Shared by logsumexp_graph and its vjp, cross_entropy's graphs,
/// nn::losses::cross_entropy and nn::log_softmax, which subtract it before adding anything.
array max_shift(const array& x, const std::vector<int>& axes, StreamOrDevice s = {});

/// The logsumexp graph over `axes` of x (ordinary ops), keeping the axes: m + log(sum(exp(x
/// - m))) with m the gradient-free max, replaced by 0 where infinite (so a row of -inf gives
/// -inf and a row holding +inf gives +inf; NaN propagates). Half inputs compute in float32
/// and round once. The meaning of the LogSumExp node (axes = {-1}) and what the op runs
/// for any other axes.
array logsumexp_graph(const array& x, const std::vector<int>& axes, StreamOrDevice s);

} // namespace fast

/// log(sum(exp(x), -1, keepdims=true)) of a real floating x (the op casts first), output
/// shape (..., 1) in x's dtype. Half inputs accumulate in float32. Rules: vjp a LogSumExpVjp
/// node on x and the output; jvp from the fallback; vmap keeps the kernel (trailing axis).
class LogSumExp : public fast::FastPrimitive {
 public:
  explicit LogSumExp(Stream stream);

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()
};

/// (x, lse, g) -> dx = g · exp(x − m) / sum(exp(x − m), −1) with m = max(x, −1), replaced by 0
/// where infinite: g times softmax(x), the backward of LogSumExp for the cotangent g. Its
/// fallback is exactly what LogSumExp's fallback graph differentiates to, so the special rows
/// keep those answers: a row of all −inf gives NaN (0 · g/0), a row holding +inf gives 0 for
/// its finite elements (NaN where exp(x) overflows, and at the +inf), a row holding NaN NaN.
/// lse must be LogSumExp's output for x: the kernels shift the exponentials by it instead of
/// m (no max pass) and renormalise by their sum, so its rounding (half types) cancels; where
/// lse is ±inf they shift by 0 as the fallback does, and a finite lse too far off to shift by
/// (a sum outside [2^-32, 2^32]: |lse| >= 2^15 in bfloat16) makes them shift by m after all.
/// The fallback differentiates to 0 for lse. Shapes: x (..., n), lse and g (..., 1); dx like x.
/// Dtypes: one real floating dtype for all three and dx; half types compute in float32 and
/// round once, float64 in float64. Throws: std::invalid_argument from the kernels for a dtype
/// other than real floating (LogSumExp records the node only for those). Source: MLX's
/// LogSumExp::vjp (g · softmax(x)). Runs: per row, the sum then the write (CPU,
/// src/backend/cpu/fast/logsumexp.cpp; GPU, src/backend/cuda/fast/softmax_vjp.cu: the row in
/// registers, else streamed twice). Rules from the fallback.
class LogSumExpVjp : public fast::FastPrimitive {
 public:
  explicit LogSumExpVjp(Stream stream);

  NUVEC_FAST_PRIMITIVE()
};

} // namespace nuvec
