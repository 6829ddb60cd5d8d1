// nuvec: linear algebra (MLX's linalg.h API: names, argument order, defaults), plus det and
// slogdet with NumPy's semantics. Factorizations run through LAPACKE on the CPU, batched over
// the leading axes; the rest are composites of public ops. Implemented in src/ops/linalg.cpp.
//
// Conventions for every op below:
// - Matrices are the last two axes, (..., M, N); leading axes are a batch.
// - Factorizations accept float32 and float64 only; other dtypes throw std::invalid_argument
//   (integer inputs are not promoted, as in MLX).
// - Errors are std::invalid_argument with a message starting "[linalg::<op>]" and naming the
//   shape; numerical failures (a singular or non positive-definite matrix, LAPACK info > 0)
//   are detected by the kernel and thrown by eval as std::runtime_error (the core rethrows
//   every kernel error that way), still naming the op and the input shape.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/device.h"
#include "nuvec/stream.h"

namespace nuvec::linalg {

/// Vector or matrix norm of order `ord` over `axis` (one axis: vector norm, two: matrix norm;
/// without axis: every axis of a 1-d or 2-d a).
/// Vector: inf -> max|x|, -inf -> min|x|, 0 -> count of non-zeros, p -> (sum |x|^p)^(1/p).
/// Matrix: 1 / -1 -> max / min column sum of |a|, inf / -inf -> max / min row sum of |a|,
/// 2 / -2 -> largest / smallest singular value.
/// Shapes: a with the reduced axes removed (kept as size 1 when keepdims). Dtypes: float for
/// integer inputs (float32), else a's. Throws std::invalid_argument for more than two axes,
/// a matrix ord other than those above, or no axis with a.ndim() > 2; std::out_of_range for an
/// axis out of range. Source: NumPy's / MLX's linalg.norm. Runs: reductions; svd for 2 / -2.
array norm(
    const array& a,
    const double ord,
    const std::optional<std::vector<int>>& axis = std::nullopt,
    bool keepdims = false,
    StreamOrDevice s = {});
/// norm(a, ord, {axis}, keepdims).
inline array norm(const array& a, const double ord, int axis, bool keepdims = false, StreamOrDevice s = {}) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}
/// Matrix norm named by a string: "fro" or "f" -> sqrt(sum a^2), "nuc" -> sum of singular values.
/// Needs two axes (or a 2-d a). Throws std::invalid_argument otherwise or for another name.
array norm(
    const array& a,
    const std::string& ord,
    const std::optional<std::vector<int>>& axis = std::nullopt,
    bool keepdims = false,
    StreamOrDevice s = {});
/// norm(a, ord, {axis}, keepdims).
inline array norm(const array& a, const std::string& ord, int axis, bool keepdims = false, StreamOrDevice s = {}) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}
/// The 2-norm sqrt(sum a^2) over axis (one or two axes; Frobenius for two); over every
/// element of a when axis is absent. Throws std::invalid_argument for more than two axes.
array norm(
    const array& a,
    const std::optional<std::vector<int>>& axis = std::nullopt,
    bool keepdims = false,
    StreamOrDevice s = {});
/// norm(a, {axis}, keepdims).
inline array norm(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {}) {
  return norm(a, std::vector<int>{axis}, keepdims, s);
}

/// Reduced QR: a = Q R with Q (..., M, K) orthonormal columns and R (..., K, N) upper
/// triangular, K = min(M, N). Dtypes: float32, float64. Derivatives: M >= N only (the
/// reduced-QR formula); throws std::invalid_argument otherwise. Source: MLX qr; LAPACK
/// geqrf + orgqr. Throws std::invalid_argument for ndim < 2 or a non-float dtype.
std::pair<array, array> qr(const array& a, StreamOrDevice s = {});

/// Singular value decomposition a = U diag(S) Vt with U (..., M, M), S (..., K) descending,
/// Vt (..., N, N) (full matrices, as MLX); {S} alone when !compute_uv. Dtypes: float32,
/// float64. Derivatives: exact for S; for U and Vt the standard formula with distinct
/// non-zero singular values (Townsend 2016), in which only the first K columns of U and rows
/// of Vt are determined (cotangents on the others are ignored). Throws std::invalid_argument
/// for ndim < 2 or a non-float dtype. Source: MLX svd; LAPACK gesdd.
std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s = {});
/// svd(a, true).
inline std::vector<array> svd(const array& a, StreamOrDevice s = {}) {
  return svd(a, true, s);
}

/// The inverse of each square matrix: inv(a) @ a = I. Derivative: d inv = -X dA X.
/// Throws std::invalid_argument for a non-square or non-float a, and at evaluation for a
/// singular matrix. Source: MLX inv; LAPACK getrf + getri.
array inv(const array& a, StreamOrDevice s = {});

/// The inverse of the lower (upper when `upper`) triangle of each square matrix; the other
/// triangle of a is ignored and the result's is zero. Throws as inv (a zero on the diagonal
/// is singular). Source: MLX tri_inv; LAPACK trtri.
array tri_inv(const array& a, bool upper = false, StreamOrDevice s = {});

/// Cholesky factor of a symmetric positive-definite a: L lower with L L^T = a, or U = L^T
/// when `upper` (U^T U = a). Only one triangle of a is read (the lower for !upper), so
/// derivatives are those of the symmetric input (the vjp returns a symmetric gradient).
/// Throws std::invalid_argument for a non-square or non-float a, and at evaluation when a is
/// not positive definite. Source: MLX cholesky; LAPACK potrf; vjp: Murray 2016.
array cholesky(const array& a, bool upper = false, StreamOrDevice s = {});

/// Moore-Penrose pseudo-inverse (N, M) of each (M, N) matrix: V diag(1/S) U^T over the
/// singular values above 10 * max(M, N) * eps * max(S). Throws as svd. Source: MLX pinv.
array pinv(const array& a, StreamOrDevice s = {});

/// The inverse of A from its Cholesky factor: L^-T L^-1 for A = L L^T (`a` is L), or
/// U^-1 U^-T when `upper` (A = U^T U). Throws as tri_inv. Source: MLX cholesky_inv.
array cholesky_inv(const array& a, bool upper = false, StreamOrDevice s = {});

/// LU with partial pivoting: {P, L, U} with P (..., M) uint32 row indices such that
/// a = L[P] @ U, L (..., M, K) unit lower triangular, U (..., K, N) upper triangular,
/// K = min(M, N). No derivative. Throws std::invalid_argument for ndim < 2 or a non-float
/// dtype. Source: MLX lu; LAPACK getrf.
std::vector<array> lu(const array& a, StreamOrDevice s = {});

/// The packed LU factorization (LU (..., M, N): L below the diagonal with unit diagonal
/// implied, U on and above) and pivots (..., K) uint32, 0-based: row i was swapped with row
/// pivots[i], in order. Throws as lu. Source: MLX lu_factor; LAPACK getrf (pivots made 0-based).
std::pair<array, array> lu_factor(const array& a, StreamOrDevice s = {});

/// x with a @ x = b: a (..., N, N), b (..., N) or (..., N, R), batch axes broadcast.
/// Dtype: promote_types(a, b), which must be float32 or float64. Derivatives: db -> solve(a,
/// db), da -> -solve(a, da x). Throws std::invalid_argument for mismatched shapes, a non-float
/// result dtype, and at evaluation for a singular a. Source: MLX solve; LAPACK gesv.
array solve(const array& a, const array& b, StreamOrDevice s = {});

/// x with tri(a) @ x = b, tri(a) the lower (upper when `upper`) triangle of a; shapes and
/// dtypes as solve. Throws as solve (a zero diagonal is singular). Source: MLX
/// solve_triangular; LAPACK trtrs.
array solve_triangular(const array& a, const array& b, bool upper = false, StreamOrDevice s = {});

/// Cross product along axis (size 3, or 2 read as a zero third component), inputs broadcast.
/// Throws std::invalid_argument when the axis size is not 2 or 3 and std::out_of_range for an
/// axis out of range. Source: NumPy / MLX cross.
array cross(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});

/// Eigenvalues (..., N) ascending and eigenvectors (..., N, N) (columns, unit norm) of each
/// symmetric matrix, reading its lower ("L") or upper ("U") triangle. Derivatives: the
/// standard formulas (dw = diag(V^T dA V), dV = V (F o V^T dA V), F_ij = 1/(w_j - w_i)) on the
/// symmetric part of dA; eigenvector derivatives are infinite for repeated eigenvalues
/// (eigenvalue derivatives stay valid there as sums over the eigenspace when only w is used).
/// Throws std::invalid_argument for a non-square or non-float a, or UPLO not "L"/"U".
/// Source: MLX eigh; LAPACK syevd.
std::pair<array, array> eigh(const array& a, std::string UPLO = "L", StreamOrDevice s = {});

/// The eigenvalues of eigh(a, UPLO). Throws as eigh. Source: MLX eigvalsh.
array eigvalsh(const array& a, std::string UPLO = "L", StreamOrDevice s = {});

/// Eigenvalues (..., N) and right eigenvectors (..., N, N) (columns, unit 2-norm) of each
/// general square matrix, both complex64 (LAPACK's order, conjugate pairs adjacent). No
/// derivatives (vjp/jvp throw std::invalid_argument, as MLX has none). Throws
/// std::invalid_argument for fewer than 2 dimensions, a non-square or a non-float a.
/// Source: MLX eig; LAPACK geev.
std::pair<array, array> eig(const array& a, StreamOrDevice s = {});

/// The eigenvalues of eig(a), complex64 (..., N). Throws as eig. Source: MLX eigvals.
array eigvals(const array& a, StreamOrDevice s = {});

/// Determinant of each square matrix (0 for a singular one), NumPy's det: sign * exp(logabsdet)
/// of slogdet, so it differentiates as det * inv(a)^T. Throws as slogdet. nuvec addition.
array det(const array& a, StreamOrDevice s = {});

/// (sign, log|det|) of each square matrix; (0, -inf) for a singular one (NumPy's slogdet).
/// Shapes: a's batch shape. Derivative of log|det|: inv(a)^T; sign has none (zero).
/// Throws std::invalid_argument for a non-square or non-float a. Source: NumPy slogdet;
/// LAPACK getrf. nuvec addition.
std::pair<array, array> slogdet(const array& a, StreamOrDevice s = {});

} // namespace nuvec::linalg
