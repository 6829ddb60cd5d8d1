// nuvec: whether this build's kernels can use Hopper's warpgroup instructions on the current
// device (wgmma, setmaxnreg, TMA): the device has compute capability 9.0 and the library's
// device code was built for sm_90a (the project's default CUDA target; a plain sm_90 build
// compiles the Hopper kernels to traps, and their callers take their previous kernels).
#pragma once

namespace nuvec::cu {

/// True on a compute capability 9.x device when the device code was built for sm_90a. Asked
/// once per process (the first device's answer).
bool wgmma_usable();

} // namespace nuvec::cu
