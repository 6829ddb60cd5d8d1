// nuvec: the GPU kernel of Select (where): out = condition ? x : y, with the CPU kernel's
// plan (backend/cpu/select.cpp): inputs sharing one dense layout or broadcast scalars run one
// contiguous pass with 16-byte vector loads and stores; anything else walks a strided plan
// into a row-contiguous output. Select only moves elements, so the kernels run on the
// unsigned integer type of the element's width (four instantiations for all dtypes).
#include <cstdint>
#include <stdexcept>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

using cu::kEwThreads;
using cu::kEwUnroll;

/// Dense pass over n elements, N per vector (the condition's vectors are N bytes): kEwUnroll
/// vectors per thread and grid-stride step, then the n % N tail. Scalar operands (sc, sx,
/// sy) are read once; the others and out are aligned to their vector widths. Conditions are
/// tested as bytes != 0.
template <typename T, int N>
__global__ void select_vec_kernel(
    const uint8_t* c,
    const T* x,
    const T* y,
    T* out,
    int64_t n,
    bool sc,
    bool sx,
    bool sy) {
  const int64_t nvec = n / N;
  const uint8_t c0 = sc ? c[0] : 0;
  const T x0 = sx ? x[0] : T(0);
  const T y0 = sy ? y[0] : T(0);
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kEwUnroll;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x * kEwUnroll + threadIdx.x; base < nvec;
       base += step) {
    cu::Vec<uint8_t, N> vc[kEwUnroll];
    cu::Vec<T, N> vx[kEwUnroll], vy[kEwUnroll];
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) {
        if (!sc) vc[u] = cu::load_vec<N>(c + j * N);
        if (!sx) vx[u] = cu::load_vec<N>(x + j * N);
        if (!sy) vy[u] = cu::load_vec<N>(y + j * N);
      }
    }
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) {
        cu::Vec<T, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) {
          bool take_x = (sc ? c0 : vc[u].v[e]) != 0;
          r.v[e] = take_x ? (sx ? x0 : vx[u].v[e]) : (sy ? y0 : vy[u].v[e]);
        }
        cu::store_vec<N>(out + j * N, r);
      }
    }
  }
  int64_t t = nvec * N + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) out[t] = (sc ? c0 : c[t]) != 0 ? (sx ? x0 : x[t]) : (sy ? y0 : y[t]);
}

/// Strided pass: element i of the (row-contiguous, or flat) output from the inputs at the
/// indexer's offsets (operands: condition, x, y).
template <typename T>
__global__ void select_strided_kernel(
    const uint8_t* c,
    const T* x,
    const T* y,
    T* out,
    int64_t n,
    cu::StridedIndexer<3> ix) {
  const bool small = cu::small_index_space(n);
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    int64_t off[3];
    cu::strided_offsets(ix, i, small, off);
    out[i] = c[off[0]] != 0 ? x[off[1]] : y[off[2]];
  }
}

/// where on element type T (the unsigned type of the dtype's width): plans and launches.
template <typename T>
void select_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  auto plan = cu::plan_elementwise(inputs, outputs);
  if (plan.n == 0) return;
  T* out = cu::output_ptr<T>(outputs[0]);
  if (plan.flat) {
    const uint8_t* c = cu::device_ptr<uint8_t>(inputs[0]);
    const T* x = cu::device_ptr<T>(inputs[1]);
    const T* y = cu::device_ptr<T>(inputs[2]);
    const bool sc = plan.scalar[0], sx = plan.scalar[1], sy = plan.scalar[2];
    const bool all_scalar = sc && sx && sy;
    const int64_t n = all_scalar ? plan.n : static_cast<int64_t>(outputs[0].data_size());
    constexpr int N = static_cast<int>(16 / sizeof(T));
    bool aligned = !all_scalar && cu::is_aligned(out, N * sizeof(T));
    aligned = aligned && (sc || cu::is_aligned(c, N));
    aligned = aligned && (sx || cu::is_aligned(x, N * sizeof(T)));
    aligned = aligned && (sy || cu::is_aligned(y, N * sizeof(T)));
    if (aligned) {
      select_vec_kernel<T, N><<<cu::vec_grid(n, N), kEwThreads, 0, cu::stream()>>>(
          c, x, y, out, n, sc, sx, sy);
    } else {
      int64_t strides[3] = {sc ? 0 : 1, sx ? 0 : 1, sy ? 0 : 1};
      select_strided_kernel<T><<<cu::grid_for(size_t(n), kEwThreads), kEwThreads, 0, cu::stream()>>>(
          c, x, y, out, n, cu::flat_indexer<3>(n, strides));
    }
    cu::check_launch("where");
    return;
  }
  auto ins = cu::fit_dims(inputs, outputs[0].shape());
  auto ix = cu::make_indexer<3>(cu::input_plan(ins, outputs[0].shape()), "where");
  select_strided_kernel<T><<<cu::grid_for(size_t(plan.n), kEwThreads), kEwThreads, 0, cu::stream()>>>(
      cu::device_ptr<uint8_t>(ins[0]), cu::device_ptr<T>(ins[1]), cu::device_ptr<T>(ins[2]),
      out, plan.n, ix);
  cu::check_launch("where");
}

} // namespace

/// Select on the GPU, for every dtype (by element width).
void Select::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  switch (size_of(outputs[0].dtype())) {
    case 1: return select_gpu<uint8_t>(inputs, outputs);
    case 2: return select_gpu<uint16_t>(inputs, outputs);
    case 4: return select_gpu<uint32_t>(inputs, outputs);
    case 8: return select_gpu<uint64_t>(inputs, outputs);
  }
  throw std::invalid_argument("[where] unsupported element width.");
}

} // namespace nuvec
