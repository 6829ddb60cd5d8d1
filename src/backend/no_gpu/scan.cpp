// nuvec: eval_gpu of the scan and selection families in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "primitives/scan.h"
#include "primitives/partition.h"

namespace nuvec {

NUVEC_NO_GPU(Scan)
NUVEC_NO_GPU(Partition)
NUVEC_NO_GPU(ArgPartition)

} // namespace nuvec
