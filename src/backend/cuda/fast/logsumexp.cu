// nuvec: GPU kernel of LogSumExp (log(sum(exp(x))) over the last axis; fallback and rules in
// src/fast/logsumexp.cpp). Semantics are the CPU kernel's (src/backend/cpu/fast/
// logsumexp.cpp) and the fallback's: arithmetic in float for the half types (double for
// float64); NaN anywhere in a row gives NaN; a row whose max is +-inf gives that infinity;
// else max + log(sum(exp(x - max))). One pass of online (max, sum) accumulation
// (device/row_logsumexp.cuh, shared with CrossEntropy): TPR threads per row (a warp for rows up to 1024 elements,
// several rows a block; a block of 256 beyond), coalesced 16-byte vector loads where the
// rows are aligned (each vector merged as one (max, sum) part), the partial (max, sum)
// pairs merged by shuffles and, across warps, shared memory.
#include <cstdint>
#include <limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/device/row_logsumexp.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "fast/logsumexp.h"

namespace nuvec {

namespace {

template <typename T, int TPR, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
logsumexp_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n, bool aligned) {
  using A = cu::device_acc_t<T>;
  constexpr int kRows = BLOCK / TPR;
  const int lane = threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRows + threadIdx.x / TPR;
  const A r = cu::row_logsumexp<T, TPR>(row < rows ? in + row * n : nullptr, n, lane, aligned);
  if (lane == 0 && row < rows) out[row] = cu::store_as<T>(r);
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
  const array in = cu::as_row_contiguous(inputs[0]);
  const int64_t n = in.shape(static_cast<int>(in.ndim()) - 1);
  const int64_t rows = static_cast<int64_t>(out.size());
  cu::dispatch_device_float_types(in.dtype(), "logsumexp", [&]<typename T>() {
    logsumexp_gpu<T>(cu::device_ptr<T>(in), static_cast<T*>(dst), rows, n);
  });
}

} // namespace nuvec
