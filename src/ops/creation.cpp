// nuvec: creation and copy ops (arange, linspace, astype, as_strided, copy, full and its
// shorthands, eye, tri/tril/triu, meshgrid) with MLX's (NumPy's) semantics.
#include <cmath>
#include <limits>

#include "ops/ops_common.h"

namespace nuvec {

// ---- arange / linspace ----------------------------------------------------------------

array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s) {
  if (dtype == bool_) throw_invalid_argument("arange", "dtype must not be bool; got bool.");
  if (std::isnan(start) || std::isnan(stop) || std::isnan(step)) {
    throw_invalid_argument(
        "arange", "start, stop and step must not be NaN; got ", start, ", ", stop, ", ", step, ".");
  }
  if (step == 0) throw_invalid_argument("arange", "step must be non-zero; got 0.");
  if (std::isinf(start) || std::isinf(stop)) {
    throw_invalid_argument("arange", "start and stop must be finite; got ", start, " and ", stop, ".");
  }
  double n = std::ceil((stop - start) / step);
  if (std::isinf(step)) {
    // One element when the range goes the step's way, none otherwise.
    n = (step > 0 && start < stop) || (step < 0 && start > stop) ? 1 : 0;
  }
  n = std::max(n, 0.0);
  if (n > static_cast<double>(std::numeric_limits<int32_t>::max())) {
    throw_invalid_argument("arange", "the length must fit in int32; got ", n, ".");
  }
  double stop_ = std::isinf(step) ? start + (n > 0 ? 1 : 0) : stop;
  double step_ = std::isinf(step) ? 1.0 : step;
  return array(
      {static_cast<int32_t>(n)}, dtype,
      std::make_shared<Arange>(to_stream(s), start, stop_, step_), {});
}

array arange(double start, double stop, double step, StreamOrDevice s) {
  return arange(start, stop, step, float32, s);
}
array arange(double start, double stop, Dtype dtype, StreamOrDevice s) {
  return arange(start, stop, 1.0, dtype, s);
}
array arange(double start, double stop, StreamOrDevice s) {
  return arange(start, stop, 1.0, float32, s);
}
array arange(double stop, Dtype dtype, StreamOrDevice s) {
  return arange(0.0, stop, 1.0, dtype, s);
}
array arange(double stop, StreamOrDevice s) {
  return arange(0.0, stop, 1.0, float32, s);
}
array arange(int start, int stop, int step, StreamOrDevice s) {
  return arange(static_cast<double>(start), stop, step, int32, s);
}
array arange(int start, int stop, StreamOrDevice s) {
  return arange(static_cast<double>(start), stop, 1.0, int32, s);
}
array arange(int stop, StreamOrDevice s) {
  return arange(0.0, static_cast<double>(stop), 1.0, int32, s);
}

array linspace(double start, double stop, int num, bool endpoint, Dtype dtype, StreamOrDevice s) {
  if (num < 0) throw_invalid_argument("linspace", "num must be non-negative; got ", num, ".");
  if (num == 1) return astype(array(std::initializer_list<double>{start}, float64), dtype, s);
  // The values are start + i * step computed in float64, then cast once.
  const int divisions = endpoint ? num - 1 : num;
  double step = divisions > 0 ? (stop - start) / divisions : 1.0;
  array values(
      {num}, float64, std::make_shared<Arange>(to_stream(s), start, start + num * step, step), {});
  // Integer dtypes round down, as NumPy (1.20 on) does; a cast would truncate toward zero.
  if (issubdtype(dtype, integer)) values = floor(values, s);
  return astype(values, dtype, s);
}

array linspace(double start, double stop, int num, Dtype dtype, StreamOrDevice s) {
  return linspace(start, stop, num, true, dtype, s);
}

// ---- casts and copies -----------------------------------------------------------------

array astype(array a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  return array(a.shape(), dtype, std::make_shared<AsType>(to_stream(s), dtype), {a});
}

array as_strided(array a, Shape shape, Strides strides, size_t offset, StreamOrDevice s) {
  if (shape.size() != strides.size()) {
    throw_invalid_argument(
        "as_strided", "strides must have one entry per dimension of ", shape, "; got ", strides,
        ".");
  }
  for (auto d : shape) {
    if (d < 0) throw_invalid_argument("as_strided", "shape must be non-negative; got ", shape, ".");
  }
  // Every addressed element must lie inside a (NumPy's as_strided does not check; reading
  // past the buffer would be a silent wrong answer or a crash).
  bool empty = false;
  int64_t lo = static_cast<int64_t>(offset), hi = lo;
  for (size_t i = 0; i < shape.size(); ++i) {
    empty |= shape[i] == 0;
    int64_t span = int64_t(shape[i] - 1) * strides[i];
    (span < 0 ? lo : hi) += span;
  }
  if (!empty && (lo < 0 || hi >= static_cast<int64_t>(a.size()))) {
    throw_invalid_argument(
        "as_strided", "shape ", shape, ", strides ", strides, " and offset ", offset,
        " must address elements inside the input of size ", a.size(), "; got elements ", lo,
        " to ", hi, ".");
  }
  // Strides and offset address a's elements in row-major order.
  array x = reshape(a, {-1}, s);
  return array(
      shape, a.dtype(),
      std::make_shared<AsStrided>(to_stream(s), shape, std::move(strides), offset), {x});
}

array copy(array a, StreamOrDevice s) {
  return array(a.shape(), a.dtype(), std::make_shared<Copy>(to_stream(s)), {a});
}

// ---- full and its shorthands ----------------------------------------------------------

array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s) {
  for (auto d : shape) {
    if (d < 0) throw_invalid_argument("full", "shape must be non-negative; got ", shape, ".");
  }
  bool ok = shape.size() >= vals.ndim();
  size_t off = ok ? shape.size() - vals.ndim() : 0;
  for (size_t i = 0; ok && i < vals.ndim(); ++i) {
    ok = vals.shape()[i] == shape[off + i] || vals.shape()[i] == 1;
  }
  if (!ok) {
    throw_invalid_argument(
        "full", "vals must broadcast to ", shape, "; got shape ", vals.shape(), ".");
  }
  array v = broadcast_to(astype(std::move(vals), dtype, s), shape, s);
  return array(std::move(shape), dtype, std::make_shared<Full>(to_stream(s)), {v});
}

array full(Shape shape, array vals, StreamOrDevice s) {
  Dtype dtype = vals.dtype();
  return full(std::move(shape), std::move(vals), dtype, s);
}

array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(false, dtype), dtype, s);
}
array zeros(const Shape& shape, StreamOrDevice s) {
  return zeros(shape, float32, s);
}
array zeros_like(const array& a, StreamOrDevice s) {
  return zeros(a.shape(), a.dtype(), s);
}
array ones(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(true, dtype), dtype, s);
}
array ones(const Shape& shape, StreamOrDevice s) {
  return ones(shape, float32, s);
}
array ones_like(const array& a, StreamOrDevice s) {
  return ones(a.shape(), a.dtype(), s);
}
array zeros_like(const array& a, Dtype dtype, StreamOrDevice s) {
  return zeros(a.shape(), dtype, s);
}
array ones_like(const array& a, Dtype dtype, StreamOrDevice s) {
  return ones(a.shape(), dtype, s);
}
array full_like(const array& a, array vals, Dtype dtype, StreamOrDevice s) {
  return full(a.shape(), std::move(vals), dtype, s);
}
array full_like(const array& a, array vals, StreamOrDevice s) {
  return full(a.shape(), std::move(vals), a.dtype(), s);
}

// ---- diagonals and triangles ----------------------------------------------------------

namespace {

// (n, m) int32 grid of column minus row indices: the diagonal each element sits on.
array diagonal_index(int n, int m, StreamOrDevice s) {
  array rows = reshape(arange(0, n, s), {n, 1}, s);
  array cols = reshape(arange(0, m, s), {1, m}, s);
  return subtract(cols, rows, s);
}

} // namespace

array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  if (n < 0 || m < 0) {
    throw_invalid_argument("eye", "n and m must be non-negative; got ", n, " and ", m, ".");
  }
  return astype(equal(diagonal_index(n, m, s), array(k), s), dtype, s);
}
array eye(int n, Dtype dtype, StreamOrDevice s) {
  return eye(n, n, 0, dtype, s);
}
array eye(int n, int m, StreamOrDevice s) {
  return eye(n, m, 0, float32, s);
}
array eye(int n, int m, int k, StreamOrDevice s) {
  return eye(n, m, k, float32, s);
}
array eye(int n, StreamOrDevice s) {
  return eye(n, n, 0, float32, s);
}

array identity(int n, Dtype dtype, StreamOrDevice s) {
  if (n < 0) throw_invalid_argument("identity", "n must be non-negative; got ", n, ".");
  return eye(n, n, 0, dtype, s);
}
array identity(int n, StreamOrDevice s) {
  return identity(n, float32, s);
}

array tri(int n, int m, int k, Dtype type, StreamOrDevice s) {
  if (n < 0 || m < 0) {
    throw_invalid_argument("tri", "n and m must be non-negative; got ", n, " and ", m, ".");
  }
  return astype(less_equal(diagonal_index(n, m, s), array(k), s), type, s);
}
array tri(int n, Dtype type, StreamOrDevice s) {
  return tri(n, n, 0, type, s);
}

array tril(array x, int k, StreamOrDevice s) {
  if (x.ndim() < 2) {
    throw_invalid_argument("tril", "x must have at least 2 dimensions; got ", x.ndim(), ".");
  }
  array mask = tri(x.shape(-2), x.shape(-1), k, bool_, s);
  return where(mask, x, zeros_like(x, s), s);
}

array triu(array x, int k, StreamOrDevice s) {
  if (x.ndim() < 2) {
    throw_invalid_argument("triu", "x must have at least 2 dimensions; got ", x.ndim(), ".");
  }
  array mask = tri(x.shape(-2), x.shape(-1), k - 1, bool_, s);
  return where(mask, zeros_like(x, s), x, s);
}

// ---- meshgrid -------------------------------------------------------------------------

std::vector<array> meshgrid(
    const std::vector<array>& arrays,
    bool sparse,
    const std::string& indexing,
    StreamOrDevice s) {
  if (indexing != "xy" && indexing != "ij") {
    throw_invalid_argument("meshgrid", "indexing must be \"xy\" or \"ij\"; got \"", indexing, "\".");
  }
  const int nd = static_cast<int>(arrays.size());
  std::vector<array> out;
  out.reserve(nd);
  for (int i = 0; i < nd; ++i) {
    // Each (flattened) input runs along its own axis; "xy" swaps the first two axes.
    int axis = i;
    if (indexing == "xy" && nd >= 2 && i < 2) axis = 1 - i;
    Shape shape(nd, 1);
    shape[axis] = -1;
    out.push_back(reshape(arrays[i], shape, s));
  }
  if (!sparse) out = broadcast_arrays(out, s);
  return out;
}

} // namespace nuvec
