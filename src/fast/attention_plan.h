// nuvec: the attention planner (shared/seeds/001's attention_key and plan_attention): which
// route one scaled_dot_product_attention call takes, from its shapes, dtype, options and
// device. Pure arithmetic on shapes (no arrays), so plan_attention can answer without
// running anything and tests can check every decision. The routes: include/nuvec/fast.h
// (AttentionRoute); the kernels each route runs: src/fast/attention.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "nuvec/dtype.h"
#include "nuvec/fast.h"

namespace nuvec::fast {

/// The routing key of one call, validated.
struct RouteKey {
  int64_t b = 0, hq = 0, hkv = 0, lq = 0, lk = 0, d = 0, dv = 0;
  Dtype dtype = float32;
  bool causal = false;
  bool has_mask = false;
  bool bool_mask = false;
  bool has_sinks = false;
  int window = 0; // 0: none
  size_t cap = kDefaultMaxScoreBytes;
  bool cap_given = false;
  bool gpu = false;      // the call runs on the GPU
  int sm_count = 0;      // the GPU's multiprocessors (gpu only)
  bool hopper = false;   // a compute capability 9.0 GPU with the Hopper forward enabled
};

/// Head sizes the CUDA vector (decode) kernels cover: D and Dv each 64, 80, 96, 128 or 256.
bool vector_head(int64_t d, int64_t dv);
/// Whether the CUDA tiled (tensor-core) kernel covers the head sizes and dtype.
bool tiled_head(int64_t d, int64_t dv, Dtype dtype);
/// Whether the Hopper forward's kernels (src/backend/cuda/fast/attention_hopper.cu: dense and
/// paged) cover the head sizes and dtype: float16 or bfloat16, D == Dv in {64, 128, 256}.
bool hopper_head(int64_t d, int64_t dv, Dtype dtype);
/// Whether the Hopper forward (src/backend/cuda/fast/attention_hopper.cu) covers a tiled
/// call: float16 or bfloat16, D == Dv in {64, 128, 256}, no array mask, and every query row
/// sees a key (not causal, or causal with Lq <= Lk). (Its launcher checks the strides too and
/// runs the mma.sync kernel where they do not fit the TMA.)
bool hopper_covers(const RouteKey& key);

/// Whether the Hopper forward may be planned (and paged prefill run on it):
/// unless NUVEC_ATTENTION_HOPPER=0 in the environment, read at each call (a getenv: tests
/// switch it).
bool hopper_forward_enabled();

/// Whether the CPU fused loop covers the dtype (float32, float16, bfloat16).
bool cpu_fused_dtype(Dtype dtype);

/// The vector kernels' schedule for a decode-shaped call on the GPU: {passes, key_blocks}.
/// One pass when B · Hkv >= the multiprocessor count; else two, the key blocks filling two
/// resident blocks per multiprocessor once, each over at least 512 keys.
std::pair<int, int> vector_schedule(const RouteKey& key);

/// Score-sized arrays the composed route holds at once (the scores, the masked scores, their
/// float32 copy, the probabilities): its query blocks are sized so that this many score
/// blocks fit under the cap.
inline constexpr int kComposedLiveScores = 4;

/// The plan of one call (route, passes, blocks, composed row blocks, bytes). Bytes of the
/// composed route: the score block B · Hq · rows · Lk · max(itemsize, 4) is the largest
/// intermediate; rows is the most that keeps kComposedLiveScores of them under the cap
/// (at least 1).
AttentionPlan plan(const RouteKey& key);

} // namespace nuvec::fast
