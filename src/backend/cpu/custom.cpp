// nuvec: CustomTransforms on the CPU: the function's outputs are already inputs of the
// node, so its outputs are views of them.
#include "primitives/primitives.h"

namespace nuvec {

void CustomTransforms::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  size_t first = inputs.size() - outputs.size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(inputs[first + i]);
  }
}

} // namespace nuvec
