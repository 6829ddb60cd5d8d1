// nuvec: wgmma_usable (see wgmma_usable.h): a device flag whose value the sm_90a device pass
// sets, read back once.
#include "backend/cuda/wgmma_usable.h"

#include "backend/cuda/device/wgmma.cuh"
#include "backend/cuda/runtime/runtime.h"

namespace nuvec::cu {

namespace {

/// 1 in device code built for sm_90a (where wgmma and setmaxnreg assemble), else 0.
__device__ int wgmma_built =
#if defined(NUVEC_WGMMA_AVAILABLE)
    1;
#else
    0;
#endif

} // namespace

bool wgmma_usable() {
  static const bool ok = [] {
    if (device_props().major != 9) return false;
    int built = 0;
    NUVEC_CUDA_CHECK(cudaMemcpyFromSymbol(&built, wgmma_built, sizeof(int)));
    return built == 1;
  }();
  return ok;
}

} // namespace nuvec::cu
