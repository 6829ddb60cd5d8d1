// nuvec: CPU kernel of LogSumExp (log(sum(exp(x))) over the last axis; fallback and rules in
// src/fast/logsumexp.cpp). Per row, in acc_t (float for the half types, double for
// float64): the max, then sum(exp(x - max)) in double (a row of 1e5 float terms would lose
// ~1e-5 to sequential rounding), then max + log(sum). The fallback's special cases: NaN
// anywhere gives NaN, a row whose max is +-inf gives that infinity.
//
// LogSumExpVjp's kernel: per row the sum s of exp(x - c) (in double) with c the forward's lse
// (backend/common/lse_shift.h: 0 where lse is infinite, the row's max where lse is too coarse),
// then the write exp(x - c) * (g / s) in acc_t, rounded once: the fallback's arithmetic with
// another shift. Both passes vectorised, exp as the Exp primitive computes it on the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/common/dispatch.h"
#include "backend/common/lse_shift.h"
#include "backend/common/math/functions.h"
#include "backend/cpu/fast/rows.h"
#include "fast/logsumexp.h"

namespace nuvec {

void LogSumExp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const cpu::LastAxisRows rows(inputs[0]);
  dispatch_float_types(rows.in.dtype(), "logsumexp", [&]<typename T>() {
    T* dst = static_cast<T*>(out.raw_data());
    cpu::parallel_rows(static_cast<int64_t>(out.size()), rows.n, [&](int64_t r) {
      dst[r] = static_cast<T>(cpu::logsumexp_row<T>(rows.row<T>(r), rows.n));
    });
  });
}

void LogSumExpVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const cpu::LastAxisRows xs(inputs[0]), lses(inputs[1]), gs(inputs[2]);
  const int64_t n = xs.n;
  dispatch_float_types(xs.in.dtype(), "logsumexp", [&]<typename T>() {
    using A = acc_t<T>;
    T* dst = static_cast<T*>(out.raw_data());
    cpu::parallel_rows(static_cast<int64_t>(out.size()) / n, n, [&](int64_t r) {
      const T* x = xs.row<T>(r);
      const A lse = static_cast<A>(*lses.row<T>(r));
      A c = math::lse_shift(lse);
      // math::Exp: exp_f32 for float on the host, which vectorises (libm's expf is a call per
      // element, and takes its slow underflow path for the many terms far below the max).
      auto sum_exp = [&] { return cpu::sum_of(n, [&](int64_t i) { return math::Exp{}(static_cast<A>(x[i]) - c); }); };
      double s = sum_exp();
      if (!math::lse_shift_holds(lse, static_cast<A>(s))) {
        // lse is finite or +inf, so the row holds no NaN: std::max sees only numbers.
        A m = static_cast<A>(x[0]);
        for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<A>(x[i]));
        c = math::lse_shift(m);
        s = sum_exp();
      }
      const A q = static_cast<A>(*gs.row<T>(r)) / static_cast<A>(s);
      T* dx = dst + r * n;
      cpu::vectorized([&] {
        for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<T>(math::Exp{}(static_cast<A>(x[i]) - c) * q);
      });
    });
  });
}

} // namespace nuvec
