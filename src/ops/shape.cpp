// nuvec: shape and view ops (reshape, flatten, squeeze, expand_dims, transpose, broadcast,
// atleast_nd, view, contiguous, stop_gradient, depends) with MLX's semantics and NumPy's
// broadcasting rule. Each validates and records a node of the shape or copy family.
#include <numeric>

#include "ops/ops_common.h"

namespace nuvec {

namespace {

// Replaces the one -1 of `shape` so the total is `size`; throws naming op otherwise.
Shape infer_shape(Shape shape, size_t size, const char* op) {
  int infer = -1;
  size_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw_invalid_argument(op, "shape must have at most one -1; got ", shape, ".");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw_invalid_argument(op, "shape must have non-negative dimensions (or -1); got ", shape, ".");
    } else {
      known *= static_cast<size_t>(shape[i]);
    }
  }
  if (infer >= 0) {
    if (known == 0) {
      throw_invalid_argument(
          op, "shape must determine the -1 dimension; got ", shape, " for an array of size ",
          size, ".");
    }
    if (size % known != 0) {
      throw_invalid_argument(
          op, "shape must have the array's size ", size, "; got ", shape, ".");
    }
    // The inferred extent can pass int32 although every given one fits (MLX #3327).
    shape[infer] = checked_int32(static_cast<int64_t>(size / known), op, "the inferred dimension");
  } else if (known != size) {
    throw_invalid_argument(op, "shape must have the array's size ", size, "; got ", shape, ".");
  }
  return shape;
}

} // namespace

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  shape = infer_shape(std::move(shape), a.size(), "reshape");
  if (shape == a.shape()) return a;
  return array(shape, a.dtype(), std::make_shared<Reshape>(to_stream(s), shape), {a});
}

array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s) {
  if (shape.empty()) throw_invalid_argument("unflatten", "shape must be non-empty; got ().");
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "unflatten");
  shape = infer_shape(std::move(shape), static_cast<size_t>(a.shape()[ax]), "unflatten");
  Shape out(a.shape().begin(), a.shape().begin() + ax);
  out.insert(out.end(), shape.begin(), shape.end());
  out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
  return reshape(a, out, s);
}

array flatten(const array& a, int start_axis, int end_axis, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd == 0) return reshape(a, {1}, s);
  // MLX clamps the range to the array's axes (flatten(x, 1, 3) of a 3-d x merges 1..2) and
  // rejects a start past the last axis or an end before the first.
  int start = std::max(0, start_axis < 0 ? start_axis + nd : start_axis);
  int end = std::min(nd - 1, end_axis < 0 ? end_axis + nd : end_axis);
  if (start >= nd || end < 0) {
    throw_invalid_argument(
        "flatten", "start_axis ", start_axis, " and end_axis ", end_axis,
        " leave no axis of an array with ", nd, " dimensions to flatten.");
  }
  if (end < start) {
    throw_invalid_argument(
        "flatten", "start_axis must not come after end_axis; got ", start_axis, " and ",
        end_axis, ".");
  }
  Shape out(a.shape().begin(), a.shape().begin() + start);
  int64_t merged = 1;
  for (int i = start; i <= end; ++i) merged *= a.shape()[i];
  out.push_back(checked_int32(merged, "flatten", "the product of the flattened axes"));
  out.insert(out.end(), a.shape().begin() + end + 1, a.shape().end());
  return reshape(a, out, s);
}

array flatten(const array& a, StreamOrDevice s) {
  return flatten(a, 0, -1, s);
}

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), "squeeze");
  for (int i : ax) {
    if (a.shape()[i] != 1) {
      throw_invalid_argument(
          "squeeze", "axis ", i, " must have size 1; got size ", a.shape()[i], ".");
    }
  }
  if (ax.empty()) return a;
  Shape shape;
  for (int i = 0; i < static_cast<int>(a.ndim()); ++i) {
    if (!std::binary_search(ax.begin(), ax.end(), i)) shape.push_back(a.shape()[i]);
  }
  return array(shape, a.dtype(), std::make_shared<Squeeze>(to_stream(s), ax), {a});
}

array squeeze(const array& a, int axis, StreamOrDevice s) {
  return squeeze(a, std::vector<int>{axis}, s);
}

array squeeze(const array& a, StreamOrDevice s) {
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(a.ndim()); ++i) {
    if (a.shape()[i] == 1) axes.push_back(i);
  }
  return squeeze(a, axes, s);
}

array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  int out_nd = static_cast<int>(a.ndim() + axes.size());
  auto ax = normalize_axes(axes, out_nd, "expand_dims");
  if (ax.empty()) return a;
  Shape shape(out_nd, 1);
  size_t src = 0;
  for (int i = 0; i < out_nd; ++i) {
    if (!std::binary_search(ax.begin(), ax.end(), i)) shape[i] = a.shape()[src++];
  }
  return array(shape, a.dtype(), std::make_shared<ExpandDims>(to_stream(s), ax), {a});
}

array expand_dims(const array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (static_cast<int>(axes.size()) != nd) {
    throw_invalid_argument(
        "transpose", "axes must have one entry per dimension (", nd, "); got ",
        Shape(axes.begin(), axes.end()), ".");
  }
  for (auto& ax : axes) ax = normalize_axis_index(ax, nd, "transpose");
  std::vector<int> sorted(axes);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw_invalid_argument("transpose", "axes must be unique; got ", Shape(axes.begin(), axes.end()), ".");
  }
  Shape shape(nd);
  for (int i = 0; i < nd; ++i) shape[i] = a.shape()[axes[i]];
  return array(shape, a.dtype(), std::make_shared<Transpose>(to_stream(s), std::move(axes)), {a});
}

array transpose(const array& a, std::initializer_list<int> axes, StreamOrDevice s) {
  return transpose(a, std::vector<int>(axes), s);
}

array transpose(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.rbegin(), axes.rend(), 0);
  return transpose(a, std::move(axes), s);
}

array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  int i = normalize_axis_index(axis1, nd, "swapaxes");
  int j = normalize_axis_index(axis2, nd, "swapaxes");
  auto axes = all_axes(nd);
  std::swap(axes[i], axes[j]);
  return transpose(a, std::move(axes), s);
}

array moveaxis(const array& a, int source, int destination, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  int src = normalize_axis_index(source, nd, "moveaxis");
  int dst = normalize_axis_index(destination, nd, "moveaxis");
  if (src == dst) return a;
  auto axes = all_axes(nd);
  axes.erase(axes.begin() + src);
  axes.insert(axes.begin() + dst, src);
  return transpose(a, std::move(axes), s);
}

Shape broadcast_shapes(const Shape& s1, const Shape& s2) {
  const Shape& big = s1.size() >= s2.size() ? s1 : s2;
  const Shape& small = s1.size() >= s2.size() ? s2 : s1;
  Shape out(big);
  size_t off = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i) {
    int32_t a = big[off + i], b = small[i];
    if (a == b || b == 1) {
      out[off + i] = a;
    } else if (a == 1) {
      out[off + i] = b;
    } else {
      throw_invalid_argument(
          "broadcast_shapes", "shapes must be broadcastable; got ", s1, " and ", s2, ".");
    }
  }
  return out;
}

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  if (a.shape() == shape) return a;
  bool ok = shape.size() >= a.ndim();
  for (auto d : shape) ok &= d >= 0;
  size_t off = ok ? shape.size() - a.ndim() : 0;
  for (size_t i = 0; ok && i < a.ndim(); ++i) {
    ok = a.shape()[i] == shape[off + i] || a.shape()[i] == 1;
  }
  if (!ok) {
    throw_invalid_argument(
        "broadcast_to", "shape must be one the array broadcasts to; got ", a.shape(), " to ",
        shape, ".");
  }
  return array(shape, a.dtype(), std::make_shared<Broadcast>(to_stream(s), shape), {a});
}

std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s) {
  Shape shape;
  for (const auto& a : inputs) shape = broadcast_shapes(shape, a.shape());
  std::vector<array> out;
  out.reserve(inputs.size());
  for (const auto& a : inputs) out.push_back(broadcast_to(a, shape, s));
  return out;
}

array atleast_1d(const array& a, StreamOrDevice s) {
  return a.ndim() == 0 ? reshape(a, {1}, s) : a;
}

array atleast_2d(const array& a, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0: return reshape(a, {1, 1}, s);
    case 1: return expand_dims(a, 0, s);
    default: return a;
  }
}

array atleast_3d(const array& a, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0: return reshape(a, {1, 1, 1}, s);
    case 1: return reshape(a, {1, a.shape()[0], 1}, s);
    case 2: return expand_dims(a, 2, s);
    default: return a;
  }
}

std::vector<array> atleast_1d(const std::vector<array>& a, StreamOrDevice s) {
  std::vector<array> out;
  for (const auto& x : a) out.push_back(atleast_1d(x, s));
  return out;
}

std::vector<array> atleast_2d(const std::vector<array>& a, StreamOrDevice s) {
  std::vector<array> out;
  for (const auto& x : a) out.push_back(atleast_2d(x, s));
  return out;
}

std::vector<array> atleast_3d(const std::vector<array>& a, StreamOrDevice s) {
  std::vector<array> out;
  for (const auto& x : a) out.push_back(atleast_3d(x, s));
  return out;
}

array view(const array& a, const Dtype& dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  Shape shape = a.shape();
  size_t ib = a.itemsize(), ob = size_of(dtype);
  if (ib != ob) {
    if (a.ndim() == 0) {
      throw_invalid_argument(
          "view", "a 0-d array must keep its itemsize; got ", a.dtype(), " to ", dtype, ".");
    }
    size_t bytes = static_cast<size_t>(shape.back()) * ib;
    if (bytes % ob != 0) {
      throw_invalid_argument(
          "view", "the last axis must hold a whole number of ", dtype, " elements; got ",
          shape.back(), " elements of ", a.dtype(), ".");
    }
    shape.back() = static_cast<int32_t>(bytes / ob);
  }
  return array(shape, dtype, std::make_shared<View>(to_stream(s), dtype), {a});
}

array contiguous(const array& a, bool allow_col_major, StreamOrDevice s) {
  return array(
      a.shape(), a.dtype(), std::make_shared<Contiguous>(to_stream(s), allow_col_major), {a});
}

array stop_gradient(const array& a, StreamOrDevice s) {
  return array(a.shape(), a.dtype(), std::make_shared<StopGradient>(to_stream(s)), {a});
}

std::vector<array> depends(
    const std::vector<array>& inputs,
    const std::vector<array>& dependencies) {
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (const auto& a : inputs) {
    shapes.push_back(a.shape());
    dtypes.push_back(a.dtype());
  }
  std::vector<array> all(inputs);
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  return array::make_arrays(
      std::move(shapes), dtypes,
      std::make_shared<Depends>(to_stream({}), static_cast<int>(inputs.size())), all);
}

} // namespace nuvec
