// nuvec: the CPU loop of Select (where): out = condition ? x : y, over one flat range when
// the inputs share a dense layout (broadcast scalars allowed), else the strided plan.
// FP compares may not trap here, so that GCC if-converts the selects of NaN handling,
// clamping and exp_f32 and vectorises the loops (no FP exceptions are observed anyway).
#pragma GCC optimize("no-trapping-math")

#include "backend/common/dispatch.h"
#include "backend/cpu/elementwise.h"
#include "primitives/primitives.h"

namespace nuvec {

void Select::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  auto plan = cpu::plan_elementwise(inputs, outputs);
  dispatch_all_types(outputs[0].dtype(), [&]<typename T>() {
    const bool* c = static_cast<const bool*>(inputs[0].raw_data());
    const T* x = static_cast<const T*>(inputs[1].raw_data());
    const T* y = static_cast<const T*>(inputs[2].raw_data());
    T* o = static_cast<T*>(outputs[0].raw_data());
    if (plan.flat) {
      // Scalars read index 0: a stride of 0 or 1 per input.
      size_t sc = !plan.scalar[0], sx = !plan.scalar[1], sy = !plan.scalar[2];
      size_t n = plan.scalar[0] && plan.scalar[1] && plan.scalar[2] ? plan.n
                                                                    : outputs[0].data_size();
      cpu::parallel_for(n, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) o[i] = c[i * sc] ? x[i * sx] : y[i * sy];
      });
      return;
    }
    auto sp = cpu::strided_plan(inputs, outputs);
    for_each_run<4>(sp, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) {
        o[off[0] + i * st[0]] =
            c[off[1] + i * st[1]] ? x[off[2] + i * st[2]] : y[off[3] + i * st[3]];
      }
    });
  });
}

} // namespace nuvec
