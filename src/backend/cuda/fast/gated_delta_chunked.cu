// nuvec: the chunked GPU form of GatedDelta for prefill (the recurrent one, gated_delta.cu,
// runs decode, short T and the steps mode). The recurrent kernel's T dependent steps are
// latency-bound (4 ms for T 8192 at 16 heads on the H200); the chunked form (Yang et al. 2024,
// "Gated Delta Networks", section 3.3; flash-linear-attention's chunk_gated_delta_rule;
// transformers' torch_chunk_gated_delta_rule, whose notation this follows) takes chunks of
// C = 64 steps, does everything inside a chunk in parallel and carries the state across
// chunks with three products a chunk. Per (b, h) and chunk, with G_c the cumulative log-decay
// inside the chunk (so Γ_cj = e^{G_c − G_j} is the decay from step j to step c):
//   A = strict_lower(diag(β) K Kᵀ ⊙ Γ),  T = (I + A)^{-1},
//   W = T diag(β e^{G}) K  [C, Dk],      U = T diag(β) V  [C, Dv]   (the WY/UT representation),
//   P = lower(Q Kᵀ ⊙ Γ)  [C, C];
// then across chunks, with the state S [Dv, Dk]:
//   V' = U − W Sᵀ,   Y = diag(e^{G}) Q Sᵀ + P V',   S ← e^{G_C} S + V'ᵀ diag(e^{G_C − G}) K.
// Two kernels: prepare (one block per (b, h, chunk), all in parallel: A, P, and T applied to
// the columns of [βe^G K | βV] by forward substitution, a thread per column with the column in
// registers) writes W, U, P and G to scratch; the state pass (one block per (b, h) and 16 rows
// of the state, the chunks in order) keeps its rows of S in registers and shared memory and
// loads the next chunk's operands with cp.async while this one computes. Everything is
// float32 on the CUDA cores (the operands W, P and S are float32, and rounding them to bf16
// would give up the recurrence's float32), so the form covers every input dtype with the
// recurrent kernel's accuracy. A second pair of kernels (NUVEC_GATED_DELTA_TENSOR_CORES=1,
// off until it has run on a GPU) does the same products on tf32 tensor cores, each float32
// operand split into two tf32 parts to keep that accuracy (below). Decays may be any real number: G is the
// cumulative log |g| (clamped at −80, so a zero decay is e^{−80}) and its sign is carried
// beside it.
#include <cstdint>

#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/fast/gated_delta.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "core/env_switch.h"

namespace nuvec {

namespace {

constexpr int kChunk = 64;
constexpr int kThreads = 256;      // threads of a prepare block
constexpr int kStateThreads = 512; // threads of a state-pass block: 16 warps for its one block an SM
constexpr int kRows = 16;             // state rows (of Dv) a block of the state pass owns
// A state-pass thread's outputs in the products with S (steps cg + 32 r, r < kStepsPerThread).
constexpr int kStepsPerThread = kChunk * kRows / kStateThreads;
static_assert(kStateThreads == kRows * 32, "the state update gives each thread 4 of a row's 128 columns");
constexpr int kLd = kChunk + 4;       // row stride of the prepare kernel's tiles (float4 rows, no bank conflicts)
constexpr float kMinLogDecay = -80.f; // log |g| of a zero decay

template <typename T>
struct PrepareArgs {
  const T *q, *k, *v;
  const void *g, *beta;
  GateType gate_type, beta_type;
  float* w;      // [B, Hv, Tp, Dk]; Tp = chunks · C, the rows past T zero
  float* u;      // [B, Hv, Tp, Dv]
  float* p;      // [B, Hv, chunks, C, C]
  float2* decay; // [B, Hv, Tp]: (G, the sign of the product of the decays up to the step)
  int b, t, hk, dk, hv, dv, chunks;
};

/// The 4 elements at p (aligned to 4 elements) in float32.
template <typename X>
__device__ __forceinline__ void load4(const X* p, float (&out)[4]) {
  const auto v = cu::load_vec<4>(p);
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = cu::to_acc(v[e]);
}

/// Shared memory of the prepare kernel: keys and queries transposed ([Dk][kLd] each) and A.
size_t prepare_smem_bytes(int dk) {
  return (2 * size_t(dk) + kChunk) * kLd * sizeof(float);
}

/// The gates of chunk `n` of (b, h) in shared memory: logs = G (the cumulative log |g| from
/// the chunk's start), signs (of the product of the decays so far), betas, and wscale =
/// β·sign·e^G (W's row scale); (G, sign) are also written to a.decay. Steps past T: no
/// decay, no update. Every thread calls it; it ends with a barrier before wscale is written,
/// so the caller's next barrier publishes wscale.
template <typename T>
__device__ void chunk_gates(const PrepareArgs<T>& a, int b, int h, int t0, int64_t row0, float* logs, float* signs,
                            float* betas, float* wscale) {
  const int tid = threadIdx.x;
  if (tid < kChunk) {
    const int t = t0 + tid;
    float lg = 0.f, sg = 1.f, be = 0.f;
    if (t < a.t) {
      const int64_t i = (int64_t(b) * a.t + t) * a.hv + h;
      const float gv = load_gate(a.g, i, a.gate_type);
      lg = fmaxf(logf(fabsf(gv)), kMinLogDecay);
      sg = gv < 0.f ? -1.f : 1.f;
      be = load_gate(a.beta, i, a.beta_type);
    }
    logs[tid] = lg;
    signs[tid] = sg;
    betas[tid] = be;
  }
  __syncthreads();
  // G and the signs: inclusive scans over the chunk by warp 0, two steps a lane.
  if (tid < 32) {
    const float l0 = logs[2 * tid], l1 = logs[2 * tid + 1], s0 = signs[2 * tid], s1 = signs[2 * tid + 1];
    float ls = l0 + l1, ss = s0 * s1;
    for (int o = 1; o < 32; o <<= 1) {
      const float lo = __shfl_up_sync(0xffffffffu, ls, o), so = __shfl_up_sync(0xffffffffu, ss, o);
      if (tid >= o) {
        ls += lo;
        ss *= so;
      }
    }
    float le = __shfl_up_sync(0xffffffffu, ls, 1), se = __shfl_up_sync(0xffffffffu, ss, 1);
    if (tid == 0) {
      le = 0.f;
      se = 1.f;
    }
    logs[2 * tid] = le + l0;
    logs[2 * tid + 1] = le + l0 + l1;
    signs[2 * tid] = se * s0;
    signs[2 * tid + 1] = se * s0 * s1;
  }
  __syncthreads();
  if (tid < kChunk) {
    a.decay[row0 + tid] = make_float2(logs[tid], signs[tid]);
    wscale[tid] = betas[tid] * signs[tid] * expf(logs[tid]);
  }
}

/// Γ_ij (signed): the decay from step j to step i of the chunk, zero above the diagonal.
__device__ __forceinline__ float chunk_decay(const float* logs, const float* signs, int i, int j) {
  return j <= i ? signs[i] * signs[j] * expf(logs[i] - logs[j]) : 0.f;
}

/// The fragment registers of 4 float32 values of an A operand (or 2 of a B operand), split
/// into tf32 high and low parts; `exact` values (16-bit inputs) keep lo at zero and skip it.
template <int N>
struct Tf32Frag {
  uint32_t hi[N], lo[N];
  __device__ __forceinline__ void set(const float (&x)[N], bool exact) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (exact) {
        hi[i] = __float_as_uint(x[i]);
        lo[i] = 0u;
      } else {
        cu::split_tf32(x[i], hi[i], lo[i]);
      }
    }
  }
};

/// d += A B at float32 accuracy from split fragments: hi·hi + hi·lo + lo·hi, the lo·hi term
/// skipped when A is exact (and hi·lo when B is).
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32Frag<4>& a, const Tf32Frag<2>& b, bool a_exact,
                                           bool b_exact) {
  if (!b_exact) cu::mma_m16n8k8_tf32(d, a.hi, b.lo);
  if (!a_exact) cu::mma_m16n8k8_tf32(d, a.lo, b.hi);
  cu::mma_m16n8k8_tf32(d, a.hi, b.hi);
}

/// acc += A Bᵀ for one 16 x 8 tile over k columns (a multiple of 8): A's 16 rows at
/// a[m * lda + kk], B's 8 rows at b[n * ldb + kk], row-major in shared memory, float32 or
/// 16-bit; operands marked exact (16-bit values) skip their low tf32 part. Even and odd k
/// steps go to two accumulator sets, halving the chain of dependent mma. Conflict-free when
/// lda and ldb are 4 mod 32 words.
template <typename X, typename Y>
__device__ __forceinline__ void tile_abt(const X* a, int lda, const Y* b, int ldb, int k, bool a_exact, bool b_exact,
                                         float (&acc)[4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  float odd[4] = {};
  auto step = [&](int d0, float (&c)[4]) {
    float av[4] = {cu::to_acc(a[g * lda + d0 + tq]), cu::to_acc(a[(g + 8) * lda + d0 + tq]),
                   cu::to_acc(a[g * lda + d0 + tq + 4]), cu::to_acc(a[(g + 8) * lda + d0 + tq + 4])};
    float bv[2] = {cu::to_acc(b[g * ldb + d0 + tq]), cu::to_acc(b[g * ldb + d0 + tq + 4])};
    Tf32Frag<4> fa;
    Tf32Frag<2> fb;
    fa.set(av, a_exact);
    fb.set(bv, b_exact);
    mma_3xtf32(c, fa, fb, a_exact, b_exact);
  };
  int d0 = 0;
  for (; d0 + 8 < k; d0 += 16) {
    step(d0, acc);
    step(d0 + 8, odd);
  }
  if (d0 < k) step(d0, acc);
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] += odd[e];
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gated_delta_prepare_kernel(PrepareArgs<T> a) {
  extern __shared__ __align__(16) float prep_smem[];
  __shared__ float logs[kChunk], signs[kChunk], betas[kChunk], wscale[kChunk];
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / a.hv, h = bh % a.hv, hk = h / (a.hv / a.hk);
  const int tid = threadIdx.x, t0 = n * kChunk;
  const int64_t row0 = int64_t(bh) * a.chunks * kChunk + t0; // this chunk's first row of W, U, decay
  float* kt = prep_smem;       // kt[d * kLd + c] = k_c[d]
  float* qt = kt + a.dk * kLd; // qt[d * kLd + c] = q_c[d]
  float* am = qt + a.dk * kLd; // am[i * kLd + j] = A_ij
  for (int e = tid; e < kChunk * a.dk; e += kThreads) {
    const int c = e / a.dk, d = e % a.dk, t = t0 + c;
    float kv = 0.f, qv = 0.f;
    if (t < a.t) {
      const int64_t at = ((int64_t(b) * a.t + t) * a.hk + hk) * a.dk + d;
      kv = cu::to_acc(a.k[at]);
      qv = cu::to_acc(a.q[at]);
    }
    kt[d * kLd + c] = kv;
    qt[d * kLd + c] = qv;
  }
  chunk_gates(a, b, h, t0, row0, logs, signs, betas, wscale);

  // K Kᵀ and Q Kᵀ: a 4 x 4 block of each per thread.
  const int ti = tid / 16, tj = tid % 16;
  float kk[4][4] = {}, qk[4][4] = {};
  for (int d = 0; d < a.dk; ++d) {
    const float4 ki = *reinterpret_cast<const float4*>(kt + d * kLd + 4 * ti);
    const float4 qi = *reinterpret_cast<const float4*>(qt + d * kLd + 4 * ti);
    const float4 kj = *reinterpret_cast<const float4*>(kt + d * kLd + 4 * tj);
    const float kiv[4] = {ki.x, ki.y, ki.z, ki.w}, qiv[4] = {qi.x, qi.y, qi.z, qi.w};
    const float kjv[4] = {kj.x, kj.y, kj.z, kj.w};
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        kk[r][c] = fmaf(kiv[r], kjv[c], kk[r][c]);
        qk[r][c] = fmaf(qiv[r], kjv[c], qk[r][c]);
      }
    }
  }
  float* p = a.p + (int64_t(bh) * a.chunks + n) * kChunk * kChunk;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = 4 * ti + r;
    float pv[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int j = 4 * tj + c;
      const float decay = chunk_decay(logs, signs, i, j);
      am[i * kLd + j] = j < i ? betas[i] * decay * kk[r][c] : 0.f;
      pv[c] = decay * qk[r][c];
    }
    *reinterpret_cast<float4*>(p + i * kChunk + 4 * tj) = make_float4(pv[0], pv[1], pv[2], pv[3]);
  }
  __syncthreads();

  // W and U: column m of [β e^G K | β V] through (I + A) X = R by forward substitution,
  // X_i = R_i − Σ_{j<i} A_ij X_j, the column in registers (the loops unrolled).
  for (int m = tid; m < a.dk + a.dv; m += kThreads) {
    float x[kChunk];
    if (m < a.dk) {
#pragma unroll
      for (int i = 0; i < kChunk; i += 4) {
        const float4 k4 = *reinterpret_cast<const float4*>(kt + m * kLd + i);
        x[i] = wscale[i] * k4.x;
        x[i + 1] = wscale[i + 1] * k4.y;
        x[i + 2] = wscale[i + 2] * k4.z;
        x[i + 3] = wscale[i + 3] * k4.w;
      }
    } else {
      const T* vcol = a.v + (int64_t(b) * a.t * a.hv + h) * a.dv + (m - a.dk);
      const int64_t step = int64_t(a.hv) * a.dv;
#pragma unroll
      for (int i = 0; i < kChunk; ++i) x[i] = t0 + i < a.t ? betas[i] * cu::to_acc(vcol[(t0 + i) * step]) : 0.f;
    }
#pragma unroll
    for (int i = 1; i < kChunk; ++i) {
      float acc = x[i];
#pragma unroll
      for (int j = 0; j < i; j += 4) {
        const float4 a4 = *reinterpret_cast<const float4*>(am + i * kLd + j);
        acc = fmaf(-a4.x, x[j], acc);
        if (j + 1 < i) acc = fmaf(-a4.y, x[j + 1], acc);
        if (j + 2 < i) acc = fmaf(-a4.z, x[j + 2], acc);
        if (j + 3 < i) acc = fmaf(-a4.w, x[j + 3], acc);
      }
      x[i] = acc;
    }
    float* out = m < a.dk ? a.w + row0 * a.dk + m : a.u + row0 * a.dv + (m - a.dk);
    const int ld = m < a.dk ? a.dk : a.dv;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) out[int64_t(i) * ld] = x[i];
  }
}

// ---- The prepare kernel on tensor cores (NUVEC_GATED_DELTA_TENSOR_CORES=1) ---------------
// K Kᵀ and Q Kᵀ as m16n8k8 tf32 tiles, their lower triangles only (16-bit keys and queries
// are exact in tf32: one mma a step; float32 ones split: three), then (I + A) X = R by blocks
// of 16 rows, X_i = (I + A_ii)^{-1} (R_i − Σ_{j<i} A_ij X_j): the sums as split tf32 tiles, the
// 16 x 16 unit-triangular solves a lane per column. Each warp owns 16 columns of R, so the
// solve needs no block barrier; R is a panel of 128 columns at a time (the keys' Dk, then
// the values' Dv), in the buffer the queries used. Same outputs as the CUDA-core kernel.
constexpr int kPanel = 128;          // columns of R a panel: 8 warps x 16
constexpr int kPanelLd = kPanel + 8; // R's row stride: 8 mod 32 words for its k-indexed B reads
constexpr int kAmLd = kChunk + 4;    // A's row stride

/// Shared memory of the tensor-core prepare kernel: keys [C][Dk + 4], queries then R panels
/// [C][136], A [C][68], float32.
size_t prepare_tc_smem_bytes(int dk) {
  return (size_t(kChunk) * (dk + 4) + size_t(kChunk) * kPanelLd + size_t(kChunk) * kAmLd) * sizeof(float);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gated_delta_prepare_tc_kernel(PrepareArgs<T> a) {
  extern __shared__ __align__(16) float prep_smem[];
  __shared__ float logs[kChunk], signs[kChunk], betas[kChunk], wscale[kChunk];
  constexpr bool kExact = sizeof(T) == 2;
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / a.hv, h = bh % a.hv, hk = h / (a.hv / a.hk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4, t0 = n * kChunk;
  const int64_t row0 = int64_t(bh) * a.chunks * kChunk + t0; // this chunk's first row of W, U, decay
  const int ldk = a.dk + 4;
  float* kf = prep_smem;             // [C][Dk + 4]: k_c
  float* panel = kf + kChunk * ldk;  // [C][Dk + 4]: q_c; then [C][136]: R's panels
  float* am = panel + kChunk * kPanelLd; // [C][68]: A
  for (int e = tid; e < kChunk * a.dk / 4; e += kThreads) {
    const int c = e / (a.dk / 4), d = 4 * (e % (a.dk / 4)), t = t0 + c;
    float kv[4] = {}, qv[4] = {};
    if (t < a.t) {
      const int64_t at = ((int64_t(b) * a.t + t) * a.hk + hk) * a.dk + d;
      load4(a.k + at, kv);
      load4(a.q + at, qv);
    }
    *reinterpret_cast<float4*>(kf + c * ldk + d) = make_float4(kv[0], kv[1], kv[2], kv[3]);
    *reinterpret_cast<float4*>(panel + c * ldk + d) = make_float4(qv[0], qv[1], qv[2], qv[3]);
  }
  chunk_gates(a, b, h, t0, row0, logs, signs, betas, wscale);

  // A = strict_lower(diag(β) K Kᵀ ⊙ Γ) and P = lower(Q Kᵀ ⊙ Γ): 20 tiles of 16 x 8 each on or
  // below the diagonal (column tile nt <= 2 mt + 1), 40 tiles over 8 warps.
  float* p = a.p + (int64_t(bh) * a.chunks + n) * kChunk * kChunk;
  for (int x = warp; x < 40; x += kThreads / 32) {
    const bool queries = x >= 20;
    const int r = x % 20, mt = r < 2 ? 0 : r < 6 ? 1 : r < 12 ? 2 : 3, nt = r - (mt == 0 ? 0 : mt == 1 ? 2 : mt == 2 ? 6 : 12);
    const int i_lo = 16 * mt + g, i_hi = i_lo + 8;
    float acc[4] = {};
    tile_abt(queries ? panel + 16 * mt * ldk : kf + 16 * mt * ldk, ldk, kf + 8 * nt * ldk, ldk, a.dk, kExact, kExact, acc);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e < 2 ? i_lo : i_hi, j = 8 * nt + 2 * tq + e % 2;
      const float v = acc[e], decay = chunk_decay(logs, signs, i, j);
      if (queries) {
        p[i * kChunk + j] = decay * v;
      } else {
        am[i * kAmLd + j] = j < i ? betas[i] * decay * v : 0.f;
      }
    }
  }
  for (int x = tid; x < kChunk * kChunk; x += kThreads) {
    const int i = x / kChunk, j = x % kChunk;
    if (j / 8 > 2 * (i / 16) + 1) p[x] = 0.f; // the tiles above the diagonal, not computed
  }
  __syncthreads(); // A complete, wscale visible; the queries' buffer is free for R

  // R's panels: [β e^G K] (Dk columns), then [β V] in panels of 128 columns. Warp w owns
  // columns 16 w .. 16 w + 15 of each panel: it fills them, solves them, writes them out.
  const int panels = 1 + (a.dv + kPanel - 1) / kPanel;
  for (int pn = 0; pn < panels; ++pn) {
    const bool keys = pn == 0;
    const int col0 = keys ? 0 : (pn - 1) * kPanel, ncols = keys ? a.dk : min(kPanel, a.dv - col0);
    const int wc = 16 * warp;
    if (wc >= ncols) continue; // warp-uniform
    for (int e = lane; e < kChunk * 16; e += 32) {
      const int c = e / 16, col = wc + e % 16;
      if (col >= ncols) continue;
      float r = 0.f;
      if (keys) {
        r = wscale[c] * kf[c * ldk + col];
      } else if (t0 + c < a.t) {
        r = betas[c] * cu::to_acc(a.v[((int64_t(b) * a.t + t0 + c) * a.hv + h) * a.dv + col0 + col]);
      }
      panel[c * kPanelLd + col] = r;
    }
    __syncwarp();
#pragma unroll 1
    for (int blk = 0; blk < kChunk / 16; ++blk) {
      // R_blk −= Σ_{j<blk} A_blk,j X_j on this warp's two column tiles.
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int n0 = wc + 8 * half;
        if (blk == 0 || n0 >= ncols) continue;
        const int r_lo = 16 * blk + g, r_hi = r_lo + 8;
        float acc[4] = {panel[r_lo * kPanelLd + n0 + 2 * tq], panel[r_lo * kPanelLd + n0 + 2 * tq + 1],
                        panel[r_hi * kPanelLd + n0 + 2 * tq], panel[r_hi * kPanelLd + n0 + 2 * tq + 1]};
        for (int ks = 0; ks < 2 * blk; ++ks) {
          const int k0 = 8 * ks;
          float av[4] = {-am[r_lo * kAmLd + k0 + tq], -am[r_hi * kAmLd + k0 + tq], -am[r_lo * kAmLd + k0 + tq + 4],
                         -am[r_hi * kAmLd + k0 + tq + 4]};
          float bv[2] = {panel[(k0 + tq) * kPanelLd + n0 + g], panel[(k0 + tq + 4) * kPanelLd + n0 + g]};
          Tf32Frag<4> fa;
          Tf32Frag<2> fb;
          fa.set(av, false);
          fb.set(bv, false);
          mma_3xtf32(acc, fa, fb, false, false);
        }
        panel[r_lo * kPanelLd + n0 + 2 * tq] = acc[0];
        panel[r_lo * kPanelLd + n0 + 2 * tq + 1] = acc[1];
        panel[r_hi * kPanelLd + n0 + 2 * tq] = acc[2];
        panel[r_hi * kPanelLd + n0 + 2 * tq + 1] = acc[3];
      }
      __syncwarp();
      // X_blk = (I + A_blk,blk)^{-1} R_blk: lane l < 16 solves column wc + l in registers.
      const int col = wc + lane;
      if (lane < 16 && col < ncols) {
        float x[16];
#pragma unroll
        for (int r = 0; r < 16; ++r) x[r] = panel[(16 * blk + r) * kPanelLd + col];
#pragma unroll
        for (int r = 1; r < 16; ++r) {
          const float* arow = am + (16 * blk + r) * kAmLd + 16 * blk;
          float v = x[r];
#pragma unroll
          for (int j = 0; j < r; ++j) v = fmaf(-arow[j], x[j], v);
          x[r] = v;
        }
#pragma unroll
        for (int r = 0; r < 16; ++r) panel[(16 * blk + r) * kPanelLd + col] = x[r];
      }
      __syncwarp();
    }
    float* out = keys ? a.w + row0 * a.dk : a.u + row0 * a.dv + col0;
    const int ld = keys ? a.dk : a.dv;
    for (int e = lane; e < kChunk * 16; e += 32) {
      const int c = e / 16, col = wc + e % 16;
      if (col < ncols) out[int64_t(c) * ld + col] = panel[c * kPanelLd + col];
    }
    __syncwarp(); // this warp's columns are read before the next panel refills them
  }
}

template <typename T, typename S>
struct StateArgs {
  const T *q, *k;
  const float *w, *u, *p;
  const float2* decay;
  const S* state; // [B or P, Hv, Dv, Dk]
  S* states;      // the final states, at the same rows
  T* y;           // [B, T, Hv, Dv]
  const int32_t* slots;
  cu::IndexError* err;
  int b, t, hk, dk, hv, dv, chunks, pool;
};

/// Chunks of operands a state-pass block holds: two (the next loads while this one
/// computes) for 16-bit inputs, one for float32 (two would pass the 227 KB of shared memory).
template <typename T>
constexpr int kStages = sizeof(T) == 2 ? 2 : 1;

/// Byte offsets and row strides (elements) of one chunk's operands in a state-pass block's
/// shared memory: W [C][ldw] float32, Q [C][ldq] and K [C][ldk] of T, P [C][ldp] float32,
/// U's 16 rows [C][16], and (G, sign) [C]. The CUDA-core pass packs the rows (stage_layout);
/// the tensor-core pass pads them against bank conflicts (tc_layout).
struct StageLayout {
  int w, q, k, p, u, decay, bytes;
  int ldw, ldq, ldk, ldp;
};

StageLayout stage_layout(int item, int ldw, int ldq, int ldk, int ldp) {
  StageLayout l{};
  l.ldw = ldw;
  l.ldq = ldq;
  l.ldk = ldk;
  l.ldp = ldp;
  l.w = 0;
  l.q = l.w + kChunk * ldw * 4;
  l.k = l.q + kChunk * ldq * item;
  l.p = l.k + kChunk * ldk * item;
  l.u = l.p + kChunk * ldp * 4;
  l.decay = l.u + kChunk * kRows * 4;
  l.bytes = l.decay + kChunk * 8;
  return l;
}

StageLayout stage_layout(int dk, int item) {
  return stage_layout(item, dk, dk, dk, kChunk);
}

/// Where a state-pass block works: state rows j0 .. j0 + 15 of value head h (key head hk)
/// of sequence b, bh = b · Hv + h, and `from`, the state row it reads and writes: b, or the
/// pool row slots[b] (-1, the error recorded, when it is outside the pool or named twice:
/// the whole block leaves). Every thread calls it (the slot check has a barrier).
struct StateBlock {
  int j0, bh, b, h, hk;
  int64_t from;
};

template <typename T, typename S>
__device__ __forceinline__ StateBlock state_block(const StateArgs<T, S>& a) {
  const int bh = blockIdx.y, b = bh / a.hv, h = bh % a.hv;
  const int64_t from =
      a.slots == nullptr ? b : slot_row(a.slots, gridDim.y / a.hv, b, a.pool, a.err, threadIdx.x == 0 && blockIdx.x == 0);
  return {int(blockIdx.x) * kRows, bh, b, h, h / (a.hv / a.hk), from};
}

/// Starts the asynchronous copies of chunk n's operands for state rows j0.. j0 + 15 of (b, h)
/// into `base` (laid out by L) and commits them as one group.
template <typename T, typename S>
__device__ void load_chunk_operands(const StateArgs<T, S>& a, const StageLayout& L, unsigned char* base, int n, int b,
                                    int bh, int hk, int j0) {
  const int tid = threadIdx.x;
  const int64_t row0 = int64_t(bh) * a.chunks * kChunk + n * kChunk;
  const int w_per_row = a.dk / 4;
  for (int x = tid; x < kChunk * w_per_row; x += kStateThreads) {
    const int c = x / w_per_row, piece = x % w_per_row;
    cu::cp_async_16(base + L.w + (c * L.ldw + piece * 4) * 4, a.w + (row0 + c) * a.dk + piece * 4, true);
  }
  constexpr int kPer16 = 16 / int(sizeof(T));
  const int per_row = a.dk / kPer16, units = kChunk * per_row;
  for (int x = tid; x < 2 * units; x += kStateThreads) {
    const int which = x / units, r = x % units, c = r / per_row, piece = r % per_row, t = n * kChunk + c;
    const bool valid = t < a.t;
    const int64_t at = ((int64_t(b) * a.t + (valid ? t : 0)) * a.hk + hk) * a.dk + piece * kPer16;
    const int dst = which == 0 ? L.q + (c * L.ldq + piece * kPer16) * int(sizeof(T))
                               : L.k + (c * L.ldk + piece * kPer16) * int(sizeof(T));
    cu::cp_async_16(base + dst, (which == 0 ? a.q : a.k) + at, valid);
  }
  const float* p = a.p + (int64_t(bh) * a.chunks + n) * kChunk * kChunk;
  for (int x = tid; x < kChunk * kChunk / 4; x += kStateThreads) {
    const int c = x / (kChunk / 4), piece = x % (kChunk / 4);
    cu::cp_async_16(base + L.p + (c * L.ldp + piece * 4) * 4, p + c * kChunk + piece * 4, true);
  }
  for (int x = tid; x < kChunk * kRows / 4; x += kStateThreads) {
    const int c = x / (kRows / 4), piece = x % (kRows / 4);
    cu::cp_async_16(base + L.u + x * 16, a.u + (row0 + c) * a.dv + j0 + piece * 4, true);
  }
  for (int x = tid; x < kChunk / 2; x += kStateThreads) {
    cu::cp_async_16(base + L.decay + x * 16, a.decay + row0 + x * 2, true);
  }
  cu::cp_async_commit();
}

/// Chunk operands of one stage in shared memory (laid out by L): W, Q, K, P, U and the
/// (G, sign) pairs D.
template <typename T>
struct StageOperands {
  const float* w;
  const T *q, *k;
  const float *p, *u;
  const float2* decay;
};

template <typename T>
__device__ __forceinline__ StageOperands<T> stage_operands(const unsigned char* base, const StageLayout& L) {
  return {reinterpret_cast<const float*>(base + L.w), reinterpret_cast<const T*>(base + L.q),
          reinterpret_cast<const T*>(base + L.k),     reinterpret_cast<const float*>(base + L.p),
          reinterpret_cast<const float*>(base + L.u), reinterpret_cast<const float2*>(base + L.decay)};
}

/// Waits for chunk n's operands in stage n % kSt, first starting chunk n + 1's copies when
/// there are two stages (into the buffer chunk n − 1 used: the caller's barrier at the end
/// of each chunk means every thread is done with it). The caller's barrier follows.
template <int kSt, class Load>
__device__ __forceinline__ void stage_chunk(int n, int chunks, Load&& load_chunk) {
  if constexpr (kSt == 2) {
    if (n + 1 < chunks) {
      load_chunk(n + 1);
      cu::cp_async_wait<1>();
    } else {
      cu::cp_async_wait<0>();
    }
  } else {
    load_chunk(n);
    cu::cp_async_wait<0>();
  }
}

/// Shared memory of a state-pass block: the state's 16 rows ([16][Dk + 4] float32), V' and
/// V' scaled by e^{G_C − G} ([C][16] each), then the stages.
size_t fixed_state_smem(int dk) {
  return (size_t(kRows) * (dk + 4) + 2 * kChunk * kRows) * sizeof(float);
}

template <typename T>
size_t state_smem_bytes(int dk) {
  return fixed_state_smem(dk) + size_t(kStages<T>) * stage_layout(dk, sizeof(T)).bytes;
}

template <typename T, typename S>
__global__ void __launch_bounds__(kStateThreads) gated_delta_state_kernel(StateArgs<T, S> a, StageLayout L) {
  extern __shared__ __align__(16) unsigned char state_smem[];
  constexpr int kSt = kStages<T>;
  const int tid = threadIdx.x;
  const auto [j0, bh, b, h, hk, from] = state_block(a);
  if (from < 0) return; // the whole block: every thread has this b
  const int lds = a.dk + 4;
  float* ssh = reinterpret_cast<float*>(state_smem); // [16][Dk + 4]: the rows of S
  float* vp = ssh + kRows * lds;                     // [C][16]: V'
  float* vt = vp + kChunk * kRows;                   // [C][16]: V' e^{G_C − G}
  unsigned char* stages = reinterpret_cast<unsigned char*>(vt + kChunk * kRows);
  auto load_chunk = [&](int n) { load_chunk_operands(a, L, stages + (n % kSt) * L.bytes, n, b, bh, hk, j0); };

  // This thread's state elements in the update: row sj, columns sd..sd + 3 (Dk <= 128).
  const int sj = tid / 32, sd = 4 * (tid % 32);
  const bool owns = sd < a.dk;
  float s[4] = {};
  if (owns) {
    const S* src = a.state + ((from * a.hv + h) * a.dv + j0 + sj) * a.dk + sd;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[e] = cu::to_acc(src[e]);
      ssh[sj * lds + sd + e] = s[e];
    }
  }
  // This thread's outputs in the products with S: row j of S (column j of V' and Y), steps
  // cg + 32 r of the chunk.
  const int j = tid % 16, cg = tid / 16;
  if constexpr (kSt == 2) load_chunk(0);
  for (int n = 0; n < a.chunks; ++n) {
    stage_chunk<kSt>(n, a.chunks, load_chunk);
    __syncthreads(); // every thread's copies of chunk n and the state rows are visible
    const auto [W, Q, K, P, U, D] = stage_operands<T>(stages + (n % kSt) * L.bytes, L);

    // V' = U − W Sᵀ and Q Sᵀ, one pass over the state's row j.
    constexpr int R = kStepsPerThread;
    float va[R], qa[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      va[r] = U[(cg + 32 * r) * kRows + j];
      qa[r] = 0.f;
    }
    for (int d = 0; d < a.dk; d += 4) {
      const float4 s4 = *reinterpret_cast<const float4*>(ssh + j * lds + d);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int c = cg + 32 * r;
        const float4 w4 = *reinterpret_cast<const float4*>(W + c * a.dk + d);
        float q4[4];
        load4(Q + c * a.dk + d, q4);
        va[r] = fmaf(-w4.x, s4.x, fmaf(-w4.y, s4.y, fmaf(-w4.z, s4.z, fmaf(-w4.w, s4.w, va[r]))));
        qa[r] = fmaf(q4[0], s4.x, fmaf(q4[1], s4.y, fmaf(q4[2], s4.z, fmaf(q4[3], s4.w, qa[r]))));
      }
    }
    const float2 last = D[kChunk - 1]; // steps past T add nothing to G: this is the last step's
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int c = cg + 32 * r;
      const float2 dc = D[c];
      vp[c * kRows + j] = va[r];
      vt[c * kRows + j] = va[r] * (last.y * dc.y) * expf(last.x - dc.x);
      qa[r] *= dc.y * expf(dc.x);
    }
    __syncthreads(); // V' complete; every read of the old state done

    // Y = diag(e^G) Q Sᵀ + P V' (P is zero above its diagonal).
    for (int c2 = 0; c2 < kChunk; c2 += 4) {
      float v4[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v4[e] = vp[(c2 + e) * kRows + j];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4 p4 = *reinterpret_cast<const float4*>(P + (cg + 32 * r) * kChunk + c2);
        qa[r] = fmaf(p4.x, v4[0], fmaf(p4.y, v4[1], fmaf(p4.z, v4[2], fmaf(p4.w, v4[3], qa[r]))));
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int t = n * kChunk + cg + 32 * r;
      if (t < a.t) a.y[((int64_t(b) * a.t + t) * a.hv + h) * a.dv + j0 + j] = cu::store_as<T>(qa[r]);
    }

    // S ← e^{G_C} S + (V' e^{G_C − G})ᵀ K.
    if (owns) {
      const float keep = last.y * expf(last.x);
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] *= keep;
      for (int c = 0; c < kChunk; ++c) {
        const float vv = vt[c * kRows + sj];
        float k4[4];
        load4(K + c * a.dk + sd, k4);
#pragma unroll
        for (int e = 0; e < 4; ++e) s[e] = fmaf(vv, k4[e], s[e]);
      }
      *reinterpret_cast<float4*>(ssh + sj * lds + sd) = make_float4(s[0], s[1], s[2], s[3]);
    }
    __syncthreads(); // the new state is visible; chunk n's buffer and V' may be overwritten
  }
  if (owns) {
    S* dst = a.states + ((from * a.hv + h) * a.dv + j0 + sj) * a.dk + sd;
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[e] = cu::store_as<S>(s[e]);
  }
}

// ---- The state pass on tensor cores (NUVEC_GATED_DELTA_TENSOR_CORES=1) -------------------
// The same block (16 rows of S, the chunks in order, 16 warps) with the four products of a
// chunk as warp tiles of mma.sync m16n8k8 on tf32, each float32 operand split into two tf32
// parts (cu::split_tf32: three products a tile step, float32's accuracy; 16-bit q and k are
// exact in tf32, so their products take two). Per chunk:
//   phase 1, every warp one 16 x 8 tile: warps 0-7 V' = U − W Sᵀ, warps 8-15 e^G Q Sᵀ
//            (M = the chunk's 64 steps, N = the block's 16 state rows, K = Dk);
//   phase 2, at once: warps 0-7 Y = e^G Q Sᵀ + P V' (P's zero tiles above the diagonal
//            skipped), warps 8-15 S ← e^{G_C} S + (V' e^{G_C − G})ᵀ K, S's rows held in their
//            accumulators (float32, never rounded) and copied to shared memory for the next
//            chunk's phase 1.
// Shared rows are padded so that every fragment load is free of bank conflicts: row strides
// of 4 mod 32 words for row-indexed A operands, 8 mod 32 for k-indexed B operands.
constexpr int kTcLd = kRows + 8;   // V', V' e^{G_C − G} and e^G Q Sᵀ: [C][24] float32
constexpr int kTcPLd = kChunk + 4; // P: [C][68] float32

/// The tensor-core pass's stage layout, rows padded so that fragment loads are free of bank
/// conflicts: float32 rows read as A operands (W, Q, P) at 4 mod 8 words; K's rows (read as a
/// k-indexed B operand) at 8 or 24 mod 32 words, and 16-bit rows at 8 mod 16 elements (4 mod
/// 8 words), which Dk + 8 gives when Dk is a multiple of 16 and Dk + 16 otherwise (at most
/// the Dk 128 size the launch opts in to).
template <typename T>
StageLayout tc_layout(int dk) {
  const int pad = dk % 16 == 0 ? 8 : 16;
  return stage_layout(int(sizeof(T)), dk + 4, sizeof(T) == 2 ? dk + pad : dk + 4, dk + pad, kTcPLd);
}

/// Shared memory of a tensor-core state-pass block: S's 16 rows ([16][Dk + 4]), V', V' scaled
/// and e^G Q Sᵀ ([C][24] each), then the stages.
template <typename T>
size_t tc_state_smem_bytes(int dk) {
  return (size_t(kRows) * (dk + 4) + 3 * size_t(kChunk) * kTcLd) * sizeof(float) +
      size_t(kStages<T>) * tc_layout<T>(dk).bytes;
}

template <typename T, typename S>
__global__ void __launch_bounds__(kStateThreads) gated_delta_state_tc_kernel(StateArgs<T, S> a, StageLayout L) {
  extern __shared__ __align__(16) unsigned char state_smem[];
  constexpr int kSt = kStages<T>;
  constexpr bool kExactInputs = sizeof(T) == 2; // f16 and bf16 values are tf32 values
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const auto [j0, bh, b, h, hk, from] = state_block(a);
  if (from < 0) return; // the whole block: every thread has this b
  const int lds = a.dk + 4;
  float* ssh = reinterpret_cast<float*>(state_smem); // [16][Dk + 4]: the rows of S
  float* vp = ssh + kRows * lds;                     // [C][24]: V'
  float* vt = vp + kChunk * kTcLd;                   // [C][24]: V' e^{G_C − G}
  float* ys = vt + kChunk * kTcLd;                   // [C][24]: e^G Q Sᵀ
  unsigned char* stages = reinterpret_cast<unsigned char*>(ys + kChunk * kTcLd);
  auto load_chunk = [&](int n) { load_chunk_operands(a, L, stages + (n % kSt) * L.bytes, n, b, bh, hk, j0); };

  // Warps 8-15 hold S: warp 8 + u owns the column tiles u and u + 8 (8 columns of Dk each)
  // of all 16 rows, as C fragments: s[i][0..1] = S[g][d..d+1], s[i][2..3] = S[g+8][d..d+1],
  // d = 8 (u + 8 i) + 2 tq.
  const bool holds_state = warp >= 8;
  const int su = warp - 8;
  float s[2][4] = {};
  // f(i, e, row, column of S) for each of this warp's state elements inside Dk.
  auto for_state = [&](auto&& f) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int d = 8 * (su + 8 * i) + 2 * tq;
      if (d >= a.dk) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) f(i, e, g + 8 * (e / 2), d + e % 2);
    }
  };
  const int64_t state0 = (from * a.hv + h) * a.dv + j0; // S's first row in the state arrays
  if (holds_state) {
    for_state([&](int i, int e, int row, int col) {
      s[i][e] = cu::to_acc(a.state[(state0 + row) * a.dk + col]);
      ssh[row * lds + col] = s[i][e];
    });
  }
  // Phase 1's tile: rows (steps) 16 m1 + g (+ 8), columns (state rows) 8 n1 + 2 tq (+ 1).
  const bool q_side = warp >= 8;
  const int m1 = (warp & 7) >> 1, n1 = warp & 1;
  const int c_lo = 16 * m1 + g, c_hi = c_lo + 8;
  if constexpr (kSt == 2) load_chunk(0);
  for (int n = 0; n < a.chunks; ++n) {
    stage_chunk<kSt>(n, a.chunks, load_chunk);
    __syncthreads(); // chunk n's operands and S's rows are visible
    const auto [W, Q, K, P, U, D] = stage_operands<T>(stages + (n % kSt) * L.bytes, L);
    const float2 last = D[kChunk - 1]; // steps past T add nothing to G: this is the last step's

    // Phase 1: W Sᵀ (warps 0-7) or Q Sᵀ (warps 8-15).
    {
      float acc[4] = {};
      const float* srows = ssh + 8 * n1 * lds;
      if (q_side) {
        tile_abt(Q + 16 * m1 * L.ldq, L.ldq, srows, lds, a.dk, kExactInputs, false, acc);
      } else {
        tile_abt(W + 16 * m1 * L.ldw, L.ldw, srows, lds, a.dk, false, false, acc);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = e < 2 ? c_lo : c_hi, j = 8 * n1 + 2 * tq + e % 2;
        const float v = acc[e];
        const float2 dc = D[c];
        if (q_side) {
          ys[c * kTcLd + j] = v * dc.y * expf(dc.x);
        } else {
          const float vv = U[c * kRows + j] - v;
          vp[c * kTcLd + j] = vv;
          vt[c * kTcLd + j] = vv * (last.y * dc.y) * expf(last.x - dc.x);
        }
      }
    }
    __syncthreads(); // V', its scaled copy and e^G Q Sᵀ complete; every read of S's rows done

    if (!holds_state) {
      // Y = e^G Q Sᵀ + P V' on phase 1's tile of warps 0-7 (P is zero above its diagonal:
      // k steps past the tile's last row are skipped).
      float acc0[4], acc1[4] = {};
#pragma unroll
      for (int e = 0; e < 4; ++e) acc0[e] = ys[(e < 2 ? c_lo : c_hi) * kTcLd + 8 * n1 + 2 * tq + e % 2];
      auto step = [&](int ks, float (&acc)[4]) {
        const int k0 = 8 * ks;
        float av[4] = {P[c_lo * L.ldp + k0 + tq], P[c_hi * L.ldp + k0 + tq], P[c_lo * L.ldp + k0 + tq + 4],
                       P[c_hi * L.ldp + k0 + tq + 4]};
        float bv[2] = {vp[(k0 + tq) * kTcLd + 8 * n1 + g], vp[(k0 + tq + 4) * kTcLd + 8 * n1 + g]};
        Tf32Frag<4> fa;
        Tf32Frag<2> fb;
        fa.set(av, false);
        fb.set(bv, false);
        mma_3xtf32(acc, fa, fb, false, false);
      };
      for (int ks = 0; ks < 2 * (m1 + 1); ks += 2) {
        step(ks, acc0);
        step(ks + 1, acc1);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = e < 2 ? c_lo : c_hi, j = 8 * n1 + 2 * tq + e % 2, t = n * kChunk + c;
        if (t < a.t) {
          a.y[((int64_t(b) * a.t + t) * a.hv + h) * a.dv + j0 + j] = cu::store_as<T>(acc0[e] + acc1[e]);
        }
      }
    } else {
      // S ← e^{G_C} S + (V' e^{G_C − G})ᵀ K: A = the scaled V' transposed ([16 rows][C]),
      // B = K ([C][Dk]), this warp's two column tiles.
      const float keep = last.y * expf(last.x);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][e] *= keep;
      }
      for (int ks = 0; ks < kChunk / 8; ++ks) {
        const int k0 = 8 * ks;
        float av[4] = {vt[(k0 + tq) * kTcLd + g], vt[(k0 + tq) * kTcLd + g + 8], vt[(k0 + tq + 4) * kTcLd + g],
                       vt[(k0 + tq + 4) * kTcLd + g + 8]};
        Tf32Frag<4> fa;
        fa.set(av, false);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int d = 8 * (su + 8 * i);
          if (d >= a.dk) continue;
          float bv[2] = {cu::to_acc(K[(k0 + tq) * L.ldk + d + g]), cu::to_acc(K[(k0 + tq + 4) * L.ldk + d + g])};
          Tf32Frag<2> fb;
          fb.set(bv, kExactInputs);
          mma_3xtf32(s[i], fa, fb, false, kExactInputs);
        }
      }
      for_state([&](int i, int e, int row, int col) { ssh[row * lds + col] = s[i][e]; });
    }
    __syncthreads(); // the new S is visible; chunk n's buffer and the [C][24] tiles may be reused
  }
  if (holds_state) {
    for_state([&](int i, int e, int row, int col) { a.states[(state0 + row) * a.dk + col] = cu::store_as<S>(s[i][e]); });
  }
}

/// Raises a kernel's dynamic shared memory limit to `bytes` once.
template <typename Kernel>
void opt_in_smem(Kernel kernel, size_t bytes) {
  NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

} // namespace

void gated_delta_chunked(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    const int32_t* slots,
    cu::IndexError* err,
    array& y,
    array& states) {
  const int b = q.shape(0), t = q.shape(1), hk = q.shape(2), dk = q.shape(3);
  const int hv = v.shape(2), dv = v.shape(3);
  const int chunks = (t + kChunk - 1) / kChunk;
  const size_t rows = size_t(b) * hv * chunks * kChunk;
  float* w = static_cast<float*>(cu::scratch(rows * dk * sizeof(float)));
  float* u = static_cast<float*>(cu::scratch(rows * dv * sizeof(float)));
  float* p = static_cast<float*>(cu::scratch(size_t(b) * hv * chunks * kChunk * kChunk * sizeof(float)));
  float2* decay = static_cast<float2*>(cu::scratch(rows * sizeof(float2)));
  dispatch_gated_delta_types(q.dtype(), state.dtype(), [&]<typename T, typename S>() {
    PrepareArgs<T> pa{};
    pa.q = cu::device_ptr<T>(q);
    pa.k = cu::device_ptr<T>(k);
    pa.v = cu::device_ptr<T>(v);
    pa.g = cu::device_ptr(g);
    pa.beta = cu::device_ptr(beta);
    pa.gate_type = gate_type(g.dtype());
    pa.beta_type = gate_type(beta.dtype());
    pa.w = w;
    pa.u = u;
    pa.p = p;
    pa.decay = decay;
    pa.b = b;
    pa.t = t;
    pa.hk = hk;
    pa.dk = dk;
    pa.hv = hv;
    pa.dv = dv;
    pa.chunks = chunks;
    const bool tensor_cores = env_switch("NUVEC_GATED_DELTA_TENSOR_CORES", false);
    const dim3 prepare_grid(static_cast<unsigned>(chunks), static_cast<unsigned>(b * hv));
    if (tensor_cores) {
      static const bool prepare_tc_opted =
          (opt_in_smem(gated_delta_prepare_tc_kernel<T>, prepare_tc_smem_bytes(128)), true);
      (void)prepare_tc_opted;
      gated_delta_prepare_tc_kernel<T><<<prepare_grid, kThreads, prepare_tc_smem_bytes(dk), cu::stream()>>>(pa);
      cu::check_launch("gated_delta_prepare_tc_kernel");
    } else {
      static const bool prepare_opted =
          (opt_in_smem(gated_delta_prepare_kernel<T>, prepare_smem_bytes(128)), true);
      (void)prepare_opted;
      gated_delta_prepare_kernel<T><<<prepare_grid, kThreads, prepare_smem_bytes(dk), cu::stream()>>>(pa);
      cu::check_launch("gated_delta_prepare_kernel");
    }

    StateArgs<T, S> sa{};
    sa.q = pa.q;
    sa.k = pa.k;
    sa.w = w;
    sa.u = u;
    sa.p = p;
    sa.decay = decay;
    sa.state = cu::device_ptr<S>(state);
    sa.states = static_cast<S*>(cu::device_ptr(states));
    sa.y = static_cast<T*>(cu::device_ptr(y));
    sa.slots = slots;
    sa.err = err;
    sa.b = b;
    sa.t = t;
    sa.hk = hk;
    sa.dk = dk;
    sa.hv = hv;
    sa.dv = dv;
    sa.chunks = chunks;
    sa.pool = state.shape(0);
    const dim3 state_grid(static_cast<unsigned>(dv / kRows), static_cast<unsigned>(b * hv));
    if (tensor_cores) {
      static const bool tc_opted =
          (opt_in_smem(gated_delta_state_tc_kernel<T, S>, tc_state_smem_bytes<T>(128)), true);
      (void)tc_opted;
      gated_delta_state_tc_kernel<T, S><<<state_grid, kStateThreads, tc_state_smem_bytes<T>(dk), cu::stream()>>>(
          sa, tc_layout<T>(dk));
      cu::check_launch("gated_delta_state_tc_kernel");
      return;
    }
    static const bool state_opted =
        (opt_in_smem(gated_delta_state_kernel<T, S>, state_smem_bytes<T>(128)), true);
    (void)state_opted;
    gated_delta_state_kernel<T, S><<<state_grid, kStateThreads, state_smem_bytes<T>(dk), cu::stream()>>>(
        sa, stage_layout(dk, sizeof(T)));
    cu::check_launch("gated_delta_state_kernel");
  });
}

} // namespace nuvec
