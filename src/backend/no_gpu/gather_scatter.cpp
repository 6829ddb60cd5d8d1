// nuvec: eval_gpu of the general indexing families in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "primitives/gather_scatter.h"

namespace nuvec {

NUVEC_NO_GPU(Gather)
NUVEC_NO_GPU(Scatter)
NUVEC_NO_GPU(MaskedRank)

} // namespace nuvec
