// nuvec: the CUDA kernels of PagedAttention and PagedWrite (vLLM's PagedAttention, Kwon et al.
// 2023; meaning, rules and fallbacks in src/fast/attention.{h,cpp}).
//
// Decode (float16 / bfloat16, (Hq / Hkv) · L <= 16) runs on the tensor-core decode kernel of
// attention_vector.cu with a paged addressing policy (attention_decode.h: paged_attention_tc);
// the kernel below serves the rest: float32 and prefill.
//
// paged_attention_kernel: one block of 128 threads per (sequence b, key head, chunk of up to RR
// query rows, split of the positions). A key head's query rows are its G = Hq / Hkv query heads
// times the L queries, ordered r = l · G + g, so every K and V row a block loads serves all of
// them (for decode, G · L <= 8, each K/V row is read once). The block walks its positions in
// tiles of 256:
//   1. scores: groups of TPR lanes (TPR · 16 bytes = one cache row, or 32 lanes) each take a
//      position, load its K row in 16-byte vectors (the block table gives the row's address,
//      looked up once per tile into shared memory), and dot it with the RR query rows held in
//      registers (pre-scaled by scale · log2(e), so that weights are exp2); a reduction over
//      the group's lanes (reduce_rows) finishes the RR dot products;
//   2. softmax: a warp per query row takes the tile's max, turns the scores into weights
//      exp2(s − max) in place and merges the tile into the row's running (max, sum) (the
//      online softmax, Milakov and Gimelshein 2018, with device/online_softmax.cuh's base-2
//      state helpers), whose factor rescales the accumulators;
//   3. values: the same groups load the V rows and accumulate p · v into per-thread float
//      accumulators, rescaled once a tile. The query slice (phase 1) and the accumulators
//      (phase 3) stay in shared memory between tiles, so that each phase's registers hold
//      the other's loads instead (8 KB of loads in flight per warp with 4 query rows).
// At the end the groups' accumulators are summed from shared memory.
// With one split the block writes out = acc / sum; with several (decode batches too small to
// fill the GPU: the planner below) each writes its partial (max, sum, acc) to scratch and
// paged_combine_kernel merges them, a warp per query row. Query row r of sequence b sees
// positions p < e_r = lengths[b] − L + 1 + l; a row with e_r <= 0 sees nothing and, as the
// fallback's bool mask gives, attends uniformly to all max_blocks · block_size gathered
// positions: the kernel gives it score 0 at every position (so weight 1 each).
// Positions past a block's last visible one are never read (a NaN in an unused cache slot
// cannot leak into an output, where the fallback's 0 · NaN would). Prefill (large L) runs the
// same kernel with more row chunks: correct, and each chunk stops at its last visible position,
// but every chunk re-reads its K and V (from L2 mostly). On Hopper (unless
// NUVEC_ATTENTION_HOPPER=0), float16 / bfloat16 prefill runs attention_hopper.cu's
// warp-specialised kernel through the block tables instead (attention_hopper_paged).
//
// paged_write_kernel: the cache is copied into the output first (copy_elements: one
// cudaMemcpyAsync for a dense cache), then every (row n, key head h) is copied to its slot in
// the widest vectors the row size and alignment allow. A slot given twice keeps the row of its
// last occurrence (a first kernel records the last n per slot with atomicMax; up to 256 rows,
// paged_write_small_kernel finds it in shared memory instead), so every slot holds one whole
// row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/fast/attention.h"
#include "backend/cuda/fast/attention_decode.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/attention.h"
#include "fast/attention_plan.h"

namespace nuvec {

namespace {

using cu::neg_inf;

constexpr int kThreads = 128;                 // threads of a paged attention block
constexpr int kWarps = kThreads / cu::kWarpSize;
constexpr int kTile = 256;                    // positions of one tile
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;

// How a block's threads cover the cache rows of element type T and head size D: a group of
// kLanes lanes holds one row, kVecs 16-byte vectors of kElems elements per lane (lane li holds
// vectors li + kLanes · v, so one load instruction of a group reads kLanes consecutive 16-byte
// vectors); the block holds kGroups rows at once and each group kPerGroup positions of a tile,
// U of them loaded before their first use: 16 / kVecs with 4 query rows (8 KB of loads in
// flight per warp, 16 warps an SM), 8 / kVecs with 8, whose larger register sets leave room
// for less (4 KB a warp, 12 warps an SM). HBM needs about 32 KB in flight per SM.
template <typename T, int D, int RR>
struct RowLayout {
  static constexpr int kElems = 16 / int(sizeof(T));
  static constexpr int kRowVecs = D / kElems;
  static constexpr int kLanes = kRowVecs < cu::kWarpSize ? kRowVecs : cu::kWarpSize;
  static constexpr int kVecs = kRowVecs / kLanes;
  static constexpr int kSlice = kVecs * kElems; // elements of a row one lane holds
  static constexpr int kGroups = kThreads / kLanes;
  static constexpr int kPerGroup = kTile / kGroups;
  static constexpr int kUnroll = (RR <= 4 ? 16 : 8) / kVecs;
  static_assert(D % kElems == 0 && kRowVecs % kLanes == 0 && kPerGroup % kUnroll == 0 && kSlice % 4 == 0);
  static_assert(RR % 4 == 0 && kLanes >= RR, "a group needs a lane for each query row");

  // Dynamic shared memory, in this order: the threads' accumulators between tiles
  // ([RR · kSlice / 4][kThreads] float4: thread-minor, so each thread's float4 accesses are
  // conflict-free), the scaled query rows [RR][D] float, the tile's scores [kTile][RR]
  // float (position-major: a thread reads a position's RR probabilities as RR / 4 float4),
  // and the tile's cache rows [2][kTile] int32 (double-buffered).
  static constexpr size_t kAccFloats = size_t(RR) * kSlice * kThreads;
  static constexpr size_t kQOffset = kAccFloats;
  static constexpr size_t kScoreOffset = kQOffset + size_t(RR) * D;
  static constexpr size_t kRowOffset = kScoreOffset + size_t(kTile) * RR;
  static constexpr size_t kSmemBytes = kRowOffset * sizeof(float) + 2 * kTile * sizeof(int32_t);
};

// The parameters of one paged attention launch (sizes as the kernels index them).
struct PagedParams {
  const void* q;
  const void* k;
  const void* v;
  const int32_t* tables;
  const int32_t* lengths;
  void* out;
  float* part_acc; // [B·Hq·L, splits, D] partial sums (several splits only)
  float2* part_ms; // [B·Hq·L, splits] partial (max, sum)
  int hq, hkv, group, l;
  int blocks, max_blocks, bs_log2;
  int cap;       // max_blocks · block_size: positions of a sequence
  int rows;      // group · l: query rows of a key head
  int chunks;    // row chunks of RR rows
  int splits;    // position splits (1: the block writes out)
  int split_len; // positions of a split (a multiple of kTile)
  float scale;   // the attention scale times log2(e)
};

// The last position (exclusive) query row `row` of a sequence with `len` (clamped) positions
// sees, or `cap` for a row that sees nothing (it attends uniformly to every position).
__device__ __forceinline__ int row_end(const PagedParams& p, int len, int row, bool& uniform) {
  const int e = len - p.l + 1 + row / p.group;
  uniform = e <= 0;
  return uniform ? p.cap : e;
}

__device__ __forceinline__ int clamped_length(const PagedParams& p, int b) {
  return ::min(::max(__ldg(p.lengths + b), 0), p.cap);
}

struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Plus {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Sums each of the RR values v[r] over the TPR lanes of a group (TPR >= RR, both powers of
// two) and returns row li / (TPR / RR)'s sum in lane li: log2(RR) halving steps (each lane
// keeps half its rows, the half its lane bit picks, and adds its partner's copy of them: RR − 1
// shuffles in all), then a butterfly over the remaining lanes of each row. RR + log2(TPR / RR)
// − 1 shuffles instead of the RR · log2(TPR) of a butterfly per row.
template <int RR, int TPR>
__device__ __forceinline__ float reduce_rows(float (&v)[RR], int li) {
#pragma unroll
  for (int k = 0; (RR >> k) > 1; ++k) {
    const int n = RR >> k, o = TPR >> (k + 1);
    const bool upper = (li & o) != 0;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = upper ? v[i] : v[i + n / 2];
      const float keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(kFull, send, o);
    }
  }
  float x = v[0];
#pragma unroll
  for (int o = TPR / RR / 2; o > 0; o >>= 1) x += __shfl_xor_sync(kFull, x, o);
  return x;
}

// Blocks an SM should hold (the register cap __launch_bounds__ derives: 128 a thread with 4
// query rows, 168 with 8): 16 or 12 warps, each with 8 KB or 4 KB of loads in flight.
template <int RR>
inline constexpr int kMinBlocks = RR <= 4 ? 4 : 3;

// The attention of up to RR query rows of one (sequence, key head) over one split of the
// positions; see the file comment. Grid: x = (b · Hkv + kv head) · chunks + chunk, y = split.
// The query slice (phase 1) and the accumulators (phase 3) live in registers only during
// their phase and in shared memory between tiles, so the registers of one phase hold the
// other phase's loads instead.
template <typename T, int D, int RR>
__global__ void __launch_bounds__(kThreads, kMinBlocks<RR>) paged_attention_kernel(const PagedParams p) {
  using Lay = RowLayout<T, D, RR>;
  constexpr int E = Lay::kElems, NV = Lay::kVecs, S = Lay::kSlice, TPR = Lay::kLanes;
  constexpr int U = Lay::kUnroll;
  extern __shared__ __align__(16) float smem[];
  float4* acc_s = reinterpret_cast<float4*>(smem);
  float* q_s = smem + Lay::kQOffset;
  float* sc = smem + Lay::kScoreOffset;
  int32_t* rows_s = reinterpret_cast<int32_t*>(smem + Lay::kRowOffset);
  __shared__ float run_m[RR], run_s[RR], alpha[RR];

  const int chunk = blockIdx.x % p.chunks;
  const int bh = blockIdx.x / p.chunks;
  const int kvh = bh % p.hkv, b = bh / p.hkv;
  const int tid = threadIdx.x, warp = tid / cu::kWarpSize, lane = tid % cu::kWarpSize;
  const int li = lane % TPR, gi = tid / TPR;

  // The rows' visible ends. The dot products' reduction leaves row li / (TPR / RR)'s score in
  // lane li (reduce_rows), so each lane keeps that row's end and flag.
  constexpr int kLanesPerRow = TPR / RR;
  const int my_row = li / kLanesPerRow;
  const int len = clamped_length(p, b);
  int chunk_end = 0, my_end = 0;
  bool my_uniform = false;
#pragma unroll
  for (int r = 0; r < RR; ++r) {
    const int row = chunk * RR + r;
    bool uniform = false;
    const int e = row < p.rows ? row_end(p, len, row, uniform) : 0;
    chunk_end = ::max(chunk_end, e);
    if (my_row == r) {
      my_end = e;
      my_uniform = uniform;
    }
  }
  const int start = blockIdx.y * p.split_len;
  const int stop = chunk_end - start < p.split_len ? chunk_end : start + p.split_len; // no int overflow
  if (start >= stop) return; // the whole block: no barrier reached yet

  // The query rows, as float times the scale (0 for rows past the last), and zero
  // accumulators.
  const T* q = static_cast<const T*>(p.q);
  for (int i = tid; i < RR * D; i += kThreads) {
    const int r = i / D, d = i % D, row = chunk * RR + r;
    float x = 0.0f;
    if (row < p.rows) {
      const int hq = kvh * p.group + row % p.group, l = row / p.group;
      x = cu::to_acc(q[((int64_t(b) * p.hq + hq) * p.l + l) * D + d]) * p.scale;
    }
    q_s[i] = x;
  }
  for (int i = tid; i < RR * S / 4 * kThreads; i += kThreads) acc_s[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (tid < RR) {
    run_m[tid] = neg_inf<float>();
    run_s[tid] = 0.0f;
  }

  // The cache row (block, kv head, slot) of each position of a tile; the caches hold fewer
  // than 2^31 rows (checked by the launcher).
  const int32_t* table = p.tables + int64_t(b) * p.max_blocks;
  const int slot_mask = (1 << p.bs_log2) - 1;
  auto fill_rows = [&](int tile, int buf) {
    for (int t = tid; t < kTile; t += kThreads) {
      const int pos = tile + t;
      int32_t row = 0;
      if (pos < stop) {
        const int id = ::min(::max(__ldg(table + (pos >> p.bs_log2)), 0), p.blocks - 1);
        row = ((id * p.hkv + kvh) << p.bs_log2) + (pos & slot_mask);
      }
      rows_s[buf * kTile + t] = row;
    }
  };
  fill_rows(start, 0);
  __syncthreads();

  const T* kc = static_cast<const T*>(p.k);
  const T* vc = static_cast<const T*>(p.v);
  int buf = 0;
  for (int tile = start; tile < stop; tile += kTile, buf ^= 1) {
    const int32_t* rows = rows_s + buf * kTile;
    // 1. Scores of the tile's positions into sc[t][r] (−inf where row r does not see them).
    {
      float qr[RR][S];
#pragma unroll
      for (int r = 0; r < RR; ++r) {
#pragma unroll
        for (int v = 0; v < NV; ++v) {
#pragma unroll
          for (int e = 0; e < E; e += 4) {
            const float4 x = *reinterpret_cast<const float4*>(q_s + r * D + (li + TPR * v) * E + e);
            qr[r][v * E + e] = x.x;
            qr[r][v * E + e + 1] = x.y;
            qr[r][v * E + e + 2] = x.z;
            qr[r][v * E + e + 3] = x.w;
          }
        }
      }
      for (int k0 = 0; k0 < Lay::kPerGroup; k0 += U) {
        cu::Packed<T, E> kv[U][NV];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int t = gi + Lay::kGroups * (k0 + u);
          const bool in = tile + t < stop;
          const T* kr = kc + int64_t(rows[t]) * D;
#pragma unroll
          for (int v = 0; v < NV; ++v) {
            if (in) kv[u][v] = cu::load_packed<E, cu::Load::ReadOnly>(kr + (li + TPR * v) * E);
            else kv[u][v] = cu::Packed<T, E>{};
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int t = gi + Lay::kGroups * (k0 + u);
          const int pos = tile + t;
          float part[RR];
#pragma unroll
          for (int r = 0; r < RR; ++r) part[r] = 0.0f;
#pragma unroll
          for (int v = 0; v < NV; ++v) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
              const float x = cu::acc_at(kv[u][v], e);
#pragma unroll
              for (int r = 0; r < RR; ++r) part[r] = fmaf(qr[r][v * E + e], x, part[r]);
            }
          }
          const float mine = reduce_rows<RR, TPR>(part, li);
          if (li % kLanesPerRow == 0) {
            const float s = pos >= stop || pos >= my_end ? neg_inf<float>() : my_uniform ? 0.0f : mine;
            sc[t * RR + my_row] = s;
          }
        }
      }
    }
    __syncthreads();

    // 2. Online softmax, a warp per row (the base-2 states of device/online_softmax.cuh):
    // the max over the running max and the tile, the scores replaced by their weights
    // exp2(s − max), the tile's sum merged into the running (max, sum), whose factor for the
    // accumulators goes to alpha[r].
    for (int r = warp; r < RR; r += kWarps) {
      constexpr int J = kTile / cu::kWarpSize;
      float x[J];
      float mx = run_m[r];
#pragma unroll
      for (int j = 0; j < J; ++j) {
        x[j] = sc[(lane + cu::kWarpSize * j) * RR + r];
        mx = fmaxf(mx, x[j]); // NaN scores lose the max and poison the sum instead
      }
      mx = cu::warp_allreduce(mx, cu::kWarpSize, Max{});
      float tile_m = mx, tile_l = 0.0f;
      cu::online_add_exp2(tile_m, tile_l, x);
      tile_l = cu::warp_allreduce(tile_l, cu::kWarpSize, Plus{});
      float m = run_m[r], l = run_s[r];
      const float2 f = cu::online_merge_exp2(m, l, tile_m, tile_l);
#pragma unroll
      for (int j = 0; j < J; ++j) sc[(lane + cu::kWarpSize * j) * RR + r] = x[j] * f.y;
      if (lane == 0) {
        run_m[r] = m;
        run_s[r] = l;
        alpha[r] = f.x;
      }
    }
    __syncthreads();

    // 3. Values: the next tile's cache rows into the other buffer, then
    // acc = acc · alpha + Σ p · v over this tile.
    if (tile + kTile < stop) fill_rows(tile + kTile, buf ^ 1);
    {
      float acc[RR][S];
#pragma unroll
      for (int r = 0; r < RR; ++r) {
        const float a = alpha[r];
#pragma unroll
        for (int s = 0; s < S; s += 4) {
          const float4 x = acc_s[(r * S + s) / 4 * kThreads + tid];
          acc[r][s] = x.x * a;
          acc[r][s + 1] = x.y * a;
          acc[r][s + 2] = x.z * a;
          acc[r][s + 3] = x.w * a;
        }
      }
      for (int k0 = 0; k0 < Lay::kPerGroup; k0 += U) {
        cu::Packed<T, E> vv[U][NV];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int t = gi + Lay::kGroups * (k0 + u);
          const bool in = tile + t < stop;
          const T* vr = vc + int64_t(rows[t]) * D;
#pragma unroll
          for (int v = 0; v < NV; ++v) {
            if (in) vv[u][v] = cu::load_packed<E, cu::Load::ReadOnly>(vr + (li + TPR * v) * E);
            else vv[u][v] = cu::Packed<T, E>{};
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int t = gi + Lay::kGroups * (k0 + u);
          float pr[RR];
#pragma unroll
          for (int r4 = 0; r4 < RR; r4 += 4) {
            const float4 w = *reinterpret_cast<const float4*>(sc + t * RR + r4);
            pr[r4] = w.x;
            pr[r4 + 1] = w.y;
            pr[r4 + 2] = w.z;
            pr[r4 + 3] = w.w;
          }
#pragma unroll
          for (int v = 0; v < NV; ++v) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
              const float x = cu::acc_at(vv[u][v], e);
#pragma unroll
              for (int r = 0; r < RR; ++r) acc[r][v * E + e] = fmaf(pr[r], x, acc[r][v * E + e]);
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < RR; ++r) {
#pragma unroll
        for (int s = 0; s < S; s += 4) {
          acc_s[(r * S + s) / 4 * kThreads + tid] = make_float4(acc[r][s], acc[r][s + 1], acc[r][s + 2], acc[r][s + 3]);
        }
      }
    }
    __syncthreads(); // sc, rows_s[buf] and acc_s are rewritten by the next tile
  }

  // The groups' accumulators summed: output element (r, d) of vector li + TPR · v, element e,
  // is accumulator r · S + v · E + e of the threads g · TPR + li.
  T* out = static_cast<T*>(p.out);
  for (int i = tid; i < RR * (D / 4); i += kThreads) {
    const int r = i / (D / 4), d = (i % (D / 4)) * 4;
    const int row = chunk * RR + r;
    if (row >= p.rows) continue;
    const int vi = d / E, s = (vi / TPR) * E + d % E;
    const float4* a = acc_s + (r * S + s) / 4 * kThreads + vi % TPR;
    float4 sum = a[0];
#pragma unroll
    for (int g = 1; g < Lay::kGroups; ++g) {
      const float4 x = a[g * TPR];
      sum.x += x.x;
      sum.y += x.y;
      sum.z += x.z;
      sum.w += x.w;
    }
    const int hq = kvh * p.group + row % p.group, l = row / p.group;
    const int64_t grow = (int64_t(b) * p.hq + hq) * p.l + l; // the output row
    if (p.splits == 1) {
      const float inv = 1.0f / run_s[r];
      cu::Vec<T, 4> o;
      o[0] = cu::store_as<T>(sum.x * inv);
      o[1] = cu::store_as<T>(sum.y * inv);
      o[2] = cu::store_as<T>(sum.z * inv);
      o[3] = cu::store_as<T>(sum.w * inv);
      cu::store_vec<4>(out + grow * D + d, o);
    } else {
      const int64_t part = grow * p.splits + blockIdx.y;
      *reinterpret_cast<float4*>(p.part_acc + part * D + d) = sum;
      if (d == 0) p.part_ms[part] = make_float2(run_m[r], run_s[r]);
    }
  }
}

// Merges the splits' partial results of each query row, a warp per row, in one pass: the
// base-2 states (max, sum) of the splits that saw some position of the row merged with
// online_merge_exp2, their accumulators rescaled by its factors; out = acc / sum.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) paged_combine_kernel(const PagedParams p, int64_t total_rows) {
  const int64_t grow = int64_t(blockIdx.x) * kWarps + threadIdx.x / cu::kWarpSize;
  const int lane = threadIdx.x % cu::kWarpSize;
  if (grow >= total_rows) return;
  const int l = int(grow % p.l);
  const int64_t bh = grow / p.l;
  const int hq = int(bh % p.hq), b = int(bh / p.hq);
  const int row = l * p.group + hq % p.group;
  bool uniform = false;
  const int end = row_end(p, clamped_length(p, b), row, uniform);
  const int n = (end + p.split_len - 1) / p.split_len; // splits holding a visible position
  constexpr int kPairs = D / 64;                       // float pairs of the row per lane
  float m = neg_inf<float>(), sum = 0.0f;
  float o[kPairs][2] = {};
  for (int i = 0; i < n; ++i) {
    const int64_t part = grow * p.splits + i;
    const float2 ms = p.part_ms[part];
    const float2 f = cu::online_merge_exp2(m, sum, ms.x, ms.y);
    const float* a = p.part_acc + part * D;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const float2 x = *reinterpret_cast<const float2*>(a + 2 * lane + 64 * j);
      o[j][0] = o[j][0] * f.x + x.x * f.y;
      o[j][1] = o[j][1] * f.x + x.y * f.y;
    }
  }
  const float inv = 1.0f / sum;
  T* out = static_cast<T*>(p.out) + grow * D;
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    cu::Vec<T, 2> v;
    v[0] = cu::store_as<T>(o[j][0] * inv);
    v[1] = cu::store_as<T>(o[j][1] * inv);
    cu::store_vec<2>(out + 2 * lane + 64 * j, v);
  }
}

// Splits of the positions: the fewest whose blocks fill the resident slots about as evenly
// as any count does (flash-attention's split heuristic, with the occupancy calculator's
// resident blocks as slots): efficiency = waves / ceil(waves), where waves = blocks / slots.
int choose_splits(int64_t work, int resident, int tiles) {
  const int max_splits = std::min(tiles, 64);
  if (work >= resident || max_splits <= 1) return 1;
  auto efficiency = [&](int n) {
    const int per = (tiles + n - 1) / n; // tiles of a split
    const int64_t blocks = work * ((tiles + per - 1) / per);
    const double waves = double(blocks) / resident;
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int n = 1; n <= max_splits; ++n) best = std::max(best, efficiency(n));
  for (int n = 1; n <= max_splits; ++n) {
    if (efficiency(n) >= 0.85 * best) return n;
  }
  return 1;
}

template <typename T, int D, int RR>
void launch_paged(PagedParams p, int64_t work, int tiles, int64_t total_rows) {
  constexpr size_t smem = RowLayout<T, D, RR>::kSmemBytes;
  // Blocks resident at once (the dynamic shared memory counted), after raising the kernel's
  // dynamic shared-memory limit past the default 48 KB where it needs more.
  static const int resident = [] {
    auto* kernel = paged_attention_kernel<T, D, RR>;
    NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    NUVEC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
    return std::max(per_sm, 1) * cu::device_props().multiProcessorCount;
  }();
  if (work > std::numeric_limits<int>::max()) {
    throw std::invalid_argument("[paged_attention] too many (sequence, head, row chunk) blocks for one launch.");
  }
  int splits = choose_splits(work, resident, tiles);
  const int per = (tiles + splits - 1) / splits;
  splits = (tiles + per - 1) / per;
  p.splits = splits;
  p.split_len = per * kTile;
  if (splits > 1) {
    const size_t parts = size_t(total_rows) * size_t(splits);
    p.part_acc = static_cast<float*>(cu::scratch(parts * D * sizeof(float) + parts * sizeof(float2)));
    p.part_ms = reinterpret_cast<float2*>(p.part_acc + parts * D);
  }
  paged_attention_kernel<T, D, RR><<<dim3(unsigned(work), unsigned(splits)), kThreads, smem, cu::stream()>>>(p);
  cu::check_launch("paged_attention_kernel");
  if (splits > 1) {
    const int64_t blocks = (total_rows + kWarps - 1) / kWarps;
    paged_combine_kernel<T, D><<<unsigned(blocks), kThreads, 0, cu::stream()>>>(p, total_rows);
    cu::check_launch("paged_combine_kernel");
  }
}

// The input as a row-contiguous device array whose data starts on a 16-byte boundary (the
// kernels load 16-byte vectors): the array itself when it already is, else a copy.
array aligned_rows(const array& a) {
  array c = cu::as_row_contiguous(a);
  if (c.size() > 0 && !cu::is_aligned(cu::device_ptr(c), 16)) c = cu::contiguous_copy(c);
  return c;
}

// The copy both write kernels share: word u of head h of row n goes to slot slot_of(n) (its
// block's [hkv, bs] rows), or nowhere when slot_of gives −1. One thread per word.
template <typename W, typename SlotOf>
__device__ __forceinline__ void copy_rows(const W* __restrict__ values, W* __restrict__ out, int64_t n, int64_t hkv,
                                          int64_t bs, int64_t units, const SlotOf& slot_of) {
  const int64_t total = n * hkv * units;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t u = i % units, nh = i / units;
    const int64_t h = nh % hkv, row = nh / hkv;
    const int64_t s = slot_of(row);
    if (s < 0) continue;
    const int64_t dst = ((s / bs) * hkv + h) * bs + s % bs;
    out[dst * units + u] = values[nh * units + u];
  }
}

// Records, for every slot in [0, cap), the last row n that writes it (winner starts at −1).
__global__ void paged_write_winner_kernel(const int32_t* __restrict__ slots, int64_t n, int64_t cap, int32_t* winner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int32_t s = slots[i];
    if (s >= 0 && s < cap) atomicMax(winner + s, int32_t(i));
  }
}

// Copies row (n, h) of values, `units` words W each, to its slot when n is the slot's last
// writer. One thread per word.
template <typename W>
__global__ void paged_write_kernel(
    const W* __restrict__ values,
    const int32_t* __restrict__ slots,
    const int32_t* __restrict__ winner,
    W* __restrict__ out,
    int64_t n,
    int64_t hkv,
    int64_t bs,
    int64_t cap,
    int64_t units) {
  copy_rows(values, out, n, hkv, bs, units, [&](int64_t row) {
    const int32_t s = slots[row];
    return s >= 0 && s < cap && winner[s] == row ? int64_t(s) : int64_t(-1);
  });
}

// paged_write_kernel for a few rows (n <= kSmallWrite), without the winner pass: each block
// reads the n slots into shared memory and marks the rows that are their slot's last writer
// (no later row names the same slot), then copies as paged_write_kernel does. One kernel
// instead of a memset of the pool's slot count and two kernels: decode steps write one row
// per sequence.
constexpr int kSmallWrite = 256;

template <typename W>
__global__ void paged_write_small_kernel(
    const W* __restrict__ values,
    const int32_t* __restrict__ slots,
    W* __restrict__ out,
    int n,
    int64_t hkv,
    int64_t bs,
    int64_t cap,
    int64_t units) {
  __shared__ int32_t s_slot[kSmallWrite];
  __shared__ bool s_last[kSmallWrite];
  for (int r = threadIdx.x; r < n; r += blockDim.x) s_slot[r] = slots[r];
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    bool last = s_slot[r] >= 0 && s_slot[r] < cap;
    for (int j = r + 1; j < n && last; ++j) last = s_slot[j] != s_slot[r];
    s_last[r] = last;
  }
  __syncthreads();
  copy_rows(values, out, n, hkv, bs, units, [&](int64_t row) { return s_last[row] ? int64_t(s_slot[row]) : int64_t(-1); });
}

} // namespace

namespace cu {

/// attention.h: PagedAttention's kernels. Decode in float16 / bfloat16 runs on the
/// tensor-core decode kernel (paged_attention_tc); otherwise picks RR (4 query rows a block, or 8 when a key
/// head has more), the splits, and launches paged_attention_kernel (and the combine).
void paged_attention(
    Dtype dtype,
    const PagedGeometry& g,
    const void* q,
    const void* k_cache,
    const void* v_cache,
    const int32_t* tables,
    const int32_t* lengths,
    const void* sinks,
    void* out) {
  const int64_t total_rows = g.b * g.hq * g.l;
  if (total_rows == 0 || g.d == 0) return;
  const int64_t cap = g.max_blocks * g.block_size;
  if (cap == 0) {
    // No positions: the fallback's softmax over nothing, times no values, is 0.
    NUVEC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(total_rows * g.d) * size_of(dtype), stream()));
    return;
  }
  if (!(g.d == 64 || g.d == 128 || g.d == 256) || g.block_size <= 0 || (g.block_size & (g.block_size - 1)) != 0) {
    throw std::invalid_argument(
        "[paged_attention] the CUDA kernels take head sizes 64, 128 or 256 and power-of-two block sizes; got D " +
        std::to_string(g.d) + ", block size " + std::to_string(g.block_size) + ".");
  }
  if (g.hkv <= 0 || g.hq % g.hkv != 0 || g.blocks <= 0 || cap > std::numeric_limits<int32_t>::max() - kTile ||
      g.blocks * g.hkv * g.block_size > std::numeric_limits<int32_t>::max() ||
      g.b * g.hkv > std::numeric_limits<int32_t>::max() || g.hq * g.l > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("[paged_attention] sizes out of the CUDA kernels' range.");
  }
  // Decode in float16 / bfloat16 (at most kPagedRows query rows a key head): the tensor-core
  // decode kernel with the paged key policy (attention_vector.cu); the rest (float32, prefill,
  // and anything it declines) runs paged_attention_kernel below.
  if (paged_attention_tc(dtype, g, q, k_cache, v_cache, tables, lengths, sinks, out)) return;
  if (sinks != nullptr || g.window > 0) {
    throw std::invalid_argument(
        "[paged_attention] sinks and windows run on the tensor-core decode kernel only (float16 or bfloat16, at most " +
        std::to_string(kPagedRows) + " query rows a key head); got " + std::to_string(g.hq / g.hkv * g.l) + " rows.");
  }
  // Prefill on Hopper (when its forward is enabled: fast::hopper_forward_enabled).
  if (fast::hopper_forward_enabled() &&
      attention_hopper_paged(dtype, g, q, k_cache, v_cache, tables, lengths, out)) {
    return;
  }
  PagedParams p{};
  p.q = q;
  p.k = k_cache;
  p.v = v_cache;
  p.tables = tables;
  p.lengths = lengths;
  p.out = out;
  p.hq = int(g.hq);
  p.hkv = int(g.hkv);
  p.group = int(g.hq / g.hkv);
  p.l = int(g.l);
  p.blocks = int(std::min<int64_t>(g.blocks, std::numeric_limits<int32_t>::max()));
  p.max_blocks = int(g.max_blocks);
  p.bs_log2 = 0;
  while ((int64_t(1) << p.bs_log2) < g.block_size) ++p.bs_log2;
  p.cap = int(cap);
  p.rows = p.group * p.l;
  p.scale = g.scale * kLog2e; // base-2 scores: the weights are exp2
  const int rr = p.rows <= 4 ? 4 : 8;
  p.chunks = (p.rows + rr - 1) / rr;
  const int64_t work = g.b * g.hkv * p.chunks;
  const int tiles = int((cap + kTile - 1) / kTile);
  dispatch_device_float_types(dtype, "paged_attention", [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("[paged_attention] the CUDA kernels take float16, bfloat16 or float32.");
    } else {
      auto by_rows = [&]<int D>() {
        if (rr == 4) launch_paged<T, D, 4>(p, work, tiles, total_rows);
        else launch_paged<T, D, 8>(p, work, tiles, total_rows);
      };
      if (g.d == 64) by_rows.template operator()<64>();
      else if (g.d == 128) by_rows.template operator()<128>();
      else by_rows.template operator()<256>();
    }
  });
}

/// attention.h: PagedWrite's scatter into `out` (already a copy of the cache).
void paged_write(
    size_t itemsize,
    int64_t blocks,
    int64_t hkv,
    int64_t block_size,
    int64_t d,
    int64_t n,
    const void* values,
    const int32_t* slots,
    void* out) {
  const int64_t cap = blocks * block_size;
  if (n == 0 || hkv == 0 || d == 0 || cap == 0) return;
  if (n > std::numeric_limits<int32_t>::max() || cap > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("[paged_write] more than 2^31 - 1 rows or slots.");
  }
  constexpr int kBlock = 256;
  static_assert(kBlock >= kSmallWrite / 4, "the small kernel's marking loop stays short");
  const size_t row_bytes = size_t(d) * itemsize;
  int32_t* winner = nullptr;
  if (n > kSmallWrite) {
    winner = static_cast<int32_t*>(scratch(size_t(cap) * sizeof(int32_t)));
    NUVEC_CUDA_CHECK(cudaMemsetAsync(winner, 0xff, size_t(cap) * sizeof(int32_t), stream())); // −1
    paged_write_winner_kernel<<<grid_for(size_t(n), kBlock), kBlock, 0, stream()>>>(slots, n, cap, winner);
    check_launch("paged_write_winner_kernel");
  }
  auto launch = [&]<typename W>() {
    const int64_t units = int64_t(row_bytes / sizeof(W));
    const unsigned grid = grid_for(size_t(n * hkv * units), kBlock);
    if (winner) {
      paged_write_kernel<W><<<grid, kBlock, 0, stream()>>>(static_cast<const W*>(values), slots, winner,
                                                           static_cast<W*>(out), n, hkv, block_size, cap, units);
      check_launch("paged_write_kernel");
    } else {
      paged_write_small_kernel<W><<<grid, kBlock, 0, stream()>>>(static_cast<const W*>(values), slots,
                                                                 static_cast<W*>(out), int(n), hkv, block_size, cap,
                                                                 units);
      check_launch("paged_write_small_kernel");
    }
  };
  auto fits = [&](size_t w) { return row_bytes % w == 0 && is_aligned(values, w) && is_aligned(out, w); };
  if (fits(16)) launch.template operator()<uint4>();
  else if (fits(8)) launch.template operator()<uint2>();
  else if (fits(4)) launch.template operator()<uint32_t>();
  else if (fits(2)) launch.template operator()<uint16_t>();
  else launch.template operator()<uint8_t>();
}

} // namespace cu

/// PagedAttention on the GPU: inputs made row-contiguous (and 16-byte aligned), then
/// cu::paged_attention (with the node's window and sinks).
void PagedAttention::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array q = aligned_rows(inputs[0]), k = aligned_rows(inputs[1]), v = aligned_rows(inputs[2]);
  const array tables = cu::as_row_contiguous(inputs[3]), lengths = cu::as_row_contiguous(inputs[4]);
  if (tables.dtype() != int32 || lengths.dtype() != int32 || k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    throw std::invalid_argument("[paged_attention] the kernel takes caches of q's dtype and int32 tables and lengths.");
  }
  void* out = cu::alloc_output(outputs[0]);
  if (outputs[0].size() == 0) return;
  cu::PagedGeometry g;
  g.b = q.shape(0);
  g.hq = q.shape(1);
  g.l = q.shape(2);
  g.d = q.shape(3);
  g.blocks = k.shape(0);
  g.hkv = k.shape(1);
  g.block_size = k.shape(2);
  g.max_blocks = tables.shape(1);
  g.scale = scale_;
  g.window = window_;
  std::optional<array> sinks;
  if (has_sinks_) {
    sinks = cu::as_row_contiguous(inputs[5]);
    if (sinks->dtype() != q.dtype()) throw std::invalid_argument("[paged_attention] the kernel takes sinks of q's dtype.");
  }
  cu::paged_attention(
      q.dtype(), g, cu::device_ptr(q), cu::device_ptr(k), cu::device_ptr(v), cu::device_ptr<int32_t>(tables),
      cu::device_ptr<int32_t>(lengths), sinks ? cu::device_ptr(*sinks) : nullptr, out);
}

/// PagedWrite on the GPU: the cache copied into the output (copy_elements), then
/// cu::paged_write's scatter.
void PagedWrite::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& cache = inputs[0];
  const array values = cu::as_row_contiguous(inputs[1]), slots = cu::as_row_contiguous(inputs[2]);
  if (slots.dtype() != int32 || values.dtype() != cache.dtype()) {
    throw std::invalid_argument("[paged_write] the kernel takes values of the cache's dtype and int32 slots.");
  }
  array& out = outputs[0];
  // The cache's own buffer when nothing else refers to it (a pool the caller replaces with
  // the result each step), else a copy.
  bool donated = false;
  void* dst = cu::donate_or_alloc_output(cache, out, &donated);
  if (out.size() == 0) return;
  if (!donated) {
    cu::copy_elements(
        cu::device_ptr(cache), cache.dtype(), cache.strides(), dst, out.dtype(), row_strides(cache.shape()),
        cache.shape());
  }
  if (values.size() == 0) return;
  cu::paged_write(
      out.itemsize(), cache.shape(0), cache.shape(1), cache.shape(2), cache.shape(3), values.shape(0),
      cu::device_ptr(values), cu::device_ptr<int32_t>(slots), dst);
}

} // namespace nuvec
