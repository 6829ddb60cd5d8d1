// nuvec: eval_gpu of the collective primitives in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "distributed/primitives.h"

namespace nuvec {

NUVEC_NO_GPU(distributed::AllReduce)
NUVEC_NO_GPU(distributed::AllGather)
NUVEC_NO_GPU(distributed::ReduceScatter)
NUVEC_NO_GPU(distributed::Send)
NUVEC_NO_GPU(distributed::Recv)

} // namespace nuvec
