// nuvec: the Rope fused primitive (rotary position embeddings, shared/seeds/001; MLX's
// fast::rope). Op, fallback graph and rules in src/fast/rope.cpp; kernels in
// src/backend/cpu/fast/rope.cpp and src/backend/cuda/fast/rope.cu (their shared element rules
// in src/backend/common/math/rope.h, their plan in src/backend/common/rope_plan.h), tested
// against the fallback (tests/fast_rope_test.cpp).
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

struct RopePlan;

/// (x [B, ..., T, D] real floating, offset int32 (a scalar or [B]) [, freqs float32
/// [dims / 2]]) -> x with its first `dims` features of row (b, ..., t) rotated pairwise by
/// theta_i = (t + offset[b]) · scale · inv_freq_i, inv_freq_i = base^(−i / (dims/2)) or
/// 1 / freqs_i. Pairs are (i, i + dims/2), or (2i, 2i + 1) when `traditional`. cos and sin are
/// rounded to x's dtype and the rotation runs in it, as the fallback graph does (the seed's
/// rope_graph). `forward` false is the inverse rotation, which is the vjp. vmap keeps the
/// kernel for a scalar offset and a batch axis off the last two. Kernels: the CPU loop over
/// rows; on the GPU one thread per 16-byte vector pair of a (b, t) applying its angles to a
/// chunk of the middle axes (a scalar path for rows that do not split into vectors).
class Rope : public fast::FastPrimitive {
 public:
  Rope(Stream stream, int dims, bool traditional, float base, float scale, bool forward);
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<int, bool, float, float, bool> state() const {
    return {dims_, traditional_, base_, scale_, forward_};
  }
  /// The kernels' plan for an input of shape x (offsets: one scalar until the kernel sets
  /// per_batch_offset).
  RopePlan plan(const Shape& x) const;

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()

 private:
  int dims_;
  bool traditional_;
  float base_; // unused when freqs are given
  float scale_;
  bool forward_;
};

} // namespace nuvec
