// nuvec: CPU kernels of CrossEntropy and CrossEntropyVjp (rules and fallbacks in
// src/fast/cross_entropy.cpp). Forward: per row, the row's logsumexp in parts (rows.h, the
// LogSumExp kernel's) and the target's logit make the loss, in acc_t (float, or double for
// float64). Backward: one pass per row, g · (exp(x − lse) − [i == target]) with the exponent
// from the forward's loss; both in the order of cross_entropy_rules.h (large logits keep
// their digits), rows split over the thread pool, vectorised (cpu/simd.h), float exp by
// math::exp_f32.
#include <cmath>
#include <cstdint>

#include "backend/common/cross_entropy_rules.h"
#include "backend/common/dispatch.h"
#include "backend/common/math/unary.h"
#include "backend/cpu/fast/rows.h"
#include "backend/cpu/simd.h"
#include "core/errors.h"
#include "fast/cross_entropy.h"

namespace nuvec {

void CrossEntropy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const cpu::LastAxisRows rows(inputs[0]);
  const array t = cpu::as_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_float_types(rows.in.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    A* dst = static_cast<A*>(out.raw_data());
    const int32_t* tp = static_cast<const int32_t*>(t.raw_data());
    const int64_t n = rows.n;
    cpu::parallel_rows(static_cast<int64_t>(out.size()), n, [&](int64_t r) {
      const T* x = rows.row<T>(r);
      const int64_t y = class_index(tp[r], n);
      const auto [m, l] = cpu::logsumexp_parts<T>(x, n);
      dst[r] = math::cross_entropy_loss(m, l, y >= 0 ? static_cast<A>(x[y]) : A(0));
    });
  });
}

void CrossEntropyVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const cpu::LastAxisRows rows(inputs[0]);
  const array t = cpu::as_row_contiguous(inputs[1]), loss = cpu::as_row_contiguous(inputs[2]), g = cpu::as_row_contiguous(inputs[3]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_float_types(rows.in.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    T* dst = static_cast<T*>(out.raw_data());
    const int32_t* tp = static_cast<const int32_t*>(t.raw_data());
    const A* lp = static_cast<const A*>(loss.raw_data());
    const A* gp = static_cast<const A*>(g.raw_data());
    const int64_t n = rows.n;
    cpu::parallel_rows(static_cast<int64_t>(t.size()), n, [&](int64_t r) {
      const T* x = rows.row<T>(r);
      const int64_t y = class_index(tp[r], n);
      const A xt = y >= 0 ? static_cast<A>(x[y]) : A(0), loss_r = lp[r];
      const A gr = gp[r];
      T* d = dst + r * n;
      cpu::vectorized([&] {
        const auto p = [&](int64_t i) {
          return math::Exp{}(math::cross_entropy_exponent(static_cast<A>(x[i]), loss_r, xt));
        };
        for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(gr * p(i));
        // The target's term apart, so the loop above has no branch to keep it scalar.
        if (y >= 0) d[y] = static_cast<T>(gr * (p(y) - A(1)));
      });
    });
  });
}

} // namespace nuvec
