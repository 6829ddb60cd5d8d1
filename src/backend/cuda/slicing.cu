// nuvec: GPU kernels of SliceUpdate, DynamicSliceUpdate and Concatenate, as the CPU's
// src/backend/cpu/slicing.cpp: a fresh row-contiguous output, filled by strided copies
// (cu::copy_elements) of the source and of the update into its window. DynamicSliceUpdate's
// window starts live in a device array, so its update kernel computes the window's offset on
// the device (negative starts count from the end, then clamp so the window fits) instead of
// synchronising to read them. Slice and DynamicSlice are views (shape.cpp).
#include <cstdint>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/index_utils.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"
#include "primitives/slicing.h"

namespace nuvec {

namespace {

using cu::StridedIndexer;

constexpr unsigned kThreads = 256;

/// Copies `in` (any layout) into dst (a device pointer into out's row-major buffer) laid out
/// with dst_strides, converting to dtype.
void copy_into(const array& in, void* dst, Dtype dtype, const Strides& dst_strides) {
  if (in.size() == 0) return;
  cu::copy_elements(
      cu::device_ptr(in), in.dtype(), in.strides(), dst, dtype, dst_strides, in.shape());
}

/// Byte address of element `offset` of out's buffer.
void* at_element(void* base, const array& out, int64_t offset) {
  return static_cast<char*>(base) + offset * static_cast<int64_t>(out.itemsize());
}

/// The window starts of a dynamic slice update: for each of k axes, its size, the largest
/// start that keeps the window inside (size - window), and out's row-major stride.
struct DynamicWindow {
  int k;
  int64_t size[cu::kMaxIndexAxes];
  int64_t hi[cu::kMaxIndexAxes];
  int64_t stride[cu::kMaxIndexAxes];
};

/// out[window offset + update element's window offset] = update element, for every element
/// of the update (ix walks its shape: update strides, out's row-major strides). The window
/// offset comes from the int64 starts on the device: start + size when negative, clamped to
/// [0, hi] (slicing.cpp's dynamic_start).
template <typename U>
__global__ void dynamic_update_kernel(
    const U* update,
    U* out,
    StridedIndexer<2> ix,
    const int64_t* start,
    DynamicWindow w,
    int64_t total) {
  int64_t base = 0;
  for (int j = 0; j < w.k; ++j) {
    int64_t v = start[j];
    if (v < 0) v += w.size[j];
    v = v < 0 ? 0 : (v > w.hi[j] ? w.hi[j] : v);
    base += v * w.stride[j];
  }
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t off[2];
    ix.offsets(e, off);
    out[base + off[1]] = update[off[0]];
  }
}

} // namespace

/// src with update (the slice's shape, src's dtype) written at the window start:stop:step.
void SliceUpdate::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& src = inputs[0];
  const array& update = inputs[1];
  array& out = outputs[0];
  // A src nothing else sees (a KV cache replaced by its update) is written in place.
  bool donated = false;
  void* dst = cu::donate_or_alloc_output(src, out, &donated);
  if (out.size() == 0) return;
  const Strides rs = row_strides(out.shape());
  if (!donated) copy_into(src, dst, out.dtype(), rs);
  if (update.size() == 0) return;
  Strides window = rs;
  int64_t offset = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    window[i] = rs[i] * strides_[i];
    offset += int64_t(start_[i]) * rs[i];
  }
  copy_into(update, at_element(dst, out, offset), out.dtype(), window);
}

/// src with update (src's rank and dtype) written at run-time starts along axes.
void DynamicSliceUpdate::eval_gpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  const array& src = inputs[0];
  array update = inputs[1];
  const array& start = inputs[2];
  array& out = outputs[0];
  const Strides rs = row_strides(src.shape());
  // Plan before any work, so that the rare unsupported cases can still run on the host.
  auto plan = collapse_dims(update.shape(), {update.strides(), rs});
  if (plan.shape.size() > size_t(cu::kMaxDims) && update.size() > 0) {
    update = cu::contiguous_copy(update);
    cu::retain(update);
    plan = collapse_dims(update.shape(), {update.strides(), rs});
  }
  if (plan.shape.size() > size_t(cu::kMaxDims) || axes_.size() > size_t(cu::kMaxIndexAxes)) {
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  bool donated = false;
  void* dst = cu::donate_or_alloc_output(src, out, &donated);
  if (out.size() == 0) return;
  if (!donated) copy_into(src, dst, out.dtype(), rs);
  const int64_t total = static_cast<int64_t>(update.size());
  if (total == 0) return;
  DynamicWindow w{};
  w.k = static_cast<int>(std::min(axes_.size(), start.size()));
  for (int j = 0; j < w.k; ++j) {
    const int ax = axes_[j];
    w.size[j] = src.shape(ax);
    w.hi[j] = std::max<int64_t>(int64_t(src.shape(ax)) - update.shape(ax), 0);
    w.stride[j] = rs[ax];
  }
  const int64_t* starts = w.k > 0 ? cu::load_indices(inputs, 2, 1, "slice_update") : nullptr;
  const auto ix = cu::make_indexer<2>(plan, "slice_update");
  cu::dispatch_bits(out.itemsize(), [&]<typename U>() {
    dynamic_update_kernel<U><<<cu::grid_for(size_t(total), kThreads), kThreads, 0, cu::stream()>>>(
        cu::device_ptr<U>(update), static_cast<U*>(dst), ix, starts, w, total);
    cu::check_launch("dynamic_update_kernel");
  });
}

/// The inputs (out's dtype, equal shapes but along axis) laid end to end along axis.
void Concatenate::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  const Strides rs = row_strides(out.shape());
  int64_t at = 0;
  for (const auto& in : inputs) {
    copy_into(in, at_element(dst, out, at * rs[axis_]), out.dtype(), rs);
    at += in.shape(axis_);
  }
}

} // namespace nuvec
