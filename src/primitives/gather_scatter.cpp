// nuvec: rules of the Gather, Scatter and MaskedRank families: shapes, vjp, jvp, vmap,
// equivalence. Derivatives follow MLX's primitives.cpp (shared/seeds/000_*.txt gives the
// axis forms): a gather's cotangent is scatter-added back, so duplicate indices accumulate;
// an overwriting scatter gives no gradient to the overwritten positions; max/min pass the
// cotangent to every input equal to the result; prod's updates (no MLX rule) use the product
// of the other updates, counting zeros. Batching folds the batch axis into the
// index: an arange index on a new leading axis of the source.
#include <optional>
#include <typeinfo>

#include "core/errors.h"
#include "primitives/batching.h"
#include "primitives/gather_scatter.h"

namespace nuvec {

namespace {

// The primitives record on inputs that are already validated and broadcast, so the rules
// build nodes directly rather than through the public ops.
Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

array gather_node(
    Stream s,
    const array& a,
    const std::vector<array>& idx,
    const std::vector<int>& axes,
    const Shape& slice_sizes,
    const char* op = "gather") {
  Shape ishape = idx.empty() ? Shape{} : idx[0].shape();
  std::vector<array> in{a};
  in.insert(in.end(), idx.begin(), idx.end());
  return array(
      concat_shapes(ishape, slice_sizes), a.dtype(), std::make_shared<Gather>(s, axes, slice_sizes, op), in);
}

array scatter_node(
    Stream s,
    ScatterMode mode,
    const array& a,
    const std::vector<array>& idx,
    const array& updates,
    const std::vector<int>& axes) {
  std::vector<array> in{a};
  in.insert(in.end(), idx.begin(), idx.end());
  in.push_back(updates);
  return array(a.shape(), a.dtype(), std::make_shared<Scatter>(s, mode, axes), in);
}

// The window shape of a scatter's updates: updates.shape after the index dimensions.
Shape update_window(const array& updates, size_t index_ndim) {
  return Shape(updates.shape().begin() + index_ndim, updates.shape().end());
}

// d out[c] / d u_j of a scatter_prod: a[c] times the product of the other updates landing
// on c. Counting the zero updates at c instead of dividing by them keeps it exact with zeros:
// u_j != 0: a P'/u_j when no update at c is zero; u_j == 0: a P' when it is the only zero
// (P' is the product of the non-zero updates at c). One entry per update element.
array prod_update_factor(
    Stream s,
    const array& a,
    const std::vector<array>& idx,
    const array& upd,
    const std::vector<int>& axes,
    const Shape& window) {
  array is_zero = equal(upd, zeros_like(upd));
  array nonzero = where(is_zero, ones_like(upd), upd);
  array zeros_at = scatter_node(s, ScatterMode::Sum, zeros_like(a), idx, astype(is_zero, a.dtype()), axes);
  array prod_at = multiply(a, scatter_node(s, ScatterMode::Prod, ones_like(a), idx, nonzero, axes));
  array zc = gather_node(s, zeros_at, idx, axes, window);
  array pg = gather_node(s, prod_at, idx, axes, window);
  array none = zeros_like(pg);
  return where(
      is_zero,
      where(equal(zc, ones_like(zc)), pg, none),
      where(equal(zc, none), divide(pg, nonzero), none));
}

// An int32 arange over the batch, shaped (B, 1, ..., 1) and broadcast to `shape` (B first).
array batch_index(const Shape& shape) {
  Shape col(shape.size(), 1);
  col[0] = shape[0];
  return broadcast_to(reshape(arange(0, shape[0]), col), shape);
}

} // namespace

// ---------------------------------------------------------------------------------------
// Gather: inputs (a, indices...), output I + slice_sizes.

const char* Gather::name() const {
  return "Gather";
}

std::vector<Shape> Gather::output_shapes(const std::vector<array>& inputs) {
  Shape ishape = inputs.size() > 1 ? inputs[1].shape() : Shape{};
  return {concat_shapes(ishape, slice_sizes_)};
}

std::vector<array> Gather::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& a = primals[0];
  std::vector<array> idx(primals.begin() + 1, primals.end());
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // The cotangent has the updates' shape I + slice_sizes; duplicates accumulate.
      out.push_back(scatter_node(stream(), ScatterMode::Sum, zeros_like(a), idx, cotangents[0], axes_));
    } else {
      out.push_back(zeros_like(primals[i])); // indices: no derivative
    }
  }
  return out;
}

std::vector<array> Gather::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::vector<array> idx(primals.begin() + 1, primals.end());
  for (int i : argnums) {
    if (i != 0) {
      // Integer indices have no tangent space; MLX refuses rather than returning zero.
      throw std::invalid_argument(std::string("[") + name() +
          "] cannot compute a JVP with respect to the indices.");
    }
  }
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) return {gather_node(stream(), tangents[i], idx, axes_, slice_sizes_, op_)};
  }
  return {zeros(output_shapes(primals)[0], primals[0].dtype())};
}

std::pair<std::vector<array>, std::vector<int>> Gather::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (!any_batched(axes)) {
    std::vector<array> idx(inputs.begin() + 1, inputs.end());
    return {{gather_node(stream(), inputs[0], idx, axes_, slice_sizes_, op_)}, {-1}};
  }
  auto b = batch_first(inputs, axes);
  const int n = batch_size(inputs, axes);
  Shape ishape{n};
  if (b.size() > 1) ishape = b[1].shape();
  const int r0 = static_cast<int>(ishape.size()) - 1;
  std::vector<array> idx{batch_index(ishape)};
  idx.insert(idx.end(), b.begin() + 1, b.end());
  std::vector<int> new_axes{0};
  for (int ax : axes_) new_axes.push_back(ax + 1);
  Shape sizes{1};
  sizes.insert(sizes.end(), slice_sizes_.begin(), slice_sizes_.end());
  // Output (B, I..., 1, window...): drop the batch axis's size-1 window.
  array out = gather_node(stream(), b[0], idx, new_axes, sizes, op_);
  return {{squeeze(out, 1 + r0)}, {0}};
}

bool Gather::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const Gather&>(other);
  return axes_ == o.axes_ && slice_sizes_ == o.slice_sizes_;
}

// ---------------------------------------------------------------------------------------
// Scatter: inputs (a, indices..., updates), output of a's shape.

const char* Scatter::name() const {
  return "Scatter";
}

std::vector<Shape> Scatter::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Scatter::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& a = primals[0];
  const array& upd = primals.back();
  std::vector<array> idx(primals.begin() + 1, primals.end() - 1);
  const size_t r = idx.empty() ? 0 : idx[0].ndim();
  const Shape window = update_window(upd, r);
  const array& g = cotangents[0];
  const int last = static_cast<int>(primals.size()) - 1;
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      switch (mode_) {
        case ScatterMode::None:
          // Overwritten positions get no gradient: scatter zeros over them.
          out.push_back(scatter_node(stream(), ScatterMode::None, g, idx, zeros_like(upd), axes_));
          break;
        case ScatterMode::Sum: out.push_back(g); break;
        case ScatterMode::Prod:
          // out[c] = a[c] * (product of the updates at c): the factor is a scatter_prod
          // into ones, exact with zeros among the updates.
          out.push_back(multiply(g, scatter_node(stream(), ScatterMode::Prod, ones_like(a), idx, upd, axes_)));
          break;
        case ScatterMode::Max:
        case ScatterMode::Min:
          out.push_back(where(equal(outputs[0], a), g, zeros_like(g)));
          break;
      }
    } else if (i == last) {
      switch (mode_) {
        case ScatterMode::None:
        case ScatterMode::Sum:
          // For None with duplicates every duplicate gets the position's cotangent (MLX).
          out.push_back(gather_node(stream(), g, idx, axes_, window));
          break;
        case ScatterMode::Prod:
          // MLX has no rule here; nuvec's is exact with zero updates (see the helper).
          out.push_back(multiply(
              gather_node(stream(), g, idx, axes_, window),
              prod_update_factor(stream(), a, idx, upd, axes_, window)));
          break;
        case ScatterMode::Max:
        case ScatterMode::Min: {
          array gg = gather_node(stream(), g, idx, axes_, window);
          array hit = equal(gather_node(stream(), outputs[0], idx, axes_, window), upd);
          out.push_back(where(hit, gg, zeros_like(gg)));
          break;
        }
      }
    } else {
      out.push_back(zeros_like(primals[i])); // indices: no derivative
    }
  }
  return out;
}

std::vector<array> Scatter::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array& a = primals[0];
  const array& upd = primals.back();
  std::vector<array> idx(primals.begin() + 1, primals.end() - 1);
  const int last = static_cast<int>(primals.size()) - 1;
  std::optional<array> ta, tu;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) ta = tangents[i];
    if (argnums[i] == last) tu = tangents[i];
  }
  Dtype dt = ta ? ta->dtype() : tu ? tu->dtype() : a.dtype();
  array t_a = ta ? *ta : zeros(a.shape(), dt);
  array t_u = tu ? *tu : zeros(upd.shape(), dt);
  switch (mode_) {
    case ScatterMode::None:
    case ScatterMode::Sum: return {scatter_node(stream(), mode_, t_a, idx, t_u, axes_)};
    case ScatterMode::Prod: {
      array out = multiply(t_a, scatter_node(stream(), ScatterMode::Prod, ones_like(a), idx, upd, axes_));
      if (!tu) return {out};
      const size_t r = idx.empty() ? 0 : idx[0].ndim();
      array f = prod_update_factor(stream(), a, idx, upd, axes_, update_window(upd, r));
      return {scatter_node(stream(), ScatterMode::Sum, out, idx, multiply(f, t_u), axes_)};
    }
    case ScatterMode::Max:
    case ScatterMode::Min: {
      // The transpose of the reverse rule: every input equal to the result contributes.
      const size_t r = idx.empty() ? 0 : idx[0].ndim();
      array result = scatter_node(stream(), mode_, a, idx, upd, axes_);
      array from_a = where(equal(result, a), t_a, zeros_like(t_a));
      array hit = equal(gather_node(stream(), result, idx, axes_, update_window(upd, r)), upd);
      array from_u = where(hit, t_u, zeros_like(t_u));
      return {scatter_node(stream(), ScatterMode::Sum, from_a, idx, from_u, axes_)};
    }
  }
  return {};
}

std::pair<std::vector<array>, std::vector<int>> Scatter::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  std::vector<array> idx(inputs.begin() + 1, inputs.end() - 1);
  if (!any_batched(axes)) {
    return {{scatter_node(stream(), mode_, inputs[0], idx, inputs.back(), axes_)}, {-1}};
  }
  auto b = batch_first(inputs, axes);
  const int n = batch_size(inputs, axes);
  Shape ishape{n};
  if (b.size() > 2) ishape = b[1].shape();
  const int r0 = static_cast<int>(ishape.size()) - 1;
  std::vector<array> bidx{batch_index(ishape)};
  bidx.insert(bidx.end(), b.begin() + 1, b.end() - 1);
  std::vector<int> new_axes{0};
  for (int ax : axes_) new_axes.push_back(ax + 1);
  // Updates (B, I..., window...) get the batch axis's size-1 window.
  array upd = expand_dims(b.back(), 1 + r0);
  return {{scatter_node(stream(), mode_, b[0], bidx, upd, new_axes)}, {0}};
}

bool Scatter::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const Scatter&>(other);
  return mode_ == o.mode_ && axes_ == o.axes_;
}

// ---------------------------------------------------------------------------------------
// MaskedRank: input mask (bool), output int32 of its shape.

const char* MaskedRank::name() const {
  return "MaskedRank";
}

std::vector<Shape> MaskedRank::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> MaskedRank::vjp(
    const std::vector<array>& primals,
    const std::vector<array>&,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  std::vector<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) out.push_back(zeros_like(primals[0]));
  return out;
}

std::vector<array> MaskedRank::jvp(
    const std::vector<array>& primals,
    const std::vector<array>&,
    const std::vector<int>&) {
  return {zeros(primals[0].shape(), int32)};
}

std::pair<std::vector<array>, std::vector<int>> MaskedRank::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (!any_batched(axes)) {
    return {{array(inputs[0].shape(), int32, std::make_shared<MaskedRank>(stream(), start_axis_), inputs)}, {-1}};
  }
  array m = moveaxis(inputs[0], axes[0], 0);
  return {{array(m.shape(), int32, std::make_shared<MaskedRank>(stream(), start_axis_ + 1), {m})}, {0}};
}

bool MaskedRank::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this) &&
      static_cast<const MaskedRank&>(other).start_axis_ == start_axis_;
}

} // namespace nuvec
