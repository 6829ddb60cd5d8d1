// nuvec: take_along_axis, put_along_axis and scatter_add_axis (NumPy's semantics, MLX's
// broadcasting of the indices against the array along the other axes). Negative indices
// count from the end; the kernels (src/backend/cpu/indexing.cpp) check them at run time:
// outside [-n, n) the next eval throws std::out_of_range naming the op.
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// Validates (integer indices of a's rank) and returns the normalised axis.
int check_axis_indices(const array& a, const array& indices, int axis, const char* op) {
  if (!issubdtype(indices.dtype(), integer)) {
    throw_invalid_argument(op, "indices must have an integer dtype; got ", indices.dtype(), ".");
  }
  if (indices.ndim() != a.ndim()) {
    throw_invalid_argument(
        op, "indices must have the array's number of dimensions (", a.ndim(), "); got ",
        indices.ndim(), ".");
  }
  return normalize_axis_index(axis, static_cast<int>(a.ndim()), op);
}

// shape with dimension axis replaced by n.
Shape with_axis(Shape shape, int axis, int32_t n) {
  shape[axis] = n;
  return shape;
}

// broadcast_to that reports failures as op's.
array broadcast_for(const array& x, const Shape& shape, const char* what, const char* op) {
  try {
    return broadcast_to(x, shape);
  } catch (const std::invalid_argument&) {
    throw_invalid_argument(op, what, " must broadcast to ", shape, "; got ", x.shape(), ".");
  }
}

array scatter_axis(
    const array& a,
    const array& indices,
    const array& values,
    int axis,
    ScatterReduce reduce,
    const char* op,
    StreamOrDevice s) {
  int ax = check_axis_indices(a, indices, axis, op);
  for (int d = 0; d < static_cast<int>(a.ndim()); ++d) {
    if (d != ax && indices.shape()[d] != a.shape()[d] && indices.shape()[d] != 1) {
      throw_invalid_argument(
          op, "indices must match the array's shape ", a.shape(), " outside axis ", ax,
          " (or be 1 there); got ", indices.shape(), ".");
    }
  }
  Shape target = with_axis(a.shape(), ax, indices.shape()[ax]);
  array idx = broadcast_for(indices, target, "indices", op);
  array upd = broadcast_for(astype(values, a.dtype(), s), target, "values", op);
  return array(
      a.shape(), a.dtype(), std::make_shared<ScatterAxis>(to_stream(s), reduce, ax), {a, idx, upd});
}

} // namespace

array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s) {
  const char* op = "take_along_axis";
  int ax = check_axis_indices(a, indices, axis, op);
  // The other axes broadcast against each other; along axis each keeps its own length.
  Shape common;
  try {
    common = broadcast_shapes(with_axis(a.shape(), ax, 1), with_axis(indices.shape(), ax, 1));
  } catch (const std::invalid_argument&) {
    throw_invalid_argument(
        op, "indices must broadcast with the array outside axis ", ax, "; got ",
        indices.shape(), " and ", a.shape(), ".");
  }
  array src = broadcast_for(a, with_axis(common, ax, a.shape()[ax]), "the array", op);
  array idx = broadcast_for(indices, with_axis(common, ax, indices.shape()[ax]), "indices", op);
  return array(idx.shape(), a.dtype(), std::make_shared<GatherAxis>(to_stream(s), ax), {src, idx});
}

array put_along_axis(const array& a, const array& indices, const array& values, int axis, StreamOrDevice s) {
  return scatter_axis(a, indices, values, axis, ScatterReduce::None, "put_along_axis", s);
}

array scatter_add_axis(const array& a, const array& indices, const array& values, int axis, StreamOrDevice s) {
  return scatter_axis(a, indices, values, axis, ScatterReduce::Sum, "scatter_add_axis", s);
}

} // namespace nuvec
