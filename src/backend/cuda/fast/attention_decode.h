// nuvec: the decode kernels' paged entry point (attention_vector.cu), called by
// cu::paged_attention (paged_attention.cu): paged decode runs the tensor-core decode kernel
// with K and V rows gathered through the block tables, so one kernel body serves
// scaled_dot_product_attention's decode and PagedAttention's.
#pragma once

#include <cstdint>

#include "backend/cuda/fast/attention.h"
#include "fast/attention.h"
#include "nuvec/dtype.h"

namespace nuvec::cu {

/// Query rows per key head ((Hq / Hkv) · L) up to which paged_attention_tc takes a call: one
/// warp chunk of two 8-row tiles, so each K and V row is read once; more rows (prefill) would
/// re-read the keys per chunk. (The op's routing of sinks and windows reads the same number:
/// fast::kPagedDecodeRows.)
inline constexpr int64_t kPagedRows = fast::kPagedDecodeRows;

/// PagedAttention on the tensor-core decode kernel (attention_vector.cu's tc kernel with the
/// paged key policy): out [B, Hq, L, D] = the paged attention of q [B, Hq, L, D] over the
/// caches [blocks, Hkv, block_size, D] through tables [B, max_blocks] and lengths [B] (all
/// row-contiguous, q and the caches 16-byte aligned; block_size a power of two, which
/// cu::paged_attention checks), with g.window and the sinks [Hq] (null: none) as
/// fast::paged_attention defines them. Float32 accumulation, weights rounded to the dtype for
/// P·V.
/// Returns false and launches nothing unless the dtype is float16 or bfloat16, D is 64, 128
/// or 256, (Hq / Hkv) · L <= kPagedRows and max_blocks · block_size <= 2^30; the caller then
/// runs its own kernel.
bool paged_attention_tc(Dtype dtype, const PagedGeometry& g, const void* q, const void* k_cache, const void* v_cache,
                        const int32_t* tables, const int32_t* lengths, const void* sinks, void* out);

} // namespace nuvec::cu
