// nuvec: in-place scaling of a dense device buffer by a real factor, for the host-side GPU
// families (FFT's 1/N of inverse transforms, AddMM's beta * c of empty products).
// Implemented in scale.cu.
#pragma once

#include <cstdint>

#include "nuvec/dtype.h"

namespace nuvec::cu {

/// data[i] = data[i] * factor for i < count, on cu::stream(). dtype: float16 / bfloat16
/// (multiplied in float32 with the factor rounded to float32, then rounded back, as the CPU's
/// widened paths do), float32 (factor rounded to float32 first, as the CPU's float products
/// do), float64, complex64 (both parts scaled by the float32 factor). Throws
/// std::invalid_argument for other dtypes. No launch when count is 0.
void scale_in_place(void* data, Dtype dtype, int64_t count, double factor);

} // namespace nuvec::cu
