// nuvec: the kernels of qqmm on the GPU (QQMatmul::eval_gpu in qqmm.cu; the standalone
// timing program bench/qqmm_bench.cu), in two routes that round x alike, bit for bit as the
// CPU kernel (src/backend/cpu/quantized/qqmm.cpp, the graph's fp_quantize of
// src/ops/quantized.cpp):
//   fp8:  every fp mode becomes E4M3 codes with one float scale per 32 slots along K, and
//         the product runs on Hopper's FP8 tensor cores (wgmma m64n64k32 e4m3 x e4m3 ->
//         f32), one k32 step per group, each step's partial sum promoted into the float32
//         accumulator times sx[row] * sw[col] (DeepGEMM's promotion at the group's grain).
//         E2M1 values are E4M3 values, so mxfp4 and nvfp4 take the same path; nvfp4's
//         groups of 16 sit in 32-slot groups whose second half is zero (twice the work).
//   bf16: fq(x) and fq(w) written as bfloat16 (exact), for an ordinary bf16 GEMM.
// Why the fp8 route is slow on Hopper: the promotion costs an FMUL and an FFMA per output
// element per group of 32, i.e. M N K / 16 float32 operations, which at 128 per cycle per
// SM alone take 0.8x the time of cuBLAS's bf16 GEMM (4096^3 on an H200); measured, the fp8
// route reaches 240-320 TFLOP/s, the bf16 route 0.70-0.93x cuBLAS's bf16 GEMM (numbers in
// bench/qqmm_bench.cu). Blackwell's block-scaled MMA applies these scales in hardware.
// Host-side entry points take raw pointers and a CUDA stream (no framework types), so the
// benchmark links none of nuvec.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/common/math/quant.h"
#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/wgmma.cuh"
#include "quantized/quant_spec.h"

namespace nuvec::cu::qq {

/// K extent of one pipeline stage (4 groups of 32 codes, one 128-byte swizzled row).
constexpr int kBlockK = 128;
/// Output tile: kWg warpgroups of 64 rows each (Tile<kWg>), 128 columns.
constexpr int kBlockN = 128;

/// The geometry of a block of kWg warpgroups: rows, threads, and one pipeline stage's
/// shared memory (A tile, B tile, then the 4 groups' x and w scales as float).
template <int kWg>
struct Tile {
  static constexpr int kStages = kWg == 2 ? 5 : 4; // as many as fit in 227 KB
  static constexpr int kRows = 64 * kWg;
  static constexpr int kThreads = 128 * kWg;
  static constexpr int kABytes = kRows * kBlockK;
  static constexpr int kBBytes = kBlockN * kBlockK;
  static constexpr int kSxBytes = 4 * kRows * 4;
  static constexpr int kSwBytes = 4 * kBlockN * 4;
  static constexpr int kStageBytes = kABytes + kBBytes + kSxBytes + kSwBytes; // a multiple of 1024
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;            // + alignment slack
  static_assert(kStageBytes % 1024 == 0, "stages must keep the 1024-byte alignment of the swizzle");
};

/// The warpgroups per block of the library's launch: on the H200 3 were 5-10% faster than
/// 2 at 4096 and 8192 rows (2 were 20% faster at 256 rows: less padding of the 192-row
/// tiles; a row threshold awaits a GPU check of that launch in its current form).
constexpr int kDefaultWg = 3;

inline int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

/// Where the GEMM reads its operands: A = x codes (R x Kp bytes, row stride lda), B = w
/// codes (N x Kp, row stride ldb), both K-major E4M3; scales as float, transposed:
/// sx[g * lds_x + r], sw[g * lds_w + n] for the Kp / 32 slot groups (lds_x >= round_up(R,
/// 384), a whole number of tiles of any block height; lds_w >= round_up(N, 128); entries
/// past R / N and past the real groups are 0).
/// out (R x N) in T, row-major.
struct GemmArgs {
  const uint8_t* a;
  const uint8_t* b;
  const float* sx;
  const float* sw;
  void* out;
  int64_t R, N, Kp;
  int64_t lda, ldb, lds_x, lds_w;
};

/// The buffers one qqmm needs, from its sizes and mode: K slots per row Kp (K, or 2K for
/// nvfp4, rounded up to kBlockK), the scale strides, and whether w_q's bytes can serve as B
/// directly (mxfp8 with K % kBlockK == 0 and a 16-byte aligned w_q).
struct Plan {
  int64_t R, N, K, Kp, groups;   // groups: Kp / 32
  int64_t lds_x, lds_w;
  bool w_direct;
  size_t x_bytes, sx_bytes, w_bytes, sw_bytes; // scratch sizes (w_bytes 0 when direct)
};

inline Plan make_plan(int64_t R, int64_t N, int64_t K, QuantSpec spec, const void* w_q) {
  Plan p{};
  p.R = R;
  p.N = N;
  p.K = K;
  const int64_t slots = spec.group_size == 16 ? 2 * K : K;
  p.Kp = round_up(slots, kBlockK);
  p.groups = p.Kp / 32;
  p.lds_x = round_up(R, 384);
  p.lds_w = round_up(N, 128);
  p.w_direct = spec.bits == 8 && spec.group_size == 32 && K % kBlockK == 0 &&
      reinterpret_cast<uintptr_t>(w_q) % 16 == 0;
  p.x_bytes = static_cast<size_t>(R * p.Kp);
  p.sx_bytes = static_cast<size_t>(p.groups * p.lds_x) * sizeof(float);
  p.w_bytes = p.w_direct ? 0 : static_cast<size_t>(N * p.Kp);
  p.sw_bytes = static_cast<size_t>(p.groups * p.lds_w) * sizeof(float);
  return p;
}

// ---------------------------------------------------------------------------------------
// Rounding: the shared encoders of src/backend/common/math/quant.h (the CPU kernel's), but
// for the E8M0 exponent, see e8m0_code.

/// The E4M3 byte holding the value of E2M1 code c (every E2M1 value is an E4M3 value).
__device__ __forceinline__ uint32_t e2m1_as_e4m3(uint32_t c) {
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6 -> 0x00, 0x30, 0x38, 0x3C, 0x40, 0x44, 0x48, 0x4C.
  const uint32_t m = c & 7u;
  const uint32_t mag = m == 0 ? 0u : (m == 1 ? 0x30u : 0x38u + ((m - 2u) << 2));
  return mag | ((c & 8u) << 4);
}

/// math::fp_scale_code for the mx modes (127 + round-half-even(log2(scale)) clamped to
/// [-127, 127], 127 for 0, NaN to the NaN code 0xFF), with log2 computed in double and rounded once to
/// float: the host's log2f is correctly rounded, the device's log2f is not (1 ulp), and the
/// few floats whose float log2 is exactly n + 0.5 would round the other way.
__device__ __forceinline__ uint32_t e8m0_code(float scale) {
  if (scale == 0.0f) return 127u;
  if (scale != scale) return 255u;
  float e = rintf(static_cast<float>(log2(static_cast<double>(scale))));
  e = e > 127.0f ? 127.0f : (e > -127.0f ? e : -127.0f);
  return static_cast<uint32_t>(static_cast<int>(e) + 127);
}

// ---------------------------------------------------------------------------------------
// Preparation kernels.

/// Quantizes x (R x K, T) to the fp mode: each thread takes 8 consecutive values, the
/// gs / 8 threads of a group (adjacent lanes) share its amax. Writes the E4M3 byte of each
/// value at its slot (column c of group g -> slot 32g + c % gs) and the decoded scale at
/// sx[g * lds + r] (slots and scales not written, nvfp4's second halves and K's padding,
/// must be zeroed beforehand); or, kBf16, the values fq(x) as bfloat16 at xb[r * K + c]
/// (exact: at most 4 significant bits, E8M0 scales above 2^-117 keep them normal).
template <typename T, int kGs, int kBits, bool kNv, bool kBf16>
__global__ void __launch_bounds__(256) quantize_x_kernel(
    const T* __restrict__ x, int64_t R, int64_t K, uint8_t* __restrict__ xq, int64_t Kp, float* __restrict__ sx,
    int64_t lds, __nv_bfloat16* __restrict__ xb, bool vec) {
  constexpr int kLanes = kGs / 8;
  const int64_t per_row = K / 8;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = idx < R * per_row;
  const int64_t r = live ? idx / per_row : 0;
  const int64_t c0 = live ? (idx - r * per_row) * 8 : 0;
  float v[8];
  if (live && vec) { // 16-byte loads (x 16-byte aligned; K % 8 == 0 keeps every row so)
    T t[8];
    const uint4* src = reinterpret_cast<const uint4*>(x + r * K + c0);
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(t) / 16); ++i) {
      const uint4 u = __ldg(src + i);
      memcpy(reinterpret_cast<char*>(t) + 16 * i, &u, 16);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(t[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = live ? static_cast<float>(x[r * K + c0 + i]) : 0.0f;
  }
  // The graph's max over the group: NaN anywhere makes it NaN (fmaxf alone would skip it).
  float amax = 0.0f;
  bool nan = false;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    amax = fmaxf(amax, fabsf(v[i]));
    nan |= v[i] != v[i];
  }
#pragma unroll
  for (int off = 1; off < kLanes; off <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
    nan |= __shfl_xor_sync(0xFFFFFFFFu, static_cast<int>(nan), off) != 0;
  }
  if (nan) amax = __int_as_float(0x7FC00000);
  if (!live) return;
  const float scale = __fdiv_rn(amax, kBits == 4 ? 6.0f : 448.0f);
  const uint32_t scode = kNv ? math::fp8_e4m3_code(scale) : e8m0_code(scale);
  const float dec = math::fp_scale_value(kNv ? QuantMode::Nvfp4 : QuantMode::Mxfp8, scode);
  const float inv = kNv ? 0.0f : 1.0f / dec;
  uint32_t lo = 0, hi = 0;
  uint32_t vals[4];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    // x / dec: for the mx modes dec is a power of two, so x * (1 / dec) rounds the same real.
    const float s = dec == 0.0f ? 0.0f : (kNv ? __fdiv_rn(v[i], dec) : v[i] * inv);
    const uint32_t b = kBits == 4 ? e2m1_as_e4m3(math::fp4_e2m1_code(s)) : math::fp8_e4m3_code(s);
    if constexpr (kBf16) {
      const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(math::fp8_e4m3_value(b) * dec));
      if (i % 2 == 0) vals[i / 2] = h;
      else vals[i / 2] |= h << 16;
    } else if (i < 4) {
      lo |= b << (8 * i);
    } else {
      hi |= b << (8 * (i - 4));
    }
  }
  if constexpr (kBf16) {
    *reinterpret_cast<uint4*>(xb + r * K + c0) = make_uint4(vals[0], vals[1], vals[2], vals[3]);
    return;
  }
  const int64_t g = c0 / kGs;
  const int64_t slot = g * 32 + (c0 % kGs);
  *reinterpret_cast<uint2*>(xq + r * Kp + slot) = make_uint2(lo, hi);
  if (c0 % kGs == 0) sx[g * lds + r] = dec;
}

/// Rewrites packed fp codes (N rows of K codes, `kBits` bits, packed in uint32 words) as
/// E4M3 bytes at their slots (N x Kp); one thread per word.
template <int kBits, int kGs>
__global__ void __launch_bounds__(256) convert_w_kernel(
    const uint32_t* __restrict__ w, int64_t N, int64_t K, uint8_t* __restrict__ wq, int64_t Kp) {
  constexpr int kPer = 32 / kBits;
  const int64_t per_row = K / kPer;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * per_row) return;
  const int64_t n = idx / per_row;
  const int64_t c0 = (idx - n * per_row) * kPer;
  const uint32_t word = w[idx];
  const int64_t slot = (c0 / kGs) * 32 + c0 % kGs;
  if constexpr (kBits == 8) {
    *reinterpret_cast<uint32_t*>(wq + n * Kp + slot) = word;
  } else {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t b = e2m1_as_e4m3((word >> (4 * i)) & 15u);
      if (i < 4) lo |= b << (8 * i);
      else hi |= b << (8 * (i - 4));
    }
    *reinterpret_cast<uint2*>(wq + n * Kp + slot) = make_uint2(lo, hi);
  }
}

/// Decodes w's scale codes (N x G uint8) into sw[g * lds + n] (float).
__global__ void __launch_bounds__(256) w_scales_kernel(
    const uint8_t* __restrict__ codes, int64_t N, int64_t G, bool nv, float* __restrict__ sw, int64_t lds) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * G) return;
  const int64_t n = idx / G;
  const int64_t g = idx - n * G;
  sw[g * lds + n] = math::fp_scale_value(nv ? QuantMode::Nvfp4 : QuantMode::Mxfp8, codes[idx]);
}

/// fq(w) as bfloat16 (exact as for x): wb[n * K + c] = value(code) * scale. Each thread
/// takes kWords consecutive packed words (one 16-byte load when 4; each word's codes lie in
/// one group of one row).
template <int kBits, int kGs, int kWords>
__global__ void __launch_bounds__(256) dequant_w_bf16_kernel(
    const uint32_t* __restrict__ w, const uint8_t* __restrict__ codes, int64_t N, int64_t K, bool nv,
    __nv_bfloat16* __restrict__ wb) {
  constexpr int kPer = 32 / kBits;
  const int64_t idx = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kWords;
  if (idx >= N * K / kPer) return;
  uint32_t words[kWords];
  if constexpr (kWords == 4) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(w + idx));
    words[0] = u.x, words[1] = u.y, words[2] = u.z, words[3] = u.w;
  } else {
    words[0] = w[idx];
  }
#pragma unroll
  for (int q = 0; q < kWords; ++q) {
    const int64_t c = (idx + q) * kPer; // flat index n * K + column
    const int64_t n = c / K;
    const float scale =
        math::fp_scale_value(nv ? QuantMode::Nvfp4 : QuantMode::Mxfp8, codes[n * (K / kGs) + (c - n * K) / kGs]);
    uint32_t vals[kPer / 2];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const uint32_t code = (words[q] >> (kBits * i)) & ((1u << kBits) - 1u);
      const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(math::fp_code_value(kBits, code) * scale));
      if (i % 2 == 0) vals[i / 2] = h;
      else vals[i / 2] |= h << 16;
    }
    if constexpr (kPer == 8) *reinterpret_cast<uint4*>(wb + c) = make_uint4(vals[0], vals[1], vals[2], vals[3]);
    else *reinterpret_cast<uint2*>(wb + c) = make_uint2(vals[0], vals[1]);
  }
}

// ---------------------------------------------------------------------------------------
// The FP8 product.

#if defined(NUVEC_WGMMA_AVAILABLE)
/// d (64 x 64 float32) = A (64 x 32 E4M3) . B (64 x 32 E4M3)^T, both K-major in shared
/// memory (descriptors), d overwritten (scale-d false). d is read-write for the compiler so
/// that no copy of it moves above the wait that completes it.
__device__ __forceinline__ void wgmma_e4m3_n64(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(0));
}
#endif

/// Issues the copies of k tile kt into stage `st`: the A tile (kRows x 128 bytes) and B tile
/// (128 x 128 bytes) in the 128-byte swizzle (rows past R / N zero-filled), and the 4
/// groups' scales of the tile's rows and columns (always in bounds: the scale arrays are
/// padded to whole tiles).
template <int kWg>
__device__ __forceinline__ void load_stage(const GemmArgs& p, uint32_t st, int64_t m0, int64_t n0, int64_t kt) {
  using Tl = Tile<kWg>;
  const int tid = threadIdx.x;
  const int64_t k0 = kt * kBlockK;
  // 16-byte chunk i of a tile: row i / 8, chunk i % 8 of the row.
#pragma unroll
  for (int i = tid; i < Tl::kRows * 8; i += Tl::kThreads) {
    const int r = i >> 3, c = i & 7;
    const bool v = m0 + r < p.R;
    cp_async_16(st + r * 128 + ((c ^ (r & 7)) << 4), p.a + (v ? (m0 + r) * p.lda + k0 + c * 16 : 0), v);
  }
#pragma unroll
  for (int i = tid; i < kBlockN * 8; i += Tl::kThreads) {
    const int r = i >> 3, c = i & 7;
    const bool v = n0 + r < p.N;
    cp_async_16(st + Tl::kABytes + r * 128 + ((c ^ (r & 7)) << 4), p.b + (v ? (n0 + r) * p.ldb + k0 + c * 16 : 0), v);
  }
  // Scales: group g's kRows x floats (kRows / 4 chunks), then group g's 128 w floats (32).
  constexpr int kSxChunks = Tl::kRows; // 4 groups x kRows / 4
  if (tid < kSxChunks) {
    const int g = tid / (Tl::kRows / 4), c = tid % (Tl::kRows / 4);
    cp_async_16(st + Tl::kABytes + Tl::kBBytes + g * Tl::kRows * 4 + c * 16, p.sx + (kt * 4 + g) * p.lds_x + m0 + c * 4, true);
  } else if (tid < kSxChunks + 128) {
    const int i = tid - kSxChunks;
    const int g = i >> 5, c = i & 31;
    cp_async_16(st + Tl::kABytes + Tl::kBBytes + Tl::kSxBytes + g * 512 + c * 16, p.sw + (kt * 4 + g) * p.lds_w + n0 + c * 4, true);
  }
}

/// out = Σ_g sx[g][r] sw[g][n] (A_g . B_g^T)[r][n] over the Kp / 32 groups: a kRows x 128
/// tile per block, warpgroup w taking rows 64w..64w + 63, a kStages-deep cp.async pipeline.
/// Each group's product is two m64n64k32 wgmma (column halves) into two partials used in
/// turn: while the tensor core computes the next half, the threads promote the last one
/// into the float32 accumulator times sx[row] * sw[col] (FMUL + FFMA per element: the
/// promotion, not the tensor core, bounds the speed). The next tile's barrier and copies
/// are issued between a tile's last two halves, and its first half runs during the last
/// promotion. kPre: the scale products of a half are formed before its wait (registers
/// allowing: 2 warpgroups; 13% faster in the benchmark, but its results were not yet
/// checked on a GPU, so the library launches kPre false).
template <typename T, int kWg, bool kPre = false>
__global__ void __launch_bounds__(Tile<kWg>::kThreads, 1) fp8_gemm_kernel(const GemmArgs p) {
#if defined(NUVEC_WGMMA_AVAILABLE)
  using Tl = Tile<kWg>;
  constexpr int S = Tl::kStages;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint8_t* smem_gen = smem_raw + (base - smem_addr(smem_raw));
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * Tl::kRows;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBlockN;
  const int64_t KT = p.Kp / kBlockK;
  const int tid = threadIdx.x;
  const int wg = tid >> 7;
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int g4 = lane >> 2, t4 = lane & 3;
  const int row0 = wg * 64 + warp * 16 + g4; // this thread's rows: row0, row0 + 8

  float acc[64]; // acc[32h + 4j + i]: column half h, n8 block j (wgmma's accumulator layout)
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  float part[2][32];
#pragma unroll
  for (int i = 0; i < 32; ++i) part[0][i] = part[1][i] = 0.0f;

  auto stage_addr = [&](int64_t kt) { return base + static_cast<uint32_t>(kt % S) * Tl::kStageBytes; };
  // The wgmma of group g, column half h of the tile in stage st into part[h].
  auto issue = [&](uint32_t st, int g, int h) {
    const uint64_t da = sw128_desc(st + wg * 64 * 128 + g * 32, 16, 1024);
    const uint64_t db = sw128_desc(st + Tl::kABytes + h * 64 * 128 + g * 32, 16, 1024);
    wgmma_fence();
    wgmma_e4m3_n64(part[h], da, db);
    wgmma_commit();
  };

  if (KT > 0) {
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < KT) load_stage<kWg>(p, base + s * Tl::kStageBytes, m0, n0, s);
      cp_async_commit();
    }
    cp_async_wait<S - 2>();
    fence_proxy_async();
    __syncthreads();
    issue(base, 0, 0);
  }
  // One k tile; the last (kLast) issues nothing for a next one.
  auto tile = [&]<bool kLast>(int64_t kt) {
    const uint32_t st = stage_addr(kt);
    const float* sxs = reinterpret_cast<const float*>(smem_gen + (st - base) + Tl::kABytes + Tl::kBBytes);
    const float* sws = sxs + 4 * Tl::kRows;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const float sx0 = sxs[g * Tl::kRows + row0];
      const float sx1 = sxs[g * Tl::kRows + row0 + 8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // The scale products of this half: with kPre computed before the wait, so that the
        // loads and FMULs overlap the wgmma (32 more registers).
        float sc[32];
        if constexpr (kPre) {
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float2 sw = *reinterpret_cast<const float2*>(sws + g * 128 + 64 * h + 8 * j + 2 * t4);
            sc[4 * j + 0] = sx0 * sw.x;
            sc[4 * j + 1] = sx0 * sw.y;
            sc[4 * j + 2] = sx1 * sw.x;
            sc[4 * j + 3] = sx1 * sw.y;
          }
        }
        // Issue the next half before promoting this one.
        if (g < 3 || h == 0) {
          issue(st, g + h, 1 - h);
          wgmma_wait<1>();
        } else if constexpr (!kLast) {
          // Tile kt + 1 complete (S - 3 newer tiles may still be in flight), every thread
          // done with tile kt - 1's stage, which the next copies overwrite.
          cp_async_wait<S - 3>();
          fence_proxy_async();
          __syncthreads();
          if (kt + S - 1 < KT) load_stage<kWg>(p, stage_addr(kt + S - 1), m0, n0, kt + S - 1);
          cp_async_commit();
          issue(stage_addr(kt + 1), 0, 0);
          wgmma_wait<1>();
        } else {
          wgmma_wait<0>();
        }
        fence_regs(part[h]);
        if constexpr (!kPre) {
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float2 sw = *reinterpret_cast<const float2*>(sws + g * 128 + 64 * h + 8 * j + 2 * t4);
            sc[4 * j + 0] = sx0 * sw.x;
            sc[4 * j + 1] = sx0 * sw.y;
            sc[4 * j + 2] = sx1 * sw.x;
            sc[4 * j + 3] = sx1 * sw.y;
          }
        }
#pragma unroll
        for (int i = 0; i < 32; ++i) acc[32 * h + i] = fmaf(part[h][i], sc[i], acc[32 * h + i]);
      }
    }
    // Nothing may stay in flight across the loop's back edge (ptxas would serialize every
    // wgmma): the next tile's first half, issued before this tile's last promotion, is
    // done by now or nearly.
    if constexpr (!kLast) {
      wgmma_wait<0>();
      fence_regs(part[0]);
    }
  };
  if (KT > 0) {
    for (int64_t kt = 0; kt + 1 < KT; ++kt) tile.template operator()<false>(kt);
    tile.template operator()<true>(KT - 1);
  }
  cp_async_wait<0>();

  T* out = static_cast<T*>(p.out);
  const int64_t r0 = m0 + row0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = n0 + 64 * h + 8 * j + 2 * t4;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t r = r0 + 8 * e;
        if (r >= p.R) continue;
        if (c < p.N) out[r * p.N + c] = static_cast<T>(acc[32 * h + 4 * j + 2 * e]);
        if (c + 1 < p.N) out[r * p.N + c + 1] = static_cast<T>(acc[32 * h + 4 * j + 2 * e + 1]);
      }
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------
// Host side.

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("[qqmm] ") + what + ": " + cudaGetErrorString(e));
}

inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>((n + 255) / 256);
}

/// quantize_x_kernel for the mode: E4M3 slots and scales (kBf16 false) or bfloat16 values.
template <typename T, bool kBf16>
void launch_quantize_x(const T* x, const Plan& pl, QuantSpec spec, uint8_t* xq, float* sx, __nv_bfloat16* xb, cudaStream_t s) {
  const int64_t threads = (pl.R * pl.K / 8 + 31) / 32 * 32;
  if (threads == 0) return;
  const unsigned grid = blocks_for(threads);
  const bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (spec.mode == QuantMode::Nvfp4) {
    quantize_x_kernel<T, 16, 4, true, kBf16><<<grid, 256, 0, s>>>(x, pl.R, pl.K, xq, pl.Kp, sx, pl.lds_x, xb, vec);
  } else if (spec.bits == 4) {
    quantize_x_kernel<T, 32, 4, false, kBf16><<<grid, 256, 0, s>>>(x, pl.R, pl.K, xq, pl.Kp, sx, pl.lds_x, xb, vec);
  } else {
    quantize_x_kernel<T, 32, 8, false, kBf16><<<grid, 256, 0, s>>>(x, pl.R, pl.K, xq, pl.Kp, sx, pl.lds_x, xb, vec);
  }
  check_cuda(cudaGetLastError(), "quantize_x_kernel");
}

/// Quantizes x (R x K, T) into xq (R x Kp bytes) and sx (plan.groups x lds_x floats), zeroing
/// the slots and scales no group writes first.
template <typename T>
void quantize_x(const T* x, const Plan& pl, QuantSpec spec, uint8_t* xq, float* sx, cudaStream_t s) {
  if (pl.Kp != pl.K || spec.group_size == 16) check_cuda(cudaMemsetAsync(xq, 0, pl.x_bytes, s), "memset");
  check_cuda(cudaMemsetAsync(sx, 0, pl.sx_bytes, s), "memset");
  launch_quantize_x<T, false>(x, pl, spec, xq, sx, nullptr, s);
}

/// fq(x) (R x K, T) and fq(w) (N x K from w_q and its scale codes) as bfloat16, for the
/// product by an ordinary bfloat16 GEMM. xb and wb hold R * K and N * K elements, 16-byte
/// aligned; K % 16 == 0 (every fp mode's group size divides K).
template <typename T>
void dequantize_bf16(
    const T* x, const uint32_t* w_q, const uint8_t* scales, const Plan& pl, QuantSpec spec, __nv_bfloat16* xb,
    __nv_bfloat16* wb, cudaStream_t s) {
  launch_quantize_x<T, true>(x, pl, spec, nullptr, nullptr, xb, s);
  const bool nv = spec.mode == QuantMode::Nvfp4;
  const int64_t words = pl.N * pl.K * spec.bits / 32;
  if (words == 0) return;
  auto launch = [&]<int kBits, int kGs>() {
    if (words % 4 == 0 && reinterpret_cast<uintptr_t>(w_q) % 16 == 0) {
      dequant_w_bf16_kernel<kBits, kGs, 4><<<blocks_for(words / 4), 256, 0, s>>>(w_q, scales, pl.N, pl.K, nv, wb);
    } else {
      dequant_w_bf16_kernel<kBits, kGs, 1><<<blocks_for(words), 256, 0, s>>>(w_q, scales, pl.N, pl.K, nv, wb);
    }
  };
  if (nv) launch.template operator()<4, 16>();
  else if (spec.bits == 4) launch.template operator()<4, 32>();
  else launch.template operator()<8, 32>();
  check_cuda(cudaGetLastError(), "dequant_w_bf16_kernel");
}

/// Rewrites w_q (N x K codes packed) as E4M3 slots (N x Kp bytes) unless plan.w_direct, and
/// decodes the scale codes (N x K / gs) into sw (plan.groups x lds_w floats).
inline void prepare_w(
    const uint32_t* w_q, const uint8_t* scales, const Plan& pl, QuantSpec spec, uint8_t* wq, float* sw,
    cudaStream_t s) {
  const bool nv = spec.mode == QuantMode::Nvfp4;
  if (!pl.w_direct) {
    if (pl.Kp != pl.K || nv) check_cuda(cudaMemsetAsync(wq, 0, pl.w_bytes, s), "memset");
    const int64_t words = pl.N * pl.K * spec.bits / 32;
    if (words > 0) {
      if (nv) convert_w_kernel<4, 16><<<blocks_for(words), 256, 0, s>>>(w_q, pl.N, pl.K, wq, pl.Kp);
      else if (spec.bits == 4) convert_w_kernel<4, 32><<<blocks_for(words), 256, 0, s>>>(w_q, pl.N, pl.K, wq, pl.Kp);
      else convert_w_kernel<8, 32><<<blocks_for(words), 256, 0, s>>>(w_q, pl.N, pl.K, wq, pl.Kp);
      check_cuda(cudaGetLastError(), "convert_w_kernel");
    }
  }
  check_cuda(cudaMemsetAsync(sw, 0, pl.sw_bytes, s), "memset");
  const int64_t G = pl.K / spec.group_size;
  if (pl.N * G > 0) {
    w_scales_kernel<<<blocks_for(pl.N * G), 256, 0, s>>>(scales, pl.N, G, nv, sw, pl.lds_w);
    check_cuda(cudaGetLastError(), "w_scales_kernel");
  }
}

/// Runs the FP8 product (fp8_gemm_kernel with kWg warpgroups) on prepared operands.
template <typename T, int kWg = kDefaultWg, bool kPre = false>
void fp8_gemm(const GemmArgs& a, cudaStream_t s) {
  using Tl = Tile<kWg>;
  if (a.R == 0 || a.N == 0) return;
  static const bool attr_set = [] { // once per instantiation (thread-safe static)
    check_cuda(cudaFuncSetAttribute(fp8_gemm_kernel<T, kWg, kPre>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    Tl::kSmemBytes),
               "cudaFuncSetAttribute");
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>((a.N + kBlockN - 1) / kBlockN), static_cast<unsigned>((a.R + Tl::kRows - 1) / Tl::kRows));
  fp8_gemm_kernel<T, kWg, kPre><<<grid, Tl::kThreads, Tl::kSmemBytes, s>>>(a);
  check_cuda(cudaGetLastError(), "fp8_gemm_kernel");
}

/// The whole qqmm: out (R x N, T) = fq(x) . fq(w)^T, with scratch buffers from `alloc`
/// (a callable size_t -> void*, device memory valid for the launches on s).
template <typename T, typename Alloc>
void qqmm(
    const T* x, const uint32_t* w_q, const uint8_t* scales, T* out, int64_t R, int64_t N, int64_t K,
    QuantSpec spec, cudaStream_t s, Alloc&& alloc) {
  const Plan pl = make_plan(R, N, K, spec, w_q);
  if (R == 0 || N == 0) return;
  auto* xq = static_cast<uint8_t*>(alloc(pl.x_bytes > 0 ? pl.x_bytes : 16));
  auto* sx = static_cast<float*>(alloc(pl.sx_bytes > 0 ? pl.sx_bytes : 16));
  auto* sw = static_cast<float*>(alloc(pl.sw_bytes > 0 ? pl.sw_bytes : 16));
  uint8_t* wq = pl.w_direct ? nullptr : static_cast<uint8_t*>(alloc(pl.w_bytes > 0 ? pl.w_bytes : 16));
  quantize_x<T>(x, pl, spec, xq, sx, s);
  prepare_w(w_q, scales, pl, spec, wq, sw, s);
  GemmArgs a{};
  a.a = xq;
  a.b = pl.w_direct ? reinterpret_cast<const uint8_t*>(w_q) : wq;
  a.sx = sx;
  a.sw = sw;
  a.out = out;
  a.R = R;
  a.N = N;
  a.Kp = pl.Kp;
  a.lda = pl.Kp;
  a.ldb = pl.Kp;
  a.lds_x = pl.lds_x;
  a.lds_w = pl.lds_w;
  fp8_gemm<T>(a, s);
}

} // namespace nuvec::cu::qq
