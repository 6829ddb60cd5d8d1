// nuvec: the channel kernel errors travel by. A kernel runs on a stream's worker thread (CPU)
// or inside a host callback of a CUDA stream, where an exception cannot reach the caller; it
// is recorded here with its type (std::exception_ptr), the failed node's outputs get defined
// contents, and the next eval on the host rethrows it. Used by both backends' node execution
// (backend/cpu/eval.cpp, backend/cuda/runtime/eval.cpp), the GPU's index checks and events.
#pragma once

#include <exception>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// Keeps the first exception a kernel (CPU or GPU) raised on a worker, for the next eval on
/// the host to rethrow; later ones are dropped until then.
void record_kernel_error(std::exception_ptr e);

/// Gives the outputs of a failed node fresh zeros (a single host element broadcast over
/// each shape), so that readers see defined values and buffers the kernel may have shared
/// with its inputs stay untouched.
void zero_failed_outputs(std::vector<array>& outputs);

/// Rethrows (once) the first exception a kernel raised since the last call, if any, as its
/// own type (std::out_of_range for an index out of range, ...).
void rethrow_kernel_error();

} // namespace nuvec
