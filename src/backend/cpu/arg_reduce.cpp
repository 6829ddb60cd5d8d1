// nuvec: CPU kernel of ArgReduce (argmin/argmax along one axis, uint32 output). The first
// extreme wins ties; the first NaN wins over everything (NumPy's rule).
#include <cmath>

#include "backend/common/dispatch.h"
#include "backend/common/reduce_plan.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

template <bool is_max, typename T>
uint32_t arg_extreme(const T* p, int64_t n, int64_t stride) {
  if (n == 0) return 0;
  T best = p[0];
  uint32_t at = 0;
  if (is_nan_element(best)) return 0;
  for (int64_t i = 1; i < n; ++i) {
    T v = p[i * stride];
    if (is_nan_element(v)) return static_cast<uint32_t>(i);
    bool better;
    if constexpr (is_max) better = v > best;
    else better = v < best;
    if (better) {
      best = v;
      at = static_cast<uint32_t>(i);
    }
  }
  return at;
}

} // namespace

void ArgReduce::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  auto plan = make_reduce_plan(in.shape(), in.strides(), {axis_});
  const int64_t n = in.shape()[axis_], stride = in.strides()[axis_];
  auto* dst = static_cast<uint32_t*>(out.raw_data());
  dispatch_all_types(in.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(in.raw_data());
    int64_t o = 0;
    for_each_offset(plan.kept_shape, plan.kept_strides, [&](int64_t off) {
      switch (op_) {
        case ArgReduceOp::ArgMax: dst[o++] = arg_extreme<true>(src + off, n, stride); break;
        case ArgReduceOp::ArgMin: dst[o++] = arg_extreme<false>(src + off, n, stride); break;
      }
    });
  });
}

} // namespace nuvec
