// nuvec: primitive families that run on the host even on a GPU stream, as MLX runs them on
// the CPU: factorizations through LAPACK and the covariance square root behind
// multivariate_normal (the collectives over MPI too, chosen per group in
// src/backend/cuda/distributed/primitives.cpp). cu::eval_on_host moves data across
// transparently.
#include "backend/cuda/runtime/runtime.h"
#include "primitives/linalg.h"
#include "primitives/random.h"

namespace nuvec {

NUVEC_GPU_ON_HOST(Linalg)
NUVEC_GPU_ON_HOST(CovarianceSqrt)

} // namespace nuvec
