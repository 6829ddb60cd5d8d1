// nuvec: hands a node to its CPU stream's worker.
#pragma once

#include "nuvec/array.h"

namespace nuvec::cpu {

/// Enqueues arr's primitive on its stream; the task keeps the inputs and outputs alive.
void eval(array& arr);

} // namespace nuvec::cpu
