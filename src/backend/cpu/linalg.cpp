// nuvec: CPU kernel of the Linalg family. Every batch matrix is copied (row-major) into the
// output buffer or a scratch vector and handed to LAPACKE's row-major interface, so LAPACK
// never writes the caller's arrays. LAPACK's info > 0 becomes an error naming the public op.
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/cpu/copy.h"
#include "core/errors.h"
#include "nuvec/allocator.h"
#include "primitives/linalg.h"

namespace nuvec {

namespace {

// Thin float/double selectors over LAPACKE's row-major entry points. Leading dimensions are
// at least 1 (LAPACKE rejects 0 even for empty matrices; callers skip empty ones anyway).
template <typename T>
constexpr bool is_f32 = std::is_same_v<T, float>;

lapack_int ld(int n) {
  return std::max(n, 1);
}

template <typename T>
lapack_int getrf(int m, int n, T* a, lapack_int* ipiv) {
  if constexpr (is_f32<T>) return LAPACKE_sgetrf(LAPACK_ROW_MAJOR, m, n, a, ld(n), ipiv);
  else return LAPACKE_dgetrf(LAPACK_ROW_MAJOR, m, n, a, ld(n), ipiv);
}
template <typename T>
lapack_int getri(int n, T* a, const lapack_int* ipiv) {
  if constexpr (is_f32<T>) return LAPACKE_sgetri(LAPACK_ROW_MAJOR, n, a, ld(n), ipiv);
  else return LAPACKE_dgetri(LAPACK_ROW_MAJOR, n, a, ld(n), ipiv);
}
template <typename T>
lapack_int trtri(char uplo, int n, T* a) {
  if constexpr (is_f32<T>) return LAPACKE_strtri(LAPACK_ROW_MAJOR, uplo, 'N', n, a, ld(n));
  else return LAPACKE_dtrtri(LAPACK_ROW_MAJOR, uplo, 'N', n, a, ld(n));
}
template <typename T>
lapack_int potrf(char uplo, int n, T* a) {
  if constexpr (is_f32<T>) return LAPACKE_spotrf(LAPACK_ROW_MAJOR, uplo, n, a, ld(n));
  else return LAPACKE_dpotrf(LAPACK_ROW_MAJOR, uplo, n, a, ld(n));
}
template <typename T>
lapack_int geqrf(int m, int n, T* a, T* tau) {
  if constexpr (is_f32<T>) return LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, m, n, a, ld(n), tau);
  else return LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, a, ld(n), tau);
}
template <typename T>
lapack_int orgqr(int m, int n, int k, T* a, const T* tau) {
  if constexpr (is_f32<T>) return LAPACKE_sorgqr(LAPACK_ROW_MAJOR, m, n, k, a, ld(n), tau);
  else return LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, n, k, a, ld(n), tau);
}
template <typename T>
lapack_int gesdd(char jobz, int m, int n, T* a, T* s, T* u, int ldu, T* vt, int ldvt) {
  if constexpr (is_f32<T>) return LAPACKE_sgesdd(LAPACK_ROW_MAJOR, jobz, m, n, a, ld(n), s, u, ldu, vt, ldvt);
  else return LAPACKE_dgesdd(LAPACK_ROW_MAJOR, jobz, m, n, a, ld(n), s, u, ldu, vt, ldvt);
}
template <typename T>
lapack_int syevd(char jobz, char uplo, int n, T* a, T* w) {
  if constexpr (is_f32<T>) return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, jobz, uplo, n, a, ld(n), w);
  else return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, jobz, uplo, n, a, ld(n), w);
}
template <typename T>
lapack_int geev(char jobvr, int n, T* a, T* wr, T* wi, T* vr) {
  if constexpr (is_f32<T>) return LAPACKE_sgeev(LAPACK_ROW_MAJOR, 'N', jobvr, n, a, ld(n), wr, wi, nullptr, 1, vr, ld(n));
  else return LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', jobvr, n, a, ld(n), wr, wi, nullptr, 1, vr, ld(n));
}
template <typename T>
lapack_int gesv(int n, int r, T* a, lapack_int* ipiv, T* b) {
  if constexpr (is_f32<T>) return LAPACKE_sgesv(LAPACK_ROW_MAJOR, n, r, a, ld(n), ipiv, b, ld(r));
  else return LAPACKE_dgesv(LAPACK_ROW_MAJOR, n, r, a, ld(n), ipiv, b, ld(r));
}
template <typename T>
lapack_int trtrs(char uplo, int n, int r, const T* a, T* b) {
  if constexpr (is_f32<T>) return LAPACKE_strtrs(LAPACK_ROW_MAJOR, uplo, 'N', 'N', n, r, a, ld(n), b, ld(r));
  else return LAPACKE_dtrtrs(LAPACK_ROW_MAJOR, uplo, 'N', 'N', n, r, a, ld(n), b, ld(r));
}

// The shape of one problem: batch count and the last two dimensions of the first input.
struct MatrixPlan {
  int64_t batch;
  int m, n;
};

MatrixPlan plan_of(const array& a) {
  int nd = static_cast<int>(a.ndim());
  int64_t batch = 1;
  for (int i = 0; i < nd - 2; ++i) batch *= a.shape(i);
  return {batch, a.shape(-2), a.shape(-1)};
}

template <typename T>
T* alloc(array& out) {
  out.set_data(allocator::malloc(std::max<size_t>(out.nbytes(), 1)));
  // raw_data: data() would evaluate, and this array is the one being evaluated.
  return static_cast<T*>(out.raw_data());
}

[[noreturn]] void fail(LinalgOp op, const array& a, int64_t b, const char* must, const char* got) {
  throw_invalid_argument(
      linalg_op_name(op), "matrix must be ", must, "; got ", got, " at batch index ", b,
      " of an input of shape ", a.shape(), ".");
}

// Zeroes the triangle LAPACK left untouched (strictly below for upper, above for lower).
template <typename T>
void zero_other_triangle(T* x, int n, bool upper) {
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (upper ? j < i : j > i) x[static_cast<size_t>(i) * n + j] = T(0);
    }
  }
}

template <typename T>
void run(const Linalg& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
  const LinalgOp op = p.op();
  const array& a_in = inputs[0];
  array a_copy = cpu::contiguous_copy(a_in);
  const T* a = static_cast<const T*>(a_copy.raw_data());
  auto [batch, m, n] = plan_of(a_in);
  const int k = std::min(m, n);
  const size_t mn = static_cast<size_t>(m) * n;
  const char uplo = p.upper() ? 'U' : 'L';
  switch (op) {
    case LinalgOp::Inverse: {
      T* x = alloc<T>(outputs[0]);
      std::vector<lapack_int> ipiv(std::max(n, 1));
      for (int64_t b = 0; b < batch && n > 0; ++b) {
        T* xb = x + b * mn;
        std::copy(a + b * mn, a + (b + 1) * mn, xb);
        if (getrf<T>(n, n, xb, ipiv.data()) > 0) fail(op, a_in, b, "non-singular", "a singular matrix");
        getri<T>(n, xb, ipiv.data());
      }
      return;
    }
    case LinalgOp::TriInv: {
      T* x = alloc<T>(outputs[0]);
      for (int64_t b = 0; b < batch && n > 0; ++b) {
        T* xb = x + b * mn;
        std::copy(a + b * mn, a + (b + 1) * mn, xb);
        zero_other_triangle(xb, n, p.upper());
        if (trtri<T>(uplo, n, xb) > 0) fail(op, a_in, b, "non-singular", "a zero on the diagonal");
      }
      return;
    }
    case LinalgOp::Cholesky: {
      T* x = alloc<T>(outputs[0]);
      for (int64_t b = 0; b < batch && n > 0; ++b) {
        T* xb = x + b * mn;
        std::copy(a + b * mn, a + (b + 1) * mn, xb);
        if (potrf<T>(uplo, n, xb) > 0) {
          fail(op, a_in, b, "symmetric positive definite", "a matrix that is not");
        }
        zero_other_triangle(xb, n, p.upper());
      }
      return;
    }
    case LinalgOp::QRF: {
      T* q = alloc<T>(outputs[0]);
      T* r = alloc<T>(outputs[1]);
      std::vector<T> work(mn), tau(std::max(k, 1));
      for (int64_t b = 0; b < batch && k > 0; ++b) {
        std::copy(a + b * mn, a + (b + 1) * mn, work.begin());
        geqrf<T>(m, n, work.data(), tau.data());
        T* rb = r + b * static_cast<size_t>(k) * n;
        T* qb = q + b * static_cast<size_t>(m) * k;
        for (int i = 0; i < k; ++i) {
          for (int j = 0; j < n; ++j) rb[static_cast<size_t>(i) * n + j] = j >= i ? work[i * static_cast<size_t>(n) + j] : T(0);
        }
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < k; ++j) qb[static_cast<size_t>(i) * k + j] = work[i * static_cast<size_t>(n) + j];
        }
        orgqr<T>(m, k, k, qb, tau.data());
      }
      return;
    }
    case LinalgOp::SVD: {
      const bool uv = p.compute();
      T* u = uv ? alloc<T>(outputs[0]) : nullptr;
      T* s = alloc<T>(outputs[uv ? 1 : 0]);
      T* vt = uv ? alloc<T>(outputs[2]) : nullptr;
      std::vector<T> work(std::max<size_t>(mn, 1));
      const size_t mm = static_cast<size_t>(m) * m, nn = static_cast<size_t>(n) * n;
      for (int64_t b = 0; b < batch; ++b) {
        if (k == 0) {
          // No singular values: U and Vt are identities (any orthogonal matrix would do).
          if (uv) {
            std::fill(u + b * mm, u + (b + 1) * mm, T(0));
            std::fill(vt + b * nn, vt + (b + 1) * nn, T(0));
            for (int i = 0; i < m; ++i) u[b * mm + i * static_cast<size_t>(m) + i] = T(1);
            for (int i = 0; i < n; ++i) vt[b * nn + i * static_cast<size_t>(n) + i] = T(1);
          }
          continue;
        }
        std::copy(a + b * mn, a + (b + 1) * mn, work.begin());
        lapack_int info = uv
            ? gesdd<T>('A', m, n, work.data(), s + b * k, u + b * mm, ld(m), vt + b * nn, ld(n))
            : gesdd<T>('N', m, n, work.data(), s + b * k, nullptr, ld(m), nullptr, ld(n));
        if (info > 0) fail(op, a_in, b, "decomposable", "no convergence of the SVD iteration");
      }
      return;
    }
    case LinalgOp::Eigh: {
      const bool vec = p.compute();
      T* w = alloc<T>(outputs[0]);
      T* v = vec ? alloc<T>(outputs[1]) : nullptr;
      std::vector<T> scratch(vec ? 0 : std::max<size_t>(mn, 1));
      for (int64_t b = 0; b < batch && n > 0; ++b) {
        T* xb = vec ? v + b * mn : scratch.data();
        std::copy(a + b * mn, a + (b + 1) * mn, xb);
        if (syevd<T>(vec ? 'V' : 'N', uplo, n, xb, w + b * n) > 0) {
          fail(op, a_in, b, "diagonalizable", "no convergence of the eigensolver");
        }
      }
      return;
    }
    case LinalgOp::Eig: {
      // geev returns real parts wr, imaginary parts wi, and real eigenvector columns: for a
      // conjugate pair (wi[j] > 0, wi[j + 1] = -wi[j]) columns j and j + 1 hold the real and
      // imaginary parts of v_j, and v_{j+1} = conj(v_j).
      const bool vec = p.compute();
      complex64_t* w = alloc<complex64_t>(outputs[0]);
      complex64_t* v = vec ? alloc<complex64_t>(outputs[1]) : nullptr;
      std::vector<T> work(std::max<size_t>(mn, 1)), vr(vec ? std::max<size_t>(mn, 1) : 1);
      std::vector<T> wr(std::max(n, 1)), wi(std::max(n, 1));
      for (int64_t b = 0; b < batch && n > 0; ++b) {
        std::copy(a + b * mn, a + (b + 1) * mn, work.begin());
        if (geev<T>(vec ? 'V' : 'N', n, work.data(), wr.data(), wi.data(), vr.data()) > 0) {
          fail(op, a_in, b, "diagonalizable", "no convergence of the QR algorithm");
        }
        for (int j = 0; j < n; ++j) {
          w[b * n + j] = complex64_t(static_cast<float>(wr[j]), static_cast<float>(wi[j]));
        }
        if (!vec) continue;
        complex64_t* vb = v + b * mn;
        for (int j = 0; j < n; ++j) {
          const bool pair = wi[j] != T(0) && j + 1 < n;
          for (int i = 0; i < n; ++i) {
            const size_t r = static_cast<size_t>(i) * n;
            if (pair) {
              float re = static_cast<float>(vr[r + j]), im = static_cast<float>(vr[r + j + 1]);
              vb[r + j] = complex64_t(re, im);
              vb[r + j + 1] = complex64_t(re, -im);
            } else {
              vb[r + j] = complex64_t(static_cast<float>(vr[r + j]), 0.0f);
            }
          }
          if (pair) ++j;
        }
      }
      return;
    }
    case LinalgOp::LUF: {
      T* lu = alloc<T>(outputs[0]);
      uint32_t* piv = alloc<uint32_t>(outputs[1]);
      uint32_t* rows = alloc<uint32_t>(outputs[2]);
      std::vector<lapack_int> ipiv(std::max(k, 1));
      std::vector<uint32_t> perm(m);
      for (int64_t b = 0; b < batch; ++b) {
        T* xb = lu + b * mn;
        std::copy(a + b * mn, a + (b + 1) * mn, xb);
        // A zero pivot (info > 0) is a valid factorization of a singular matrix.
        if (k > 0) getrf<T>(m, n, xb, ipiv.data());
        std::iota(perm.begin(), perm.end(), 0u);
        for (int i = 0; i < k; ++i) {
          piv[b * k + i] = static_cast<uint32_t>(ipiv[i] - 1);
          std::swap(perm[i], perm[ipiv[i] - 1]);
        }
        // Row i of L U is row perm[i] of a, so a = (L U)[rows] with rows the inverse of perm.
        for (int i = 0; i < m; ++i) rows[b * m + perm[i]] = static_cast<uint32_t>(i);
      }
      return;
    }
    case LinalgOp::Solve:
    case LinalgOp::SolveTriangular: {
      array b_copy = cpu::contiguous_copy(inputs[1]);
      const T* rhs = static_cast<const T*>(b_copy.raw_data());
      const int r = inputs[1].shape(-1);
      const size_t nr = static_cast<size_t>(n) * r;
      T* x = alloc<T>(outputs[0]);
      std::vector<T> lu(std::max<size_t>(mn, 1));
      std::vector<lapack_int> ipiv(std::max(n, 1));
      for (int64_t b = 0; b < batch && n > 0 && r > 0; ++b) {
        T* xb = x + b * nr;
        std::copy(rhs + b * nr, rhs + (b + 1) * nr, xb);
        lapack_int info;
        if (op == LinalgOp::Solve) {
          std::copy(a + b * mn, a + (b + 1) * mn, lu.begin());
          info = gesv<T>(n, r, lu.data(), ipiv.data(), xb);
        } else {
          info = trtrs<T>(uplo, n, r, a + b * mn, xb);
        }
        if (info > 0) fail(op, a_in, b, "non-singular", "a singular matrix");
      }
      return;
    }
    case LinalgOp::SlogDet: {
      T* sign = alloc<T>(outputs[0]);
      T* logabs = alloc<T>(outputs[1]);
      std::vector<T> work(std::max<size_t>(mn, 1));
      std::vector<lapack_int> ipiv(std::max(n, 1));
      for (int64_t b = 0; b < batch; ++b) {
        double sg = 1.0, la = 0.0;
        if (n > 0) {
          std::copy(a + b * mn, a + (b + 1) * mn, work.begin());
          if (getrf<T>(n, n, work.data(), ipiv.data()) > 0) {
            sg = 0.0;
            la = -std::numeric_limits<double>::infinity();
          } else {
            for (int i = 0; i < n; ++i) {
              double d = work[static_cast<size_t>(i) * n + i];
              if (d < 0) sg = -sg;
              if (ipiv[i] != i + 1) sg = -sg;
              la += std::log(std::abs(d));
            }
          }
        }
        sign[b] = static_cast<T>(sg);
        logabs[b] = static_cast<T>(la);
      }
      return;
    }
  }
}

} // namespace

void Linalg::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  Dtype dt = inputs[0].dtype();
  if (dt == float32) {
    run<float>(*this, inputs, outputs);
  } else if (dt == float64) {
    run<double>(*this, inputs, outputs);
  } else {
    throw_invalid_argument(
        linalg_op_name(op_), "input dtype must be float32 or float64; got ", dt, ".");
  }
}

} // namespace nuvec
