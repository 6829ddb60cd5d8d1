// nuvec: CPU kernel of GatherMm (meaning and input contract: src/quantized/quantized.h;
// MLX's gather_mm). Batch entries are grouped by b's index (qdot::plan_gather), the a rows of
// a group packed one under the other, and each group is one product with b[e]: OpenBLAS
// gemm (cpu/blas.h) in float32 (float64 for float64) when it is large enough, a plain loop
// when tiny. Half types are widened around the product as Matmul's kernel does (one matrix of
// b at a time). b is read in place when its matrices have a BLAS layout with a uniform batch
// stride (matrix_layout), as the swapaxes view of a mixture-of-experts layer's stacked
// [E, N, K] Linear weights has (column-major): copying it whole made every call move all
// the experts.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/common/gemm_problem.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/quantized/qdot.h"
#include "quantized/quantized.h"

namespace nuvec {

namespace {

/// Multiply-adds below which a group's product runs as a loop (a BLAS call costs more).
constexpr int64_t kBlasMinWork = 1 << 15;

/// c (m x n) = a (m x k, row-major) · b (k x n in layout lb), row-major, in U: BLAS when large
/// enough, else a loop (i-k-j over a row-major b, i-j-k over a column-major one).
template <typename U>
void product(const U* a, const U* b, const MatrixLayout& lb, U* c, int64_t m, int64_t n, int64_t k) {
  const bool fits = cpu::blas_fits({true, false, k}) && cpu::blas_fits(lb) && cpu::blas_fits({true, false, n});
  if (m * n * k >= kBlasMinWork && fits) {
    GemmProblem g{cpu::blas_dtype<U>(), m, n, k, 1, {a, false, k, 0}, {b, lb.col_major, lb.ld, 0}, {c, nullptr, n, 0}};
    cpu::blas_gemm(g);
    return;
  }
  std::fill(c, c + m * n, U(0));
  cpu::vectorized([&] {
    for (int64_t i = 0; i < m; ++i) {
      U* ci = c + i * n;
      if (lb.col_major) {
        for (int64_t j = 0; j < n; ++j) {
          const U* bj = b + j * lb.ld;
          U acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += a[i * k + p] * bj[p];
          ci[j] = acc;
        }
        continue;
      }
      for (int64_t p = 0; p < k; ++p) {
        const U aip = a[i * k + p];
        const U* bp = b + p * lb.ld;
        for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      }
    }
  });
}

/// How b (E, K, N) is read: its matrices in place (layout of each, elements between
/// consecutive ones), or `copy` a row-contiguous copy.
struct BOperand {
  MatrixLayout layout;
  int64_t batch_stride;
  bool copy;
};

BOperand b_operand(const array& b) {
  const int64_t E = b.shape(0), K = b.shape(1), N = b.shape(2);
  const auto& st = b.strides();
  const MatrixLayout l = matrix_layout(K, N, st[1], st[2]);
  if (l.in_place && (E <= 1 || st[0] >= 0) && cpu::blas_fits(l)) return {l, E <= 1 ? 0 : int64_t(st[0]), false};
  return {MatrixLayout{true, false, N}, K * N, true};
}

} // namespace

void GatherMm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  const array& a_in = inputs[0];
  const array& b_in = inputs[1];
  const int64_t A = a_in.shape(0), M = a_in.shape(-2), K = a_in.shape(-1);
  const int64_t E = b_in.shape(0), N = b_in.shape(-1);
  const auto plan = cpu::qdot::plan_gather(inputs[2], inputs[3], A, E, "gather_mm", "a", "b");
  if (!cpu::qdot::allocate_output(out)) return;
  dispatch_float_types(out.dtype(), "gather_mm", [&]<typename T>() {
    // U: the type the product runs in (float32 for the half types, as Matmul's kernel).
    using U = std::conditional_t<std::is_same_v<T, double>, double, float>;
    constexpr bool same = std::is_same_v<T, U>;
    const Dtype u_dtype = cpu::blas_dtype<U>();
    const array a = a_in.dtype() == u_dtype && a_in.flags().row_contiguous ? a_in : cpu::contiguous_copy(a_in, u_dtype);
    const BOperand bo = b_operand(b_in);
    const array b = bo.copy ? cpu::contiguous_copy(b_in) : b_in;
    const U* ap = static_cast<const U*>(a.raw_data());
    const T* bp = static_cast<const T*>(b.raw_data());
    T* o = static_cast<T*>(out.raw_data());
    std::vector<U> pa, pb, pc;
    for (size_t i = 0; i + 1 < plan.runs.size(); ++i) {
      const int64_t j0 = plan.runs[i], j1 = plan.runs[i + 1], rows = (j1 - j0) * M;
      const int64_t e = plan.rhs[plan.order[j0]];
      // a's rows of the group, packed (a single entry's rows are contiguous already).
      const U* ag = ap + plan.lhs[plan.order[j0]] * M * K;
      if (j1 - j0 > 1) {
        pa.resize(static_cast<size_t>(rows * K));
        for (int64_t j = j0; j < j1; ++j) {
          const U* src = ap + plan.lhs[plan.order[j]] * M * K;
          std::copy(src, src + M * K, pa.data() + (j - j0) * M * K);
        }
        ag = pa.data();
      }
      const U* bg;
      const T* src = bp + e * bo.batch_stride;
      MatrixLayout lb = bo.layout;
      if constexpr (same) {
        bg = src;
      } else {
        // Widened in b's own order: the (K, N) matrix's elements, ld apart along the major axis.
        const int64_t major = lb.col_major ? N : K, minor = lb.col_major ? K : N;
        pb.resize(static_cast<size_t>(K * N));
        for (int64_t r = 0; r < major; ++r) {
          for (int64_t t = 0; t < minor; ++t) pb[r * minor + t] = static_cast<U>(src[r * lb.ld + t]);
        }
        lb.ld = minor;
        bg = pb.data();
      }
      pc.resize(static_cast<size_t>(rows * N));
      product<U>(ag, bg, lb, pc.data(), rows, N, K);
      for (int64_t j = j0; j < j1; ++j) {
        const U* src = pc.data() + (j - j0) * M * N;
        T* dst = o + plan.order[j] * M * N;
        for (int64_t t = 0; t < M * N; ++t) dst[t] = static_cast<T>(src[t]);
      }
    }
  });
}

} // namespace nuvec
