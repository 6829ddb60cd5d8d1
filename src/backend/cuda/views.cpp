// nuvec: the view families on a GPU stream: the shared evals (backend/common/views.h) with
// the GPU's copies where a layout needs one. The families that never copy (and slices, whose
// CPU eval is a pure view) reuse their eval_cpu, which only rewrites layouts over the
// input's buffer wherever it lives.
#include "backend/common/views.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "primitives/primitives.h"
#include "primitives/slicing.h"

namespace nuvec {

#define NUVEC_GPU_AS_VIEW(Family)                                                   \
  void Family::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) { \
    eval_cpu(inputs, outputs);                                                      \
  }

NUVEC_GPU_AS_VIEW(Transpose)
NUVEC_GPU_AS_VIEW(Broadcast)
NUVEC_GPU_AS_VIEW(Squeeze)
NUVEC_GPU_AS_VIEW(ExpandDims)
NUVEC_GPU_AS_VIEW(Copy)
NUVEC_GPU_AS_VIEW(StopGradient)
NUVEC_GPU_AS_VIEW(Depends)
NUVEC_GPU_AS_VIEW(CustomTransforms)
NUVEC_GPU_AS_VIEW(Slice)
// Reads its start indices on the host (raw_data copies them back after the stream).
NUVEC_GPU_AS_VIEW(DynamicSlice)

void Reshape::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::reshape(inputs[0], outputs[0], cu::view_copies());
}

void AsStrided::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const auto& [shape, strides, offset] = state();
  views::as_strided(inputs[0], outputs[0], strides, offset, cu::view_copies());
}

void Contiguous::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::contiguous(inputs[0], outputs[0], state(), cu::view_copies());
}

} // namespace nuvec
