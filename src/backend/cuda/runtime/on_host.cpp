// nuvec: primitive families that run on the host even on a GPU stream, as MLX runs them on
// the CPU: factorizations through LAPACK, the covariance square root behind
// multivariate_normal, and the collectives (MPI on host buffers until the NCCL backend
// lands). cu::eval_on_host moves data across transparently.
#include "backend/cuda/runtime/runtime.h"
#include "distributed/primitives.h"
#include "primitives/linalg.h"
#include "primitives/random.h"

namespace nuvec {

NUVEC_GPU_ON_HOST(Linalg)
NUVEC_GPU_ON_HOST(CovarianceSqrt)
NUVEC_GPU_ON_HOST(distributed::AllReduce)
NUVEC_GPU_ON_HOST(distributed::AllGather)
NUVEC_GPU_ON_HOST(distributed::ReduceScatter)
NUVEC_GPU_ON_HOST(distributed::Send)
NUVEC_GPU_ON_HOST(distributed::Recv)

} // namespace nuvec
