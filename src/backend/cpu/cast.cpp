// nuvec: eval_cpu of the cast family: AsType through the copy kernel (copy.h), which
// converts with cast_to's rules; View (bit reinterpretation) is a view (backend/common/views.h).
#include "backend/common/views.h"
#include "backend/cpu/copy.h"
#include "primitives/primitives.h"

namespace nuvec {

void AsType::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::copy_strided(inputs[0], outputs[0]);
}

void View::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::bits(inputs[0], outputs[0], cpu::view_copies());
}

} // namespace nuvec
