// nuvec: the floating-point matrix product every GPU family shares (Matmul, AddMM and the
// im2col convolution): the shared GemmProblem (backend/common/gemm_problem.h) as one
// strided-batched cuBLASLt call in row-major terms. Implemented in gemm.cpp.
#pragma once

#include "backend/common/gemm_problem.h"

namespace nuvec::cu {

/// Runs p (backend/common/gemm_problem.h) on cu::stream() through cuBLASLt.
/// dtype: float16 / bfloat16 (float32 accumulation and scaling, one rounding to the half
/// type at the end, as the CPU's widened sgemm), float32 (true float32 unless NUVEC_TF32=1
/// allows TF32 tensor cores), float64, complex64. Requires m, n, k, batch >= 1.
/// Descriptors and the heuristic's algorithm are cached per problem, so repeated shapes do
/// not query the heuristic again. Returns false (launching nothing) when cuBLASLt has no
/// algorithm for this layout/alignment, so that the caller can copy the operands and retry;
/// throws std::runtime_error on cuBLASLt errors and std::invalid_argument for other dtypes.
bool gemm(const GemmProblem& p);

} // namespace nuvec::cu
