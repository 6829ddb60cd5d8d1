// nuvec: GPU kernel of LogSumExp (log(sum(exp(x))) over the last axis; fallback and rules in
// src/fast/logsumexp.cpp). Semantics are the CPU kernel's (src/backend/cpu/fast/
// logsumexp.cpp) and the fallback's: arithmetic in float for the half types (double for
// float64); NaN anywhere in a row gives NaN; a row whose max is +-inf gives that infinity;
// else max + log(sum(exp(x - max))). Aligned rows of up to 4096 vectors are held in
// registers (logsumexp_regs_kernel: a max pass, then a sum pass). Others take one pass of
// online (max, sum) accumulation (device/row_logsumexp.cuh, shared with CrossEntropy): TPR
// threads per row (a warp for rows up to 1024 elements, several rows a block; a block of 256
// beyond), coalesced 16-byte vector loads where the rows are aligned (each vector merged as
// one (max, sum) part), the partial (max, sum) pairs merged by shuffles and, across warps,
// shared memory.
#include <cstdint>
#include <limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/device/register_row.cuh"
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

// The max that lets NaN win (any NaN in a row makes its logsumexp NaN).
struct MaxNan {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a != a || b != b ? a + b : (b > a ? b : a); }
};
struct Plus {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};

// Aligned rows that fit in registers (device/register_row.cuh): a pass for the max (NaN
// winning), then, for a finite max, one for the sum of exp(x - max); one exp an element.
// The one-pass online kernel above rescales its running sum once a vector and ran at 0.21 of
// the copy bandwidth on the H200 (bf16 16384 x 4096), bound by its exps and merges.
template <typename T, int TPR, int VPT, int BLOCK>
__global__ void __launch_bounds__(BLOCK, cu::min_blocks_for(1280, BLOCK))
logsumexp_regs_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n) {
  using A = cu::device_acc_t<T>;
  constexpr int kRowsPerBlock = BLOCK / TPR;
  __shared__ A buf[BLOCK / 32];
  const int lane = TPR == BLOCK ? threadIdx.x : threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  if (row >= rows) return; // whole groups leave together
  cu::RegisterRow<T, TPR, VPT> x;
  x.load(in + row * n, static_cast<int>(n / cu::kVec<T>), lane);
  const A m = cu::group_allreduce<TPR>(x.fold(cu::neg_inf<A>(), MaxNan{}), MaxNan{}, buf);
  A r = m; // NaN, or an infinite max, is the answer itself
  if (m == m && m != cu::neg_inf<A>() && m != std::numeric_limits<A>::infinity()) {
    const cu::ShiftedExp<T> e(m);
    const A s = cu::group_allreduce<TPR>(x.fold(A(0), [e](A acc, A v) { return acc + e(v); }), Plus{}, buf);
    r = m + math::log(s);
  }
  if (lane == 0) out[row] = cu::store_as<T>(r);
}

template <typename T>
void logsumexp_gpu(const T* src, T* dst, int64_t rows, int64_t n) {
  const bool aligned = n % cu::kVec<T> == 0 && cu::is_aligned(src, 16);
  if (aligned && rows <= (int64_t(1) << 31) - 1 &&
      cu::launch_register_row<T>(n, [&]<int TPR, int VPT, int BLOCK>() {
        constexpr int64_t kRowsPerBlock = BLOCK / TPR;
        const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
        logsumexp_regs_kernel<T, TPR, VPT, BLOCK><<<blocks, BLOCK, 0, cu::stream()>>>(src, dst, rows, n);
        cu::check_launch("logsumexp_regs_kernel");
      })) {
    return;
  }
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
