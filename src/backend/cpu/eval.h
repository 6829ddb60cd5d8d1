// nuvec: hands a node to its CPU stream's worker.
#pragma once

#include <exception>

#include "nuvec/array.h"

namespace nuvec::cpu {

/// Enqueues arr's primitive on its stream; the task keeps the inputs and outputs alive.
void eval(array& arr);

/// Keeps the first exception a kernel (CPU or GPU) raised on a worker, for the next eval on
/// the host to rethrow.
void record_kernel_error(std::exception_ptr e);

/// Gives the outputs of a failed node fresh zeros (a single host element broadcast over
/// each shape), so that readers see defined values.
void zero_failed_outputs(std::vector<array>& outputs);

/// Rethrows (once) the first exception a CPU kernel raised since the last call, if any, as
/// its own type (std::out_of_range for an index out of range, ...).
void rethrow_kernel_error();

} // namespace nuvec::cpu
