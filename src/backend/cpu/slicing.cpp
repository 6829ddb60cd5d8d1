// nuvec: CPU kernels of the slicing family. Slice and DynamicSlice are views (the window's
// offset and step-scaled strides over the input's buffer); SliceUpdate, DynamicSliceUpdate
// and Concatenate copy into a fresh row-contiguous output through strided windows.
#include <algorithm>
#include <cstdlib>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "backend/cpu/copy.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

/// Copies the elements of `in` (any layout) to dst, laid out with dst_strides (elements).
void copy_into(const array& in, void* dst, const Strides& dst_strides) {
  cpu::copy_elements(
      in.raw_data(), in.dtype(), in.strides(), dst, in.dtype(), dst_strides, in.shape());
}

/// A new row-contiguous buffer for out holding a copy of src.
void copy_to_new_buffer(const array& src, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  copy_into(src, out.raw_data(), out.strides());
}


/// Offset (elements) of the window starting at `start` under `strides`.
int64_t window_offset(const Shape& start, const Strides& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < start.size(); ++i) off += int64_t(start[i]) * strides[i];
  return off;
}

/// Reads the run-time starts (any integer dtype and layout) of a dynamic window over the
/// given axes, counts negative starts from the end, and clamps so the window fits.
Shape dynamic_start(
    const array& start,
    const std::vector<int>& axes,
    const Shape& shape,
    const Shape& window) {
  Shape out(shape.size(), 0);
  auto plan = collapse_dims(start.shape(), {start.strides()});
  std::vector<int64_t> values;
  dispatch_all_types(start.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(start.raw_data());
    if (start.size() == 0) return;
    for_each_run<1>(plan, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) values.push_back(cast_to<int64_t>(p[off[0] + i * st[0]]));
    });
  });
  for (size_t k = 0; k < axes.size() && k < values.size(); ++k) {
    int ax = axes[k];
    int64_t v = values[k];
    if (v < 0) v += shape[ax];
    int64_t hi = std::max<int64_t>(int64_t(shape[ax]) - window[ax], 0);
    out[ax] = static_cast<int32_t>(std::clamp<int64_t>(v, 0, hi));
  }
  return out;
}

/// out = src with `update` written at the window (start, step) of out's row-major layout.
void update_window(
    const array& src,
    const array& update,
    array& out,
    const Shape& start,
    const Shape& steps) {
  // A src nothing else sees (a KV cache replaced by its update) is written in place.
  if (!cpu::donate(src, out)) copy_to_new_buffer(src, out);
  if (update.size() == 0) return;
  Strides window = out.strides();
  for (size_t i = 0; i < window.size(); ++i) window[i] *= steps[i];
  char* base = static_cast<char*>(out.raw_data()) +
      window_offset(start, out.strides()) * int64_t(out.itemsize());
  copy_into(update, base, window);
}

} // namespace

void Slice::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  Strides strides(in.ndim());
  for (size_t i = 0; i < in.ndim(); ++i) strides[i] = in.strides()[i] * strides_[i];
  auto layout = view_layout(out.shape(), strides);
  // An empty window may start past the end; it reads nothing, so it keeps offset 0.
  int64_t offset = out.size() == 0 ? 0 : window_offset(start_, in.strides());
  out.copy_shared_buffer(in, strides, layout.flags, layout.data_size, offset);
}

void SliceUpdate::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  update_window(inputs[0], inputs[1], outputs[0], start_, strides_);
}

void DynamicSlice::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  Shape start = dynamic_start(inputs[1], axes_, in.shape(), slice_size_);
  auto layout = view_layout(out.shape(), in.strides());
  int64_t offset = out.size() == 0 ? 0 : window_offset(start, in.strides());
  out.copy_shared_buffer(in, in.strides(), layout.flags, layout.data_size, offset);
}

void DynamicSliceUpdate::eval_cpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  const array& src = inputs[0];
  const array& update = inputs[1];
  Shape start = dynamic_start(inputs[2], axes_, src.shape(), update.shape());
  update_window(src, update, outputs[0], start, Shape(src.ndim(), 1));
}

void Concatenate::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const Strides& strides = out.strides();
  char* base = static_cast<char*>(out.raw_data());
  int64_t at = 0;
  for (auto& in : inputs) {
    copy_into(in, base + at * strides[axis_] * int64_t(out.itemsize()), strides);
    at += in.shape(axis_);
  }
}

} // namespace nuvec
