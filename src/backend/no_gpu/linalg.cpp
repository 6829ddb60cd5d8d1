// nuvec: eval_gpu of the Linalg family in a CPU-only build (see no_gpu.h); LAPACK runs on the
// CPU stream only, as in MLX.
#include "backend/no_gpu/no_gpu.h"
#include "primitives/linalg.h"

namespace nuvec {

NUVEC_NO_GPU(Linalg)

} // namespace nuvec
