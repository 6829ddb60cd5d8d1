// nuvec: structured products composed from public ops (so derivatives and batching come from
// their rules): hadamard_transform (butterfly steps, then an order-12/20/28 matrix by matmul),
// block_masked_mm (masks expanded to elements), segmented_mm (masked inner axis). Semantics
// and signatures are MLX's. gather_mm is a fused node: src/quantized/gather_mm.cpp.
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/ops_common.h"

namespace nuvec {

namespace {

void check_matrices(const char* op, const array& a, const array& b) {
  if (a.ndim() < 2 || b.ndim() < 2) {
    throw_invalid_argument(op, "operands must have at least 2 dimensions; got shapes ", a.shape(), " and ", b.shape(), ".");
  }
  if (a.shape(-1) != b.shape(-2)) {
    throw_invalid_argument(
        op, "inner dimensions must match; got shapes ", a.shape(), " and ", b.shape(), ".");
  }
}

void check_integer(const char* op, const char* what, const array& x) {
  if (!issubdtype(x.dtype(), integer)) {
    throw_invalid_argument(op, what, " must have an integer dtype; got ", x.dtype(), ".");
  }
}

} // namespace

namespace {

// Rows of the Hadamard matrices of order 12, 20 and 28 that MLX uses (Sloane's library,
// neilsloane.com/hadamard): bit k of row j is set where entry (j, k) is +1, else it is -1.
constexpr uint32_t kHadamard12[12] = {
    0x0000ffd, 0x0000554, 0x0000c37, 0x0000691, 0x00000df, 0x0000a45,
    0x0000373, 0x0000919, 0x0000dc3, 0x0000469, 0x000070f, 0x00001a5};
constexpr uint32_t kHadamard20[20] = {
    0x006cc21, 0x00d1c42, 0x00ab884, 0x005f108, 0x00b6610, 0x009c83e, 0x003945d,
    0x007289b, 0x00e5117, 0x00ca60f, 0x00f05ac, 0x00e8b58, 0x00d92b1, 0x00ba163,
    0x007c2c6, 0x0008592, 0x0010b05, 0x002122a, 0x0042074, 0x00840c9};
constexpr uint32_t kHadamard28[28] = {
    0x3296181, 0x6528382, 0xc854704, 0x92a8e08, 0x2751c10, 0x4ca7820, 0x994b0c0,
    0x4b980bc, 0x9534178, 0x2a6c271, 0x54d8463, 0xa9b0847, 0x536500f, 0xa4ce01e,
    0x7804cda, 0xf009935, 0xe21326a, 0xc6224d5, 0x8e409ab, 0x1e81356, 0x3d0262d,
    0x030ed66, 0x041dacd, 0x083b51b, 0x1072ab6, 0x20e15ec, 0x41c2b59, 0x81856b3};

// The m x m matrix of order m (12, 20 or 28) as float64 +-1 entries.
array hadamard_matrix(int m) {
  const uint32_t* rows = m == 12 ? kHadamard12 : m == 20 ? kHadamard20 : kHadamard28;
  std::vector<double> h(static_cast<size_t>(m) * m);
  for (int j = 0; j < m; ++j) {
    for (int k = 0; k < m; ++k) h[j * m + k] = (rows[j] >> k) & 1u ? 1.0 : -1.0;
  }
  return array(h.begin(), {m, m}, float64);
}

} // namespace

array hadamard_transform(const array& a, std::optional<float> scale, StreamOrDevice s) {
  const char* op = "hadamard_transform";
  const int n = a.ndim() > 0 ? a.shape(-1) : 1;
  if (n == 1) {
    // A 0-d array or an axis of one: the 1 x 1 transform, MLX's rule (the input itself at the
    // default scale 1 / sqrt(1), whatever its dtype; else times the scale).
    if (a.dtype() == complex64) throw_invalid_argument(op, "input must be real; got complex64.");
    if (!scale || *scale == 1.0f) return a;
    return multiply(a, array(*scale, issubdtype(a.dtype(), floating) ? a.dtype() : float32), s);
  }
  // n = m * 2^k with m the first of 1, 12, 20, 28 leaving a power of two (at most one does).
  int m = 0;
  for (int f : {1, 12, 20, 28}) {
    if (n > 0 && n % f == 0 && ((n / f) & (n / f - 1)) == 0) {
      m = f;
      break;
    }
  }
  if (m == 0) {
    throw_invalid_argument(
        op, "the last axis must have length m * 2^k with m in {1, 12, 20, 28}; got ", n, ".");
  }
  Dtype dtype = float_result_type(a.dtype());
  if (dtype == complex64) throw_invalid_argument(op, "input must be real; got complex64.");
  array x = astype(a, dtype, s);
  const Shape shape = x.shape();
  const int p = n / m; // the 2^k factor, along the fastest-varying part of the axis
  const int rows = static_cast<int>(x.size() / n);
  // Sylvester part, step h: elements h apart inside blocks of 2h become (u + v, u - v).
  for (int h = 1; h < p; h *= 2) {
    array y = reshape(x, {rows, m * p / (2 * h), 2, h}, s);
    array u = slice(y, {0, 0, 0, 0}, {rows, m * p / (2 * h), 1, h}, s);
    array v = slice(y, {0, 0, 1, 0}, {rows, m * p / (2 * h), 2, h}, s);
    x = concatenate({add(u, v, s), subtract(u, v, s)}, 2, s);
  }
  // The order-m part mixes the m blocks of length p: (H_m kron H_p) x, with H_m in front.
  if (m > 1) {
    x = matmul(astype(hadamard_matrix(m), dtype, s), reshape(x, {rows, m, p}, s), s);
  }
  x = reshape(x, shape, s);
  // The default scale in double, so float64 inputs keep their precision.
  double sc = scale ? static_cast<double>(*scale) : 1.0 / std::sqrt(static_cast<double>(n));
  return multiply(x, astype(array(sc, float64), dtype, s), s);
}

namespace {

// A block mask (..., r, c) expanded to elements (..., rows, cols): each entry covers a
// block_size x block_size tile; the last tiles are cropped.
array expand_mask(const char* op, const char* what, const array& mask, int block, int rows, int cols, StreamOrDevice s) {
  int r = (rows + block - 1) / block, c = (cols + block - 1) / block;
  if (mask.ndim() < 2 || mask.shape(-2) != r || mask.shape(-1) != c) {
    throw_invalid_argument(
        op, what, " must have shape (..., ", r, ", ", c, "); got ", mask.shape(), ".");
  }
  array m = repeat(repeat(mask, block, -2, s), block, -1, s);
  Shape start(m.ndim(), 0), stop = m.shape();
  stop[m.ndim() - 2] = rows;
  stop[m.ndim() - 1] = cols;
  return slice(m, start, stop, s);
}

// x with a mask applied: bool masks select (so masked infinities vanish), others scale.
array apply_mask(const array& x, const array& m, StreamOrDevice s) {
  if (m.dtype() == bool_) return where(m, x, zeros_like(x, s), s);
  return multiply(x, m, s);
}

} // namespace

array block_masked_mm(
    array a,
    array b,
    int block_size,
    std::optional<array> mask_out,
    std::optional<array> mask_lhs,
    std::optional<array> mask_rhs,
    StreamOrDevice s) {
  const char* op = "block_masked_mm";
  if (block_size <= 0) throw_invalid_argument(op, "block_size must be positive; got ", block_size, ".");
  check_matrices(op, a, b);
  int m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
  if (mask_lhs) a = apply_mask(a, expand_mask(op, "mask_lhs", *mask_lhs, block_size, m, k, s), s);
  if (mask_rhs) b = apply_mask(b, expand_mask(op, "mask_rhs", *mask_rhs, block_size, k, n, s), s);
  array out = matmul(a, b, s);
  if (mask_out) out = apply_mask(out, expand_mask(op, "mask_out", *mask_out, block_size, m, n, s), s);
  return out;
}

array segmented_mm(array a, array b, array segments, StreamOrDevice s) {
  const char* op = "segmented_mm";
  check_matrices(op, a, b);
  check_integer(op, "segments", segments);
  if (segments.ndim() < 2 || segments.shape(-1) != 2) {
    throw_invalid_argument(op, "segments must have shape (..., S, 2); got ", segments.shape(), ".");
  }
  int k = a.shape(-1);
  Shape start(segments.ndim(), 0), stop = segments.shape();
  stop.back() = 1;
  array lo = slice(segments, start, stop, s); // (..., S, 1)
  start.back() = 1;
  stop.back() = 2;
  array hi = slice(segments, start, stop, s);
  array pos = arange(k, s); // (K,)
  array inside = logical_and(greater_equal(pos, lo, s), less(pos, hi, s), s); // (..., S, K)
  array mask = expand_dims(inside, -2, s); // (..., S, 1, K)
  array ae = expand_dims(a, -3, s); // (..., 1, M, K)
  array masked = where(mask, ae, zeros_like(ae, s), s); // (..., S, M, K)
  return matmul(masked, expand_dims(b, -3, s), s);
}

} // namespace nuvec
