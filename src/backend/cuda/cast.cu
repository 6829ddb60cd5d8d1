// nuvec: eval_gpu of the cast family: AsType through the copy kernels (copy.h, cast_to's
// rules per element); View (bit reinterpretation) is a view (backend/common/views.h).
#include "backend/common/strided.h"
#include "backend/common/views.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "primitives/primitives.h"

namespace nuvec {

/// astype: cast_to per element. A dense input (any order of its dimensions, e.g. transposed)
/// keeps its layout and is converted as one flat range, so the reads stay coalesced; anything
/// else becomes row-contiguous through copy_strided.
void AsType::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  bool dense = in.flags().contiguous && in.data_size() == in.size();
  for (auto s : in.strides()) dense = dense && s >= 0;
  if (!dense || in.flags().row_contiguous || in.size() == 0) {
    cu::copy_strided(in, out);
    return;
  }
  void* dst = cu::alloc_output(out, in.data_size(), in.strides(), in.flags());
  StridedPlan flat{{int64_t(in.size())}, {{1}, {1}}};
  cu::copy_plan(cu::device_ptr(in), in.dtype(), dst, out.dtype(), flat);
}

void View::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  views::bits(inputs[0], outputs[0], cu::view_copies());
}

} // namespace nuvec
