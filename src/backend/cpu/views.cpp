// nuvec: eval_cpu of the view families: the shared evals (backend/common/views.h) with the
// CPU's copies where a layout needs one.
#include "backend/common/views.h"
#include "backend/cpu/copy.h"
#include "primitives/primitives.h"

namespace nuvec {

void Reshape::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::reshape(inputs[0], outputs[0], cpu::view_copies());
}

void Transpose::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::transpose(inputs[0], outputs[0], state());
}

void Broadcast::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::broadcast(inputs[0], outputs[0]);
}

void Squeeze::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::squeeze(inputs[0], outputs[0], state());
}

void ExpandDims::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::expand_dims(inputs[0], outputs[0], state());
}

void AsStrided::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const auto& [shape, strides, offset] = state();
  views::as_strided(inputs[0], outputs[0], strides, offset, cpu::view_copies());
}

void Contiguous::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::contiguous(inputs[0], outputs[0], state(), cpu::view_copies());
}

void Copy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::share(inputs[0], outputs[0]);
}

void StopGradient::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::share(inputs[0], outputs[0]);
}

void Depends::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) views::share(inputs[i], outputs[i]);
}

} // namespace nuvec
