// nuvec: the CUDA decode attention kernels (cu::attention_vector; Lq <= 8 is what the planner
// sends here, any Lq works): float16, bfloat16, float32; D and Dv each 64, 80, 96, 128 or 256.
// Meaning: src/fast/attention.h (the fallback graph); geometry and the rule for rows that see
// no key: src/backend/common/attention.h.
//
// Decode is a stream over K and V (B·Hkv·Lk·(D + Dv) elements) with little arithmetic per
// element, so the design is about reading K and V once, with 16-byte copies, with enough of
// them in flight, and with few instructions per byte (a bf16 B32 Hq32 Hkv8 D128 Lk 8192 call
// reads 1.07 GB; at the H200's ~4 TB/s each multiprocessor must take a key every ~30 cycles).
//  - A block owns one (batch row, key head) and a contiguous range of its keys (all of them in
//    one pass; a key block of the split in two passes). It holds every query row that key head
//    serves: R = (Hq / Hkv) · Lq rows, so each K and V row crosses HBM once however many
//    query heads share it (grouped / multi-query attention).
//  - The rows go in chunks to warps: with few chunks, several warps share a chunk and split
//    its keys (interleaved steps); with more chunks than warps each warp takes whole chunks
//    and rounds of chunks follow each other.
//  - Each warp streams its own steps of K and V rows through a private queue in shared memory
//    (cp.async a few steps ahead: no registers held while the copies fly, no block barriers
//    in the key loop) and keeps its own online-softmax state (device/online_softmax.cuh, base
//    2: log2 e is folded into the scale, so a weight is one exp2) and output accumulators.
//  - float16 / bfloat16 (the tensor-core kernel, FlashInfer's "tensor cores for decode"):
//    a warp step is 16 keys. The rows are the mma's N side (8 a tile: one query head group of
//    GQA 4-8 in decode), the keys its M side: Sᵀ = K Qᵀ (K by ldmatrix from the queue, Q as
//    register fragments loaded once), the weights Pᵀ = exp2(Sᵀ · scale · log2 e − m) in the
//    accumulator layout move into the B-fragment layout with one movmatrix.trans per 8 keys,
//    and Oᵀ += Vᵀ Pᵀ (V by ldmatrix.trans). With D = Dv = 128 a key costs a warp about one
//    mma, one ldmatrix and one cp.async (~7 instructions in all; the CUDA-core loop below
//    took ~84, and ran at half the bandwidth on the H200); the queue's rows are swizzled
//    (16-byte chunk c of row r at c ^ (r mod 8)) so that ldmatrix's 8 row reads hit distinct
//    banks. Scores are float32 (q and k exact in the mma, float32 sums); P is rounded to the
//    dtype for Vᵀ Pᵀ, as the tiled kernel does.
//  - float32 (the CUDA-core kernel; tf32 would miss float32's accuracy): L lanes own one key
//    (a "key group"; 32 / L keys per warp at once): lane `sl` of a group handles 16-byte
//    vectors sl, sl + L, ... of the K row and of the V row, the matching slice of every query
//    row of the chunk (float32, pre-scaled by scale · log2 e, kept in shared memory and read
//    where used) and that slice of every row's output accumulator (registers). A step reduces
//    the per-lane partial dot products over the group by shuffles.
//  - At the end the warps of a chunk merge through shared memory, then one pass writes out
//    [B, Hq, Lq, Dv] and lse [B, Hq, Lq] (sinks enter here), or pass 1 of two writes (max,
//    sum, unnormalised output) per query row and key block to scratch and a combine kernel
//    merges the key blocks (sinks enter there, once).
// Hidden keys (causal, window, a false bool mask) weigh 0. A row that sees no key follows the
// rule: with sinks out 0 and lse = sink; without, out = the mean of V over all Lk keys and
// lse = lowest(dtype) + log Lk. A row "sees no key" when its merged state is still (−inf, 0):
// a visible key has a finite score unless an additive mask (never combined with causal; the
// fallback ignores a mask under causal) makes it −inf, so the test is skipped for additive
// masks, whose all −inf rows are NaN as the fallback's softmax makes them. The tiled kernel
// (attention_tiled.cu) decides the same way.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/fast/attention.h"
#include "backend/cuda/fast/attention_decode.h"
#include "backend/cuda/kernel_utils.cuh"
#include "fast/attention_plan.h"

namespace nuvec::cu {

namespace {

// Warps of the combine kernel (one query row each).
constexpr int kCombineWarps = 4;
constexpr int kCombineMaxBlocks = 1024; // the most key blocks vector_schedule gives
constexpr int kCombineUnroll = 8;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
// The weights' exp2 in the key loops: one ex2.approx.ftz (mma.cuh), about 2^-22 relative;
// flushing weights below 2^-126 to 0 changes nothing next to the max's weight of 1.
struct Exp2Approx {
  __device__ __forceinline__ float operator()(float x) const { return exp2_approx(x); }
};

// The dtype's lowest finite value: the fallback's hidden score (the no-visible-key rule's lse).
template <typename T>
constexpr float lowest_of() {
  if constexpr (std::is_same_v<T, __half>) return -65504.0f;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return -3.38953139e38f;
  else return -FLT_MAX;
}

// Everything a launch needs (passed by value; ~300 bytes of kernel parameters).
struct VectorArgs {
  attention::Geometry g;
  AttentionBuffers buf;
  // Two passes: (max, sum) and the unnormalised output of each query row and key block, at
  // [row · key_blocks + kb] and [(row · key_blocks + kb) · Dv + d] (rows in out's order).
  // Null in one pass.
  float2* part_ml = nullptr;
  float* part_o = nullptr;
  int key_blocks = 1;
  int rows = 0;     // query rows per key head: (Hq / Hkv) · Lq
  int chunks = 0;   // ceil(rows / the kernel's chunk rows)
  bool vec_k = false; // k's base and strides allow 16-byte copies
  bool vec_v = false;
  // The no-visible-key rule never applies: an additive mask (its all −inf rows are NaN), or a
  // paged call (its rows that see nothing attend uniformly inside the key loop).
  bool no_rule = false;
  // Paged calls (cu::paged_attention_tc): K and V rows gathered through the block tables
  // [B, max_blocks] from caches [blocks, Hkv, 2^bs_log2, D]; g.lk is max_blocks · block_size
  // (the gathered positions, `cap`), g.lq the queries L. Null tables: contiguous K and V.
  const int32_t* tables = nullptr;
  const int32_t* lengths = nullptr;
  int max_blocks = 0, cache_blocks = 0, bs_log2 = 0;
};

// Row r of the query rows of key head h: query head h · group + r / Lq, query r % Lq; its
// index among out's rows [B, Hq, Lq].
__device__ __forceinline__ int64_t out_row(const attention::Geometry& g, int64_t b, int64_t h, int64_t r) {
  return (b * g.hq + h * g.group()) * g.lq + r;
}

// The no-visible-key rule's output without sinks: the mean of column d of V over all Lk keys
// (v points at key 0, column d, of the row's key head). Only degenerate rows get here.
template <typename T>
__device__ float mean_over_keys(const T* v, int64_t stride, int64_t lk) {
  if (lk <= 0) return 0.0f;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t j = 0;
  for (; j + 4 <= lk; j += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) s[u] += to_acc(v[(j + u) * stride]);
  }
  for (; j < lk; ++j) s[0] += to_acc(v[j * stride]);
  return ((s[0] + s[1]) + (s[2] + s[3])) / static_cast<float>(lk);
}

// How a finished row is written: from its merged accumulators, as the rule's mean of V, or 0.
enum RowKind : int { kRowNormal = 0, kRowMean = 1, kRowZero = 2 };

// Which keys a row sees, as a template parameter so that plain decode (kAll) carries no per-row
// bounds or mask state in registers: every key of the block's range; the causal (and window)
// range of the row's query; a bool mask; an additive mask; the paged rule (below). The
// fallback ignores an array mask under causal, so the two never combine.
enum class Keys { kAll, kCausal, kBoolMask, kAddMask, kPaged };

// Paged attention's rule (src/fast/attention.h, PagedAttention): sequence b holds
// len = clamp(lengths[b], 0, cap) positions, and query i of its L sees positions
// p < len − L + 1 + i; a query whose end is <= 0 sees nothing and attends uniformly to all cap
// gathered positions (score 0 at each), as the fallback's all-false bool mask gives.
__device__ __forceinline__ int paged_length(const VectorArgs& a, int64_t b) {
  const int len = __ldg(a.lengths + b);
  return len < 0 ? 0 : (len > a.g.lk ? static_cast<int>(a.g.lk) : len);
}
__device__ __forceinline__ int paged_end(const VectorArgs& a, int len, int64_t i, bool& uniform) {
  const int64_t e = len - a.g.lq + 1 + i;
  uniform = e <= 0;
  return uniform ? static_cast<int>(a.g.lk) : static_cast<int>(e);
}

// A warp's merged state (ROWS query rows of its chunk), written over its queue once its keys
// are done.
template <int ROWS, int DVMAX>
struct MergeArea {
  float o[ROWS][DVMAX];
  float m[ROWS];
  float l[ROWS];
};

// The block's keys: all Lk, under causal the union of the rows' ranges (contiguous: the
// ranges move right by one key per query), or for a paged sequence its queries' union; cut
// into key_blocks equal parts, block kb takes part kb (maybe empty).
__device__ __forceinline__ void block_keys(const VectorArgs& a, int64_t b, int kb, int& kstart, int& kend) {
  const attention::Geometry& g = a.g;
  int64_t lo = 0, hi = g.lk;
  if (a.tables) { // paged: up to the last query's end (every position when a query sees nothing)
    // Query 0 sees the fewest; when it sees some, every query does and the last ends at len.
    // Under a window query 0's starts first (the later ones start later).
    const int len = paged_length(a, b);
    bool uniform;
    const int e0 = paged_end(a, len, 0, uniform);
    hi = uniform ? g.lk : len;
    if (!uniform && g.window > 0 && e0 - g.window > 0) lo = e0 - g.window;
  } else if (g.causal) {
    int64_t f, e;
    g.key_range(0, lo, e);
    g.key_range(g.lq - 1, f, hi);
    if (hi < lo) hi = lo;
  }
  const int64_t per = (hi - lo + a.key_blocks - 1) / a.key_blocks;
  kstart = static_cast<int>(std::min(lo + kb * per, hi));
  kend = static_cast<int>(std::min(lo + (kb + 1) * per, hi));
}

// The body of both kernels and both modes: one pass (part_ml null) writes out and lse; pass 1
// of two writes the key block's partial state. Block x = ((b · Hkv) + h) · key_blocks + kb.
// WARPS warps take chunks of ROWS query rows (several warps a chunk when the chunks are few);
// `pass(queue, r0, nrows, b, h, kstart, kend, split, splits)` runs one warp over its share of
// the keys and leaves its MergeArea<ROWS, DVMAX> at `queue` (its WARP_BYTES of `smem`).
template <typename T, int WARPS, int ROWS, int DVMAX, int WARP_BYTES, typename Pass>
__device__ __forceinline__ void run_block(const VectorArgs& a, char* smem, Pass&& pass) {
  static_assert(sizeof(MergeArea<ROWS, DVMAX>) <= WARP_BYTES, "a warp's merged state fits in its queue");
  constexpr int kThreads = WARPS * kWarpSize;
  const attention::Geometry& g = a.g;
  __shared__ int kind[WARPS * ROWS];
  const auto area = [&](int w) -> MergeArea<ROWS, DVMAX>& {
    return *reinterpret_cast<MergeArea<ROWS, DVMAX>*>(smem + w * WARP_BYTES);
  };
  const int kb = static_cast<int>(blockIdx.x % unsigned(a.key_blocks));
  const int64_t bh = blockIdx.x / unsigned(a.key_blocks);
  const int64_t h = bh % g.hkv;
  const int64_t b = bh / g.hkv;
  const bool one_pass = a.part_ml == nullptr;
  int kstart, kend;
  block_keys(a, b, kb, kstart, kend);

  const int warp = threadIdx.x / kWarpSize;
  const bool few = a.chunks <= WARPS;
  const int splits = few ? WARPS / a.chunks : 1; // warps per chunk
  const int rounds = few ? 1 : (a.chunks + WARPS - 1) / WARPS;
  const int dv = static_cast<int>(g.dv);
  for (int round = 0; round < rounds; ++round) {
    const int chunk0 = round * WARPS;
    const int nc = a.chunks - chunk0 < WARPS ? a.chunks - chunk0 : WARPS; // chunks this round
    const int cl = warp / splits;                                        // this warp's chunk
    if (cl < nc) {
      const int r0 = (chunk0 + cl) * ROWS;
      const int nrows = a.rows - r0 < ROWS ? a.rows - r0 : ROWS;
      pass(smem + warp * WARP_BYTES, r0, nrows, b, h, kstart, kend, warp % splits, splits);
    }
    __syncthreads();

    // Rows: merge the chunk's warps (cl · splits + [0, splits)), add the sink (one pass),
    // decide the row's kind, write lse or the partial (max, sum), and leave each warp's
    // factor in place of its max.
    for (int t = threadIdx.x; t < nc * ROWS; t += kThreads) {
      const int c = t / ROWS, rr = t % ROWS;
      const int r = (chunk0 + c) * ROWS + rr;
      if (r >= a.rows) continue;
      const int64_t row = out_row(g, b, h, r);
      float mx = -std::numeric_limits<float>::infinity();
      for (int k = 0; k < splits; ++k) mx = fmaxf(mx, area(c * splits + k).m[rr]);
      const float base = exp2_base(mx);
      float sum = 0.0f;
      for (int k = 0; k < splits; ++k) {
        auto& w = area(c * splits + k);
        const float f = exp2f(w.m[rr] - base);
        sum += w.l[rr] * f;
        w.m[rr] = f;
      }
      int rk = kRowNormal;
      if (one_pass) {
        const bool none = !a.no_rule && mx == -std::numeric_limits<float>::infinity() && sum == 0.0f;
        const int64_t hq = h * g.group() + r / g.lq;
        float lse;
        float scale = 1.0f;
        if (none) {
          rk = g.has_sinks ? kRowZero : kRowMean;
          lse = g.has_sinks ? to_acc(static_cast<const T*>(a.buf.sinks)[hq])
                            : lowest_of<T>() + logf(static_cast<float>(g.lk));
        } else {
          if (g.has_sinks) {
            const float sink = to_acc(static_cast<const T*>(a.buf.sinks)[hq]) * kLog2e;
            scale = online_merge_exp2(mx, sum, sink, 1.0f).x;
          }
          lse = (mx + log2f(sum)) * kLn2;
          scale /= sum;
        }
        if (a.buf.lse) a.buf.lse[row] = lse; // paged calls have no lse
        for (int k = 0; k < splits; ++k) area(c * splits + k).m[rr] *= scale;
      } else {
        a.part_ml[row * a.key_blocks + kb] = make_float2(mx, sum);
      }
      kind[c * ROWS + rr] = rk;
    }
    __syncthreads();

    // Elements: the factor-weighted sum of the chunk's warps' accumulators.
    for (int t = threadIdx.x; t < nc * ROWS * dv; t += kThreads) {
      const int c = t / (ROWS * dv);
      const int rr = (t / dv) % ROWS;
      const int d = t % dv;
      const int r = (chunk0 + c) * ROWS + rr;
      if (r >= a.rows) continue;
      const int64_t row = out_row(g, b, h, r);
      const int rk = kind[c * ROWS + rr];
      float val = 0.0f;
      if (rk == kRowNormal) {
        for (int k = 0; k < splits; ++k) {
          const auto& w = area(c * splits + k);
          val += w.o[rr][d] * w.m[rr];
        }
      } else if (rk == kRowMean) {
        const T* vcol = static_cast<const T*>(a.buf.v) + b * g.v_stride[0] + h * g.v_stride[1] + d;
        val = mean_over_keys(vcol, g.v_stride[2], g.lk);
      }
      if (one_pass) static_cast<T*>(a.buf.out)[row * dv + d] = store_as<T>(val);
      else a.part_o[(row * a.key_blocks + kb) * dv + d] = val;
    }
    __syncthreads(); // the next round reuses the shared memory
  }
}

// ---- float32: the CUDA-core kernel ----------------------------------------------------------
namespace simt {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
// Query rows a warp carries at once (their accumulators live in registers).
constexpr int kRows = 4;
// Steps of a warp's shared-memory queue: kStages - 1 steps of K and V in flight while one is
// computed on.
constexpr int kStages = 4;

// The per-lane layout of one kernel instance. W elements per 16-byte vector; a key group of
// L lanes holds a K row in NVK vectors per lane and a V row in NVV (vector k of a row on lane
// k % L, in slot k / L; slots past the row's D / W vectors stay zero). U keys per group and
// step: 2 / max(NVK, NVV), so that a step moves 3 or 4 vectors (48 or 64 bytes) per lane;
// the queue, not U, keeps loads in flight, and a small step keeps the scores in registers.
template <typename T, int L_, int NVK_, int NVV_>
struct Layout {
  static constexpr int W = kVec<T>;
  static constexpr int L = L_;
  static constexpr int NVK = NVK_;
  static constexpr int NVV = NVV_;
  static constexpr int EK = NVK * W; // q / k elements per lane
  static constexpr int EV = NVV * W; // v / output elements per lane
  static constexpr int KG = kWarpSize / L; // key groups per warp
  static constexpr int U = 2 / (NVK > NVV ? NVK : NVV);
  static constexpr int KPW = KG * U; // keys per warp step
  static constexpr int DVMAX = NVV * L * W;
  // One step's vectors of a warp in its shared-memory queue: [u][K vectors, V vectors][lane].
  static constexpr int kStepVectors = U * (NVK + NVV);
  static constexpr int kStageBytes = kStepVectors * kWarpSize * 16;
  // A warp's queue; after its keys, the same bytes hold its merged state (MergeArea).
  static constexpr int kWarpBytes = kStages * kStageBytes;
  // A warp's query slices, float32 [row][4-element group][lane of the key group].
  static constexpr int kQBytes = kRows * EK * L * 4;
  static constexpr int kSmemBytes = kWarps * (kWarpBytes + kQBytes);
  static_assert(L == 8 || L == 16 || L == 32, "a key group is 8, 16 or 32 lanes");
};

// Elements 2p and 2p + 1 of a packed vector as floats, read from its 32-bit words (a half
// pair converts with one instruction; extracting halves one by one first moved each into its
// own register). p must be a compile-time constant.
template <typename T, int N>
__device__ __forceinline__ float2 pair_at(const Packed<T, N>& v, int p) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h;
    memcpy(&h, reinterpret_cast<const char*>(&v.w) + p * 4, 4);
    return __half22float2(h);
  } else {
    return make_float2(acc_at(v, 2 * p), acc_at(v, 2 * p + 1));
  }
}

// The elements of a packed vector as floats, into f[0, N).
template <typename T, int N>
__device__ __forceinline__ void unpack(const Packed<T, N>& v, float* f) {
#pragma unroll
  for (int p = 0; p < N / 2; ++p) {
    const float2 x = pair_at(v, p);
    f[2 * p] = x.x;
    f[2 * p + 1] = x.y;
  }
}

// 16 bytes from shared memory (a shared address) as a packed vector.
template <typename T, int N>
__device__ __forceinline__ Packed<T, N> lds16(uint32_t addr) {
  static_assert(N * sizeof(T) == 16, "lds16: 16-byte vectors");
  Packed<T, N> r;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.w.x), "=r"(r.w.y), "=r"(r.w.z), "=r"(r.w.w)
               : "r"(addr));
  return r;
}

// Four floats from shared memory (a shared address); volatile, so that the compiler reads
// them where they are used instead of keeping every query slice in registers.
__device__ __forceinline__ float4 lds_f4(uint32_t addr) {
  float4 r;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "r"(addr));
  return r;
}

// Queues this lane's vectors of warp step `base` (keys base + u · KG + kg) into the stage at
// shared address `stage`: cp.async when the rows allow 16-byte copies (zero-filled past the
// block's keys or the row's vectors, nothing read), else element loads and a shared store
// (an unaligned strided view; the registers are free again before the compute). Commits
// one group, also when every copy is empty, so that group counts match steps.
template <typename T, typename S>
__device__ __forceinline__ void queue_step(
    uint32_t stage,
    int base,
    int kend,
    const T* kbase,
    const T* vbase,
    int64_t kstride,
    int64_t vstride,
    int nvk,
    int nvv,
    bool vec_k,
    bool vec_v) {
  const int lane = threadIdx.x % kWarpSize;
  const int kg = lane / S::L, sl = lane % S::L;
#pragma unroll
  for (int u = 0; u < S::U; ++u) {
    const int j = base + u * S::KG + kg;
    const bool in = j < kend;
#pragma unroll
    for (int v = 0; v < S::NVK + S::NVV; ++v) {
      const bool is_k = v < S::NVK;
      const int slot = sl + (is_k ? v : v - S::NVK) * S::L;
      const bool ok = in && slot < (is_k ? nvk : nvv);
      const T* src = ok ? (is_k ? kbase + j * kstride : vbase + j * vstride) + slot * S::W : kbase;
      const uint32_t dst = stage + ((u * (S::NVK + S::NVV) + v) * kWarpSize + lane) * 16;
      if (is_k ? vec_k : vec_v) {
        cp_async_16(dst, src, ok);
      } else {
        T e[S::W];
#pragma unroll
        for (int k = 0; k < S::W; ++k) e[k] = ok ? src[k] : T(0.0f);
        uint4 w;
        memcpy(&w, e, 16);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w)
                     : "memory");
      }
    }
  }
  cp_async_commit();
}

// One warp's pass over its keys for the rows [r0, r0 + nrows) of its chunk: warp step t covers
// keys kstart + (t · splits + split) · KPW + [0, KPW), its vectors queued kStages − 1 steps
// ahead in the warp's shared-memory queue (`queue`: kStages stages of kStageBytes), its query
// slices in `qs` (kQBytes). Leaves the warp's merged state (over its key groups) in the
// queue's bytes as a MergeArea.
template <typename T, typename S, Keys K>
__device__ __forceinline__ void warp_pass(
    const VectorArgs& a,
    char* queue,
    float* qs,
    int64_t* mask_off,
    int64_t b,
    int64_t h,
    int r0,
    int nrows,
    int kstart,
    int kend,
    int split,
    int splits) {
  const attention::Geometry& g = a.g;
  const int lane = threadIdx.x % kWarpSize;
  const int kg = lane / S::L;
  const int sl = lane % S::L;
  const int nvk = static_cast<int>(g.d / S::W);
  const int nvv = static_cast<int>(g.dv / S::W);
  const float qscale = g.scale * kLog2e;

  const T* kbase = static_cast<const T*>(a.buf.k) + b * g.k_stride[0] + h * g.k_stride[1];
  const T* vbase = static_cast<const T*>(a.buf.v) + b * g.v_stride[0] + h * g.v_stride[1];
  const int64_t kstride = g.k_stride[2], vstride = g.v_stride[2];
  const bool vec_k = a.vec_k, vec_v = a.vec_v;
  const uint32_t q0 = smem_addr(queue);
  const int first = kstart + split * S::KPW, step = splits * S::KPW;
  const int steps = first < kend ? (kend - first + step - 1) / step : 0;

  // Start the queue before anything else, so that the copies overlap the setup.
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    queue_step<T, S>(q0 + t * S::kStageBytes, first + t * step, kend, kbase, vbase, kstride, vstride, nvk, nvv, vec_k,
                     vec_v);
  }

  // The chunk's query slices (float32, pre-scaled by scale · log2 e; in shared memory, lanes
  // of one slice in different key groups write the same values), visible key bounds (causal)
  // and mask row offsets (in shared memory: read once a step).
  int rlo[kRows], rhi[kRows];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const bool valid = rr < nrows;
    const int64_t r = r0 + rr;
    const int64_t hq = h * g.group() + (valid ? r / g.lq : 0);
    const int64_t i = valid ? r % g.lq : 0;
    const T* qrow = static_cast<const T*>(a.buf.q) + b * g.q_stride[0] + hq * g.q_stride[1] + i * g.q_stride[2];
#pragma unroll
    for (int v = 0; v < S::NVK; ++v) {
      const int slot = sl + v * S::L;
#pragma unroll
      for (int e = 0; e < S::W; ++e) {
        const int x = v * S::W + e;
        qs[((rr * (S::EK / 4) + x / 4) * S::L + sl) * 4 + x % 4] =
            valid && slot < nvk ? to_acc(qrow[slot * S::W + e]) * qscale : 0.0f;
      }
    }
    if constexpr (K == Keys::kCausal) {
      rlo[rr] = 0;
      rhi[rr] = 0; // an invalid row sees nothing
      if (valid) {
        int64_t f, e;
        g.key_range(i, f, e);
        rlo[rr] = static_cast<int>(f > kstart ? f : kstart);
        rhi[rr] = static_cast<int>(e < kend ? e : kend);
      }
    }
    if constexpr (K == Keys::kBoolMask || K == Keys::kAddMask) {
      if (lane == rr) mask_off[rr] = b * g.mask_stride[0] + hq * g.mask_stride[1] + i * g.mask_stride[2];
    }
  }
  __syncwarp();
  const uint32_t qaddr = smem_addr(qs) + sl * 16;

  float m[kRows], l[kRows], o[kRows][S::EV];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    m[rr] = -std::numeric_limits<float>::infinity();
    l[rr] = 0.0f;
#pragma unroll
    for (int e = 0; e < S::EV; ++e) o[rr][e] = 0.0f;
  }

  // The step count is warp-uniform (every lane takes every step: the shuffles need the warp).
  for (int t = 0; t < steps; ++t) {
    const int base = first + t * step;
    // Queue step t + kStages - 1 into the stage step t - 1 used (its values were consumed
    // by this lane's own arithmetic, so its reads are done), then wait for step t's group.
    queue_step<T, S>(q0 + ((t + kStages - 1) % kStages) * S::kStageBytes, base + (kStages - 1) * step, kend, kbase,
                     vbase, kstride, vstride, nvk, nvv, vec_k, vec_v);
    cp_async_wait<kStages - 1>();
    const uint32_t stage = q0 + (t % kStages) * S::kStageBytes + lane * 16;

    // Partial dot products over this lane's slice (each query quad read once for the U
    // keys), then summed over the key group.
    float kf[S::U][S::EK];
#pragma unroll
    for (int u = 0; u < S::U; ++u) {
#pragma unroll
      for (int v = 0; v < S::NVK; ++v) {
        unpack(lds16<T, S::W>(stage + (u * (S::NVK + S::NVV) + v) * kWarpSize * 16), kf[u] + v * S::W);
      }
    }
    float s[kRows][S::U];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
#pragma unroll
      for (int u = 0; u < S::U; ++u) s[rr][u] = 0.0f;
      if (rr < nrows) {
#pragma unroll
        for (int e4 = 0; e4 < S::EK / 4; ++e4) {
          const float4 q4 = lds_f4(qaddr + (rr * (S::EK / 4) + e4) * S::L * 16);
#pragma unroll
          for (int u = 0; u < S::U; ++u) {
            s[rr][u] = fmaf(q4.x, kf[u][4 * e4], s[rr][u]);
            s[rr][u] = fmaf(q4.y, kf[u][4 * e4 + 1], s[rr][u]);
            s[rr][u] = fmaf(q4.z, kf[u][4 * e4 + 2], s[rr][u]);
            s[rr][u] = fmaf(q4.w, kf[u][4 * e4 + 3], s[rr][u]);
          }
        }
      }
    }
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      if (rr < nrows) {
#pragma unroll
        for (int off = S::L / 2; off > 0; off >>= 1) {
#pragma unroll
          for (int u = 0; u < S::U; ++u) s[rr][u] += __shfl_xor_sync(0xffffffffu, s[rr][u], off);
        }
      }
    }

    // Hidden keys (past the block's range, outside the row's causal range, or a false bool
    // mask) weigh 0; an additive mask adds to the score. Then the online softmax per row:
    // s becomes the weights, the accumulators are rescaled.
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      if (rr < nrows) {
#pragma unroll
        for (int u = 0; u < S::U; ++u) {
          const int j = base + u * S::KG + kg;
          bool vis;
          if constexpr (K == Keys::kCausal) vis = j >= rlo[rr] && j < rhi[rr];
          else vis = j < kend;
          float x = s[rr][u];
          if constexpr (K == Keys::kBoolMask || K == Keys::kAddMask) {
            const int64_t at = mask_off[rr] + j * g.mask_stride[3];
            if constexpr (K == Keys::kBoolMask) {
              if (vis) vis = static_cast<const uint8_t*>(a.buf.mask)[at] != 0;
            } else {
              if (vis) x += to_acc(static_cast<const T*>(a.buf.mask)[at]) * kLog2e;
            }
          }
          s[rr][u] = vis ? x : -std::numeric_limits<float>::infinity();
        }
        const float alpha = online_add_exp2(m[rr], l[rr], s[rr], Exp2Approx{});
        if (alpha != 1.0f) { // once the row's max settles, rarely (NaN rescales: it spreads)
#pragma unroll
          for (int e = 0; e < S::EV; ++e) o[rr][e] *= alpha;
        }
      }
    }

    // The weighted V rows into the accumulators, one key's converted elements at a time.
#pragma unroll
    for (int u = 0; u < S::U; ++u) {
      float vf[S::EV];
#pragma unroll
      for (int v = 0; v < S::NVV; ++v) {
        unpack(lds16<T, S::W>(stage + (u * (S::NVK + S::NVV) + S::NVK + v) * kWarpSize * 16), vf + v * S::W);
      }
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        if (rr < nrows) {
#pragma unroll
          for (int e = 0; e < S::EV; ++e) o[rr][e] = fmaf(s[rr][u], vf[e], o[rr][e]);
        }
      }
    }
  }
  // The queue's last groups are empty steps past the end; drain them before the bytes are
  // reused (every lane's, hence the warp barrier).
  cp_async_wait<0>();
  __syncwarp();

  // Merge the key groups of the warp (lanes sl, sl + L, ...: same slice, other keys).
#pragma unroll
  for (int off = S::L; off < kWarpSize; off <<= 1) {
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      if (rr < nrows) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m[rr], off);
        const float l2 = __shfl_xor_sync(0xffffffffu, l[rr], off);
        const float2 f = online_merge_exp2(m[rr], l[rr], m2, l2);
#pragma unroll
        for (int e = 0; e < S::EV; ++e) {
          const float o2 = __shfl_xor_sync(0xffffffffu, o[rr][e], off);
          o[rr][e] = o[rr][e] * f.x + o2 * f.y;
        }
      }
    }
  }
  auto& out = *reinterpret_cast<MergeArea<kRows, S::DVMAX>*>(queue);
  if (kg == 0) {
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      if (rr < nrows) {
#pragma unroll
        for (int v = 0; v < S::NVV; ++v) {
          const int slot = sl + v * S::L;
          if (slot < nvv) {
#pragma unroll
            for (int e = 0; e < S::W; ++e) out.o[rr][slot * S::W + e] = o[rr][v * S::W + e];
          }
        }
        if (sl == 0) {
          out.m[rr] = m[rr];
          out.l[rr] = l[rr];
        }
      }
    }
  }
}

// The float32 kernel (run_block with warp_pass). Dynamic shared memory: S::kSmemBytes (the
// warps' queues, then their merged states, and their query slices).
template <typename T, typename S, Keys K>
__global__ void __launch_bounds__(kThreads, 2) attention_vector_kernel(const VectorArgs a) {
  extern __shared__ __align__(16) char smem[];
  __shared__ int64_t mask_off[kWarps][kRows];
  const int warp = threadIdx.x / kWarpSize;
  run_block<T, kWarps, kRows, S::DVMAX, S::kWarpBytes>(
      a, smem, [&](char* queue, int r0, int nrows, int64_t b, int64_t h, int kstart, int kend, int split, int splits) {
        warp_pass<T, S, K>(a, queue, reinterpret_cast<float*>(smem + kWarps * S::kWarpBytes + warp * S::kQBytes),
                           mask_off[warp], b, h, r0, nrows, kstart, kend, split, splits);
      });
}

} // namespace simt

// ---- float16 / bfloat16: the tensor-core kernel ---------------------------------------------
namespace tc {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
// Keys a warp step: the M side of the mma tiles.
constexpr int kKeys = 16;

// A warp's queue for head sizes up to DMAX (64, 128 or 256): each stage holds one step's 16 K
// rows, then its 16 V rows, DMAX elements a row (16-byte chunk c of row r at chunk c ^ (r mod
// 8): ldmatrix reads 8 rows at one chunk, which then lie in 8 distinct bank quads). With
// DMAX <= 128 a warp's queue is 24 KB (two blocks of 96 KB a multiprocessor, each warp with
// 16 KB in flight: 128 KB a multiprocessor, about 4 us of its share of HBM); 256 takes 48 KB
// (one block). A lane copies chunk lane % kChunks of rows lane / kChunks + kRowsPerCopy · i.
template <int DMAX_>
struct Queue {
  static constexpr int DMAX = DMAX_;
  static constexpr int kPitch = DMAX * 2; // bytes of a shared row
  static constexpr int kChunks = DMAX / 8; // 16-byte chunks of a row
  static constexpr int kRowsPerCopy = kWarpSize / kChunks;
  static constexpr int kCopies = kKeys / kRowsPerCopy; // copies a lane a step, of K and of V each
  static constexpr int kTileBytes = kKeys * kPitch;
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kStages = DMAX == 64 ? 6 : 3;
  static constexpr int kWarpBytes = kStages * kStageBytes;
  static constexpr int kSmemBytes = kWarps * kWarpBytes;
  static constexpr int kMinBlocks = kSmemBytes <= 100 * 1024 ? 2 : 1;
  static_assert(DMAX == 64 || DMAX == 128 || DMAX == 256, "queue rows of 64, 128 or 256 elements");
};

// Transposes an 8x8 matrix of 16-bit pairs across the warp (lane l holds row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1, before and after): the accumulator layout of the weights Pᵀ
// (lane: one key, two rows) into the B-fragment layout (lane: one row, two keys).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// 16 bytes (8 elements) at src into the queue at shared address dst: cp.async when the rows
// allow 16-byte copies (zero-filled and nothing read when !valid), else element loads and a
// shared store (an unaligned strided view; synchronous).
template <typename T>
__device__ __forceinline__ void copy16(uint32_t dst, const T* src, bool valid, bool vec) {
  if (vec) {
    cp_async_16(dst, src, valid);
  } else {
    T e[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = valid ? src[k] : T(0.0f);
    uint4 w;
    memcpy(&w, e, 16);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w)
                 : "memory");
  }
}

// Where the K and V rows of key j of a warp's (batch row, key head) start: the addressing
// policy of the key loop. rows.step(first, last, kend) gives the addresser of one lane's
// rows of a step (keys first to last, 15 apart at most), called as at(j, in, kr, vr); `in`
// false (a key past the end, whose copy reads nothing) may leave any address.
// DenseRows: rows at element strides (scaled_dot_product_attention's K and V, any strided
// view). PagedRows: position j of a paged sequence lives in cache block
// tables[b, j / block_size] (clamped to [0, blocks)) at slot j % block_size.
template <typename T>
struct DenseRows {
  const T* k;
  const T* v;
  int64_t kstride, vstride;
  __device__ __forceinline__ const DenseRows& step(int, int, int) const { return *this; }
  __device__ __forceinline__ void operator()(int j, bool, const T*& kr, const T*& vr) const {
    kr = k + int64_t(j) * kstride;
    vr = v + int64_t(j) * vstride;
  }
};
template <typename T>
struct PagedRows {
  const T* k; // the caches offset to key head h's rows of block 0
  const T* v;
  const int32_t* table; // the sequence's row of the block tables
  int blocks, hkv, bs_log2, d;

  __device__ __forceinline__ int block_id(int j) const {
    return ::min(::max(__ldg(table + (j >> bs_log2)), 0), blocks - 1);
  }
  struct Step;
  __device__ __forceinline__ Step step(int first, int last, int kend) const;
};

// One lane's rows of a step. With blocks of 16 positions or more the rows lie in at most two
// consecutive blocks: two table lookups a step (the copies wait on them) instead of one a row.
template <typename T>
struct PagedRows<T>::Step {
  PagedRows p;
  int jb, id0, id1;
  bool two;
  __device__ __forceinline__ void operator()(int j, bool in, const T*& kr, const T*& vr) const {
    int64_t row = 0;
    if (in) {
      const int id = two ? ((j >> p.bs_log2) == jb ? id0 : id1) : p.block_id(j);
      row = (int64_t(id) * p.hkv << p.bs_log2) + (j & ((1 << p.bs_log2) - 1));
    }
    kr = p.k + row * p.d;
    vr = p.v + row * p.d;
  }
};

template <typename T>
__device__ __forceinline__ typename PagedRows<T>::Step PagedRows<T>::step(int first, int last, int kend) const {
  Step s{*this, first >> bs_log2, 0, 0, bs_log2 >= 4};
  if (s.two && first < kend) { // keys at or past kend are never addressed (nor looked up)
    const int end = last < kend ? last : kend - 1;
    s.id0 = block_id(first);
    s.id1 = (end >> bs_log2) == s.jb ? s.id0 : block_id(end);
  }
  return s;
}

// Queues keys j0 + [0, 16) of K and V (addressed by `rows`, a DenseRows or PagedRows) into
// the stage at shared address `stage` (rows at or past kend zero-filled: their weights are 0,
// and 0 · V must not meet stale NaN bytes; chunks past D / 8 or Dv / 8 are never read).
// Commits one group, also when every copy is empty, so that group counts match steps.
template <typename T, typename Q, typename Rows>
__device__ __forceinline__ void copy_step(
    uint32_t stage,
    int j0,
    int kend,
    const Rows& rows,
    int nck,
    int ncv,
    bool vec_k,
    bool vec_v) {
  const int lane = threadIdx.x % kWarpSize;
  const int c = lane % Q::kChunks, r0 = lane / Q::kChunks;
  static_assert((Q::kCopies - 1) * Q::kRowsPerCopy < kKeys, "a lane's rows of a step lie within 16 keys");
  const auto at = rows.step(j0 + r0, j0 + r0 + (Q::kCopies - 1) * Q::kRowsPerCopy, kend);
#pragma unroll
  for (int i = 0; i < Q::kCopies; ++i) {
    const int r = r0 + i * Q::kRowsPerCopy;
    const bool in = j0 + r < kend;
    const uint32_t dst = stage + r * Q::kPitch + ((c ^ (r & 7)) << 4);
    // A copy of source size 0 reads nothing, so the address past the keys is never used.
    const T* kr;
    const T* vr;
    at(j0 + r, in, kr, vr);
    if (c < nck) copy16(dst, kr + c * 8, in, vec_k);
    if (c < ncv) copy16(dst + Q::kTileBytes, vr + c * 8, in, vec_v);
  }
  cp_async_commit();
}

// One warp's pass over its keys for the rows [r0, r0 + nrows) of its chunk (8 NT rows, NT
// n-tiles): warp step t covers keys kstart + (t · splits + split) · 16 + [0, 16), queued
// kStages − 1 steps ahead. Fragment coordinates: gq = lane / 4, tq = lane % 4; the score
// accumulator s[nt][e] is key j0 + gq + 8 (e / 2) of row 8 nt + 2 tq + e % 2, and o[nt][dm][e]
// is column 16 dm + gq + 8 (e / 2) of that row. Leaves the warp's MergeArea in the queue.
template <typename T, typename Q, int NT, Keys K>
__device__ __forceinline__ void warp_pass(
    const VectorArgs& a,
    char* queue,
    int64_t b,
    int64_t h,
    int r0,
    int nrows,
    int kstart,
    int kend,
    int split,
    int splits) {
  constexpr int ROWS = 8 * NT;
  constexpr int NK = Q::DMAX / 16; // k-steps of Sᵀ and m-tiles of Oᵀ, at most
  const attention::Geometry& g = a.g;
  const int lane = threadIdx.x % kWarpSize;
  const int gq = lane / 4, tq = lane % 4;
  const int nks = static_cast<int>(g.d / 16), ndm = static_cast<int>(g.dv / 16);
  const int nck = static_cast<int>(g.d / 8), ncv = static_cast<int>(g.dv / 8);
  const auto rows = [&] {
    if constexpr (K == Keys::kPaged) {
      const int64_t head = h << a.bs_log2; // key head h's first row in a cache block
      return PagedRows<T>{static_cast<const T*>(a.buf.k) + head * g.d, static_cast<const T*>(a.buf.v) + head * g.d,
                          a.tables + b * a.max_blocks, a.cache_blocks, static_cast<int>(g.hkv), a.bs_log2,
                          static_cast<int>(g.d)};
    } else {
      return DenseRows<T>{static_cast<const T*>(a.buf.k) + b * g.k_stride[0] + h * g.k_stride[1],
                          static_cast<const T*>(a.buf.v) + b * g.v_stride[0] + h * g.v_stride[1], g.k_stride[2],
                          g.v_stride[2]};
    }
  }();
  const bool vec_k = a.vec_k, vec_v = a.vec_v;
  const uint32_t q0 = smem_addr(queue);
  const int first = kstart + split * kKeys, step = splits * kKeys;
  const int steps = first < kend ? (kend - first + step - 1) / step : 0;

  // Start the queue before anything else, so that the copies overlap the setup.
#pragma unroll
  for (int t = 0; t < Q::kStages - 1; ++t) {
    copy_step<T, Q>(q0 + t * Q::kStageBytes, first + t * step, kend, rows, nck, ncv, vec_k, vec_v);
  }

  // Qᵀ as B fragments: qf[nt][ks] = Q[row 8 nt + gq][16 ks + 2 tq + {0, 1}, + 8 + {0, 1}]
  // (rows past the chunk and columns past D zero). Element loads: q's rows need not be
  // 4-byte aligned, and this runs once.
  uint32_t qf[NT][NK][2];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int rr = 8 * nt + gq;
    const bool valid = rr < nrows;
    const int64_t r = r0 + (valid ? rr : 0);
    const int64_t hq = h * g.group() + r / g.lq, i = r % g.lq;
    const T* qrow = static_cast<const T*>(a.buf.q) + b * g.q_stride[0] + hq * g.q_stride[1] + i * g.q_stride[2];
#pragma unroll
    for (int ks = 0; ks < NK; ++ks) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int d = 16 * ks + 8 * hh + 2 * tq;
        T e[2] = {T(0.0f), T(0.0f)};
        if (valid && ks < nks) {
          e[0] = qrow[d];
          e[1] = qrow[d + 1];
        }
        memcpy(&qf[nt][ks][hh], e, 4);
      }
    }
  }
  // The score rows' visible key bounds (causal, paged), mask row offsets, and (paged) whether
  // the row sees nothing and so attends uniformly (score 0) to every position.
  int rlo[NT][2], rhi[NT][2];
  int64_t moff[NT][2];
  bool uni[NT][2];
  const int plen = K == Keys::kPaged ? paged_length(a, b) : 0;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int rr = 8 * nt + 2 * tq + e;
      const bool valid = rr < nrows;
      const int64_t r = r0 + (valid ? rr : 0);
      const int64_t hq = h * g.group() + r / g.lq, i = r % g.lq;
      rlo[nt][e] = rhi[nt][e] = 0; // an invalid row sees nothing
      uni[nt][e] = false;
      if constexpr (K == Keys::kPaged) {
        if (valid) {
          const int en = paged_end(a, plen, i, uni[nt][e]);
          // A window starts the row at its end − window; a row that sees nothing under sinks
          // sees nothing here too (the sink takes all its mass: out 0), where without sinks
          // it attends uniformly (score 0 at every position).
          int lo = kstart;
          if (!uni[nt][e] && g.window > 0 && en - g.window > lo) lo = en - g.window;
          const bool none = uni[nt][e] && g.has_sinks;
          if (none) uni[nt][e] = false;
          rlo[nt][e] = lo;
          rhi[nt][e] = none ? lo : (en < kend ? en : kend);
        }
      }
      if constexpr (K == Keys::kCausal) {
        if (valid) {
          int64_t f, en;
          g.key_range(i, f, en);
          rlo[nt][e] = static_cast<int>(f > kstart ? f : kstart);
          rhi[nt][e] = static_cast<int>(en < kend ? en : kend);
        }
      }
      moff[nt][e] = b * g.mask_stride[0] + hq * g.mask_stride[1] + i * g.mask_stride[2];
    }
  }

  float m[NT][2], l[NT][2], o[NT][NK][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      m[nt][e] = -std::numeric_limits<float>::infinity();
      l[nt][e] = 0.0f;
    }
#pragma unroll
    for (int dm = 0; dm < NK; ++dm) o[nt][dm][0] = o[nt][dm][1] = o[nt][dm][2] = o[nt][dm][3] = 0.0f;
  }
  const float sl = g.scale * kLog2e;
  // ldmatrix row addresses (mma.cuh's header): K as A (non-transposed) has lane l on row
  // l % 16, chunk 2 ks + l / 16; V as Aᵀ (transposed) on row l % 8 + 8 (l / 16), chunk
  // 2 dm + (l / 8) % 2. Both rows are l mod 8, the swizzle's key.
  const uint32_t kfrag = (lane % 16) * Q::kPitch, vfrag = (lane % 8 + 8 * (lane / 16)) * Q::kPitch;
  const int kh = lane / 16, vh = (lane / 8) % 2, sw = lane % 8;

  // The step count is warp-uniform (every lane takes every step: ldmatrix, mma, movmatrix and
  // the shuffles need the warp).
  for (int t = 0; t < steps; ++t) {
    const int j0 = first + t * step;
    // Queue step t + kStages − 1 into the stage step t − 1 used (every lane is past its
    // reads), then wait for step t's group and make every lane's copies visible.
    __syncwarp();
    copy_step<T, Q>(q0 + ((t + Q::kStages - 1) % Q::kStages) * Q::kStageBytes, j0 + (Q::kStages - 1) * step, kend,
                    rows, nck, ncv, vec_k, vec_v);
    cp_async_wait<Q::kStages - 1>();
    __syncwarp();
    const uint32_t kst = q0 + (t % Q::kStages) * Q::kStageBytes;
    const uint32_t vst = kst + Q::kTileBytes;

    // Sᵀ = K Qᵀ (16 keys x 8 rows a tile).
    float s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < NK; ++ks) {
      if (ks < nks) {
        uint32_t af[4];
        ldmatrix_x4(af, kst + kfrag + (((2 * ks + kh) ^ sw) << 4));
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(s[nt], af, qf[nt][ks]);
      }
    }

    // Scores in log2 units (hidden keys −inf), the online softmax of each row over the step's
    // 16 keys (the max over the 8 lanes of a row: xor 4, 8, 16), the weights packed to the
    // dtype and moved into B fragments.
    uint32_t pf[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + gq + 8 * (e / 2);
        bool vis;
        if constexpr (K == Keys::kCausal || K == Keys::kPaged) vis = j >= rlo[nt][e % 2] && j < rhi[nt][e % 2];
        else vis = j < kend;
        float x = s[nt][e] * sl;
        if constexpr (K == Keys::kPaged) {
          if (uni[nt][e % 2]) x = 0.0f;
        }
        if constexpr (K == Keys::kBoolMask || K == Keys::kAddMask) {
          const int64_t at = moff[nt][e % 2] + j * g.mask_stride[3];
          if constexpr (K == Keys::kBoolMask) {
            if (vis) vis = static_cast<const uint8_t*>(a.buf.mask)[at] != 0;
          } else {
            if (vis) x += to_acc(static_cast<const T*>(a.buf.mask)[at]) * kLog2e;
          }
        }
        s[nt][e] = vis ? x : -std::numeric_limits<float>::infinity();
      }
      float alpha[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float mx = fmaxf(s[nt][e], s[nt][e + 2]);
#pragma unroll
        for (int off = 4; off < kWarpSize; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        mx = fmaxf(mx, m[nt][e]);
        const float base = exp2_base(mx);
        alpha[e] = exp2_approx(m[nt][e] - base);
        m[nt][e] = mx;
        s[nt][e] = exp2_approx(s[nt][e] - base);
        s[nt][e + 2] = exp2_approx(s[nt][e + 2] - base);
        l[nt][e] = l[nt][e] * alpha[e] + (s[nt][e] + s[nt][e + 2]);
      }
      if (alpha[0] != 1.0f || alpha[1] != 1.0f) { // once the rows' max settles, rarely (NaN: it spreads)
#pragma unroll
        for (int dm = 0; dm < NK; ++dm) {
          o[nt][dm][0] *= alpha[0];
          o[nt][dm][1] *= alpha[1];
          o[nt][dm][2] *= alpha[0];
          o[nt][dm][3] *= alpha[1];
        }
      }
      pf[nt][0] = movmatrix_trans(pack2<T>(s[nt][0], s[nt][1])); // keys 0..7
      pf[nt][1] = movmatrix_trans(pack2<T>(s[nt][2], s[nt][3])); // keys 8..15
    }

    // Oᵀ += Vᵀ Pᵀ (16 columns x 8 rows a tile).
#pragma unroll
    for (int dm = 0; dm < NK; ++dm) {
      if (dm < ndm) {
        uint32_t af[4];
        ldmatrix_x4_trans(af, vst + vfrag + (((2 * dm + vh) ^ sw) << 4));
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(o[nt][dm], af, pf[nt]);
      }
    }
  }
  // The queue's last groups are empty steps past the end; drain them before the bytes are
  // reused (every lane's, hence the warp barrier).
  cp_async_wait<0>();
  __syncwarp();

  // Each lane summed the weights of its own keys: the row sums over its 8 lanes.
  auto& out = *reinterpret_cast<MergeArea<ROWS, Q::DMAX>*>(queue);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
#pragma unroll
      for (int off = 4; off < kWarpSize; off <<= 1) l[nt][e] += __shfl_xor_sync(0xffffffffu, l[nt][e], off);
      const int row = 8 * nt + 2 * tq + e;
#pragma unroll
      for (int dm = 0; dm < NK; ++dm) {
        if (dm < ndm) {
          out.o[row][16 * dm + gq] = o[nt][dm][e];
          out.o[row][16 * dm + gq + 8] = o[nt][dm][e + 2];
        }
      }
      if (gq == 0) {
        out.m[row] = m[nt][e];
        out.l[row] = l[nt][e];
      }
    }
  }
}

// The float16 / bfloat16 kernel (run_block with warp_pass). Dynamic shared memory:
// Q::kSmemBytes (the warps' queues, then their merged states).
template <typename T, typename Q, int NT, Keys K>
__global__ void __launch_bounds__(kThreads, Q::kMinBlocks) attention_vector_mma_kernel(const VectorArgs a) {
  extern __shared__ __align__(16) char smem[];
  run_block<T, kWarps, 8 * NT, Q::DMAX, Q::kWarpBytes>(
      a, smem, [&](char* queue, int r0, int nrows, int64_t b, int64_t h, int kstart, int kend, int split, int splits) {
        warp_pass<T, Q, NT, K>(a, queue, b, h, r0, nrows, kstart, kend, split, splits);
      });
}

} // namespace tc

// Pass 2 of two: one warp per query row merges its key blocks' partial states, adds the
// sink, applies the no-visible-key rule on the total (a row may see keys in some blocks and
// none in others), and writes out and lse.
template <typename T>
__global__ void __launch_bounds__(kCombineWarps * kWarpSize) attention_vector_combine_kernel(
    const VectorArgs a,
    int64_t total_rows) {
  const attention::Geometry& g = a.g;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kCombineWarps + threadIdx.x / kWarpSize;
  if (row >= total_rows) return; // whole warps leave; no block barriers below
  const int kbn = a.key_blocks;
  const int dv = static_cast<int>(g.dv);
  const float2* ml = a.part_ml + row * kbn;
  float mx = -std::numeric_limits<float>::infinity();
  for (int k = lane; k < kbn; k += kWarpSize) mx = fmaxf(mx, ml[k].x);
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const float base = exp2_base(mx);
  float sum = 0.0f;
  for (int k = lane; k < kbn; k += kWarpSize) sum += ml[k].y * exp2f(ml[k].x - base);
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);

  const int64_t hq = (row / g.lq) % g.hq;
  const int64_t b = row / (g.lq * g.hq);
  const int64_t h = hq / g.group();
  const bool none = !a.no_rule && mx == -std::numeric_limits<float>::infinity() && sum == 0.0f;
  T* out = static_cast<T*>(a.buf.out) + row * dv;
  if (none) {
    if (lane == 0 && a.buf.lse) {
      a.buf.lse[row] = g.has_sinks ? to_acc(static_cast<const T*>(a.buf.sinks)[hq])
                                   : lowest_of<T>() + logf(static_cast<float>(g.lk));
    }
    const T* vcol = static_cast<const T*>(a.buf.v) + b * g.v_stride[0] + h * g.v_stride[1];
    for (int d = lane; d < dv; d += kWarpSize) {
      out[d] = store_as<T>(g.has_sinks ? 0.0f : mean_over_keys(vcol + d, g.v_stride[2], g.lk));
    }
    return;
  }
  float scale = 1.0f;
  if (g.has_sinks) {
    const float sink = to_acc(static_cast<const T*>(a.buf.sinks)[hq]) * kLog2e;
    scale = online_merge_exp2(mx, sum, sink, 1.0f).x;
  }
  if (lane == 0 && a.buf.lse) a.buf.lse[row] = (mx + log2f(sum)) * kLn2;
  scale /= sum;
  const float* po = a.part_o + row * kbn * dv;
  // The key blocks' weights once, into this warp's shared slots; then each output element
  // sums its blocks with kCombineUnroll loads in flight (a loop of one dependent load and
  // exp2 a block took 11 us for 16 rows of 16 blocks on the H200, all latency).
  __shared__ float weights[kCombineWarps][kCombineMaxBlocks];
  float* wk = weights[threadIdx.x / kWarpSize];
  for (int k = lane; k < kbn; k += kWarpSize) wk[k] = exp2f(ml[k].x - base);
  __syncwarp();
  for (int d = lane; d < dv; d += kWarpSize) {
    float acc = 0.0f;
#pragma unroll kCombineUnroll
    for (int k = 0; k < kbn; ++k) acc += po[int64_t(k) * dv + d] * wk[k];
    out[d] = store_as<T>(acc * scale);
  }
}

// Whether 16-byte loads of rows of a [B, H, L, D] view at p with element strides s are
// aligned: the base and every stride of an axis longer than 1.
template <typename T>
bool rows_aligned(const void* p, const int64_t (&s)[3], int64_t n0, int64_t n1, int64_t n2) {
  const int64_t n[3] = {n0, n1, n2};
  if (!is_aligned(p, 16)) return false;
  for (int i = 0; i < 3; ++i) {
    if (n[i] > 1 && (s[i] * int64_t(sizeof(T))) % 16 != 0) return false;
  }
  return true;
}

// Calls f.template operator()<K>() with the call's key policy. A causal call with one query
// has the block's key range as that query's, so it needs no per-row bounds (kAll).
template <typename F>
void with_keys(const attention::Geometry& g, F&& f) {
  if (g.causal && g.lq > 1) f.template operator()<Keys::kCausal>();
  else if (g.causal || !g.has_mask) f.template operator()<Keys::kAll>();
  else if (g.bool_mask) f.template operator()<Keys::kBoolMask>();
  else f.template operator()<Keys::kAddMask>();
}

// Launches `kernel` over `blocks` blocks, then (two passes) the combine.
template <typename T>
void launch(void (*kernel)(VectorArgs), int threads, int smem_bytes, const VectorArgs& a, int64_t blocks, int passes) {
  NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  kernel<<<static_cast<unsigned>(blocks), threads, smem_bytes, stream()>>>(a);
  check_launch("attention_vector_kernel");
  if (passes == 2) {
    const int64_t rows = a.g.b * a.g.hq * a.g.lq;
    const int64_t cblocks = (rows + kCombineWarps - 1) / kCombineWarps;
    attention_vector_combine_kernel<T>
        <<<static_cast<unsigned>(cblocks), kCombineWarps * kWarpSize, 0, stream()>>>(a, rows);
    check_launch("attention_vector_combine_kernel");
  }
}

template <typename T, typename S>
void launch_simt(VectorArgs& a, int64_t blocks, int passes) {
  a.chunks = (a.rows + simt::kRows - 1) / simt::kRows;
  with_keys(a.g, [&]<Keys K>() {
    launch<T>(simt::attention_vector_kernel<T, S, K>, simt::kThreads, S::kSmemBytes, a, blocks, passes);
  });
}

// The tensor-core kernel for key policy K (chunks of 8 NT rows, queue rows of Q::DMAX).
template <typename T, typename Q, int NT, Keys K>
void launch_mma(VectorArgs& a, int64_t blocks, int passes) {
  a.chunks = (a.rows + 8 * NT - 1) / (8 * NT);
  launch<T>(tc::attention_vector_mma_kernel<T, Q, NT, K>, tc::kThreads, Q::kSmemBytes, a, blocks, passes);
}

// Calls f.template operator()<Q, NT>() with the tensor-core kernel's queue and row tiles:
// queue rows of the longer head (64, 128 or 256 elements), two 8-row tiles a warp when a key
// head serves more than 8 rows (so that a chunk's warps share the copies of twice the rows)
// and the registers allow it (heads <= 128).
template <typename F>
void with_queue(const VectorArgs& a, F&& f) {
  const int64_t dmax = std::max(a.g.d, a.g.dv);
  const bool wide = a.rows > 8;
  if (dmax <= 64) {
    if (wide) f.template operator()<tc::Queue<64>, 2>();
    else f.template operator()<tc::Queue<64>, 1>();
  } else if (dmax <= 128) {
    if (wide) f.template operator()<tc::Queue<128>, 2>();
    else f.template operator()<tc::Queue<128>, 1>();
  } else {
    f.template operator()<tc::Queue<256>, 1>();
  }
}

// float16 / bfloat16: the tensor-core kernel (with_queue picks its tiles). float32: the CUDA-core kernel, L the lanes per key: the smallest power of two (16 or 32)
// holding the longer row in one vector per lane, or 32 lanes with two vectors (256).
template <typename T>
void launch_for_heads(VectorArgs& a, int64_t blocks, int passes) {
  if constexpr (std::is_same_v<T, float>) {
    const int64_t dmax = std::max(a.g.d, a.g.dv);
    constexpr int W = kVec<T>;
    const int64_t nvk = a.g.d / W, nvv = a.g.dv / W;
    if (dmax <= 16 * W) return launch_simt<T, simt::Layout<T, 16, 1, 1>>(a, blocks, passes);
    if (nvk <= 32 && nvv <= 32) return launch_simt<T, simt::Layout<T, 32, 1, 1>>(a, blocks, passes);
    if (nvv <= 32) return launch_simt<T, simt::Layout<T, 32, 2, 1>>(a, blocks, passes);
    if (nvk <= 32) return launch_simt<T, simt::Layout<T, 32, 1, 2>>(a, blocks, passes);
    return launch_simt<T, simt::Layout<T, 32, 2, 2>>(a, blocks, passes);
  } else {
    with_queue(a, [&]<typename Q, int NT>() {
      with_keys(a.g, [&]<Keys K>() { launch_mma<T, Q, NT, K>(a, blocks, passes); });
    });
  }
}

bool vector_size(int64_t d) {
  return d == 64 || d == 80 || d == 96 || d == 128 || d == 256;
}

} // namespace

void attention_vector(Dtype dtype, const attention::Geometry& g, const AttentionBuffers& buf, int passes, int key_blocks) {
  if (!vector_size(g.d) || !vector_size(g.dv)) {
    throw std::invalid_argument(
        "[attention_vector] head sizes D and Dv must each be 64, 80, 96, 128 or 256; got D " + std::to_string(g.d) +
        ", Dv " + std::to_string(g.dv) + ".");
  }
  if (passes != 1 && passes != 2) {
    throw std::invalid_argument("[attention_vector] passes must be 1 or 2; got " + std::to_string(passes) + ".");
  }
  if (passes == 1) key_blocks = 1;
  if (key_blocks < 1) {
    throw std::invalid_argument("[attention_vector] key_blocks must be at least 1; got " + std::to_string(key_blocks) + ".");
  }
  key_blocks = std::min(key_blocks, kCombineMaxBlocks); // the combine's weight slots; any split is exact
  const int64_t total_rows = g.b * g.hq * g.lq;
  if (total_rows == 0) return;
  const int64_t rows = g.group() * g.lq;
  const int64_t blocks = g.b * g.hkv * key_blocks;
  constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;
  // Key indices are 32-bit (with room for the queue's steps past the end).
  if (g.lk > (int64_t(1) << 30) || rows > (int64_t(1) << 30) || blocks > kMaxBlocks ||
      (total_rows + kCombineWarps - 1) / kCombineWarps > kMaxBlocks) {
    throw std::invalid_argument("[attention_vector] the problem is too large for the decode kernels.");
  }
  VectorArgs a;
  a.g = g;
  a.buf = buf;
  a.key_blocks = key_blocks;
  a.rows = static_cast<int>(rows);
  a.no_rule = g.has_mask && !g.causal && !g.bool_mask;
  if (passes == 2) {
    // (max, sum) pairs first (8-byte aligned from the allocation), then the outputs.
    const size_t pairs = size_t(total_rows) * size_t(key_blocks);
    char* p = static_cast<char*>(scratch(pairs * (size_t(g.dv) + 2) * sizeof(float)));
    a.part_ml = reinterpret_cast<float2*>(p);
    a.part_o = reinterpret_cast<float*>(p + pairs * sizeof(float2));
  }
  dispatch_device_float_types(dtype, "attention_vector", [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("[attention_vector] float64 runs the fallback, not the decode kernels.");
    } else {
      a.vec_k = rows_aligned<T>(buf.k, g.k_stride, g.b, g.hkv, g.lk);
      a.vec_v = rows_aligned<T>(buf.v, g.v_stride, g.b, g.hkv, g.lk);
      launch_for_heads<T>(a, blocks, passes);
    }
  });
}

/// attention_decode.h: paged decode on the tensor-core kernel (the key loop gathers K and V
/// rows through the block tables: PagedRows, Keys::kPaged); false (nothing launched) where it
/// does not apply. Schedule: fast::vector_schedule with Lk = max_blocks · block_size.
bool paged_attention_tc(
    Dtype dtype,
    const PagedGeometry& pg,
    const void* q,
    const void* k_cache,
    const void* v_cache,
    const int32_t* tables,
    const int32_t* lengths,
    const void* sinks,
    void* out) {
  const int64_t rows = pg.hq / pg.hkv * pg.l;
  const int64_t cap = pg.max_blocks * pg.block_size;
  if (!fast::paged_decode_covers(dtype, pg.d, rows, cap)) return false;
  attention::Geometry g = paged_query_geometry(pg);
  g.window = pg.window; // the paged rule's window (g.causal stays false: Keys::kPaged)
  g.has_sinks = sinks != nullptr;
  fast::RouteKey key;
  key.b = pg.b;
  key.hkv = pg.hkv;
  key.lk = cap;
  key.sm_count = device_props().multiProcessorCount;
  const auto [passes, key_blocks] = fast::vector_schedule(key);
  VectorArgs a;
  a.g = g;
  a.buf.q = q;
  a.buf.k = k_cache;
  a.buf.v = v_cache;
  a.buf.sinks = sinks;
  a.buf.out = out; // no lse: PagedAttention has none
  a.key_blocks = key_blocks;
  a.rows = static_cast<int>(rows);
  a.no_rule = true;
  a.vec_k = a.vec_v = true; // 16-byte aligned caches (the eval's aligned_rows), rows of 128+ bytes
  a.tables = tables;
  a.lengths = lengths;
  a.max_blocks = static_cast<int>(pg.max_blocks);
  a.cache_blocks = static_cast<int>(pg.blocks);
  while ((int64_t(1) << a.bs_log2) < pg.block_size) ++a.bs_log2;
  const int64_t total_rows = g.b * g.hq * g.lq;
  if (passes == 2) {
    const size_t pairs = size_t(total_rows) * size_t(key_blocks);
    char* p = static_cast<char*>(scratch(pairs * (size_t(g.dv) + 2) * sizeof(float)));
    a.part_ml = reinterpret_cast<float2*>(p);
    a.part_o = reinterpret_cast<float*>(p + pairs * sizeof(float2));
  }
  const int64_t blocks = g.b * g.hkv * key_blocks;
  dispatch_device_float_types(dtype, "paged_attention", [&]<typename T>() {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      with_queue(a, [&]<typename Q, int NT>() { launch_mma<T, Q, NT, Keys::kPaged>(a, blocks, passes); });
    }
  });
  return true;
}

} // namespace nuvec::cu
