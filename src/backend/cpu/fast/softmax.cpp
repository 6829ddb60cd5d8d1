// nuvec: CPU kernel of Softmax (softmax along the last axis; rules in
// src/fast/softmax.cpp). Per row: the max, exp(x - max) and its sum, then one scaling
// pass, all in acc_t (float for the half types, double for float64), vectorised: the composed
// formula's arithmetic, so a row of all -inf gives NaN (-inf - -inf) and any NaN makes its row
// NaN.
// SoftmaxVjp's kernel: per row the dot sum(d * y) (products in acc_t, summed in double), then
// the write y * (d - dot) in acc_t, rounded once (the fallback's arithmetic).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/fast/rows.h"
#include "backend/cpu/simd.h"
#include "fast/softmax.h"

namespace nuvec {

namespace {

// One row of n elements (src dense, dst dense), in the CPU's widest vector version
// (cpu::vectorized): the max over order keys (a NaN with its sign bit clear wins it, one
// with the bit set reaches the sum through exp; either way the row is NaN, as in the composed
// formula), exp(x - max) by the Exp functor (float: math::exp_f32, within 1 ulp, the
// fallback's own exp on the host) summed in double lane partials (rows of 1e5 terms summed
// in float would lose ~1e-5), then one scaling pass. e holds exp(x - max) between the passes
// when T is narrower than A; otherwise dst does (it has A's precision).
template <typename T>
void softmax_row(const T* src, T* dst, int64_t n, std::vector<acc_t<T>>& e) {
  using A = acc_t<T>;
  A* buf = nullptr;
  if constexpr (std::is_same_v<T, A>) {
    buf = dst;
  } else {
    e.resize(n);
    buf = e.data();
  }
  cpu::vectorized([&] {
    const auto x = [&](int64_t i) { return static_cast<A>(src[i]); };
    using I = decltype(cpu::order_key(A(0)));
    const A m = cpu::from_order_key<A>(cpu::reduce_lanes(
        n, cpu::order_key(-std::numeric_limits<A>::infinity()), [&](int64_t i) { return cpu::order_key(x(i)); },
        [](I a, I b) { return a > b ? a : b; }));
    const A sa = static_cast<A>(cpu::sum_lanes(n, [&](int64_t i) {
      const A v = math::Exp{}(x(i) - m);
      buf[i] = v;
      return v;
    }));
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(buf[i] / sa);
  });
}

} // namespace

void Softmax::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const cpu::LastAxisRows rows(inputs[0]);
  const int64_t n = rows.n;
  dispatch_float_types(rows.in.dtype(), "softmax", [&]<typename T>() {
    T* dst = static_cast<T*>(out.raw_data());
    cpu::parallel_rows(static_cast<int64_t>(out.size()) / n, n, [&](int64_t r) {
      thread_local std::vector<acc_t<T>> e;
      softmax_row<T>(rows.row<T>(r), dst + r * n, n, e);
    });
  });
}

void SoftmaxVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const cpu::LastAxisRows ys(inputs[0]), ds(inputs[1]);
  const int64_t n = ys.n;
  dispatch_float_types(ys.in.dtype(), "softmax", [&]<typename T>() {
    using A = acc_t<T>;
    T* dst = static_cast<T*>(out.raw_data());
    cpu::parallel_rows(static_cast<int64_t>(out.size()) / n, n, [&](int64_t r) {
      const T* y = ys.row<T>(r);
      const T* d = ds.row<T>(r);
      const A dot = static_cast<A>(cpu::sum_of(n, [&](int64_t i) { return A(d[i]) * A(y[i]); }));
      T* dx = dst + r * n;
      for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<T>(A(y[i]) * (A(d[i]) - dot));
    });
  });
}

} // namespace nuvec
