// nuvec: the CUDA backward of scaled dot-product attention (ScaledDotProductAttentionVjp,
// src/fast/attention.h), FlashAttention-2's (Dao 2023): the scores are recomputed tile by
// tile from the saved lse, never stored. With s_ij the forward's scaled, masked score,
//   p_ij = exp(s_ij − lse_i),  delta_i = dout_i · out_i,  dp_ij = dout_i · v_j,
//   ds_ij = p_ij (dp_ij − delta_i),
//   dv_j = Σ_i p_ij dout_i,  dk_j = scale Σ_i ds_ij q_i,  dq_i = scale Σ_j ds_ij k_j,
//   dsinks_h = −Σ_{b,i} exp(sink_h − lse_i) delta_i,
// all in float32. Hidden pairs (causal, window, a false bool mask, outside the sizes) give
// p = 0. A row that sees no key (src/backend/common/attention.h) gives nothing to dq and dk
// and, without sinks, dout_i / Lk to every dv_j of its key head.
//
// Kernels, in launch order (all on cu::stream()):
//  1. prep_kernel: a warp per query row: delta_i and lse_i · log2(e) into float32 scratch
//     rows padded to kRowPad (so tiles read them as aligned 16-byte vectors), and, when some
//     row may see no key, a flag per row.
//  2. uniform_dv_kernel (only then): per (batch, key head) the sum of dout over the flagged
//     rows of its query heads, / Lk: added to every dv row by the dk/dv kernels.
//  3. dk/dv (and, on Hopper, dq): a block per (batch, key head, tile of keys) keeps its keys'
//     dk, dv in registers and walks the query tiles (of every query head of its group: GQA
//     reduces in the block) that can see them; causal tiles no key of the block is visible
//     to are skipped.
//  4. dq: on Hopper (wg_bwd_kernel, below) the dk/dv block also computes dS K for its keys
//     and adds it to a float32 scratch with vector atomics (FlashAttention-2's scheme: five
//     tile products a pair of tiles), then dq_convert_kernel scales and rounds it; dq is then
//     not bit-reproducible run to run (the additions land in any order), dk, dv and dsinks
//     are. Elsewhere a block per (batch, query head, tile of queries) keeps dq in registers
//     and walks the key tiles its queries see, recomputing p and dp (two more tile products,
//     deterministic).
//  5. dsinks_kernel (with sinks): a block per query head, a fixed-order block reduction.
// The half types with D == Dv in {64, 128} and 16-byte aligned rows run on tensor cores: on
// Hopper (sm_90a builds) the single warpgroup-MMA kernel wg_bwd_kernel (wgmma, device/
// wgmma.cuh; two warpgroups of 64 keys, 64 queries a step, operands in 128-byte-swizzled
// shared-memory tiles), else the mma.sync m16n8k16 kernels (device/mma.cuh): each warp owns
// 16 keys (dk/dv) or 16 queries (dq), so p and ds go from the accumulators straight into the
// A operand of the next product (the C layout of two n8 tiles is the A layout of one k16
// step); tiles stream in through cp.async, three stages deep (one barrier a step). D 256 in
// the half types takes the mma.sync kernels too when NUVEC_ATTENTION_BACKWARD_D256=1 (written
// without a GPU at hand; off until its test has run): the dk/dv kernel twice, keeping dv, then
// dk (128 accumulators a thread each), and streamed tiles of 16 rows.
// Everything else (float32, other head sizes up to 256, unaligned rows) runs the float32
// SIMT kernels generic_dkdv_kernel and generic_dq_kernel, which share the tile arithmetic
// (generic_scores).
#include <cstdlib>
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/wgmma.cuh"
#include "backend/cuda/fast/attention.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/wgmma_usable.h"
#include "core/env_switch.h"

namespace nuvec::cu {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

/// The per-row scratch (delta, lse · log2 e) holds each head's rows padded to a multiple of
/// this, so that any tile of up to kRowPad rows starting at a multiple of its size reads
/// whole 16-byte vectors inside the head's rows (the padding holds zeros).
constexpr int64_t kRowPad = 128;

/// Everything one backward call's kernels read and write (passed by value as a
/// __grid_constant__ parameter). Row r of head (b, h) of the padded scratch is at
/// (b · Hq + h) · lqp + r.
template <typename T>
struct BwdArgs {
  attention::Geometry g;
  const T* q;
  const T* k;
  const T* v;
  const uint8_t* bool_mask; // the mask when bool, else null
  const T* add_mask;        // the mask when additive, else null
  const T* sinks;
  const T* out;
  const T* dout;
  const float* lse;
  float* lse2;     // lse · log2 e, padded rows
  float* delta;    // dout · out, padded rows
  uint8_t* empty;  // [B · Hq · Lq]: the row sees no key (null when no row can)
  float* uniform;  // [B · Hkv · Dv]: what those rows give every dv row (null likewise)
  T* dq;
  T* dk;
  T* dv;
  T* dsinks;
  int64_t lqp;      // padded rows per head
  float scale_log2; // scale · log2 e
  float* dq_acc;    // wg_bwd_kernel's float32 dq sums (dq_convert_kernel's layout), else null
  int64_t qtiles;   // tiles of 64 queries a head in dq_acc
};

// ---- visibility and probabilities, shared by every kernel ----------------------------------

/// Whether key j is in query i's causal window (always without causal).
__device__ __forceinline__ bool in_window(const attention::Geometry& g, int64_t i, int64_t j) {
  if (!g.causal) return true;
  const int64_t last = g.last_key(i);
  return j <= last && (g.window == 0 || j > last - g.window);
}

/// Whether every pair of queries [i0, i1) and keys [j0, j1) of a head is visible, inside the
/// sizes and free of a mask: then p needs no per-element test (the diagonal and edge tiles
/// take prob() instead).
__device__ __forceinline__ bool all_visible(const attention::Geometry& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  if (g.has_mask || i1 > g.lq || j1 > g.lk) return false;
  if (!g.causal) return true;
  const int64_t off = g.lk - g.lq;
  return j1 - 1 <= i0 + off && (g.window == 0 || j0 > i1 - 1 + off - g.window);
}

/// p_ij = exp(s_ij − lse_i) from the raw dot q_i · k_j and lse2 = lse_i · log2 e, or 0 where
/// the pair is hidden or outside the sizes (tested before anything else, so a row that sees
/// no key, whose lse may be −inf after scaling, never reaches the exponential).
template <typename T>
__device__ __forceinline__ float prob(const BwdArgs<T>& a, int64_t b, int64_t h, int64_t i, int64_t j, float dot, float lse2) {
  const attention::Geometry& g = a.g;
  if (i >= g.lq || j >= g.lk || !in_window(g, i, j)) return 0.f;
  float x = dot * a.scale_log2;
  if (g.has_mask) {
    const int64_t at = b * g.mask_stride[0] + h * g.mask_stride[1] + i * g.mask_stride[2] + j * g.mask_stride[3];
    if (g.bool_mask) {
      if (!a.bool_mask[at]) return 0.f;
    } else {
      x += to_acc(a.add_mask[at]) * kLog2e;
    }
  }
  return exp2_approx(x - lse2);
}

/// The query rows that can see some key of [k0, k1) (k1 > k0), as [lo, hi) (empty when
/// hi <= lo; the same for every head). Query i sees key j when j <= i + off (and
/// j > i + off − window), off = Lk − Lq.
__device__ __forceinline__ void query_range(const attention::Geometry& g, int64_t k0, int64_t k1, int64_t& lo, int64_t& hi) {
  lo = 0;
  hi = g.lq;
  if (!g.causal) return;
  const int64_t off = g.lk - g.lq;
  lo = k0 - off > 0 ? k0 - off : 0;
  if (g.window > 0) {
    const int64_t h2 = k1 - 1 - off + g.window;
    hi = h2 < hi ? h2 : hi;
  }
}

/// The keys some query of rows [i0, i1) (i1 > i0) can see: [first(i0), end(i1 − 1)) (both
/// ends of key_range grow with i).
__device__ __forceinline__ void key_span(const attention::Geometry& g, int64_t i0, int64_t i1, int64_t& lo, int64_t& hi) {
  int64_t f, e;
  g.key_range(i0, lo, e);
  g.key_range(i1 - 1, f, hi);
}

// ---- 1, 2, 5: per-row preparation, the no-key rows' dv, dsinks -----------------------------

constexpr int kPrepThreads = 256;

/// Step 1, a warp per padded row (b, h, i): delta_i = dout_i · out_i (float32, a butterfly over
/// the lanes) and lse2_i = lse_i · log2 e, both 0 in the padding rows i >= Lq; and, when
/// a.empty is set, whether row i sees no key (its causal range is empty, or the bool mask
/// hides all of it).
template <typename T>
__global__ void __launch_bounds__(kPrepThreads) prep_kernel(__grid_constant__ const BwdArgs<T> a) {
  const attention::Geometry& g = a.g;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * (kPrepThreads / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= g.b * g.hq * a.lqp) return; // the whole warp
  const int64_t bh = row / a.lqp, i = row % a.lqp;
  float d = 0.f, l2 = 0.f;
  if (i < g.lq) {
    const int64_t at = (bh * g.lq + i) * g.dv;
    for (int64_t e = lane; e < g.dv; e += kWarpSize) d += to_acc(a.out[at + e]) * to_acc(a.dout[at + e]);
    d = warp_allreduce(d, kWarpSize, [](float x, float y) { return x + y; });
    l2 = a.lse[bh * g.lq + i] * kLog2e;
    if (a.empty) {
      int64_t first, end;
      g.key_range(i, first, end);
      bool none = first >= end;
      if (!none && g.bool_mask) {
        const int64_t b = bh / g.hq, h = bh % g.hq;
        const uint8_t* m = a.bool_mask + b * g.mask_stride[0] + h * g.mask_stride[1] + i * g.mask_stride[2];
        bool any = false;
        for (int64_t j = first + lane; j < end && !any; j += kWarpSize) any = m[j * g.mask_stride[3]] != 0;
        none = !__any_sync(0xffffffffu, any);
      }
      if (lane == 0) a.empty[bh * g.lq + i] = none ? 1 : 0;
    }
  }
  if (lane == 0) {
    a.delta[row] = d;
    a.lse2[row] = l2;
  }
}

constexpr int kUniformThreads = 128;

/// uniform[b, hk, e] = Σ over the flagged rows i of query heads h of key head hk of
/// dout[b, h, i, e], / Lk (a block per (b, hk), rows in order).
template <typename T>
__global__ void __launch_bounds__(kUniformThreads) uniform_dv_kernel(__grid_constant__ const BwdArgs<T> a) {
  const attention::Geometry& g = a.g;
  const int64_t bk = blockIdx.x, b = bk / g.hkv, hk = bk % g.hkv, group = g.group();
  for (int64_t e = threadIdx.x; e < g.dv; e += kUniformThreads) {
    float acc = 0.f;
    for (int64_t gi = 0; gi < group; ++gi) {
      const int64_t bh = b * g.hq + hk * group + gi;
      for (int64_t i = 0; i < g.lq; ++i) {
        if (a.empty[bh * g.lq + i]) acc += to_acc(a.dout[(bh * g.lq + i) * g.dv + e]);
      }
    }
    a.uniform[bk * g.dv + e] = acc / float(g.lk);
  }
}

constexpr int kSinkThreads = 256;

/// Step 5, a block per query head h: dsinks_h = −Σ_{b,i} exp(sink_h − lse_i) delta_i, each
/// thread summing a strided share of the rows, then the block in a fixed order.
template <typename T>
__global__ void __launch_bounds__(kSinkThreads) dsinks_kernel(__grid_constant__ const BwdArgs<T> a) {
  __shared__ float smem[kSinkThreads / kWarpSize];
  const attention::Geometry& g = a.g;
  const int64_t h = blockIdx.x;
  const float sink = to_acc(a.sinks[h]);
  float acc = 0.f;
  for (int64_t n = threadIdx.x; n < g.b * g.lq; n += kSinkThreads) {
    const int64_t bh = (n / g.lq) * g.hq + h, i = n % g.lq;
    acc += expf(sink - a.lse[bh * g.lq + i]) * a.delta[bh * a.lqp + i];
  }
  const float total = block_allreduce(acc, [](float x, float y) { return x + y; }, smem);
  if (threadIdx.x == 0) a.dsinks[h] = store_as<T>(-total);
}

// ---- 3, 4 on float32 SIMT: any dtype, head sizes up to 256 ----------------------------------

constexpr int kGenericThreads = 256;
constexpr int kGenericRows = 32; // queries and keys of a tile (one key a lane)
static_assert(kGenericThreads % kGenericRows == 0 && kGenericThreads / kGenericRows == 8);

/// The generic kernels' shared memory, in floats: the tile's queries and their dout, its
/// keys and values (rows padded to an odd stride, so a warp reading one column of 32 rows
/// hits 32 banks), p and ds (32 x 33), and the rows' lse2 and delta.
struct GenericSmem {
  float *q, *dout, *k, *v, *p, *ds, *lse2, *delta;
  int ldq, ldv;

  __host__ __device__ static int odd(int64_t n) { return static_cast<int>(n | 1); }
  __host__ __device__ static size_t floats(int64_t d, int64_t dv) {
    return size_t(2 * kGenericRows) * (odd(d) + odd(dv)) + 2 * kGenericRows * (kGenericRows + 1) + 2 * kGenericRows;
  }
  __device__ GenericSmem(float* base, int64_t d, int64_t dv) : ldq(odd(d)), ldv(odd(dv)) {
    q = base;
    dout = q + kGenericRows * ldq;
    k = dout + kGenericRows * ldv;
    v = k + kGenericRows * ldq;
    p = v + kGenericRows * ldv;
    ds = p + kGenericRows * (kGenericRows + 1);
    lse2 = ds + kGenericRows * (kGenericRows + 1);
    delta = lse2 + kGenericRows;
  }
};

/// Copies `rows` rows of `cols` elements (row r at src + r · stride) as float into dst
/// (row stride ld); rows from `valid` on are zero and never read.
template <typename T>
__device__ __forceinline__ void load_rows(float* dst, int ld, const T* src, int64_t stride, int64_t valid, int64_t cols) {
  for (int64_t n = threadIdx.x; n < kGenericRows * cols; n += kGenericThreads) {
    const int64_t r = n / cols, c = n % cols;
    dst[r * ld + c] = r < valid ? to_acc(src[r * stride + c]) : 0.f;
  }
}

/// Loads the queries [q0, q0 + 32) of head (b, h): q, dout, lse2, delta.
template <typename T>
__device__ __forceinline__ void load_query_tile(const BwdArgs<T>& a, const GenericSmem& s, int64_t b, int64_t h, int64_t q0) {
  const attention::Geometry& g = a.g;
  const int64_t valid = g.lq - q0, bh = b * g.hq + h;
  load_rows(s.q, s.ldq, a.q + b * g.q_stride[0] + h * g.q_stride[1] + q0 * g.q_stride[2], g.q_stride[2], valid, g.d);
  load_rows(s.dout, s.ldv, a.dout + (bh * g.lq + q0) * g.dv, g.dv, valid, g.dv);
  if (threadIdx.x < kGenericRows) {
    const bool in = threadIdx.x < valid;
    s.lse2[threadIdx.x] = in ? a.lse2[bh * a.lqp + q0 + threadIdx.x] : 0.f;
    s.delta[threadIdx.x] = in ? a.delta[bh * a.lqp + q0 + threadIdx.x] : 0.f;
  }
}

/// Loads the keys [k0, k0 + 32) of key head (b, hk): k and v.
template <typename T>
__device__ __forceinline__ void load_key_tile(const BwdArgs<T>& a, const GenericSmem& s, int64_t b, int64_t hk, int64_t k0) {
  const attention::Geometry& g = a.g;
  const int64_t valid = g.lk - k0;
  load_rows(s.k, s.ldq, a.k + b * g.k_stride[0] + hk * g.k_stride[1] + k0 * g.k_stride[2], g.k_stride[2], valid, g.d);
  load_rows(s.v, s.ldv, a.v + b * g.v_stride[0] + hk * g.v_stride[1] + k0 * g.v_stride[2], g.v_stride[2], valid, g.dv);
}

/// p and ds of the loaded 32 x 32 tile (queries q0.., keys k0.. of head (b, h)) into s.p and
/// s.ds: thread (lane c, warp w) takes key c of rows w, w + 8, w + 16, w + 24 (the query rows
/// are broadcast within the warp; the key rows' odd stride spreads the lanes over the banks).
template <typename T>
__device__ __forceinline__ void generic_scores(const BwdArgs<T>& a, const GenericSmem& s, int64_t b, int64_t h, int64_t q0, int64_t k0) {
  const attention::Geometry& g = a.g;
  const int c = threadIdx.x % kGenericRows, w = threadIdx.x / kGenericRows;
  float dot[4] = {0.f, 0.f, 0.f, 0.f}, dp[4] = {0.f, 0.f, 0.f, 0.f};
  const float* kr = s.k + c * s.ldq;
  for (int d = 0; d < g.d; ++d) {
    const float kv = kr[d];
#pragma unroll
    for (int m = 0; m < 4; ++m) dot[m] += s.q[(w + 8 * m) * s.ldq + d] * kv;
  }
  const float* vr = s.v + c * s.ldv;
  for (int e = 0; e < g.dv; ++e) {
    const float vv = vr[e];
#pragma unroll
    for (int m = 0; m < 4; ++m) dp[m] += s.dout[(w + 8 * m) * s.ldv + e] * vv;
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int r = w + 8 * m;
    const float p = prob(a, b, h, q0 + r, k0 + c, dot[m], s.lse2[r]);
    s.p[r * (kGenericRows + 1) + c] = p;
    s.ds[r * (kGenericRows + 1) + c] = p * (dp[m] - s.delta[r]);
  }
}

/// dk and dv of 32 keys (a block per (b, key head, key tile); tiles first): thread (lane c,
/// warp w) accumulates key c's columns w, w + 8, ... (DM / 8 of each, DM >= D, Dv).
template <typename T, int DM>
__global__ void __launch_bounds__(kGenericThreads, 1) generic_dkdv_kernel(__grid_constant__ const BwdArgs<T> a) {
  extern __shared__ float generic_smem[];
  const attention::Geometry& g = a.g;
  const GenericSmem s(generic_smem, g.d, g.dv);
  const int64_t tiles = (g.lk + kGenericRows - 1) / kGenericRows;
  const int64_t k0 = (blockIdx.x % tiles) * kGenericRows, bk = blockIdx.x / tiles;
  const int64_t b = bk / g.hkv, hk = bk % g.hkv, group = g.group();
  const int c = threadIdx.x % kGenericRows, w = threadIdx.x / kGenericRows;
  load_key_tile(a, s, b, hk, k0);
  int64_t lo, hi;
  query_range(g, k0, k0 + kGenericRows < g.lk ? k0 + kGenericRows : g.lk, lo, hi);
  float dk[DM / 8], dv[DM / 8];
#pragma unroll
  for (int m = 0; m < DM / 8; ++m) dk[m] = dv[m] = 0.f;
  for (int64_t gi = 0; gi < group; ++gi) {
    const int64_t h = hk * group + gi;
    for (int64_t q0 = lo; q0 < hi; q0 += kGenericRows) {
      __syncthreads(); // the previous tile's readers are done
      load_query_tile(a, s, b, h, q0);
      __syncthreads();
      generic_scores(a, s, b, h, q0, k0);
      __syncthreads();
#pragma unroll 2
      for (int r = 0; r < kGenericRows; ++r) {
        const float p = s.p[r * (kGenericRows + 1) + c], ds = s.ds[r * (kGenericRows + 1) + c];
#pragma unroll
        for (int m = 0; m < DM / 8; ++m) {
          const int e = w + 8 * m;
          if (e < g.dv) dv[m] += p * s.dout[r * s.ldv + e];
          if (e < g.d) dk[m] += ds * s.q[r * s.ldq + e];
        }
      }
    }
  }
  if (k0 + c >= g.lk) return;
  const int64_t row = (bk * g.lk + k0 + c);
  const float* u = a.uniform ? a.uniform + bk * g.dv : nullptr;
#pragma unroll
  for (int m = 0; m < DM / 8; ++m) {
    const int e = w + 8 * m;
    if (e < g.d) a.dk[row * g.d + e] = store_as<T>(dk[m] * g.scale);
    if (e < g.dv) a.dv[row * g.dv + e] = store_as<T>(u ? dv[m] + u[e] : dv[m]);
  }
}

/// dq of 32 queries (a block per (b, query head, query tile); the last tiles, which see the
/// most keys under causal, first): thread (lane r, warp w) accumulates query r's columns
/// w, w + 8, ...
template <typename T, int DM>
__global__ void __launch_bounds__(kGenericThreads, 1) generic_dq_kernel(__grid_constant__ const BwdArgs<T> a) {
  extern __shared__ float generic_smem[];
  const attention::Geometry& g = a.g;
  const GenericSmem s(generic_smem, g.d, g.dv);
  const int64_t tiles = (g.lq + kGenericRows - 1) / kGenericRows;
  const int64_t q0 = (tiles - 1 - blockIdx.x % tiles) * kGenericRows, bh = blockIdx.x / tiles;
  const int64_t b = bh / g.hq, h = bh % g.hq, hk = h / g.group();
  const int r = threadIdx.x % kGenericRows, w = threadIdx.x / kGenericRows;
  load_query_tile(a, s, b, h, q0);
  int64_t lo, hi;
  key_span(g, q0, q0 + kGenericRows < g.lq ? q0 + kGenericRows : g.lq, lo, hi);
  float dq[DM / 8];
#pragma unroll
  for (int m = 0; m < DM / 8; ++m) dq[m] = 0.f;
  for (int64_t k0 = lo; k0 < hi; k0 += kGenericRows) {
    __syncthreads();
    load_key_tile(a, s, b, hk, k0);
    __syncthreads();
    generic_scores(a, s, b, h, q0, k0);
    __syncthreads();
#pragma unroll 2
    for (int c = 0; c < kGenericRows; ++c) {
      const float ds = s.ds[r * (kGenericRows + 1) + c];
#pragma unroll
      for (int m = 0; m < DM / 8; ++m) {
        const int e = w + 8 * m;
        if (e < g.d) dq[m] += ds * s.k[c * s.ldq + e];
      }
    }
  }
  if (q0 + r >= g.lq) return;
  T* out = a.dq + (bh * g.lq + q0 + r) * g.d;
#pragma unroll
  for (int m = 0; m < DM / 8; ++m) {
    const int e = w + 8 * m;
    if (e < g.d) out[e] = store_as<T>(dq[m] * g.scale);
  }
}

// ---- 3, 4 on tensor cores: float16 / bfloat16, D == Dv in {64, 128, 256} (256: two dk/dv launches) --

/// Shared-memory rows of the tensor-core kernels: D elements padded by 16 bytes, so the 8
/// rows of one ldmatrix (16 bytes each, at one column) fall in 8 different 16-byte bank
/// groups, and every row start stays 16-byte aligned for cp.async.
template <int D>
constexpr int kLd = D + 8;

/// Issues the cp.async copies of `rows` rows of D elements (row r at src + r · stride, valid
/// while r < valid; others zero-filled) into dst (row stride kLd<D>), NT threads.
template <int NT, int D, typename T>
__device__ __forceinline__ void async_rows(T* dst, const T* src, int64_t stride, int64_t valid, int rows) {
  constexpr int kChunks = D / 8; // 16-byte pieces of a row
  for (int n = threadIdx.x; n < rows * kChunks; n += NT) {
    const int r = n / kChunks, c = n % kChunks;
    const bool in = r < valid;
    cp_async_16(dst + r * kLd<D> + c * 8, in ? src + r * stride + c * 8 : src, in);
  }
}

/// Stores a warp's 16 x (8 · N) float32 accumulator tile (rows row0.., mma C layout) times
/// `mul`, plus add[col] when given, rounded to T, into shared rows of stride kLd<D>.
template <typename T, int D, int N>
__device__ __forceinline__ void stage_tile(T* dst, int row0, const float (&acc)[N][4], float mul, const float* add) {
  const int lane = threadIdx.x % kWarpSize, g8 = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const int col = n * 8 + 2 * t4;
    const float a0 = add ? add[col] : 0.f, a1 = add ? add[col + 1] : 0.f;
    *reinterpret_cast<uint32_t*>(dst + (row0 + g8) * kLd<D> + col) = pack2<T>(acc[n][0] * mul + a0, acc[n][1] * mul + a1);
    *reinterpret_cast<uint32_t*>(dst + (row0 + g8 + 8) * kLd<D> + col) = pack2<T>(acc[n][2] * mul + a0, acc[n][3] * mul + a1);
  }
}

/// Copies `rows` staged rows (stride kLd<D>) to dst rows of D elements (rows from `valid` on
/// are dropped), 16 bytes a thread.
template <int NT, int D, typename T>
__device__ __forceinline__ void store_rows(T* dst, const T* src, int64_t valid, int rows) {
  constexpr int kChunks = D / 8;
  for (int n = threadIdx.x; n < rows * kChunks; n += NT) {
    const int r = n / kChunks, c = n % kChunks;
    if (r < valid) *reinterpret_cast<uint4*>(dst + int64_t(r) * D + c * 8) = *reinterpret_cast<const uint4*>(src + r * kLd<D> + c * 8);
  }
}

/// acc[2n], acc[2n + 1] += A · B over the kdim/16 k16 steps, where the warp's A rows (16 of
/// them, k contiguous) start at `a_rows` (stride kLd<K>) and B is given as the rows of Bᵀ
/// (`nt` n8 tiles of them, k contiguous) at `b_rows` (stride kLd<K>): the products
/// S = Q Kᵀ, dP = dO Vᵀ and their transposes.
template <typename T, int K, int NT8, int KSTEPS = K / 16>
__device__ __forceinline__ void mma_abt(float (&acc)[NT8][4], const T* a_rows, const T* b_rows) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, a_rows + (lane % 16) * kLd<K> + kk * 16 + 8 * (lane / 16));
#pragma unroll
    for (int n = 0; n < NT8 / 2; ++n) {
      uint32_t b[4];
      ldmatrix_x4(b, b_rows + (n * 16 + 8 * (lane / 16) + lane % 8) * kLd<K> + kk * 16 + 8 * ((lane / 8) % 2));
      mma_m16n8k16<T>(acc[2 * n], a, {b[0], b[1]});
      mma_m16n8k16<T>(acc[2 * n + 1], a, {b[2], b[3]});
    }
  }
}

/// acc (16 x N) += A · B where A (16 x 8 · KT8) is in registers as a float32 accumulator
/// tile (C layout; rounded to T here) and B (8 · KT8 x N) is row-major in shared memory at
/// `b_rows` (stride kLd<N>): dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K.
template <typename T, int N, int KT8>
__device__ __forceinline__ void mma_cb(float (&acc)[N / 8][4], const float (&c)[KT8][4], const T* b_rows) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int kk = 0; kk < KT8 / 2; ++kk) {
    const uint32_t a[4] = {
        pack2<T>(c[2 * kk][0], c[2 * kk][1]), pack2<T>(c[2 * kk][2], c[2 * kk][3]),
        pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]), pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3])};
#pragma unroll
    for (int n = 0; n < N / 16; ++n) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, b_rows + (kk * 16 + lane % 16) * kLd<N> + n * 16 + 8 * (lane / 16));
      mma_m16n8k16<T>(acc[2 * n], a, {b[0], b[1]});
      mma_m16n8k16<T>(acc[2 * n + 1], a, {b[2], b[3]});
    }
  }
}

/// Tile shapes of the tensor-core kernels: 8 warps, 16 rows each (FlashAttention-2's
/// backward block of 128 keys: each query tile a dk/dv block loads from L2 serves 128 keys,
/// and each key tile a dq block loads serves 128 queries, which halves the L2 traffic of 64-row
/// blocks; at about 250 registers a thread one block fills an SM's register file). dk/dv:
/// 128 keys a block, query tiles of BM (32 for D 128: 128 accumulators of dk and dv plus 32
/// of p and ds a thread; 64 for D 64). dq: 128 queries a block, key tiles of BN (64).
/// D 256: 128 accumulators a thread are one of dk, dv or dq, so the dk/dv kernel runs twice,
/// once for each (kDkdvTogether), and the streamed tiles are 16 rows (the block's own rows take
/// 132 KB of shared memory; 182 KB in all).
constexpr int kTcWarps = 8;
constexpr int kTcThreads = kTcWarps * kWarpSize;
constexpr int kTcRows = 16 * kTcWarps;
template <int D>
constexpr int kDkdvBm = D >= 256 ? 16 : D >= 128 ? 32 : 64;
template <int D>
constexpr int kDqBn = D >= 256 ? 16 : 64;
/// Which accumulators a tc_dkdv_kernel keeps (a bit mask): both below D 256, one a launch there.
enum DkdvPart : int { kDvPart = 1, kDkPart = 2, kBothParts = 3 };
/// Whether one dk/dv launch keeps both accumulators (else one launch for dv, one for dk).
template <int D>
constexpr bool kDkdvTogether = D < 256;
/// Shared-memory stages of the streamed tiles. Three let one barrier a step do: the tile
/// issued at the top of step n (for step n + 2) refills the stage step n − 1 read, which every
/// warp has left once it passes step n's barrier; the copies get two steps to land.
constexpr int kStages = 3;
static_assert(kRowPad % kDkdvBm<64> == 0 && kRowPad % kDkdvBm<128> == 0 && kRowPad % kDkdvBm<256> == 0 &&
              kRowPad % kTcRows == 0);

/// Dynamic shared memory of tc_dkdv_kernel: the block's keys and values, kStages stages of
/// the query tile's q and dout and of its lse2 and delta (bf16: 123 KB at D 128, 182 KB at
/// D 256).
template <typename T, int D>
constexpr size_t dkdv_smem_bytes() {
  return sizeof(T) * (2 * kTcRows + 2 * kStages * kDkdvBm<D>) * kLd<D> + sizeof(float) * 2 * kStages * kDkdvBm<D>;
}
/// Dynamic shared memory of tc_dq_kernel: the block's q and dout, kStages stages of the key
/// tile's keys and values (bf16: 174 KB at D 128, 182 KB at D 256).
template <typename T, int D>
constexpr size_t dq_smem_bytes() {
  return sizeof(T) * (2 * kTcRows + 2 * kStages * kDqBn<D>) * kLd<D>;
}

/// The top of step n of a stream of `steps` tiles (kStages deep, tiles 0 .. kStages − 2
/// issued before the loop): waits for tile n (this thread's copies, then everyone's at the
/// barrier), then issues tile n + kStages − 1 into the stage step n − 1 used. Returns tile
/// n's stage.
template <typename Issue>
__device__ __forceinline__ int stream_step(int64_t n, int64_t steps, const Issue& issue) {
  static_assert(kStages == 3, "the waits below count kStages − 2 = 1 younger group");
  if (n + 1 < steps) cp_async_wait<1>();
  else cp_async_wait<0>();
  __syncthreads();
  if (n + kStages - 1 < steps) issue(n + kStages - 1, static_cast<int>((n + kStages - 1) % kStages));
  return static_cast<int>(n % kStages);
}

/// dk and dv of 128 keys on tensor cores (a block per (b, key head, key tile)). Warp w owns
/// keys k0 + 16w..: per query tile it computes Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ (16 x BM), turns
/// them into Pᵀ and dSᵀ in registers, and adds Pᵀ dO to dv and dSᵀ Q to dk. Query tiles
/// (every query head of the group, the causal range only) stream in kStages − 1 ahead.
/// kParts (DkdvPart) selects the outputs: dv alone needs neither V nor dPᵀ.
template <typename T, int D, int kParts>
__global__ void __launch_bounds__(kTcThreads) tc_dkdv_kernel(__grid_constant__ const BwdArgs<T> a) {
  constexpr bool kDv = (kParts & kDvPart) != 0, kDk = (kParts & kDkPart) != 0;
  constexpr int BM = kDkdvBm<D>, LD = kLd<D>;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  T* sk = reinterpret_cast<T*>(tc_smem);
  T* sv = sk + kTcRows * LD;
  T* sq = sv + kTcRows * LD;        // kStages stages of BM rows
  T* sdo = sq + kStages * BM * LD;  // kStages stages
  float* sl = reinterpret_cast<float*>(sdo + kStages * BM * LD); // kStages stages of lse2, then of delta
  float* sd = sl + kStages * BM;
  const attention::Geometry& g = a.g;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, g8 = lane / 4, t4 = lane % 4;
  const int64_t tiles = (g.lk + kTcRows - 1) / kTcRows;
  const int64_t k0 = (blockIdx.x % tiles) * kTcRows, bk = blockIdx.x / tiles;
  const int64_t b = bk / g.hkv, hk = bk % g.hkv, group = g.group();
  const int64_t k1 = k0 + kTcRows < g.lk ? k0 + kTcRows : g.lk;

  async_rows<kTcThreads, D>(sk, a.k + b * g.k_stride[0] + hk * g.k_stride[1] + k0 * g.k_stride[2], g.k_stride[2], k1 - k0, kTcRows);
  if constexpr (kDk) {
    async_rows<kTcThreads, D>(sv, a.v + b * g.v_stride[0] + hk * g.v_stride[1] + k0 * g.v_stride[2], g.v_stride[2], k1 - k0, kTcRows);
  }
  cp_async_commit();

  int64_t lo, hi;
  query_range(g, k0, k1, lo, hi);
  const int64_t start = lo / BM * BM;
  const int64_t per_head = hi > lo ? (hi - start + BM - 1) / BM : 0;
  const int64_t steps = group * per_head;
  // Step n: query head hk · group + n / per_head, rows start + (n % per_head) · BM.
  auto issue = [&](int64_t n, int stage) {
    const int64_t h = hk * group + n / per_head, q0 = start + (n % per_head) * BM, bh = b * g.hq + h;
    async_rows<kTcThreads, D>(sq + stage * BM * LD, a.q + b * g.q_stride[0] + h * g.q_stride[1] + q0 * g.q_stride[2], g.q_stride[2], g.lq - q0, BM);
    async_rows<kTcThreads, D>(sdo + stage * BM * LD, a.dout + (bh * g.lq + q0) * D, D, g.lq - q0, BM);
    // lse2 and delta (dk only): BM / 4 vectors each, inside the head's padded rows (q0 + BM <= lqp).
    if (threadIdx.x < (kDk ? BM / 2 : BM / 4)) {
      const int half = threadIdx.x / (BM / 4), c = threadIdx.x % (BM / 4);
      const float* src = (half ? a.delta : a.lse2) + bh * a.lqp + q0 + 4 * c;
      cp_async_16((half ? sd : sl) + stage * BM + 4 * c, src, true);
    }
    cp_async_commit();
  };

  // An accumulator a launch does not keep has one unused row (sizes must be positive).
  float dk[kDk ? D / 8 : 1][4], dv[kDv ? D / 8 : 1][4];
#pragma unroll
  for (int n = 0; n < (kDk ? D / 8 : 1); ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = 0.f;
  }
#pragma unroll
  for (int n = 0; n < (kDv ? D / 8 : 1); ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dv[n][e] = 0.f;
  }
  for (int64_t n = 0; n < kStages - 1 && n < steps; ++n) issue(n, static_cast<int>(n));
  const int64_t j_lo = k0 + 16 * warp; // this warp's keys
  for (int64_t n = 0; n < steps; ++n) {
    const int stage = stream_step(n, steps, issue);
    const int64_t h = hk * group + n / per_head, q0 = start + (n % per_head) * BM;
    const T* q_s = sq + stage * BM * LD;
    const T* do_s = sdo + stage * BM * LD;
    const float* l_s = sl + stage * BM;
    const float* d_s = sd + stage * BM;

    float s[BM / 8][4], dp[BM / 8][4];
#pragma unroll
    for (int m = 0; m < BM / 8; ++m) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[m][e] = dp[m][e] = 0.f;
    }
    mma_abt<T, D, BM / 8>(s, sk + 16 * warp * LD, q_s);
    if constexpr (kDk) mma_abt<T, D, BM / 8>(dp, sv + 16 * warp * LD, do_s);
    // Sᵀ element (key row, query col): row g8 (+8 for e >= 2), col 8m + 2 t4 (+1 for odd e).
    const bool full = all_visible(g, q0, q0 + BM, j_lo, j_lo + 16);
#pragma unroll
    for (int m = 0; m < BM / 8; ++m) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * m + 2 * t4 + (e & 1);
        const float l2 = l_s[col];
        const float p = full ? exp2_approx(s[m][e] * a.scale_log2 - l2)
                             : prob(a, b, h, q0 + col, j_lo + g8 + (e >= 2 ? 8 : 0), s[m][e], l2);
        if constexpr (kDk) dp[m][e] = p * (dp[m][e] - d_s[col]);
        s[m][e] = p;
      }
    }
    if constexpr (kDv) mma_cb<T, D, BM / 8>(dv, s, do_s);
    if constexpr (kDk) mma_cb<T, D, BM / 8>(dk, dp, q_s);
  }
  cp_async_wait<0>(); // the key tile's copies, when there were no steps
  __syncthreads();    // every warp is done with the tiles before the staging overwrites them
  // Each warp stages its own 16 rows over the key and value tiles, then the block stores.
  if constexpr (kDk) stage_tile<T, D>(sk, 16 * warp, dk, g.scale, nullptr);
  if constexpr (kDv) stage_tile<T, D>(sv, 16 * warp, dv, 1.f, a.uniform ? a.uniform + bk * D : nullptr);
  __syncthreads();
  if constexpr (kDk) store_rows<kTcThreads, D>(a.dk + (bk * g.lk + k0) * D, sk, k1 - k0, kTcRows);
  if constexpr (kDv) store_rows<kTcThreads, D>(a.dv + (bk * g.lk + k0) * D, sv, k1 - k0, kTcRows);
}

/// dq of 128 queries on tensor cores (a block per (b, query head, query tile); the last tiles
/// first). Warp w owns queries q0 + 16w..: per key tile it computes S = Q_w Kᵀ and
/// dP = dO_w Vᵀ (16 x BN), turns them into dS in registers and adds dS K to dq. Key tiles
/// (the causal span only) stream in kStages − 1 ahead.
template <typename T, int D>
__global__ void __launch_bounds__(kTcThreads) tc_dq_kernel(__grid_constant__ const BwdArgs<T> a) {
  constexpr int BN = kDqBn<D>, LD = kLd<D>;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  T* sq = reinterpret_cast<T*>(tc_smem);
  T* sdo = sq + kTcRows * LD;
  T* sk = sdo + kTcRows * LD;     // kStages stages of BN rows
  T* sv = sk + kStages * BN * LD; // kStages stages
  const attention::Geometry& g = a.g;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, g8 = lane / 4, t4 = lane % 4;
  const int64_t tiles = (g.lq + kTcRows - 1) / kTcRows;
  const int64_t q0 = (tiles - 1 - blockIdx.x % tiles) * kTcRows, bh = blockIdx.x / tiles;
  const int64_t b = bh / g.hq, h = bh % g.hq, hk = h / g.group();
  const int64_t q1 = q0 + kTcRows < g.lq ? q0 + kTcRows : g.lq;

  async_rows<kTcThreads, D>(sq, a.q + b * g.q_stride[0] + h * g.q_stride[1] + q0 * g.q_stride[2], g.q_stride[2], q1 - q0, kTcRows);
  async_rows<kTcThreads, D>(sdo, a.dout + (bh * g.lq + q0) * D, D, q1 - q0, kTcRows);
  cp_async_commit();

  int64_t lo, hi;
  key_span(g, q0, q1, lo, hi);
  const int64_t start = lo / BN * BN;
  const int64_t steps = hi > lo ? (hi - start + BN - 1) / BN : 0;
  const T* kbase = a.k + b * g.k_stride[0] + hk * g.k_stride[1];
  const T* vbase = a.v + b * g.v_stride[0] + hk * g.v_stride[1];
  auto issue = [&](int64_t n, int stage) {
    const int64_t k0 = start + n * BN;
    async_rows<kTcThreads, D>(sk + stage * BN * LD, kbase + k0 * g.k_stride[2], g.k_stride[2], g.lk - k0, BN);
    async_rows<kTcThreads, D>(sv + stage * BN * LD, vbase + k0 * g.v_stride[2], g.v_stride[2], g.lk - k0, BN);
    cp_async_commit();
  };

  // This thread's two query rows (g8 and g8 + 8 of the warp's 16), inside the padded rows.
  const int64_t i0 = q0 + 16 * warp + g8;
  const float l2[2] = {a.lse2[bh * a.lqp + i0], a.lse2[bh * a.lqp + i0 + 8]};
  const float dl[2] = {a.delta[bh * a.lqp + i0], a.delta[bh * a.lqp + i0 + 8]};

  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dq[n][e] = 0.f;
  }
  for (int64_t n = 0; n < kStages - 1 && n < steps; ++n) issue(n, static_cast<int>(n));
  for (int64_t n = 0; n < steps; ++n) {
    const int stage = stream_step(n, steps, issue);
    const int64_t k0 = start + n * BN;
    const T* k_s = sk + stage * BN * LD;
    const T* v_s = sv + stage * BN * LD;
    float s[BN / 8][4], dp[BN / 8][4];
#pragma unroll
    for (int m = 0; m < BN / 8; ++m) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[m][e] = dp[m][e] = 0.f;
    }
    mma_abt<T, D, BN / 8>(s, sq + 16 * warp * LD, k_s);
    mma_abt<T, D, BN / 8>(dp, sdo + 16 * warp * LD, v_s);
    // S element (query row, key col): row g8 (+8 for e >= 2), col 8m + 2 t4 (+1 for odd e).
    const bool full = all_visible(g, q0 + 16 * warp, q0 + 16 * warp + 16, k0, k0 + BN);
#pragma unroll
    for (int m = 0; m < BN / 8; ++m) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const float p = full ? exp2_approx(s[m][e] * a.scale_log2 - l2[r])
                             : prob(a, b, h, i0 + 8 * r, k0 + 8 * m + 2 * t4 + (e & 1), s[m][e], l2[r]);
        dp[m][e] = p * (dp[m][e] - dl[r]);
      }
    }
    mma_cb<T, D, BN / 8>(dq, dp, k_s);
  }
  cp_async_wait<0>(); // the q and dout copies, when there were no steps
  __syncthreads();    // every warp is done with the tiles before the staging overwrites sq
  stage_tile<T, D>(sq, 16 * warp, dq, g.scale, nullptr);
  __syncthreads();
  store_rows<kTcThreads, D>(a.dq + (bh * g.lq + q0) * D, sq, q1 - q0, kTcRows);
}

// ---- 3 + 4 on Hopper: one wgmma kernel, dq through float32 atomics -----------------------

/// Shape of the Hopper kernel: two warpgroups, 128 keys a block (64 a warpgroup), 64 queries
/// a step (FlashAttention-3's backward tile for D 128). Per step each warpgroup computes
/// Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ (64 x 64, A and B from shared memory), turns them into Pᵀ
/// and dSᵀ in registers, adds Pᵀ dO to dv and dSᵀ Q to dk (A from registers), writes dSᵀ to
/// shared memory, and after a barrier computes its half of the columns of dQ = dS K (64 x D/2
/// over all 128 keys) and adds it to a float32 scratch with red.global.add.v4: five products
/// a pair of tiles instead of the two-kernel path's seven, each warpgroup-wide (64-row
/// operands, so a byte read from shared memory feeds 4x the multiply-adds of mma.sync's
/// 16-row warp tiles).
constexpr int kWgThreads = 256;
constexpr int kWgKeys = 128;
constexpr int kWgQueries = 64;
constexpr int kWgStages = 2; // q, dout, lse2, delta stages: the next tile loads during a step
static_assert(kRowPad % kWgQueries == 0);

/// Byte offsets of the Hopper kernel's shared memory from its 1024-aligned base (each tile in
/// the 128-byte-swizzled layout of device/wgmma.cuh): the block's keys and values (128 x D),
/// kWgStages stages of the step's q and dout (64 x D), dSᵀ (128 keys x 64 queries), then
/// kWgStages stages of the step's lse2 and of its delta (64 floats each). D 128: 146 KB.
template <int D>
struct WgLayout {
  static constexpr uint32_t kv_tile = kWgKeys * D * 2, q_tile = kWgQueries * D * 2;
  static constexpr uint32_t k = 0, v = kv_tile, q = 2 * kv_tile, dout = q + kWgStages * q_tile;
  static constexpr uint32_t ds = dout + kWgStages * q_tile;
  static constexpr uint32_t lse2 = ds + kWgKeys * kWgQueries * 2, delta = lse2 + kWgStages * kWgQueries * 4;
  static constexpr uint32_t end = delta + kWgStages * kWgQueries * 4;
  static constexpr size_t bytes = end + 1024; // room to align the base up to 1024
};

/// Issues the cp.async copies of `rows` rows of D elements (row r at src + r · stride, valid
/// while r < valid, others zero-filled) into the R-row 128-byte-swizzled tile at shared
/// address dst, by all kWgThreads threads.
template <int R, int D, typename T>
__device__ __forceinline__ void async_sw128(uint32_t dst, const T* src, int64_t stride, int64_t valid) {
  constexpr int kChunks = D / 8;
  static_assert(R * kChunks % kWgThreads == 0);
#pragma unroll
  for (int i = 0; i < R * kChunks / kWgThreads; ++i) {
    const int n = threadIdx.x + i * kWgThreads, r = n / kChunks, c = n % kChunks;
    const bool in = r < valid;
    cp_async_16(dst + sw128_offset<R>(r, c), in ? src + r * stride + c * 8 : src, in);
  }
}

/// x, opaque to the optimiser (an empty asm): values computed from it inside a loop stay
/// inside the loop.
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

/// Byte offset of row r's 16-byte chunk c in the output staging of the Hopper kernel: rows
/// of D elements back to back, chunks XOR-swizzled by r % 8 (so the accumulator rows g, g + 8
/// of a warp's stores land in distinct banks).
template <int D>
__device__ __forceinline__ uint32_t stage_offset(int r, int c) {
  return static_cast<uint32_t>(r * D * 2 + ((c ^ (r & 7)) << 4));
}

/// Steps 3 and 4 in one kernel on Hopper tensor cores (wgmma; float16 and bfloat16, D == Dv
/// in {64, 128}): a block per (b, key head, 128 keys), like tc_dkdv_kernel (GQA reduced in
/// the block, causal tiles that see none of its keys skipped), plus dq added into a.dq_acc
/// (see dq_convert_kernel for its layout). Not deterministic in dq: the float32 additions of
/// the key blocks land in any order. dk, dv, dsinks are.
template <typename T, int D, bool Masked>
__global__ void __launch_bounds__(kWgThreads, 1) wg_bwd_kernel(__grid_constant__ const BwdArgs<T> a) {
#if defined(NUVEC_WGMMA_AVAILABLE)
  using L = WgLayout<D>;
  static_assert(D == 64 || D == 128);
  constexpr int KS = D / 16;     // k16 steps over the head dimension
  constexpr int DH = D / 2;      // dq columns of a warpgroup
  extern __shared__ __align__(16) unsigned char wg_smem[];
  const uint32_t raw = smem_addr(wg_smem), base = (raw + 1023u) & ~1023u;
  unsigned char* const sbase = wg_smem + (base - raw);
  const attention::Geometry& g = a.g;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / kWarpSize;
  const int lane = tid % kWarpSize, g8 = lane / 4, t4 = lane % 4;
  const int64_t tiles = (g.lk + kWgKeys - 1) / kWgKeys;
  const int64_t k0 = (blockIdx.x % tiles) * kWgKeys, bk = blockIdx.x / tiles;
  const int64_t b = bk / g.hkv, hk = bk % g.hkv, group = g.group();
  const int64_t k1 = k0 + kWgKeys < g.lk ? k0 + kWgKeys : g.lk;

  async_sw128<kWgKeys, D>(base + L::k, a.k + b * g.k_stride[0] + hk * g.k_stride[1] + k0 * g.k_stride[2], g.k_stride[2], k1 - k0);
  async_sw128<kWgKeys, D>(base + L::v, a.v + b * g.v_stride[0] + hk * g.v_stride[1] + k0 * g.v_stride[2], g.v_stride[2], k1 - k0);
  cp_async_commit();

  int64_t lo, hi;
  query_range(g, k0, k1, lo, hi);
  const int64_t start = lo / kWgQueries * kWgQueries;
  const int64_t per_head = hi > lo ? (hi - start + kWgQueries - 1) / kWgQueries : 0;
  const int64_t steps = group * per_head;
  // Step n: query head hk · group + n / per_head, rows start + (n % per_head) · 64.
  auto issue = [&](uint32_t base, int64_t n, int stage) {
    const int64_t h = hk * group + n / per_head, q0 = start + (n % per_head) * kWgQueries, bh = b * g.hq + h;
    async_sw128<kWgQueries, D>(base + L::q + stage * L::q_tile, a.q + b * g.q_stride[0] + h * g.q_stride[1] + q0 * g.q_stride[2],
                               g.q_stride[2], g.lq - q0);
    async_sw128<kWgQueries, D>(base + L::dout + stage * L::q_tile, a.dout + (bh * g.lq + q0) * D, D, g.lq - q0);
    // lse2 and delta: 16 vectors each, inside the head's padded rows (q0 + 64 <= lqp).
    if (tid < 32) {
      const int half = tid / 16, c = tid % 16;
      const float* src = (half ? a.delta : a.lse2) + bh * a.lqp + q0 + 4 * c;
      cp_async_16(base + (half ? L::delta : L::lse2) + stage * kWgQueries * 4 + 16 * c, src, true);
    }
    cp_async_commit();
  };
  if (steps > 0) issue(base, 0, 0);

  float dk[DH], dv[DH]; // this warpgroup's 64 keys x D (accumulator layout, N = D)
#pragma unroll
  for (int i = 0; i < DH; ++i) dk[i] = dv[i] = 0.f;
  const int64_t j_lo = k0 + 64 * wg; // the warpgroup's first key
  const int krow = 64 * wg + 16 * warp + g8; // this thread's key rows krow, krow + 8 (in the block)
  const int lq = static_cast<int>(g.lq), lk = static_cast<int>(g.lk), off = lk - lq;

  for (int64_t n = 0; n < steps; ++n) {
    cp_async_wait<0>(); // tile n (issued a step ago; with the keys at n = 0)
    fence_proxy_async();
    __syncthreads(); // tile n visible; every warpgroup is done with step n − 1's stage and dS
    // Shared addresses are derived from an opaque copy of the base each step, so that the
    // compiler recomputes the ~50 descriptors of a step (a few integer operations each)
    // rather than holding them all in registers across the loop.
    const uint32_t sb = opaque(base);
    if (n + 1 < steps) issue(sb, n + 1, static_cast<int>((n + 1) % kWgStages));
    const int stage = static_cast<int>(n % kWgStages);
    const int64_t h = hk * group + n / per_head, q0 = start + (n % per_head) * kWgQueries, bh = b * g.hq + h;
    const uint32_t sq = sb + L::q + stage * L::q_tile, sdo = sb + L::dout + stage * L::q_tile;
    // The warpgroup's 64 key rows of the K and V tiles (K-major A operands of Sᵀ and dPᵀ).
    const uint32_t k_rows = sb + L::k + wg * 64 * 128, v_rows = sb + L::v + wg * 64 * 128;
    const float* l_s = reinterpret_cast<const float*>(sbase + L::lse2 + stage * kWgQueries * 4);
    const float* d_s = reinterpret_cast<const float*>(sbase + L::delta + stage * kWgQueries * 4);

    // Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ: both operands K-major (rows of keys, rows of queries).
    // (The first k16 step overwrites the accumulators: scale_d 0.)
    float s[32], dp[32];
    fence_regs(dk);
    fence_regs(dv);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const uint32_t ko = (kk / 4) * kWgKeys * 128 + (kk % 4) * 32, qo = (kk / 4) * kWgQueries * 128 + (kk % 4) * 32;
      Wgmma<64>::template ss<T, 0, 0>(s, sw128_desc(k_rows + ko, 16, 1024), sw128_desc(sq + qo, 16, 1024), kk > 0);
    }
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const uint32_t ko = (kk / 4) * kWgKeys * 128 + (kk % 4) * 32, qo = (kk / 4) * kWgQueries * 128 + (kk % 4) * 32;
      Wgmma<64>::template ss<T, 0, 0>(dp, sw128_desc(v_rows + ko, 16, 1024), sw128_desc(sdo + qo, 16, 1024), kk > 0);
    }
    wgmma_commit();

    // Pᵀ while dPᵀ is still being computed. Element s[4j + e]: key krow (+8 for e >= 2),
    // query q0 + 8j + 2 t4 (+1 for odd e).
    wgmma_wait<1>();
    fence_regs(s);
    const bool full = all_visible(g, q0, q0 + kWgQueries, j_lo, j_lo + 64);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 l2 = *reinterpret_cast<const float2*>(l_s + 8 * j + 2 * t4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + 2 * t4 + (e & 1);
        const float lse2 = (e & 1) ? l2.y : l2.x;
        float& x = s[4 * j + e];
        if constexpr (Masked) {
          x = full ? exp2_approx(x * a.scale_log2 - lse2) : prob(a, b, h, q0 + col, k0 + krow + (e >= 2 ? 8 : 0), x, lse2);
        } else {
          // No mask: the pair is hidden only outside the sizes or the causal window (int32
          // arithmetic: fewer registers than prob's general path).
          const int qi = static_cast<int>(q0) + col, kj = static_cast<int>(k0) + krow + (e >= 2 ? 8 : 0);
          const int last = qi + off;
          const bool vis = full || (qi < lq && kj < lk && (!g.causal || (kj <= last && (g.window == 0 || kj > last - g.window))));
          x = vis ? exp2_approx(x * a.scale_log2 - lse2) : 0.f;
        }
      }
    }
    uint32_t pa[4][4], da[4][4]; // Pᵀ and dSᵀ as the A operands of k16 steps over the queries
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }
    wgmma_wait<0>();
    fence_regs(dp);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 dl = *reinterpret_cast<const float2*>(d_s + 8 * j + 2 * t4);
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[4 * j + e] = s[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? dl.y : dl.x));
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) da[kk][r] = pack2<T>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
    }
    // dSᵀ into shared memory (rows of keys, columns of queries) for dQ: fragment da[kk][r]
    // holds row krow + 8 (r % 2), columns 16kk + 8 (r / 2) + 2 t4, +1, i.e. chunk 2kk + r / 2.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = krow + 8 * (r % 2);
        *reinterpret_cast<uint32_t*>(sbase + L::ds + sw128_offset<kWgKeys>(row, 2 * kk + r / 2) + 4 * t4) = da[kk][r];
      }
    }

    // dV += Pᵀ dO, dK += dSᵀ Q: B MN-major (rows = queries = K, columns = head dims = N).
    fence_regs(pa);
    fence_regs(da);
    fence_regs(dk);
    fence_regs(dv);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) Wgmma<D>::template rs<T, 1>(dv, pa[kk], sw128_desc(sdo + kk * 2048, kWgQueries * 128, 1024), 1);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) Wgmma<D>::template rs<T, 1>(dk, da[kk], sw128_desc(sq + kk * 2048, kWgQueries * 128, 1024), 1);
    wgmma_commit();
    fence_proxy_async();
    __syncthreads(); // dSᵀ of both warpgroups written

    // dQ[:, wg · D/2 ..] = dS K over the block's 128 keys: A = dSᵀ tile MN-major (rows = keys
    // = K, columns = queries = M), B = the K tile MN-major (rows = keys, columns = dims = N).
    float dq[DH / 2];
    const uint32_t kcols = sb + L::k + (wg * DH / 64) * kWgKeys * 128 + (wg * DH % 64) * 2;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgKeys / 16; ++kk) {
      Wgmma<DH>::template ss<T, 1, 1>(dq, sw128_desc(sb + L::ds + kk * 2048, kWgKeys * 128, 1024),
                                      sw128_desc(kcols + kk * 2048, kWgKeys * 128, 1024), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(dv);
    fence_regs(dk);
    fence_regs(dq);
    fence_regs(pa);
    fence_regs(da);
    // dq's tile in fragment order: float4 j of thread tid at (j · 256 + tid) · 4.
    float* acc = a.dq_acc + (bh * a.qtiles + q0 / kWgQueries) * (kWgQueries * D);
#pragma unroll
    for (int j = 0; j < DH / 8; ++j) red_add_v4(acc + (j * kWgThreads + tid) * 4, dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]);
  }
  cp_async_wait<0>(); // the key tile's copies, when there were no steps
  __syncthreads();    // every wgmma reading the key tile is done before the staging overwrites it
  // Stage dk (times scale) over the key tile and dv (plus the no-key rows' share) over the
  // value tile, then store whole rows.
  const float* u = a.uniform ? a.uniform + bk * D : nullptr;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int col = 8 * j + 2 * t4;
    const float u0 = u ? u[col] : 0.f, u1 = u ? u[col + 1] : 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint32_t at = stage_offset<D>(krow + 8 * r, j) + 4 * t4;
      *reinterpret_cast<uint32_t*>(sbase + L::k + at) = pack2<T>(dk[4 * j + 2 * r] * g.scale, dk[4 * j + 2 * r + 1] * g.scale);
      *reinterpret_cast<uint32_t*>(sbase + L::v + at) = pack2<T>(dv[4 * j + 2 * r] + u0, dv[4 * j + 2 * r + 1] + u1);
    }
  }
  __syncthreads();
  constexpr int kChunks = D / 8;
  for (int n = tid; n < kWgKeys * kChunks; n += kWgThreads) {
    const int r = n / kChunks, c = n % kChunks;
    if (r < k1 - k0) {
      const int64_t row = (bk * g.lk + k0 + r) * D + c * 8;
      *reinterpret_cast<uint4*>(a.dk + row) = *reinterpret_cast<const uint4*>(sbase + L::k + stage_offset<D>(r, c));
      *reinterpret_cast<uint4*>(a.dv + row) = *reinterpret_cast<const uint4*>(sbase + L::v + stage_offset<D>(r, c));
    }
  }
#else
  __trap(); // built without sm_90a: run_backward never launches this (wgmma_usable)
#endif
}

/// dq = scale · dq_acc rounded to T. dq_acc holds, per (b, query head, tile of 64 queries),
/// 64 · D floats in wg_bwd_kernel's fragment order: float4 j (0 .. D/16 − 1) of thread tid
/// (warpgroup w = tid / 128, warp v = tid / 32 % 4, lane g, t) at (j · 256 + tid) · 4 holds
/// rows 16v + g (.x, .y) and 16v + g + 8 (.z, .w), columns w · D/2 + 8j + 2t, +1. A block per
/// tile, the same thread numbering.
template <typename T, int D>
__global__ void __launch_bounds__(kWgThreads) dq_convert_kernel(__grid_constant__ const BwdArgs<T> a) {
  const attention::Geometry& g = a.g;
  const int tid = threadIdx.x, lane = tid % kWarpSize, g8 = lane / 4, t4 = lane % 4;
  const int64_t tile = blockIdx.x, bh = tile / a.qtiles, q0 = (tile % a.qtiles) * kWgQueries;
  const int64_t row = q0 + 16 * ((tid / kWarpSize) % 4) + g8;
  const float* acc = a.dq_acc + tile * (kWgQueries * D);
#pragma unroll
  for (int j = 0; j < D / 16; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(acc + (j * kWgThreads + tid) * 4);
    const int col = (tid / 128) * (D / 2) + 8 * j + 2 * t4;
    if (row < g.lq) *reinterpret_cast<uint32_t*>(a.dq + (bh * g.lq + row) * D + col) = pack2<T>(v.x * g.scale, v.y * g.scale);
    if (row + 8 < g.lq) *reinterpret_cast<uint32_t*>(a.dq + (bh * g.lq + row + 8) * D + col) = pack2<T>(v.z * g.scale, v.w * g.scale);
  }
}

// ---- host side ---------------------------------------------------------------------------

/// Raises a kernel's dynamic shared-memory limit to `bytes` (once per kernel and size: the
/// callers keep a static per instantiation).
template <typename Kernel>
bool allow_smem(Kernel kernel, size_t bytes) {
  NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return true;
}

/// Launches kernel over `blocks` blocks (one launch: the block counts here stay far below
/// 2^31 for any array nuvec can hold).
template <typename Kernel, typename A>
void launch(Kernel kernel, int64_t blocks, int threads, size_t smem, const A& args, const char* name) {
  if (blocks <= 0) return;
  if (blocks > (int64_t(1) << 31) - 1) {
    throw std::invalid_argument(std::string("[scaled_dot_product_attention] backward: too many blocks for ") + name);
  }
  kernel<<<static_cast<unsigned>(blocks), threads, smem, stream()>>>(args);
  check_launch(name);
}

/// Steps 3 and 4 on Hopper: dq_acc zeroed, wg_bwd_kernel, dq_convert_kernel.
template <typename T, int D>
void run_wgmma(BwdArgs<T> a) {
  const attention::Geometry& g = a.g;
  a.qtiles = (g.lq + kWgQueries - 1) / kWgQueries;
  const int64_t tiles = g.b * g.hq * a.qtiles;
  const size_t acc_bytes = size_t(tiles) * kWgQueries * D * sizeof(float);
  a.dq_acc = static_cast<float*>(scratch(acc_bytes));
  NUVEC_CUDA_CHECK(cudaMemsetAsync(a.dq_acc, 0, acc_bytes, stream()));
  static const bool ok = allow_smem(wg_bwd_kernel<T, D, false>, WgLayout<D>::bytes) &&
      allow_smem(wg_bwd_kernel<T, D, true>, WgLayout<D>::bytes);
  (void)ok;
  const int64_t blocks = g.b * g.hkv * ((g.lk + kWgKeys - 1) / kWgKeys);
  if (g.has_mask) launch(wg_bwd_kernel<T, D, true>, blocks, kWgThreads, WgLayout<D>::bytes, a, "wg_bwd_kernel");
  else launch(wg_bwd_kernel<T, D, false>, blocks, kWgThreads, WgLayout<D>::bytes, a, "wg_bwd_kernel");
  launch(dq_convert_kernel<T, D>, tiles, kWgThreads, 0, a, "dq_convert_kernel");
}

/// One launch of tc_dkdv_kernel keeping the accumulators kParts.
template <typename T, int D, int kParts>
void launch_dkdv(const BwdArgs<T>& a) {
  constexpr size_t bytes = dkdv_smem_bytes<T, D>();
  static const bool ok = allow_smem(tc_dkdv_kernel<T, D, kParts>, bytes);
  (void)ok;
  const attention::Geometry& g = a.g;
  launch(tc_dkdv_kernel<T, D, kParts>, g.b * g.hkv * ((g.lk + kTcRows - 1) / kTcRows), kTcThreads, bytes, a, "tc_dkdv_kernel");
}

template <typename T, int D>
void run_tensor_cores(const BwdArgs<T>& a) {
  const attention::Geometry& g = a.g;
  if constexpr (D <= 128) {
    if (wgmma_usable()) {
      run_wgmma<T, D>(a);
      return;
    }
  }
  if constexpr (kDkdvTogether<D>) {
    launch_dkdv<T, D, kBothParts>(a);
  } else {
    launch_dkdv<T, D, kDvPart>(a);
    launch_dkdv<T, D, kDkPart>(a);
  }
  {
    constexpr size_t bytes = dq_smem_bytes<T, D>();
    static const bool ok = allow_smem(tc_dq_kernel<T, D>, bytes);
    (void)ok;
    launch(tc_dq_kernel<T, D>, g.b * g.hq * ((g.lq + kTcRows - 1) / kTcRows), kTcThreads, bytes, a, "tc_dq_kernel");
  }
}

template <typename T, int DM>
void run_generic(const BwdArgs<T>& a) {
  const attention::Geometry& g = a.g;
  const size_t bytes = GenericSmem::floats(g.d, g.dv) * sizeof(float);
  static const bool ok1 = allow_smem(generic_dkdv_kernel<T, DM>, GenericSmem::floats(DM, DM) * sizeof(float));
  static const bool ok2 = allow_smem(generic_dq_kernel<T, DM>, GenericSmem::floats(DM, DM) * sizeof(float));
  (void)ok1;
  (void)ok2;
  launch(generic_dkdv_kernel<T, DM>, g.b * g.hkv * ((g.lk + kGenericRows - 1) / kGenericRows), kGenericThreads, bytes, a,
         "generic_dkdv_kernel");
  launch(generic_dq_kernel<T, DM>, g.b * g.hq * ((g.lq + kGenericRows - 1) / kGenericRows), kGenericThreads, bytes, a,
         "generic_dq_kernel");
}

/// Whether D 256 runs the mma.sync kernels (twice for dk/dv) rather than the SIMT ones:
/// NUVEC_ATTENTION_BACKWARD_D256=1, read at each call, until they have run on a GPU
/// (tests/fast_attention_backward_test.cpp, HalfTypesD256OnTensorCores).
bool d256_tensor_cores() {
  return env_switch("NUVEC_ATTENTION_BACKWARD_D256", false);
}

/// Whether the tensor-core kernels take the call: the half types, D == Dv in {64, 128} (and
/// 256 with d256_tensor_cores), and every row of q, k, v, dout and the gradients starting on
/// a 16-byte boundary.
template <typename T>
bool tensor_core_fits(const BwdArgs<T>& a) {
  const attention::Geometry& g = a.g;
  if (g.d != g.dv || (g.d != 64 && g.d != 128 && !(g.d == 256 && d256_tensor_cores()))) return false;
  // D 256's tiles take 182 KB of shared memory: past what GPUs before sm_90 give a block.
  const size_t smem = g.d == 256 ? std::max(dkdv_smem_bytes<T, 256>(), dq_smem_bytes<T, 256>()) : 0;
  if (smem > size_t(device_props().sharedMemPerBlockOptin)) return false;
  for (const int64_t* st : {g.q_stride, g.k_stride, g.v_stride}) {
    for (int i = 0; i < 3; ++i) {
      if (st[i] % 8 != 0) return false;
    }
  }
  for (const void* p : {static_cast<const void*>(a.q), static_cast<const void*>(a.k), static_cast<const void*>(a.v),
                        static_cast<const void*>(a.dout), static_cast<const void*>(a.dq), static_cast<const void*>(a.dk),
                        static_cast<const void*>(a.dv)}) {
    if (!is_aligned(p, 16)) return false;
  }
  return true;
}

/// Runs steps 3 and 4 on tensor cores when they fit the call (tensor_core_fits); false
/// otherwise (nothing launched).
template <typename T>
bool try_tensor_cores(const BwdArgs<T>& a) {
  if constexpr (is_half_device_v<T>) {
    if (!tensor_core_fits(a)) return false;
    if (a.g.d == 64) run_tensor_cores<T, 64>(a);
    else if (a.g.d == 128) run_tensor_cores<T, 128>(a);
    else run_tensor_cores<T, 256>(a);
    return true;
  } else {
    return false;
  }
}

template <typename T>
void run_backward(const attention::Geometry& g, const AttentionGradBuffers& buf) {
  BwdArgs<T> a{};
  a.g = g;
  a.q = static_cast<const T*>(buf.fwd.q);
  a.k = static_cast<const T*>(buf.fwd.k);
  a.v = static_cast<const T*>(buf.fwd.v);
  if (g.has_mask) {
    if (g.bool_mask) a.bool_mask = static_cast<const uint8_t*>(buf.fwd.mask);
    else a.add_mask = static_cast<const T*>(buf.fwd.mask);
  }
  a.sinks = static_cast<const T*>(buf.fwd.sinks);
  a.out = static_cast<const T*>(buf.out);
  a.dout = static_cast<const T*>(buf.dout);
  a.lse = buf.fwd.lse;
  a.dq = static_cast<T*>(buf.dq);
  a.dk = static_cast<T*>(buf.dk);
  a.dv = static_cast<T*>(buf.dv);
  a.dsinks = static_cast<T*>(buf.dsinks);
  a.lqp = (g.lq + kRowPad - 1) / kRowPad * kRowPad;
  a.scale_log2 = g.scale * kLog2e;

  // Scratch: lse2 and delta (padded rows), then the no-key rows' flags and dv when a row may
  // see no key without a sink taking its mass (a causal row before the first key, or a bool
  // mask; sinks make such a row's gradient zero).
  const int64_t rows = g.b * g.hq * a.lqp;
  const bool no_key_rows = !g.has_sinks && g.lk > 0 && ((g.has_mask && g.bool_mask) || (g.causal && g.lq > g.lk));
  const size_t row_bytes = size_t(rows) * sizeof(float);
  const size_t uniform_bytes = no_key_rows ? size_t(g.b * g.hkv * g.dv) * sizeof(float) : 0;
  const size_t flag_bytes = no_key_rows ? size_t(g.b * g.hq * g.lq) : 0;
  auto round = [](size_t n) { return (n + 255) / 256 * 256; };
  char* base = static_cast<char*>(scratch(2 * round(row_bytes) + round(uniform_bytes) + round(flag_bytes) + 256));
  a.lse2 = reinterpret_cast<float*>(base);
  a.delta = reinterpret_cast<float*>(base + round(row_bytes));
  if (no_key_rows) {
    a.uniform = reinterpret_cast<float*>(base + 2 * round(row_bytes));
    a.empty = reinterpret_cast<uint8_t*>(base + 2 * round(row_bytes) + round(uniform_bytes));
  }

  launch(prep_kernel<T>, (rows + kPrepThreads / kWarpSize - 1) / (kPrepThreads / kWarpSize), kPrepThreads, 0, a, "prep_kernel");
  if (no_key_rows) launch(uniform_dv_kernel<T>, g.b * g.hkv, kUniformThreads, 0, a, "uniform_dv_kernel");
  if (!try_tensor_cores(a)) {
    if (g.d <= 64 && g.dv <= 64) run_generic<T, 64>(a);
    else if (g.d <= 128 && g.dv <= 128) run_generic<T, 128>(a);
    else run_generic<T, 256>(a);
  }
  if (g.has_sinks) launch(dsinks_kernel<T>, g.hq, kSinkThreads, 0, a, "dsinks_kernel");
}

} // namespace

void attention_backward(Dtype dtype, const attention::Geometry& g, const AttentionGradBuffers& buf) {
  if (g.d > 256 || g.dv > 256) {
    throw std::invalid_argument(
        "[scaled_dot_product_attention] the CUDA backward takes head sizes up to 256; got D " + std::to_string(g.d) +
        " and Dv " + std::to_string(g.dv) + ".");
  }
  dispatch_device_float_types(dtype, "scaled_dot_product_attention", [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("[scaled_dot_product_attention] the CUDA backward takes float16, bfloat16 or float32.");
    } else {
      run_backward<T>(g, buf);
    }
  });
}

} // namespace nuvec::cu
