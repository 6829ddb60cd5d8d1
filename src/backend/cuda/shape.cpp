// nuvec: the view families on a GPU stream. Their CPU eval only rewrites layouts over the
// input's buffer, wherever that buffer lives, so the GPU reuses it; where the CPU would copy
// (a layout strides cannot express), the input is first made row-contiguous on the device
// and the CPU eval then takes the no-copy path.
#include "backend/common/reshape.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "primitives/primitives.h"
#include "primitives/slicing.h"

namespace nuvec {

namespace {

// Runs the CPU eval (a pure view for row-contiguous input, at offset 0 when `at_start`) on
// a row-contiguous device copy of the input when it is not one already.
template <typename P>
void view_of_dense(
    P& p,
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    bool at_start = false) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous && (!at_start || in.offset() == 0)) {
    p.eval_cpu(inputs, outputs);
  } else {
    std::vector<array> dense{cu::contiguous_copy(in)};
    p.eval_cpu(dense, outputs);
  }
}

} // namespace

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
  const array& in = inputs[0];
  if (in.flags().row_contiguous || reshape_strides(in, outputs[0].shape())) {
    eval_cpu(inputs, outputs); // a view, as on the CPU
  } else {
    cu::copy_strided(in, outputs[0]);
  }
}

void View::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  view_of_dense(*this, inputs, outputs, /*at_start=*/true);
}

void AsStrided::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  view_of_dense(*this, inputs, outputs);
}

void Contiguous::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  bool keep = in.flags().row_contiguous || (allow_col_major_ && in.flags().col_contiguous);
  if (keep) {
    outputs[0].copy_shared_buffer(in);
  } else {
    cu::copy_strided(in, outputs[0]);
  }
}

} // namespace nuvec
