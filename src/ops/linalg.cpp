// nuvec: the linalg ops (MLX's linalg.h names and semantics; det/slogdet are NumPy's). Each
// factorization validates and records one Linalg node; norm, cross, pinv, cholesky_inv, lu,
// det are composites of public ops (NumPy's norm table, MLX's pinv cutoff).
#include "nuvec/linalg.h"

#include <cmath>
#include <limits>

#include "core/errors.h"
#include "ops/ops_common.h"
#include "primitives/linalg.h"

namespace nuvec::linalg {

namespace {

void check_matrix(const char* op, const array& a) {
  if (a.ndim() < 2) {
    throw_invalid_argument(op, "input must have at least 2 dimensions; got shape ", a.shape(), ".");
  }
}

void check_float(const char* op, const array& a) {
  if (a.dtype() != float32 && a.dtype() != float64) {
    throw_invalid_argument(
        op, "input dtype must be float32 or float64; got ", a.dtype(), " (shape ", a.shape(), ").");
  }
}

void check_square(const char* op, const array& a) {
  check_matrix(op, a);
  if (a.shape(-1) != a.shape(-2)) {
    throw_invalid_argument(op, "input must be square matrices; got shape ", a.shape(), ".");
  }
}

std::shared_ptr<Linalg> node(LinalgOp op, StreamOrDevice s, bool upper = false, bool compute = true) {
  return std::make_shared<Linalg>(to_stream(s), op, upper, compute);
}

// A single-output node over one (validated) input.
array unary_node(LinalgOp op, const array& a, StreamOrDevice s, bool upper = false) {
  return array(a.shape(), a.dtype(), node(op, s, upper), {a});
}

std::vector<array> multi_node(
    LinalgOp op,
    const array& a,
    std::vector<Dtype> dtypes,
    StreamOrDevice s,
    bool upper = false,
    bool compute = true) {
  auto prim = node(op, s, upper, compute);
  auto shapes = prim->output_shapes({a});
  return array::make_arrays(shapes, dtypes, prim, {a});
}

array as_inexact(const array& a, StreamOrDevice s) {
  return issubdtype(a.dtype(), inexact) ? a : astype(a, float32, s);
}

array abs_of(const array& a, StreamOrDevice s) {
  return abs(as_inexact(a, s), s);
}

// Removes the size-1 axes kept by a keepdims reduction when the caller did not ask for them.
array finish(const array& x, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return keepdims ? x : squeeze(x, axes, s);
}

array vector_norm(const array& a, double ord, const std::vector<int>& ax, bool keepdims, StreamOrDevice s) {
  array x = abs_of(a, s);
  if (std::isinf(ord)) return ord > 0 ? max(x, ax, keepdims, s) : min(x, ax, keepdims, s);
  if (ord == 0) {
    array nz = astype(not_equal(x, array(0.0, x.dtype()), s), x.dtype(), s);
    return sum(nz, ax, keepdims, s);
  }
  if (ord == 1) return sum(x, ax, keepdims, s);
  if (ord == 2) return sqrt(sum(square(x, s), ax, keepdims, s), s);
  array p(ord, x.dtype());
  return power(sum(power(x, p, s), ax, keepdims, s), array(1.0 / ord, x.dtype()), s);
}

// The singular values of the (row, col) planes of a, over a new last axis.
array plane_singular_values(const array& a, int row, int col, StreamOrDevice s) {
  array x = transpose(a, [&] {
    std::vector<int> perm;
    for (int i = 0; i < static_cast<int>(a.ndim()); ++i) {
      if (i != row && i != col) perm.push_back(i);
    }
    perm.push_back(row);
    perm.push_back(col);
    return perm;
  }(), s);
  return svd(as_inexact(x, s), false, s)[0];
}

std::pair<int, int> matrix_axes(const array& a, const std::vector<int>& ax) {
  int row = normalize_axis_index(ax[0], static_cast<int>(a.ndim()), "linalg::norm");
  int col = normalize_axis_index(ax[1], static_cast<int>(a.ndim()), "linalg::norm");
  if (row == col) {
    throw_invalid_argument("linalg::norm", "matrix axes must differ; got ", Shape(ax.begin(), ax.end()), ".");
  }
  return {row, col};
}

// A reduction over the two sorted matrix axes, re-inserted as size 1 when keepdims.
array planes_result(const array& r, int row, int col, bool keepdims, StreamOrDevice s) {
  return keepdims ? expand_dims(r, {std::min(row, col), std::max(row, col)}, s) : r;
}

array matrix_norm(const array& a, double ord, const std::vector<int>& ax, bool keepdims, StreamOrDevice s) {
  auto [row, col] = matrix_axes(a, ax);
  std::vector<int> both = {std::min(row, col), std::max(row, col)};
  if (ord == 1 || ord == -1 || std::isinf(ord)) {
    // 1: the largest column sum (sum over rows); inf: the largest row sum (sum over columns).
    bool by_cols = !std::isinf(ord);
    array sums = sum(abs_of(a, s), std::vector<int>{by_cols ? row : col}, true, s);
    std::vector<int> other = {by_cols ? col : row};
    array r = ord > 0 ? max(sums, other, true, s) : min(sums, other, true, s);
    return finish(r, both, keepdims, s);
  }
  if (ord == 2 || ord == -2) {
    array sv = plane_singular_values(a, row, col, s);
    array r = ord > 0 ? max(sv, -1, false, s) : min(sv, -1, false, s);
    return planes_result(r, row, col, keepdims, s);
  }
  throw_invalid_argument(
      "linalg::norm", "a matrix ord must be 1, -1, 2, -2, inf, -inf, 'fro' or 'nuc'; got ", ord, ".");
}

std::vector<int> norm_axes(const array& a, const std::optional<std::vector<int>>& axis) {
  std::vector<int> ax = axis ? *axis : all_axes(static_cast<int>(a.ndim()));
  if (ax.empty() || ax.size() > 2) {
    throw_invalid_argument(
        "linalg::norm", "norm must reduce 1 or 2 axes; got ", ax.size(), " axes for an input of shape ",
        a.shape(), ".");
  }
  return ax;
}

} // namespace

array norm(const array& a, const std::optional<std::vector<int>>& axis, bool keepdims, StreamOrDevice s) {
  std::vector<int> ax;
  if (axis) {
    ax = norm_axes(a, axis);
    ax = normalize_axes(ax, static_cast<int>(a.ndim()), "linalg::norm");
  } else {
    ax = all_axes(static_cast<int>(a.ndim()));
  }
  array x = abs_of(a, s);
  return sqrt(sum(square(x, s), ax, keepdims, s), s);
}

array norm(
    const array& a,
    const double ord,
    const std::optional<std::vector<int>>& axis,
    bool keepdims,
    StreamOrDevice s) {
  auto ax = norm_axes(a, axis);
  if (ax.size() == 1) {
    normalize_axes(ax, static_cast<int>(a.ndim()), "linalg::norm");
    return vector_norm(a, ord, ax, keepdims, s);
  }
  return matrix_norm(a, ord, ax, keepdims, s);
}

array norm(
    const array& a,
    const std::string& ord,
    const std::optional<std::vector<int>>& axis,
    bool keepdims,
    StreamOrDevice s) {
  auto ax = norm_axes(a, axis);
  if (ax.size() != 2) {
    throw_invalid_argument(
        "linalg::norm", "norm '", ord, "' must reduce 2 axes; got 1 for an input of shape ", a.shape(), ".");
  }
  auto [row, col] = matrix_axes(a, ax);
  if (ord == "fro" || ord == "f") return norm(a, ax, keepdims, s);
  if (ord == "nuc") {
    array r = sum(plane_singular_values(a, row, col, s), -1, false, s);
    return planes_result(r, row, col, keepdims, s);
  }
  throw_invalid_argument("linalg::norm", "a string ord must be 'fro' or 'nuc'; got '", ord, "'.");
}

std::pair<array, array> qr(const array& a, StreamOrDevice s) {
  check_matrix("linalg::qr", a);
  check_float("linalg::qr", a);
  auto out = multi_node(LinalgOp::QRF, a, {a.dtype(), a.dtype()}, s);
  return {out[0], out[1]};
}

std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s) {
  check_matrix("linalg::svd", a);
  check_float("linalg::svd", a);
  std::vector<Dtype> dtypes(compute_uv ? 3 : 1, a.dtype());
  return multi_node(LinalgOp::SVD, a, dtypes, s, false, compute_uv);
}

array inv(const array& a, StreamOrDevice s) {
  check_square("linalg::inv", a);
  check_float("linalg::inv", a);
  return unary_node(LinalgOp::Inverse, a, s);
}

array tri_inv(const array& a, bool upper, StreamOrDevice s) {
  check_square("linalg::tri_inv", a);
  check_float("linalg::tri_inv", a);
  return unary_node(LinalgOp::TriInv, a, s, upper);
}

array cholesky(const array& a, bool upper, StreamOrDevice s) {
  check_square("linalg::cholesky", a);
  check_float("linalg::cholesky", a);
  return unary_node(LinalgOp::Cholesky, a, s, upper);
}

array pinv(const array& a, StreamOrDevice s) {
  check_matrix("linalg::pinv", a);
  check_float("linalg::pinv", a);
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto usv = svd(a, true, s);
  Shape lo(a.ndim(), 0), hi = a.shape();
  hi[a.ndim() - 2] = m;
  hi[a.ndim() - 1] = k;
  array Uk = slice(usv[0], lo, hi, s);
  hi[a.ndim() - 2] = k;
  hi[a.ndim() - 1] = n;
  array Vk = swapaxes(slice(usv[2], lo, hi, s), -1, -2, s);
  array S = usv[1];
  double eps = a.dtype() == float32 ? std::numeric_limits<float>::epsilon()
                                    : std::numeric_limits<double>::epsilon();
  array cutoff = multiply(array(10.0 * std::max(m, n) * eps, a.dtype()), max(S, -1, true, s), s);
  array keep = greater(S, cutoff, s);
  // 1/S only where kept (the where's other branch never divides by zero).
  array rS = where(keep, reciprocal(where(keep, S, array(1.0, a.dtype()), s), s), array(0.0, a.dtype()), s);
  return matmul(multiply(Vk, expand_dims(rS, -2, s), s), swapaxes(Uk, -1, -2, s), s);
}

array cholesky_inv(const array& a, bool upper, StreamOrDevice s) {
  check_square("linalg::cholesky_inv", a);
  check_float("linalg::cholesky_inv", a);
  array X = tri_inv(a, upper, s);
  array Xt = swapaxes(X, -1, -2, s);
  return upper ? matmul(X, Xt, s) : matmul(Xt, X, s);
}

std::vector<array> lu(const array& a, StreamOrDevice s) {
  check_matrix("linalg::lu", a);
  check_float("linalg::lu", a);
  auto out = multi_node(LinalgOp::LUF, a, {a.dtype(), uint32, uint32}, s);
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  Shape lo(a.ndim(), 0), hi = a.shape();
  hi.back() = k;
  array L = add(tril(slice(out[0], lo, hi, s), -1, s), eye(m, k, 0, a.dtype(), s), s);
  hi = a.shape();
  hi[a.ndim() - 2] = k;
  array U = triu(slice(out[0], lo, hi, s), 0, s);
  return {out[2], L, U};
}

std::pair<array, array> lu_factor(const array& a, StreamOrDevice s) {
  check_matrix("linalg::lu_factor", a);
  check_float("linalg::lu_factor", a);
  auto out = multi_node(LinalgOp::LUF, a, {a.dtype(), uint32, uint32}, s);
  return {out[0], out[1]};
}

namespace {

// solve and solve_triangular: b (..., N) is one right-hand side, (..., N, R) several; batch
// axes broadcast; both operands cast to the promoted float dtype.
array solve_impl(const char* op, LinalgOp kind, const array& a_in, const array& b_in, bool upper, StreamOrDevice s) {
  check_square(op, a_in);
  if (b_in.ndim() < 1) {
    throw_invalid_argument(op, "b must have at least 1 dimension; got shape ", b_in.shape(), ".");
  }
  bool b_vec = b_in.ndim() == 1;
  int n = a_in.shape(-1);
  if (b_in.shape(b_vec ? -1 : -2) != n) {
    throw_invalid_argument(
        op, "b's rows must match a's size; got shapes ", a_in.shape(), " and ", b_in.shape(), ".");
  }
  Dtype dt = promote_types(a_in.dtype(), b_in.dtype());
  if (dt != float32 && dt != float64) {
    throw_invalid_argument(
        op, "inputs must promote to float32 or float64; got ", a_in.dtype(), " and ", b_in.dtype(), ".");
  }
  array a = a_in.dtype() == dt ? a_in : astype(a_in, dt, s);
  array b = b_in.dtype() == dt ? b_in : astype(b_in, dt, s);
  if (b_vec) b = expand_dims(b, -1, s);
  Shape batch = broadcast_shapes(
      Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2));
  Shape ashape = batch, bshape = batch;
  ashape.insert(ashape.end(), {n, n});
  bshape.insert(bshape.end(), {n, b.shape(-1)});
  if (a.shape() != ashape) a = broadcast_to(a, ashape, s);
  if (b.shape() != bshape) b = broadcast_to(b, bshape, s);
  array x(bshape, dt, node(kind, s, upper), {a, b});
  return b_vec ? squeeze(x, -1, s) : x;
}

} // namespace

array solve(const array& a, const array& b, StreamOrDevice s) {
  return solve_impl("linalg::solve", LinalgOp::Solve, a, b, false, s);
}

array solve_triangular(const array& a, const array& b, bool upper, StreamOrDevice s) {
  return solve_impl("linalg::solve_triangular", LinalgOp::SolveTriangular, a, b, upper, s);
}

array cross(const array& a_in, const array& b_in, int axis, StreamOrDevice s) {
  auto prepare = [&](const array& x) {
    int ax = normalize_axis_index(axis, static_cast<int>(x.ndim()), "linalg::cross");
    int d = x.shape(ax);
    if (d != 2 && d != 3) {
      throw_invalid_argument(
          "linalg::cross", "the size of axis ", axis, " must be 2 or 3; got shape ", x.shape(), ".");
    }
    // A 2-vector is a 3-vector with a zero third component.
    return d == 3 ? x : pad(x, std::vector<int>{ax}, Shape{0}, Shape{1}, array(0), "constant", s);
  };
  Dtype dt = promote_types(a_in.dtype(), b_in.dtype());
  array a = prepare(a_in.dtype() == dt ? a_in : astype(a_in, dt, s));
  array b = prepare(b_in.dtype() == dt ? b_in : astype(b_in, dt, s));
  auto ab = broadcast_arrays({a, b}, s);
  int ax = axis < 0 ? axis + static_cast<int>(ab[0].ndim()) : axis;
  auto x = split(ab[0], 3, ax, s), y = split(ab[1], 3, ax, s);
  auto term = [&](int i, int j) {
    return subtract(multiply(x[i], y[j], s), multiply(x[j], y[i], s), s);
  };
  return concatenate({term(1, 2), term(2, 0), term(0, 1)}, ax, s);
}

std::pair<array, array> eigh(const array& a, std::string UPLO, StreamOrDevice s) {
  check_square("linalg::eigh", a);
  check_float("linalg::eigh", a);
  if (UPLO != "L" && UPLO != "U") {
    throw_invalid_argument("linalg::eigh", "UPLO must be 'L' or 'U'; got '", UPLO, "'.");
  }
  auto out = multi_node(LinalgOp::Eigh, a, {a.dtype(), a.dtype()}, s, UPLO == "U", true);
  return {out[0], out[1]};
}

array eigvalsh(const array& a, std::string UPLO, StreamOrDevice s) {
  check_square("linalg::eigvalsh", a);
  check_float("linalg::eigvalsh", a);
  if (UPLO != "L" && UPLO != "U") {
    throw_invalid_argument("linalg::eigvalsh", "UPLO must be 'L' or 'U'; got '", UPLO, "'.");
  }
  return multi_node(LinalgOp::Eigh, a, {a.dtype()}, s, UPLO == "U", false)[0];
}

std::pair<array, array> eig(const array& a, StreamOrDevice s) {
  check_square("linalg::eig", a);
  check_float("linalg::eig", a);
  auto out = multi_node(LinalgOp::Eig, a, {complex64, complex64}, s, false, true);
  return {out[0], out[1]};
}

array eigvals(const array& a, StreamOrDevice s) {
  check_square("linalg::eigvals", a);
  check_float("linalg::eigvals", a);
  return multi_node(LinalgOp::Eig, a, {complex64}, s, false, false)[0];
}

std::pair<array, array> slogdet(const array& a, StreamOrDevice s) {
  check_square("linalg::slogdet", a);
  check_float("linalg::slogdet", a);
  auto out = multi_node(LinalgOp::SlogDet, a, {a.dtype(), a.dtype()}, s);
  return {out[0], out[1]};
}

array det(const array& a, StreamOrDevice s) {
  check_square("linalg::det", a);
  check_float("linalg::det", a);
  auto [sign, logabs] = slogdet(a, s);
  return multiply(sign, exp(logabs, s), s);
}

} // namespace nuvec::linalg
