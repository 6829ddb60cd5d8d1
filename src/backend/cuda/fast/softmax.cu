// nuvec: GPU kernels of Softmax (softmax along the last axis; rules in
// src/fast/softmax.cpp). Semantics are the CPU kernel's (src/backend/cpu/fast/softmax.cpp):
// arithmetic in float for the half types (double for float64), a row of all -inf gives NaN,
// a NaN or +inf anywhere in a row makes the whole row NaN (the composed formula's answer).
//
// Softmax is memory-bound, so the aim is one read and one write of every element:
//  - softmax_regs_kernel: rows that fit in registers. A group of TPR threads owns a row
//    (a warp for short rows, several rows per block; a whole block for longer ones), loads
//    it once with 16-byte vectors, reduces the max and the sum of exp(x - max) with warp
//    shuffles (plus shared memory across warps), and writes exp(x - max) / sum from the
//    registers.
//  - softmax_looped_kernel: longer rows. A block per row streams it twice: one pass keeps a
//    running (max, sum) per thread (the "online" softmax), combined across the block; the
//    second pass writes. Two reads instead of the three a max / sum / write scheme needs.
// Inputs whose rows are not dense and row-major are copied to that form first.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/common/math/functions.h"
#include "backend/cuda/device/online_softmax.cuh"
#include "fast/softmax.h"

namespace nuvec {

namespace {

using cu::device_acc_t;
using cu::kVec;
using cu::to_acc;
using cu::max_no_nan;
using cu::neg_inf;
using cu::online_add;
using cu::online_merge;


// The row combiners of the reductions below (device/warp.cuh): the max that lets NaN lose,
// and the sum.
struct MaxNoNan {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return max_no_nan(a, b); }
};
struct Plus {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};

// Row-resident softmax: TPR threads per row (32: a warp, several rows per block of BLOCK
// threads; BLOCK: one row per block), each holding VPT vectors of kVec<T> elements. Thread
// `lane` of a row holds vectors lane, lane + TPR, ... so that a warp's loads of one step are
// consecutive 16-byte vectors (coalesced). `aligned`: every row starts on a 16-byte boundary
// and n is a multiple of the vector width (so vectors are all-in or all-out); otherwise the
// same layout is loaded element by element.
template <typename T, int TPR, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_regs_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n, bool aligned) {
  using A = device_acc_t<T>;
  constexpr int W = kVec<T>;
  constexpr int kRowsPerBlock = BLOCK / TPR;
  __shared__ A buf[BLOCK / 32];
  const int lane = TPR == BLOCK ? threadIdx.x : threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  // Whole groups leave together (a group is a warp or the block), so shuffles and barriers
  // below only ever involve threads of live rows.
  if (row >= rows) return;
  const T* src = in + row * n;
  T* dst = out + row * n;

  A x[VPT][W];
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    const int64_t base = (int64_t(v) * TPR + lane) * W;
    if (aligned) {
      if (base < n) {
        const auto raw = cu::load_vec<W, cu::Load::ReadOnly>(src + base);
#pragma unroll
        for (int j = 0; j < W; ++j) x[v][j] = to_acc(raw[j]);
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j) x[v][j] = neg_inf<A>();
      }
    } else {
#pragma unroll
      for (int j = 0; j < W; ++j) x[v][j] = base + j < n ? to_acc(src[base + j]) : neg_inf<A>();
    }
  }

  A m = neg_inf<A>();
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
#pragma unroll
    for (int j = 0; j < W; ++j) m = max_no_nan(m, x[v][j]);
  }
  if constexpr (TPR > 32) {
    m = cu::block_allreduce(m, MaxNoNan{}, buf);
  } else {
    m = cu::warp_allreduce(m, TPR, MaxNoNan{});
  }

  // Padding slots contribute exactly 0 (exp(-inf - m) would be NaN on an all -inf row; that
  // row is NaN anyway, but the padding should not be what decides it).
  A s = 0;
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    const int64_t base = (int64_t(v) * TPR + lane) * W;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      x[v][j] = base + j < n ? math::exp(x[v][j] - m) : A(0);
      s += x[v][j];
    }
  }
  if constexpr (TPR > 32) {
    s = cu::block_allreduce(s, Plus{}, buf);
  } else {
    s = cu::warp_allreduce(s, TPR, Plus{});
  }

#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    const int64_t base = (int64_t(v) * TPR + lane) * W;
    if (aligned) {
      if (base < n) {
        cu::Vec<T, W> raw;
#pragma unroll
        for (int j = 0; j < W; ++j) raw[j] = cu::store_as<T>(x[v][j] / s);
        cu::store_vec<W>(dst + base, raw);
      }
    } else {
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (base + j < n) dst[base + j] = cu::store_as<T>(x[v][j] / s);
      }
    }
  }
}

// Long rows: one block of BLOCK threads per row, two streaming passes. kUnroll vectors are
// loaded before they are used so that each thread keeps several loads in flight.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_looped_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n, bool aligned) {
  using A = device_acc_t<T>;
  constexpr int W = kVec<T>;
  constexpr int kUnroll = 4;
  constexpr int64_t kStep = int64_t(BLOCK) * W;
  __shared__ cu::OnlineMaxSum<A> buf[BLOCK / 32];
  const T* src = in + int64_t(blockIdx.x) * n;
  T* dst = out + int64_t(blockIdx.x) * n;
  const int64_t first = int64_t(threadIdx.x) * W;

  A m = neg_inf<A>(), s = 0;
  if (aligned) {
    for (int64_t b0 = first; b0 < n; b0 += kStep * kUnroll) {
      cu::Vec<T, W> raw[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (b0 + u * kStep < n) raw[u] = cu::load_vec<W, cu::Load::ReadOnly>(src + b0 + u * kStep);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (b0 + u * kStep < n) {
#pragma unroll
          for (int j = 0; j < W; ++j) online_add(m, s, to_acc(raw[u][j]));
        }
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) online_add(m, s, to_acc(src[i]));
  }

  // Combine the threads: within each warp by shuffles, then the warps through shared memory.
  const cu::OnlineMaxSum<A> ms = cu::block_allreduce(cu::OnlineMaxSum<A>{m, s}, cu::OnlineMerge{}, buf);
  m = ms.m;
  s = ms.s;

  if (aligned) {
    for (int64_t b0 = first; b0 < n; b0 += kStep * kUnroll) {
      cu::Vec<T, W> raw[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (b0 + u * kStep < n) raw[u] = cu::load_vec<W, cu::Load::ReadOnly>(src + b0 + u * kStep);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (b0 + u * kStep < n) {
#pragma unroll
          for (int j = 0; j < W; ++j) raw[u][j] = cu::store_as<T>(math::exp(to_acc(raw[u][j]) - m) / s);
          cu::store_vec<W>(dst + b0 + u * kStep, raw[u]);
        }
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
      dst[i] = cu::store_as<T>(math::exp(to_acc(src[i]) - m) / s);
    }
  }
}

// Threads per block of the launches; a block-per-row kernel uses its row's TPR instead.
constexpr int kWarpBlock = 128; // 4 rows of a warp each
constexpr int kRegsVPT = 4;     // vectors per thread of the block-per-row register kernel
constexpr int kLoopedBlock = 512;

template <typename T, int TPR, int VPT, int BLOCK>
void launch_regs(const T* src, T* dst, int64_t rows, int64_t n, bool aligned) {
  constexpr int64_t kRowsPerBlock = BLOCK / TPR;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  softmax_regs_kernel<T, TPR, VPT, BLOCK>
      <<<static_cast<unsigned>(blocks), BLOCK, 0, cu::stream()>>>(src, dst, rows, n, aligned);
  cu::check_launch("softmax_regs_kernel");
}

// Picks the smallest register configuration whose capacity covers a row of n elements:
// a warp per row with 1, 2 or 4 vectors per lane, then a block per row of 64 to 1024
// threads with kRegsVPT vectors each; longer rows take the looped kernel.
template <typename T>
void softmax_gpu(const T* src, T* dst, int64_t rows, int64_t n, bool aligned) {
  constexpr int64_t W = kVec<T>;
  const int64_t vecs = (n + W - 1) / W;
  if (vecs <= 32) return launch_regs<T, 32, 1, kWarpBlock>(src, dst, rows, n, aligned);
  if (vecs <= 64) return launch_regs<T, 32, 2, kWarpBlock>(src, dst, rows, n, aligned);
  if (vecs <= 128) return launch_regs<T, 32, 4, kWarpBlock>(src, dst, rows, n, aligned);
  if (vecs <= 64 * kRegsVPT) return launch_regs<T, 64, kRegsVPT, 64>(src, dst, rows, n, aligned);
  if (vecs <= 128 * kRegsVPT) return launch_regs<T, 128, kRegsVPT, 128>(src, dst, rows, n, aligned);
  if (vecs <= 256 * kRegsVPT) return launch_regs<T, 256, kRegsVPT, 256>(src, dst, rows, n, aligned);
  if (vecs <= 512 * kRegsVPT) return launch_regs<T, 512, kRegsVPT, 512>(src, dst, rows, n, aligned);
  // 1024 threads hold at most 4 x 8 floats each here: within the 64 registers a thread
  // may use at that block size.
  if (vecs <= 1024 * kRegsVPT) return launch_regs<T, 1024, kRegsVPT, 1024>(src, dst, rows, n, aligned);
  softmax_looped_kernel<T, kLoopedBlock>
      <<<static_cast<unsigned>(rows), kLoopedBlock, 0, cu::stream()>>>(src, dst, n, aligned);
  cu::check_launch("softmax_looped_kernel");
}

} // namespace

void Softmax::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  // The kernels address row r at r * n: anything but a row-major dense input is copied
  // (contiguous_copy keeps the copy alive until the kernels have run).
  const array in = cu::as_row_contiguous(inputs[0]);
  const int64_t n = in.shape(static_cast<int>(in.ndim()) - 1);
  const int64_t rows = static_cast<int64_t>(in.size()) / n;
  cu::dispatch_device_float_types(in.dtype(), "softmax", [&]<typename T>() {
    const T* src = cu::device_ptr<T>(in);
    const bool aligned = n % kVec<T> == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(dst) % 16 == 0;
    softmax_gpu<T>(src, static_cast<T*>(dst), rows, n, aligned);
  });
}

} // namespace nuvec
