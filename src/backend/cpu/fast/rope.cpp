// nuvec: CPU kernel of Rope (rules and fallback in src/fast/rope.cpp). Per row (b, ..., t):
// the angles of its position in float32 (the fallback's), cos and sin rounded to the element
// type, each product and sum rounded as the fallback graph rounds them; rows split over the
// thread pool. Non-contiguous inputs are copied first.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math/functions.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/fast/rows.h"
#include "core/errors.h"
#include "fast/rope.h"

namespace nuvec {

void Rope::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::as_row_contiguous(inputs[0]);
  const array off = cpu::as_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (x.size() == 0) return; // no rows (a vmap over an empty batch records the node)
  const int nd = static_cast<int>(x.ndim());
  const int64_t d = x.shape(nd - 1), t_len = x.shape(nd - 2), batch = x.shape(0);
  const int64_t rows = static_cast<int64_t>(x.size()) / d;
  const int64_t rows_per_batch = rows / batch;
  const int half = dims_ / 2;
  // inv_freq_i in float32, as the fallback computes it.
  std::vector<float> inv(static_cast<size_t>(half));
  if (inputs.size() > 2) {
    const array f = cpu::as_row_contiguous(inputs[2]);
    const float* fp = static_cast<const float*>(f.raw_data());
    for (int i = 0; i < half; ++i) inv[i] = 1.0f / fp[i];
  } else {
    const float k = std::log(base_) / static_cast<float>(half);
    for (int i = 0; i < half; ++i) inv[i] = math::exp(static_cast<float>(-i) * k);
  }
  const int32_t* op = static_cast<const int32_t*>(off.raw_data());
  const bool per_batch = off.size() > 1;
  const int64_t i2 = traditional_ ? 1 : half, step = traditional_ ? 2 : 1;
  dispatch_float_types(x.dtype(), "rope", [&]<typename T>() {
    using A = acc_t<T>;
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    cpu::parallel_rows(rows, d, [&](int64_t r) {
      const int64_t b = r / rows_per_batch, t = r % t_len;
      const float pos = (static_cast<float>(t) + static_cast<float>(op[per_batch ? b : 0])) * scale_;
      const T* xr = src + r * d;
      T* yr = dst + r * d;
      for (int64_t j = dims_; j < d; ++j) yr[j] = xr[j];
      for (int i = 0; i < half; ++i) {
        const float theta = pos * inv[i];
        const T c = static_cast<T>(std::cos(theta)), s = static_cast<T>(std::sin(theta));
        const int64_t j1 = i * step, j2 = i2 + i * step;
        const A x1 = A(xr[j1]), x2 = A(xr[j2]);
        const A x1c = A(static_cast<T>(x1 * A(c))), x2s = A(static_cast<T>(x2 * A(s)));
        const A x1s = A(static_cast<T>(x1 * A(s))), x2c = A(static_cast<T>(x2 * A(c)));
        if (forward_) {
          yr[j1] = static_cast<T>(x1c - x2s);
          yr[j2] = static_cast<T>(x1s + x2c);
        } else {
          yr[j1] = static_cast<T>(x2s + x1c);
          yr[j2] = static_cast<T>(x2c - x1s);
        }
      }
    });
  });
}

} // namespace nuvec
