// nuvec: the tensor-core quantized products for more than a few rows (QuantizedMatmul and
// GatherQmm, transpose true): out = x · dequantize(W)ᵀ with W (N, K) packed along K; and
// GatherMm's transposed plain W (N, K) of the dtype, copied rather than dequantized, with
// NUVEC_GATHER_MM_TENSOR_CORES=1 (kPlainBits). Two
// kernels: the tiled one (dequantized W tiles in shared memory; described first) and the
// swapped one (namespace swap, further down: W dequantized in registers, M <= 256).
// Meaning: src/quantized/quantized.h; packing and formats: src/backend/common/math/quant.h
// (device form: dequant_tile.cuh); fragment layouts: src/backend/cuda/device/mma.cuh.
//
// One block of 4 or 8 warps per tile of BM rows x BN = 128 columns (and per K split); K in
// tiles of 64. Each K tile moves global -> shared by cp.async, kStages deep: x's rows in T,
// W's packed words, and each scale and bias as the aligned 4-byte word holding it (1- and
// 2-byte elements have no cp.async; staging them through registers instead stalled every
// iteration on a global load's latency: 3-4x slower in the first H200 run). W's tile is dequantized once per block into
// a [n][k] tile of T (double-buffered), so the warps along M share it, and every warp runs
// mma.sync m16n8k16 with float32 accumulators from ldmatrix fragments (x: A, row-major;
// W: B, "col"). Iteration i dequantizes tile i + 1 and multiplies tile i after one barrier.
//
// Rows: the block's BM rows are consecutive rows of the flattened (batch, M) row space,
// either within one batch entry (M rows each: gathered products with many rows per entry) or
// across entries (sorted gathers with few rows each, the mixture-of-experts prefill: entries
// with the same rhs are consecutive, so a tile of rows holds a few runs of one expert each and
// the block runs its K loop once per run, reading that expert's W tile once for the run).
// An lhs or rhs past x_count / w_count is recorded (record_index_error) and its rows skipped.
// Few tiles (small M, small N) split K over blocks: float32 partial sums in scratch memory,
// added and rounded by a second kernel.
// This tiled kernel serves what the swapped kernel below does not (M > 256, 2-bit and fp
// formats, gathered products). Measured (H200, bench/qmm_bench.cu): correct, but 1.3-5x
// slower than cuBLAS's bf16 GEMM (about 200 TFLOP/s at large M; 20 us at M = 16, 4096^2).
// ncu: latency-bound, 8 warps an SM issuing 0.26 instructions a cycle per scheduler, ~700
// IMAD / 350 ISETP per 64 HMMA in the loop (64-bit copy addressing).
//
// The swapped kernel (namespace swap; 8 < M <= 256, affine 4/8 bits, one W) computes
// outᵀ = W · xᵀ with W dequantized in registers straight into mma.sync A fragments (see its
// comment). Measured against cuBLAS bf16 (same run, W4 | W8 g64, us): 4096^2 M16 15.1 | 16.9
// vs 17.5; M64 25.9 | 28.9 vs 13.1; M256 48.3 | 53.5 vs 18.3; 14336x4096 M16 36.7 | 42.7 vs
// 33.4; 8192^2 M16 37.8 | 43.4 vs 35.5, M256 162 | 181 vs 49.4. So about cuBLAS at M = 16 and
// 2-3.6x slower from M = 64. ncu (M = 16, 4096^2): 15 us, DRAM 12% of peak, SM 25%, 14.5
// warps an SM at 10.6 cycles per issued instruction: latency-bound, not bound by the weight
// read. Next: per-row W reads of 128 bytes (a K tile of 256 codes: the 32-byte row pieces of
// a 64-code tile are scattered sector reads), the scales moved in 16-byte pieces rather than
// a 4-byte cp.async per row and tile, fewer instructions per pair (the dequantization is
// ~60% of the loop), and wgmma (A from registers, m64nNk16) for M >= 64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "backend/common/math/quant.h"
#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/quantized/dequant_tile.cuh"
#include "backend/cuda/quantized/qmm.h"
#include "core/env_switch.h"

namespace nuvec::cu {

namespace {

constexpr int kBK = 64;                 // K per tile
constexpr int kStages = 4;              // cp.async pipeline depth (the loop below needs >= 4)
constexpr int kStride = kBK + 8;        // shared row stride of the x and dequantized W tiles (elements)
constexpr int kRowBytes = kStride * 2;  // 16 bytes of padding: ldmatrix's 8 row addresses hit distinct banks

/// cp.async of 4 bytes (cp.async.ca: the .cg form takes 16 only); zero-filled when !valid.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}

/// A tile shape: BM x BN per block, WM x WN warps, each warp (BM / WM) x (BN / WN), i.e.
/// kMT m16 slices by kNT n8 slices; kMinBlocks for __launch_bounds__.
template <int BM_, int BN_, int WM_, int WN_, int kMinBlocks_>
struct Shape {
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, kMinBlocks = kMinBlocks_;
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kMT = BM / (WM * 16), kNT = BN / (WN * 8);
  static constexpr int kAChunks = BM * (kBK / 8) / kThreads; // 16-byte x chunks per thread
  static constexpr int kUnits = BN * (kBK / 32) / kThreads;  // dequantized 32-code units per thread
  static_assert(kMT >= 1 && kNT % 2 == 0 && BM % (WM * 16) == 0, "warp tiles of m16 x n16 multiples");
  static_assert(kAChunks * kThreads == BM * (kBK / 8) && kUnits * kThreads == BN * (kBK / 32), "even split");
};

/// BITS of GatherMm's plain W (16-bit elements of the dtype, read in place: no scales, and
/// "dequantizing" a tile is copying it into the padded tile ldmatrix reads).
constexpr int kPlainBits = 16;

/// What a K tile of W holds per row for (MODE, BITS): kWords packed words, up to kSpt scales
/// (and biases when affine; group sizes 16 (nvfp4) to 128); none for the plain W.
template <QuantMode MODE, int BITS>
struct Format {
  static constexpr bool kPlain = BITS == kPlainBits;
  static constexpr int kWords = kBK * BITS / 32;
  static constexpr int kWChunks = kWords * 4 / 16; // 16-byte chunks per row
  static constexpr int kSpt = kPlain ? 0 : MODE == QuantMode::Nvfp4 ? 4 : 2;
  static constexpr bool kBias = !kPlain && MODE == QuantMode::Affine;
  static_assert(kWords * 4 % 16 == 0, "W tile rows move in 16-byte chunks (bits 2, 4, 8, 16)");
};

/// The kernel's parameters (device pointers and sizes; see QmmArgs).
struct Params {
  const void* x;
  const uint32_t* w;
  const void* scales;
  const void* biases;
  void* out;
  float* ws; // split-K partial sums (splits, rows, N), or null
  const uint32_t* lhs;
  const uint32_t* rhs;
  IndexError* err;
  int64_t M, N, K, rows, x_count, w_count;
  int64_t m_tiles; // tiles per batch entry (rows within one entry); 0: tiles over all rows
  int gs_log2;  // log2 of the group size (16 .. 128)
  int spt_log2; // log2 of the groups per K tile row (1 when a group spans tiles)
  int k_tiles, splits;
};

template <typename S, typename F>
constexpr size_t stage_bytes() {
  return size_t(S::BM) * kRowBytes + size_t(S::BN) * F::kWords * 4 + size_t(S::BN) * F::kSpt * 4 * (F::kBias ? 2 : 1);
}
template <typename S, typename F>
constexpr size_t smem_bytes() {
  return kStages * stage_bytes<S, F>() + 2 * size_t(S::BN) * kRowBytes + size_t(S::BM) * (8 + 4);
}

template <typename T, QuantMode MODE, int BITS, typename S>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks) qmm_kernel(const Params p) {
  using F = Format<MODE, BITS>;
  constexpr int BM = S::BM, BN = S::BN, kThreads = S::kThreads, kMT = S::kMT, kNT = S::kNT;
  constexpr int kABytes = BM * kRowBytes, kWBytes = BN * F::kWords * 4, kSBytes = BN * F::kSpt * 4;
  constexpr int kStageBytes = static_cast<int>(stage_bytes<S, F>());
  constexpr int kWSlots = (BN * F::kWChunks + kThreads - 1) / kThreads;
  constexpr int kSSlots = F::kSpt > 0 ? (BN * F::kSpt + kThreads - 1) / kThreads : 1; // 1: unused
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t s_base = smem_addr(smem);
  const uint32_t b_base = s_base + kStages * kStageBytes;
  T* sB = reinterpret_cast<T*>(smem + kStages * kStageBytes);
  int64_t* sXoff = reinterpret_cast<int64_t*>(smem + kStages * kStageBytes + 2 * BN * kRowBytes);
  uint32_t* sExp = reinterpret_cast<uint32_t*>(sXoff + BM);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / S::WN, wn = warp % S::WN;
  const int64_t M = p.M, N = p.N, K = p.K;

  int64_t r_begin, r_end;
  if (p.m_tiles > 0) {
    const int64_t b = blockIdx.x / p.m_tiles, mt = blockIdx.x % p.m_tiles;
    r_begin = b * M + mt * BM;
    r_end = b * M + min(M, mt * BM + BM);
  } else {
    r_begin = int64_t(blockIdx.x) * BM;
    r_end = min(p.rows, r_begin + BM);
  }
  const int nrows = static_cast<int>(r_end - r_begin);
  const int64_t n0 = int64_t(blockIdx.y) * BN;
  const int split = blockIdx.z;
  const int kt_begin = static_cast<int>(int64_t(split) * p.k_tiles / p.splits);
  const int nk = static_cast<int>(int64_t(split + 1) * p.k_tiles / p.splits) - kt_begin;
  const bool reporter = blockIdx.y == 0 && blockIdx.z == 0; // one block column records errors

  for (int i = tid; i < BM; i += kThreads) {
    int64_t off = -1;
    uint32_t e = 0xffffffffu;
    if (i < nrows) {
      const int64_t r = r_begin + i, b = r / M, m = r - b * M;
      const int64_t l = p.lhs ? p.lhs[b] : 0;
      e = p.rhs ? p.rhs[b] : 0u;
      if (l < p.x_count) {
        off = (l * M + m) * K;
      } else if (reporter) {
        record_index_error(p.err, l, p.x_count, 0);
      }
    }
    sXoff[i] = off;
    sExp[i] = e;
  }
  __syncthreads();

  const T* x = static_cast<const T*>(p.x);
  const int64_t kw = K * BITS / 32;                           // words per W row
  const int64_t kg = K >> p.gs_log2; // groups per row
  const int spt = 1 << p.spt_log2;
  const uint32_t a_frag = (wm * kMT * 16 + lane % 16) * kRowBytes + (lane / 16) * 16;
  const uint32_t b_frag = (wn * kNT * 8 + (lane / 16) * 8 + lane % 8) * kRowBytes + ((lane / 8) % 2) * 16;

  int seg = 0;
  while (seg < nrows) {
    const uint32_t e = sExp[seg];
    int end = seg + 1;
    while (end < nrows && sExp[end] == e) ++end;
    if (e >= p.w_count) {
      if (tid == 0 && reporter) record_index_error(p.err, e, p.w_count, 0);
      seg = end;
      continue;
    }

    // This thread's copy slots: x chunks, W chunks, scale entries (fixed for the segment).
    const T* a_src[S::kAChunks];
    bool a_ok[S::kAChunks];
#pragma unroll
    for (int j = 0; j < S::kAChunks; ++j) {
      const int c = tid + j * kThreads, row = c / (kBK / 8), col = c % (kBK / 8);
      const int64_t off = sXoff[row];
      a_ok[j] = row >= seg && row < end && off >= 0;
      a_src[j] = x + (a_ok[j] ? off : 0) + col * 8;
    }
    const uint32_t* wbase = p.w + int64_t(e) * N * kw;
    const uint32_t* w_src[kWSlots];
    bool w_ok[kWSlots];
#pragma unroll
    for (int j = 0; j < kWSlots; ++j) {
      const int c = tid + j * kThreads, row = c / F::kWChunks, col = c % F::kWChunks;
      w_ok[j] = c < BN * F::kWChunks && n0 + row < N;
      w_src[j] = wbase + (w_ok[j] ? (n0 + row) * kw : 0) + col * 4;
    }
    // Scale (and bias) entry c of a tile: row c / spt, group c % spt of the tile; it moves as
    // the aligned 4-byte word that holds it (cp.async has no 1- or 2-byte form), the word
    // never past the array's end since it starts at or before the element.
    const int64_t sbase = int64_t(e) * N * kg;
    int64_t s_idx[kSSlots];
    bool s_ok[kSSlots];
#pragma unroll
    for (int j = 0; j < (F::kSpt > 0 ? kSSlots : 0); ++j) {
      const int c = tid + j * kThreads, row = c >> p.spt_log2, sub = c & (spt - 1);
      s_ok[j] = c < BN * spt && n0 + row < N;
      s_idx[j] = s_ok[j] ? sbase + (n0 + row) * kg + sub : 0;
    }
    // The low bits of each dequantized unit's first scale index (the byte of its word).
    uint32_t u_idx[S::kUnits];
#pragma unroll
    for (int u = 0; u < S::kUnits; ++u) {
      const int row = (tid + u * kThreads) / (kBK / 32);
      u_idx[u] = static_cast<uint32_t>(sbase + (n0 + row) * kg);
    }

    auto issue = [&](int i, int stage) { // cp.async of x's and W's K tile kt_begin + i
      const int kt = kt_begin + i;
      const uint32_t st = s_base + stage * kStageBytes;
#pragma unroll
      for (int j = 0; j < S::kAChunks; ++j) {
        const int c = tid + j * kThreads;
        cp_async_16(st + (c / (kBK / 8)) * kRowBytes + (c % (kBK / 8)) * 16, a_src[j] + int64_t(kt) * kBK, a_ok[j]);
      }
#pragma unroll
      for (int j = 0; j < kWSlots; ++j) {
        const int c = tid + j * kThreads;
        if (kWSlots * kThreads == BN * F::kWChunks || c < BN * F::kWChunks) {
          cp_async_16(st + kABytes + c * 16, w_src[j] + int64_t(kt) * F::kWords, w_ok[j]);
        }
      }
      const int64_t g0 = (int64_t(kt) * kBK) >> p.gs_log2;
#pragma unroll
      for (int j = 0; j < (F::kSpt > 0 ? kSSlots : 0); ++j) {
        const int c = tid + j * kThreads;
        if (c < BN * spt) {
          const uint32_t slot = ((c >> p.spt_log2) * F::kSpt + (c & (spt - 1))) * 4;
          const int64_t byte = (s_idx[j] + g0) * (F::kBias ? 2 : 1);
          cp_async_4(st + kABytes + kWBytes + slot, static_cast<const unsigned char*>(p.scales) + (byte & ~int64_t(3)), s_ok[j]);
          if constexpr (F::kBias) {
            cp_async_4(st + kABytes + kWBytes + kSBytes + slot,
                       static_cast<const unsigned char*>(p.biases) + (byte & ~int64_t(3)), s_ok[j]);
          }
        }
      }
    };
    // The value of the scale or bias word `v` holding element `idx` (its low bits).
    auto scale_of = [](uint32_t v, uint32_t idx) -> float {
      if constexpr (F::kBias) {
        const unsigned short h = static_cast<unsigned short>(v >> (16 * (idx & 1u)));
        return static_cast<float>(*reinterpret_cast<const T*>(&h));
      } else {
        return math::fp_scale_value(MODE, (v >> (8 * (idx & 3u))) & 0xFFu);
      }
    };
    auto dequant = [&](int i, int stage, int buf) { // W tile i in `stage` -> sB[buf]
      const unsigned char* st = smem + stage * kStageBytes;
      const uint32_t* sw = reinterpret_cast<const uint32_t*>(st + kABytes);
      const uint32_t* ss = reinterpret_cast<const uint32_t*>(st + kABytes + kWBytes);
      const uint32_t g0 = static_cast<uint32_t>((int64_t(kt_begin + i) * kBK) >> p.gs_log2);
#pragma unroll
      for (int u = 0; u < S::kUnits; ++u) {
        const int unit = tid + u * kThreads, row = unit / (kBK / 32), sub = unit % (kBK / 32);
        uint32_t wv[BITS];
        const uint32_t* src = sw + row * F::kWords + sub * BITS;
        if constexpr (BITS == 2) {
          const uint2 v = *reinterpret_cast<const uint2*>(src);
          wv[0] = v.x, wv[1] = v.y;
        } else {
#pragma unroll
          for (int q = 0; q < BITS; q += 4) {
            const uint4 v = *reinterpret_cast<const uint4*>(src + q);
            wv[q] = v.x, wv[q + 1] = v.y, wv[q + 2] = v.z, wv[q + 3] = v.w;
          }
        }
        uint4* dst = reinterpret_cast<uint4*>(sB + (buf * BN + row) * kStride + sub * 32);
        if constexpr (F::kPlain) {
          // 32 elements of T as they are.
#pragma unroll
          for (int q = 0; q < 4; ++q) dst[q] = make_uint4(wv[4 * q], wv[4 * q + 1], wv[4 * q + 2], wv[4 * q + 3]);
        } else {
          // The tile-local groups of codes 0..15 and 16..31 (0 when a group spans the tile).
          const int g_lo = (32 * sub) >> p.gs_log2, g_hi = (32 * sub + 16) >> p.gs_log2;
          const uint32_t* sr = ss + row * F::kSpt;
          const uint32_t i_lo = u_idx[u] + g0 + g_lo, i_hi = u_idx[u] + g0 + g_hi;
          const float s_lo = scale_of(sr[g_lo], i_lo), s_hi = scale_of(sr[g_hi], i_hi);
          float b_lo = 0.0f, b_hi = 0.0f;
          if constexpr (F::kBias) {
            b_lo = scale_of(sr[BN * F::kSpt + g_lo], i_lo);
            b_hi = scale_of(sr[BN * F::kSpt + g_hi], i_hi);
          }
          uint32_t o[16];
          dq::dequant_unit<T, MODE, BITS>(wv, s_lo, b_lo, s_hi, b_hi, o);
#pragma unroll
          for (int q = 0; q < 4; ++q) dst[q] = make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
        }
      }
    };

    float acc[kMT][kNT][4];
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
      for (int nb = 0; nb < kNT; ++nb) acc[mi][nb][0] = acc[mi][nb][1] = acc[mi][nb][2] = acc[mi][nb][3] = 0.0f;

    // Prologue: tiles 0 .. kStages - 2 in flight; tile 0 dequantized.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) issue(s, s);
      cp_async_commit();
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (nk > 0) dequant(0, 0, 0);

    for (int i = 0; i < nk; ++i) {
      cp_async_wait<kStages - 3>(); // tile i + 1 landed (this thread's copies) ...
      __syncthreads();              // ... everyone's; sB[i & 1] written; tile i - 1 released
      if (i + kStages - 1 < nk) issue(i + kStages - 1, (i + kStages - 1) % kStages);
      cp_async_commit();
      if (i + 1 < nk) dequant(i + 1, (i + 1) % kStages, (i + 1) & 1);

      const uint32_t aA = s_base + (i % kStages) * kStageBytes + a_frag;
      const uint32_t aB = b_base + (i & 1) * BN * kRowBytes + b_frag;
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {
        uint32_t af[kMT][4];
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) ldmatrix_x4(af[mi], aA + mi * 16 * kRowBytes + ks * 32);
#pragma unroll
        for (int nj = 0; nj < kNT / 2; ++nj) {
          uint32_t bf[4];
          ldmatrix_x4(bf, aB + nj * 16 * kRowBytes + ks * 32);
          const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
#pragma unroll
          for (int mi = 0; mi < kMT; ++mi) {
            mma_m16n8k16<T>(acc[mi][2 * nj], af[mi], b0);
            mma_m16n8k16<T>(acc[mi][2 * nj + 1], af[mi], b1);
          }
        }
      }
    }

    // Element (mi, nb, c): row wm kMT 16 + 16 mi + lane / 4 + 8 (c / 2), column
    // wn kNT 8 + 8 nb + 2 (lane % 4) + c % 2 (mma.cuh's C layout).
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int row = wm * kMT * 16 + mi * 16 + lane / 4 + 8 * hf;
        if (row < seg || row >= end || sXoff[row] < 0) continue;
        const int64_t r = r_begin + row;
#pragma unroll
        for (int nb = 0; nb < kNT; ++nb) {
          const int64_t col = n0 + wn * kNT * 8 + nb * 8 + 2 * (lane % 4);
          if (col >= N) continue;
          if (p.ws != nullptr) {
            *reinterpret_cast<float2*>(p.ws + (int64_t(split) * p.rows + r) * N + col) =
                make_float2(acc[mi][nb][2 * hf], acc[mi][nb][2 * hf + 1]);
          } else {
            *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + r * N + col) =
                pack2<T>(acc[mi][nb][2 * hf], acc[mi][nb][2 * hf + 1]);
          }
        }
      }
    }
    seg = end;
    __syncthreads(); // the next run's prologue overwrites the stages
  }
}

/// out = Σ_s ws[s] rounded to T, two elements a thread (N even).
template <typename T>
__global__ void qmm_splitk_reduce_kernel(const float* ws, T* out, int64_t pairs, int splits) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs; i += int64_t(gridDim.x) * blockDim.x) {
    float2 acc = reinterpret_cast<const float2*>(ws)[i];
    for (int s = 1; s < splits; ++s) {
      const float2 v = reinterpret_cast<const float2*>(ws)[s * pairs + i];
      acc.x += v.x;
      acc.y += v.y;
    }
    reinterpret_cast<uint32_t*>(out)[i] = pack2<T>(acc.x, acc.y);
  }
}

/// The split count for `tiles` blocks of `per_sm` resident per SM: the fewest splits within
/// 5% of the best estimated time (waves / splits), each split at least 4 K tiles.
int choose_splits(int64_t tiles, int per_sm, int k_tiles) {
  const int64_t slots = int64_t(per_sm) * device_props().multiProcessorCount;
  const int max_splits = std::max(1, std::min(16, k_tiles / 4));
  auto cost = [&](int s) { return double(ceil_div(tiles * s, slots)) / s + (s > 1 ? 0.02 : 0.0); };
  int best = 1;
  for (int s = 2; s <= max_splits; ++s) {
    if (cost(s) < cost(best) * 0.95) best = s;
  }
  return best;
}

/// Whether the rows go into tiles across batch entries (few rows per entry and every entry
/// of a run shares its W: sorted rhs, no rhs, or one W).
bool grouped_rows(const QmmArgs& a) {
  return a.batch > 1 && a.M < 64 && (a.rhs == nullptr || a.sorted || a.w_count == 1);
}

template <typename T, QuantMode MODE, int BITS, typename S>
void launch(const QmmArgs& a) {
  using F = Format<MODE, BITS>;
  auto kernel = qmm_kernel<T, MODE, BITS, S>;
  constexpr size_t kSmem = smem_bytes<S, F>();
  static const int per_sm = [&] {
    NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    int n = 0;
    NUVEC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, S::kThreads, kSmem));
    return std::max(n, 1);
  }();
  Params p{};
  p.x = a.x;
  p.w = F::kPlain ? static_cast<const uint32_t*>(a.w_plain) : a.w;
  p.scales = a.scales;
  p.biases = a.biases;
  p.out = a.out;
  p.lhs = a.lhs;
  p.rhs = a.rhs;
  p.err = a.err;
  p.M = a.M, p.N = a.N, p.K = a.K;
  p.rows = a.batch * a.M;
  p.x_count = a.x_count, p.w_count = a.w_count;
  p.gs_log2 = 0;
  while ((1 << p.gs_log2) < a.spec.group_size) ++p.gs_log2;
  p.spt_log2 = std::max(6 - p.gs_log2, 0); // kBK = 2^6
  p.k_tiles = static_cast<int>(a.K / kBK);
  int64_t row_tiles;
  if (grouped_rows(a)) {
    p.m_tiles = 0;
    row_tiles = ceil_div(p.rows, S::BM);
  } else {
    p.m_tiles = ceil_div(a.M, S::BM);
    row_tiles = a.batch * p.m_tiles;
  }
  const int64_t n_tiles = ceil_div(a.N, S::BN);
  p.splits = choose_splits(row_tiles * n_tiles, per_sm, p.k_tiles);
  if (p.splits > 1) p.ws = static_cast<float*>(scratch(size_t(p.splits) * p.rows * a.N * sizeof(float)));
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(n_tiles), static_cast<unsigned>(p.splits));
  kernel<<<grid, S::kThreads, kSmem, stream()>>>(p);
  check_launch("qmm_kernel");
  if (p.splits > 1) {
    const int64_t pairs = p.rows * a.N / 2;
    const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(pairs, 256), int64_t(device_props().multiProcessorCount) * 8));
    qmm_splitk_reduce_kernel<T><<<blocks, 256, 0, stream()>>>(p.ws, static_cast<T*>(a.out), pairs, p.splits);
    check_launch("qmm_splitk_reduce_kernel");
  }
}

// Tile shapes by rows per W (the rows one K loop serves): 16 and 32 rows on 4 warps (the
// weight stream dominates: small tiles, more blocks per SM, more of W in flight), 64 and
// 128 rows on 8 warps (2 x 4 warps of 32 x 32 and 64 x 32).
using Shape16 = Shape<16, 128, 1, 4, 3>;
using Shape32 = Shape<32, 128, 1, 4, 2>;
using Shape64 = Shape<64, 128, 2, 4, 2>;
using Shape128 = Shape<128, 128, 2, 4, 1>;

template <typename T, QuantMode MODE, int BITS>
void launch_for_rows(const QmmArgs& a) {
  int64_t rows = a.M;
  if (grouped_rows(a)) rows = a.batch * a.M / std::max<int64_t>(1, std::min(a.batch, a.rhs ? a.w_count : 1));
  if (rows <= 16) return launch<T, MODE, BITS, Shape16>(a);
  if (rows <= 32) return launch<T, MODE, BITS, Shape32>(a);
  if (rows <= 64) return launch<T, MODE, BITS, Shape64>(a);
  launch<T, MODE, BITS, Shape128>(a);
}

template <typename T>
void launch_for_format(const QmmArgs& a) {
  if (a.w_plain != nullptr) return launch_for_rows<T, QuantMode::Affine, kPlainBits>(a); // mode unused
  switch (a.spec.mode) {
    case QuantMode::Affine:
      if (a.spec.bits == 2) return launch_for_rows<T, QuantMode::Affine, 2>(a);
      if (a.spec.bits == 4) return launch_for_rows<T, QuantMode::Affine, 4>(a);
      return launch_for_rows<T, QuantMode::Affine, 8>(a);
    case QuantMode::Mxfp4:
      return launch_for_rows<T, QuantMode::Mxfp4, 4>(a);
    case QuantMode::Mxfp8:
      return launch_for_rows<T, QuantMode::Mxfp8, 8>(a);
    case QuantMode::Nvfp4:
      return launch_for_rows<T, QuantMode::Nvfp4, 4>(a);
  }
}

// ---- The swapped product (M <= 256, affine 4 and 8 bits, one W): outᵀ = W · xᵀ ----
// W is mma.sync's A operand (16 output features per m16 slice), dequantized in registers
// straight into A fragments; x is the B operand (tokens as mma's N: 8 per n8 tile, so small
// M wastes nothing), from shared memory. Thread (g = lane / 4, t = lane % 4) owns, per W row
// and K tile of 64, the 16 codes 16t .. 16t + 15 (2 words at 4 bits, 4 at 8 bits: one 8- or
// 16-byte shared load, conflict-free); k-step s (of 4) takes codes 4s .. 4s + 3 of them. So
// mma's k index 2t + e (e < 2) stands for code 16t + 4s + e and 2t + 8 + e for 16t + 4s + 2 + e:
// a permutation of K within the tile, applied to both operands (B's registers then hold
// x[token][16t + 4s .. + 3], the 8 bytes after A's, one 16-byte load per two k-steps). A
// thread's 16 codes lie in one group (group sizes >= 16), so one scale and bias per row and
// tile. Copies: cp.async, kStages deep (x rows, W's packed words, and each row's scale and
// bias as the aligned 4-byte word holding it); 32-bit shared offsets precomputed; no guards
// in the loop (out-of-range rows and tokens are zero-filled tiles). Up to 64 tokens, two
// warps share each row slice (KW = 2), each taking one 32-code half of every tile (twice the
// warps for a latency-bound loop), their sums added through shared memory at the end. Few
// tiles split K over blocks: each writes float32 partials (in its threads' register order,
// coalesced) and the last block of a tile to arrive (a per-stream counter) adds every split's
// partials in split order (deterministic) and stores. The output leaves through a shared
// [token][row] tile as 16-byte row-contiguous stores.
namespace swap {

constexpr int kK = 64;                 // K per stage
constexpr int kRows = 128;             // W rows (output features) per block
constexpr int kXStride = kK * 2 + 16;  // bytes per token row of the x tile: 16-byte loads of 8 rows hit distinct banks
constexpr int kOutStride = kRows * 2 + 16; // bytes per token row of the output staging tile

/// NT n8 tiles per warp, WT warps along tokens (4 along rows, 2 m16 slices each), KW warps
/// along K (KW = 2: each takes one 32-code half of every tile, sums added through shared
/// memory at the end: twice the warps for the latency-bound small-M loop), kStages,
/// kMinBlocks resident per SM (the register cap).
template <int NT_, int WT_, int KW_, int kStages_, int kMinBlocks_>
struct Cfg {
  static constexpr int MR = 2, NT = NT_, WR = 4, WT = WT_, KW = KW_, kStages = kStages_, kMinBlocks = kMinBlocks_;
  static constexpr int kAccThreads = WR * WT * 32; // the threads of one K slice (the output's owners)
  static constexpr int kThreads = kAccThreads * KW;
  static constexpr int BT = WT * NT * 8; // tokens per block
  static_assert(KW == 1 || KW == 2, "K within a tile: whole or two halves");
  static_assert(WR * MR * 16 == kRows, "4 warps of 32 rows along W's rows");
};
// Per rows M (bench/qmm_bench.cu variants, H200): two K slices win at 16 and 32 tokens and at
// 64 with 8-bit codes; at 64 with 4-bit codes one slice (128 threads, 3 blocks an SM) is
// 10-15% faster; 128 tokens on 8 warps (one block an SM) wins above 64.
using Cfg16 = Cfg<2, 1, 2, 6, 2>;
using Cfg32 = Cfg<4, 1, 2, 6, 2>;
using Cfg64 = Cfg<8, 1, 2, 4, 2>;
using Cfg64k1 = Cfg<8, 1, 1, 4, 3>;
using Cfg128 = Cfg<8, 2, 1, 4, 1>;

template <typename C, int BITS>
constexpr int stage_bytes() {
  return C::BT * kXStride + kRows * (kK * BITS / 8) + kRows * 8;
}
template <typename C, int BITS>
constexpr int smem_bytes() {
  // The stages, then (reused) the K halves' float32 sums and the output staging tile.
  return std::max({C::kStages * stage_bytes<C, BITS>(), C::BT * kOutStride, C::BT * kRows * 4});
}

/// The swapped kernel's parameters (sizes below 2^31: swap_covers).
struct Params {
  const void* x;
  const uint32_t* w;
  const void* scales;
  const void* biases;
  void* out;
  float* ws;          // split-K partials (tiles, splits, block's accumulators), or null
  uint32_t* counters; // per tile, zero between launches (the last block resets its own)
  int M, N, K;
  int kg;             // groups per W row
  int gs_log2;
  int k_tiles, splits;
};

/// Test hook (bench/qmm_bench.cu): a split count to use instead of choose_swap_splits's.
int force_splits = 0;

template <typename T, int BITS, typename C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) qmm_swap_kernel(const Params p) {
  constexpr int kThreads = C::kThreads, BT = C::BT, MR = C::MR, NT = C::NT, S = C::kStages;
  constexpr int kWRow = kK * BITS / 8; // bytes of one W row per tile
  constexpr int kXBytes = BT * kXStride, kWBytes = kRows * kWRow;
  constexpr int kStage = stage_bytes<C, BITS>();
  constexpr int kXChunks = (BT * (kK / 8) + kThreads - 1) / kThreads; // 16-byte copies per thread per tile
  constexpr int kWChunks = kRows * kWRow / 16 / kThreads;
  constexpr int kWPerChunkRow = kWRow / 16;
  static_assert((kXChunks * kThreads == BT * (kK / 8) || (kXChunks == 1 && kThreads % 8 == 0)) &&
                    kWChunks * kThreads == kRows * kWRow / 16, "even copies (x: or one for the first threads)");
  static_assert(kThreads >= kRows, "one thread per row copies its scale and bias");
  using RA = dq::RowAffine<T, BITS>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_last;
  const uint32_t sbase = smem_addr(smem);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wr = warp % C::WR, wt = (warp / C::WR) % C::WT, wk = warp / (C::WR * C::WT);
  const int at = tid % C::kAccThreads; // the thread's place within its K slice
  const int m0 = blockIdx.x * BT, n0 = blockIdx.y * kRows, z = blockIdx.z;
  const int kt0 = static_cast<int>(int64_t(z) * p.k_tiles / p.splits);
  const int nk = static_cast<int>(int64_t(z + 1) * p.k_tiles / p.splits) - kt0;
  const int M = p.M, N = p.N, K = p.K;

  // Copy sources: copy j of a tile lies j * (threads / chunks per row) rows after copy 0,
  // so one base pointer per operand and 32-bit offsets; bit j of xok / wok: row in range.
  constexpr int kXRowStep = kThreads / 8, kWRowStep = kThreads / kWPerChunkRow;
  const int kw = K / 32 * BITS; // words per W row
  const T* xsrc = static_cast<const T*>(p.x) + int64_t(min(m0 + tid / 8, M - 1)) * K + int64_t(kt0) * kK + tid % 8 * 8;
  const uint32_t* wsrc = p.w + int64_t(min(n0 + tid / kWPerChunkRow, N - 1)) * kw + int64_t(kt0) * (kK * BITS / 32) +
                         tid % kWPerChunkRow * 4;
  uint32_t xok = 0, wok = 0;
#pragma unroll
  for (int j = 0; j < kXChunks; ++j) {
    xok |= uint32_t(tid + j * kThreads < BT * (kK / 8) && m0 + tid / 8 + j * kXRowStep < M) << j;
  }
#pragma unroll
  for (int j = 0; j < kWChunks; ++j) wok |= uint32_t(n0 + tid / kWPerChunkRow + j * kWRowStep < N) << j;
  const bool sok = tid < kRows && n0 + tid < N;
  const int64_t srow = int64_t(sok ? n0 + tid : 0) * p.kg;
  const unsigned char* ssrc = static_cast<const unsigned char*>(p.scales) + srow * 2;
  const unsigned char* bsrc = static_cast<const unsigned char*>(p.biases) + srow * 2;

  auto issue = [&](int i, int stage) { // local tile i into `stage`
    const uint32_t st = sbase + stage * kStage;
#pragma unroll
    for (int j = 0; j < kXChunks; ++j) { // an out-of-range row reads row 0 of the tile (valid), zero-filled
      if (kXChunks * kThreads > BT * (kK / 8) && tid + j * kThreads >= BT * (kK / 8)) break; // no chunk here
      const bool ok = (xok >> j) & 1u;
      cp_async_16(st + (tid + j * kThreads) / 8 * kXStride + (tid + j * kThreads) % 8 * 16,
                  xsrc + (ok ? j * kXRowStep * K : 0) + i * kK, ok);
    }
#pragma unroll
    for (int j = 0; j < kWChunks; ++j) {
      const bool ok = (wok >> j) & 1u;
      cp_async_16(st + kXBytes + (tid + j * kThreads) * 16, wsrc + (ok ? j * kWRowStep * kw : 0) + i * (kK * BITS / 32), ok);
    }
    if (tid < kRows) {
      // The 4-byte word holding the row's first scale of the tile (scales 4-byte aligned).
      const int e = ((kt0 + i) * kK) >> p.gs_log2;
      const uint32_t sdst = st + kXBytes + kWBytes + tid * 4;
      const uintptr_t mask = ~uintptr_t(3);
      cp_async_4(sdst, reinterpret_cast<const void*>((reinterpret_cast<uintptr_t>(ssrc) + 2 * e) & mask), sok);
      cp_async_4(sdst + kRows * 4, reinterpret_cast<const void*>((reinterpret_cast<uintptr_t>(bsrc) + 2 * e) & mask), sok);
    }
  };

  // This thread's rows (within the block) and the parity of each row's first scale element.
  int row[MR][2];
  bool rodd[MR][2];
#pragma unroll
  for (int mr = 0; mr < MR; ++mr) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row[mr][h] = wr * (MR * 16) + mr * 16 + g + 8 * h;
      rodd[mr][h] = ((int64_t(n0 + row[mr][h]) * p.kg) & 1) != 0;
    }
  }

  float acc[MR][NT][4];
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[mr][nt][0] = acc[mr][nt][1] = acc[mr][nt][2] = acc[mr][nt][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < nk) issue(s, s);
    cp_async_commit();
  }
  const uint32_t x_frag = (wt * NT * 8 + g) * kXStride + t * 32;
  for (int i = 0; i < nk; ++i) {
    cp_async_wait<S - 2>(); // tile i landed (this thread's copies) ...
    __syncthreads();        // ... everyone's; tile i - 1's stage released
    if (i + S - 1 < nk) issue(i + S - 1, (i + S - 1) % S);
    cp_async_commit();

    const int stage = i % S;
    const unsigned char* st = smem + stage * kStage;
    // Scale parity of this thread's codes within its rows: element (n kg + (k >> gs_log2)).
    const bool godd = ((((kt0 + i) * kK + 16 * t) >> p.gs_log2) & 1) != 0;
    RA ra[MR][2];
    uint32_t wv[MR][2][BITS / 2];
#pragma unroll
    for (int mr = 0; mr < MR; ++mr) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row[mr][h];
        const uint32_t sw = *reinterpret_cast<const uint32_t*>(st + kXBytes + kWBytes + r * 4);
        const uint32_t bw = *reinterpret_cast<const uint32_t*>(st + kXBytes + kWBytes + kRows * 4 + r * 4);
        ra[mr][h].set(sw, bw, rodd[mr][h] != godd);
        if constexpr (BITS == 4) {
          const uint2 v = *reinterpret_cast<const uint2*>(st + kXBytes + r * kWRow + t * 8);
          wv[mr][h][0] = v.x, wv[mr][h][1] = v.y;
        } else {
          const uint4 v = *reinterpret_cast<const uint4*>(st + kXBytes + r * kWRow + t * 16);
          wv[mr][h][0] = v.x, wv[mr][h][1] = v.y, wv[mr][h][2] = v.z, wv[mr][h][3] = v.w;
        }
      }
    }
#pragma unroll
    for (int hp = 0; hp < 2; ++hp) { // k-steps 2 hp + sub: A fragments first, then each B once
      if (C::KW == 2 && hp != wk) continue; // the other K slice's half (warp-uniform)
      uint32_t a[2][MR][4];
#pragma unroll
      for (int sub = 0; sub < 2; ++sub) {
        const int s = 2 * hp + sub;
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) {
          if constexpr (BITS == 4) {
            // Word s / 2, bytes 2 (s % 2) and 2 (s % 2) + 1: codes 4s .. 4s + 3.
            const uint32_t w0 = wv[mr][0][s / 2], w1 = wv[mr][1][s / 2];
            const uint32_t w04 = w0 >> 4, w14 = w1 >> 4;
            a[sub][mr][0] = dq::affine4_pair<T>(w0, w04, 2 * sub, ra[mr][0]);
            a[sub][mr][1] = dq::affine4_pair<T>(w1, w14, 2 * sub, ra[mr][1]);
            a[sub][mr][2] = dq::affine4_pair<T>(w0, w04, 2 * sub + 1, ra[mr][0]);
            a[sub][mr][3] = dq::affine4_pair<T>(w1, w14, 2 * sub + 1, ra[mr][1]);
          } else {
            a[sub][mr][0] = dq::affine8_pair<T>(wv[mr][0][s], 0, ra[mr][0]);
            a[sub][mr][1] = dq::affine8_pair<T>(wv[mr][1][s], 0, ra[mr][1]);
            a[sub][mr][2] = dq::affine8_pair<T>(wv[mr][0][s], 2, ra[mr][0]);
            a[sub][mr][3] = dq::affine8_pair<T>(wv[mr][1][s], 2, ra[mr][1]);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint4 bv = *reinterpret_cast<const uint4*>(st + x_frag + nt * 8 * kXStride + hp * 16);
        const uint32_t b0[2] = {bv.x, bv.y}, b1[2] = {bv.z, bv.w};
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) {
          mma_m16n8k16<T>(acc[mr][nt], a[0][mr], b0);
          mma_m16n8k16<T>(acc[mr][nt], a[1][mr], b1);
        }
      }
    }
  }
  cp_async_wait<0>();
  constexpr int kF = MR * NT; // float4 sums per thread

  if constexpr (C::KW == 2) { // slice 1's sums to slice 0 through shared memory
    __syncthreads(); // every warp is done with the stages
    float4* red = reinterpret_cast<float4*>(smem);
    if (wk == 1) {
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        red[f * C::kAccThreads + at] = make_float4(acc[f / NT][f % NT][0], acc[f / NT][f % NT][1], acc[f / NT][f % NT][2], acc[f / NT][f % NT][3]);
      }
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        const float4 v = red[f * C::kAccThreads + at];
        acc[f / NT][f % NT][0] += v.x, acc[f / NT][f % NT][1] += v.y, acc[f / NT][f % NT][2] += v.z, acc[f / NT][f % NT][3] += v.w;
      }
    }
  }

  if (p.splits > 1) {
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    float4* ws = reinterpret_cast<float4*>(p.ws) + int64_t(tile) * p.splits * kF * C::kAccThreads;
    if (wk == 0) {
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        __stcg(ws + (z * kF + f) * C::kAccThreads + at,
               make_float4(acc[f / NT][f % NT][0], acc[f / NT][f % NT][1], acc[f / NT][f % NT][2], acc[f / NT][f % NT][3]));
      }
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const unsigned old = atomicAdd(p.counters + tile, 1u);
      s_last = old == unsigned(p.splits - 1);
      if (s_last) p.counters[tile] = 0; // every split has arrived: ready for the next launch
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (wk == 0) {
      // The sum in split order over every split's partials, this block's own included (its
      // own stores are visible to it), so deterministic whichever block is last; kU splits'
      // loads in flight at once (a chain of dependent L2 reads would cost a round trip each).
      constexpr int kU = kF >= 8 ? 1 : 8 / kF;
#pragma unroll
      for (int f = 0; f < kF; ++f) acc[f / NT][f % NT][0] = acc[f / NT][f % NT][1] = acc[f / NT][f % NT][2] = acc[f / NT][f % NT][3] = 0.0f;
      for (int z0 = 0; z0 < p.splits; z0 += kU) {
        float4 v[kU][kF];
#pragma unroll
        for (int u = 0; u < kU; ++u)
#pragma unroll
          for (int f = 0; f < kF; ++f) {
            v[u][f] = z0 + u < p.splits ? __ldcg(ws + ((z0 + u) * kF + f) * C::kAccThreads + at) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
#pragma unroll
        for (int u = 0; u < kU; ++u)
#pragma unroll
          for (int f = 0; f < kF; ++f) {
            float* a = acc[f / NT][f % NT];
            if (z0 + u < p.splits) a[0] += v[u][f].x, a[1] += v[u][f].y, a[2] += v[u][f].z, a[3] += v[u][f].w;
          }
      }
    }
  }

  // Output: through shared memory ([token][row] in T), then 16-byte row-contiguous stores.
  __syncthreads(); // every warp is done with the stages (and the K halves' sums)
  T* so = reinterpret_cast<T*>(smem);
  if (wk == 0) {
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int r = row[mr][c / 2], m = wt * NT * 8 + nt * 8 + 2 * t + (c & 1);
          so[m * (kOutStride / 2) + r] = static_cast<T>(acc[mr][nt][c]);
        }
  }
  __syncthreads();
  T* out = static_cast<T*>(p.out);
  for (int c = tid; c < BT * (kRows / 8); c += kThreads) {
    const int m = c / (kRows / 8), r = (c % (kRows / 8)) * 8;
    if (m0 + m < M && n0 + r < N) {
      *reinterpret_cast<uint4*>(out + int64_t(m0 + m) * N + n0 + r) =
          *reinterpret_cast<const uint4*>(smem + m * kOutStride + r * 2);
    }
  }
}

/// A zeroed counter per tile for the split-K handshake, one array per (device, stream): the
/// kernels of one stream run in order and each leaves the counters zero. Null when `tiles`
/// is over the array's size (then K is not split).
uint32_t* split_counters(int64_t tiles) {
  constexpr int64_t kCount = 1 << 14;
  if (tiles > kCount) return nullptr;
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, uint32_t*> arrays;
  int dev = 0;
  NUVEC_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  uint32_t*& c = arrays[{dev, stream()}];
  if (c == nullptr) {
    NUVEC_CUDA_CHECK(cudaMalloc(&c, kCount * sizeof(uint32_t)));
    NUVEC_CUDA_CHECK(cudaMemset(c, 0, kCount * sizeof(uint32_t)));
  }
  return c;
}

/// Splits of K for `tiles` blocks: about two blocks per SM (the weight stream needs bytes in
/// flight on every SM), each split at least 4 K tiles, at most 16.
int choose_swap_splits(int64_t tiles, int per_sm, int k_tiles) {
  if (force_splits > 0) return std::min(force_splits, k_tiles);
  const int64_t target = int64_t(std::min(per_sm, 2)) * device_props().multiProcessorCount;
  const int64_t most = std::max(1, std::min(16, k_tiles / 4));
  return static_cast<int>(std::clamp<int64_t>(target / tiles, 1, most));
}

template <typename T, int BITS, typename C>
void launch(const QmmArgs& a) {
  auto kernel = qmm_swap_kernel<T, BITS, C>;
  constexpr int kSmem = smem_bytes<C, BITS>();
  static const int per_sm = [&] {
    NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int n = 0;
    NUVEC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, C::kThreads, kSmem));
    return std::max(n, 1);
  }();
  Params p{};
  p.x = a.x, p.w = a.w, p.scales = a.scales, p.biases = a.biases, p.out = a.out;
  p.M = static_cast<int>(a.M), p.N = static_cast<int>(a.N), p.K = static_cast<int>(a.K);
  p.kg = static_cast<int>(a.K / a.spec.group_size);
  p.gs_log2 = 0;
  while ((1 << p.gs_log2) < a.spec.group_size) ++p.gs_log2;
  p.k_tiles = static_cast<int>(a.K / kK);
  const int64_t m_tiles = ceil_div(a.M, C::BT), n_tiles = ceil_div(a.N, kRows), tiles = m_tiles * n_tiles;
  p.splits = choose_swap_splits(tiles, per_sm, p.k_tiles);
  if (p.splits > 1) p.counters = split_counters(tiles);
  if (p.counters == nullptr) p.splits = 1;
  if (p.splits > 1) {
    p.ws = static_cast<float*>(scratch(size_t(tiles) * p.splits * C::BT * kRows * sizeof(float)));
  }
  const dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles), static_cast<unsigned>(p.splits));
  kernel<<<grid, C::kThreads, kSmem, stream()>>>(p);
  check_launch("qmm_swap_kernel");
}

template <typename T, int BITS>
void launch_for_rows(const QmmArgs& a) {
  if (a.M <= 16) return launch<T, BITS, Cfg16>(a);
  if (a.M <= 32) return launch<T, BITS, Cfg32>(a);
  if (a.M <= 64) {
    if constexpr (BITS == 4) return launch<T, BITS, Cfg64k1>(a);
    return launch<T, BITS, Cfg64>(a);
  }
  launch<T, BITS, Cfg128>(a);
}

/// Whether the swapped kernel takes the product: one W (no gather), affine 4 or 8 bits,
/// groups 32/64/128, 8 < M <= 256, N a multiple of 8, sizes below 2^31 (32-bit offsets), x
/// and W 16-byte aligned, scales and biases 4-byte aligned, out 16-byte aligned.
bool covers(const QmmArgs& a) {
  if (a.dtype != float16 && a.dtype != bfloat16) return false;
  if (!a.transpose || a.w == nullptr || a.w_plain != nullptr || a.K <= 0 || a.K % kK != 0) return false;
  if (a.batch != 1 || a.lhs != nullptr || a.rhs != nullptr || a.w_count != 1 || a.x_count != 1) return false;
  if (a.spec.mode != QuantMode::Affine || (a.spec.bits != 4 && a.spec.bits != 8)) return false;
  const int gs = a.spec.group_size;
  if (gs != 32 && gs != 64 && gs != 128) return false;
  if (a.M <= 8 || a.M > 256 || a.N % 8 != 0 || a.N >= (int64_t(1) << 30) || a.K >= (int64_t(1) << 30)) return false;
  if (a.M * a.K >= (int64_t(1) << 31) || a.M * a.N >= (int64_t(1) << 31)) return false;
  return is_aligned(a.x, 16) && is_aligned(a.w, 16) && is_aligned(a.scales, 4) && is_aligned(a.biases, 4) &&
         is_aligned(a.out, 16);
}

} // namespace swap

} // namespace

namespace {
/// Whether GatherMm's transposed plain W may take the tiled kernel (kPlainBits):
/// NUVEC_GATHER_MM_TENSOR_CORES=1, read at each call, until it has run on a GPU
/// (tests/gpu_quantized_test.cpp, GatherMmTransposedWeightsOnTensorCores).
bool plain_tiles_enabled() {
  return env_switch("NUVEC_GATHER_MM_TENSOR_CORES", false);
}
} // namespace

/// The swapped kernel's cases (swap::covers: one W, affine 4/8 bits, 8 < M <= 256), and for
/// the tiled kernel: float16 and bfloat16 x, transpose true, quantized W or GatherMm's plain
/// W transposed (with plain_tiles_enabled); affine 2, 4 and 8 bits with groups 32, 64, 128,
/// and mxfp4, mxfp8, nvfp4 at their group sizes; K a multiple of 64, N even; more than 8 rows
/// per batch entry, or more than 8 rows in all when entries may share tiles (sorted rhs, no
/// rhs, or one W: grouped_rows); x and W 16-byte aligned (cp.async), out 4-byte aligned; grid
/// limits (N / 128 < 65536 tiles).
bool qmm_covers(const QmmArgs& a) {
  if (swap::covers(a)) return true;
  if (a.dtype != float16 && a.dtype != bfloat16) return false;
  if (!a.transpose) return false;
  const bool plain = a.w_plain != nullptr;
  if (plain) {
    // The 16-bit W tiles take 109-174 KB of shared memory: past what GPUs before sm_90 give.
    const size_t most = smem_bytes<Shape128, Format<QuantMode::Affine, kPlainBits>>();
    if (!plain_tiles_enabled() || most > size_t(device_props().sharedMemPerBlockOptin)) return false;
  } else {
    if (a.w == nullptr || !dq::unit_covers(a.spec.mode, a.spec.bits)) return false;
    const int gs = a.spec.group_size;
    if (gs != 16 && gs != 32 && gs != 64 && gs != 128) return false;
    if (a.spec.mode == QuantMode::Nvfp4 ? gs != 16 : gs < 32) return false;
  }
  if (a.K <= 0 || a.K % kBK != 0 || a.N <= 0 || a.N % 2 != 0 || a.M <= 0 || a.batch <= 0) return false;
  if (a.M <= 8 && !(grouped_rows(a) && a.batch * a.M > 8)) return false;
  if (ceil_div(a.N, 128) >= 65536 || a.K / kBK >= (int64_t(1) << 30)) return false;
  const int64_t row_tiles = grouped_rows(a) ? ceil_div(a.batch * a.M, 16) : a.batch * ceil_div(a.M, 16);
  if (row_tiles >= (int64_t(1) << 31)) return false;
  return is_aligned(a.x, 16) && is_aligned(plain ? a.w_plain : a.w, 16) && is_aligned(a.out, 4);
}

/// The tensor-core product (see the file comment): the swapped kernel where swap::covers, else
/// the tiled one; a.err receives out-of-range lhs / rhs
/// (the caller's IndexErrorCheck zeroes the output then). Requires qmm_covers(a).
void qmm(const QmmArgs& a) {
  if (a.batch * a.M == 0 || a.N == 0) return;
  if (swap::covers(a)) {
    const bool half = a.dtype == float16;
    if (a.spec.bits == 4) return half ? swap::launch_for_rows<__half, 4>(a) : swap::launch_for_rows<__nv_bfloat16, 4>(a);
    return half ? swap::launch_for_rows<__half, 8>(a) : swap::launch_for_rows<__nv_bfloat16, 8>(a);
  }
  if (a.dtype == float16) return launch_for_format<__half>(a);
  launch_for_format<__nv_bfloat16>(a);
}

} // namespace nuvec::cu
