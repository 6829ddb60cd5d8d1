// nuvec: the CPU loops of the Binary and DivMod families: the op's functor
// (backend/common/math/unary.h) over one flat range when both inputs share a dense
// layout (or one is a broadcast scalar), else over the collapsed strided plan. Half types
// compute in float.
// FP compares may not trap here, so that GCC if-converts the selects of NaN handling,
// clamping and exp_f32 and vectorises the loops (no FP exceptions are observed anyway).
#pragma GCC optimize("no-trapping-math")

#include <type_traits>

#include "backend/common/dispatch.h"
#include "backend/common/math/elementwise.h"
#include "backend/cpu/elementwise.h"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Calls body(i, ia, ib) for every element: i indexes the outputs, ia/ib the inputs. The
// flat cases are separate loops so that each vectorises with its own access pattern.
template <typename Body>
void for_each_pair(const cpu::ElementwisePlan& plan, const std::vector<array>& inputs,
                   const std::vector<array>& outputs, Body&& body) {
  if (plan.flat) {
    bool sa = plan.scalar[0], sb = plan.scalar[1];
    if (sa && sb) {
      for (size_t i = 0; i < plan.n; ++i) body(i, 0, 0);
      return;
    }
    size_t n = outputs[0].data_size();
    cpu::parallel_for(n, [&](size_t b, size_t e) {
      if (sa) {
        for (size_t i = b; i < e; ++i) body(i, 0, i);
      } else if (sb) {
        for (size_t i = b; i < e; ++i) body(i, i, 0);
      } else {
        for (size_t i = b; i < e; ++i) body(i, i, i);
      }
    });
    return;
  }
  // Every output is row-major here, so the first one's strides stand for all.
  auto sp = cpu::strided_plan(inputs, {outputs[0]});
  for_each_run<3>(sp, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) body(off[0] + i * st[0], off[1] + i * st[1], off[2] + i * st[2]);
  });
}

template <typename T, typename Op>
void binary_loop(Op op, const std::vector<array>& inputs, array& out, const char* name) {
  if constexpr (!std::is_invocable_v<Op, acc_t<T>, acc_t<T>>) {
    throw_invalid_argument(name, "input dtype must be supported; got ", inputs[0].dtype(), ".");
  } else {
    using C = acc_t<T>;
    using O = math::result_elem_t<Op, T, 2>;
    std::vector<array> outs{out};
    auto plan = cpu::plan_elementwise(inputs, outs);
    const T* a = static_cast<const T*>(inputs[0].raw_data());
    const T* b = static_cast<const T*>(inputs[1].raw_data());
    O* o = static_cast<O*>(out.raw_data());
    for_each_pair(plan, inputs, outs, [&](auto i, auto ia, auto ib) {
      o[i] = static_cast<O>(op(static_cast<C>(a[ia]), static_cast<C>(b[ib])));
    });
  }
}

} // namespace

void Binary::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  math::visit(op_, [&](auto op) {
    dispatch_all_types(inputs[0].dtype(), [&]<typename T>() {
      binary_loop<T>(op, inputs, outputs[0], name());
    });
  });
}

void DivMod::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  dispatch_all_types(inputs[0].dtype(), [&]<typename T>() {
    using C = acc_t<T>;
    if constexpr (!std::is_invocable_v<math::FloorDivide, C, C>) {
      throw_invalid_argument("divmod", "input dtype must be real; got ", inputs[0].dtype(), ".");
    } else {
      auto plan = cpu::plan_elementwise(inputs, outputs);
      const T* a = static_cast<const T*>(inputs[0].raw_data());
      const T* b = static_cast<const T*>(inputs[1].raw_data());
      T* q = static_cast<T*>(outputs[0].raw_data());
      T* r = static_cast<T*>(outputs[1].raw_data());
      for_each_pair(plan, inputs, outputs, [&](auto i, auto ia, auto ib) {
        C x = static_cast<C>(a[ia]), y = static_cast<C>(b[ib]);
        q[i] = static_cast<T>(math::FloorDivide{}(x, y));
        r[i] = static_cast<T>(math::Remainder{}(x, y));
      });
    }
  });
}

} // namespace nuvec
