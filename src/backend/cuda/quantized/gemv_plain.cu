// nuvec: GatherMm's few-row product on plain weights stored as a Linear's (qmm.h's gemv_plain):
// out[b] (M x N) = x[lhs[b]] (M x K) . W[rhs[b]]^T with W[e] row-major N x K, which is how a
// mixture-of-experts layer's stacked [E, out, in] weights reach gather_mm (through swapaxes,
// a view; run_gathered passes the buffer with transpose true instead of copying it). The
// decode case (and, unless the tiled kernel takes it, the sorted prefill): each (token,
// expert) pair is one batch entry of one row, so the product is bound
// by reading the chosen experts' rows once. One warp per output column n: its lanes read the
// row W[e][n, :] in 16-byte vectors (consecutive lanes, consecutive vectors: each load
// instruction of the warp moves 512 contiguous bytes), multiply it with the M rows of x (read
// through L1: every warp of the block reads the same x) and sum over the warp. float32
// accumulation. Coverage: gemv_plain_covers.
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/device/warp.cuh"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/quantized/qmm.h"

namespace nuvec::cu {
namespace {

constexpr int kWarps = 8; ///< output columns per block

/// The kernel's parameters (device pointers and sizes; see QmmArgs).
struct PlainGemvParams {
  const void* x;
  const void* w;
  void* out;
  const uint32_t* lhs;
  const uint32_t* rhs;
  int64_t batch, M, N, K, x_count, w_count;
  IndexError* err;
};

/// Grid (N / kWarps, batch entries, grid-strided); kRows >= M rows of x per entry.
template <typename T, int kRows>
__global__ void __launch_bounds__(kWarps * 32) gemv_plain_kernel(const PlainGemvParams p) {
  constexpr int kV = kVec<T>;
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  for (int64_t b = blockIdx.y; b < p.batch; b += gridDim.y) {
    const int64_t xi = p.lhs ? p.lhs[b] : 0, wi = p.rhs ? p.rhs[b] : 0;
    if (!gathered_entry_ok(p.err, xi, p.x_count, wi, p.w_count, threadIdx.x == 0 && blockIdx.x == 0)) continue;
    if (n >= p.N) continue; // no barrier below: a warp past N has nothing to do
    const T* w = static_cast<const T*>(p.w) + (wi * p.N + n) * p.K;
    const T* x = static_cast<const T*>(p.x) + xi * p.M * p.K;
    float acc[kRows] = {};
    for (int64_t k = int64_t(lane) * kV; k < p.K; k += 32 * kV) {
      const Packed<T, kV> wv = load_packed<kV, Load::ReadOnly>(w + k);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < p.M) {
          const Packed<T, kV> xv = load_packed<kV, Load::ReadOnly>(x + r * p.K + k);
#pragma unroll
          for (int j = 0; j < kV; ++j) acc[r] += float(acc_at(wv, j)) * float(acc_at(xv, j));
        }
      }
    }
    T* out = static_cast<T*>(p.out) + b * p.M * p.N + n;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float s = warp_allreduce(acc[r], 32, [](float u, float v) { return u + v; });
      if (lane == 0 && r < p.M) out[r * p.N] = store_as<T>(s);
    }
  }
}

/// Launches the kernel for kRows rows an entry on cu::stream().
template <typename T, int kRows>
void launch(const QmmArgs& a, const PlainGemvParams& p) {
  const dim3 grid(static_cast<unsigned>(ceil_div(a.N, kWarps)), static_cast<unsigned>(std::min<int64_t>(a.batch, 65535)));
  gemv_plain_kernel<T, kRows><<<grid, kWarps * 32, 0, stream()>>>(p);
  check_launch("gemv_plain_kernel");
}

} // namespace

bool gemv_plain_covers(const QmmArgs& a) {
  if (a.w_plain == nullptr || !a.transpose || a.M <= 0 || a.M > kPlainGemvRows) return false;
  if (a.dtype != float32 && a.dtype != float16 && a.dtype != bfloat16) return false;
  const int64_t vec = 16 / static_cast<int64_t>(size_of(a.dtype));
  if (a.K <= 0 || a.K % vec != 0 || ceil_div(a.N, kWarps) >= (int64_t(1) << 31)) return false;
  return is_aligned(a.x, 16) && is_aligned(a.w_plain, 16);
}

void gemv_plain(const QmmArgs& a) {
  if (a.batch == 0 || a.N == 0) return;
  const PlainGemvParams p{a.x, a.w_plain, a.out, a.lhs, a.rhs, a.batch, a.M, a.N, a.K, a.x_count, a.w_count, a.err};
  dispatch_device_float_types(a.dtype, "gather_mm", [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      throw std::logic_error("[gather_mm] gemv_plain does not take float64 (gemv_plain_covers)");
    } else if (a.M == 1) {
      launch<T, 1>(a, p);
    } else if (a.M == 2) {
      launch<T, 2>(a, p);
    } else if (a.M <= 4) {
      launch<T, 4>(a, p);
    } else {
      launch<T, kPlainGemvRows>(a, p);
    }
  });
}

} // namespace nuvec::cu
