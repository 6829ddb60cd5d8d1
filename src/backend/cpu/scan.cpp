// nuvec: CPU kernel of the Scan family. The input (already of the output dtype) is read
// row-contiguous (strided inputs are copied first); a scan along the last axis walks each
// row, any other axis walks rows of the trailing block so the inner loop stays contiguous.
// float16/bfloat16 accumulate in float32; max/min propagate NaN (NumPy's accumulate).
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "backend/common/scan_plan.h"
#include "backend/common/dispatch.h"
#include "backend/common/math/scan.h"
#include "backend/cpu/copy.h"
#include "primitives/scan.h"

namespace nuvec {

namespace {

// The identities and combiners of the math layer (backend/common/math/scan.h), shared with
// the CUDA kernels.
template <ScanOp op, typename A>
A identity() {
  return math::ScanCombine<op, A>::init();
}
template <ScanOp op, typename A>
inline A combine(A acc, A x) {
  return math::ScanCombine<op, A>{}(acc, x);
}

// Scans `outer` blocks of n x inner elements along the middle dimension (inner == 1 is the
// last-axis fast path, with the accumulator in a register).
template <ScanOp op, typename T>
void scan_blocks(const T* in, T* out, int64_t outer, int64_t n, int64_t inner, bool reverse, bool inclusive) {
  using A = acc_t<T>;
  const A init = identity<op, A>();
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* src = in + o * n;
      T* dst = out + o * n;
      A acc = init;
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = reverse ? n - 1 - k : k;
        A x = cast_to<A>(src[i]);
        if (inclusive) {
          acc = combine<op>(acc, x);
          dst[i] = cast_to<T>(acc);
        } else {
          dst[i] = cast_to<T>(acc);
          acc = combine<op>(acc, x);
        }
      }
    }
    return;
  }
  std::unique_ptr<A[]> acc(new A[inner]); // not std::vector: bool has proxy elements
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.get(), acc.get() + inner, init);
    for (int64_t k = 0; k < n; ++k) {
      int64_t i = reverse ? n - 1 - k : k;
      const T* src = in + (o * n + i) * inner;
      T* dst = out + (o * n + i) * inner;
      if (inclusive) {
        for (int64_t j = 0; j < inner; ++j) {
          acc[j] = combine<op>(acc[j], cast_to<A>(src[j]));
          dst[j] = cast_to<T>(acc[j]);
        }
      } else {
        for (int64_t j = 0; j < inner; ++j) {
          dst[j] = cast_to<T>(acc[j]);
          acc[j] = combine<op>(acc[j], cast_to<A>(src[j]));
        }
      }
    }
  }
}

template <ScanOp op>
void scan_dispatch(const array& in, array& out, int64_t outer, int64_t n, int64_t inner, bool reverse, bool inclusive) {
  dispatch_all_types(in.dtype(), [&]<typename T>() {
    if constexpr (is_complex_v<T> && op != ScanOp::Sum && op != ScanOp::Prod) {
      throw std::invalid_argument("[scan] complex inputs support only cumsum and cumprod.");
    } else {
      scan_blocks<op, T>(
          static_cast<const T*>(in.raw_data()), static_cast<T*>(out.raw_data()), outer, n, inner, reverse, inclusive);
    }
  });
}

} // namespace

void Scan::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  array in = inputs[0].flags().row_contiguous ? inputs[0] : cpu::contiguous_copy(inputs[0]);
  // Row-contiguous: the layout's sizes are all the loops need.
  const ScanLayout l = scan_layout(in.shape(), in.strides(), axis_);
  const int64_t outer = l.outer, n = l.len, inner = l.inner;
  switch (op_) {
    case ScanOp::Sum: scan_dispatch<ScanOp::Sum>(in, out, outer, n, inner, reverse_, inclusive_); break;
    case ScanOp::Prod: scan_dispatch<ScanOp::Prod>(in, out, outer, n, inner, reverse_, inclusive_); break;
    case ScanOp::Max: scan_dispatch<ScanOp::Max>(in, out, outer, n, inner, reverse_, inclusive_); break;
    case ScanOp::Min: scan_dispatch<ScanOp::Min>(in, out, outer, n, inner, reverse_, inclusive_); break;
    case ScanOp::LogAddExp:
      scan_dispatch<ScanOp::LogAddExp>(in, out, outer, n, inner, reverse_, inclusive_);
      break;
  }
}

} // namespace nuvec
