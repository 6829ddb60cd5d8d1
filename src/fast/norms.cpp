// nuvec: rms_norm and layer_norm as their fallback graphs (the seed's checks and graphs,
// shared/seeds/001; MLX's fast.cpp fallbacks). The fused kernels come with the fused-op base.
#include "nuvec/fast.h"

#include <initializer_list>
#include <utility>

#include "ops/ops_common.h"

namespace nuvec::fast {

namespace {

// x must have an axis; a parameter must be 1-d with x's last-axis size. Returns the dtype
// promoted over x and the given parameters, which must be floating.
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
    throw_invalid_argument(op, "the input must be floating; got ", dt, ".");
  }
  return dt;
}

} // namespace

array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s) {
  Dtype dt = check_norm("rms_norm", x, {{"weight", &weight}});
  array xf = astype(x, dt == float64 ? float64 : float32, s);
  array n = rsqrt(add(mean(square(xf, s), -1, true, s), array(eps, xf.dtype()), s), s);
  array y = astype(multiply(xf, n, s), dt, s);
  return weight ? multiply(y, astype(*weight, dt, s), s) : y;
}

array layer_norm(
    const array& x,
    const std::optional<array>& weight,
    const std::optional<array>& bias,
    float eps,
    StreamOrDevice s) {
  Dtype dt = check_norm("layer_norm", x, {{"weight", &weight}, {"bias", &bias}});
  array xf = astype(x, dt == float64 ? float64 : float32, s);
  array xc = subtract(xf, mean(xf, -1, true, s), s);
  array v = mean(square(xc, s), -1, true, s);
  array y = astype(multiply(xc, rsqrt(add(v, array(eps, xf.dtype()), s), s), s), dt, s);
  if (weight) y = multiply(y, astype(*weight, dt, s), s);
  if (bias) y = add(y, astype(*bias, dt, s), s);
  return y;
}

} // namespace nuvec::fast
