// nuvec: norm_rope (shared/seeds/001): rms_norm, rope and the cache write of an attention
// layer's queries and keys, as the seed's fallback graph composes them (each of the first two
// is a fused node with its own kernels).
#include "nuvec/fast.h"
#include "ops/ops_common.h"

namespace nuvec::fast {

array norm_rope(
    const array& x,
    const std::optional<array>& weight,
    std::optional<float> eps,
    const Rotation& rotation,
    int offset,
    const std::optional<array>& cache,
    StreamOrDevice s) {
  const char* op = "norm_rope";
  if (x.ndim() != 4) throw_invalid_argument(op, "x must be 4-d [B, H, L, D]; got shape ", x.shape(), ".");
  if (weight && !eps) throw_invalid_argument(op, "a weight needs eps (the weight scales the normalised rows).");
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
  // The weight in x's dtype: the rows keep x's dtype (and the cache's) whatever the weight's.
  std::optional<array> w;
  if (weight) w = astype(*weight, x.dtype(), s);
  array h = eps ? rms_norm(x, w, *eps, s) : x;
  array r = rope(h, rotation.dims, rotation.traditional, rotation.base, rotation.scale, offset, rotation.freqs, s);
  if (!cache) return r;
  const Shape& cs = cache->shape();
  return slice_update(*cache, r, {0, 0, offset, 0}, {cs[0], cs[1], offset + x.shape(2), cs[3]}, s);
}

} // namespace nuvec::fast
