// nuvec: MLX's general indexing ops: take, gather, scatter (and its add/prod/max/min forms),
// masked_scatter (NumPy's place semantics) and slice_update_add/prod/max/min. Shapes follow
// MLX (gather: broadcast(indices) + slice_sizes; scatter updates: broadcast(indices) +
// window). Index values are data, so the kernels (src/backend/cpu/gather_scatter.cpp) check
// them at run time: outside [-n, n) the next eval throws std::out_of_range naming the op.
#include <string>

#include "ops/ops_common.h"
#include "transforms/trace.h"
#include "primitives/gather_scatter.h"

namespace nuvec {

namespace {

struct Indexing {
  std::vector<int> axes;   // normalised, in the caller's order
  std::vector<array> idx;  // broadcast to ishape
  Shape ishape;
};

// Validates indices against axes and broadcasts them together.
Indexing prepare_indices(
    const array& a,
    const std::vector<array>& indices,
    const std::vector<int>& axes,
    const char* op) {
  if (indices.size() != axes.size()) {
    throw_invalid_argument(
        op, "indices must have one array per axis (", axes.size(), " axes); got ", indices.size(),
        " index arrays.");
  }
  Indexing out;
  for (const auto& ix : indices) {
    if (!issubdtype(ix.dtype(), integer)) {
      throw_invalid_argument(op, "indices must have an integer dtype; got ", ix.dtype(), ".");
    }
  }
  // gather and scatter take axes as given in [0, ndim), as MLX: a negative axis is an error
  // there (take and take_along_axis normalise theirs).
  for (int ax : axes) {
    if (ax < 0 || ax >= static_cast<int>(a.ndim())) {
      throw_invalid_argument(
          op, "axes must lie in [0, ", a.ndim(), ") for an array of shape ", a.shape(), "; got ",
          Shape(axes.begin(), axes.end()), ".");
    }
    out.axes.push_back(ax);
  }
  std::vector<int> sorted = out.axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw_invalid_argument(op, "axes must be unique; got ", Shape(axes.begin(), axes.end()), ".");
  }
  for (const auto& ix : indices) {
    try {
      out.ishape = out.idx.empty() ? ix.shape() : broadcast_shapes(out.ishape, ix.shape());
    } catch (const std::invalid_argument&) {
      throw_invalid_argument(
          op, "indices must broadcast together; got ", ix.shape(), " against ", out.ishape, ".");
    }
    out.idx.push_back(ix);
  }
  for (auto& ix : out.idx) ix = broadcast_to(ix, out.ishape);
  return out;
}

Shape concat(const Shape& a, const Shape& b) {
  Shape out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

array gather_impl(
    const array& a,
    const std::vector<array>& indices,
    const std::vector<int>& axes,
    const Shape& slice_sizes,
    const char* op,
    StreamOrDevice s) {
  Indexing ix = prepare_indices(a, indices, axes, op);
  if (slice_sizes.size() != a.ndim()) {
    throw_invalid_argument(
        op, "slice_sizes must have one entry per dimension of the array (", a.ndim(), "); got ",
        slice_sizes, ".");
  }
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > a.shape()[d]) {
      throw_invalid_argument(
          op, "slice_sizes must lie in [0, the array's shape ", a.shape(), "]; got ", slice_sizes,
          ".");
    }
  }
  std::vector<array> in{a};
  in.insert(in.end(), ix.idx.begin(), ix.idx.end());
  return array(
      concat(ix.ishape, slice_sizes),
      a.dtype(),
      std::make_shared<Gather>(to_stream(s), ix.axes, slice_sizes, op),
      in);
}

array scatter_impl(
    const array& a,
    const std::vector<array>& indices,
    const array& updates,
    const std::vector<int>& axes,
    ScatterMode mode,
    const char* op,
    StreamOrDevice s) {
  Indexing ix = prepare_indices(a, indices, axes, op);
  const size_t r = ix.ishape.size();
  if (updates.ndim() != r + a.ndim()) {
    throw_invalid_argument(
        op, "updates must have the indices' plus the array's dimensions (", r, " + ", a.ndim(),
        "); got shape ", updates.shape(), ".");
  }
  Shape window(updates.shape().begin() + r, updates.shape().end());
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (window[d] > a.shape()[d]) {
      throw_invalid_argument(
          op, "the updates' window must fit the array's shape ", a.shape(), "; got ", window, ".");
    }
  }
  Shape target = concat(ix.ishape, window);
  array upd = astype(updates, a.dtype(), s);
  try {
    upd = broadcast_to(upd, target);
  } catch (const std::invalid_argument&) {
    throw_invalid_argument(
        op, "updates must have shape broadcast(indices) + window = ", target, "; got ",
        updates.shape(), ".");
  }
  std::vector<array> in{a};
  in.insert(in.end(), ix.idx.begin(), ix.idx.end());
  in.push_back(upd);
  return array(a.shape(), a.dtype(), std::make_shared<Scatter>(to_stream(s), mode, ix.axes), in);
}

// slice, combine with update, write back; errors of the inner ops are re-labelled as op's.
template <typename F>
array slice_update_with(
    const array& src,
    const array& update,
    const Shape& start,
    const Shape& stop,
    const Shape& strides,
    F&& combine_fn,
    const char* op,
    StreamOrDevice s) {
  try {
    array part = slice(src, start, stop, strides, s);
    array v = astype(combine_fn(part, update), src.dtype(), s);
    if (v.shape() != part.shape()) {
      throw_invalid_argument(
          op, "update must broadcast to the slice's shape ", part.shape(), "; got ", update.shape(),
          ".");
    }
    return slice_update(src, v, start, stop, strides, s);
  } catch (const std::out_of_range& e) {
    if (std::string(e.what()).rfind(std::string("[") + op + "]", 0) == 0) throw;
    throw std::out_of_range(std::string("[") + op + "] " + e.what());
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind(std::string("[") + op + "]", 0) == 0) throw;
    throw std::invalid_argument(std::string("[") + op + "] " + e.what());
  }
}

Shape unit_strides(const Shape& start) {
  return Shape(start.size(), 1);
}

} // namespace

// ---------------------------------------------------------------------------------------
// take

array take(const array& a, const array& indices, int axis, StreamOrDevice s) {
  return detail::take(a, indices, axis, "take", s);
}

array detail::take(const array& a, const array& indices, int axis, const char* op, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), op);
  const int r = static_cast<int>(indices.ndim());
  const int nd = static_cast<int>(a.ndim());
  if (a.shape()[ax] == 0) {
    // Nothing to take from: only an empty take is possible.
    if (!issubdtype(indices.dtype(), integer)) {
      throw_invalid_argument(op, "indices must have an integer dtype; got ", indices.dtype(), ".");
    }
    if (indices.size() > 0) {
      throw_invalid_argument(op, "the axis must be non-empty to take from it; got shape ", a.shape(), ".");
    }
    Shape shape(a.shape().begin(), a.shape().begin() + ax);
    shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
    shape.insert(shape.end(), a.shape().begin() + ax + 1, a.shape().end());
    return zeros(shape, a.dtype(), s);
  }
  Shape sizes = a.shape();
  sizes[ax] = 1;
  array g = gather_impl(a, {indices}, {ax}, sizes, op, s);
  // (I..., a's dims with axis of size 1) -> a.shape[:axis] + I + a.shape[axis+1:].
  g = squeeze(g, r + ax, s);
  std::vector<int> perm;
  for (int d = 0; d < ax; ++d) perm.push_back(r + d);
  for (int d = 0; d < r; ++d) perm.push_back(d);
  for (int d = ax + 1; d < nd; ++d) perm.push_back(r + d - 1);
  return transpose(g, perm, s);
}

array take(const array& a, int index, int axis, StreamOrDevice s) {
  const char* op = "take";
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), op);
  const int n = a.shape()[ax];
  if (index < -n || index >= n) {
    throw_out_of_range(op, "index must lie in [", -n, ", ", n, ") along axis ", axis, "; got ", index, ".");
  }
  return take(a, array(index), ax, s);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(flatten(a, s), indices, 0, s);
}

array take(const array& a, int index, StreamOrDevice s) {
  return take(flatten(a, s), index, 0, s);
}

// ---------------------------------------------------------------------------------------
// gather, scatter

array gather(
    const array& a,
    const std::vector<array>& indices,
    const std::vector<int>& axes,
    const Shape& slice_sizes,
    StreamOrDevice s) {
  return gather_impl(a, indices, axes, slice_sizes, "gather", s);
}

array gather(const array& a, const array& indices, int axis, const Shape& slice_sizes, StreamOrDevice s) {
  return gather_impl(a, {indices}, {axis}, slice_sizes, "gather", s);
}

#define NUVEC_SCATTER_OP(fn, mode)                                                            \
  array fn(                                                                                   \
      const array& a,                                                                         \
      const std::vector<array>& indices,                                                      \
      const array& updates,                                                                   \
      const std::vector<int>& axes,                                                           \
      StreamOrDevice s) {                                                                     \
    return scatter_impl(a, indices, updates, axes, mode, #fn, s);                             \
  }                                                                                           \
  array fn(const array& a, const array& indices, const array& updates, int axis, StreamOrDevice s) { \
    return scatter_impl(a, {indices}, updates, {axis}, mode, #fn, s);                         \
  }

NUVEC_SCATTER_OP(scatter, ScatterMode::None)
NUVEC_SCATTER_OP(scatter_add, ScatterMode::Sum)
NUVEC_SCATTER_OP(scatter_prod, ScatterMode::Prod)
NUVEC_SCATTER_OP(scatter_max, ScatterMode::Max)
NUVEC_SCATTER_OP(scatter_min, ScatterMode::Min)

#undef NUVEC_SCATTER_OP

// ---------------------------------------------------------------------------------------
// masked_scatter

array masked_scatter(const array& a, const array& mask, const array& src, StreamOrDevice s) {
  const char* op = "masked_scatter";
  if (mask.dtype() != bool_) {
    throw_invalid_argument(op, "mask must have dtype bool; got ", mask.dtype(), ".");
  }
  array m = mask;
  try {
    // MLX aligns a lower-rank mask with a's leading axes (mask (2,) selects rows of a
    // (2, 3)), unlike NumPy broadcasting, which aligns trailing axes.
    if (mask.ndim() < a.ndim()) {
      Shape lead = mask.shape();
      lead.resize(a.ndim(), 1);
      m = reshape(mask, lead, s);
    }
    m = broadcast_to(m, a.shape(), s);
  } catch (const std::invalid_argument&) {
    throw_invalid_argument(op, "mask must broadcast to the array's shape ", a.shape(), "; got ", mask.shape(), ".");
  }
  if (src.size() == 0) {
    if (a.size() > 0) throw_invalid_argument(op, "src must be non-empty; got shape ", src.shape(), ".");
    return copy(a, s);
  }
  // r(p): true positions before p; NumPy's place cycles through src.
  array rank(a.shape(), int32, std::make_shared<MaskedRank>(to_stream(s), 0), {m});
  detail::note_shape_baked(); // src's length is a constant of the graph
  array pos = remainder(rank, array(static_cast<int>(src.size()), int32), s);
  array vals = take(flatten(astype(src, a.dtype(), s), s), pos, 0, s);
  return where(m, vals, a, s);
}

// ---------------------------------------------------------------------------------------
// slice_update_add / prod / max / min

#define NUVEC_SLICE_UPDATE_OP(fn, combine_op)                                                 \
  array fn(                                                                                   \
      const array& src,                                                                       \
      const array& update,                                                                    \
      Shape start,                                                                            \
      Shape stop,                                                                             \
      Shape strides,                                                                          \
      StreamOrDevice s) {                                                                     \
    return slice_update_with(                                                                 \
        src, update, start, stop, strides,                                                    \
        [&](const array& x, const array& u) { return combine_op(x, u, s); }, #fn, s);         \
  }                                                                                           \
  array fn(const array& src, const array& update, Shape start, Shape stop, StreamOrDevice s) { \
    Shape strides = unit_strides(start);                                                      \
    return fn(src, update, std::move(start), std::move(stop), std::move(strides), s);         \
  }

NUVEC_SLICE_UPDATE_OP(slice_update_add, add)
NUVEC_SLICE_UPDATE_OP(slice_update_prod, multiply)
NUVEC_SLICE_UPDATE_OP(slice_update_max, maximum)
NUVEC_SLICE_UPDATE_OP(slice_update_min, minimum)

#undef NUVEC_SLICE_UPDATE_OP

} // namespace nuvec
