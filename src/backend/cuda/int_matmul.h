// nuvec: Matmul of integer and bool arrays on the GPU (cuBLASLt has no wrap-around integer
// products). Implemented in int_matmul.cu.
#pragma once

#include "nuvec/array.h"

namespace nuvec::cu {

/// out = a @ b for the integer dtypes and bool, with the CPU's semantics
/// (src/backend/cpu/matmul.cpp): sums of products modulo 2^64, truncated to the dtype
/// (NumPy's wrap-around); bool is "any a && b". a: (..., m, k), b: (..., k, n), out:
/// (..., m, n), all of out's ndim (batches already broadcast, any strides, including 0 and
/// negative); out gets a fresh row-contiguous device buffer. Throws std::invalid_argument for
/// non-integer dtypes.
void integer_matmul(const array& a, const array& b, array& out);

} // namespace nuvec::cu
