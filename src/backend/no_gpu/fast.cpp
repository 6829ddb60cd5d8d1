// nuvec: eval_gpu of the last-axis fused primitives (Softmax, LogSumExp) in a CPU-only
// build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "fast/logsumexp.h"
#include "fast/softmax.h"

namespace nuvec {

NUVEC_NO_GPU(Softmax)
NUVEC_NO_GPU(LogSumExp)

} // namespace nuvec
