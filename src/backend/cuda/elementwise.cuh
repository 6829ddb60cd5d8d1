// nuvec: what the element-wise GPU families (Unary, Binary, DivMod, Select) share: the
// layout plan (the device counterpart of cpu::plan_elementwise in backend/cpu/elementwise.h,
// with the same output layouts) and the launch shape of the contiguous kernels. Their vector
// loads and strided offsets are the device library's (device/vector.cuh, device/indexing.cuh).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

/// Threads per block of the element-wise kernels.
constexpr unsigned kEwThreads = 256;
/// Vectors each thread loads before computing in the contiguous kernels: several loads in
/// flight per thread are what it takes to cover HBM latency at full bandwidth.
constexpr int kEwUnroll = 4;

/// Blocks for a contiguous kernel over n elements in vectors of N, kEwUnroll per thread
/// (at least one block, for the scalar tail).
inline unsigned vec_grid(int64_t n, int vec) {
  int64_t vectors = n / vec;
  int64_t per_thread = (vectors + kEwUnroll - 1) / kEwUnroll;
  return grid_for(static_cast<size_t>(std::max<int64_t>(per_thread, 1)), kEwThreads);
}

// ---------------------------------------------------------------------------------------
// Layout plan (host)

/// Whether every element of a reads the same memory element (a broadcast scalar).
inline bool is_scalar_like(const array& a) {
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] != 1 && a.strides()[d] != 0) return false;
  }
  return true;
}

/// How an element-wise node runs on the GPU, as on the CPU: `flat` means one pass over `n`
/// elements in memory order, every non-scalar input and every output sharing one dense
/// layout (the outputs get it); otherwise the outputs are row-contiguous and the kernel walks
/// the inputs through a strided plan over the output shape.
struct EwPlan {
  bool flat = false;
  int64_t n = 0;
  std::vector<bool> scalar; // per input: read element 0 for every output element (flat)
};

/// Plans the node and allocates its device outputs (cpu::plan_elementwise's rules: a 0-d
/// input, which Binary keeps unbroadcast, is a scalar for any output shape; a dense input is
/// contiguous, of the output shape, without gaps and with non-negative strides).
inline EwPlan plan_elementwise(const std::vector<array>& inputs, std::vector<array>& outputs) {
  EwPlan plan;
  const Shape& shape = outputs[0].shape();
  const array* layout = nullptr;
  bool flat = true;
  for (const auto& in : inputs) {
    bool scalar = in.ndim() == 0 || (in.shape() == shape && is_scalar_like(in));
    plan.scalar.push_back(scalar);
    if (scalar) continue;
    bool dense = in.shape() == shape && in.flags().contiguous && in.data_size() == in.size();
    for (auto s : in.strides()) dense = dense && s >= 0;
    if (!dense) {
      flat = false;
    } else if (!layout) {
      layout = &in;
    } else {
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] != 1 && in.strides()[d] != layout->strides()[d]) flat = false;
      }
    }
  }
  plan.flat = flat;
  plan.n = static_cast<int64_t>(outputs[0].size());
  for (auto& out : outputs) {
    if (flat && layout) {
      alloc_output(out, layout->data_size(), layout->strides(), layout->flags());
    } else {
      alloc_output(out);
    }
  }
  return plan;
}

/// The strided plan of the inputs over `shape` (their broadcast strides, dimensions merged).
/// Outputs are row-contiguous on this path, so output element i is simply i.
inline StridedPlan input_plan(const std::vector<array>& inputs, const Shape& shape) {
  std::vector<Strides> strides;
  for (const auto& in : inputs) strides.push_back(broadcast_strides(in, shape));
  return collapse_dims(shape, strides);
}

/// The inputs, with every non-0-d one made row-contiguous on the device when their plan over
/// `shape` keeps more dimensions than the kernels walk (kMaxDims): the plan of the result
/// is then one dimension. (contiguous_copy retains the copies until the node's kernels
/// have run.)
inline std::vector<array> fit_dims(const std::vector<array>& inputs, const Shape& shape) {
  if (input_plan(inputs, shape).shape.size() <= size_t(kMaxDims)) return inputs;
  std::vector<array> dense;
  for (const auto& in : inputs) {
    dense.push_back(in.ndim() == 0 ? in : contiguous_copy(in));
  }
  return dense;
}

/// The device address of an output allocated by plan_elementwise or alloc_output.
template <typename T>
T* output_ptr(const array& out) {
  return static_cast<T*>(out.data_shared_ptr()->device.load()) + out.offset();
}

} // namespace nuvec::cu
