// nuvec: the CPU side shared by the element-wise families (Unary, Binary, DivMod, Select):
// choosing between one flat loop over a shared dense layout and the strided walk, allocating
// the outputs accordingly, and splitting long flat loops over two threads.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "backend/common/strided.h"
#include "backend/cpu/thread_pool.h"
#include "nuvec/array.h"

namespace nuvec::cpu {

/// Whether every element of a reads the same memory element (a broadcast scalar).
inline bool is_scalar_like(const array& a) {
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] != 1 && a.strides()[d] != 0) return false;
  }
  return true;
}

/// How an element-wise node runs: `flat` means one loop over `n` elements where every
/// non-scalar input and every output share one dense layout (the outputs are allocated with
/// it); otherwise outputs are row-major and the loop walks a collapsed strided plan.
struct ElementwisePlan {
  bool flat = false;
  size_t n = 0;
  std::vector<bool> scalar; // per input, for the flat loop
};

/// Plans the loop and allocates the outputs (any layout of inputs of the outputs' shape).
inline ElementwisePlan plan_elementwise(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  ElementwisePlan plan;
  const Shape& shape = outputs[0].shape();
  const array* layout = nullptr; // the dense input whose layout all others share
  bool flat = true;
  for (const auto& in : inputs) {
    // A 0-d input (Binary keeps scalars unbroadcast) is a scalar for any output shape.
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
  plan.n = outputs[0].size();
  for (auto& out : outputs) {
    if (flat && layout) {
      out.set_data(
          allocator::malloc(std::max<size_t>(out.nbytes(), 1)),
          layout->data_size(),
          layout->strides(),
          layout->flags());
    } else {
      out.set_data(allocator::malloc(std::max<size_t>(out.nbytes(), 1)));
    }
  }
  return plan;
}

/// The strided plan over the outputs' shape: operand 0..k-1 the (row-major) outputs, then
/// the inputs with their broadcast strides.
inline StridedPlan strided_plan(
    const std::vector<array>& inputs,
    const std::vector<array>& outputs) {
  const Shape& shape = outputs[0].shape();
  std::vector<Strides> strides;
  for (size_t k = 0; k < outputs.size(); ++k) strides.push_back(row_strides(shape));
  for (const auto& in : inputs) strides.push_back(broadcast_strides(in, shape));
  return collapse_dims(shape, strides);
}

/// Runs f(begin, end) over [0, n) on the CPU thread pool, in chunks of at least 2^16
/// elements: below that a pool wake-up (some microseconds) is not small against the work.
template <typename F>
void parallel_for(size_t n, F&& f) {
  constexpr size_t kGrain = size_t(1) << 16;
  if (n < 2 * kGrain) {
    f(size_t(0), n);
    return;
  }
  cpu::parallel_for(n, kGrain, std::function<void(size_t, size_t)>(std::forward<F>(f)));
}

} // namespace nuvec::cpu
