// nuvec: the floating-point matrix product every GPU family shares (Matmul, AddMM and the
// im2col convolution): one strided-batched cuBLASLt call in row-major terms, plus the layout
// test that decides whether a strided matrix can be read in place. Implemented in gemm.cpp.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nuvec/dtype.h"

namespace nuvec::cu {

/// How a rows x cols matrix with element strides (rs, cs) is read without a copy: element
/// (i, j) at i * ld + j (row-major) or at i + j * ld (col_major). `in_place` is false when
/// neither fits (the caller copies to row-contiguous form first). Strides of size-1 axes never
/// move the pointer, so they are replaced by whatever makes the layout valid (the rule of the
/// CPU's BLAS path, src/backend/cpu/matmul.cpp); negative strides never fit.
struct MatrixLayout {
  bool in_place;
  bool col_major;
  int64_t ld;
};

/// The in-place layout of a rows x cols matrix with strides (rs, cs), if any (see above).
inline MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  int64_t row_rs = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
  int64_t row_cs = cols <= 1 ? 1 : cs;
  if (row_cs == 1 && row_rs >= std::max<int64_t>(cols, 1)) return {true, false, row_rs};
  int64_t col_rs = rows <= 1 ? 1 : rs;
  int64_t col_cs = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
  if (col_rs == 1 && col_cs >= std::max<int64_t>(rows, 1)) return {true, true, col_cs};
  return {false, false, 0};
}

/// One input operand of gemm: batch b's element (i, j) sits at
/// ptr + b * batch_stride + (col_major ? i + j * ld : i * ld + j), counted in elements.
struct GemmInput {
  const void* ptr;
  bool col_major;
  int64_t ld;
  int64_t batch_stride; // >= 0; 0 repeats the same matrix for every batch
};

/// The output of gemm: batch b's element (i, j) at ptr + b * batch_stride + i * ld + j
/// (row-major). `c`, when not null, is read with this same layout (it may equal ptr).
struct GemmOutput {
  void* ptr;
  const void* c;
  int64_t ld;
  int64_t batch_stride;
};

/// For every batch b < batch: D[b] (m x n) = alpha * A[b] (m x k) @ B[b] (k x n)
/// (+ beta * C[b] when out.c is set), on cu::stream(), through cuBLASLt.
/// dtype: float16 / bfloat16 (float32 accumulation and scaling, one rounding to the half
/// type at the end, as the CPU's widened sgemm), float32 (true float32 unless NUVEC_TF32=1
/// allows TF32 tensor cores), float64, complex64. Requires m, n, k, batch >= 1.
/// Descriptors and the heuristic's algorithm are cached per problem, so repeated shapes do
/// not query the heuristic again. Returns false (launching nothing) when cuBLASLt has no
/// algorithm for this layout/alignment, so that the caller can copy the operands and retry;
/// throws std::runtime_error on cuBLASLt errors and std::invalid_argument for other dtypes.
bool gemm(
    Dtype dtype,
    int64_t m,
    int64_t n,
    int64_t k,
    int64_t batch,
    const GemmInput& a,
    const GemmInput& b,
    const GemmOutput& out,
    double alpha,
    double beta);

} // namespace nuvec::cu
