// nuvec: GPU kernels of Gather, Scatter (None/Sum/Prod/Max/Min) and MaskedRank, as the CPU's
// src/backend/cpu/gather_scatter.cpp (MLX's gather/scatter semantics): indices of any integer
// dtype and layout, negatives counting from the end; a gather window starting too late
// shifts back to fit, a scatter window overrunning the array drops the part outside. An index
// outside [-n, n) is skipped (no memory outside the arrays is touched) and raised as the CPU
// raises it: std::out_of_range at the next eval, the output zeroed (index_errors.cuh).
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/index_utils.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/scatter_updates.cuh"
#include "primitives/gather_scatter.h"

namespace nuvec {

namespace {

using cu::kMaxIndexAxes;
using cu::StridedIndexer;

constexpr unsigned kThreads = 256;

// ---------------------------------------------------------------------------------------
// Gather

/// A gather's windows: k index arrays (int64, row-major, n_idx each, back to back), and per
/// indexed axis its number, size n, largest window start hi = n - slice size, and a's stride;
/// `win` gives a's offset of each element of a window (slice_sizes' row-major order).
struct GatherParams {
  const int64_t* idx;
  int k;
  int64_t n_idx;
  int64_t window;
  int axis[kMaxIndexAxes];
  int64_t n[kMaxIndexAxes];
  int64_t hi[kMaxIndexAxes];
  int64_t stride[kMaxIndexAxes];
  StridedIndexer<1> win;
  cu::IndexError* err;
};

/// out[i, w] = a[sum_j start_j(i) * stride_j + win(w)], start_j = the index (negative: from
/// the end) lowered to hi where the window would overrun (the CPU's std::min(v, hi)). An index
/// outside [-n, n) is recorded in p.err and gives 0.
template <typename U>
__global__ void gather_kernel(const U* a, U* out, GatherParams p, int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    const int64_t i = e / p.window;
    const int64_t w = e - i * p.window;
    int64_t base = 0;
    bool ok = true;
    for (int j = 0; j < p.k; ++j) {
      int64_t v = p.idx[j * p.n_idx + i];
      if (!cu::wrap_index(v, p.n[j])) {
        cu::record_index_error(p.err, v, p.n[j], p.axis[j]);
        ok = false;
        break;
      }
      base += (v < p.hi[j] ? v : p.hi[j]) * p.stride[j];
    }
    if (!ok) {
      out[e] = U(0);
      continue;
    }
    int64_t off[1];
    p.win.offsets(w, off);
    out[e] = a[base + off[0]];
  }
}

// ---------------------------------------------------------------------------------------
// Scatter

/// Where scatter update e = (index position i, window element w) lands. The window's
/// dimensions are planned on the host: indexed axes keep a dimension each (slot: which index
/// array gives its start; limit: a's size there; axis: which axis it is), other runs merge
/// where out's row-major strides allow and need no bounds check (the window fits:
/// U[d] <= a.shape[d]). An index outside [-n, n) is recorded in err and its window skipped.
struct WindowScatterAddr {
  const int64_t* idx;
  int64_t n_idx;
  int64_t wsize;
  StridedIndexer<1> ux; // the updates' offsets, row-major over I + U
  int nd;
  int64_t shape[kMaxIndexAxes];
  int64_t stride[kMaxIndexAxes];
  int64_t limit[kMaxIndexAxes];
  int slot[kMaxIndexAxes];
  int axis[kMaxIndexAxes];
  cu::IndexError* err;

  __device__ __forceinline__ bool locate(int64_t e, int64_t& o, int64_t& u) const {
    const int64_t i = e / wsize;
    int64_t w = e - i * wsize;
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t q = w / shape[d];
      int64_t c = w - q * shape[d];
      w = q;
      if (slot[d] >= 0) {
        int64_t s = idx[slot[d] * n_idx + i];
        if (!cu::wrap_index(s, limit[d])) {
          cu::record_index_error(err, s, limit[d], axis[d]);
          return false;
        }
        c += s;
        if (c >= limit[d]) return false; // the part of the window past the array
      }
      off += c * stride[d];
    }
    int64_t uo[1];
    ux.offsets(e, uo);
    o = off;
    u = uo[0];
    return true;
  }
};

/// Fills the window dimensions of addr from the window shape U (one entry per dimension of
/// a), a's shape and out's row-major strides; false when they need more than kMaxIndexAxes.
bool plan_window(
    WindowScatterAddr& addr,
    const Shape& wshape,
    const Shape& shape,
    const Strides& rs,
    const std::vector<int>& axes) {
  std::vector<int> slot(shape.size(), -1);
  for (size_t j = 0; j < axes.size(); ++j) slot[axes[j]] = static_cast<int>(j);
  int nd = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool merge = nd > 0 && slot[d] < 0 && addr.slot[nd - 1] < 0 &&
        addr.stride[nd - 1] == rs[d] * wshape[d];
    if (slot[d] < 0 && wshape[d] == 1) continue; // contributes nothing
    if (merge) {
      addr.shape[nd - 1] *= wshape[d];
      addr.stride[nd - 1] = rs[d];
      continue;
    }
    if (nd == kMaxIndexAxes) return false;
    addr.shape[nd] = wshape[d];
    addr.stride[nd] = rs[d];
    addr.limit[nd] = shape[d];
    addr.slot[nd] = slot[d];
    addr.axis[nd] = static_cast<int>(d);
    ++nd;
  }
  addr.nd = nd;
  return true;
}

/// The reduction of a scatter mode (none: overwrite).
std::optional<cu::ScatterOp> scatter_op(ScatterMode mode) {
  switch (mode) {
    case ScatterMode::None: return std::nullopt;
    case ScatterMode::Sum: return cu::ScatterOp::Sum;
    case ScatterMode::Prod: return cu::ScatterOp::Prod;
    case ScatterMode::Max: return cu::ScatterOp::Max;
    case ScatterMode::Min: return cu::ScatterOp::Min;
  }
  return std::nullopt;
}

/// The public op of a scatter mode, named by its errors (as the CPU's scatter_op).
const char* scatter_name(ScatterMode mode) {
  switch (mode) {
    case ScatterMode::None: return "scatter";
    case ScatterMode::Sum: return "scatter_add";
    case ScatterMode::Prod: return "scatter_prod";
    case ScatterMode::Max: return "scatter_max";
    case ScatterMode::Min: return "scatter_min";
  }
  return "scatter";
}

// ---------------------------------------------------------------------------------------
// MaskedRank

/// Whether v counts as true (the CPU's cast_to<bool>: != 0, NaN true, complex either part).
template <typename T>
__device__ __forceinline__ bool truthy(const T& v) {
  if constexpr (cu::is_complex_device_v<T>) {
    return v.real() != 0.0f || v.imag() != 0.0f;
  } else if constexpr (cu::is_half_device_v<T>) {
    return static_cast<float>(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

/// flags[e] = 1 where the mask's row-major element e is true, else 0.
template <typename T>
__global__ void mask_flags_kernel(const T* m, StridedIndexer<1> ix, uint32_t* flags, int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t off[1];
    ix.offsets(e, off);
    flags[e] = truthy(m[off[0]]) ? 1u : 0u;
  }
}

/// out[e] = the number of trues before e within its run of `run` elements, from the global
/// exclusive count G: G[e] - G[start of e's run]. G is mod 2^32; the difference is exact
/// for runs of fewer than 2^32 trues (int32 output, as the CPU's).
__global__ void masked_rank_kernel(const uint32_t* g, int32_t* out, int64_t run, int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    out[e] = static_cast<int32_t>(g[e] - g[e - e % run]);
  }
}

} // namespace

/// Windows of a (slice_sizes) at index positions: inputs (a, idx_0, ..., idx_{k-1}), the
/// indices broadcast to shape I; out: I + slice_sizes, row-major.
void Gather::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  array& out = outputs[0];
  const size_t k = axes_.size();
  auto win_plan = collapse_dims(slice_sizes_, {a.strides()});
  if (k > size_t(kMaxIndexAxes) || win_plan.shape.size() > size_t(cu::kMaxDims)) {
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  for (size_t j = 0; j < k; ++j) cu::index_type(inputs[1 + j].dtype(), op_);
  void* dst = cu::alloc_output(out);
  const int64_t total = static_cast<int64_t>(out.size());
  if (total == 0) return;
  GatherParams p{};
  p.k = static_cast<int>(k);
  p.n_idx = k > 0 ? static_cast<int64_t>(inputs[1].size()) : 1;
  p.window = 1;
  for (auto s : slice_sizes_) p.window *= s;
  bool may_fail = false;
  for (size_t j = 0; j < k; ++j) {
    const int ax = axes_[j];
    p.axis[j] = ax;
    p.n[j] = a.shape(ax);
    p.hi[j] = int64_t(a.shape(ax)) - slice_sizes_[ax];
    p.stride[j] = a.strides()[ax];
    may_fail = may_fail || cu::index_may_be_out_of_range(inputs[1 + j].dtype(), a.shape(ax));
  }
  p.idx = cu::load_indices(inputs, 1, k, op_);
  p.win = cu::make_indexer<1>(win_plan, op_);
  cu::IndexErrorCheck check(op_, may_fail);
  p.err = check.device();
  cu::dispatch_bits(out.itemsize(), [&]<typename U>() {
    gather_kernel<U><<<cu::grid_for(size_t(total), kThreads), kThreads, 0, cu::stream()>>>(
        cu::device_ptr<U>(a), static_cast<U*>(dst), p, total);
    cu::check_launch("gather_kernel");
  });
  check.finish(dst, out.nbytes());
}

/// a with windows combined with updates: inputs (a, idx_0, ..., idx_{k-1}, updates), the
/// indices of shape I, updates I + U and a's dtype; out: a's shape, row-major.
void Scatter::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  array upd = inputs.back();
  array& out = outputs[0];
  const size_t k = axes_.size();
  const int nd = static_cast<int>(a.ndim());
  const int r = static_cast<int>(upd.ndim()) - nd; // index dimensions of the updates
  const Strides rs = row_strides(a.shape());
  const char* name = scatter_name(mode_);

  WindowScatterAddr addr{};
  const Shape wshape(upd.shape().begin() + r, upd.shape().end());
  if (k > size_t(kMaxIndexAxes) || !plan_window(addr, wshape, a.shape(), rs, axes_)) {
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  for (size_t j = 0; j < k; ++j) cu::index_type(inputs[1 + j].dtype(), name);
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  cu::copy_elements(cu::device_ptr(a), a.dtype(), a.strides(), dst, out.dtype(), rs, a.shape());
  if (upd.size() == 0) return;

  auto upd_plan = collapse_dims(upd.shape(), {upd.strides()});
  if (upd_plan.shape.size() > size_t(cu::kMaxDims)) {
    upd = cu::contiguous_copy(upd);
    cu::retain(upd);
    upd_plan = collapse_dims(upd.shape(), {upd.strides()});
  }
  int64_t n_idx = 1, wsize = 1;
  for (int d = 0; d < r; ++d) n_idx *= upd.shape(d);
  for (auto s : wshape) wsize *= s;
  addr.idx = cu::load_indices(inputs, 1, k, name);
  addr.n_idx = n_idx;
  addr.wsize = wsize;
  addr.ux = cu::make_indexer<1>(upd_plan, name);
  bool may_fail = false;
  for (size_t j = 0; j < k; ++j) {
    may_fail = may_fail ||
        cu::index_may_be_out_of_range(inputs[1 + j].dtype(), a.shape(axes_[j]));
  }
  cu::IndexErrorCheck check(name, may_fail);
  addr.err = check.device();
  // One window never lands on a position twice; windows of different index positions can.
  cu::scatter_updates(
      addr, static_cast<int64_t>(upd.size()), cu::device_ptr(upd), dst, out.dtype(),
      static_cast<int64_t>(out.size()), scatter_op(mode_), n_idx > 1);
  check.finish(dst, out.nbytes());
}

/// The number of true mask elements before each position (int32), counted in row-major
/// order over the dimensions from start_axis on, separately for each leading index.
void MaskedRank::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array m = inputs[0];
  array& out = outputs[0];
  auto* dst = static_cast<int32_t*>(cu::alloc_output(out));
  const int64_t total = static_cast<int64_t>(out.size());
  if (total == 0) return;
  int64_t run = 1;
  for (size_t d = start_axis_; d < m.ndim(); ++d) run *= m.shape(d);
  auto plan = collapse_dims(m.shape(), {m.strides()});
  if (plan.shape.size() > size_t(cu::kMaxDims)) {
    m = cu::contiguous_copy(m);
    cu::retain(m);
    plan = collapse_dims(m.shape(), {m.strides()});
  }
  const unsigned blocks = cu::grid_for(size_t(total), kThreads);
  auto* counts = static_cast<uint32_t*>(cu::scratch(sizeof(uint32_t) * size_t(total)));
  cu::dispatch_device_types(m.dtype(), [&]<typename T>() {
    mask_flags_kernel<T><<<blocks, kThreads, 0, cu::stream()>>>(
        cu::device_ptr<T>(m), cu::make_indexer<1>(plan, "masked_scatter"), counts, total);
    cu::check_launch("mask_flags_kernel");
  });
  // In place: the flags become their global exclusive prefix count.
  size_t bytes = 0;
  NUVEC_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, counts, total, cu::stream()));
  void* tmp = cu::scratch(std::max<size_t>(bytes, 16));
  NUVEC_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp, bytes, counts, total, cu::stream()));
  masked_rank_kernel<<<blocks, kThreads, 0, cu::stream()>>>(counts, dst, run, total);
  cu::check_launch("masked_rank_kernel");
}

} // namespace nuvec
