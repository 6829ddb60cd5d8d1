// nuvec: eval_gpu of the quantized and gathered products in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "quantized/quantized.h"

namespace nuvec {

NUVEC_NO_GPU(QuantizedMatmul)
NUVEC_NO_GPU(GatherQmm)
NUVEC_NO_GPU(GatherMm)
NUVEC_NO_GPU(QQMatmul)

} // namespace nuvec
