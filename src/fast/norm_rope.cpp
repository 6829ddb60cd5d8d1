// nuvec: norm_rope (shared/seeds/001): rms_norm, rope and the cache write of an attention
// layer's queries and keys. Its meaning is the seed's composition (norm_rope_graph: an
// RmsNorm node, a Rope node and a slice_update of the cache), which is the NormRope fused
// primitive's fallback; the op records one NormRope node where its kernels cover the case,
// and its rules (vjp, jvp, vmap) come from the fallback.
#include "fast/norm_rope.h"

#include <stdexcept>
#include <type_traits>

#include "backend/common/rope_plan.h"
#include "nuvec/fast.h"
#include "ops/ops_common.h"
#include "fast/int32_indices.h"

namespace nuvec {

namespace {

// The composition (the seed's norm_rope_graph): the weight is in x's dtype already. Reports
// the arguments rms_norm and rope reject. Offset: an int, or rope's offset array (no cache).
template <typename Offset>
array norm_rope_graph(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const fast::Rotation& rotation,
    const Offset& offset,
    const std::optional<array>& cache,
    StreamOrDevice s) {
  array h = eps ? fast::rms_norm(x, weight, *eps, s) : x;
  array r = fast::rope(
      h, rotation.dims, rotation.traditional, rotation.base, rotation.scale, offset, rotation.freqs, s);
  if constexpr (!std::is_same_v<Offset, int>) {
    return r;
  } else {
    if (!cache) return r;
    const Shape& cs = cache->shape();
    return slice_update(*cache, r, {0, 0, offset, 0}, {cs[0], cs[1], offset + x.shape(2), cs[3]}, s);
  }
}

// The body both overloads share once each has checked its own offset (and cache): the weight
// in x's dtype (the rows keep x's dtype, and the cache's, whatever the weight's); the
// composition when the rotation, the weight or x's dtype is one rms_norm or rope rejects (it
// reports them); else one NormRope node over (x, w[, freqs], extra...), extra being the cache
// or the offsets.
template <typename Offset>
array norm_rope_node(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const fast::Rotation& rotation,
    const Offset& offset,
    const std::optional<array>& cache,
    StreamOrDevice s) {
  std::optional<array> w;
  if (weight) w = astype(*weight, x.dtype(), s);
  const int d = x.shape(3), dims = rotation.dims;
  const bool rotation_valid = dims > 0 && dims % 2 == 0 && dims <= d &&
      rotation.base.has_value() != rotation.freqs.has_value() &&
      (!rotation.freqs || (rotation.freqs->ndim() == 1 && rotation.freqs->shape(0) == dims / 2));
  const bool weight_valid = !w || (w->ndim() == 1 && w->shape(0) == d);
  if (!rotation_valid || !weight_valid || !issubdtype(x.dtype(), floating)) {
    return norm_rope_graph(x, w, eps, rotation, offset, cache, s);
  }
  // Without the norm, Rope's kernels take every row shape; the norm's kernel needs whole
  // vectors and a row a warp holds.
  const bool covers = x.size() > 0 &&
      (!eps || norm_rope_kernel_covers(d, dims, rotation.traditional, x.itemsize()));
  std::vector<array> inputs = {x, w ? *w : array(1.0, x.dtype())};
  if (rotation.freqs) inputs.push_back(astype(*rotation.freqs, float32, s));
  constexpr bool offsets = !std::is_same_v<Offset, int>;
  int fixed = 0;
  if constexpr (offsets) {
    // Rope's offsets: int32, one element per batch row or one for all.
    // (saturated, as rope's: a plain cast would wrap a wide offset to a small one).
    inputs.push_back(fast::detail::saturate_to_int32(offset.ndim() == 0 ? reshape(offset, {1}, s) : offset, s));
  } else {
    fixed = offset;
    if (cache) inputs.push_back(*cache);
  }
  auto primitive = std::make_shared<NormRope>(
      to_stream(s), eps.has_value(), eps.value_or(0.0f), dims, rotation.traditional, rotation.base.value_or(1.0f),
      rotation.scale, fixed, cache.has_value(), offsets);
  const Shape& shape = cache ? cache->shape() : x.shape();
  return record_or_fallback(covers, std::move(primitive), {shape}, {x.dtype()}, inputs)[0];
}

// The checks of x and the weight both overloads make first.
void check_x_and_weight(const array& x, const std::optional<array>& weight, std::optional<float> eps) {
  const char* op = "norm_rope";
  if (x.ndim() != 4) throw_invalid_argument(op, "x must be 4-d [B, H, L, D]; got shape ", x.shape(), ".");
  if (weight && !eps) throw_invalid_argument(op, "a weight needs eps (the weight scales the normalised rows).");
}

} // namespace

namespace fast {

array norm_rope(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const Rotation& rotation,
    int offset,
    const std::optional<array>& cache,
    StreamOrDevice s) {
  const char* op = "norm_rope";
  check_x_and_weight(x, weight, eps);
  if (offset < 0) throw_invalid_argument(op, "offset must be non-negative; got ", offset, ".");
  if (cache) {
    const array& c = *cache;
    if (c.ndim() != 4 || c.shape(0) != x.shape(0) || c.shape(1) != x.shape(1) || c.shape(3) != x.shape(3)) {
      throw_invalid_argument(op, "the cache must be [B, H, Lmax, D] with x's B, H and D; got cache ", c.shape(),
                             " for x ", x.shape(), ".");
    }
    if (c.dtype() != x.dtype()) {
      throw_invalid_argument(op, "the cache must have x's dtype ", x.dtype(), "; got ", c.dtype(), ".");
    }
    if (int64_t(offset) + x.shape(2) > c.shape(2)) {
      throw_invalid_argument(op, "the cache of ", c.shape(2), " positions cannot hold rows ", offset, " to ",
                             int64_t(offset) + x.shape(2) - 1, ".");
    }
  }
  return norm_rope_node(x, weight, eps, rotation, offset, cache, s);
}

array norm_rope(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const Rotation& rotation,
    const array& offset,
    StreamOrDevice s) {
  check_x_and_weight(x, weight, eps);
  if (!issubdtype(offset.dtype(), integer) || offset.ndim() > 1 ||
      (offset.ndim() == 1 && offset.shape(0) != 1 && offset.shape(0) != x.shape(0))) {
    throw_invalid_argument("norm_rope", "the offset array must be an integer scalar or [B] with B = ", x.shape(0),
                           "; got ", offset.dtype(), " ", offset.shape(), ".");
  }
  return norm_rope_node(x, weight, eps, rotation, offset, std::nullopt, s);
}

} // namespace fast

NormRope::NormRope(
    Stream stream,
    bool normalise,
    float eps,
    int dims,
    bool traditional,
    float base,
    float scale,
    int offset,
    bool cache,
    bool offsets)
    : FastPrimitive(stream, [=](const std::vector<array>& in) {
        // Inputs (x, w[, freqs][, cache][, offsets]); a 0-d w is no weight.
        const bool freqs = in.size() > size_t(2 + cache + offsets);
        fast::Rotation rotation{dims, traditional, std::nullopt, scale, std::nullopt};
        std::optional<array> w, c;
        std::optional<float> norm_eps;
        if (normalise) norm_eps = eps;
        if (in[1].ndim() == 1) w = in[1];
        if (freqs) rotation.freqs = in[2];
        else rotation.base = base;
        if (offsets) return std::vector<array>{norm_rope_graph(in[0], w, norm_eps, rotation, in.back(), c, stream)};
        if (cache) c = in.back();
        return std::vector<array>{norm_rope_graph(in[0], w, norm_eps, rotation, offset, c, stream)};
      }),
      normalise_(normalise),
      eps_(eps),
      dims_(dims),
      traditional_(traditional),
      base_(base),
      scale_(scale),
      offset_(offset),
      cache_(cache),
      offsets_(offsets) {
  if (cache && offsets) throw std::invalid_argument("[norm_rope] offsets given as an array take no cache.");
}

RopePlan NormRope::plan(const Shape& x, int64_t cache_len) const {
  RopePlan p = rope_plan(x, dims_, traditional_, base_, scale_, true);
  p.offset = offset_;
  p.out_t_len = cache_ ? cache_len : p.t_len;
  p.out_t0 = cache_ ? offset_ : 0;
  p.normalise = normalise_;
  p.eps = eps_;
  return p; // with offsets_, the caller sets per_batch_offset from the offsets' size
}

const char* NormRope::name() const {
  return "NormRope";
}

std::vector<Shape> NormRope::output_shapes(const std::vector<array>& inputs) {
  return {cache_ ? inputs.back().shape() : inputs[0].shape()};
}

bool NormRope::is_equivalent(const Primitive& other) const {
  auto o = same_type<NormRope>(other);
  return o && o->state() == state();
}

} // namespace nuvec
