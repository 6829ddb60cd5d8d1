// nuvec: the CPU copy/cast kernel (copy_strided and friends) and the eval_cpu of the copy
// family (AsType, View, Copy, Contiguous, StopGradient, Depends, AsStrided, Full, Arange).
// Semantics follow MLX's copy primitives; the loop is a collapsed strided walk.
#include "backend/cpu/copy.h"

#include <cmath>
#include <cstring>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "primitives/primitives.h"

namespace nuvec::cpu {

namespace {

template <typename In, typename Out>
void copy_loop(const In* src, const Strides& ss, Out* dst, const Strides& ds, const Shape& shape) {
  StridedPlan plan = collapse_dims(shape, {ss, ds});
  for_each_run<2>(plan, [&](const int64_t* off, int64_t n, const int64_t* inner) {
    const In* s = src + off[0];
    Out* d = dst + off[1];
    if constexpr (std::is_same_v<In, Out>) {
      if (inner[0] == 1 && inner[1] == 1) {
        std::memcpy(d, s, n * sizeof(In));
        return;
      }
    }
    if (inner[0] == 1 && inner[1] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = cast_to<Out>(s[i]);
    } else if (inner[0] == 0) {
      Out v = cast_to<Out>(s[0]);
      for (int64_t i = 0; i < n; ++i) d[i * inner[1]] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * inner[1]] = cast_to<Out>(s[i * inner[0]]);
    }
  });
}

size_t shape_size(const Shape& shape) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return n;
}

void ensure_buffer(array& out) {
  if (!out.data_shared_ptr()) out.set_data(allocator::malloc(out.nbytes()));
}

} // namespace

void copy_elements(
    const void* src,
    Dtype src_dtype,
    const Strides& src_strides,
    void* dst,
    Dtype dst_dtype,
    const Strides& dst_strides,
    const Shape& shape) {
  if (shape_size(shape) == 0) return;
  dispatch_all_types(src_dtype, [&]<typename In>() {
    dispatch_all_types(dst_dtype, [&]<typename Out>() {
      copy_loop(
          static_cast<const In*>(src), src_strides, static_cast<Out*>(dst), dst_strides, shape);
    });
  });
}

void copy_strided(const array& in, array& out) {
  ensure_buffer(out);
  // Written in in's row-major order, so out may be a reshape of in.
  copy_elements(
      in.raw_data(), in.dtype(), in.strides(), out.raw_data(), out.dtype(),
      row_strides(in.shape()), in.shape());
}

void copy_broadcast(const array& in, array& out) {
  ensure_buffer(out);
  copy_elements(
      in.raw_data(), in.dtype(), broadcast_strides(in, out.shape()), out.raw_data(),
      out.dtype(), row_strides(out.shape()), out.shape());
}

array contiguous_copy(const array& in, Dtype dtype) {
  array out(allocator::malloc(in.size() * size_of(dtype)), in.shape(), dtype);
  copy_strided(in, out);
  return out;
}

array contiguous_copy(const array& in) {
  return contiguous_copy(in, in.dtype());
}

array::Flags layout_flags(const Shape& shape, const Strides& strides, bool contiguous) {
  bool row = true, col = true;
  int64_t expect = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    row &= strides[i] == expect;
    expect *= shape[i];
  }
  expect = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    col &= strides[i] == expect;
    expect *= shape[i];
  }
  array::Flags f{};
  f.row_contiguous = row;
  f.col_contiguous = col;
  f.contiguous = contiguous || row || col;
  return f;
}

ViewLayout view_layout(const Shape& shape, const Strides& strides) {
  size_t size = 1;
  for (auto d : shape) size *= d;
  if (size == 0) return {{true, true, true}, 0};
  std::vector<int> dims; // the dimensions that move through memory
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] != 1 && strides[i] != 0) dims.push_back(i);
  }
  auto dense_in_order = [&](auto first, auto last) {
    int64_t expect = 1;
    for (auto it = first; it != last; ++it) {
      if (strides[*it] != expect) return false; // a negative stride runs backwards: not dense
      expect *= shape[*it];
    }
    return true;
  };
  auto flags_in_order = [&](auto first, auto last) { // every size > 1 dimension, in order
    int64_t expect = 1;
    for (auto it = first; it != last; ++it) {
      if (shape[*it] == 1) continue;
      if (strides[*it] != expect) return false;
      expect *= shape[*it];
    }
    return true;
  };
  std::vector<int> all(shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  bool row = flags_in_order(all.rbegin(), all.rend());
  bool col = flags_in_order(all.begin(), all.end());
  std::vector<int> by_stride = dims;
  std::stable_sort(by_stride.begin(), by_stride.end(), [&](int a, int b) {
    return strides[a] < strides[b];
  });
  bool dense = dense_in_order(by_stride.begin(), by_stride.end());
  size_t distinct = 1;
  int64_t span = 1;
  for (int i : dims) {
    distinct *= shape[i];
    span += (shape[i] - 1) * std::abs(strides[i]);
  }
  return {{dense, row, col}, dense ? distinct : static_cast<size_t>(span)};
}

} // namespace nuvec::cpu

namespace nuvec {

using cpu::contiguous_copy;
using cpu::copy_strided;

void AsType::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  copy_strided(inputs[0], outputs[0]);
}

void View::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  // Bits are reinterpreted in place only for a dense row-major input starting at its
  // buffer (offsets are counted in the input's elements); anything else is copied first.
  array src = (in.flags().row_contiguous && in.offset() == 0) ? in : contiguous_copy(in);
  auto flags = cpu::layout_flags(out.shape(), row_strides(out.shape()), true);
  out.copy_shared_buffer(src, row_strides(out.shape()), flags, out.size());
}

void Copy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(inputs[0]);
}

void Contiguous::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  bool keep = in.flags().row_contiguous || (allow_col_major_ && in.flags().col_contiguous);
  if (keep) {
    outputs[0].copy_shared_buffer(in);
  } else {
    copy_strided(in, outputs[0]);
  }
}

void StopGradient::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(inputs[0]);
}

void Depends::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].copy_shared_buffer(inputs[i]);
}

void AsStrided::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  // Strides and offset address the input's row-major element order.
  array src = in.flags().row_contiguous ? in : contiguous_copy(in);
  auto layout = cpu::view_layout(shape_, strides_);
  out.copy_shared_buffer(
      src, strides_, layout.flags, out.size() == 0 ? 0 : layout.data_size,
      static_cast<int64_t>(offset_));
}

void Full::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::copy_broadcast(inputs[0], outputs[0]);
}

void Arange::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const size_t n = out.size();
  dispatch_all_types(out.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(out.raw_data());
    if constexpr (is_complex_v<T> || std::is_same_v<T, bool>) {
      for (size_t i = 0; i < n; ++i) p[i] = cast_to<T>(start_ + static_cast<double>(i) * step_);
    } else if constexpr (is_integral_v<T>) {
      // Integers step exactly in the output type, as NumPy does for integer aranges.
      // NumPy's rule: the step is the difference of the first two values, each cast.
      T start = cast_to<T>(start_);
      T step = static_cast<T>(cast_to<T>(start_ + step_) - start);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<T>(i) * step);
    } else {
      for (size_t i = 0; i < n; ++i) p[i] = cast_to<T>(start_ + static_cast<double>(i) * step_);
    }
  });
}

} // namespace nuvec
