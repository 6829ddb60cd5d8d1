// nuvec: CPU kernels of CrossEntropy and CrossEntropyVjp (rules and fallbacks in
// src/fast/cross_entropy.cpp). Forward: per row, the row's logsumexp (rows.h, the LogSumExp
// kernel's) minus the target's logit, in acc_t (float, or double for float64). Backward: one
// pass per row, g · (exp(x − lse) − [i == target]) with lse = loss + x[target] from the
// forward, rows split over the thread pool.
#include <cmath>
#include <cstdint>

#include "backend/common/dispatch.h"
#include "backend/common/math/functions.h"
#include "backend/cpu/fast/rows.h"
#include "core/errors.h"
#include "fast/cross_entropy.h"

namespace nuvec {

namespace {

/// The row's class index: negative targets count from the end; -1 when out of range.
inline int64_t wrapped(int32_t t, int64_t classes) {
  const int64_t y = t < 0 ? int64_t(t) + classes : int64_t(t);
  return y >= 0 && y < classes ? y : -1;
}

template <typename F>
void logits_dispatch(Dtype dt, F&& f) {
  dispatch_all_types(dt, [&]<typename T>() {
    if constexpr (is_float_v<T>) {
      f.template operator()<T>();
    } else {
      throw_invalid_argument("cross_entropy", "the kernel takes real floating logits; got ", dt, ".");
    }
  });
}

} // namespace

void CrossEntropy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const cpu::LastAxisRows rows(inputs[0]);
  const array t = inputs[1].flags().row_contiguous ? inputs[1] : cpu::contiguous_copy(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  logits_dispatch(rows.in.dtype(), [&]<typename T>() {
    using A = acc_t<T>;
    A* dst = static_cast<A*>(out.raw_data());
    const int32_t* tp = static_cast<const int32_t*>(t.raw_data());
    const int64_t n = rows.n;
    cpu::parallel_rows(static_cast<int64_t>(out.size()), n, [&](int64_t r) {
      const T* x = rows.row<T>(r);
      const int64_t y = wrapped(tp[r], n);
      dst[r] = cpu::logsumexp_row<T>(x, n) - (y >= 0 ? static_cast<A>(x[y]) : A(0));
    });
  });
}

void CrossEntropyVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const cpu::LastAxisRows rows(inputs[0]);
  auto dense = [](const array& a) { return a.flags().row_contiguous ? a : cpu::contiguous_copy(a); };
  const array t = dense(inputs[1]), loss = dense(inputs[2]), g = dense(inputs[3]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  logits_dispatch(rows.in.dtype(), [&]<typename T>() {
    using A = acc_t<T>;
    T* dst = static_cast<T*>(out.raw_data());
    const int32_t* tp = static_cast<const int32_t*>(t.raw_data());
    const A* lp = static_cast<const A*>(loss.raw_data());
    const A* gp = static_cast<const A*>(g.raw_data());
    const int64_t n = rows.n;
    cpu::parallel_rows(static_cast<int64_t>(t.size()), n, [&](int64_t r) {
      const T* x = rows.row<T>(r);
      const int64_t y = wrapped(tp[r], n);
      const A lse = lp[r] + (y >= 0 ? static_cast<A>(x[y]) : A(0));
      const A gr = gp[r];
      T* d = dst + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const A p = math::exp(static_cast<A>(x[i]) - lse);
        d[i] = static_cast<T>(gr * (i == y ? p - A(1) : p));
      }
    });
  });
}

} // namespace nuvec
