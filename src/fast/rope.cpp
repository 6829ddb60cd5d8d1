// nuvec: rope (MLX's fast::rope signatures; the seed's checks and rope_graph), its fallback
// graph and the rules of the Rope fused primitive: the vjp is the inverse rotation of the
// cotangent (a Rope node with forward flipped); jvp from the fallback.
#include "fast/rope.h"

#include <tuple>

#include "backend/common/math/rope.h"
#include "backend/common/rope_plan.h"
#include "fast/int32_indices.h"
#include "nuvec/fast.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// The graph of rope over x (the seed's rope_graph): x viewed as [B, -1, T, D].
array rope_graph(const std::vector<array>& in, int dims, bool traditional, float base, float scale,
                 bool forward, StreamOrDevice s) {
  const array& x = in[0];
  const int nd = static_cast<int>(x.ndim());
  const int b = x.shape(0), t = x.shape(nd - 2), d = x.shape(nd - 1);
  array x4 = reshape(x, {b, -1, t, d}, s);
  const Dtype dt = x.dtype();
  const int half = dims / 2;
  array offset = in[1].size() > 1 ? reshape(in[1], {-1, 1, 1}, s) : reshape(in[1], {}, s);
  array positions = multiply(add(arange(0.0, t, 1.0, float32, s), astype(offset, float32, s), s), array(scale), s);
  array inv_freqs = in.size() > 2
      ? divide(array(1.0f), in[2], s)
      : exp(multiply(arange(0.0, -half, -1.0, float32, s), array(math::rope_log_base_over_half(base, half)), s), s);
  array theta = multiply(expand_dims(positions, -1, s), inv_freqs, s);
  array c = astype(cos(theta, s), dt, s), sn = astype(sin(theta, s), dt, s);
  const int start2 = traditional ? 1 : half, step = traditional ? 2 : 1;
  auto last = [&](int start) {
    return slice(x4, {0, 0, 0, start}, {b, x4.shape(1), t, start + step * (half - 1) + 1}, {1, 1, 1, step}, s);
  };
  array x1 = last(0), x2 = last(start2);
  array r1 = forward ? subtract(multiply(x1, c, s), multiply(x2, sn, s), s)
                     : add(multiply(x2, sn, s), multiply(x1, c, s), s);
  array r2 = forward ? add(multiply(x1, sn, s), multiply(x2, c, s), s)
                     : subtract(multiply(x2, c, s), multiply(x1, sn, s), s);
  r1 = broadcast_to(r1, x1.shape(), s);
  r2 = broadcast_to(r2, x1.shape(), s);
  auto put = [&](const array& base_arr, const array& r, int start) {
    return slice_update(base_arr, r, {0, 0, 0, start}, {b, x4.shape(1), t, start + step * (half - 1) + 1},
                        {1, 1, 1, step}, s);
  };
  array out = put(put(x4, r1, 0), r2, start2);
  return reshape(out, x.shape(), s);
}

} // namespace

namespace fast {

array rope(
    const array& x,
    int dims,
    bool traditional,
    std::optional<float> base,
    float scale,
    const array& offset,
    const std::optional<array>& freqs,
    StreamOrDevice s) {
  const char* op = "rope";
  if (x.ndim() < 3) throw_invalid_argument(op, "the input needs at least 3 dimensions; got shape ", x.shape(), ".");
  if (!issubdtype(x.dtype(), floating)) throw_invalid_argument(op, "the input must be real floating; got ", x.dtype(), ".");
  if (offset.ndim() > 1 || (offset.size() != 1 && offset.size() != static_cast<size_t>(x.shape(0)))) {
    throw_invalid_argument(op, "offset must be a scalar or have ", x.shape(0), " elements (one per batch row); got shape ",
                           offset.shape(), ".");
  }
  if (!issubdtype(offset.dtype(), integer)) throw_invalid_argument(op, "offset must be an integer; got ", offset.dtype(), ".");
  if (dims <= 0 || dims % 2 != 0 || dims > x.shape(-1)) {
    throw_invalid_argument(op, "dims must be even, positive and at most ", x.shape(-1), "; got ", dims, ".");
  }
  if (base.has_value() == freqs.has_value()) throw_invalid_argument(op, "exactly one of base and freqs must be given.");
  if (freqs && (freqs->ndim() != 1 || freqs->shape(0) != dims / 2)) {
    throw_invalid_argument(op, "freqs must be 1-d with ", dims / 2, " elements; got shape ", freqs->shape(), ".");
  }
  if (x.size() == 0) return x; // nothing to rotate (the graph cannot view [B, -1, T, D] of it)
  // Positions are int32: a wider offset saturates (a plain cast wraps 2^32 + 7 to 7).
  std::vector<array> inputs = {x, fast::detail::saturate_to_int32(offset, s)};
  if (freqs) inputs.push_back(astype(*freqs, float32, s));
  return record_or_fallback(
      x.size() > 0, std::make_shared<Rope>(to_stream(s), dims, traditional, base.value_or(1.0f), scale, true),
      {x.shape()}, {x.dtype()}, inputs)[0];
}

array rope(
    const array& x,
    int dims,
    bool traditional,
    std::optional<float> base,
    float scale,
    int offset,
    const std::optional<array>& freqs,
    StreamOrDevice s) {
  return rope(x, dims, traditional, base, scale, array(offset, int32), freqs, s);
}

} // namespace fast

Rope::Rope(Stream stream, int dims, bool traditional, float base, float scale, bool forward)
    : FastPrimitive(stream, [=](const std::vector<array>& in) {
        return std::vector<array>{rope_graph(in, dims, traditional, base, scale, forward, stream)};
      }),
      dims_(dims),
      traditional_(traditional),
      base_(base),
      scale_(scale),
      forward_(forward) {}

RopePlan Rope::plan(const Shape& x) const {
  return rope_plan(x, dims_, traditional_, base_, scale_, forward_);
}

const char* Rope::name() const {
  return "Rope";
}

std::vector<Shape> Rope::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Rope::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  std::vector<array> out;
  for (int a : argnums) {
    if (a != 0) throw_invalid_argument("rope", "there is no gradient with respect to the offset or the frequencies.");
    // The rotation is orthogonal: its transpose is the inverse rotation.
    std::vector<array> in = primals;
    in[0] = astype(cotangents[0], primals[0].dtype(), stream());
    out.push_back(array(in[0].shape(), in[0].dtype(),
                        std::make_shared<Rope>(stream(), dims_, traditional_, base_, scale_, !forward_), in));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Rope::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const int nd = static_cast<int>(inputs[0].ndim());
  bool rest_unbatched = true;
  for (size_t i = 1; i < axes.size(); ++i) rest_unbatched = rest_unbatched && axes[i] < 0;
  // Rows are independent of the leading axes when the offset is one scalar, so the batch
  // axis may join them in front; otherwise the graph.
  if (!rest_unbatched || inputs[1].size() != 1 || axes[0] < 0 || axes[0] >= nd - 2 || inputs[0].size() == 0) {
    return FastPrimitive::vmap(inputs, axes);
  }
  std::vector<array> in = inputs;
  in[0] = moveaxis(inputs[0], axes[0], 0, stream());
  return {{array(in[0].shape(), in[0].dtype(),
                 std::make_shared<Rope>(stream(), dims_, traditional_, base_, scale_, forward_), in)},
          {0}};
}

bool Rope::is_equivalent(const Primitive& other) const {
  auto o = same_type<Rope>(other);
  return o && o->state() == state();
}

} // namespace nuvec
