// nuvec: CPU kernels of Gather, Scatter (None/Sum/Prod/Max/Min) and MaskedRank. Negative
// indices count from the end; an index outside [-n, n) throws std::out_of_range naming the
// op (index_range.h). A start inside the axis whose window overruns it is JAX's dynamic
// slice case: a gather shifts the start back so the window fits, a scatter drops the part
// of the window outside the array.
#include <algorithm>
#include <stdexcept>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "backend/cpu/index_range.h"
#include "primitives/gather_scatter.h"

namespace nuvec {

namespace {

// The elements of an index array (any integer dtype, any layout) in row-major order.
std::vector<int64_t> load_indices(const array& idx) {
  std::vector<int64_t> out(idx.size());
  if (out.empty()) return out;
  auto plan = collapse_dims(idx.shape(), {idx.strides()});
  dispatch_all_types(idx.dtype(), [&]<typename I>() {
    if constexpr (is_integral_v<I>) {
      const I* p = static_cast<const I*>(idx.raw_data());
      size_t k = 0;
      for_each_run<1>(plan, [&](const int64_t* off, int64_t n, const int64_t* st) {
        for (int64_t i = 0; i < n; ++i) out[k++] = cpu::index_value(p[off[0] + i * st[0]]);
      });
    } else {
      throw std::invalid_argument("[Gather/Scatter] indices must have an integer dtype.");
    }
  });
  return out;
}

std::vector<std::vector<int64_t>> load_all(const std::vector<array>& inputs, size_t first, size_t count) {
  std::vector<std::vector<int64_t>> out;
  for (size_t j = 0; j < count; ++j) out.push_back(load_indices(inputs[first + j]));
  return out;
}

// The public op a scatter mode comes from, for error messages.
const char* scatter_op(ScatterMode mode) {
  switch (mode) {
    case ScatterMode::None: return "scatter";
    case ScatterMode::Sum: return "scatter_add";
    case ScatterMode::Prod: return "scatter_prod";
    case ScatterMode::Max: return "scatter_max";
    case ScatterMode::Min: return "scatter_min";
  }
  return "scatter";
}

template <typename T>
void combine(ScatterMode mode, T& slot, const T& u) {
  switch (mode) {
    case ScatterMode::None: slot = u; break;
    case ScatterMode::Sum:
      if constexpr (std::is_same_v<T, bool>) {
        slot = slot || u;
      } else {
        slot = static_cast<T>(slot + u);
      }
      break;
    case ScatterMode::Prod:
      if constexpr (std::is_same_v<T, bool>) {
        slot = slot && u;
      } else {
        slot = static_cast<T>(slot * u);
      }
      break;
    // NaN wins either way, as in maximum/minimum.
    case ScatterMode::Max:
      if (is_nan_element(u) || (!is_nan_element(slot) && u > slot)) slot = u;
      break;
    case ScatterMode::Min:
      if (is_nan_element(u) || (!is_nan_element(slot) && u < slot)) slot = u;
      break;
  }
}

} // namespace

void Gather::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const size_t k = axes_.size();
  auto idx = load_all(inputs, 1, k);
  const int64_t n_idx = k > 0 ? static_cast<int64_t>(inputs[1].size()) : 1;
  int64_t window = 1;
  for (auto s : slice_sizes_) window *= s;
  // A start above n - size moves down to it, keeping the window inside (size <= n is
  // checked by the op).
  std::vector<int64_t> hi(k), st(k);
  for (size_t j = 0; j < k; ++j) {
    hi[j] = a.shape()[axes_[j]] - slice_sizes_[axes_[j]];
    st[j] = a.strides()[axes_[j]];
  }
  auto plan = collapse_dims(slice_sizes_, {a.strides(), row_strides(slice_sizes_)});
  dispatch_all_types(a.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(a.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    for (int64_t i = 0; i < n_idx; ++i) {
      int64_t base = 0;
      for (size_t j = 0; j < k; ++j) {
        int64_t v = cpu::checked_index(idx[j][i], a.shape()[axes_[j]], axes_[j], op_);
        base += std::min(v, hi[j]) * st[j];
      }
      T* o = dst + i * window;
      if (window == 1) {
        o[0] = src[base];
        continue;
      }
      for_each_run<2>(plan, [&](const int64_t* off, int64_t n, const int64_t* s) {
        for (int64_t t = 0; t < n; ++t) o[off[1] + t * s[1]] = src[base + off[0] + t * s[0]];
      });
    }
  });
}

void Scatter::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& upd = inputs.back();
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const size_t k = axes_.size();
  const int nd = static_cast<int>(a.ndim());
  const Strides ost = row_strides(a.shape());
  dispatch_all_types(a.dtype(), [&]<typename T>() {
    T* dst = static_cast<T*>(out.raw_data());
    // Start from a copy of a (any layout) in row-major order.
    {
      auto plan = collapse_dims(a.shape(), {a.strides(), ost});
      const T* src = static_cast<const T*>(a.raw_data());
      for_each_run<2>(plan, [&](const int64_t* off, int64_t n, const int64_t* s) {
        for (int64_t t = 0; t < n; ++t) dst[off[1] + t * s[1]] = src[off[0] + t * s[0]];
      });
    }
    if (upd.size() == 0) return;
    auto idx = load_all(inputs, 1, k);
    const int r = static_cast<int>(upd.ndim()) - nd; // index dimensions of the updates
    const Shape ishape(upd.shape().begin(), upd.shape().begin() + r);
    const Shape wshape(upd.shape().begin() + r, upd.shape().end());
    const T* up = static_cast<const T*>(upd.raw_data());
    std::vector<int64_t> start(nd, 0), lo(nd), hi(nd), w(nd), ipos(r, 0);
    int64_t n_idx = 1;
    for (auto s : ishape) n_idx *= s;
    int64_t uoff_i = 0; // updates offset of index position i (odometer over ishape)
    for (int64_t i = 0; i < n_idx; ++i) {
      std::fill(start.begin(), start.end(), 0);
      for (size_t j = 0; j < k; ++j) {
        start[axes_[j]] =
            cpu::checked_index(idx[j][i], a.shape()[axes_[j]], axes_[j], scatter_op(mode_));
      }
      // The part of the window that lands inside the array; the rest is skipped.
      bool empty = false;
      for (int d = 0; d < nd; ++d) {
        lo[d] = std::max<int64_t>(0, -start[d]);
        hi[d] = std::min<int64_t>(wshape[d], a.shape()[d] - start[d]);
        empty = empty || lo[d] >= hi[d];
      }
      if (!empty) {
        w = lo;
        while (true) {
          int64_t o = 0, u = uoff_i;
          for (int d = 0; d < nd; ++d) {
            o += (start[d] + w[d]) * ost[d];
            u += w[d] * upd.strides()[r + d];
          }
          combine<T>(mode_, dst[o], up[u]);
          int d = nd - 1;
          for (; d >= 0; --d) {
            if (++w[d] < hi[d]) break;
            w[d] = lo[d];
          }
          if (d < 0) break;
        }
      }
      for (int d = r - 1; d >= 0; --d) {
        uoff_i += upd.strides()[d];
        if (++ipos[d] < ishape[d]) break;
        uoff_i -= upd.strides()[d] * ishape[d];
        ipos[d] = 0;
      }
    }
  });
}

void MaskedRank::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& m = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int64_t run = 1; // elements per independent count
  for (size_t d = start_axis_; d < m.ndim(); ++d) run *= m.shape()[d];
  int32_t* dst = static_cast<int32_t*>(out.raw_data());
  auto plan = collapse_dims(m.shape(), {m.strides()});
  dispatch_all_types(m.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(m.raw_data());
    int64_t k = 0;
    int32_t count = 0;
    for_each_run<1>(plan, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i, ++k) {
        if (k % run == 0) count = 0;
        dst[k] = count;
        if (cast_to<bool>(p[off[0] + i * st[0]])) ++count;
      }
    });
  });
}

} // namespace nuvec
