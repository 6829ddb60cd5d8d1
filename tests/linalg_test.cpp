// nuvec tests: nuvec::linalg against float64 references written here (reconstructions,
// Jacobi eigenvalues, Gaussian elimination, explicit norm formulas), on fresh random inputs;
// derivatives and batching through tests/checker.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "checker.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

using Mat = std::vector<double>; // row-major
constexpr double kInf = std::numeric_limits<double>::infinity();

Mat mm(const Mat& a, const Mat& b, int m, int k, int n) {
  Mat c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      for (int j = 0; j < n; ++j) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

Mat tr(const Mat& a, int m, int n) {
  Mat t(a.size());
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) t[j * m + i] = a[i * n + j];
  return t;
}

Mat eye_ref(int n) {
  Mat e(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) e[i * n + i] = 1.0;
  return e;
}

// Matrix b of a batch stored flat in v.
Mat part(const std::vector<double>& v, int b, size_t size) {
  return Mat(v.begin() + b * size, v.begin() + (b + 1) * size);
}

void expect_mat_near(const Mat& got, const Mat& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations, ascending.
std::vector<double> jacobi_eigvals(Mat a, int n) {
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) off += a[i * n + j] * a[i * n + j];
    if (off < 1e-26) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        double apq = a[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) { // columns p, q
          double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) { // rows p, q
          double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
      }
    }
  }
  std::vector<double> w(n);
  for (int i = 0; i < n; ++i) w[i] = a[i * n + i];
  std::sort(w.begin(), w.end());
  return w;
}

// Singular values (descending) as square roots of the eigenvalues of the smaller Gram matrix.
std::vector<double> singular_values_ref(const Mat& a, int m, int n) {
  int k = std::min(m, n);
  Mat g = m >= n ? mm(tr(a, m, n), a, n, m, n) : mm(a, tr(a, m, n), m, n, m);
  auto w = jacobi_eigvals(g, k);
  std::vector<double> s;
  for (int i = k - 1; i >= 0; --i) s.push_back(std::sqrt(std::max(w[i], 0.0)));
  return s;
}

// Determinant by Gaussian elimination with partial pivoting.
double det_ref(Mat a, int n) {
  double d = 1;
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
    if (a[p * n + c] == 0) return 0;
    if (p != c) {
      for (int j = 0; j < n; ++j) std::swap(a[p * n + j], a[c * n + j]);
      d = -d;
    }
    d *= a[c * n + c];
    for (int r = c + 1; r < n; ++r) {
      double f = a[r * n + c] / a[c * n + c];
      for (int j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
    }
  }
  return d;
}

// Well-conditioned square matrices: randn + n I.
array well_conditioned(const Shape& shape, Dtype dt = float64) {
  int n = shape.back();
  return astype(add(randn(shape), multiply(eye(n, float64), array(static_cast<double>(n)))), dt);
}

// Symmetric positive definite: X X^T + n I.
array spd(const Shape& shape, Dtype dt = float64) {
  int n = shape.back();
  array x = randn(shape);
  return astype(add(matmul(x, swapaxes(x, -1, -2)), multiply(eye(n, float64), array(static_cast<double>(n)))), dt);
}

array sym_of(const array& x) {
  return multiply(add(x, swapaxes(x, -1, -2)), array(0.5, x.dtype()));
}

// An eval-time failure (kernel errors are rethrown by eval) whose message names op.
template <typename F>
void expect_eval_error_naming(F&& f, const std::string& op) {
  try {
    array r = f();
    eval(r);
    ADD_FAILURE() << "expected an error naming " << op;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// Values

TEST(Linalg, InvBatchedAndFloat32) {
  for (Dtype dt : {float64, float32}) {
    array a = well_conditioned({2, 3, 4, 4}, dt);
    auto before = to_vector(a);
    array x = linalg::inv(a);
    ASSERT_EQ(x.shape(), a.shape());
    ASSERT_EQ(x.dtype(), dt);
    auto av = to_vector(a), xv = to_vector(x);
    double tol = dt == float64 ? 1e-10 : 1e-4;
    for (int b = 0; b < 6; ++b) {
      expect_mat_near(mm(part(av, b, 16), part(xv, b, 16), 4, 4, 4), eye_ref(4), tol, "A inv(A)");
    }
    expect_mat_near(to_vector(a), before, 0, "input unchanged");
  }
  // A transposed (non-contiguous) view.
  array a = well_conditioned({5, 5});
  array at = transpose(a);
  auto x = to_vector(linalg::inv(at));
  expect_mat_near(mm(to_vector(at), x, 5, 5, 5), eye_ref(5), 1e-10, "transposed view");
}

TEST(Linalg, SolveMatrixAndVectorRhsWithBroadcast) {
  array a = well_conditioned({3, 4, 4});
  array b = randn({3, 4, 2});
  array x = linalg::solve(a, b);
  ASSERT_EQ(x.shape(), Shape({3, 4, 2}));
  auto av = to_vector(a), bv = to_vector(b), xv = to_vector(x);
  for (int i = 0; i < 3; ++i) expect_mat_near(mm(part(av, i, 16), part(xv, i, 8), 4, 4, 2), part(bv, i, 8), 1e-10, "A x = b");
  // Vector rhs broadcast over a's batch.
  array v = randn({4});
  array y = linalg::solve(a, v);
  ASSERT_EQ(y.shape(), Shape({3, 4}));
  auto yv = to_vector(y), vv = to_vector(v);
  for (int i = 0; i < 3; ++i) expect_mat_near(mm(part(av, i, 16), part(yv, i, 4), 4, 4, 1), vv, 1e-10, "A y = v");
  // float32 with an integer rhs promotes to float32.
  array y32 = linalg::solve(astype(a, float32), astype(randint({3, 4, 1}, -3, 3), int32));
  EXPECT_EQ(y32.dtype(), float32);
}

TEST(Linalg, SolveTriangularLowerAndUpper) {
  for (bool upper : {false, true}) {
    array a = well_conditioned({2, 4, 4});
    array b = randn({2, 4, 3});
    array x = linalg::solve_triangular(a, b, upper);
    array t = upper ? triu(a) : tril(a);
    auto tv = to_vector(t), bv = to_vector(b), xv = to_vector(x);
    for (int i = 0; i < 2; ++i) expect_mat_near(mm(part(tv, i, 16), part(xv, i, 12), 4, 4, 3), part(bv, i, 12), 1e-10, "tri(A) x = b");
  }
}

TEST(Linalg, CholeskyLowerAndUpper) {
  array a = spd({3, 5, 5});
  auto av = to_vector(a);
  for (bool upper : {false, true}) {
    array c = linalg::cholesky(a, upper);
    auto cv = to_vector(c);
    for (int b = 0; b < 3; ++b) {
      Mat f = part(cv, b, 25);
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 5; ++j)
          if (upper ? j < i : j > i) EXPECT_EQ(f[i * 5 + j], 0.0);
      Mat rec = upper ? mm(tr(f, 5, 5), f, 5, 5, 5) : mm(f, tr(f, 5, 5), 5, 5, 5);
      expect_mat_near(rec, part(av, b, 25), 1e-10, "L L^T = A");
    }
  }
  array c32 = linalg::cholesky(astype(a, float32));
  EXPECT_EQ(c32.dtype(), float32);
  expect_allclose(c32, linalg::cholesky(a), 1e-4, 1e-4);
}

TEST(Linalg, QrTallSquareWide) {
  for (Shape shape : {Shape{2, 5, 3}, Shape{4, 4}, Shape{3, 5}}) {
    array a = randn(shape);
    auto [q, r] = linalg::qr(a);
    int m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
    int batch = static_cast<int>(a.size() / (m * n));
    auto av = to_vector(a), qv = to_vector(q), rv = to_vector(r);
    for (int b = 0; b < batch; ++b) {
      Mat Q = part(qv, b, m * k), R = part(rv, b, k * n);
      expect_mat_near(mm(Q, R, m, k, n), part(av, b, m * n), 1e-10, "Q R = A");
      expect_mat_near(mm(tr(Q, m, k), Q, k, m, k), eye_ref(k), 1e-10, "Q^T Q = I");
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < i && j < n; ++j) EXPECT_EQ(R[i * n + j], 0.0);
    }
  }
}

TEST(Linalg, SvdReconstructionAndSingularValues) {
  for (Shape shape : {Shape{2, 4, 3}, Shape{3, 5}, Shape{4, 4}}) {
    array a = randn(shape);
    auto usv = linalg::svd(a);
    ASSERT_EQ(usv.size(), 3u);
    int m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
    int batch = static_cast<int>(a.size() / (m * n));
    auto av = to_vector(a), uv = to_vector(usv[0]), sv = to_vector(usv[1]), vv = to_vector(usv[2]);
    auto s_only = to_vector(linalg::svd(a, false)[0]);
    for (int b = 0; b < batch; ++b) {
      Mat U = part(uv, b, m * m), S = part(sv, b, k), Vt = part(vv, b, n * n), A = part(av, b, m * n);
      expect_mat_near(mm(tr(U, m, m), U, m, m, m), eye_ref(m), 1e-10, "U orthogonal");
      expect_mat_near(mm(Vt, tr(Vt, n, n), n, n, n), eye_ref(n), 1e-10, "V orthogonal");
      Mat US(static_cast<size_t>(m) * n, 0.0); // U[:, :k] diag(S) padded to (m, n)
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < k; ++j) US[i * n + j] = U[i * m + j] * S[j];
      expect_mat_near(mm(US, Vt, m, n, n), A, 1e-10, "U S Vt = A");
      expect_mat_near(S, singular_values_ref(A, m, n), 1e-8, "singular values");
      expect_mat_near(part(s_only, b, k), S, 1e-10, "compute_uv = false");
    }
  }
}

TEST(Linalg, EighAndEigvalsh) {
  array a = sym_of(randn({3, 5, 5}));
  auto [w, v] = linalg::eigh(a);
  ASSERT_EQ(w.shape(), Shape({3, 5}));
  auto av = to_vector(a), wv = to_vector(w), vv = to_vector(v);
  auto w2 = to_vector(linalg::eigvalsh(a));
  for (int b = 0; b < 3; ++b) {
    Mat A = part(av, b, 25), V = part(vv, b, 25), W = part(wv, b, 5);
    expect_mat_near(W, jacobi_eigvals(A, 5), 1e-9, "eigenvalues");
    expect_mat_near(mm(tr(V, 5, 5), V, 5, 5, 5), eye_ref(5), 1e-10, "V orthonormal");
    Mat AV = mm(A, V, 5, 5, 5);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) EXPECT_NEAR(AV[i * 5 + j], W[j] * V[i * 5 + j], 1e-9);
    expect_mat_near(part(w2, b, 5), W, 1e-10, "eigvalsh");
  }
  // UPLO: only the named triangle is read.
  array junk = add(triu(a), tril(randn({3, 5, 5}), -1));
  expect_allclose(linalg::eigvalsh(junk, "U"), w, 1e-10, 1e-10);
  array junk_l = add(tril(a), triu(randn({3, 5, 5}), 1));
  expect_allclose(linalg::eigh(junk_l, "L").first, w, 1e-10, 1e-10);
}

TEST(Linalg, DetAndSlogdet) {
  array a = randn({4, 3, 3});
  auto d = to_vector(linalg::det(a));
  auto [sign, logabs] = linalg::slogdet(a);
  auto sv = to_vector(sign), lv = to_vector(logabs), av = to_vector(a);
  for (int b = 0; b < 4; ++b) {
    double ref = det_ref(part(av, b, 9), 3);
    EXPECT_NEAR(d[b], ref, 1e-10 * (1 + std::abs(ref)));
    EXPECT_EQ(sv[b], ref > 0 ? 1.0 : -1.0);
    EXPECT_NEAR(lv[b], std::log(std::abs(ref)), 1e-10);
  }
  // Singular: det 0, slogdet (0, -inf).
  std::vector<double> s = {1, 2, 3, 2, 4, 6, 0, 1, 5};
  array sing(s.begin(), {3, 3}, float64);
  EXPECT_EQ(to_vector(linalg::det(sing))[0], 0.0);
  auto [s0, l0] = linalg::slogdet(sing);
  EXPECT_EQ(to_vector(s0)[0], 0.0);
  EXPECT_EQ(to_vector(l0)[0], -kInf);
  // An empty matrix has determinant 1.
  EXPECT_EQ(to_vector(linalg::det(zeros({0, 0}, float64)))[0], 1.0);
}

TEST(Linalg, TriInvCholeskyInvPinv) {
  for (bool upper : {false, true}) {
    array a = well_conditioned({2, 4, 4});
    array x = linalg::tri_inv(a, upper);
    auto tv = to_vector(upper ? triu(a) : tril(a)), xv = to_vector(x);
    for (int b = 0; b < 2; ++b) expect_mat_near(mm(part(tv, b, 16), part(xv, b, 16), 4, 4, 4), eye_ref(4), 1e-10, "tri_inv");
    expect_allclose(x, upper ? triu(x) : tril(x), 0, 0);
    array s = spd({2, 4, 4});
    array c = linalg::cholesky(s, upper);
    expect_allclose(linalg::cholesky_inv(c, upper), linalg::inv(s), 1e-9, 1e-10);
  }
  // pinv: the Penrose conditions, full rank and rank deficient.
  array full = randn({2, 5, 3});
  array deficient = matmul(randn({4, 2}), randn({2, 3}));
  for (const array& a : {full, deficient}) {
    array p = linalg::pinv(a);
    EXPECT_EQ(p.shape(-2), a.shape(-1));
    EXPECT_EQ(p.shape(-1), a.shape(-2));
    expect_allclose(matmul(matmul(a, p), a), a, 1e-9, 1e-9);
    expect_allclose(matmul(matmul(p, a), p), p, 1e-9, 1e-9);
    array ap = matmul(a, p);
    expect_allclose(ap, swapaxes(ap, -1, -2), 1e-9, 1e-9);
  }
}

TEST(Linalg, LuAndLuFactor) {
  for (Shape shape : {Shape{2, 4, 4}, Shape{5, 3}, Shape{3, 5}}) {
    array a = randn(shape);
    auto plu = linalg::lu(a);
    int m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
    int batch = static_cast<int>(a.size() / (m * n));
    ASSERT_EQ(plu[0].dtype(), uint32);
    auto pv = to_vector(plu[0]), lv = to_vector(plu[1]), uv = to_vector(plu[2]), av = to_vector(a);
    for (int b = 0; b < batch; ++b) {
      Mat L = part(lv, b, m * k), U = part(uv, b, k * n);
      Mat LU = mm(L, U, m, k, n), A = part(av, b, m * n);
      for (int i = 0; i < m; ++i) {
        EXPECT_EQ(L[i * k + std::min(i, k - 1)], i < k ? 1.0 : L[i * k + k - 1]);
        int p = static_cast<int>(pv[b * m + i]);
        for (int j = 0; j < n; ++j) EXPECT_NEAR(A[i * n + j], LU[p * n + j], 1e-10) << "A = L[P] U";
      }
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < i; ++j) EXPECT_EQ(U[i * n + j], 0.0);
    }
    // lu_factor: packed factors and 0-based pivots replaying the row swaps.
    auto [packed, piv] = linalg::lu_factor(a);
    ASSERT_EQ(piv.shape().back(), k);
    auto pk = to_vector(packed), pivv = to_vector(piv);
    for (int b = 0; b < batch; ++b) {
      Mat A = part(av, b, m * n);
      for (int i = 0; i < k; ++i) {
        int p = static_cast<int>(pivv[b * k + i]);
        ASSERT_LT(p, m);
        for (int j = 0; j < n; ++j) std::swap(A[i * n + j], A[p * n + j]);
      }
      Mat F = part(pk, b, m * n), L(static_cast<size_t>(m) * k, 0.0), U(static_cast<size_t>(k) * n, 0.0);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          if (j < i && j < k) L[i * k + j] = F[i * n + j];
          if (j >= i && i < k) U[i * n + j] = F[i * n + j];
        }
      for (int i = 0; i < k; ++i) L[i * k + i] = 1.0;
      expect_mat_near(mm(L, U, m, k, n), A, 1e-10, "P A = L U");
    }
  }
}

TEST(Linalg, Cross) {
  array a = randn({4, 3}), b = randn({4, 3});
  auto av = to_vector(a), bv = to_vector(b), cv = to_vector(linalg::cross(a, b));
  for (int i = 0; i < 4; ++i) {
    const double *x = &av[i * 3], *y = &bv[i * 3];
    Mat ref = {x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]};
    expect_mat_near(part(cv, i, 3), ref, 1e-12, "cross");
  }
  // Along axis 0, with a size-2 operand (zero third component) broadcast against (3, 2).
  array u = randn({2, 1}), w = randn({3, 2});
  array c = linalg::cross(u, w, 0);
  ASSERT_EQ(c.shape(), Shape({3, 2}));
  auto uv = to_vector(u), wv = to_vector(w), got = to_vector(c);
  for (int j = 0; j < 2; ++j) {
    double x[3] = {uv[0], uv[1], 0}, y[3] = {wv[0 * 2 + j], wv[1 * 2 + j], wv[2 * 2 + j]};
    EXPECT_NEAR(got[0 * 2 + j], x[1] * y[2] - x[2] * y[1], 1e-12);
    EXPECT_NEAR(got[1 * 2 + j], x[2] * y[0] - x[0] * y[2], 1e-12);
    EXPECT_NEAR(got[2 * 2 + j], x[0] * y[1] - x[1] * y[0], 1e-12);
  }
}

TEST(Linalg, VectorNormsEveryOrder) {
  array x = randn({3, 6});
  auto xv = to_vector(x);
  for (double p : {kInf, -kInf, 0.0, 1.0, 2.0, 3.0, 0.5, -1.0, -2.5}) {
    SCOPED_TRACE("ord " + std::to_string(p));
    auto got = to_vector(linalg::norm(x, p, 1));
    for (int i = 0; i < 3; ++i) {
      double ref = 0;
      if (std::isinf(p)) {
        ref = p > 0 ? 0 : kInf;
        for (int j = 0; j < 6; ++j) ref = p > 0 ? std::max(ref, std::abs(xv[i * 6 + j])) : std::min(ref, std::abs(xv[i * 6 + j]));
      } else if (p == 0) {
        for (int j = 0; j < 6; ++j) ref += xv[i * 6 + j] != 0;
      } else {
        for (int j = 0; j < 6; ++j) ref += std::pow(std::abs(xv[i * 6 + j]), p);
        ref = std::pow(ref, 1 / p);
      }
      EXPECT_NEAR(got[i], ref, 1e-10 * (1 + std::abs(ref)));
    }
  }
  // Default: the 2-norm of everything; keepdims keeps every axis.
  double ss = 0;
  for (double v : xv) ss += v * v;
  array n = linalg::norm(x, std::nullopt, true);
  EXPECT_EQ(n.shape(), Shape({1, 1}));
  EXPECT_NEAR(to_vector(n)[0], std::sqrt(ss), 1e-10);
  EXPECT_EQ(linalg::norm(astype(x, float32)).dtype(), float32);
  EXPECT_EQ(linalg::norm(randint({4}, -3, 3)).dtype(), float32);
}

TEST(Linalg, MatrixNormsEveryOrder) {
  array a = randn({2, 4, 3});
  auto av = to_vector(a);
  auto ref_of = [&](int b, const std::string& ord) {
    Mat A = part(av, b, 12);
    std::vector<double> rows(4, 0), cols(3, 0);
    double fro = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) {
        rows[i] += std::abs(A[i * 3 + j]);
        cols[j] += std::abs(A[i * 3 + j]);
        fro += A[i * 3 + j] * A[i * 3 + j];
      }
    auto s = singular_values_ref(A, 4, 3);
    if (ord == "fro") return std::sqrt(fro);
    if (ord == "nuc") return s[0] + s[1] + s[2];
    if (ord == "inf") return *std::max_element(rows.begin(), rows.end());
    if (ord == "-inf") return *std::min_element(rows.begin(), rows.end());
    if (ord == "1") return *std::max_element(cols.begin(), cols.end());
    if (ord == "-1") return *std::min_element(cols.begin(), cols.end());
    if (ord == "2") return s[0];
    return s[2]; // -2
  };
  std::vector<int> ax = {1, 2};
  auto check = [&](const array& got, const std::string& ord) {
    SCOPED_TRACE("ord " + ord);
    ASSERT_EQ(got.shape(), Shape({2}));
    auto g = to_vector(got);
    for (int b = 0; b < 2; ++b) EXPECT_NEAR(g[b], ref_of(b, ord), 1e-9);
  };
  check(linalg::norm(a, std::string("fro"), ax), "fro");
  check(linalg::norm(a, std::string("nuc"), ax), "nuc");
  check(linalg::norm(a, ax), "fro");
  check(linalg::norm(a, kInf, ax), "inf");
  check(linalg::norm(a, -kInf, ax), "-inf");
  check(linalg::norm(a, 1.0, ax), "1");
  check(linalg::norm(a, -1.0, ax), "-1");
  check(linalg::norm(a, 2.0, ax), "2");
  check(linalg::norm(a, -2.0, ax), "-2");
  // Reversed axes transpose the matrix: ord 1 and inf swap; keepdims keeps both axes.
  array t = linalg::norm(a, 1.0, std::vector<int>{2, 1}, true);
  EXPECT_EQ(t.shape(), Shape({2, 1, 1}));
  expect_allclose(reshape(t, {2}), linalg::norm(a, kInf, ax), 1e-12, 1e-12);
  EXPECT_EQ(linalg::norm(a, 2.0, std::vector<int>{0, 2}, true).shape(), Shape({1, 4, 1}));
}

TEST(Linalg, BadInput) {
  array rect = randn({3, 4});
  expect_throws_naming<std::invalid_argument>([&] { linalg::inv(rect); }, "[linalg::inv]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::cholesky(rect); }, "[linalg::cholesky]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::eigh(rect); }, "[linalg::eigh]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::slogdet(rect); }, "[linalg::slogdet]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::det(rect); }, "[linalg::det]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::tri_inv(rect); }, "[linalg::tri_inv]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::qr(randn({4})); }, "[linalg::qr]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::svd(randn({4})); }, "[linalg::svd]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::lu(randn({4})); }, "[linalg::lu]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::inv(randint({3, 3}, 0, 5)); }, "[linalg::inv]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::qr(astype(randn({3, 3}), float16)); }, "[linalg::qr]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::solve(randn({3, 3}), randn({4, 2})); }, "[linalg::solve]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::solve(rect, randn({3})); }, "[linalg::solve]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::solve(randint({3, 3}, 0, 5), randint({3}, 0, 5)); }, "[linalg::solve]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::solve_triangular(randn({3, 3}), randn({2})); }, "[linalg::solve_triangular]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::eigh(randn({3, 3}), "X"); }, "[linalg::eigh]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::cross(randn({4}), randn({4})); }, "[linalg::cross]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::cross(randn({3}), randn({3}), 2); }, "[linalg::cross]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::norm(randn({2, 2, 2}), 2.0); }, "[linalg::norm]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::norm(rect, 3.0, std::vector<int>{0, 1}); }, "[linalg::norm]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::norm(rect, std::string("fro"), 0); }, "[linalg::norm]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::norm(rect, std::string("max"), std::vector<int>{0, 1}); }, "[linalg::norm]");
  expect_throws_naming<std::invalid_argument>([&] { linalg::norm(rect, 2.0, 5); }, "[linalg::norm]");
  // Numerical failures surface at evaluation, naming the op and the shape.
  std::vector<double> s = {1, 2, 2, 4};
  array sing(s.begin(), {2, 2}, float64);
  expect_eval_error_naming([&] { return linalg::inv(sing); }, "[linalg::inv]");
  expect_eval_error_naming([&] { return linalg::solve(sing, randn({2})); }, "[linalg::solve]");
  expect_eval_error_naming([&] { return linalg::cholesky(negative(spd({2, 3, 3}))); }, "[linalg::cholesky]");
  expect_eval_error_naming([&] { return linalg::tri_inv(zeros({3, 3}, float64)); }, "[linalg::tri_inv]");
}

// ---------------------------------------------------------------------------------------
// Derivatives (central differences in float64). Symmetric-input factorizations are checked
// through a symmetrising map, since LAPACK reads one triangle only.

GradCheckOptions loose() {
  GradCheckOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-5;
  return o;
}

array shifted(const array& x) {
  int n = x.shape(-1);
  return add(x, multiply(eye(n, float64), array(static_cast<double>(n))));
}

TEST(LinalgGrad, InvSolveTriangular) {
  check_grad([](const std::vector<array>& x) { return linalg::inv(shifted(x[0])); }, {randn({2, 3, 3})});
  check_grad([](const std::vector<array>& x) { return linalg::solve(shifted(x[0]), x[1]); }, {randn({2, 3, 3}), randn({2, 3, 2})});
  check_grad([](const std::vector<array>& x) { return linalg::solve(shifted(x[0]), x[1]); }, {randn({3, 3}), randn({3})});
  for (bool upper : {false, true}) {
    check_grad([upper](const std::vector<array>& x) { return linalg::tri_inv(shifted(x[0]), upper); }, {randn({3, 3})});
    check_grad([upper](const std::vector<array>& x) { return linalg::solve_triangular(shifted(x[0]), x[1], upper); }, {randn({3, 3}), randn({3, 2})});
  }
}

TEST(LinalgGrad, CholeskyAndCholeskyInv) {
  for (bool upper : {false, true}) {
    auto f = [upper](const std::vector<array>& x) {
      array a = add(matmul(x[0], swapaxes(x[0], -1, -2)), multiply(eye(3, float64), array(3.0)));
      return linalg::cholesky(a, upper);
    };
    check_grad(f, {randn({2, 3, 3})}, loose());
    check_grad([upper](const std::vector<array>& x) { return linalg::cholesky_inv(shifted(x[0]), upper); }, {randn({3, 3})});
  }
}

TEST(LinalgGrad, QrTallAndSquare) {
  for (Shape shape : {Shape{4, 3}, Shape{2, 3, 3}}) {
    check_grad([](const std::vector<array>& x) { return linalg::qr(x[0]).first; }, {randn(shape)}, loose());
    check_grad([](const std::vector<array>& x) { return linalg::qr(x[0]).second; }, {randn(shape)}, loose());
  }
  // Wide matrices have no derivative here.
  EXPECT_THROW(
      vjp([](const std::vector<array>& x) { return std::vector<array>{linalg::qr(x[0]).first}; }, {randn({2, 3})}, {randn({2, 2})}),
      std::invalid_argument);
}

TEST(LinalgGrad, SvdSingularValuesAndVectors) {
  for (Shape shape : {Shape{4, 3}, Shape{2, 3, 5}, Shape{3, 3}}) {
    check_grad([](const std::vector<array>& x) { return linalg::svd(x[0], false)[0]; }, {randn(shape)}, loose());
    check_grad([](const std::vector<array>& x) { return linalg::svd(x[0])[1]; }, {randn(shape)}, loose());
  }
}

TEST(LinalgGrad, SvdVectorsSquare) {
  // Square: U and Vt are determined (distinct singular values with probability 1).
  check_grad([](const std::vector<array>& x) { return linalg::svd(x[0])[0]; }, {randn({3, 3})}, loose());
  check_grad([](const std::vector<array>& x) { return linalg::svd(x[0])[2]; }, {randn({3, 3})}, loose());
}

TEST(LinalgGrad, PinvNonSquare) {
  // Non-square through pinv, which uses only the determined columns.
  check_grad([](const std::vector<array>& x) { return linalg::pinv(x[0]); }, {randn({4, 3})}, loose());
  check_grad([](const std::vector<array>& x) { return linalg::pinv(x[0]); }, {randn({2, 3, 5})}, loose());
}

TEST(LinalgGrad, EighValuesAndVectors) {
  check_grad([](const std::vector<array>& x) { return linalg::eigh(sym_of(x[0])).first; }, {randn({2, 4, 4})}, loose());
  check_grad([](const std::vector<array>& x) { return linalg::eigvalsh(sym_of(x[0]), "U"); }, {randn({4, 4})}, loose());
  // Eigenvectors on a well-separated spectrum.
  auto f = [](const std::vector<array>& x) {
    std::vector<double> d = {1, 0, 0, 0, 4, 0, 0, 0, 9};
    array D(d.begin(), {3, 3}, float64);
    return linalg::eigh(add(D, multiply(sym_of(x[0]), array(0.3)))).second;
  };
  check_grad(f, {randn({3, 3})}, loose());
}

TEST(LinalgGrad, DetSlogdet) {
  check_grad([](const std::vector<array>& x) { return linalg::det(x[0]); }, {randn({2, 3, 3})});
  check_grad([](const std::vector<array>& x) { return linalg::slogdet(x[0]).second; }, {randn({3, 3})});
  auto [outs, grads] = vjp(
      [](const std::vector<array>& x) { return std::vector<array>{linalg::slogdet(x[0]).first}; }, {randn({3, 3})}, {array(1.0)});
  expect_allclose(grads[0], zeros({3, 3}, float64), 0, 0);
}

TEST(LinalgGrad, VectorNormOrders) {
  for (double p : {2.0, 1.0, 3.0, kInf, 0.5}) {
    SCOPED_TRACE("vector ord " + std::to_string(p));
    check_grad([p](const std::vector<array>& x) { return linalg::norm(x[0], p, -1); }, {randn({3, 4})}, loose());
  }
  check_grad([](const std::vector<array>& x) { return linalg::norm(x[0]); }, {randn({3, 4})});
}

TEST(LinalgGrad, MatrixNormOrders) {
  for (double p : {1.0, -1.0, kInf, 2.0, -2.0}) {
    SCOPED_TRACE("matrix ord " + std::to_string(p));
    check_grad([p](const std::vector<array>& x) { return linalg::norm(x[0], p, std::vector<int>{-2, -1}); }, {randn({2, 4, 3})}, loose());
  }
  for (std::string ord : {"fro", "nuc"}) {
    check_grad([ord](const std::vector<array>& x) { return linalg::norm(x[0], ord, std::vector<int>{0, 1}); }, {randn({4, 3})}, loose());
  }
}

TEST(LinalgGrad, Cross) {
  check_grad([](const std::vector<array>& x) { return linalg::cross(x[0], x[1]); }, {randn({2, 3}), randn({2, 3})});
}

// ---------------------------------------------------------------------------------------
// Batching (vmap against a loop), one check per primitive row.

TEST(LinalgVmap, EveryPrimitive) {
  auto one = [](auto f) { return [f](const std::vector<array>& x) { return f(x[0]); }; };
  array sq = well_conditioned({3, 4, 4});
  array sq_axis1 = moveaxis(sq, 0, 1);
  check_vmap(one([](const array& a) { return std::vector<array>{linalg::inv(a)}; }), {sq_axis1}, {1});
  check_vmap(one([](const array& a) { return std::vector<array>{linalg::tri_inv(a, true)}; }), {sq}, {0});
  check_vmap(one([](const array& a) { return std::vector<array>{linalg::cholesky(a)}; }), {spd({3, 4, 4})}, {0});
  check_vmap(one([](const array& a) { auto [q, r] = linalg::qr(a); return std::vector<array>{q, r}; }), {randn({3, 5, 4})}, {0});
  check_vmap(one([](const array& a) { return linalg::svd(a); }), {randn({3, 4, 2})}, {0});
  check_vmap(one([](const array& a) { return linalg::svd(a, false); }), {randn({4, 3, 2})}, {2});
  check_vmap(one([](const array& a) { auto [w, v] = linalg::eigh(a); return std::vector<array>{w, v}; }), {sym_of(randn({3, 4, 4}))}, {0});
  check_vmap(one([](const array& a) { return std::vector<array>{linalg::eigvalsh(a)}; }), {sym_of(randn({3, 4, 4}))}, {0});
  check_vmap(one([](const array& a) { return linalg::lu(a); }), {randn({3, 4, 3})}, {0});
  check_vmap(one([](const array& a) { auto [s, l] = linalg::slogdet(a); return std::vector<array>{s, l, linalg::det(a)}; }), {randn({3, 3, 3})}, {0});
  check_vmap(one([](const array& a) { return std::vector<array>{linalg::pinv(a), linalg::norm(a, 2.0, std::vector<int>{0, 1})}; }), {randn({3, 4, 2})}, {0});
  auto solve2 = [](const std::vector<array>& x) { return std::vector<array>{linalg::solve(x[0], x[1])}; };
  check_vmap(solve2, {sq, randn({3, 4, 2})}, {0, 0});
  check_vmap(solve2, {sq, randn({4, 2})}, {0, -1});
  check_vmap(solve2, {well_conditioned({4, 4}), randn({4, 5})}, {-1, 1});
  auto tri2 = [](const std::vector<array>& x) { return std::vector<array>{linalg::solve_triangular(x[0], x[1], true)}; };
  check_vmap(tri2, {sq, randn({3, 4})}, {0, 0});
  auto cross2 = [](const std::vector<array>& x) { return std::vector<array>{linalg::cross(x[0], x[1])}; };
  check_vmap(cross2, {randn({4, 3}), randn({3, 4})}, {0, 1});
}

// ---------------------------------------------------------------------------------------
// eig / eigvals (general matrices, complex64 outputs). References in double complex.

using Cx = std::complex<double>;

std::vector<Cx> to_complex(const array& z) {
  auto re = to_vector(real(z)), im = to_vector(imag(z));
  std::vector<Cx> out(re.size());
  for (size_t i = 0; i < re.size(); ++i) out[i] = Cx(re[i], im[i]);
  return out;
}

// Checks A v_j = w_j v_j and |v_j| = 1 for every batch matrix of a (..., n, n).
void expect_eigenpairs(const array& a, const array& w, const array& v, int n, double tol) {
  ASSERT_EQ(w.dtype(), complex64);
  ASSERT_EQ(v.dtype(), complex64);
  auto av = to_vector(a);
  auto wv = to_complex(w), vv = to_complex(v);
  const size_t nn = static_cast<size_t>(n) * n;
  const size_t batch = av.size() / nn;
  for (size_t b = 0; b < batch; ++b) {
    for (int j = 0; j < n; ++j) {
      Cx lam = wv[b * n + j];
      double norm2 = 0;
      for (int i = 0; i < n; ++i) {
        Cx lhs = 0;
        for (int k = 0; k < n; ++k) lhs += av[b * nn + i * n + k] * vv[b * nn + k * n + j];
        Cx rhs = lam * vv[b * nn + i * n + j];
        EXPECT_NEAR(std::abs(lhs - rhs), 0.0, tol) << "batch " << b << " pair " << j << " row " << i;
        norm2 += std::norm(vv[b * nn + i * n + j]);
      }
      EXPECT_NEAR(norm2, 1.0, tol) << "batch " << b << " vector " << j;
    }
  }
}

bool by_real_then_imag(const Cx& x, const Cx& y) {
  return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
}

TEST(Linalg, EigPairsRandomAndBatched) {
  for (Dtype dt : {float32, float64}) {
    array a = astype(randn({4, 4}), dt);
    auto [w, v] = linalg::eig(a);
    ASSERT_EQ(w.shape(), Shape({4}));
    ASSERT_EQ(v.shape(), Shape({4, 4}));
    expect_eigenpairs(a, w, v, 4, 1e-4);
    array ab = astype(randn({3, 5, 5}), dt);
    auto [wb, vb] = linalg::eig(ab);
    ASSERT_EQ(wb.shape(), Shape({3, 5}));
    ASSERT_EQ(vb.shape(), Shape({3, 5, 5}));
    expect_eigenpairs(ab, wb, vb, 5, 1e-4);
    // eigvals is eig's first output.
    array e = linalg::eigvals(ab);
    ASSERT_EQ(e.dtype(), complex64);
    ASSERT_EQ(e.shape(), Shape({3, 5}));
    expect_allclose(real(e), real(wb), 1e-5, 1e-5);
    expect_allclose(imag(e), imag(wb), 1e-5, 1e-5);
  }
  // A non-contiguous (transposed) input: eigenvalues of A^T are those of A.
  array a = randn({2, 4, 4});
  auto w = to_complex(linalg::eigvals(a)), wt = to_complex(linalg::eigvals(swapaxes(a, -1, -2)));
  for (int b = 0; b < 2; ++b) {
    std::vector<Cx> x(w.begin() + b * 4, w.begin() + (b + 1) * 4), y(wt.begin() + b * 4, wt.begin() + (b + 1) * 4);
    std::sort(x.begin(), x.end(), by_real_then_imag);
    std::sort(y.begin(), y.end(), by_real_then_imag);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(std::abs(x[i] - y[i]), 0.0, 1e-4);
  }
}

TEST(Linalg, EigDiagonalTriangularRotation) {
  const int n = 5;
  array r = randn({n, n});
  array diagonal = multiply(r, eye(n, float64));
  for (const array& m : {diagonal, triu(r), tril(r)}) {
    auto mv = to_vector(m);
    std::vector<Cx> want(n);
    for (int i = 0; i < n; ++i) want[i] = Cx(mv[i * n + i], 0.0);
    auto got = to_complex(linalg::eigvals(m));
    std::sort(want.begin(), want.end(), by_real_then_imag);
    std::sort(got.begin(), got.end(), by_real_then_imag);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(std::abs(got[i] - want[i]), 0.0, 1e-5) << i;
    auto [w, v] = linalg::eig(m);
    expect_eigenpairs(m, w, v, n, 1e-5);
  }
  // A quarter-turn rotation has eigenvalues +-i, with complex conjugate eigenvectors.
  array rot = array({0.0, -1.0, 1.0, 0.0}, Shape{2, 2}, float32);
  auto [w, v] = linalg::eig(rot);
  auto wv = to_complex(w);
  std::sort(wv.begin(), wv.end(), by_real_then_imag);
  EXPECT_NEAR(std::abs(wv[0] - Cx(0, -1)), 0.0, 1e-6);
  EXPECT_NEAR(std::abs(wv[1] - Cx(0, 1)), 0.0, 1e-6);
  expect_eigenpairs(rot, w, v, 2, 1e-6);
  // A rotation by theta in 3-d: eigenvalues 1, e^{+-i theta}.
  double th = 0.7, c = std::cos(th), sn = std::sin(th);
  array rot3 = array({c, -sn, 0.0, sn, c, 0.0, 0.0, 0.0, 1.0}, Shape{3, 3}, float64);
  auto w3 = to_complex(linalg::eigvals(rot3));
  std::sort(w3.begin(), w3.end(), [](const Cx& x, const Cx& y) { return x.imag() < y.imag(); });
  EXPECT_NEAR(std::abs(w3[0] - Cx(c, -sn)), 0.0, 1e-6);
  EXPECT_NEAR(std::abs(w3[1] - Cx(1, 0)), 0.0, 1e-6);
  EXPECT_NEAR(std::abs(w3[2] - Cx(c, sn)), 0.0, 1e-6);
}

TEST(Linalg, EigBadInputAndNoDerivative) {
  expect_throws_naming<std::invalid_argument>([] { linalg::eig(randn({3, 4})); }, "[linalg::eig]");
  expect_throws_naming<std::invalid_argument>([] { linalg::eig(randn({4})); }, "[linalg::eig]");
  expect_throws_naming<std::invalid_argument>([] { linalg::eig(randint({3, 3}, 0, 5)); }, "[linalg::eig]");
  expect_throws_naming<std::invalid_argument>([] { linalg::eigvals(randn({2, 3, 4})); }, "[linalg::eigvals]");
  expect_throws_naming<std::invalid_argument>([] { linalg::eigvals(randn({3})); }, "[linalg::eigvals]");
  expect_throws_naming<std::invalid_argument>([] { linalg::eigvals(randint({3, 3}, 0, 5)); }, "[linalg::eigvals]");
  // MLX has no derivative for eig: vjp and jvp throw naming it.
  auto f = [](const array& x) { return sum(real(linalg::eigvals(x))); };
  expect_throws_naming<std::invalid_argument>([&] { eval(grad(f)(randn({3, 3}))); }, "eig]");
  auto g = [](const array& x) { return sum(imag(linalg::eig(x).second)); };
  expect_throws_naming<std::invalid_argument>([&] { eval(grad(g)(randn({3, 3}))); }, "eig]");
  expect_throws_naming<std::invalid_argument>(
      [&] { auto r = jvp(f, randn({3, 3}), randn({3, 3})); eval(r.second); }, "eig]");
}

TEST(LinalgVmap, EigvalsAndEig) {
  // check_vmap compares outputs with allclose, so complex outputs go through real/imag.
  auto parts = [](const array& z) { return std::vector<array>{real(z), imag(z)}; };
  auto f = [parts](const std::vector<array>& x) { return parts(linalg::eigvals(x[0])); };
  array a = randn({3, 4, 4});
  check_vmap(f, {a}, {0}, 1e-5, 1e-5);
  check_vmap(f, {moveaxis(a, 0, 2)}, {2}, 1e-5, 1e-5);
  auto g = [parts](const std::vector<array>& x) {
    auto [w, v] = linalg::eig(x[0]);
    auto pw = parts(w), pv = parts(v);
    return std::vector<array>{pw[0], pw[1], pv[0], pv[1]};
  };
  check_vmap(g, {a}, {0}, 1e-5, 1e-5);
}

} // namespace
} // namespace nuvec::testing
