// nuvec: what the CPU kernels of last-axis fused ops share: the rows of an input along its
// last axis (copied only when that axis is strided), and the split of rows over the pool.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/common/dispatch.h"
#include "backend/common/math/functions.h"

#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "nuvec/array.h"

namespace nuvec::cpu {

/// Element offset of row r's first element: the leading dimensions (all but the last)
/// walked with their strides, so sliced or broadcast rows need no copy when the last axis
/// is dense.
inline int64_t row_offset(const array& in, int64_t r) {
  int64_t off = 0;
  for (int d = static_cast<int>(in.ndim()) - 2; d >= 0 && r > 0; --d) {
    int64_t n = in.shape(d);
    off += (r % n) * in.strides()[d];
    r /= n;
  }
  return off;
}

/// An input's rows along its last axis, as the row kernels read them: the input itself when
/// its last axis has unit stride (the rows may still be sliced or broadcast), else a
/// row-major copy.
struct LastAxisRows {
  array in;
  int64_t n; // elements per row
  bool row_major;

  explicit LastAxisRows(const array& x)
      : in(x.shape(-1) == 1 || x.strides().back() == 1 ? x : contiguous_copy(x)),
        n(x.shape(-1)),
        row_major(in.flags().row_contiguous) {}

  /// The first element of row r.
  template <typename T>
  const T* row(int64_t r) const {
    return static_cast<const T*>(in.raw_data()) + (row_major ? r * n : row_offset(in, r));
  }
};

/// Calls row_fn(r) for every row r of `rows` rows of n elements, the rows split over the
/// thread pool by element count (small work stays on the calling thread).
template <typename F>
void parallel_rows(int64_t rows, int64_t n, F&& row_fn) {
  // parallel_for splits element ranges; each piece takes the rows that start in it.
  parallel_for(static_cast<size_t>(rows * n), [&](size_t begin, size_t end) {
    int64_t r0 = (static_cast<int64_t>(begin) + n - 1) / n;
    int64_t r1 = (static_cast<int64_t>(end) + n - 1) / n;
    for (int64_t r = r0; r < r1; ++r) row_fn(r);
  });
}

/// sum over i in [0, n) of f(i), in double, through 8 independent partial sums (a single
/// running sum is a chain of dependent adds, several times slower than the loads; the
/// partials let the adds overlap and vectorise). The order is fixed, so results repeat.
template <typename F>
inline double sum_of(int64_t n, F&& f) {
  double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) p[k] += static_cast<double>(f(i + k));
  }
  for (int k = 0; i < n; ++i, ++k) p[k] += static_cast<double>(f(i));
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

/// log(sum(exp(x))) of one row of n elements, in acc_t<T>: the max, then sum(exp(x − max)) in
/// double (a row of 1e5 float terms would lose ~1e-5 to sequential rounding), then max +
/// log(sum). NaN anywhere gives NaN; a row whose max is ±inf gives that infinity (the
/// LogSumExp fallback's special cases; CrossEntropy shares them).
template <typename T>
acc_t<T> logsumexp_row(const T* src, int64_t n) {
  using A = acc_t<T>;
  A m = -std::numeric_limits<A>::infinity();
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    A v = static_cast<A>(src[i]);
    nan = nan || v != v;
    m = v > m ? v : m;
  }
  if (nan) return std::numeric_limits<A>::quiet_NaN();
  if (math::is_inf(m)) return m; // all -inf, or a +inf: exp(x - 0) sums to 0 or inf
  const double s = sum_of(n, [&](int64_t i) { return math::exp(static_cast<A>(src[i]) - m); });
  return m + static_cast<A>(std::log(s));
}

} // namespace nuvec::cpu
