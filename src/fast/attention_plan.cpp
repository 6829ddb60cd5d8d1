// nuvec: the attention planner (see attention_plan.h). Every number here is a decision a
// test can read back through plan_attention.
#include "fast/attention_plan.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/env_switch.h"

namespace nuvec::fast {

namespace {

bool half_or_float(Dtype dt) {
  return dt == float16 || dt == bfloat16 || dt == float32;
}

bool vector_size(int64_t d) {
  return d == 64 || d == 80 || d == 96 || d == 128 || d == 256;
}

} // namespace

bool vector_head(int64_t d, int64_t dv) {
  return vector_size(d) && vector_size(dv);
}

bool tiled_head(int64_t d, int64_t dv, Dtype dtype) {
  return (dtype == float16 || dtype == bfloat16) && d == dv && (d == 64 || d == 80 || d == 96 || d == 128 || d == 256);
}

bool hopper_head(int64_t d, int64_t dv, Dtype dtype) {
  return (dtype == float16 || dtype == bfloat16) && d == dv && (d == 64 || d == 128 || d == 256);
}

bool hopper_covers(const RouteKey& key) {
  return hopper_head(key.d, key.dv, key.dtype) && !key.has_mask && key.lk > 0 && (!key.causal || key.lq <= key.lk);
}

bool hopper_forward_enabled() {
  // On by default since it passed its GPU tests (fast_attention_hopper_test, compute-sanitizer
  // memcheck/racecheck) on the H200; NUVEC_ATTENTION_HOPPER=0 keeps the mma.sync kernel.
  return env_switch("NUVEC_ATTENTION_HOPPER", true);
}

bool cpu_fused_dtype(Dtype dtype) {
  return half_or_float(dtype);
}

std::pair<int, int> vector_schedule(const RouteKey& key) {
  // (Body by the decode-kernel helper; the kernel: src/backend/cuda/fast/attention_vector.cu.)
  // The float16 / bfloat16 decode kernel keeps two blocks of 4 warps on each multiprocessor
  // for heads up to 128 (96 KB of shared memory each; every warp has 16 KB of K and V in
  // flight), one block per (batch row, key head). From one block per multiprocessor on, one
  // pass keeps HBM busy: the blocks run at once and stream at the rate of their copies in
  // flight, so they end together, and a second pass only adds a launch and a wave (H200, bf16
  // B32 Hq32 Hkv8 D128 Lk 8192: one pass 253 us = 4.2 TB/s, two passes of 2 to 8 key blocks
  // 265 to 297 us). Below that, the keys split so that the first pass fills the resident slots
  // (two per multiprocessor) once, each key block over at least 64 keys (one 16-key step for
  // each of a block's 4 warps). A block's fixed costs (loading its queries, filling its
  // queues, merging its warps, writing its partial state) are worth a few hundred keys of
  // streaming, but below one block per multiprocessor the call is bound by latency, not by
  // bandwidth: a block's warps walk their keys a queue step at a time, each step waiting on
  // HBM (and, paged, on the block table first), so fewer keys a block is a shorter call.
  // (H200, paged decode of one sequence, Hkv 8, ~540 keys: at least 512 keys a block gave 2
  // blocks a head and 23.5 us a call, ncu.)
  const int64_t base = key.b * key.hkv;
  const int64_t sms = std::max(key.sm_count, 1);
  if (base >= sms) return {1, 1};
  const int64_t want = (2 * sms + base - 1) / base;
  const int64_t most = key.lk / 64;
  const int64_t blocks = std::min({want, most, int64_t(1024)});
  return blocks >= 2 ? std::pair{2, static_cast<int>(blocks)} : std::pair{1, 1};
}

AttentionPlan plan(const RouteKey& key) {
  AttentionPlan p;
  const int64_t rows_total = key.b * key.hq * key.lq;
  const size_t item = size_of(key.dtype);
  const size_t out_bytes = size_t(rows_total) * size_t(key.dv) * item;
  const bool empty = rows_total == 0 || key.lk == 0 || key.d == 0 || key.dv == 0;
  const bool causal_fits = !key.causal || key.lq <= key.lk;
  if (!empty && key.gpu && half_or_float(key.dtype)) {
    if (key.lq <= 8 && key.lq <= key.lk && vector_head(key.d, key.dv)) {
      const auto [passes, blocks] = vector_schedule(key);
      p.route = AttentionRoute::Vector;
      p.passes = passes;
      p.key_blocks = blocks;
      // Two passes keep (max, sum, unnormalised output) per query row and key block.
      p.scratch_bytes = passes == 2 ? size_t(rows_total) * size_t(blocks) * size_t(key.dv + 2) * 4 : 0;
      p.max_intermediate_bytes = out_bytes;
      return p;
    }
    if (tiled_head(key.d, key.dv, key.dtype) && causal_fits) {
      p.route = AttentionRoute::Tiled;
      p.warp_specialized = key.hopper && hopper_covers(key);
      p.max_intermediate_bytes = out_bytes;
      return p;
    }
  }
  if (!empty && !key.gpu && cpu_fused_dtype(key.dtype)) {
    p.route = AttentionRoute::Tiled;
    p.max_intermediate_bytes = out_bytes;
    return p;
  }
  // Composed: the score block of `rows` query rows is the largest intermediate, and about
  // kComposedLiveScores of them are live at once.
  p.route = AttentionRoute::Composed;
  const size_t per_row = size_t(std::max<int64_t>(key.b * key.hq, 1)) * size_t(std::max<int64_t>(key.lk, 1)) *
      std::max<size_t>(item, 4);
  const int64_t fit = static_cast<int64_t>(key.cap / (per_row * kComposedLiveScores));
  p.query_rows = static_cast<int>(std::clamp<int64_t>(fit, 1, std::max<int64_t>(key.lq, 1)));
  p.capped = p.query_rows < key.lq;
  p.max_intermediate_bytes = std::max(per_row * size_t(p.query_rows), out_bytes);
  return p;
}

} // namespace nuvec::fast
