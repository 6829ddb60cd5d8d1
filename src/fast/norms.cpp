// nuvec: rms_norm, add_rms_norm and layer_norm (the seed's checks, shared/seeds/001; MLX's
// fast.cpp signatures), their fallback graphs and the rules of their fused primitives. The
// backward passes are primitives of their own (RmsNormVjp, LayerNormVjp) with dedicated
// kernels; their fallbacks below are the gradient formulas (shared/seeds/000), and their own
// derivatives (second derivatives of the norms) come from those fallbacks.
#include "fast/norms.h"

#include <initializer_list>
#include <utility>

#include "nuvec/fast.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// The dtype the statistics run in: float64 rows in float64, everything else in float32.
Dtype stats_dtype(Dtype dt) {
  return dt == float64 ? float64 : float32;
}

// x must have an axis; a parameter must be 1-d with x's last-axis size. Returns the dtype
// promoted over x and the given parameters, which must be real floating.
Dtype check_norm(
    const char* op,
    const array& x,
    std::initializer_list<std::pair<const char*, const std::optional<array>*>> params) {
  if (x.ndim() == 0) {
    throw_invalid_argument(op, "the input needs at least one dimension; got shape ", x.shape(), ".");
  }
  Dtype dt = x.dtype();
  for (auto [what, p] : params) {
    if (!p->has_value()) continue;
    const array& a = **p;
    if (a.ndim() != 1 || a.shape(0) != x.shape(-1)) {
      throw_invalid_argument(
          op, what, " must be 1-d with ", x.shape(-1), " elements (the input's last axis); got shape ",
          a.shape(), ".");
    }
    dt = promote_types(dt, a.dtype());
  }
  if (!issubdtype(dt, floating)) {
    throw_invalid_argument(op, "the input must be real floating; got ", dt, ".");
  }
  return dt;
}

// A parameter in dtype dt, or the 0-d `absent` value that stands for "none".
array param_or(const std::optional<array>& p, double absent, Dtype dt, StreamOrDevice s) {
  return p ? astype(*p, dt, s) : array(absent, dt);
}

// Sum over every axis but the last (the per-feature gradient of a 1-d parameter).
array sum_rows(const array& a, StreamOrDevice s) {
  std::vector<int> axes;
  for (int d = 0; d + 1 < static_cast<int>(a.ndim()); ++d) axes.push_back(d);
  return axes.empty() ? a : sum(a, axes, false, s);
}

// The gradient of a parameter: the row sum, or 0 (0-d) for an absent parameter.
array param_grad(const array& p, const array& per_row, Dtype dt, StreamOrDevice s) {
  return p.ndim() == 0 ? zeros({}, dt) : astype(sum_rows(per_row, s), dt, s);
}

// Whether the kernels take these (already cast) inputs: real floating and not empty.
bool kernel_covers(const array& x) {
  return issubdtype(x.dtype(), floating) && x.size() > 0;
}

// {dx, dw} of rms_norm(x, w) for the cotangent g: one RmsNormVjp node (g cast to x's dtype).
std::vector<array> rms_norm_grads(const array& x, const array& w, const array& g, float eps, const Stream& s) {
  return fast::record_or_fallback(
      kernel_covers(x), std::make_shared<RmsNormVjp>(s, eps), {x.shape(), w.shape()}, {x.dtype(), w.dtype()},
      {x, w, astype(g, x.dtype(), s)});
}

} // namespace

namespace fast {

array rms_norm_graph(const array& x, const array& w, float eps, StreamOrDevice s) {
  const Dtype dt = x.dtype();
  array xf = astype(x, stats_dtype(dt), s);
  array n = rsqrt(add(mean(square(xf, s), -1, true, s), array(eps, xf.dtype()), s), s);
  array y = astype(multiply(xf, n, s), dt, s);
  return w.ndim() == 0 ? y : multiply(y, w, s);
}

array layer_norm_graph(const array& x, const array& w, const array& b, float eps, StreamOrDevice s) {
  const Dtype dt = x.dtype();
  array xf = astype(x, stats_dtype(dt), s);
  array xc = subtract(xf, mean(xf, -1, true, s), s);
  array v = mean(square(xc, s), -1, true, s);
  array y = astype(multiply(xc, rsqrt(add(v, array(eps, xf.dtype()), s), s), s), dt, s);
  if (w.ndim() != 0) y = multiply(y, w, s);
  if (b.ndim() != 0) y = add(y, b, s);
  return y;
}

array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s) {
  const Dtype dt = check_norm("rms_norm", x, {{"weight", &weight}});
  array xd = astype(x, dt, s);
  array w = param_or(weight, 1.0, dt, s);
  return record_or_fallback(
      kernel_covers(xd), std::make_shared<RmsNorm>(to_stream(s), eps), {xd.shape()}, {dt}, {xd, w})[0];
}

std::pair<array, array> add_rms_norm(
    const array& x,
    const array& residual,
    const std::optional<array>& weight,
    float eps,
    StreamOrDevice s) {
  const Dtype dt = promote_types(x.dtype(), residual.dtype());
  bool fused = x.shape() == residual.shape() && x.ndim() > 0 && issubdtype(dt, floating);
  if (fused && weight) {
    fused = weight->ndim() == 1 && weight->shape(0) == x.shape(-1) &&
        promote_types(dt, weight->dtype()) == dt;
  }
  if (!fused) {
    // Broadcasting shapes, or a weight that promotes further: the composition (which also
    // reports bad input, naming rms_norm or add).
    array h = add(x, residual, s);
    return {h, rms_norm(h, weight, eps, s)};
  }
  array xd = astype(x, dt, s), rd = astype(residual, dt, s);
  array w = param_or(weight, 1.0, dt, s);
  auto out = record_or_fallback(
      kernel_covers(xd), std::make_shared<AddRmsNorm>(to_stream(s), eps), {xd.shape(), xd.shape()},
      {dt, dt}, {xd, rd, w});
  return {out[0], out[1]};
}

array layer_norm(
    const array& x,
    const std::optional<array>& weight,
    const std::optional<array>& bias,
    float eps,
    StreamOrDevice s) {
  const Dtype dt = check_norm("layer_norm", x, {{"weight", &weight}, {"bias", &bias}});
  array xd = astype(x, dt, s);
  array w = param_or(weight, 1.0, dt, s);
  array b = param_or(bias, 0.0, dt, s);
  return record_or_fallback(
      kernel_covers(xd), std::make_shared<LayerNorm>(to_stream(s), eps), {xd.shape()}, {dt},
      {xd, w, b})[0];
}

} // namespace fast

// ---- RmsNorm ---------------------------------------------------------------------------

RmsNorm::RmsNorm(Stream stream, float eps)
    : FastPrimitive(stream, [stream, eps](const std::vector<array>& in) {
        return std::vector<array>{fast::rms_norm_graph(in[0], in[1], eps, stream)};
      }),
      eps_(eps) {}

const char* RmsNorm::name() const {
  return "RmsNorm";
}

std::vector<Shape> RmsNorm::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> RmsNorm::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  auto grads = rms_norm_grads(primals[0], primals[1], cotangents[0], eps_, stream());
  std::vector<array> out;
  for (int a : argnums) out.push_back(grads[a]);
  return out;
}

std::pair<std::vector<array>, std::vector<int>> RmsNorm::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[1] >= 0) return FastPrimitive::vmap(inputs, axes); // a batched weight: the graph
  return vmap_trailing(inputs, axes, 1, [&](const std::vector<array>& in) {
    return std::vector<array>{
        array(in[0].shape(), in[0].dtype(), std::make_shared<RmsNorm>(stream(), eps_), in)};
  });
}

bool RmsNorm::is_equivalent(const Primitive& other) const {
  auto o = same_type<RmsNorm>(other);
  return o && o->eps_ == eps_;
}

// ---- RmsNormVjp ------------------------------------------------------------------------

RmsNormVjp::RmsNormVjp(Stream stream, float eps)
    : FastPrimitive(stream, [stream, eps](const std::vector<array>& in) {
        const array& x = in[0];
        const array& w = in[1];
        const Dtype dt = x.dtype(), acc = stats_dtype(dt);
        array xf = astype(x, acc, stream), gf = astype(in[2], acc, stream);
        array wf = astype(w, acc, stream);
        array n = rsqrt(add(mean(square(xf, stream), -1, true, stream), array(eps, acc), stream), stream);
        array n3 = multiply(square(n, stream), n, stream);
        array gw = multiply(gf, wf, stream);
        array t = mean(multiply(gw, xf, stream), -1, true, stream);
        array dx = subtract(multiply(gw, n, stream), multiply(multiply(xf, t, stream), n3, stream), stream);
        array per_row = multiply(gf, multiply(xf, n, stream), stream);
        return std::vector<array>{astype(dx, dt, stream), param_grad(w, per_row, w.dtype(), stream)};
      }),
      eps_(eps) {}

const char* RmsNormVjp::name() const {
  return "RmsNormVjp";
}

std::vector<Shape> RmsNormVjp::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape(), inputs[1].shape()};
}

bool RmsNormVjp::is_equivalent(const Primitive& other) const {
  auto o = same_type<RmsNormVjp>(other);
  return o && o->eps_ == eps_;
}

// ---- AddRmsNorm ------------------------------------------------------------------------

AddRmsNorm::AddRmsNorm(Stream stream, float eps)
    : FastPrimitive(stream, [stream, eps](const std::vector<array>& in) {
        array h = add(in[0], in[1], stream);
        array y = fast::record_or_fallback(
            kernel_covers(h), std::make_shared<RmsNorm>(stream, eps), {h.shape()}, {h.dtype()},
            {h, in[2]})[0];
        return std::vector<array>{h, y};
      }),
      eps_(eps) {}

const char* AddRmsNorm::name() const {
  return "AddRmsNorm";
}

std::vector<Shape> AddRmsNorm::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape(), inputs[0].shape()};
}

std::vector<array> AddRmsNorm::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& h = outputs[0];
  auto grads = rms_norm_grads(h, primals[2], cotangents[1], eps_, stream());
  array dh = fast::is_known_zeros(cotangents[0])
      ? grads[0]
      : add(grads[0], astype(cotangents[0], h.dtype(), stream()), stream());
  std::vector<array> out;
  for (int a : argnums) out.push_back(a == 2 ? grads[1] : dh);
  return out;
}

bool AddRmsNorm::is_equivalent(const Primitive& other) const {
  auto o = same_type<AddRmsNorm>(other);
  return o && o->eps_ == eps_;
}

// ---- LayerNorm -------------------------------------------------------------------------

LayerNorm::LayerNorm(Stream stream, float eps)
    : FastPrimitive(stream, [stream, eps](const std::vector<array>& in) {
        return std::vector<array>{fast::layer_norm_graph(in[0], in[1], in[2], eps, stream)};
      }),
      eps_(eps) {}

const char* LayerNorm::name() const {
  return "LayerNorm";
}

std::vector<Shape> LayerNorm::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> LayerNorm::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& x = primals[0];
  array g = astype(cotangents[0], x.dtype(), stream());
  auto grads = fast::record_or_fallback(
      kernel_covers(x), std::make_shared<LayerNormVjp>(stream(), eps_),
      {x.shape(), primals[1].shape(), primals[2].shape()},
      {x.dtype(), primals[1].dtype(), primals[2].dtype()}, {x, primals[1], primals[2], g});
  std::vector<array> out;
  for (int a : argnums) out.push_back(grads[a]);
  return out;
}

std::pair<std::vector<array>, std::vector<int>> LayerNorm::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[1] >= 0 || axes[2] >= 0) return FastPrimitive::vmap(inputs, axes);
  return vmap_trailing(inputs, axes, 1, [&](const std::vector<array>& in) {
    return std::vector<array>{
        array(in[0].shape(), in[0].dtype(), std::make_shared<LayerNorm>(stream(), eps_), in)};
  });
}

bool LayerNorm::is_equivalent(const Primitive& other) const {
  auto o = same_type<LayerNorm>(other);
  return o && o->eps_ == eps_;
}

// ---- LayerNormVjp ----------------------------------------------------------------------

LayerNormVjp::LayerNormVjp(Stream stream, float eps)
    : FastPrimitive(stream, [stream, eps](const std::vector<array>& in) {
        const array& x = in[0];
        const array& w = in[1];
        const array& b = in[2];
        const Dtype dt = x.dtype(), acc = stats_dtype(dt);
        const auto s = stream;
        array xf = astype(x, acc, s), gf = astype(in[3], acc, s), wf = astype(w, acc, s);
        array xc = subtract(xf, mean(xf, -1, true, s), s);
        array n = rsqrt(add(mean(square(xc, s), -1, true, s), array(eps, acc), s), s);
        array n3 = multiply(square(n, s), n, s);
        array wg = multiply(wf, gf, s);
        array mwg = mean(wg, -1, true, s);
        array mwgxc = mean(multiply(wg, xc, s), -1, true, s);
        array dx = subtract(
            multiply(subtract(wg, mwg, s), n, s), multiply(multiply(xc, mwgxc, s), n3, s), s);
        return std::vector<array>{
            astype(dx, dt, s), param_grad(w, multiply(gf, multiply(xc, n, s), s), w.dtype(), s),
            param_grad(b, gf, b.dtype(), s)};
      }),
      eps_(eps) {}

const char* LayerNormVjp::name() const {
  return "LayerNormVjp";
}

std::vector<Shape> LayerNormVjp::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape(), inputs[1].shape(), inputs[2].shape()};
}

bool LayerNormVjp::is_equivalent(const Primitive& other) const {
  auto o = same_type<LayerNormVjp>(other);
  return o && o->eps_ == eps_;
}

} // namespace nuvec
