// nuvec: the matrix-vector product of decode steps, y = x Wᵀ for a few rows x (M <= 8) and
// a weight W stored row-major [N, K] (a Linear layer's weight, which matmul sees as the
// transposed view Wᵀ [K, N]). Implemented in gemv.cu; Matmul (matmul.cpp) tries it before
// cuBLASLt.
#pragma once

#include "nuvec/array.h"

namespace nuvec::cu {

/// Most rows of x the GEMV kernel takes: beyond, each weight element feeds more than 8
/// float32 FMAs and cuBLASLt's tensor-core kernels win.
inline constexpr int64_t kGemvMaxRows = 8;

/// out = a @ b through the GEMV kernel when it applies, else false (nothing launched):
/// float16, bfloat16 or float32; a row-contiguous with at most kGemvMaxRows rows in all
/// (its batch axes folded into the rows); b one matrix (batch axes of size 1 or broadcast)
/// whose [K, N] is the transpose of a row-major [N, K] with rows `ld >= K` apart; K a
/// multiple of the 16-byte vector (8 halves, 4 floats) and every pointer and row start
/// 16-byte aligned. out is allocated row-contiguous (po). Float32 accumulation, one rounding
/// to the dtype at the end (as cuBLASLt's half-type products and the CPU's widened sgemm).
bool gemv(const array& a, const array& b, array& out, void* po);

} // namespace nuvec::cu
