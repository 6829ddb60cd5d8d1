// nuvec: eval_cpu of the shape family (Reshape, Transpose, Broadcast, Squeeze, ExpandDims).
// All are views of the input's buffer (MLX semantics); a reshape whose layout cannot be
// expressed with strides (NumPy's no-copy reshape test fails) copies.
#include <optional>

#include "backend/cpu/copy.h"
#include "backend/common/reshape.h"
#include "backend/common/strided.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Makes out a view of in with `strides`, flags recomputed from them.
void share_view(const array& in, array& out, const Strides& strides) {
  auto flags = cpu::layout_flags(out.shape(), strides, in.flags().contiguous);
  size_t data_size =
      (flags.row_contiguous || flags.col_contiguous) ? out.size() : in.data_size();
  out.copy_shared_buffer(in, strides, flags, data_size);
}

} // namespace

void Reshape::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (in.flags().row_contiguous) {
    share_view(in, out, row_strides(out.shape()));
  } else if (auto strides = reshape_strides(in, out.shape())) {
    share_view(in, out, *strides);
  } else {
    cpu::copy_strided(in, out);
  }
}

void Transpose::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) strides[i] = in.strides()[axes_[i]];
  share_view(in, outputs[0], strides);
}

void Broadcast::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  Strides strides = broadcast_strides(in, out.shape());
  if (out.size() == 0) {
    out.copy_shared_buffer(in, strides, array::Flags{true, true, true}, 0);
  } else if (out.size() > in.size()) {
    // Repeated elements are never row or column contiguous; the distinct ones still fill
    // the input's block when they did (MLX's broadcast flags).
    array::Flags flags = in.flags();
    flags.row_contiguous = false;
    flags.col_contiguous = false;
    out.copy_shared_buffer(in, strides, flags, in.data_size());
  } else {
    share_view(in, out, strides);
  }
}

void Squeeze::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides;
  size_t j = 0;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (j < axes_.size() && axes_[j] == static_cast<int>(i)) {
      ++j;
    } else {
      strides.push_back(in.strides()[i]);
    }
  }
  // Removing size-1 dimensions changes no element's address: the flags carry over.
  outputs[0].copy_shared_buffer(in, strides, in.flags(), in.data_size());
}

void ExpandDims::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  const int nd = static_cast<int>(out.ndim());
  Strides strides(nd, 1);
  std::vector<bool> inserted(nd, false);
  for (int a : axes_) inserted[a] = true;
  int src = static_cast<int>(in.ndim()) - 1;
  for (int i = nd - 1; i >= 0; --i) {
    if (inserted[i]) {
      // Any stride is valid for a size-1 axis; the row-major one keeps layouts readable.
      strides[i] = i + 1 < nd ? strides[i + 1] * out.shape()[i + 1] : 1;
    } else {
      strides[i] = in.strides()[src--];
    }
  }
  out.copy_shared_buffer(in, strides, in.flags(), in.data_size());
}

} // namespace nuvec
