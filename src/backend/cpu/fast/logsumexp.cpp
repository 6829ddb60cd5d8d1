// nuvec: CPU kernel of LogSumExp (log(sum(exp(x))) over the last axis; fallback and rules in
// src/fast/logsumexp.cpp). Per row, in acc_t (float for the half types, double for
// float64): the max, then sum(exp(x - max)) in double (a row of 1e5 float terms would lose
// ~1e-5 to sequential rounding), then max + log(sum). The fallback's special cases: NaN
// anywhere gives NaN, a row whose max is +-inf gives that infinity.
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/common/dispatch.h"
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

} // namespace nuvec
