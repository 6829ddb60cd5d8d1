// nuvec: the NormRope fused primitive (shared/seeds/001's norm_rope): rms_norm, rope and the
// cache write of an attention layer's queries or keys in one pass. Op, fallback graph (the
// composition of the RmsNorm and Rope nodes and a slice_update) and rules in
// src/fast/norm_rope.cpp; kernels beside Rope's (src/backend/cpu/fast/rope.cpp,
// src/backend/cuda/fast/rope.cu), tested against the fallback (tests/fast_norm_rope_test.cpp).
#pragma once

#include <tuple>

#include "fast/fast_primitive.h"

namespace nuvec {

struct RopePlan;

/// (x [B, H, L, D] real floating, w (x's dtype: [D], or 0-d for no weight) [, freqs float32
/// [dims / 2]] [, cache [B, H, Lmax, D] of x's dtype] [, offsets int32 [1] or [B] when
/// `offsets`, with no cache: row (b, h, l) at position offsets[b or 0] + l instead of
/// offset + l]) -> each row of x RMS-normalised when
/// `normalise` (y = x / sqrt(mean(x²) + eps), rounded to the dtype, times w rounded), then
/// rotated as Rope at position offset + l (pairs (i, i + dims/2), or (2i, 2i + 1) when
/// `traditional`; inv_freq_i = base^(−i / (dims/2)) or 1 / freqs_i; position scaled by
/// `scale`); written into a copy of the cache at positions offset ... offset + L − 1 (output
/// [B, H, Lmax, D]), or returned (output [B, H, L, D]). Rules (vjp, jvp, vmap) from the
/// fallback, whose RmsNorm and Rope nodes have their own backward kernels. Kernels: the CPU
/// loop over rows; on the GPU a group of lanes per row (each holding 16-byte vectors of its
/// pairs) reducing the statistic across the group, the angles of a (b, l) computed once for a
/// chunk of heads; without `normalise`, Rope's GPU kernel with the cache's row mapping.
class NormRope : public fast::FastPrimitive {
 public:
  NormRope(
      Stream stream,
      bool normalise,
      float eps,
      int dims,
      bool traditional,
      float base,
      float scale,
      int offset,
      bool cache,
      bool offsets = false);
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<bool, float, int, bool, float, float, int, bool, bool> state() const {
    return {normalise_, eps_, dims_, traditional_, base_, scale_, offset_, cache_, offsets_};
  }
  /// Whether the offsets are an input (the last), one per batch row or one for all.
  bool has_offsets() const { return offsets_; }
  /// The kernels' plan for x [B, H, L, D] (and a cache of cache_len positions when cache).
  RopePlan plan(const Shape& x, int64_t cache_len) const;

  NUVEC_FAST_PRIMITIVE()

 private:
  bool normalise_;
  float eps_;
  int dims_;
  bool traditional_;
  float base_; // unused when freqs are given
  float scale_;
  int offset_;
  bool cache_;
  bool offsets_;
};

} // namespace nuvec
