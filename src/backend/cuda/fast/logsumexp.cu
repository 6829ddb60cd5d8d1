// nuvec: GPU kernel of LogSumExp (log(sum(exp(x))) over the last axis; fallback and rules in
// src/fast/logsumexp.cpp). Semantics are the CPU kernel's (src/backend/cpu/fast/
// logsumexp.cpp) and the fallback's: arithmetic in float for the half types (double for
// float64); NaN anywhere in a row gives NaN; a row whose max is +-inf gives that infinity;
// else max + log(sum(exp(x - max))). One pass of online (max, sum) accumulation
// (device/online_softmax.cuh): TPR threads per row (a warp for rows up to 1024 elements,
// several rows a block; a block of 256 beyond), coalesced 16-byte vector loads where the
// rows are aligned (each vector merged as one (max, sum) part), the partial (max, sum)
// pairs merged by shuffles and, across warps, shared memory.
#include <cstdint>
#include <limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "fast/logsumexp.h"

namespace nuvec {

namespace {

template <typename T, int TPR, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
logsumexp_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n, bool aligned) {
  using A = cu::device_acc_t<T>;
  constexpr int W = cu::kVec<T>;
  constexpr int kRows = BLOCK / TPR;
  constexpr int kWidth = TPR < 32 ? TPR : 32;
  const int lane = threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRows + threadIdx.x / TPR;
  A m = cu::neg_inf<A>(), s = 0;
  int nan = 0;
  if (row < rows) {
    const T* src = in + row * n;
    if (aligned) {
      // 16-byte vectors; each vector's own max first, so the running sum is rescaled once
      // per vector rather than per element.
      for (int64_t v = lane; v < n / W; v += TPR) {
        const auto raw = cu::load_vec<W, cu::Load::ReadOnly>(src + v * W);
        A a[W];
        A vm = cu::neg_inf<A>();
#pragma unroll
        for (int j = 0; j < W; ++j) {
          a[j] = cu::to_acc(raw[j]);
          nan |= a[j] != a[j];
          vm = cu::max_no_nan(vm, a[j]);
        }
        A vs = 0;
        if (vm != cu::neg_inf<A>()) {
#pragma unroll
          for (int j = 0; j < W; ++j) vs += math::exp(a[j] - vm); // +inf: NaN, as online_add
        }
        cu::online_merge(m, s, vm, vs);
      }
    } else {
      for (int64_t i = lane; i < n; i += TPR) {
        const A v = cu::to_acc(src[i]);
        nan |= v != v;
        cu::online_add(m, s, v);
      }
    }
  }
  // Every thread of the block reaches the merges (rows past the end hold the identity):
  // a warp's lanes by shuffles, or (a block per row) the whole block.
  const auto either = [](int a, int b) { return a | b; };
  cu::OnlineMaxSum<A> ms{m, s};
  if constexpr (TPR > 32) {
    __shared__ cu::OnlineMaxSum<A> buf_ms[TPR / 32];
    __shared__ int buf_nan[TPR / 32];
    ms = cu::block_allreduce(ms, cu::OnlineMerge{}, buf_ms);
    nan = cu::block_allreduce(nan, either, buf_nan);
  } else {
    ms = cu::warp_allreduce(ms, kWidth, cu::OnlineMerge{});
    nan = cu::warp_allreduce(nan, kWidth, either);
  }
  m = ms.m;
  s = ms.s;
  if (lane == 0 && row < rows) {
    A r;
    if (nan) r = std::numeric_limits<A>::quiet_NaN();
    else if (m == std::numeric_limits<A>::infinity() || m == cu::neg_inf<A>()) r = m;
    else r = m + math::log(s);
    out[row] = cu::store_as<T>(r);
  }
}

template <typename T>
void logsumexp_gpu(const T* src, T* dst, int64_t rows, int64_t n) {
  const bool aligned = n % cu::kVec<T> == 0 && cu::is_aligned(src, 16);
  // Launches cover at most 2^31 - 1 blocks (the grid's x limit): more rows go in pieces.
  constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;
  constexpr int kWarpBlock = 128; // 4 rows of a warp each
  constexpr int kRowBlock = 256;
  const int64_t rows_per_block = n <= 1024 ? kWarpBlock / 32 : 1;
  const int64_t piece = kMaxBlocks * rows_per_block;
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    const int64_t r = rows - r0 < piece ? rows - r0 : piece;
    const unsigned blocks = static_cast<unsigned>((r + rows_per_block - 1) / rows_per_block);
    if (n <= 1024) {
      logsumexp_kernel<T, 32, kWarpBlock><<<blocks, kWarpBlock, 0, cu::stream()>>>(src + r0 * n, dst + r0, r, n, aligned);
    } else {
      logsumexp_kernel<T, kRowBlock, kRowBlock><<<blocks, kRowBlock, 0, cu::stream()>>>(src + r0 * n, dst + r0, r, n, aligned);
    }
    cu::check_launch("logsumexp_kernel");
  }
}

} // namespace

void LogSumExp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  // The kernel addresses row r at r * n: anything but a row-major dense input is copied.
  const array in = inputs[0].flags().row_contiguous ? inputs[0] : cu::contiguous_copy(inputs[0]);
  const int64_t n = in.shape(static_cast<int>(in.ndim()) - 1);
  const int64_t rows = static_cast<int64_t>(out.size());
  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    if constexpr (cu::is_float_device_v<T>) {
      logsumexp_gpu<T>(cu::device_ptr<T>(in), static_cast<T*>(dst), rows, n);
    } else {
      throw std::invalid_argument("[logsumexp] the LogSumExp kernel takes real floating inputs.");
    }
  });
}

} // namespace nuvec
