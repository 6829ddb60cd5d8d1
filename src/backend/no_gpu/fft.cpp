// nuvec: the eval_gpu stub of the FFT family in CPU-only builds (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "primitives/fft.h"

namespace nuvec {

NUVEC_NO_GPU(FFT)

} // namespace nuvec
