// nuvec: what every CUDA kernel file needs from the runtime: error checks, the CUDA stream of
// the node being evaluated, device pointers to inputs (copied from the host on first use),
// output and scratch allocations, and the CPU fallback. Compiled by both g++ and nvcc.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "nuvec/array.h"

namespace nuvec::cu {

/// Throws std::runtime_error "[what] <CUDA error string>" when err is not cudaSuccess.
void check(cudaError_t err, const char* what);
#define NUVEC_CUDA_CHECK(expr) ::nuvec::cu::check((expr), #expr)

/// Checks the last launch error (call right after a <<<...>>> launch).
void check_launch(const char* kernel);

/// The CUDA stream of the node being evaluated on this worker thread.
cudaStream_t stream();

/// Properties of the current device (SM count, shared memory limits, L2, ...).
const cudaDeviceProp& device_props();

/// Device address of arr's first element (offset applied). Data that lives only on the
/// host is copied to the device first, on the current stream. For inputs; never write.
void* device_ptr(const array& arr);
template <typename T>
const T* device_ptr(const array& arr) {
  return static_cast<const T*>(device_ptr(arr));
}

/// Gives `out` a fresh row-contiguous device buffer of out.nbytes() and returns it.
void* alloc_output(array& out);
template <typename T>
T* alloc_output(array& out) {
  return static_cast<T*>(alloc_output(out));
}
/// Gives `out` a device buffer of data_size elements with the given layout.
void* alloc_output(array& out, size_t data_size, Strides strides, array::Flags flags);

/// out's device buffer: `in`'s when in can be donated (backend/common/donation.h), lives only
/// on the device and no other stream's upload into it is in flight (*donated = true: out
/// already holds in's values), else a fresh one (alloc_output; *donated = false). Kernels of
/// this stream that still read in's buffer run before the ones launched next, so writing
/// it in place is ordered after them.
void* donate_or_alloc_output(const array& in, array& out, bool* donated);

/// Scratch device memory for the node being evaluated: valid for the kernels it launches on
/// stream(), released once the device has executed them.
void* scratch(size_t bytes);

/// Keeps `a`'s buffer alive until the device has executed the work launched so far (inputs
/// and outputs of the current node are kept automatically).
void retain(const array& a);

/// Runs the primitive's CPU kernel on host copies of its inputs (used by families whose GPU
/// kernels do not exist, such as factorizations, as MLX does): waits for the stream,
/// copies GPU-only inputs to the host, and leaves the outputs on the host; the next GPU
/// consumer copies them back on demand.
void eval_on_host(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs);

} // namespace nuvec::cu

/// Defines Family::eval_gpu as the CPU fallback (cu::eval_on_host).
#define NUVEC_GPU_ON_HOST(Family)                                                   \
  void Family::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) { \
    ::nuvec::cu::eval_on_host(*this, inputs, outputs);                              \
  }
