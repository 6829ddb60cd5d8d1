// nuvec: the linear-algebra primitive family (factorizations and solves run through LAPACKE).
// Rules in src/primitives/linalg.cpp, CPU kernel in src/backend/cpu/linalg.cpp, public ops in
// src/ops/linalg.cpp. Kept out of primitives.h so adding it recompiles no other family.
#pragma once

#include "primitives/primitives.h"

namespace nuvec {

/// One row per LAPACK-backed computation. Inputs are (..., M, N) matrices batched over the
/// leading axes (Solve and SolveTriangular: (a, b) with equal batch shapes, b (..., N, R)).
enum class LinalgOp {
  Inverse,          // X = A^-1
  TriInv,           // X = tri(A)^-1 (upper_ picks the triangle)
  Cholesky,         // L (or U = L^T when upper_)
  QRF,              // (Q (..., M, K), R (..., K, N))
  SVD,              // (U, S, Vt) full matrices, or (S) when !compute_
  Eigh,             // (w, V), or (w) when !compute_; upper_ picks the triangle read
  Eig,              // general square: (w, V) complex64, or (w) when !compute_
  LUF,              // (LU, pivots uint32 (..., K), row indices uint32 (..., M))
  Solve,            // X = A^-1 B
  SolveTriangular,  // X = tri(A)^-1 B
  SlogDet,          // (sign, log|det|)
};

class Linalg : public Primitive {
 public:
  Linalg(Stream stream, LinalgOp op, bool upper = false, bool compute = true)
      : Primitive(stream), op_(op), upper_(upper), compute_(compute) {}
  LinalgOp op() const { return op_; }
  bool upper() const { return upper_; }
  bool compute() const { return compute_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<LinalgOp, bool, bool> state() const { return {op_, upper_, compute_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  LinalgOp op_;
  bool upper_;   // triangle used (TriInv, Cholesky, SolveTriangular, Eigh's UPLO == "U")
  bool compute_; // SVD: compute_uv; Eigh, Eig: eigenvectors
};

/// The public op name of each row, for error messages ("linalg::inv", ...).
const char* linalg_op_name(LinalgOp op);

} // namespace nuvec
