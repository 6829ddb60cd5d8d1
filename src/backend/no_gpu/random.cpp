// nuvec: eval_gpu of the nuvec::random primitives in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "primitives/random.h"

namespace nuvec {

NUVEC_NO_GPU(RandomBits)
NUVEC_NO_GPU(CovarianceSqrt)

} // namespace nuvec
