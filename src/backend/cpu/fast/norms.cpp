// nuvec: CPU kernels of the normalisation fused primitives (rules and fallbacks in
// src/fast/norms.cpp). One pass over each row for the statistics and one for the output,
// rows split over the thread pool; statistics accumulate in double (a row of 2^17 float
// terms summed in float would lose ~1e-5), then run in acc_t (float for the half types and
// float32, double for float64), rounding where the fallback graph rounds. The parameter
// gradients of the backward kernels sum per-row terms over a fixed partition of the rows
// (kGradChunks chunks, combined in order), so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/cpu/fast/rows.h"
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
      const T* x = rows.row<T>(r);
      const double ss = cpu::sum_of(n, [&](int64_t i) { return static_cast<double>(A(x[i])) * static_cast<double>(A(x[i])); });
      const A inv = inv_rms<A>(ss, n, eps_);
      T* y = dst + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const T v = static_cast<T>(A(x[i]) * inv);
        y[i] = w.present() ? static_cast<T>(A(v) * A(w.p[i])) : v;
      }
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
      const T* x = xs.row<T>(r);
      const T* res = rs.row<T>(r);
      T* h = hd + r * n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) {
        h[i] = static_cast<T>(A(x[i]) + A(res[i]));
        ss += static_cast<double>(A(h[i])) * static_cast<double>(A(h[i]));
      }
      const A inv = inv_rms<A>(ss, n, eps_);
      T* y = yd + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const T v = static_cast<T>(A(h[i]) * inv);
        y[i] = w.present() ? static_cast<T>(A(v) * A(w.p[i])) : v;
      }
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
      const T* x = xs.row<T>(r);
      const T* g = gs.row<T>(r);
      double ss = 0, t = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double xi = static_cast<double>(A(x[i]));
        const double gw = static_cast<double>(A(g[i])) * (w.present() ? static_cast<double>(A(w.p[i])) : 1.0);
        ss += xi * xi;
        t += gw * xi;
      }
      const A inv = inv_rms<A>(ss, n, eps_);
      const A tn3 = static_cast<A>(t / static_cast<double>(n)) * inv * inv * inv;
      T* dx = dxd + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const A gw = A(g[i]) * (w.present() ? A(w.p[i]) : A(1));
        dx[i] = static_cast<T>(gw * inv - A(x[i]) * tn3);
        if (width) acc[i] += static_cast<double>(A(g[i])) * static_cast<double>(A(x[i]) * inv);
      }
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
      const T* x = rows.row<T>(r);
      const double s = cpu::sum_of(n, [&](int64_t i) { return static_cast<double>(A(x[i])); });
      const A mu = static_cast<A>(s / static_cast<double>(n));
      const double ss = cpu::sum_of(n, [&](int64_t i) {
        const double c = static_cast<double>(A(x[i]) - mu);
        return c * c;
      });
      const A inv = inv_rms<A>(ss, n, eps_);
      T* y = dst + r * n;
      for (int64_t i = 0; i < n; ++i) {
        T v = static_cast<T>((A(x[i]) - mu) * inv);
        if (w.present()) v = static_cast<T>(A(v) * A(w.p[i]));
        if (b.present()) v = static_cast<T>(A(v) + A(b.p[i]));
        y[i] = v;
      }
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
      const T* x = xs.row<T>(r);
      const T* g = gs.row<T>(r);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(A(x[i]));
      const A mu = static_cast<A>(s / static_cast<double>(n));
      double ss = 0, swg = 0, swgxc = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double c = static_cast<double>(A(x[i]) - mu);
        const double wg = static_cast<double>(A(g[i])) * (w.present() ? static_cast<double>(A(w.p[i])) : 1.0);
        ss += c * c;
        swg += wg;
        swgxc += wg * c;
      }
      const A inv = inv_rms<A>(ss, n, eps_);
      const A mwg = static_cast<A>(swg / static_cast<double>(n));
      const A k = static_cast<A>(swgxc / static_cast<double>(n)) * inv * inv * inv;
      T* dx = dxd + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const A c = A(x[i]) - mu;
        const A wg = A(g[i]) * (w.present() ? A(w.p[i]) : A(1));
        dx[i] = static_cast<T>((wg - mwg) * inv - c * k);
        if (wn) acc[i] += static_cast<double>(A(g[i])) * static_cast<double>(c * inv);
        if (bn) acc[wn + i] += static_cast<double>(A(g[i]));
      }
    });
    store_param_grad<T>(outputs[1], grads, 0, wn);
    store_param_grad<T>(outputs[2], grads, wn, bn);
  });
}

} // namespace nuvec
