// nuvec: sort and argsort along an axis (MLX's ops.cpp semantics; NaNs last and a stable
// argsort, as NumPy).
#include "ops/ops_common.h"

namespace nuvec {

array sort(const array& a, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "sort");
  return array(a.shape(), a.dtype(), std::make_shared<Sort>(to_stream(s), ax), {a});
}

array sort(const array& a, StreamOrDevice s) {
  return sort(flatten(a, s), 0, s);
}

array argsort(const array& a, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "argsort");
  return array(a.shape(), uint32, std::make_shared<ArgSort>(to_stream(s), ax), {a});
}

array argsort(const array& a, StreamOrDevice s) {
  return argsort(flatten(a, s), 0, s);
}

} // namespace nuvec
