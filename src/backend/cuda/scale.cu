// nuvec: cu::scale_in_place (scale.h): one grid-stride kernel, instantiated for the five
// floating element types only.
#include <stdexcept>

#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/scale.h"

namespace nuvec::cu {

namespace {

/// data[i] *= s for i < n, computed in Acc (float for the half types, T otherwise). For
/// complex64 the element type is its float pairs (the caller doubles n), which scales both
/// parts by the same real factor.
template <typename T, typename Acc>
__global__ void scale_kernel(T* data, int64_t n, Acc s) {
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    data[i] = static_cast<T>(static_cast<Acc>(data[i]) * s);
  }
}

/// Launches scale_kernel<T, Acc> over n elements on cu::stream().
template <typename T, typename Acc>
void launch(void* data, int64_t n, Acc s) {
  constexpr unsigned kThreads = 256;
  scale_kernel<T, Acc><<<grid_for(static_cast<size_t>(n), kThreads), kThreads, 0, stream()>>>(
      static_cast<T*>(data), n, s);
  check_launch("scale_kernel");
}

} // namespace

void scale_in_place(void* data, Dtype dtype, int64_t count, double factor) {
  if (count <= 0) return;
  const float f = static_cast<float>(factor);
  switch (dtype.val()) {
    case Dtype::Val::float16: launch<__half, float>(data, count, f); break;
    case Dtype::Val::bfloat16: launch<__nv_bfloat16, float>(data, count, f); break;
    case Dtype::Val::float32: launch<float, float>(data, count, f); break;
    case Dtype::Val::complex64: launch<float, float>(data, 2 * count, f); break;
    case Dtype::Val::float64: launch<double, double>(data, count, factor); break;
    default:
      throw std::invalid_argument("[scale] the GPU scaling takes floating or complex dtypes only.");
  }
}

} // namespace nuvec::cu
