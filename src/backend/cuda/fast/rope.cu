// nuvec: GPU kernel of Rope (rules and fallback in src/fast/rope.cpp; semantics are the CPU
// kernel's): one thread per feature pair of a row (grid-stride), the angle in float32, cos
// and sin rounded to the element type, each product and sum rounded as the fallback rounds
// them; a second loop copies the features past `dims`. Non-contiguous inputs are copied first.
#include <cstdint>

#include "backend/cuda/copy.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/rope.h"

namespace nuvec {

namespace {

struct RopeArgs {
  int64_t rows, d, t_len, rows_per_batch;
  int half, dims;
  bool traditional, forward, per_batch;
  float log_base_over_half, scale;
  const int32_t* offset;
  const float* freqs; // null: from the base
};

template <typename T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ y, const RopeArgs p) {
  using A = cu::device_acc_t<T>;
  const int64_t pairs = p.rows * p.half;
  const int64_t i2 = p.traditional ? 1 : p.half, step = p.traditional ? 2 : 1;
  NUVEC_CUDA_KERNEL_LOOP(k, pairs) {
    const int64_t r = k / p.half;
    const int i = static_cast<int>(k - r * p.half);
    const int64_t b = r / p.rows_per_batch, t = r % p.t_len;
    const float pos = (float(t) + float(p.offset[p.per_batch ? b : 0])) * p.scale;
    const float inv = p.freqs ? 1.0f / p.freqs[i] : expf(float(-i) * p.log_base_over_half);
    float sf, cf;
    sincosf(pos * inv, &sf, &cf);
    const T c = cu::store_as<T>(cf), s = cu::store_as<T>(sf);
    const T* xr = x + r * p.d;
    T* yr = y + r * p.d;
    const int64_t j1 = i * step, j2 = i2 + i * step;
    const A x1 = cu::to_acc(xr[j1]), x2 = cu::to_acc(xr[j2]);
    const A x1c = cu::to_acc(cu::store_as<T>(x1 * cu::to_acc(c))), x2s = cu::to_acc(cu::store_as<T>(x2 * cu::to_acc(s)));
    const A x1s = cu::to_acc(cu::store_as<T>(x1 * cu::to_acc(s))), x2c = cu::to_acc(cu::store_as<T>(x2 * cu::to_acc(c)));
    if (p.forward) {
      yr[j1] = cu::store_as<T>(x1c - x2s);
      yr[j2] = cu::store_as<T>(x1s + x2c);
    } else {
      yr[j1] = cu::store_as<T>(x2s + x1c);
      yr[j2] = cu::store_as<T>(x2c - x1s);
    }
  }
  // Features past `dims` pass through.
  const int64_t rest = p.d - p.dims;
  if (rest > 0) {
    NUVEC_CUDA_KERNEL_LOOP(k, p.rows * rest) {
      const int64_t r = k / rest, j = p.dims + (k - r * rest);
      y[r * p.d + j] = x[r * p.d + j];
    }
  }
}

} // namespace

void Rope::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cu::as_row_contiguous(inputs[0]), off = cu::as_row_contiguous(inputs[1]);
  const array freqs = inputs.size() > 2 ? cu::as_row_contiguous(inputs[2]) : off;
  void* dst = cu::alloc_output(outputs[0]);
  if (x.size() == 0) return;
  const int nd = static_cast<int>(x.ndim());
  RopeArgs p{};
  p.d = x.shape(nd - 1);
  p.t_len = x.shape(nd - 2);
  p.rows = static_cast<int64_t>(x.size()) / p.d;
  p.rows_per_batch = p.rows / x.shape(0);
  p.half = dims_ / 2;
  p.dims = dims_;
  p.traditional = traditional_;
  p.forward = forward_;
  p.per_batch = off.size() > 1;
  p.log_base_over_half = logf(base_) / static_cast<float>(p.half);
  p.scale = scale_;
  p.offset = cu::device_ptr<int32_t>(off);
  p.freqs = inputs.size() > 2 ? cu::device_ptr<float>(freqs) : nullptr;
  cu::dispatch_device_float_types(x.dtype(), "rope", [&]<typename T>() {
    constexpr unsigned kThreads = 256;
    const size_t work = static_cast<size_t>(p.rows * std::max<int64_t>(p.half, p.d - p.dims));
    rope_kernel<T><<<cu::grid_for(work, kThreads), kThreads, 0, cu::stream()>>>(
        cu::device_ptr<T>(x), static_cast<T*>(dst), p);
    cu::check_launch("rope_kernel");
  });
}

} // namespace nuvec
