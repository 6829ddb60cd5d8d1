// nuvec: eval_gpu of the Softmax primitive in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "primitives/softmax.h"

namespace nuvec {

NUVEC_NO_GPU(Softmax)

} // namespace nuvec
