// nuvec: the GPU copy/cast kernels (copy.h; the counterparts of backend/cpu/copy.cpp with the
// same contracts), which AsType (cast.cu), Full (creation.cu) and the views' fallback copies
// use. Same-dtype copies move bytes (cudaMemcpyAsync when both sides are dense,
// else a kernel on the unsigned type of the element's width); casts run one kernel per
// (source, destination) dtype pair with cast_to's rules (backend/common/math/cast.h).
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/common/math/cast.h"
#include "backend/common/math/elementwise.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"

namespace nuvec {

namespace cu {

namespace {

/// dst[offset1(i)] = cast_to<Out>(src[offset0(i)]) for i in [0, n) of ix's shape. One
/// dimension (dense, broadcast fill, 1-d slices) takes an unrolled loop without divisions,
/// kEwUnroll loads in flight per thread; more dimensions go through strided_offsets.
template <typename In, typename Out>
__global__ void copy_kernel(const In* src, Out* dst, int64_t n, StridedIndexer<2> ix) {
  if (ix.ndim == 1) {
    const int64_t ss = ix.strides[0][0], ds = ix.strides[1][0];
    const int64_t step = int64_t(gridDim.x) * blockDim.x * kEwUnroll;
    for (int64_t base = int64_t(blockIdx.x) * blockDim.x * kEwUnroll + threadIdx.x; base < n;
         base += step) {
      In v[kEwUnroll];
#pragma unroll
      for (int u = 0; u < kEwUnroll; ++u) {
        int64_t j = base + int64_t(u) * blockDim.x;
        if (j < n) v[u] = src[j * ss];
      }
#pragma unroll
      for (int u = 0; u < kEwUnroll; ++u) {
        int64_t j = base + int64_t(u) * blockDim.x;
        if (j < n) dst[j * ds] = cast_to<Out>(v[u]);
      }
    }
    return;
  }
  const bool small = small_index_space(n);
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    int64_t off[2];
    strided_offsets(ix, i, small, off);
    dst[off[1]] = cast_to<Out>(src[off[0]]);
  }
}

/// dst[i] = cast_to<Out>(src[i]) over dense, aligned operands in vectors of N elements (16
/// bytes of the wider type per load or store), kEwUnroll vectors per thread, then the tail.
template <typename In, typename Out, int N>
__global__ void cast_vec_kernel(const In* src, Out* dst, int64_t n) {
  const int64_t nvec = n / N;
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kEwUnroll;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x * kEwUnroll + threadIdx.x; base < nvec;
       base += step) {
    Vec<In, N> x[kEwUnroll];
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) x[u] = load_vec<N>(src + j * N);
    }
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) {
        Vec<Out, N> y;
#pragma unroll
        for (int e = 0; e < N; ++e) y.v[e] = cast_to<Out>(x[u].v[e]);
        store_vec<N>(dst + j * N, y);
      }
    }
  }
  int64_t t = nvec * N + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) dst[t] = cast_to<Out>(src[t]);
}

/// Launches copy_kernel over a plan of operands (source, destination); plans with more than
/// kMaxDims dimensions are walked on the host over their leading dimensions, one launch per
/// index (they are rare: every dimension left is one that cannot merge).
template <typename In, typename Out>
void launch_copy(const In* src, Out* dst, const StridedPlan& plan) {
  const size_t nd = plan.shape.size();
  if (nd > size_t(kMaxDims)) {
    const size_t outer = nd - kMaxDims;
    int64_t count = 1;
    for (size_t d = 0; d < outer; ++d) count *= plan.shape[d];
    StridedPlan inner;
    inner.shape.assign(plan.shape.begin() + outer, plan.shape.end());
    for (const auto& s : plan.strides) inner.strides.emplace_back(s.begin() + outer, s.end());
    std::vector<int64_t> idx(outer, 0);
    for (int64_t c = 0; c < count; ++c) {
      int64_t so = 0, dof = 0;
      for (size_t d = 0; d < outer; ++d) {
        so += idx[d] * plan.strides[0][d];
        dof += idx[d] * plan.strides[1][d];
      }
      launch_copy(src + so, dst + dof, inner);
      for (int d = static_cast<int>(outer) - 1; d >= 0; --d) {
        if (++idx[d] < plan.shape[d]) break;
        idx[d] = 0;
      }
    }
    return;
  }
  int64_t n = 1;
  for (auto e : plan.shape) n *= e;
  if (n == 0) return;
  auto ix = indexer_of<2>(plan);
  unsigned grid = ix.ndim == 1 ? grid_for(size_t((n + kEwUnroll - 1) / kEwUnroll), kEwThreads)
                               : grid_for(size_t(n), kEwThreads);
  copy_kernel<In, Out><<<grid, kEwThreads, 0, stream()>>>(src, dst, n, ix);
  check_launch("copy_kernel");
}

/// The unsigned integer type of a dtype's width: same-dtype copies only move bits.
template <typename F>
void dispatch_width(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f.template operator()<uint8_t>(); return;
    case 2: f.template operator()<uint16_t>(); return;
    case 4: f.template operator()<uint32_t>(); return;
    case 8: f.template operator()<uint64_t>(); return;
  }
  throw std::invalid_argument("[copy] unsupported element width.");
}

} // namespace

/// Copies the elements of a plan of (source, destination) operands between dtypes.
void copy_plan(const void* src, Dtype src_dtype, void* dst, Dtype dst_dtype, const StridedPlan& plan) {
  int64_t n = 1;
  for (auto e : plan.shape) n *= e;
  if (n == 0) return;
  if (src_dtype == dst_dtype) {
    const size_t width = size_of(src_dtype);
    if (plan.shape.size() == 1 && plan.strides[0][0] == 1 && plan.strides[1][0] == 1) {
      NUVEC_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, size_t(n) * width, cudaMemcpyDeviceToDevice, stream()));
      return;
    }
    dispatch_width(width, [&]<typename U>() {
      launch_copy(static_cast<const U*>(src), static_cast<U*>(dst), plan);
    });
    return;
  }
  dispatch_device_types(src_dtype, [&]<typename In>() {
    dispatch_device_types(dst_dtype, [&]<typename Out>() {
      if constexpr (!std::is_same_v<In, Out>) { // same dtypes took the branch above
        constexpr int N = vec_elems<In, Out>();
        const bool dense = plan.shape.size() == 1 && plan.strides[0][0] == 1 &&
            plan.strides[1][0] == 1;
        if (dense && is_aligned(src, N * sizeof(In)) && is_aligned(dst, N * sizeof(Out))) {
          // A dense cast moves 16-byte vectors (the scalar loop reached ~86% of a copy).
          cast_vec_kernel<In, Out, N><<<vec_grid(n, N), kEwThreads, 0, stream()>>>(
              static_cast<const In*>(src), static_cast<Out*>(dst), n);
          check_launch("cast_vec_kernel");
        } else {
          launch_copy(static_cast<const In*>(src), static_cast<Out*>(dst), plan);
        }
      }
    });
  });
}

namespace {


/// out's device buffer, allocated row-contiguous when out has none yet.
void* ensure_output(array& out) {
  if (!out.data_shared_ptr()) return alloc_output(out);
  void* dev = out.data_shared_ptr()->device.load();
  if (!dev) throw std::logic_error("[copy] the output must be a device buffer.");
  return static_cast<char*>(dev) + out.offset() * int64_t(out.itemsize());
}

} // namespace

/// copy.h: collapses the region's dimensions, then copies (see copy_plan).
void copy_elements(
    const void* src,
    Dtype src_dtype,
    const Strides& src_strides,
    void* dst,
    Dtype dst_dtype,
    const Strides& dst_strides,
    const Shape& shape) {
  for (auto d : shape) {
    if (d == 0) return;
  }
  copy_plan(src, src_dtype, dst, dst_dtype, collapse_dims(shape, {src_strides, dst_strides}));
}

/// copy.h: in's elements in row-major order into out's row-contiguous device buffer.
void copy_strided(const array& in, array& out) {
  void* dst = ensure_output(out);
  if (in.size() == 0) return;
  // Written in in's row-major order, so out may be a reshape of in.
  copy_elements(
      device_ptr(in), in.dtype(), in.strides(), dst, out.dtype(), row_strides(in.shape()),
      in.shape());
}

/// copy.h: in broadcast to out's shape (stride 0 along broadcast axes) into out.
void copy_broadcast(const array& in, array& out) {
  void* dst = ensure_output(out);
  if (out.size() == 0) return;
  copy_elements(
      device_ptr(in), in.dtype(), broadcast_strides(in, out.shape()), dst, out.dtype(),
      row_strides(out.shape()), out.shape());
}

/// copy.h: a fresh evaluated array (no primitive) with a row-contiguous device buffer.
array contiguous_copy(const array& in, Dtype dtype) {
  array out(in.shape(), dtype, nullptr, {});
  out.set_status(array::Status::available);
  copy_strided(in, out);
  // The caller's kernels read it after this returns; a dropped handle must not free it
  // before they have run.
  retain(out);
  return out;
}

/// copy.h: contiguous_copy in in's own dtype.
array contiguous_copy(const array& in) {
  return contiguous_copy(in, in.dtype());
}

const ViewCopies& view_copies() {
  static const ViewCopies copies{
      static_cast<array (*)(const array&)>(&contiguous_copy), &copy_strided};
  return copies;
}

} // namespace cu

} // namespace nuvec
