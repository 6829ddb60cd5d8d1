// nuvec: eval_gpu of the creation family: Full (the copy kernels' broadcast) and Arange (the
// CPU's values, computed on the device).
#include <cstdint>
#include <type_traits>

#include "backend/common/math/cast.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"

namespace nuvec {

/// full: the input (already cast, broadcast to the output shape by the op) materialised
/// row-contiguous, as cpu::copy_broadcast.
void Full::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cu::copy_broadcast(inputs[0], outputs[0]);
}

namespace {

/// Integer arange: start + i * step in the output type, wrapping (the CPU's arithmetic in
/// T, done in the unsigned type so that overflow is defined).
template <typename T>
__global__ void arange_int_kernel(T* out, int64_t n, T start, T step) {
  using W = math::wrap_uint_t<T>;
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    out[i] = static_cast<T>(W(start) + W(static_cast<T>(i)) * W(step));
  }
}

/// Inexact, complex and bool arange: start + i * step computed in float64, then cast.
/// __dmul_rn/__dadd_rn keep the multiply and add separately rounded (no FMA contraction), so
/// the values equal the host's bit for bit.
template <typename T>
__global__ void arange_real_kernel(T* out, int64_t n, double start, double step) {
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    out[i] = math::cast_to<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), step)));
  }
}

} // namespace

/// arange: the CPU Arange's values (src/backend/cpu/creation.cpp). Integer outputs step exactly
/// in the output type with NumPy's rule (the step is the difference of the first two values,
/// each cast); the others are start + i * step in float64, cast once.
void Arange::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  cu::alloc_output(out);
  const int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) return;
  cu::dispatch_device_types(out.dtype(), [&]<typename T>() {
    T* p = cu::output_ptr<T>(out);
    unsigned grid = cu::grid_for(size_t(n), cu::kEwThreads);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Host integer types are the device ones: the host's cast_to gives the same values.
      T start = cast_to<T>(start_);
      T step = static_cast<T>(cast_to<T>(start_ + step_) - start);
      arange_int_kernel<T><<<grid, cu::kEwThreads, 0, cu::stream()>>>(p, n, start, step);
    } else {
      arange_real_kernel<T><<<grid, cu::kEwThreads, 0, cu::stream()>>>(p, n, start_, step_);
    }
    cu::check_launch("arange");
  });
}

} // namespace nuvec
