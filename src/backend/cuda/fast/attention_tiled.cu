// nuvec: the tiled flash-attention forward of ScaledDotProductAttention on tensor cores
// (FlashAttention-2's forward, Dao 2023, with mma.sync; the Hopper wgmma/TMA kernel is a later
// issue). Meaning: src/fast/attention.h; geometry and the no-visible-key rule:
// src/backend/common/attention.h; fragment layouts: src/backend/cuda/device/mma.cuh.
//
// One block of 4 warps per (query tile of kBr rows, batch row, query head); each warp owns
// kMT m16 row slices (16 kMT query rows). For each key tile of kBc keys:
//   S = Q Kᵀ (mma.m16n8k16, float32 accumulators, Q and K by ldmatrix from shared memory),
//   x = S · scale · log2(e) (+ mask · log2(e)), hidden keys −inf,
//   online softmax per row in registers (exp2; the running max m and the thread's partial
//   row sum l, reduced over the row's 4 lanes once at the end),
//   O = O · 2^(m_old − m_new) + P V (P rounded to the dtype, V by ldmatrix.trans).
// At the end the sink joins the (m, l) pair, O / l is written and lse = (m + log2 l) · ln 2.
// Shared memory holds one Q tile and one K and one V tile (FlashAttention-2's scheme: V(n)
// loads by cp.async while S(n) is computed, K(n+1) while softmax(n) and P V(n) are), rows
// padded by 16 bytes so that ldmatrix's 8 row addresses hit distinct banks.
// Key tiles a whole query tile cannot see (causal: after its last row's last key; window:
// before its first row's first key) are skipped; keys are masked one by one only in tiles
// some row sees in part (the diagonal, the window's edge, the last partial tile) and where an
// array mask is given.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/fast/attention.h"
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// What one launch reads: the call's buffers and geometry, the query tiles per (b, h), the
/// first block of this launch (launches go in pieces of at most 2^31 − 1 blocks) and the
/// score scale in log2 units.
struct TiledArgs {
  AttentionBuffers buf;
  attention::Geometry g;
  int64_t q_tiles = 0;
  int64_t block0 = 0;
  float scale_log2 = 0.0f;
  float lowest = 0.0f; // the dtype's lowest finite value (the no-visible-key rule's lse)
};

/// Which array mask a kernel applies (a template parameter, so that the unmasked kernels
/// carry none of its registers).
enum class MaskKind { None, Bool, Add };

/// The compile-time shape of one kernel: head size D (= Dv), kWarps warps of kMT m16 row
/// slices each (kBr = 16 kWarps kMT query rows), kBc keys a tile, __launch_bounds__'s
/// minimum of resident blocks kMinBlocks.
template <int D_, int kWarps_, int kMT_, int kBc_, int kMinBlocks_>
struct TiledShape {
  static constexpr int D = D_, kWarps = kWarps_, kMT = kMT_, kBc = kBc_, kMinBlocks = kMinBlocks_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBr = kWarps * 16 * kMT;
  static constexpr int kStride = D + 8; // shared row stride in elements: 16 bytes of padding
  static constexpr int kChunks = D / 8; // 16-byte chunks of a row
  static constexpr int kCopyRows = kThreads / kChunks; // rows one pass of the block's copies covers
  static constexpr size_t kSmemBytes = size_t(kBr + 2 * kBc) * kStride * 2;
  static_assert(D % 16 == 0 && kBc % 16 == 0, "head size and key tile multiples of 16");
};

// Copies ROWS rows of a [rows, D] matrix into shared memory (row stride S::kStride), thread
// tid taking chunk tid % kChunks of rows tid / kChunks + kCopyRows · i. `dst` and `src` are
// this thread's first chunk (shared address; global pointer, row stride `stride`), `left`
// the rows at or after that first row that exist (those past it are zero-filled: a copy of
// source size 0 reads nothing, so its address past the matrix's end is never dereferenced,
// as in Triton's masked loads). Issued, not waited for (cp.async).
template <typename S, int ROWS, typename T>
__device__ __forceinline__ void load_tile(uint32_t dst, const T* src, int64_t stride, int left) {
  if (S::kThreads % S::kChunks != 0 && threadIdx.x >= S::kCopyRows * S::kChunks) return;
  const int r0 = static_cast<int>(threadIdx.x) / S::kChunks;
#pragma unroll
  for (int it = 0; it < (ROWS + S::kCopyRows - 1) / S::kCopyRows; ++it) {
    const int r = it * S::kCopyRows;
    if (ROWS % S::kCopyRows == 0 || r0 + r < ROWS) {
      cp_async_16(dst + r * S::kStride * 2, src + r * stride, r < left);
    }
  }
}

template <typename T, typename S, MaskKind kMask>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) attention_tiled_kernel(const TiledArgs a) {
  constexpr int D = S::D, kMT = S::kMT, kBc = S::kBc, kBr = S::kBr, kStride = S::kStride;
  constexpr int kNB = kBc / 8; // 8-key column blocks of S
  constexpr int kDB = D / 8;   // 8-column blocks of O
  constexpr int kRowBytes = kStride * 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  const uint32_t aQ = smem_addr(sQ);
  const uint32_t aK = aQ + kBr * kRowBytes;
  const uint32_t aV = aK + kBc * kRowBytes;

  const attention::Geometry& g = a.g;
  const int lq = static_cast<int>(g.lq), lk = static_cast<int>(g.lk);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gr = lane / 4, tq = lane % 4; // the fragment's row group and thread-in-group
  const int64_t bid = a.block0 + blockIdx.x;
  const int64_t bh = bid / a.q_tiles;
  // Later query tiles first: under causal they see the most keys, and starting them early
  // keeps the last wave short.
  const int q0 = static_cast<int>((a.q_tiles - 1 - bid % a.q_tiles) * kBr);
  const int64_t b = bh / g.hq, h = bh % g.hq, hk = h / g.group();

  // The keys the tile's rows see: first and end grow with the row, so the union is
  // [first(q0), end(last row)) and every row sees all of [first(last row), end(q0)).
  const int q_last = (q0 + kBr < lq ? q0 + kBr : lq) - 1;
  int64_t first0, end0_, first_l_, end_l;
  g.key_range(q0, first0, end0_);
  g.key_range(q_last, first_l_, end_l);
  const int n_begin = static_cast<int>(first0 / kBc);
  const int n_end = end_l > first0 ? static_cast<int>((end_l + kBc - 1) / kBc) : n_begin;
  const int end0 = static_cast<int>(end0_), first_l = static_cast<int>(first_l_);

  // This thread's copy slot (row r0 of each pass, chunk cc) and fragment addresses.
  const int r0 = tid / S::kChunks, cc = tid % S::kChunks;
  const uint32_t copy_off = r0 * kRowBytes + cc * 16;
  const T* kp = static_cast<const T*>(a.buf.k) + b * g.k_stride[0] + hk * g.k_stride[1] + r0 * g.k_stride[2] + cc * 8;
  const T* vp = static_cast<const T*>(a.buf.v) + b * g.v_stride[0] + hk * g.v_stride[1] + r0 * g.v_stride[2] + cc * 8;
  const int warp_row0 = warp * 16 * kMT;
  const uint32_t q_frag = aQ + (warp_row0 + lane % 16) * kRowBytes + (lane / 16) * 16;
  const uint32_t k_frag = aK + ((lane / 16) * 8 + lane % 8) * kRowBytes + ((lane / 8) % 2) * 16;
  const uint32_t v_frag = aV + (lane % 16) * kRowBytes + (lane / 16) * 16;

  float o[kMT][kDB][4];
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
    for (int j = 0; j < kDB; ++j) o[mi][j][0] = o[mi][j][1] = o[mi][j][2] = o[mi][j][3] = 0.0f;
    m[mi][0] = m[mi][1] = -INFINITY;
    l[mi][0] = l[mi][1] = 0.0f;
  }

  if (n_begin < n_end) {
    const T* qp = static_cast<const T*>(a.buf.q) + b * g.q_stride[0] + h * g.q_stride[1] + (q0 + r0) * g.q_stride[2] + cc * 8;
    load_tile<S, kBr>(aQ + copy_off, qp, g.q_stride[2], lq - q0 - r0);
    load_tile<S, kBc>(aK + copy_off, kp + int64_t(n_begin) * kBc * g.k_stride[2], g.k_stride[2], lk - n_begin * kBc - r0);
    cp_async_commit();
  }

  for (int n = n_begin; n < n_end; ++n) {
    const int n0 = n * kBc;
    cp_async_wait<0>(); // K(n) (and Q) landed ...
    __syncthreads();    // ... for every thread, and every warp is done with V(n − 1)
    load_tile<S, kBc>(aV + copy_off, vp + int64_t(n0) * g.v_stride[2], g.v_stride[2], lk - n0 - r0);
    cp_async_commit();

    // S = Q K(n)ᵀ: s[mi][nb] is the 16 x 8 block of row slice mi and keys n0 + 8 nb ...
    float s[kMT][kNB][4];
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) s[mi][nb][0] = s[mi][nb][1] = s[mi][nb][2] = s[mi][nb][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t af[kMT][4];
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) ldmatrix_x4(af[mi], q_frag + mi * 16 * kRowBytes + ks * 32);
#pragma unroll
      for (int nb2 = 0; nb2 < kNB / 2; ++nb2) {
        uint32_t bf[4];
        ldmatrix_x4(bf, k_frag + nb2 * 16 * kRowBytes + ks * 32);
        const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) {
          mma_m16n8k16<T>(s[mi][2 * nb2], af[mi], b0);
          mma_m16n8k16<T>(s[mi][2 * nb2 + 1], af[mi], b1);
        }
      }
    }

    // Scores in log2 units; hidden keys −inf. Element (mi, nb, c) is row
    // q0 + warp_row0 + 16 mi + gr + 8 (c / 2), key n0 + 8 nb + 2 tq + c % 2.
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[mi][nb][c] *= a.scale_log2;
    if (!(n0 >= first_l && n0 + kBc <= end0)) { // some row sees part of the tile
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          int64_t kf, ke;
          g.key_range(q0 + warp_row0 + mi * 16 + gr + 8 * hf, kf, ke);
          // Visible columns j (key n0 + 2 tq + j) are lo <= j < hi.
          const int lo = static_cast<int>(kf) - n0 - 2 * tq, hi = static_cast<int>(ke) - n0 - 2 * tq;
#pragma unroll
          for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (nb * 8 + e < lo || nb * 8 + e >= hi) s[mi][nb][2 * hf + e] = -INFINITY;
        }
      }
    }
    if constexpr (kMask != MaskKind::None) {
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int row = q0 + warp_row0 + mi * 16 + gr + 8 * hf;
          if (row >= lq) continue;
          const int64_t at = b * g.mask_stride[0] + h * g.mask_stride[1] + row * g.mask_stride[2] +
                             int64_t(n0 + 2 * tq) * g.mask_stride[3];
#pragma unroll
          for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              if (n0 + 2 * tq + nb * 8 + e >= lk) continue;
              const int64_t i = at + (nb * 8 + e) * g.mask_stride[3];
              float& x = s[mi][nb][2 * hf + e];
              if constexpr (kMask == MaskKind::Bool) {
                if (!static_cast<const uint8_t*>(a.buf.mask)[i]) x = -INFINITY;
              } else {
                x += static_cast<float>(static_cast<const T*>(a.buf.mask)[i]) * kLog2e;
              }
            }
          }
        }
      }
    }

    cp_async_wait<0>(); // V(n) landed ...
    __syncthreads();    // ... for every thread, and every warp is done with K(n)
    if (n + 1 < n_end) {
      load_tile<S, kBc>(aK + copy_off, kp + int64_t(n0 + kBc) * g.k_stride[2], g.k_stride[2], lk - n0 - kBc - r0);
      cp_async_commit();
    }

    // Online softmax: new running max, rescale (O, l), P = 2^(x − m).
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = m[mi][hf];
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) mx = fmaxf(mx, fmaxf(s[mi][nb][2 * hf], s[mi][nb][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // A row with nothing visible yet keeps max −inf; its exponentials are taken
        // relative to 0 (exp2_base), which keeps them 0 rather than exp(−inf + inf).
        const float base = exp2_base(mx);
        const float alpha = exp2_approx(m[mi][hf] - base);
        m[mi][hf] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[mi][nb][2 * hf + e];
            x = exp2_approx(x - base);
            sum += x;
          }
        }
        l[mi][hf] = l[mi][hf] * alpha + sum;
#pragma unroll
        for (int j = 0; j < kDB; ++j) {
          o[mi][j][2 * hf] *= alpha;
          o[mi][j][2 * hf + 1] *= alpha;
        }
      }
    }

    // O += P V(n): P's accumulator blocks (2 kk, 2 kk + 1), rounded to the dtype, are the A
    // fragment of keys 16 kk .. 16 kk + 15.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pf[kMT][4];
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        pf[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
        pf[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
        pf[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
        pf[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
      }
#pragma unroll
      for (int db2 = 0; db2 < D / 16; ++db2) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, v_frag + kk * 16 * kRowBytes + db2 * 32);
        const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) {
          mma_m16n8k16<T>(o[mi][2 * db2], pf[mi], b0);
          mma_m16n8k16<T>(o[mi][2 * db2 + 1], pf[mi], b1);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads(); // shared memory is free for the epilogue

  // Epilogue: the row sums over the row's 4 lanes, the sink, the no-visible-key rule.
  const float sink = g.has_sinks ? static_cast<float>(static_cast<const T*>(a.buf.sinks)[h]) : 0.0f;
  bool mean_needed = false;
  float scale_o[kMT][2], lse[kMT][2];
  bool empty[kMT][2];
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = l[mi][hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = q0 + warp_row0 + mi * 16 + gr + 8 * hf;
      int64_t kf, ke;
      g.key_range(row, kf, ke);
      // Hidden keys are −inf here, so under a bool mask a row that saw nothing keeps max
      // −inf; an additive mask's −inf keys are visible (their row gives NaN, as the
      // fallback's softmax does).
      const bool none = ke <= kf || (kMask == MaskKind::Bool && m[mi][hf] == -INFINITY);
      empty[mi][hf] = none;
      float mm = m[mi][hf];
      if (g.has_sinks) {
        // The sink is one more score, of weight 1 and value 0.
        const float2 f = online_merge_exp2(mm, sum, sink * kLog2e, 1.0f);
        scale_o[mi][hf] = f.x / sum;
      } else {
        scale_o[mi][hf] = 1.0f / sum; // sum 0 (an additive −inf row): O is 0, and 0 · inf NaN
      }
      lse[mi][hf] = (mm + log2f(sum)) * kLn2;
      if (none) {
        if (g.has_sinks) {
          scale_o[mi][hf] = 0.0f;
          lse[mi][hf] = sink;
        } else {
          lse[mi][hf] = a.lowest + logf(static_cast<float>(lk));
          if (row < lq) mean_needed = true;
        }
      }
    }
  }

  // The mean of all Lk value rows, for rows that see no key and have no sink (float32,
  // in a fixed order: kGroups row groups of the block, then their sum).
  float* sMean = reinterpret_cast<float*>(sQ + kBr * kStride);
  if (__syncthreads_or(mean_needed)) {
    constexpr int kGroups = S::kCopyRows;
    float* sPart = sMean + D;
    if (r0 < kGroups) {
      const T* vrow = static_cast<const T*>(a.buf.v) + b * g.v_stride[0] + hk * g.v_stride[1] + cc * 8;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t j = r0; j < lk; j += kGroups) {
        const Vec<T, 8> v = load_vec<8>(vrow + j * g.v_stride[2]);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] += static_cast<float>(v[e]);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) sPart[r0 * D + cc * 8 + e] = acc[e];
    }
    __syncthreads();
    for (int col = tid; col < D; col += S::kThreads) {
      float t = 0.0f;
      for (int gi = 0; gi < kGroups; ++gi) t += sPart[gi * D + col];
      sMean[col] = lk > 0 ? t / static_cast<float>(lk) : 0.0f;
    }
    __syncthreads();
  }

  // O through shared memory (each warp its own rows of sQ) for 16-byte coalesced stores.
  T* sO = sQ;
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = warp_row0 + mi * 16 + gr + 8 * hf;
      const bool mean_row = empty[mi][hf] && !g.has_sinks;
#pragma unroll
      for (int j = 0; j < kDB; ++j) {
        const int col = j * 8 + 2 * tq;
        float v0 = o[mi][j][2 * hf] * scale_o[mi][hf], v1 = o[mi][j][2 * hf + 1] * scale_o[mi][hf];
        if (mean_row) {
          v0 = sMean[col];
          v1 = sMean[col + 1];
        }
        *reinterpret_cast<uint32_t*>(sO + r * kStride + col) = pack2<T>(v0, v1);
      }
      if (tq == 0 && q0 + r < lq) a.buf.lse[bh * lq + q0 + r] = lse[mi][hf];
    }
  }
  __syncwarp();
  T* out = static_cast<T*>(a.buf.out) + (bh * lq + q0) * D;
  constexpr int kWarpChunks = 16 * kMT * S::kChunks;
#pragma unroll
  for (int it = 0; it < (kWarpChunks + 31) / 32; ++it) {
    const int idx = it * 32 + lane;
    if (kWarpChunks % 32 == 0 || idx < kWarpChunks) {
      const int r = warp_row0 + idx / S::kChunks, c = idx % S::kChunks;
      if (q0 + r < lq) {
        *reinterpret_cast<uint4*>(out + int64_t(r) * D + c * 8) =
            *reinterpret_cast<const uint4*>(sO + r * kStride + c * 8);
      }
    }
  }
}

template <typename T, typename S, MaskKind kMask>
void launch_tiled(const TiledArgs& args) {
  auto kernel = attention_tiled_kernel<T, S, kMask>;
  NUVEC_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(S::kSmemBytes)));
  TiledArgs a = args;
  a.q_tiles = ceil_div(a.g.lq, S::kBr);
  const int64_t blocks = a.q_tiles * a.g.b * a.g.hq;
  constexpr int64_t kMaxBlocks = 0x7fffffff;
  for (int64_t b0 = 0; b0 < blocks; b0 += kMaxBlocks) {
    a.block0 = b0;
    const int64_t n = blocks - b0 < kMaxBlocks ? blocks - b0 : kMaxBlocks;
    kernel<<<static_cast<unsigned>(n), S::kThreads, S::kSmemBytes, stream()>>>(a);
    check_launch("attention_tiled_kernel");
  }
}

template <typename T, typename S>
void launch_masked(const TiledArgs& a) {
  if (!a.g.has_mask) return launch_tiled<T, S, MaskKind::None>(a);
  if (a.g.bool_mask) return launch_tiled<T, S, MaskKind::Bool>(a);
  launch_tiled<T, S, MaskKind::Add>(a);
}

// The kernel shape of each head size: FlashAttention-2's for sm_80+ (128-row query tiles of
// 4 warps, 32 rows a warp, 64-key tiles: each K and V fragment read from shared memory
// feeds two m16 slices), 64-row query tiles for 256 (its accumulators take 128 registers a
// thread at 16 rows a warp), 32-key tiles for 96 (at 64 ptxas spilled 132 bytes; at 32 none).
// Registers (-Xptxas -v, nvcc 13.0, sm_90a, no mask): 64: 234, 80: 244, 96: 226, 128: 255,
// 256: 243, no spills; the array-mask kernels of 128 spill 144 (bool) and 136 (additive)
// bytes (the mask's loads and addresses on top of O and S), the others none.
template <typename T>
void launch_for_head(const TiledArgs& a) {
  switch (a.g.d) {
    case 64: return launch_masked<T, TiledShape<64, 4, 2, 64, 2>>(a);
    case 80: return launch_masked<T, TiledShape<80, 4, 2, 64, 2>>(a);
    case 96: return launch_masked<T, TiledShape<96, 4, 2, 32, 2>>(a);
    case 128: return launch_masked<T, TiledShape<128, 4, 2, 64, 2>>(a);
    case 256: return launch_masked<T, TiledShape<256, 4, 1, 64, 2>>(a);
    default: break;
  }
  throw std::invalid_argument("[attention_tiled] head size " + std::to_string(a.g.d) + " is not covered.");
}

} // namespace

/// The tiled flash-attention forward (see the file comment). Covers float16 and bfloat16
/// with D == Dv in {64, 80, 96, 128, 256} (fast::tiled_head); any B, Hq (a multiple of Hkv),
/// Lq and Lk under 2^30; causal, window, array masks (bool or additive in the dtype, any
/// strides), sinks. Requires (the dispatcher checks it and copies otherwise) q, k and v
/// 16-byte aligned with their b, h and l strides multiples of 8 elements along axes of size
/// above 1 (cp.async moves 16-byte chunks); the mask and sinks need no alignment. Throws
/// std::invalid_argument when a requirement fails.
void attention_tiled(Dtype dtype, const attention::Geometry& g, const AttentionBuffers& buf) {
  if (g.d != g.dv) throw std::invalid_argument("[attention_tiled] needs D == Dv.");
  // cp.async moves 16-byte chunks: every row must start 16-byte aligned (axes of size 1
  // never move, so their strides do not matter).
  const int64_t qn[3] = {g.b, g.hq, g.lq}, kn[3] = {g.b, g.hkv, g.lk};
  bool ok = is_aligned(buf.q, 16) && is_aligned(buf.k, 16) && is_aligned(buf.v, 16);
  for (int i = 0; i < 3; ++i) {
    ok = ok && (qn[i] == 1 || g.q_stride[i] % 8 == 0) && (kn[i] == 1 || g.k_stride[i] % 8 == 0) &&
        (kn[i] == 1 || g.v_stride[i] % 8 == 0);
  }
  if (!ok) throw std::invalid_argument("[attention_tiled] q, k and v need 16-byte aligned rows.");
  if (g.lq >= (int64_t(1) << 30) || g.lk >= (int64_t(1) << 30)) {
    throw std::invalid_argument("[attention_tiled] sequence lengths must be under 2^30.");
  }
  if (g.b * g.hq * g.lq == 0) return;
  TiledArgs a;
  a.buf = buf;
  a.g = g;
  a.scale_log2 = g.scale * kLog2e;
  if (dtype == float16) {
    a.lowest = -65504.0f;
    return launch_for_head<__half>(a);
  }
  if (dtype == bfloat16) {
    a.lowest = -3.38953139e38f;
    return launch_for_head<__nv_bfloat16>(a);
  }
  throw std::invalid_argument("[attention_tiled] takes float16 or bfloat16.");
}

} // namespace nuvec::cu
