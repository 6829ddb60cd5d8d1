// nuvec: the CUDA attention kernels' entry points (one file each), called from the
// primitives' eval_gpu (src/backend/cuda/fast/attention.cu). Every launcher runs on
// cu::stream(), reads q, k, v (and the mask, sinks) through the strides of `g` (last axis
// contiguous) and writes out [B, Hq, Lq, Dv] and lse [B, Hq, Lq] float32 row-contiguous.
// Meaning: src/fast/attention.h; geometry and the no-visible-key rule:
// src/backend/common/attention.h.
#pragma once

#include "backend/common/attention.h"
#include "nuvec/dtype.h"

namespace nuvec::cu {

/// Device pointers of one attention call (mask and sinks null when absent). The mask is
/// bool (1 byte) or of the call's dtype; sinks of the call's dtype.
struct AttentionBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* mask = nullptr;
  const void* sinks = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
};

/// The decode kernels (Lq <= 8; attention_vector.cu): passes 1 (one block per key head and
/// batch row, all its query heads and queries) or 2 (key_blocks partial results, then a
/// combine), for float16, bfloat16, float32 and D, Dv in {64, 80, 96, 128, 256}.
void attention_vector(Dtype dtype, const attention::Geometry& g, const AttentionBuffers& buf, int passes, int key_blocks);

/// The tiled flash-attention forward on tensor cores (attention_tiled.cu), for the dtypes
/// and heads of fast::tiled_head.
void attention_tiled(Dtype dtype, const attention::Geometry& g, const AttentionBuffers& buf);

/// Whether the Hopper forward (attention_hopper.cu) covers a call: float16 or bfloat16,
/// D == Dv in {64, 128, 256}, no array mask, every query row sees a key (not causal, or
/// causal with Lq <= Lk), Lq and Lk under 2^30, and the b, h, l strides of q, k and v along
/// axes longer than 1 positive multiples of 8 elements (the TMA's 16-byte steps).
bool attention_hopper_covers(Dtype dtype, const attention::Geometry& g);

/// The warp-specialised flash-attention forward for sm_90a (attention_hopper.cu: TMA copies,
/// a producer and two consumer warpgroups, wgmma for Q Kᵀ and P V), writing what
/// attention_tiled writes. Calls it does not cover (attention_hopper_covers; q, k, v and out
/// 16-byte aligned; tensor maps the driver accepts), other devices and builds without sm_90a
/// code run attention_tiled.
void attention_hopper(Dtype dtype, const attention::Geometry& g, const AttentionBuffers& buf);

/// Pointers of the backward (attention_backward.cu): the forward's plus out, lse, dout
/// (row-contiguous like out) and the gradients (row-contiguous, the inputs' shapes; dsinks
/// [Hq] in the dtype, null when there are no sinks).
struct AttentionGradBuffers {
  AttentionBuffers fwd;
  const void* out = nullptr;
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* dsinks = nullptr;
};

/// The backward kernels (FlashAttention-2's: dq, dk, dv from scores recomputed with the
/// saved lse), for float16, bfloat16, float32.
void attention_backward(Dtype dtype, const attention::Geometry& g, const AttentionGradBuffers& buf);

/// Paged attention (paged_attention.cu): q [B, Hq, L, D] row-contiguous, caches
/// [blocks, Hkv, block_size, D] row-contiguous, tables [B, max_blocks] and lengths [B]
/// int32; out [B, Hq, L, D]; sinks [Hq] in the dtype or null. D 64/128/256, block_size a
/// power of two. With a window or sinks only the tensor-core decode kernel runs
/// (paged_attention_tc: float16 / bfloat16, (Hq / Hkv) · L <= kPagedRows); other calls with
/// them throw std::invalid_argument (the op routes those to its graph).
struct PagedGeometry {
  int64_t b = 0, hq = 0, hkv = 0, l = 0, d = 0;
  int64_t blocks = 0, block_size = 0, max_blocks = 0;
  float scale = 1.0f;
  int window = 0; // 0: none; else query l sees positions [e − window, e) of its end e
};
/// The attention::Geometry of a paged call's queries as the paged kernels read it: B, Hq,
/// Hkv, Lq = L, Lk = the capacity max_blocks · block_size, D = Dv, q row-contiguous, the
/// scale (the key rule, window and sinks are each kernel's own).
inline attention::Geometry paged_query_geometry(const PagedGeometry& pg) {
  attention::Geometry g;
  g.b = pg.b;
  g.hq = pg.hq;
  g.hkv = pg.hkv;
  g.lq = pg.l;
  g.lk = pg.max_blocks * pg.block_size;
  g.d = g.dv = pg.d;
  g.q_stride[0] = pg.hq * pg.l * pg.d;
  g.q_stride[1] = pg.l * pg.d;
  g.q_stride[2] = pg.d;
  g.scale = pg.scale;
  return g;
}

void paged_attention(Dtype dtype, const PagedGeometry& g, const void* q, const void* k_cache, const void* v_cache,
                     const int32_t* tables, const int32_t* lengths, const void* sinks, void* out);

/// Paged prefill on the Hopper forward (attention_hopper.cu's kernel reading K and V through
/// the block tables, a TMA box per cache block or per key tile of one: 128 positions, 64 at
/// D 256): PagedAttention
/// without window or sinks, float16 or bfloat16, D 64/128/256, power-of-two block sizes of
/// at least 8, q, the caches and out 16-byte aligned and row-contiguous. Rows that see nothing
/// get the mean of the gathered V rows from a second kernel (the paged rule). Returns false
/// and launches nothing where it does not apply (or on a device or build without sm_90a).
/// Positions past a sequence's length inside its last tile are read and weighted 0, as the
/// fallback's mask does (a NaN there reaches the output, as it does in the fallback).
bool attention_hopper_paged(Dtype dtype, const PagedGeometry& g, const void* q, const void* k_cache,
                            const void* v_cache, const int32_t* tables, const int32_t* lengths, void* out);

/// paged_write's scatter (paged_attention.cu): out already holds a copy of the cache; rows
/// values [n, Hkv, D] go to slots[n] (out-of-range slots skipped). Any dtype (by itemsize).
void paged_write(size_t itemsize, int64_t blocks, int64_t hkv, int64_t block_size, int64_t d, int64_t n,
                 const void* values, const int32_t* slots, void* out);

} // namespace nuvec::cu
