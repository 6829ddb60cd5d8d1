// nuvec: rules of the Linalg family (names, shapes, vjp, jvp, vmap, equivalence). Derivatives
// are the standard matrix-calculus results, written as graphs of public ops (so they
// differentiate again): inverse -X dA X; Cholesky per Murray 2016 ("Differentiation of the
// Cholesky decomposition"); reduced QR per Walter & Lehmann / Liao et al. 2019; SVD per
// Townsend 2016; symmetric eigendecomposition with F_ij = 1/(w_j - w_i); solves by implicit
// differentiation of A X = B; log|det| with inv(A)^T. vmap moves batch axes to the front:
// the kernels batch over leading axes.
#include <stdexcept>

#include "core/errors.h"
#include "nuvec/linalg.h"
#include "primitives/batching.h"
#include "primitives/linalg.h"

namespace nuvec {

namespace {

array mT(const array& a) {
  return swapaxes(a, -1, -2);
}

array half(const array& a) {
  return multiply(a, array(0.5, a.dtype()));
}

// The symmetric part (A + A^T) / 2: symmetric-input factorizations read one triangle, so
// their derivatives are taken along symmetric directions.
array sym(const array& a) {
  return half(add(a, mT(a)));
}

array eye_as(const array& a) {
  return eye(a.shape(-1), a.dtype());
}

array tri(const array& a, bool upper) {
  return upper ? triu(a) : tril(a);
}

// Murray's Phi: the lower triangle with the diagonal halved.
array phi(const array& a) {
  return subtract(tril(a), half(multiply(a, eye_as(a))));
}

// x[..., :, start:stop] and x[..., start:stop, :].
array cols(const array& x, int start, int stop) {
  Shape lo(x.ndim(), 0), hi = x.shape();
  lo.back() = start;
  hi.back() = stop;
  return slice(x, lo, hi);
}
array rows(const array& x, int start, int stop) {
  Shape lo(x.ndim(), 0), hi = x.shape();
  lo[x.ndim() - 2] = start;
  hi[x.ndim() - 2] = stop;
  return slice(x, lo, hi);
}

array diag_of(const array& a) {
  return diagonal(a, 0, -2, -1);
}

// A diagonal matrix from the last axis of v.
array diag_embed(const array& v) {
  return multiply(expand_dims(v, -1), eye(v.shape(-1), v.dtype()));
}

// F_ij = 1 / (v_j - v_i) off the diagonal, 0 on it (infinite for repeated values).
array inverse_gaps(const array& v) {
  array I = eye(v.shape(-1), v.dtype());
  array gaps = subtract(expand_dims(v, -2), expand_dims(v, -1));
  return divide(subtract(array(1.0, v.dtype()), I), add(gaps, I));
}

// The sum of the terms that are present (the tangents of the differentiated inputs).
array sum_present(std::optional<array> a, std::optional<array> b) {
  if (a && b) return add(*a, *b);
  return a ? *a : *b;
}

Shape batch_shape(const array& a, int drop) {
  return Shape(a.shape().begin(), a.shape().end() - drop);
}

[[noreturn]] void no_derivative(LinalgOp op, const char* why) {
  throw_invalid_argument(linalg_op_name(op), "derivative ", why);
}

} // namespace

const char* linalg_op_name(LinalgOp op) {
  switch (op) {
    case LinalgOp::Inverse: return "linalg::inv";
    case LinalgOp::TriInv: return "linalg::tri_inv";
    case LinalgOp::Cholesky: return "linalg::cholesky";
    case LinalgOp::QRF: return "linalg::qr";
    case LinalgOp::SVD: return "linalg::svd";
    case LinalgOp::Eigh: return "linalg::eigh";
    case LinalgOp::Eig: return "linalg::eig";
    case LinalgOp::LUF: return "linalg::lu_factor";
    case LinalgOp::Solve: return "linalg::solve";
    case LinalgOp::SolveTriangular: return "linalg::solve_triangular";
    case LinalgOp::SlogDet: return "linalg::slogdet";
  }
  return "linalg";
}

const char* Linalg::name() const {
  switch (op_) {
    case LinalgOp::Inverse: return "Inverse";
    case LinalgOp::TriInv: return "TriInv";
    case LinalgOp::Cholesky: return "Cholesky";
    case LinalgOp::QRF: return "QRF";
    case LinalgOp::SVD: return "SVD";
    case LinalgOp::Eigh: return "Eigh";
    case LinalgOp::Eig: return "Eig";
    case LinalgOp::LUF: return "LUF";
    case LinalgOp::Solve: return "Solve";
    case LinalgOp::SolveTriangular: return "SolveTriangular";
    case LinalgOp::SlogDet: return "SlogDet";
  }
  return "Linalg";
}

std::vector<Shape> Linalg::output_shapes(const std::vector<array>& inputs) {
  const array& a = inputs[0];
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto with = [&](std::initializer_list<int> tail) {
    Shape s = batch_shape(a, 2);
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  switch (op_) {
    case LinalgOp::Inverse:
    case LinalgOp::TriInv:
    case LinalgOp::Cholesky: return {a.shape()};
    case LinalgOp::QRF: return {with({m, k}), with({k, n})};
    case LinalgOp::SVD:
      if (!compute_) return {with({k})};
      return {with({m, m}), with({k}), with({n, n})};
    case LinalgOp::Eigh:
    case LinalgOp::Eig:
      if (!compute_) return {with({n})};
      return {with({n}), a.shape()};
    case LinalgOp::LUF: return {a.shape(), with({k}), with({m})};
    case LinalgOp::Solve:
    case LinalgOp::SolveTriangular: return {inputs[1].shape()};
    case LinalgOp::SlogDet: return {with({}), with({})};
  }
  return {};
}

std::vector<array> Linalg::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& A = primals[0];
  std::vector<array> grads;
  switch (op_) {
    case LinalgOp::Inverse:
    case LinalgOp::TriInv: {
      // d<G, X> = <G, -X dA X> = <-X^T G X^T, dA>; tri_inv only sees one triangle.
      array Xt = mT(outputs[0]);
      array g = negative(matmul(matmul(Xt, cotangents[0]), Xt));
      grads.push_back(op_ == LinalgOp::TriInv ? tri(g, upper_) : g);
      break;
    }
    case LinalgOp::Cholesky: {
      // Symmetric gradient sym(L^-T Phi(L^T Lbar) L^-1) for A = L L^T (U = L^T when upper).
      array L = upper_ ? mT(outputs[0]) : outputs[0];
      array Lbar = upper_ ? mT(cotangents[0]) : cotangents[0];
      array Linv = linalg::tri_inv(L, false);
      array S = matmul(matmul(mT(Linv), phi(matmul(mT(L), Lbar))), Linv);
      grads.push_back(sym(S));
      break;
    }
    case LinalgOp::QRF: {
      if (A.shape(-2) < A.shape(-1)) no_derivative(op_, "of qr needs M >= N; got a wide matrix.");
      const array &Q = outputs[0], &R = outputs[1];
      const array &Qbar = cotangents[0], &Rbar = cotangents[1];
      array M = subtract(matmul(R, mT(Rbar)), matmul(mT(Qbar), Q));
      array copyltu = add(tril(M), mT(tril(M, -1)));
      array Rinv = linalg::tri_inv(R, true);
      grads.push_back(matmul(add(Qbar, matmul(Q, copyltu)), mT(Rinv)));
      break;
    }
    case LinalgOp::SVD: {
      int m = A.shape(-2), n = A.shape(-1), k = std::min(m, n);
      std::vector<array> usv = compute_ ? outputs : linalg::svd(A, true, stream());
      array S = usv[1];
      array Sbar = cotangents[compute_ ? 1 : 0];
      array Uk = cols(usv[0], 0, k), Vk = mT(rows(usv[2], 0, k));
      array inner = diag_embed(Sbar);
      array Abar_extra = zeros_like(A);
      if (compute_) {
        array Ubar = cols(cotangents[0], 0, k), Vbar = mT(rows(cotangents[2], 0, k));
        array F = inverse_gaps(square(S));
        array J = multiply(F, subtract(matmul(mT(Uk), Ubar), matmul(mT(Ubar), Uk)));
        array K = multiply(F, subtract(matmul(mT(Vk), Vbar), matmul(mT(Vbar), Vk)));
        array Srow = expand_dims(S, -2), Scol = expand_dims(S, -1);
        inner = add(inner, add(multiply(J, Srow), multiply(Scol, K)));
        array Sinv = reciprocal(Srow);
        // Components of Ubar (Vbar) outside the column space of U_k (V_k).
        array Pu = subtract(eye(m, A.dtype()), matmul(Uk, mT(Uk)));
        array Pv = subtract(eye(n, A.dtype()), matmul(Vk, mT(Vk)));
        Abar_extra = add(
            matmul(matmul(Pu, multiply(Ubar, Sinv)), mT(Vk)),
            matmul(multiply(Uk, Sinv), matmul(mT(Vbar), Pv)));
      }
      grads.push_back(add(matmul(matmul(Uk, inner), mT(Vk)), Abar_extra));
      break;
    }
    case LinalgOp::Eigh: {
      std::pair<array, array> wv = compute_
          ? std::pair<array, array>{outputs[0], outputs[1]}
          : linalg::eigh(A, upper_ ? "U" : "L", stream());
      const array& V = wv.second;
      array inner = diag_embed(cotangents[0]);
      if (compute_) {
        inner = add(inner, multiply(inverse_gaps(wv.first), matmul(mT(V), cotangents[1])));
      }
      grads.push_back(sym(matmul(matmul(V, inner), mT(V))));
      break;
    }
    case LinalgOp::Eig: no_derivative(op_, "is not implemented for eig / eigvals (MLX has none).");
    case LinalgOp::LUF: no_derivative(op_, "is not implemented for lu / lu_factor.");
    case LinalgOp::Solve:
    case LinalgOp::SolveTriangular: {
      // A X = B: Bbar = A^-T Xbar, Abar = -Bbar X^T.
      const array& X = outputs[0];
      array Bbar = op_ == LinalgOp::Solve
          ? linalg::solve(mT(A), cotangents[0], stream())
          : linalg::solve_triangular(mT(A), cotangents[0], !upper_, stream());
      for (int arg : argnums) {
        if (arg == 1) {
          grads.push_back(Bbar);
        } else {
          array g = negative(matmul(Bbar, mT(X)));
          grads.push_back(op_ == LinalgOp::Solve ? g : tri(g, upper_));
        }
      }
      return grads;
    }
    case LinalgOp::SlogDet: {
      // d log|det A| = tr(A^-1 dA); the sign is piecewise constant.
      array g = expand_dims(cotangents[1], {-2, -1});
      grads.push_back(multiply(g, mT(linalg::inv(A, stream()))));
      break;
    }
  }
  return grads;
}

std::vector<array> Linalg::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array& A = primals[0];
  switch (op_) {
    case LinalgOp::Inverse:
    case LinalgOp::TriInv: {
      array X = op_ == LinalgOp::Inverse ? linalg::inv(A, stream()) : linalg::tri_inv(A, upper_, stream());
      array dA = op_ == LinalgOp::TriInv ? tri(tangents[0], upper_) : tangents[0];
      return {negative(matmul(matmul(X, dA), X))};
    }
    case LinalgOp::Cholesky: {
      array L = linalg::cholesky(A, false, stream());
      array Linv = linalg::tri_inv(L, false);
      array dL = matmul(L, phi(matmul(matmul(Linv, sym(tangents[0])), mT(Linv))));
      return {upper_ ? mT(dL) : dL};
    }
    case LinalgOp::QRF: {
      if (A.shape(-2) < A.shape(-1)) no_derivative(op_, "of qr needs M >= N; got a wide matrix.");
      auto [Q, R] = linalg::qr(A, stream());
      const array& dA = tangents[0];
      array Rinv = linalg::tri_inv(R, true);
      array C = matmul(matmul(mT(Q), dA), Rinv);
      array dR = matmul(add(triu(C), mT(tril(C, -1))), R);
      array dQ = matmul(subtract(dA, matmul(Q, dR)), Rinv);
      return {dQ, dR};
    }
    case LinalgOp::SVD: {
      int m = A.shape(-2), n = A.shape(-1), k = std::min(m, n);
      auto usv = linalg::svd(A, true, stream());
      const array &U = usv[0], &S = usv[1], &Vt = usv[2];
      const array& dA = tangents[0];
      array Uk = cols(U, 0, k), Vk = mT(rows(Vt, 0, k));
      array P = matmul(matmul(mT(Uk), dA), Vk);
      array dS = diag_of(P);
      if (!compute_) return {dS};
      array F = inverse_gaps(square(S));
      array Srow = expand_dims(S, -2), Scol = expand_dims(S, -1);
      array Sinv = reciprocal(Srow);
      array Pu = subtract(eye(m, A.dtype()), matmul(Uk, mT(Uk)));
      array Pv = subtract(eye(n, A.dtype()), matmul(Vk, mT(Vk)));
      array dUk = add(
          matmul(Uk, multiply(F, add(multiply(P, Srow), multiply(Scol, mT(P))))),
          multiply(matmul(matmul(Pu, dA), Vk), Sinv));
      array dVk = add(
          matmul(Vk, multiply(F, add(multiply(Scol, P), multiply(mT(P), Srow)))),
          multiply(matmul(matmul(Pv, mT(dA)), Uk), Sinv));
      // Columns beyond K are not determined by A; this keeps them orthogonal to the rest.
      array dU = dUk, dV = dVk;
      if (m > k) {
        array Uperp = cols(U, k, m);
        dU = concatenate({dUk, negative(matmul(Uk, matmul(mT(dUk), Uperp)))}, -1);
      }
      if (n > k) {
        array Vperp = mT(rows(Vt, k, n));
        dV = concatenate({dVk, negative(matmul(Vk, matmul(mT(dVk), Vperp)))}, -1);
      }
      return {dU, dS, mT(dV)};
    }
    case LinalgOp::Eigh: {
      auto [w, V] = linalg::eigh(A, upper_ ? "U" : "L", stream());
      array P = matmul(matmul(mT(V), sym(tangents[0])), V);
      array dw = diag_of(P);
      if (!compute_) return {dw};
      return {dw, matmul(V, multiply(inverse_gaps(w), P))};
    }
    case LinalgOp::Eig: no_derivative(op_, "is not implemented for eig / eigvals (MLX has none).");
    case LinalgOp::LUF: no_derivative(op_, "is not implemented for lu / lu_factor.");
    case LinalgOp::Solve:
    case LinalgOp::SolveTriangular: {
      // A dX = dB - dA X.
      std::optional<array> dB, minus_dAX;
      array X = op_ == LinalgOp::Solve
          ? linalg::solve(A, primals[1], stream())
          : linalg::solve_triangular(A, primals[1], upper_, stream());
      for (size_t i = 0; i < argnums.size(); ++i) {
        if (argnums[i] == 1) {
          dB = tangents[i];
        } else {
          array dA = op_ == LinalgOp::Solve ? tangents[i] : tri(tangents[i], upper_);
          minus_dAX = negative(matmul(dA, X));
        }
      }
      array rhs = sum_present(dB, minus_dAX);
      return {op_ == LinalgOp::Solve ? linalg::solve(A, rhs, stream())
                                     : linalg::solve_triangular(A, rhs, upper_, stream())};
    }
    case LinalgOp::SlogDet: {
      array dlog = sum(multiply(mT(linalg::inv(A, stream())), tangents[0]), {-2, -1});
      return {zeros(batch_shape(A, 2), A.dtype()), dlog};
    }
  }
  return {};
}

std::pair<std::vector<array>, std::vector<int>> Linalg::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // Unbatched operands of a two-input solve get a broadcast batch axis so that both keep
  // equal batch shapes, the kernel's invariant.
  auto in = any_batched(axes) ? batch_first(inputs, axes, true) : inputs;
  int out_axis = any_batched(axes) ? 0 : -1;
  Dtype dt = in[0].dtype();
  auto shapes = output_shapes(in);
  std::vector<Dtype> dtypes(shapes.size(), dt);
  if (op_ == LinalgOp::LUF) dtypes = {dt, uint32, uint32};
  if (op_ == LinalgOp::Eig) dtypes.assign(shapes.size(), complex64);
  auto outs = array::make_arrays(
      shapes, dtypes, std::make_shared<Linalg>(stream(), op_, upper_, compute_), in);
  return {outs, std::vector<int>(outs.size(), out_axis)};
}

bool Linalg::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Linalg*>(&other);
  return o && o->op_ == op_ && o->upper_ == upper_ && o->compute_ == compute_;
}

} // namespace nuvec
