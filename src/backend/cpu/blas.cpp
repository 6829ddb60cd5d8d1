// nuvec: blas_gemm (blas.h).
#include "backend/cpu/blas.h"

#include <cblas.h>

#include <climits>
#include <stdexcept>

#include "core/errors.h"

namespace nuvec::cpu {

bool blas_fits(const MatrixLayout& layout) {
  return layout.in_place && layout.ld <= INT_MAX;
}

void blas_gemm(const GemmProblem& p) {
  const auto opa = p.a.col_major ? CblasTrans : CblasNoTrans;
  const auto opb = p.b.col_major ? CblasTrans : CblasNoTrans;
  const blasint m = static_cast<blasint>(p.m), n = static_cast<blasint>(p.n), k = static_cast<blasint>(p.k);
  const blasint lda = static_cast<blasint>(p.a.ld), ldb = static_cast<blasint>(p.b.ld);
  const blasint ldc = static_cast<blasint>(p.out.ld);
  const size_t es = size_of(p.dtype);
  const bool use_c = p.out.c != nullptr && p.beta != 0.0;
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const char* a = static_cast<const char*>(p.a.ptr) + bi * p.a.batch_stride * es;
    const char* b = static_cast<const char*>(p.b.ptr) + bi * p.b.batch_stride * es;
    char* c = static_cast<char*>(p.out.ptr) + bi * p.out.batch_stride * es;
    if (use_c && p.out.c != p.out.ptr) {
      throw std::invalid_argument("[blas_gemm] c must be the output buffer on the CPU.");
    }
    const double beta = use_c ? p.beta : 0.0;
    switch (p.dtype) {
      case Dtype::Val::float32:
        cblas_sgemm(
            CblasRowMajor, opa, opb, m, n, k, static_cast<float>(p.alpha), reinterpret_cast<const float*>(a),
            lda, reinterpret_cast<const float*>(b), ldb, static_cast<float>(beta), reinterpret_cast<float*>(c), ldc);
        break;
      case Dtype::Val::float64:
        cblas_dgemm(
            CblasRowMajor, opa, opb, m, n, k, p.alpha, reinterpret_cast<const double*>(a), lda,
            reinterpret_cast<const double*>(b), ldb, beta, reinterpret_cast<double*>(c), ldc);
        break;
      case Dtype::Val::complex64: {
        const float al[2] = {static_cast<float>(p.alpha), 0.0f}, be[2] = {static_cast<float>(beta), 0.0f};
        cblas_cgemm(
            CblasRowMajor, opa, opb, m, n, k, al, reinterpret_cast<const float*>(a), lda,
            reinterpret_cast<const float*>(b), ldb, be, reinterpret_cast<float*>(c), ldc);
        break;
      }
      default:
        throw_invalid_argument("blas_gemm", "dtype must be float32, float64 or complex64; got ", p.dtype, ".");
    }
  }
}

} // namespace nuvec::cpu
