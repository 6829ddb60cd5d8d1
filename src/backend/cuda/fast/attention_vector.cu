// nuvec: the CUDA decode attention kernels (cu::attention_vector; Lq <= 8 is what the planner
// sends here, any Lq works): float16, bfloat16, float32; D and Dv each 64, 80, 96, 128 or 256.
// Meaning: src/fast/attention.h (the fallback graph); geometry and the rule for rows that see
// no key: src/backend/common/attention.h.
//
// Decode is a stream over K and V (B·Hkv·Lk·(D + Dv) elements) with little arithmetic per
// element, so the design is about reading K and V once, with 16-byte loads, with enough of
// them in flight:
//  - A block owns one (batch row, key head) and a contiguous range of its keys (all of them in
//    one pass; a key block of the split in two passes). It holds every query row that key head
//    serves: R = (Hq / Hkv) · Lq rows, so each K and V row crosses HBM once however many
//    query heads share it (grouped / multi-query attention).
//  - The rows go in chunks of kRows to warps: with few chunks, several warps share a chunk and
//    split its keys (interleaved steps); with more chunks than warps each warp takes whole
//    chunks (warps of one block then read the same K/V rows at nearly the same time, which L1
//    serves) and rounds of kWarps chunks follow each other.
//  - Within a warp, L lanes own one key (a "key group"; 32 / L keys per warp at once): lane
//    `sl` of a group handles 16-byte vectors sl, sl + L, ... of the K row and of the V row,
//    the matching slice of every query row of the chunk (float32, pre-scaled by scale ·
//    log2 e, kept in shared memory and read where used) and that slice of every row's output
//    accumulator (registers). Each lane streams its own vectors through a private queue in
//    shared memory: cp.async copies kStages − 1 steps ahead (16 bytes each, no registers held
//    while in flight; 12 vectors a lane, 96 KB an SM), so the registers hold only the
//    accumulators and one step's scores. A step reduces the per-lane partial dot products
//    over the group by shuffles and updates the group's own online-softmax state
//    (device/online_softmax.cuh, base 2) and accumulators.
//  - At the end the key groups of a warp merge by shuffles, the warps of a chunk through
//    shared memory, then one pass writes out [B, Hq, Lq, Dv] and lse [B, Hq, Lq] (sinks
//    enter here), or pass 1 of two writes (max, sum, unnormalised output) per query row and
//    key block to scratch and a combine kernel merges the key blocks (sinks enter there, once).
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
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
// Query rows a warp carries at once (their accumulators live in registers).
constexpr int kRows = 4;
// Steps of a warp's shared-memory queue: kStages - 1 steps of K and V in flight while one is
// computed on.
constexpr int kStages = 4;
// Warps of the combine kernel (one query row each).
constexpr int kCombineWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;
// The weights' exp2 in the key loop: one ex2.approx.ftz (mma.cuh), about 2^-22 relative;
// flushing weights below 2^-126 to 0 changes nothing next to the max's weight of 1.
struct Exp2Approx {
  __device__ __forceinline__ float operator()(float x) const { return exp2_approx(x); }
};
constexpr float kLn2 = 0.6931471805599453f;

// The dtype's lowest finite value: the fallback's hidden score (the no-visible-key rule's lse).
template <typename T>
constexpr float lowest_of() {
  if constexpr (std::is_same_v<T, __half>) return -65504.0f;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return -3.38953139e38f;
  else return -FLT_MAX;
}

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

// A warp's merged state, written over its queue once its keys are done.
template <int DVMAX>
struct MergeArea {
  float o[kRows][DVMAX];
  float m[kRows];
  float l[kRows];
};

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
  int chunks = 0;   // ceil(rows / kRows)
  bool vec_k = false; // k's base and strides allow 16-byte copies
  bool vec_v = false;
  bool additive = false; // an additive mask applies: the no-visible-key rule never does
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
// range of the row's query; a bool mask; an additive mask. The fallback ignores an array mask
// under causal, so the two never combine.
enum class Keys { kAll, kCausal, kBoolMask, kAddMask };

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
  auto& out = *reinterpret_cast<MergeArea<S::DVMAX>*>(queue);
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

// The block kernel of both modes: one pass (part_ml null) writes out and lse; pass 1 of two
// writes the key block's partial state. Block x = ((b · Hkv) + h) · key_blocks + kb. Dynamic
// shared memory: S::kSmemBytes (the warps' queues, then their merged states).
template <typename T, typename S, Keys K>
__global__ void __launch_bounds__(kThreads, 2) attention_vector_kernel(const VectorArgs a) {
  static_assert(sizeof(MergeArea<S::DVMAX>) <= S::kWarpBytes, "a warp's merged state fits in its queue");
  const attention::Geometry& g = a.g;
  extern __shared__ __align__(16) char smem[];
  __shared__ int64_t mask_off[kWarps][kRows];
  __shared__ int kind[kWarps * kRows];
  const auto area = [&](int w) -> MergeArea<S::DVMAX>& {
    return *reinterpret_cast<MergeArea<S::DVMAX>*>(smem + w * S::kWarpBytes);
  };
  const int kb = static_cast<int>(blockIdx.x % unsigned(a.key_blocks));
  const int64_t bh = blockIdx.x / unsigned(a.key_blocks);
  const int64_t h = bh % g.hkv;
  const int64_t b = bh / g.hkv;
  const bool one_pass = a.part_ml == nullptr;

  // The keys any row of this key head sees: all Lk, or under causal the union of the rows'
  // ranges (contiguous: the ranges move right by one key per query), cut into key_blocks
  // equal parts; this block takes part kb (maybe empty).
  int64_t lo = 0, hi = g.lk;
  if (g.causal) {
    int64_t f, e;
    g.key_range(0, lo, e);
    g.key_range(g.lq - 1, f, hi);
    if (hi < lo) hi = lo;
  }
  const int64_t per = (hi - lo + a.key_blocks - 1) / a.key_blocks;
  const int kstart = static_cast<int>(std::min(lo + kb * per, hi));
  const int kend = static_cast<int>(std::min(lo + (kb + 1) * per, hi));

  const int warp = threadIdx.x / kWarpSize;
  const bool few = a.chunks <= kWarps;
  const int splits = few ? kWarps / a.chunks : 1; // warps per chunk
  const int rounds = few ? 1 : (a.chunks + kWarps - 1) / kWarps;
  const int dv = static_cast<int>(g.dv);
  for (int round = 0; round < rounds; ++round) {
    const int chunk0 = round * kWarps;
    const int nc = a.chunks - chunk0 < kWarps ? a.chunks - chunk0 : kWarps; // chunks this round
    const int cl = warp / splits;                                          // this warp's chunk
    if (cl < nc) {
      const int r0 = (chunk0 + cl) * kRows;
      const int nrows = a.rows - r0 < kRows ? a.rows - r0 : kRows;
      warp_pass<T, S, K>(a, smem + warp * S::kWarpBytes,
                         reinterpret_cast<float*>(smem + kWarps * S::kWarpBytes + warp * S::kQBytes), mask_off[warp], b,
                         h, r0, nrows, kstart, kend, warp % splits, splits);
    }
    __syncthreads();

    // Rows: merge the chunk's warps (cl · splits + [0, splits)), add the sink (one pass),
    // decide the row's kind, write lse or the partial (max, sum), and leave each warp's
    // factor in place of its max.
    for (int t = threadIdx.x; t < nc * kRows; t += kThreads) {
      const int c = t / kRows, rr = t % kRows;
      const int r = (chunk0 + c) * kRows + rr;
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
        const bool none = !a.additive && mx == -std::numeric_limits<float>::infinity() && sum == 0.0f;
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
        a.buf.lse[row] = lse;
        for (int k = 0; k < splits; ++k) area(c * splits + k).m[rr] *= scale;
      } else {
        a.part_ml[row * a.key_blocks + kb] = make_float2(mx, sum);
      }
      kind[c * kRows + rr] = rk;
    }
    __syncthreads();

    // Elements: the factor-weighted sum of the chunk's warps' accumulators.
    for (int t = threadIdx.x; t < nc * kRows * dv; t += kThreads) {
      const int c = t / (kRows * dv);
      const int rr = (t / dv) % kRows;
      const int d = t % dv;
      const int r = (chunk0 + c) * kRows + rr;
      if (r >= a.rows) continue;
      const int64_t row = out_row(g, b, h, r);
      const int rk = kind[c * kRows + rr];
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
  const bool none = !a.additive && mx == -std::numeric_limits<float>::infinity() && sum == 0.0f;
  T* out = static_cast<T*>(a.buf.out) + row * dv;
  if (none) {
    if (lane == 0) {
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
  if (lane == 0) a.buf.lse[row] = (mx + log2f(sum)) * kLn2;
  scale /= sum;
  const float* po = a.part_o + row * kbn * dv;
  for (int d = lane; d < dv; d += kWarpSize) {
    float acc = 0.0f;
    for (int k = 0; k < kbn; ++k) acc += po[int64_t(k) * dv + d] * exp2f(ml[k].x - base);
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

template <typename T, typename S>
void launch(VectorArgs& a, int64_t blocks, int passes) {
  // Causal with one query: the block's key range is that query's, so no per-row bounds.
  const auto kernel = a.g.causal && a.g.lq > 1 ? attention_vector_kernel<T, S, Keys::kCausal>
      : a.g.causal || !a.g.has_mask            ? attention_vector_kernel<T, S, Keys::kAll>
      : a.g.bool_mask            ? attention_vector_kernel<T, S, Keys::kBoolMask>
                                 : attention_vector_kernel<T, S, Keys::kAddMask>;
  NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  kernel<<<static_cast<unsigned>(blocks), kThreads, S::kSmemBytes, stream()>>>(a);
  check_launch("attention_vector_kernel");
  if (passes == 2) {
    const int64_t rows = a.g.b * a.g.hq * a.g.lq;
    const int64_t cblocks = (rows + kCombineWarps - 1) / kCombineWarps;
    attention_vector_combine_kernel<T>
        <<<static_cast<unsigned>(cblocks), kCombineWarps * kWarpSize, 0, stream()>>>(a, rows);
    check_launch("attention_vector_combine_kernel");
  }
}

// The lanes per key and vectors per lane of (D, Dv): L the smallest power of two (8 to 32)
// holding the longer row in one vector per lane, or 32 lanes with two vectors (float32 256).
template <typename T>
void launch_for_heads(VectorArgs& a, int64_t blocks, int passes) {
  constexpr int W = kVec<T>;
  const int64_t nvk = a.g.d / W, nvv = a.g.dv / W;
  const int64_t nv = std::max(nvk, nvv);
  if constexpr (W == 8) {
    if (nv <= 8) return launch<T, Layout<T, 8, 1, 1>>(a, blocks, passes);
    if (nv <= 16) return launch<T, Layout<T, 16, 1, 1>>(a, blocks, passes);
    return launch<T, Layout<T, 32, 1, 1>>(a, blocks, passes);
  } else {
    if (nv <= 16) return launch<T, Layout<T, 16, 1, 1>>(a, blocks, passes);
    if (nvk <= 32 && nvv <= 32) return launch<T, Layout<T, 32, 1, 1>>(a, blocks, passes);
    if (nvv <= 32) return launch<T, Layout<T, 32, 2, 1>>(a, blocks, passes);
    if (nvk <= 32) return launch<T, Layout<T, 32, 1, 2>>(a, blocks, passes);
    return launch<T, Layout<T, 32, 2, 2>>(a, blocks, passes);
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
  const int64_t total_rows = g.b * g.hq * g.lq;
  if (total_rows == 0) return;
  const int64_t rows = g.group() * g.lq;
  const int64_t blocks = g.b * g.hkv * key_blocks;
  constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;
  // Key indices are 32-bit (with room for a step past the end).
  if (g.lk > (int64_t(1) << 30) || rows > (int64_t(1) << 30) || blocks > kMaxBlocks ||
      (total_rows + kCombineWarps - 1) / kCombineWarps > kMaxBlocks) {
    throw std::invalid_argument("[attention_vector] the problem is too large for the decode kernels.");
  }
  VectorArgs a;
  a.g = g;
  a.buf = buf;
  a.key_blocks = key_blocks;
  a.rows = static_cast<int>(rows);
  a.chunks = static_cast<int>((rows + kRows - 1) / kRows);
  a.additive = g.has_mask && !g.causal && !g.bool_mask;
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

} // namespace nuvec::cu
