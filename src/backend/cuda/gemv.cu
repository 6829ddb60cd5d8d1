// nuvec: cu::gemv (gemv.h). Decode multiplies one token's row (or a handful) by every
// weight matrix of the model: a stream over W with two FLOPs per element per row, bound by
// HBM. cuBLASLt's kernels for these shapes (H200, ncu, a Qwen3-0.6B decode step: 1024 x
// 3072 in 9.7 us, 0.65 TB/s; several shapes split K into a second reduction kernel) are
// built for tiles of rows, not for one row.
//
// The kernel: a block of 8 warps; a team of `wpr` warps (1, 2, 4 or 8; chosen so that the
// grid holds ~32 warps per multiprocessor when N is small) owns one output column n, i.e.
// one row of W, and its lanes walk that row in 16-byte vectors, team lane t taking vectors
// t, t + 32·wpr, ...; four vectors are loaded before any is used (64 bytes in flight per
// lane) through the non-coherent path without L1 allocation (W is read once), while the
// matching vectors of the M rows of x come through L1 (every team reads them). Each lane
// keeps M float32 sums; the warp reduces them with shuffles, the team through shared memory,
// and one lane stores out[m, n] rounded to the dtype.
#include "backend/cuda/gemv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"

namespace nuvec::cu {

namespace {

constexpr int kWarps = 8;   // warps of a block
constexpr int kUnroll = 4;  // W vectors a lane loads before using them

/// A 16-byte vector of W, loaded once: non-coherent, not kept in L1.
template <typename T, int V>
__device__ __forceinline__ Packed<T, V> load_streaming(const T* p) {
  Packed<T, V> r;
  uint4 w;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
               : "l"(p));
  memcpy(&r.w, &w, sizeof(w));
  return r;
}

template <typename T, int M>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(
    const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t ldw, int n_total, int k, int wpr) {
  constexpr int V = kVec<T>;
  __shared__ float red[kWarps][M];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = warp / wpr, in_team = warp % wpr;
  const int n = blockIdx.x * (kWarps / wpr) + team;
  const int t = in_team * 32 + lane, stride = 32 * wpr;
  const int vectors = k / V;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  if (n < n_total) {
    const T* row = w + int64_t(n) * ldw;
    int v = t;
    for (; v + (kUnroll - 1) * stride < vectors; v += kUnroll * stride) {
      Packed<T, V> wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = load_streaming<T, V>(row + int64_t(v + u * stride) * V);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const auto xv = load_packed<V, Load::ReadOnly>(x + int64_t(m) * k + int64_t(v + u * stride) * V);
#pragma unroll
          for (int j = 0; j < V; ++j) acc[m] = fmaf(float(acc_at(wv[u], j)), float(acc_at(xv, j)), acc[m]);
        }
      }
    }
    for (; v < vectors; v += stride) {
      const auto wv = load_streaming<T, V>(row + int64_t(v) * V);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const auto xv = load_packed<V, Load::ReadOnly>(x + int64_t(m) * k + int64_t(v) * V);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[m] = fmaf(float(acc_at(wv, j)), float(acc_at(xv, j)), acc[m]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], off);
  }
  if (wpr > 1) {
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < M; ++m) red[warp][m] = acc[m];
    }
    __syncthreads();
    if (in_team != 0) return;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float s = 0.0f;
      for (int i = 0; i < wpr; ++i) s += red[team * wpr + i][m];
      acc[m] = s;
    }
  }
  if (n < n_total && lane < M) {
    float r = 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) r = lane == m ? acc[m] : r;
    y[int64_t(lane) * n_total + n] = store_as<T>(r);
  }
}

template <typename T, int M>
void launch(const T* x, const T* w, T* y, int64_t ldw, int n, int k, int wpr) {
  const int cols = kWarps / wpr;
  const unsigned grid = unsigned((n + cols - 1) / cols);
  gemv_kernel<T, M><<<grid, kWarps * 32, 0, stream()>>>(x, w, y, ldw, n, k, wpr);
  check_launch("gemv_kernel");
}

template <typename T, int... Ms>
void launch_rows(int m, const T* x, const T* w, T* y, int64_t ldw, int n, int k, int wpr,
                 std::integer_sequence<int, Ms...>) {
  ((m == Ms + 1 ? launch<T, Ms + 1>(x, w, y, ldw, n, k, wpr) : void()), ...);
}

} // namespace

bool gemv(const array& a, const array& b, array& out, void* po) {
  const Dtype dtype = out.dtype();
  if (!(dtype == float16 || dtype == bfloat16 || dtype == float32) || a.dtype() != dtype || b.dtype() != dtype) {
    return false;
  }
  const int nd = static_cast<int>(out.ndim());
  const int64_t k = a.shape(-1), n = out.shape(-1);
  const int64_t rows = n == 0 ? 0 : int64_t(out.size()) / n;
  if (rows < 1 || rows > kGemvMaxRows || k < 1 || n < 1 || !a.flags().row_contiguous) return false;
  // b: one [K, N] matrix, the transpose of a row-major [N, K] with rows ld apart.
  for (int i = 0; i + 2 < nd; ++i) {
    if (b.shape(i) != 1 && b.strides()[i] != 0) return false;
  }
  if (a.size() != size_t(rows * k)) return false; // a broadcast along a batch axis
  const int64_t ld = n == 1 ? k : b.strides()[nd - 1]; // one column: its stride is unused
  if (b.strides()[nd - 2] != 1 || ld < k) return false;
  const int64_t vec = 16 / int64_t(size_of(dtype));
  if (k % vec != 0 || ld % vec != 0 || n > INT32_MAX || k > INT32_MAX) return false;
  const void* pa = device_ptr(a);
  const void* pb = device_ptr(b);
  if (!is_aligned(pa, 16) || !is_aligned(pb, 16)) return false;
  // Warps per column: enough columns in flight to give each multiprocessor ~32 warps, but
  // at least two vectors a lane.
  const int64_t want_warps = int64_t(device_props().multiProcessorCount) * 32;
  int wpr = 1;
  while (wpr < kWarps && n * wpr < want_warps && k / vec >= int64_t(64) * wpr * 2) wpr *= 2;
  dispatch_device_float_types(dtype, "matmul", [&]<typename T>() {
    if constexpr (!std::is_same_v<T, double>) launch_rows<T>(int(rows), static_cast<const T*>(pa), static_cast<const T*>(pb), static_cast<T*>(po), ld, int(n),
                   int(k), wpr, std::make_integer_sequence<int, int(kGemvMaxRows)>{});
  });
  return true;
}

} // namespace nuvec::cu
