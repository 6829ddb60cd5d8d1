// nuvec: what the CPU kernels of last-axis fused ops share: the rows of an input along its
// last axis (copied only when that axis is strided), the split of rows over the pool, and
// the vectorised row reductions (lane partials in a fixed order, simd.h's versions).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "backend/common/dispatch.h"
#include "backend/common/math/functions.h"
#include "backend/common/math/unary.h"

#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/simd.h"
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

  /// Starts loading row r (its first kPrefetchBytes) into the cache, if there is a row r. A
  /// row kernel calls it for row r + 1 before its passes over row r: once row r is in L1
  /// those passes make no memory requests, so the hardware prefetcher stops running ahead,
  /// and the next row's load would otherwise wait for them (4096 x 1024 float32 layer_norm:
  /// ~15% faster with it). Past kPrefetchBytes the hardware prefetcher keeps up.
  template <typename T>
  void prefetch(int64_t r) const {
    static constexpr int64_t kPrefetchBytes = 16384, kLine = 64;
    if ((r + 1) * n > static_cast<int64_t>(in.size())) return;
    const char* p = reinterpret_cast<const char*>(row<T>(r));
    const int64_t bytes = std::min<int64_t>(n * static_cast<int64_t>(sizeof(T)), kPrefetchBytes);
    for (int64_t b = 0; b < bytes; b += kLine) __builtin_prefetch(p + b);
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

/// Partials of the row reductions: 16 doubles fill two AVX-512 registers, four AVX2 or
/// eight SSE2 ones, so the adds run as independent chains at every width.
inline constexpr int kRowLanes = 16;

/// f(0) op f(1) op ... op f(n-1), element i combined into partial i % kRowLanes (each
/// starting at `init`), the partials then combined pairwise: the lanes let the combines
/// overlap and vectorise, and their order is fixed by this code, not by the vector width or
/// the thread count, so every version of vectorized() gives the same bits. For callers
/// already inside vectorized().
template <typename Acc, typename F, typename Op>
inline Acc reduce_lanes(int64_t n, Acc init, F&& f, Op&& op) {
  Acc p[kRowLanes];
  for (auto& v : p) v = init;
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int k = 0; k < kRowLanes; ++k) p[k] = op(p[k], f(i + k));
  }
  for (int k = 0; i < n; ++i, ++k) p[k] = op(p[k], f(i));
  for (int w = kRowLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) p[k] = op(p[k], p[k + w]);
  }
  return p[0];
}

/// sum over i in [0, n) of f(i), in double lane partials (a single running sum is a chain of
/// dependent adds, several times slower than the loads; float partials measured no faster
/// for exp terms and would lose ~1e-5 over a row of 1e6). For callers already inside
/// vectorized(); others call sum_of.
template <typename F>
inline double sum_lanes(int64_t n, F&& f) {
  return reduce_lanes(n, 0.0, [&](int64_t i) { return static_cast<double>(f(i)); },
                      [](double a, double b) { return a + b; });
}

/// sum_lanes run in the CPU's widest vector version (simd.h): sum over i in [0, n) of f(i),
/// in double, the same bits whichever version runs.
template <typename F>
inline double sum_of(int64_t n, F&& f) {
  return vectorized([&] { return sum_lanes(n, f); });
}

/// An integer whose signed order is the order of the float v: v's bits, with the magnitude
/// bits of a negative v flipped (-0 sorts just below +0, NaNs beyond ±inf on their sign's
/// side). Applied twice it gives v's bits back. A max over these keys vectorises, where the
/// float max (a compare and a select) is a conditional reduction GCC leaves scalar.
template <typename A>
inline auto order_key(A v) {
  using I = std::conditional_t<sizeof(A) == 4, int32_t, int64_t>;
  const I b = __builtin_bit_cast(I, v);
  return static_cast<I>(b ^ ((b >> (8 * sizeof(I) - 1)) & std::numeric_limits<I>::max()));
}
/// The float whose order_key is `key`.
template <typename A, typename I>
inline A from_order_key(I key) {
  return __builtin_bit_cast(A, order_key(__builtin_bit_cast(A, key)));
}

/// log(sum(exp(x))) of one row of n elements in two parts, {max, log(sum(exp(x − max)))}, in
/// acc_t<T>: the max, then the sum in double partials (a row of 1e5 float terms summed in
/// float would lose ~1e-5); both passes vectorised, float exp by math::exp_f32 (within 1
/// ulp). NaN anywhere gives {NaN, 0}; a row whose max is ±inf gives {that infinity, 0} (the
/// LogSumExp fallback's special cases; CrossEntropy shares them, subtracting its target's
/// logit from the max before adding the sum's log: cross_entropy_rules.h).
template <typename T>
std::pair<acc_t<T>, acc_t<T>> logsumexp_parts(const T* src, int64_t n) {
  using A = acc_t<T>;
  using P = std::pair<A, A>;
  return vectorized([&] {
    const auto x = [&](int64_t i) { return static_cast<A>(src[i]); };
    using I = decltype(order_key(A(0)));
    const A m = from_order_key<A>(reduce_lanes(n, order_key(-std::numeric_limits<A>::infinity()),
                                               [&](int64_t i) { return order_key(x(i)); },
                                               [](I a, I b) { return a > b ? a : b; }));
    // A NaN with its sign bit clear is the max; one with it set reaches the sum through
    // exp(NaN), or the scan when the max is infinite.
    if (m != m) return P{m, A(0)};
    if (math::is_inf(m)) { // all -inf (or no elements), or a +inf: exp(x - m) is 0 or NaN
      for (int64_t i = 0; i < n; ++i) {
        if (x(i) != x(i)) return P{std::numeric_limits<A>::quiet_NaN(), A(0)};
      }
      return P{m, A(0)};
    }
    const double s = sum_lanes(n, [&](int64_t i) { return math::Exp{}(x(i) - m); });
    return P{m, static_cast<A>(std::log(s))};
  });
}

/// log(sum(exp(x))) of one row: max + log(sum(exp(x − max))) (logsumexp_parts).
template <typename T>
acc_t<T> logsumexp_row(const T* src, int64_t n) {
  const auto [m, l] = logsumexp_parts(src, n);
  return m + l;
}

} // namespace nuvec::cpu
