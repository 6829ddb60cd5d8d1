// nuvec: the matrix product as both backends state it: D[b] = alpha * A[b] @ B[b]
// (+ beta * C[b]) over a uniformly strided batch, each operand read in place as row- or
// column-major with a leading dimension. The CPU runs it through OpenBLAS
// (backend/cpu/blas.h: Matmul, AddMM, Convolution), the GPU through cuBLASLt
// (backend/cuda/gemm.h: the same families); matrix_layout is the one rule deciding whether a
// strided matrix can be read without a copy.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nuvec/dtype.h"

namespace nuvec {

/// How a rows x cols matrix with element strides (rs, cs) is read without a copy: element
/// (i, j) at i * ld + j (row-major) or at i + j * ld (col_major). `in_place` is false when
/// neither fits (the caller copies to row-contiguous form first). Strides of size-1 axes
/// never move the pointer, so they are replaced by whatever makes the layout valid; negative
/// strides never fit.
struct MatrixLayout {
  bool in_place;
  bool col_major;
  int64_t ld;
};

/// The in-place layout of a rows x cols matrix with strides (rs, cs), if any (see above).
inline MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const int64_t row_rs = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
  const int64_t row_cs = cols <= 1 ? 1 : cs;
  if (row_cs == 1 && row_rs >= std::max<int64_t>(cols, 1)) return {true, false, row_rs};
  const int64_t col_rs = rows <= 1 ? 1 : rs;
  const int64_t col_cs = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
  if (col_rs == 1 && col_cs >= std::max<int64_t>(rows, 1)) return {true, true, col_cs};
  return {false, false, 0};
}

/// One input operand: batch b's element (i, j) sits at
/// ptr + b * batch_stride + (col_major ? i + j * ld : i * ld + j), counted in elements.
struct GemmOperand {
  const void* ptr;
  bool col_major;
  int64_t ld;
  int64_t batch_stride; // >= 0; 0 repeats the same matrix for every batch
};

/// The output: batch b's element (i, j) at ptr + b * batch_stride + i * ld + j (row-major).
/// `c`, when not null, is read with this same layout (it may equal ptr).
struct GemmOutput {
  void* ptr;
  const void* c;
  int64_t ld;
  int64_t batch_stride;
};

/// For every batch b < batch: out[b] (m x n) = alpha * a[b] (m x k) @ b[b] (k x n)
/// (+ beta * c[b] when out.c is set and beta != 0; c is then never read otherwise, so NaNs
/// in it vanish, as BLAS does). m, n, k, batch >= 1.
struct GemmProblem {
  Dtype dtype;
  int64_t m, n, k, batch;
  GemmOperand a, b;
  GemmOutput out;
  double alpha = 1.0;
  double beta = 0.0;
};

} // namespace nuvec
