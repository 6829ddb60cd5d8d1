// nuvec: GPU kernels of CrossEntropy and CrossEntropyVjp (rules and fallbacks in
// src/fast/cross_entropy.cpp; semantics are the CPU kernels'). Forward: the row's logsumexp
// by a warp (rows up to 1024 classes) or a block of 256 (device/row_logsumexp.cuh, the
// LogSumExp kernel's) in parts, and the target's logit make the loss: one read of the
// logits. Backward: a block per row (grid-stride), g · (exp(x − lse) − [i == target]) with
// the exponent from the forward's loss, one read of the logits and one write of the gradient
// in 16-byte vectors where aligned. Both in the order of cross_entropy_rules.h.
// Logits whose rows are not dense and row-major are copied to that form first.
#include <cstdint>

#include "backend/common/cross_entropy_rules.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/row_logsumexp.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/cross_entropy.h"

namespace nuvec {

namespace {

template <typename T, int TPR, int BLOCK>
__global__ void __launch_bounds__(BLOCK) cross_entropy_kernel(
    const T* __restrict__ x,
    const int32_t* __restrict__ targets,
    cu::device_acc_t<T>* __restrict__ loss,
    int64_t rows,
    int64_t n,
    bool aligned) {
  using A = cu::device_acc_t<T>;
  constexpr int kRows = BLOCK / TPR;
  const int lane = threadIdx.x % TPR;
  const int64_t row = int64_t(blockIdx.x) * kRows + threadIdx.x / TPR;
  const T* src = row < rows ? x + row * n : nullptr;
  const auto lse = cu::row_logsumexp_parts<T, TPR>(src, n, lane, aligned);
  if (lane == 0 && row < rows) {
    const int64_t y = class_index(targets[row], n);
    loss[row] = math::cross_entropy_loss(lse.max, lse.log_sum, y >= 0 ? A(cu::to_acc(src[y])) : A(0));
  }
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) cross_entropy_vjp_kernel(
    const T* __restrict__ x,
    const int32_t* __restrict__ targets,
    const cu::device_acc_t<T>* __restrict__ loss,
    const cu::device_acc_t<T>* __restrict__ g,
    T* __restrict__ dx,
    int64_t rows,
    int64_t n,
    bool aligned) {
  using A = cu::device_acc_t<T>;
  constexpr int W = cu::kVec<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* dr = dx + row * n;
    const int64_t y = class_index(targets[row], n);
    const A xt = y >= 0 ? A(cu::to_acc(xr[y])) : A(0), loss_r = loss[row];
    const A gr = g[row];
    if (aligned) {
      for (int64_t v = threadIdx.x; v < n / W; v += BLOCK) {
        const auto raw = cu::load_vec<W, cu::Load::ReadOnly>(xr + v * W);
        cu::Vec<T, W> out;
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A p = math::exp(math::cross_entropy_exponent(A(cu::to_acc(raw[j])), loss_r, xt));
          out[j] = cu::store_as<T>(gr * (v * W + j == y ? p - A(1) : p));
        }
        cu::store_vec<W>(dr + v * W, out);
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
        const A p = math::exp(math::cross_entropy_exponent(A(cu::to_acc(xr[i])), loss_r, xt));
        dr[i] = cu::store_as<T>(gr * (i == y ? p - A(1) : p));
      }
    }
  }
}

} // namespace

void CrossEntropy::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cu::as_row_contiguous(inputs[0]), t = cu::as_row_contiguous(inputs[1]);
  void* out = cu::alloc_output(outputs[0]);
  const int64_t n = x.shape(-1), rows = static_cast<int64_t>(t.size());
  if (rows == 0) return;
  cu::dispatch_device_float_types(x.dtype(), "cross_entropy", [&]<typename T>() {
    using A = cu::device_acc_t<T>;
    const T* xp = cu::device_ptr<T>(x);
    const bool aligned = n % cu::kVec<T> == 0 && cu::is_aligned(xp, 16);
    const int32_t* tp = cu::device_ptr<int32_t>(t);
    // Launches cover at most 2^31 - 1 blocks: more rows go in pieces.
    constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;
    constexpr int kWarpBlock = 128, kRowBlock = 256;
    const int64_t per_block = n <= 1024 ? kWarpBlock / 32 : 1;
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxBlocks * per_block) {
      const int64_t r = std::min(rows - r0, kMaxBlocks * per_block);
      const unsigned blocks = static_cast<unsigned>((r + per_block - 1) / per_block);
      A* lp = static_cast<A*>(out) + r0;
      if (n <= 1024) {
        cross_entropy_kernel<T, 32, kWarpBlock><<<blocks, kWarpBlock, 0, cu::stream()>>>(xp + r0 * n, tp + r0, lp, r, n, aligned);
      } else {
        cross_entropy_kernel<T, kRowBlock, kRowBlock><<<blocks, kRowBlock, 0, cu::stream()>>>(xp + r0 * n, tp + r0, lp, r, n, aligned);
      }
      cu::check_launch("cross_entropy_kernel");
    }
  });
}

void CrossEntropyVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cu::as_row_contiguous(inputs[0]), t = cu::as_row_contiguous(inputs[1]), loss = cu::as_row_contiguous(inputs[2]), g = cu::as_row_contiguous(inputs[3]);
  void* out = cu::alloc_output(outputs[0]);
  const int64_t n = x.shape(-1), rows = static_cast<int64_t>(t.size());
  if (rows == 0) return;
  cu::dispatch_device_float_types(x.dtype(), "cross_entropy", [&]<typename T>() {
    using A = cu::device_acc_t<T>;
    const T* xp = cu::device_ptr<T>(x);
    T* dp = static_cast<T*>(out);
    const bool aligned = n % cu::kVec<T> == 0 && cu::is_aligned(xp, 16) && cu::is_aligned(dp, 16);
    constexpr int kBlock = 256;
    static const int resident = cu::resident_blocks(cross_entropy_vjp_kernel<T, kBlock>, kBlock);
    cross_entropy_vjp_kernel<T, kBlock><<<cu::grid_blocks(rows, resident), kBlock, 0, cu::stream()>>>(
        xp, cu::device_ptr<int32_t>(t), cu::device_ptr<A>(loss), cu::device_ptr<A>(g), dp, rows, n, aligned);
    cu::check_launch("cross_entropy_vjp_kernel");
  });
}

} // namespace nuvec
