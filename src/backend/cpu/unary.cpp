// nuvec: the CPU loop of the Unary family: the op's functor (backend/common/math/unary.h)
// applied over one flat range when the input is dense, else over the strided plan. Half
// types compute in float.
// FP compares may not trap here, so that GCC if-converts the selects of NaN handling,
// clamping and exp_f32 and vectorises the loops (no FP exceptions are observed anyway).
#pragma GCC optimize("no-trapping-math")

#include <type_traits>

#include "backend/common/dispatch.h"
#include "backend/common/math/elementwise.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/simd.h"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// exp of a contiguous float32 range, the benchmarked case, in the CPU's widest vector
// version (cpu/simd.h; every version gives the same bits).
void exp_f32_range(const float* in, float* out, size_t n) {
  cpu::vectorized([&] {
    for (size_t i = 0; i < n; ++i) out[i] = math::exp_f32(in[i]);
  });
}

template <typename T, typename Op>
void unary_loop(Op op, const array& in, array& out, const char* name) {
  if constexpr (!std::is_invocable_v<Op, acc_t<T>>) {
    throw_invalid_argument(name, "input dtype must be supported; got ", in.dtype(), ".");
  } else {
    using C = acc_t<T>;
    using O = math::result_elem_t<Op, T, 1>;
    std::vector<array> outs{out};
    auto plan = cpu::plan_elementwise({in}, outs);
    const T* src = static_cast<const T*>(in.raw_data());
    O* dst = static_cast<O*>(out.raw_data());
    if (plan.flat) {
      if (plan.scalar[0]) {
        O v = static_cast<O>(op(static_cast<C>(src[0])));
        for (size_t i = 0; i < plan.n; ++i) dst[i] = v;
        return;
      }
      size_t n = out.data_size();
      cpu::parallel_for(n, [&](size_t b, size_t e) {
        if constexpr (std::is_same_v<Op, math::Exp> && std::is_same_v<T, float>) {
          exp_f32_range(src + b, dst + b, e - b);
        } else {
          for (size_t i = b; i < e; ++i) dst[i] = static_cast<O>(op(static_cast<C>(src[i])));
        }
      });
      return;
    }
    auto sp = cpu::strided_plan({in}, {out});
    for_each_run<2>(sp, [&](const int64_t* off, int64_t n, const int64_t* st) {
      O* o = dst + off[0];
      const T* s = src + off[1];
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = static_cast<O>(op(static_cast<C>(s[i * st[1]])));
    });
  }
}

} // namespace

void Unary::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  math::visit(op_, [&](auto op) {
    dispatch_all_types(inputs[0].dtype(), [&]<typename T>() {
      unary_loop<T>(op, inputs[0], outputs[0], name());
    });
  });
}

} // namespace nuvec
