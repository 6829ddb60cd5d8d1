// nuvec: eval_cpu of the creation family: Full (its value broadcast into a fresh buffer by
// the copy kernel) and Arange (NumPy's stepping rules per dtype).
#include <type_traits>

#include "backend/common/dispatch.h"
#include "backend/cpu/copy.h"
#include "primitives/primitives.h"

namespace nuvec {

void Full::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::copy_broadcast(inputs[0], outputs[0]);
}

void Arange::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const size_t n = out.size();
  dispatch_all_types(out.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(out.raw_data());
    if constexpr (is_complex_v<T> || std::is_same_v<T, bool>) {
      for (size_t i = 0; i < n; ++i) p[i] = cast_to<T>(start_ + static_cast<double>(i) * step_);
    } else if constexpr (is_integral_v<T>) {
      // Integers step exactly in the output type, as NumPy does for integer aranges.
      // NumPy's rule: the step is the difference of the first two values, each cast.
      T start = cast_to<T>(start_);
      T step = static_cast<T>(cast_to<T>(start_ + step_) - start);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<T>(i) * step);
    } else {
      for (size_t i = 0; i < n; ++i) p[i] = cast_to<T>(start_ + static_cast<double>(i) * step_);
    }
  });
}

} // namespace nuvec
