// nuvec: the geometry of one fused attention call as the kernels see it (CPU and CUDA share
// it): sizes, element strides, and which keys a query sees. Host-free, header-only, usable
// in device code. The op and its meaning: src/fast/attention.h.
#pragma once

#include <cstdint>

#include "backend/common/math/config.h"

namespace nuvec::attention {

/// Sizes and element strides of q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv],
/// out [B, Hq, Lq, Dv] (row-contiguous), lse [B, Hq, Lq] (row-contiguous) and the mask
/// (broadcast to [B, Hq, Lq, Lk]: any strides, 0 along broadcast axes). The last axis of q,
/// k and v has stride 1 (the eval copies otherwise); the others may be any (a KV cache
/// sliced along L is read in place).
struct Geometry {
  int64_t b = 0, hq = 0, hkv = 0, lq = 0, lk = 0, d = 0, dv = 0;
  int64_t q_stride[3] = {0, 0, 0}; // b, h, l
  int64_t k_stride[3] = {0, 0, 0};
  int64_t v_stride[3] = {0, 0, 0};
  int64_t mask_stride[4] = {0, 0, 0, 0}; // b, h, i, j
  bool has_mask = false;
  bool bool_mask = false;
  bool has_sinks = false;
  bool causal = false;
  int window = 0; // 0: none (causal only)
  float scale = 1.0f;

  /// Query heads per key head.
  NUVEC_HD int64_t group() const { return hq / hkv; }
  /// Under causal: the last key query i sees (i + Lk − Lq; negative: none).
  NUVEC_HD int64_t last_key(int64_t i) const { return i + lk - lq; }
  /// The keys query i may see, [first, end): all Lk without causal; under causal the
  /// prefix up to last_key(i), cut to the window. Empty when the query sees nothing.
  NUVEC_HD void key_range(int64_t i, int64_t& first, int64_t& end) const {
    if (!causal) {
      first = 0;
      end = lk;
      return;
    }
    const int64_t last = last_key(i);
    end = last + 1 < lk ? (last + 1 > 0 ? last + 1 : 0) : lk;
    first = window > 0 && last - window + 1 > 0 ? last - window + 1 : 0;
    if (first > end) first = end;
  }
};

/// A row that sees no key (a causal row before the first key, or a bool mask false
/// across the row) means what the fallback gives: hidden scores become the dtype's lowest
/// value, so without sinks the row's softmax is uniform over all Lk keys (out_i = mean_j v_j,
/// lse_i = lowest + log Lk) and with a sink the sink takes all the mass (out_i = 0,
/// lse_i = sink). In the backward such a row gives dv_j += dout_i / Lk (no sinks) and
/// nothing to dq, dk (the where() cuts the scores' gradient). An additive mask of −inf across
/// a row gives NaN without sinks (the fallback's softmax of all −inf). Kernels skip hidden
/// keys and apply this rule when a row's visible count is 0.
/// lowest(dtype): −65504 for float16, −3.3895314e38 for bfloat16, −FLT_MAX for float32.
} // namespace nuvec::attention
