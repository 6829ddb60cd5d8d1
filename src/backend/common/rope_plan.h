// nuvec: the plan of a Rope or NormRope evaluation, shared by the CPU loop
// (src/backend/cpu/fast/rope.cpp) and the CUDA kernels (src/backend/cuda/fast/rope.cu): x's
// rows as [B, M, T, D], where each row's output goes, the rotation's constants, the units a
// row splits into for vector loads, and the copy of the cache positions NormRope leaves
// unchanged. The element rules are math/rope.h; the primitives build their plans from
// rope_plan (Rope::plan, NormRope::plan).
#pragma once

#include <cstdint>

#include "backend/common/math/config.h"
#include "backend/common/math/rope.h"
#include "backend/common/strided.h"
#include "nuvec/array.h"

namespace nuvec {

/// One evaluation of Rope or NormRope. Row (b, m, t) of x (x as [B, M, T, D], M the product
/// of the middle axes) is at (b·M + m)·T + t and goes to output row (b·M + m)·out_t_len +
/// out_t0 + t; it is at position offsets[b] (per_batch_offset), offsets[0], or `offset`
/// when the kernel gets no offsets array. Pairs (i, i + dims/2), or (2i, 2i + 1) when
/// `traditional`, are rotated by (position · scale) · inv_freq_i (math/rope.h); with
/// `normalise`, each row is first RMS-normalised with eps (and the weight, when given).
struct RopePlan {
  int64_t batch = 0, heads = 0, t_len = 0;
  int d = 0, dims = 0, half = 0;
  bool traditional = false, forward = true;
  float log_base_over_half = 0.0f, scale = 1.0f;
  bool per_batch_offset = false;
  int32_t offset = 0;
  int64_t out_t_len = 0, out_t0 = 0;
  bool normalise = false;
  float eps = 0.0f;

  NUVEC_HD int64_t rows() const { return batch * heads * t_len; }
  NUVEC_HD int64_t in_row(int64_t b, int64_t m, int64_t t) const { return (b * heads + m) * t_len + t; }
  NUVEC_HD int64_t out_row(int64_t b, int64_t m, int64_t t) const {
    return (b * heads + m) * out_t_len + out_t0 + t;
  }
};

/// Rope's plan for x of shape [B, ..., T, D]: output rows laid out as x's, the offsets read
/// from an array (the caller sets per_batch_offset when it holds one per batch row), no norm.
/// NormRope's plan sets its own offset, output rows and norm on it.
inline RopePlan rope_plan(const Shape& x, int dims, bool traditional, float base, float scale, bool forward) {
  RopePlan p;
  const int nd = static_cast<int>(x.size());
  p.batch = x[0];
  p.t_len = x[nd - 2];
  p.d = x[nd - 1];
  p.heads = 1;
  for (int i = 1; i < nd - 2; ++i) p.heads *= x[i];
  p.dims = dims;
  p.half = dims / 2;
  p.traditional = traditional;
  p.forward = forward;
  p.log_base_over_half = math::rope_log_base_over_half(base, p.half);
  p.scale = scale;
  p.out_t_len = p.t_len;
  return p;
}

/// Units of a row of d features for vectors of w elements (w = 1, or even with
/// rope_vectors_fit): a unit is 2w features whose w pairs have consecutive frequency
/// indices. Traditional: features [2uw, 2uw + 2w). Halves: the first dims/(2w) units pair
/// features [uw, uw + w) with [dims/2 + uw, ...), the rest hold the features past dims, 2w
/// each (the last may hold w).
NUVEC_HD inline int rope_units(int d, int dims, bool traditional, int w) {
  if (traditional) return (d + 2 * w - 1) / (2 * w);
  return dims / 2 / w + (d - dims + 2 * w - 1) / (2 * w);
}

/// Whether rows of d features split into whole w-element vectors without a pair crossing
/// one: d and the rotated block (dims, traditional) or each half (dims/2) multiples of w.
inline bool rope_vectors_fit(int d, int dims, bool traditional, int w) {
  return d % w == 0 && (traditional ? dims : dims / 2) % w == 0;
}

/// Units a lane of NormRope's GPU kernel may hold (P), lanes per row (a warp), and so the
/// units a row of the fused kernel may have.
inline constexpr int kNormRopeUnitsPerLane = 4;
inline constexpr int kNormRopeMaxUnits = 32 * kNormRopeUnitsPerLane;

/// Whether NormRope's kernels cover rows of d features of `itemsize`-byte elements when
/// they normalise: 16-byte vectors fit (rope_vectors_fit) and a warp holds the row's units
/// (about 256 vectors: D up to 2048 half-type, 1024 float32 or 512 float64 features).
inline bool norm_rope_kernel_covers(int d, int dims, bool traditional, size_t itemsize) {
  const int w = static_cast<int>(16 / itemsize);
  return rope_vectors_fit(d, dims, traditional, w) && rope_units(d, dims, traditional, w) <= kNormRopeMaxUnits;
}

/// A backend's copy of a strided region (cpu::copy_elements or cu::copy_elements).
using CopyElements =
    void (*)(const void*, Dtype, const Strides&, void*, Dtype, const Strides&, const Shape&);

/// Copies the positions of `cache` [B, H, Lmax, D] that NormRope does not write, [0, offset)
/// and [offset + rows, Lmax), from src (the cache's first element, as `copy` addresses it) to
/// dst, a row-contiguous buffer of the cache's shape.
inline void copy_kept_cache(
    const array& cache,
    const void* src,
    void* dst,
    int64_t offset,
    int64_t rows,
    CopyElements copy) {
  const Shape& s = cache.shape();
  const Strides out_strides = row_strides(s);
  const int64_t item = static_cast<int64_t>(cache.itemsize());
  const int64_t spans[2][2] = {{0, offset}, {offset + rows, s[2]}};
  for (const auto& span : spans) {
    if (span[1] <= span[0] || cache.size() == 0) continue;
    const Shape window = {s[0], s[1], static_cast<int32_t>(span[1] - span[0]), s[3]};
    copy(static_cast<const char*>(src) + span[0] * cache.strides()[2] * item, cache.dtype(), cache.strides(),
         static_cast<char*>(dst) + span[0] * out_strides[2] * item, cache.dtype(), out_strides, window);
  }
}

} // namespace nuvec
