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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/common/math/functions.h"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/device/register_row.cuh"
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
// consecutive 16-byte vectors (coalesced). This kernel takes aligned rows (every row starts
// on a 16-byte boundary and n is a multiple of the vector width, so vectors are all-in or
// all-out); softmax_regs_unaligned_kernel loads the same layout element by element.
//
// Aligned rows are held as packed elements (device/register_row.cuh: 16
// registers for 4 vectors of any type) and exp(x - max) is computed twice, for the sum and
// for the output, so that the kernel fits in 48 registers and 1280 threads an SM: kept as
// floats, the row took 79 registers and ran at 0.43 of the copy bandwidth on the H200 (bf16
// 16384 x 4096); packed, at 0.58.
template <int BLOCK>
inline constexpr int kAlignedBlocks = cu::min_blocks_for(1280, BLOCK);

template <typename T, int TPR, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kAlignedBlocks<BLOCK>)
softmax_regs_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n) {
  using A = device_acc_t<T>;
  constexpr int kRowsPerBlock = BLOCK / TPR;
  __shared__ A buf[BLOCK / 32];
  const int lane = TPR == BLOCK ? threadIdx.x : threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  // Whole groups leave together (a group is a warp or the block), so shuffles and barriers
  // below only ever involve threads of live rows.
  if (row >= rows) return;
  cu::RegisterRow<T, TPR, VPT> x;
  x.load(in + row * n, static_cast<int>(n / kVec<T>), lane);
  const A m = cu::group_allreduce<TPR>(x.fold(neg_inf<A>(), max_no_nan<A>), MaxNoNan{}, buf);
  const cu::ShiftedExp<T> e(m);
  const A s = cu::group_allreduce<TPR>(x.fold(A(0), [e](A acc, A v) { return acc + e(v); }), Plus{}, buf);
  x.store_map(out + row * n, [e, s](A v) { return e(v) / s; });
}

// Unaligned rows: the same layout element by element, held as floats.
template <typename T, int TPR, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_regs_unaligned_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n) {
  using A = device_acc_t<T>;
  constexpr int W = kVec<T>;
  constexpr int kRowsPerBlock = BLOCK / TPR;
  __shared__ A buf[BLOCK / 32];
  const int lane = TPR == BLOCK ? threadIdx.x : threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  if (row >= rows) return;
  const T* src = in + row * n;
  T* dst = out + row * n;
  A x[VPT][W];
  A m = neg_inf<A>();
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    const int64_t base = (int64_t(v) * TPR + lane) * W;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      x[v][j] = base + j < n ? to_acc(src[base + j]) : neg_inf<A>();
      m = max_no_nan(m, x[v][j]);
    }
  }
  m = cu::group_allreduce<TPR>(m, MaxNoNan{}, buf);
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
  s = cu::group_allreduce<TPR>(s, Plus{}, buf);
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    const int64_t base = (int64_t(v) * TPR + lane) * W;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if (base + j < n) dst[base + j] = cu::store_as<T>(x[v][j] / s);
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

constexpr int kLoopedBlock = 512;

// The smallest register configuration that holds a row (cu::launch_register_row), else
// the looped kernel.
template <typename T>
void softmax_gpu(const T* src, T* dst, int64_t rows, int64_t n, bool aligned) {
  // Launches cover at most 2^31 - 1 blocks (the grid's x limit): more rows go in pieces.
  constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;
  const bool in_registers = cu::launch_register_row<T>(n, [&]<int TPR, int VPT, int BLOCK>() {
    constexpr int64_t kRowsPerBlock = BLOCK / TPR;
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxBlocks * kRowsPerBlock) {
      const int64_t r = std::min(rows - r0, kMaxBlocks * kRowsPerBlock);
      const auto blocks = static_cast<unsigned>((r + kRowsPerBlock - 1) / kRowsPerBlock);
      if (aligned) {
        softmax_regs_kernel<T, TPR, VPT, BLOCK><<<blocks, BLOCK, 0, cu::stream()>>>(src + r0 * n, dst + r0 * n, r, n);
      } else {
        softmax_regs_unaligned_kernel<T, TPR, VPT, BLOCK>
            <<<blocks, BLOCK, 0, cu::stream()>>>(src + r0 * n, dst + r0 * n, r, n);
      }
      cu::check_launch("softmax_regs_kernel");
    }
  });
  if (in_registers) return;
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxBlocks) {
    const int64_t r = std::min(rows - r0, kMaxBlocks);
    softmax_looped_kernel<T, kLoopedBlock>
        <<<static_cast<unsigned>(r), kLoopedBlock, 0, cu::stream()>>>(src + r0 * n, dst + r0 * n, n, aligned);
    cu::check_launch("softmax_looped_kernel");
  }
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
