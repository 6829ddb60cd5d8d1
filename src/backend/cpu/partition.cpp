// nuvec: CPU kernels of Partition and ArgPartition. Each line is ordered by (value with
// NaNs last, original index) through std::nth_element, a strict total order, so both
// primitives produce the same arrangement and the result does not depend on the library.
#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/cpu/copy.h"
#include "primitives/partition.h"

namespace nuvec {

namespace {


template <bool indices>
void partition_lines(const array& input, array& out, int kth, int axis) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  array in = input.flags().row_contiguous ? input : cpu::contiguous_copy(input);
  int64_t outer = 1, inner = 1, n = in.shape(axis);
  for (int d = 0; d < axis; ++d) outer *= in.shape(d);
  for (int d = axis + 1; d < static_cast<int>(in.ndim()); ++d) inner *= in.shape(d);
  dispatch_all_types(in.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(in.raw_data());
    std::unique_ptr<T[]> line(new T[n]); // not std::vector: bool has proxy elements
    std::vector<uint32_t> order(n);
    auto less = [&](uint32_t a, uint32_t b) {
      if (nan_last_less<T>(line[a], line[b])) return true;
      if (nan_last_less<T>(line[b], line[a])) return false;
      return a < b;
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t base = o * n * inner + j;
        for (int64_t i = 0; i < n; ++i) line[i] = src[base + i * inner];
        std::iota(order.begin(), order.end(), 0u);
        std::nth_element(order.begin(), order.begin() + kth, order.end(), less);
        if constexpr (indices) {
          auto* dst = static_cast<uint32_t*>(out.raw_data());
          for (int64_t i = 0; i < n; ++i) dst[base + i * inner] = order[i];
        } else {
          T* dst = static_cast<T*>(out.raw_data());
          for (int64_t i = 0; i < n; ++i) dst[base + i * inner] = line[order[i]];
        }
      }
    }
  });
}

} // namespace

void Partition::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  partition_lines<false>(inputs[0], outputs[0], kth_, axis_);
}

void ArgPartition::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  partition_lines<true>(inputs[0], outputs[0], kth_, axis_);
}

} // namespace nuvec
