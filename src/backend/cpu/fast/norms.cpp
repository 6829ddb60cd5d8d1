// nuvec: CPU kernels of the normalisation fused primitives (rules and fallbacks in
// src/fast/norms.cpp). Per row, passes for the statistics (the row stays in L1 after the
// first) and one for the output, rows split over the thread pool, each row's loops in the
// CPU's widest vector version (cpu/simd.h); statistics accumulate in double lane partials (a
// row of 2^17 float terms summed in float would lose ~1e-5; cpu/fast/rows.h fixes their
// order, so every version gives the same bits), then run in acc_t (float for the half types
// and float32, double for float64), rounding where the fallback graph rounds. The parameter
// gradients of the backward kernels sum per-row terms over a fixed partition of the rows
// (kGradChunks chunks, combined in order), so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/cpu/fast/rows.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/thread_pool.h"
#include "core/errors.h"
#include "fast/norms.h"

namespace nuvec {

namespace {

/// Chunks of rows whose parameter-gradient partials are combined in order.
constexpr int64_t kGradChunks = 16;

/// A parameter of the last axis (1-d, made unit-stride) or the 0-d "absent" value.
template <typename T>
struct Param {
  array data;
  const T* p = nullptr;
  explicit Param(const array& a)
      : data(a.ndim() == 1 && a.strides()[0] != 1 && a.size() > 1 ? cpu::contiguous_copy(a) : a) {
    if (data.ndim() == 1) p = static_cast<const T*>(data.raw_data());
  }
  bool present() const { return p != nullptr; }
};

template <typename T>
T* out_ptr(array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  return static_cast<T*>(out.raw_data());
}

/// 1 / sqrt(sum_sq / n + eps), in A.
template <typename A>
A inv_rms(double sum_sq, int64_t n, float eps) {
  return static_cast<A>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + static_cast<double>(eps)));
}

/// sum over the row of h[i]^2, in double.
template <typename T>
double sum_of_squares(const T* h, int64_t n) {
  using A = acc_t<T>;
  return cpu::sum_lanes(n, [&](int64_t i) {
    const double v = static_cast<double>(A(h[i]));
    return v * v;
  });
}

/// y = (h * inv) rounded to T, then times w rounded to T when w is present: RmsNorm's
/// output, rounding where its fallback does.
template <typename T, typename A>
void write_rms_row(const T* h, A inv, const Param<T>& w, int64_t n, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = static_cast<T>(A(h[i]) * inv);
    y[i] = w.present() ? static_cast<T>(A(v) * A(w.p[i])) : v;
  }
}

/// LayerNorm's row statistics: the mean mu (in double, rounded to A) and
/// 1 / sqrt(mean((x - mu)^2) + eps), the centred terms formed in A as the fallback forms them.
template <typename T, typename A = acc_t<T>>
std::pair<A, A> layer_stats(const T* x, int64_t n, float eps) {
  const A mu = static_cast<A>(cpu::sum_lanes(n, [&](int64_t i) { return A(x[i]); }) / static_cast<double>(n));
  const double ss = cpu::sum_lanes(n, [&](int64_t i) {
    const double c = static_cast<double>(A(x[i]) - mu);
    return c * c;
  });
  return {mu, inv_rms<A>(ss, n, eps)};
}

/// Runs row_fn(r, partial) for every row, in kGradChunks fixed chunks of rows (in parallel),
/// each chunk with its own zeroed `width` doubles of partial sums; returns the chunks'
/// partials added in chunk order.
template <typename F>
std::vector<double> chunked_rows(int64_t rows, int64_t width, F&& row_fn) {
  const int64_t chunks = std::max<int64_t>(1, std::min(rows, kGradChunks));
  std::vector<std::vector<double>> part(static_cast<size_t>(chunks));
  cpu::run_tasks(static_cast<size_t>(chunks), [&](size_t c) {
    auto& acc = part[c];
    acc.assign(static_cast<size_t>(width), 0.0);
    const int64_t r0 = rows * static_cast<int64_t>(c) / chunks;
    const int64_t r1 = rows * static_cast<int64_t>(c + 1) / chunks;
    for (int64_t r = r0; r < r1; ++r) row_fn(r, acc.data());
  });
  std::vector<double> total(static_cast<size_t>(width), 0.0);
  for (const auto& acc : part) {
    for (int64_t j = 0; j < width; ++j) total[j] += acc[j];
  }
  return total;
}

template <typename T>
void store_param_grad(array& out, const std::vector<double>& total, int64_t offset, int64_t n) {
  T* dst = out_ptr<T>(out);
  if (out.ndim() == 0) {
    dst[0] = T(0);
    return;
  }
  for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(total[offset + j]);
}

/// Empty rows or no rows (a vmap over a size-0 batch records a node without the op's size
/// check): outputs get buffers, the parameter gradients (outputs past the first, when they
/// are a backward's) zeros. Returns whether the node was empty.
bool empty_node(const array& x, std::vector<array>& outputs) {
  if (x.size() != 0) return false;
  for (auto& o : outputs) {
    o.set_data(allocator::malloc(o.nbytes()));
    if (o.size() != 0) std::memset(o.raw_data(), 0, o.nbytes());
  }
  return true;
}

} // namespace

void RmsNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (empty_node(inputs[0], outputs)) return;
  const cpu::LastAxisRows rows(inputs[0]);
  dispatch_float_types(rows.in.dtype(), "rms_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const Param<T> w(inputs[1]);
    T* dst = out_ptr<T>(outputs[0]);
    const int64_t n = rows.n, count = static_cast<int64_t>(outputs[0].size()) / n;
    cpu::parallel_rows(count, n, [&](int64_t r) {
      rows.prefetch<T>(r + 1);
      const T* x = rows.row<T>(r);
      cpu::vectorized([&] { write_rms_row(x, inv_rms<A>(sum_of_squares(x, n), n, eps_), w, n, dst + r * n); });
    });
  });
}

void AddRmsNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (empty_node(inputs[0], outputs)) return;
  const cpu::LastAxisRows xs(inputs[0]), rs(inputs[1]);
  dispatch_float_types(xs.in.dtype(), "add_rms_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const Param<T> w(inputs[2]);
    T* hd = out_ptr<T>(outputs[0]);
    T* yd = out_ptr<T>(outputs[1]);
    const int64_t n = xs.n, count = static_cast<int64_t>(outputs[0].size()) / n;
    cpu::parallel_rows(count, n, [&](int64_t r) {
      xs.prefetch<T>(r + 1);
      rs.prefetch<T>(r + 1);
      const T* x = xs.row<T>(r);
      const T* res = rs.row<T>(r);
      T* h = hd + r * n;
      cpu::vectorized([&] {
        for (int64_t i = 0; i < n; ++i) h[i] = static_cast<T>(A(x[i]) + A(res[i]));
        write_rms_row<T>(h, inv_rms<A>(sum_of_squares(h, n), n, eps_), w, n, yd + r * n);
      });
    });
  });
}

void RmsNormVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (empty_node(inputs[0], outputs)) return;
  const cpu::LastAxisRows xs(inputs[0]), gs(inputs[2]);
  dispatch_float_types(xs.in.dtype(), "rms_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const Param<T> w(inputs[1]);
    T* dxd = out_ptr<T>(outputs[0]);
    const int64_t n = xs.n, count = static_cast<int64_t>(outputs[0].size()) / n;
    const int64_t width = w.present() ? n : 0;
    auto dw = chunked_rows(count, width, [&](int64_t r, double* acc) {
      xs.prefetch<T>(r + 1);
      gs.prefetch<T>(r + 1);
      const T* x = xs.row<T>(r);
      const T* g = gs.row<T>(r);
      T* dx = dxd + r * n;
      cpu::vectorized([&] {
        const double t = cpu::sum_lanes(n, [&](int64_t i) {
          const double gw = static_cast<double>(A(g[i])) * (w.present() ? static_cast<double>(A(w.p[i])) : 1.0);
          return gw * static_cast<double>(A(x[i]));
        });
        const A inv = inv_rms<A>(sum_of_squares(x, n), n, eps_);
        const A tn3 = static_cast<A>(t / static_cast<double>(n)) * inv * inv * inv;
        for (int64_t i = 0; i < n; ++i) {
          const A gw = A(g[i]) * (w.present() ? A(w.p[i]) : A(1));
          dx[i] = static_cast<T>(gw * inv - A(x[i]) * tn3);
        }
        if (width) {
          for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(A(g[i])) * static_cast<double>(A(x[i]) * inv);
        }
      });
    });
    store_param_grad<T>(outputs[1], dw, 0, width);
  });
}

void LayerNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (empty_node(inputs[0], outputs)) return;
  const cpu::LastAxisRows rows(inputs[0]);
  dispatch_float_types(rows.in.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const Param<T> w(inputs[1]), b(inputs[2]);
    T* dst = out_ptr<T>(outputs[0]);
    const int64_t n = rows.n, count = static_cast<int64_t>(outputs[0].size()) / n;
    cpu::parallel_rows(count, n, [&](int64_t r) {
      rows.prefetch<T>(r + 1);
      const T* x = rows.row<T>(r);
      T* y = dst + r * n;
      cpu::vectorized([&] {
        const auto [mu, inv] = layer_stats(x, n, eps_);
        for (int64_t i = 0; i < n; ++i) {
          T v = static_cast<T>((A(x[i]) - mu) * inv);
          if (w.present()) v = static_cast<T>(A(v) * A(w.p[i]));
          if (b.present()) v = static_cast<T>(A(v) + A(b.p[i]));
          y[i] = v;
        }
      });
    });
  });
}

void LayerNormVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (empty_node(inputs[0], outputs)) return;
  const cpu::LastAxisRows xs(inputs[0]), gs(inputs[3]);
  dispatch_float_types(xs.in.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const Param<T> w(inputs[1]), b(inputs[2]);
    T* dxd = out_ptr<T>(outputs[0]);
    const int64_t n = xs.n, count = static_cast<int64_t>(outputs[0].size()) / n;
    // Partials: dw terms at [0, n) (when w is present), db terms after them (when b is).
    const int64_t wn = w.present() ? n : 0, bn = b.present() ? n : 0;
    auto grads = chunked_rows(count, wn + bn, [&](int64_t r, double* acc) {
      xs.prefetch<T>(r + 1);
      gs.prefetch<T>(r + 1);
      const T* x = xs.row<T>(r);
      const T* g = gs.row<T>(r);
      T* dx = dxd + r * n;
      cpu::vectorized([&] {
        const auto [mu, inv] = layer_stats(x, n, eps_);
        const auto wg = [&](int64_t i) {
          return static_cast<double>(A(g[i])) * (w.present() ? static_cast<double>(A(w.p[i])) : 1.0);
        };
        const double swg = cpu::sum_lanes(n, wg);
        const double swgxc = cpu::sum_lanes(n, [&](int64_t i) { return wg(i) * static_cast<double>(A(x[i]) - mu); });
        const A mwg = static_cast<A>(swg / static_cast<double>(n));
        const A k = static_cast<A>(swgxc / static_cast<double>(n)) * inv * inv * inv;
        for (int64_t i = 0; i < n; ++i) {
          const A wgi = A(g[i]) * (w.present() ? A(w.p[i]) : A(1));
          dx[i] = static_cast<T>((wgi - mwg) * inv - (A(x[i]) - mu) * k);
        }
        if (wn) {
          for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(A(g[i])) * static_cast<double>((A(x[i]) - mu) * inv);
        }
        if (bn) {
          for (int64_t i = 0; i < n; ++i) acc[wn + i] += static_cast<double>(A(g[i]));
        }
      });
    });
    store_param_grad<T>(outputs[1], grads, 0, wn);
    store_param_grad<T>(outputs[2], grads, wn, bn);
  });
}

} // namespace nuvec
