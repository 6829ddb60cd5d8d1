// nuvec: hands a node to its CPU stream's worker.
#pragma once

#include "nuvec/array.h"

namespace nuvec::cpu {

/// Enqueues arr's primitive on its stream; the task keeps the inputs and outputs alive.
void eval(array& arr);

/// Throws (once) the first error a CPU kernel raised since the last call, if any.
void rethrow_kernel_error();

} // namespace nuvec::cpu
