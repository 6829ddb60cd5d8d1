// nuvec: the matrix-product ops: matmul, addmm, tensordot, outer, inner, kron. Shape rules are
// NumPy's (matmul's 1-d promotion and batch broadcasting, tensordot's axis pairing, kron's
// block layout); addmm's signature and c broadcasting are MLX's.
#include <numeric>

#include "core/errors.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// NumPy's broadcast of two batch shapes; false when they do not broadcast.
bool broadcast_batch(const Shape& x, const Shape& y, Shape& out) {
  size_t n = std::max(x.size(), y.size());
  out.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int dx = i < n - x.size() ? 1 : x[i - (n - x.size())];
    int dy = i < n - y.size() ? 1 : y[i - (n - y.size())];
    if (dx != dy && dx != 1 && dy != 1) return false;
    out[i] = dx == 1 ? dy : dx;
  }
  return true;
}

// Whether `from` broadcasts to exactly `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}

array cast_to_dtype(const array& a, Dtype t, const StreamOrDevice& s) {
  return a.dtype() == t ? a : astype(a, t, s);
}

array broadcast_if_needed(const array& a, const Shape& shape, const StreamOrDevice& s) {
  return a.shape() == shape ? a : broadcast_to(a, shape, s);
}

Shape concat_shapes(const Shape& x, std::initializer_list<int32_t> tail) {
  Shape out = x;
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

int64_t shape_product(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// The operands of a product after NumPy's 1-d promotion, with their common batch shape.
struct ProductOperands {
  array a, b;
  bool a_vec, b_vec; // promoted from 1-d (the added axis is removed from the result)
  Shape batch;
  int m, k, n;
};

ProductOperands prepare_product(
    const char* op,
    const array& in_a,
    const array& in_b,
    Dtype dtype,
    const StreamOrDevice& s) {
  if (in_a.ndim() == 0 || in_b.ndim() == 0) {
    throw_invalid_argument(
        op, "operands must have at least 1 dimension; got shapes ", in_a.shape(), " and ",
        in_b.shape(), ".");
  }
  array a = cast_to_dtype(in_a, dtype, s);
  array b = cast_to_dtype(in_b, dtype, s);
  bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = expand_dims(a, 0, s);
  if (b_vec) b = expand_dims(b, 1, s);
  if (a.shape(-1) != b.shape(-2)) {
    throw_invalid_argument(
        op, "the last dimension of a must equal the contracted dimension of b; got shapes ",
        in_a.shape(), " and ", in_b.shape(), ".");
  }
  Shape batch;
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  if (!broadcast_batch(batch_a, batch_b, batch)) {
    throw_invalid_argument(
        op, "batch dimensions must broadcast; got shapes ", in_a.shape(), " and ",
        in_b.shape(), ".");
  }
  return {a, b, a_vec, b_vec, batch, a.shape(-2), a.shape(-1), b.shape(-1)};
}

// Removes the axes that 1-d promotion added.
array drop_promoted_axes(const array& out, bool a_vec, bool b_vec, const StreamOrDevice& s) {
  int nd = static_cast<int>(out.ndim());
  std::vector<int> axes;
  if (a_vec) axes.push_back(nd - 2);
  if (b_vec) axes.push_back(nd - 1);
  return axes.empty() ? out : squeeze(out, axes, s);
}

} // namespace

array matmul(const array& in_a, const array& in_b, StreamOrDevice s) {
  Dtype dtype = promote_types(in_a.dtype(), in_b.dtype());
  auto p = prepare_product("matmul", in_a, in_b, dtype, s);
  auto prim = std::make_shared<Matmul>(to_stream(s));
  array out = [&] {
    if (p.b.ndim() == 2 && p.a.ndim() > 2) {
      // An unbatched right operand: the batch folds into the rows of one large product.
      int64_t rows = shape_product(p.batch) * p.m;
      // As MLX: reshape merges the rows (a view when a's layout allows, else a copy); the
      // product reads strided rows in place or copies them itself.
      array a2 = reshape(p.a, {static_cast<int32_t>(rows), p.k}, s);
      array flat = array({static_cast<int32_t>(rows), p.n}, dtype, prim, {a2, p.b});
      return reshape(flat, concat_shapes(p.batch, {p.m, p.n}), s);
    }
    array a = broadcast_if_needed(p.a, concat_shapes(p.batch, {p.m, p.k}), s);
    array b = broadcast_if_needed(p.b, concat_shapes(p.batch, {p.k, p.n}), s);
    return array(concat_shapes(p.batch, {p.m, p.n}), dtype, prim, {a, b});
  }();
  return drop_promoted_axes(out, p.a_vec, p.b_vec, s);
}

array addmm(array c, array in_a, array in_b, const float& alpha, const float& beta, StreamOrDevice s) {
  Dtype dtype = promote_types(promote_types(in_a.dtype(), in_b.dtype()), c.dtype());
  if (!issubdtype(dtype, inexact)) {
    throw_invalid_argument(
        "addmm", "operands must promote to a floating or complex dtype; got ", in_a.dtype(),
        ", ", in_b.dtype(), " and ", c.dtype(), ".");
  }
  auto p = prepare_product("addmm", in_a, in_b, dtype, s);
  Shape full = concat_shapes(p.batch, {p.m, p.n});
  Shape result = full;
  std::vector<int> promoted;
  if (p.a_vec) promoted.push_back(static_cast<int>(full.size()) - 2);
  if (p.b_vec) promoted.push_back(static_cast<int>(full.size()) - 1);
  for (auto it = promoted.rbegin(); it != promoted.rend(); ++it) result.erase(result.begin() + *it);
  if (!broadcasts_to(c.shape(), result)) {
    throw_invalid_argument(
        "addmm", "c must broadcast to the product's shape ", result, "; got ", c.shape(), ".");
  }
  c = broadcast_if_needed(cast_to_dtype(c, dtype, s), result, s);
  if (!promoted.empty()) c = expand_dims(c, promoted, s);
  array a = broadcast_if_needed(p.a, concat_shapes(p.batch, {p.m, p.k}), s);
  array b = broadcast_if_needed(p.b, concat_shapes(p.batch, {p.k, p.n}), s);
  array out =
      array(full, dtype, std::make_shared<AddMM>(to_stream(s), alpha, beta), {a, b, c});
  return drop_promoted_axes(out, p.a_vec, p.b_vec, s);
}

array tensordot(const array& a, const array& b, const int axis, StreamOrDevice s) {
  if (axis < 0 || axis > static_cast<int>(a.ndim()) || axis > static_cast<int>(b.ndim())) {
    throw_invalid_argument(
        "tensordot", "axis must be in [0, min(a.ndim, b.ndim)]; got ", axis, " for shapes ",
        a.shape(), " and ", b.shape(), ".");
  }
  std::vector<int> axes_a, axes_b;
  for (int i = 0; i < axis; ++i) {
    axes_a.push_back(static_cast<int>(a.ndim()) - axis + i);
    axes_b.push_back(i);
  }
  return tensordot(a, b, axes_a, axes_b, s);
}

array tensordot(
    const array& a,
    const array& b,
    const std::vector<int>& in_axes_a,
    const std::vector<int>& in_axes_b,
    StreamOrDevice s) {
  if (in_axes_a.size() != in_axes_b.size()) {
    throw_invalid_argument(
        "tensordot", "axes_a and axes_b must have the same length; got ", in_axes_a.size(),
        " and ", in_axes_b.size(), ".");
  }
  int nda = static_cast<int>(a.ndim()), ndb = static_cast<int>(b.ndim());
  std::vector<int> axes_a, axes_b;
  for (int ax : in_axes_a) axes_a.push_back(normalize_axis_index(ax, nda, "tensordot"));
  for (int ax : in_axes_b) axes_b.push_back(normalize_axis_index(ax, ndb, "tensordot"));
  // Repeated axes are rejected as normalize_axes does.
  normalize_axes(axes_a, nda, "tensordot");
  normalize_axes(axes_b, ndb, "tensordot");
  int32_t contracted = 1;
  for (size_t i = 0; i < axes_a.size(); ++i) {
    if (a.shape(axes_a[i]) != b.shape(axes_b[i])) {
      throw_invalid_argument(
          "tensordot", "contracted dimensions must match; got axis ", in_axes_a[i], " of ",
          a.shape(), " and axis ", in_axes_b[i], " of ", b.shape(), ".");
    }
    contracted *= a.shape(axes_a[i]);
  }
  auto free_axes = [](int nd, const std::vector<int>& used) {
    std::vector<int> out;
    for (int i = 0; i < nd; ++i) {
      if (std::find(used.begin(), used.end(), i) == used.end()) out.push_back(i);
    }
    return out;
  };
  std::vector<int> free_a = free_axes(nda, axes_a), free_b = free_axes(ndb, axes_b);
  Shape out_shape;
  int32_t rows = 1, cols = 1;
  for (int i : free_a) {
    out_shape.push_back(a.shape(i));
    rows *= a.shape(i);
  }
  for (int i : free_b) {
    out_shape.push_back(b.shape(i));
    cols *= b.shape(i);
  }
  // (free_a..., contracted...) @ (contracted..., free_b...) as one 2-d product.
  std::vector<int> perm_a = free_a, perm_b = axes_b;
  perm_a.insert(perm_a.end(), axes_a.begin(), axes_a.end());
  perm_b.insert(perm_b.end(), free_b.begin(), free_b.end());
  auto arrange = [&](const array& x, const std::vector<int>& perm, Shape shape2) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int>(i);
    // A permuted operand is copied once into the dense layout the product reads.
    array t = identity ? x : contiguous(transpose(x, perm, s), false, s);
    return reshape(t, std::move(shape2), s);
  };
  array a2 = arrange(a, perm_a, {rows, contracted});
  array b2 = arrange(b, perm_b, {contracted, cols});
  return reshape(matmul(a2, b2, s), out_shape, s);
}

array outer(const array& a, const array& b, StreamOrDevice s) {
  array col = reshape(a, {-1, 1}, s);
  array row = flatten(b, s);
  return multiply(col, row, s);
}

array inner(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b, s);
  if (a.shape(-1) != b.shape(-1)) {
    throw_invalid_argument(
        "inner", "the last dimensions of a and b must match; got shapes ", a.shape(), " and ",
        b.shape(), ".");
  }
  return tensordot(a, b, {-1}, {-1}, s);
}

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  const int nd = static_cast<int>(std::max(a.ndim(), b.ndim()));
  if (axis < -nd || axis >= nd || std::min(a.ndim(), b.ndim()) == 0) {
    throw_invalid_argument(
        "vecdot", "axis ", axis, " must name a dimension of both inputs; got shapes ", a.shape(),
        " and ", b.shape(), ".");
  }
  const int ax = axis < 0 ? axis + nd : axis;
  // The axis counted from the end must exist in both and have equal sizes.
  const int from_end = ax - nd;
  if (-from_end > static_cast<int>(std::min(a.ndim(), b.ndim())) ||
      a.shape(from_end) != b.shape(from_end)) {
    throw_invalid_argument(
        "vecdot", "a and b must have equal sizes along axis ", axis, "; got shapes ", a.shape(),
        " and ", b.shape(), ".");
  }
  array x = a.dtype() == complex64 ? conjugate(a, s) : a;
  return sum(multiply(x, b, s), from_end, false, s);
}

array kron(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b, s);
  size_t nd = std::max(a.ndim(), b.ndim());
  Shape sa(nd - a.ndim(), 1), sb(nd - b.ndim(), 1);
  sa.insert(sa.end(), a.shape().begin(), a.shape().end());
  sb.insert(sb.end(), b.shape().begin(), b.shape().end());
  // a's dimension i and b's dimension i interleave: out[.., ia, ib, ..] = a[ia] * b[ib],
  // which merges into one dimension of size sa[i] * sb[i] with a's index the slower one.
  Shape ea, eb, out_shape;
  for (size_t i = 0; i < nd; ++i) {
    ea.insert(ea.end(), {sa[i], 1});
    eb.insert(eb.end(), {1, sb[i]});
    out_shape.push_back(checked_int32(int64_t{sa[i]} * sb[i], "kron", "each output dimension"));
  }
  array prod = multiply(reshape(a, ea, s), reshape(b, eb, s), s);
  return reshape(prod, out_shape, s);
}

} // namespace nuvec
