// nuvec: the CPU's matrix product (backend/common/gemm_problem.h) through OpenBLAS:
// cblas_sgemm, cblas_dgemm or cblas_cgemm per batch, reading row- or column-major operands
// in place (NoTrans / Trans). Implemented in blas.cpp.
#pragma once

#include <type_traits>

#include "backend/common/gemm_problem.h"
#include "nuvec/types/complex.h"

namespace nuvec::cpu {

/// Runs p on the calling thread (OpenBLAS threads it). dtype float32, float64 or complex64
/// (the callers widen half types to float32 around it); every ld must fit BLAS's int
/// (blas_fits). Throws std::invalid_argument for other dtypes.
void blas_gemm(const GemmProblem& p);

/// The dtype blas_gemm runs for element type T (float, double or complex64_t).
template <typename T>
constexpr Dtype blas_dtype() {
  if constexpr (std::is_same_v<T, float>) return float32;
  else if constexpr (std::is_same_v<T, double>) return float64;
  else {
    static_assert(std::is_same_v<T, complex64_t>, "blas_gemm runs float, double or complex64_t");
    return complex64;
  }
}

/// Whether a layout's leading dimension fits BLAS's int (else the caller packs a copy).
bool blas_fits(const MatrixLayout& layout);

} // namespace nuvec::cpu
