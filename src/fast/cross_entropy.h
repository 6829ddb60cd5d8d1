// nuvec: the CrossEntropy fused primitive and its backward, CrossEntropyVjp (shared/seeds/001).
// Op, fallbacks and rules in src/fast/cross_entropy.cpp; kernels in
// src/backend/cpu/fast/cross_entropy.cpp and src/backend/cuda/fast/cross_entropy.cu, tested
// against the fallbacks (tests/fast_cross_entropy_test.cpp).
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// The dtype cross_entropy's loss (and its statistics) take for logits of dtype dt:
/// float64 for float64 logits, float32 otherwise.
Dtype cross_entropy_dtype(Dtype dt);

} // namespace fast

/// (logits (..., C) real floating, targets (...) int32) -> loss (...) in
/// cross_entropy_dtype: logsumexp(logits) − logits[target] per row, a negative target
/// counting from the end; a target outside [−C, C) picks nothing (its loss is the
/// logsumexp). One read of the logits. vjp: CrossEntropyVjp (none for the targets); jvp
/// from the fallback; vmap keeps the kernel (trailing axis of the logits, batch axis moved
/// to the front of both inputs).
class CrossEntropy : public fast::FastPrimitive {
 public:
  explicit CrossEntropy(Stream stream);

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()
};

/// (logits, targets, loss, g) -> dlogits = g · (softmax(logits) − onehot(target)), in the
/// logits' dtype, in one pass: the softmax is exp(logits − lse) with lse = loss +
/// logits[target] from the forward's output, so no statistic is recomputed and the softmax
/// is never materialised. Its own rules come from its fallback.
class CrossEntropyVjp : public fast::FastPrimitive {
 public:
  explicit CrossEntropyVjp(Stream stream);

  NUVEC_FAST_PRIMITIVE()
};

} // namespace nuvec
