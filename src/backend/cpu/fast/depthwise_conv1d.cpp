// nuvec: CPU kernels of DepthwiseConv1d and CausalConv1dStep (rules and fallbacks in
// src/fast/depthwise_conv1d.cpp). Direct loops, no im2col: a task is one (n, output position,
// chunk of channels), split over the thread pool; the channels are contiguous in MLX's layout,
// so with the weight transposed to [K, C] in the compute type (once a node) each tap is one
// vectorised pass over the chunk's sums (cpu/simd.h). The geometry and the tap sum are
// math/depthwise_conv1d.h's, the CUDA kernels' too. Non-contiguous inputs are copied first.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math/depthwise_conv1d.h"
#include "backend/cpu/fast/rows.h"
#include "fast/depthwise_conv1d.h"

namespace nuvec {

namespace {

/// Channels one task sums: its float sums (1 KiB) stay in L1 across the taps, and a decode
/// step of one sequence (C of several thousand) still splits over the pool.
constexpr int64_t kChannelChunk = 256;

/// The weight [C, K] (row-contiguous, element type T) as [K, C] in the compute type A: tap j's
/// weights of consecutive channels side by side, as the channel loop reads them.
template <typename T, typename A = acc_t<T>>
std::vector<A> weight_by_tap(const array& w, int64_t channels, int64_t taps) {
  std::vector<A> out(static_cast<size_t>(channels * taps));
  const T* src = static_cast<const T*>(w.raw_data());
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < taps; ++j) out[j * channels + c] = static_cast<A>(src[c * taps + j]);
  }
  return out;
}

/// Output channels [c0, c0 + cn) of one position: y[c] = Σ_j wt[j][c] · tap(j)[c] over the taps
/// in order, tap(j) the input row (all C channels) tap j reads, or null on the padding.
template <typename T, typename A, typename Tap>
void tap_sum_chunk(const A* wt, int64_t channels, int64_t taps, int64_t c0, int64_t cn, Tap&& tap, T* y) {
  cpu::vectorized([&] {
    A acc[kChannelChunk];
    for (int64_t c = 0; c < cn; ++c) acc[c] = A(0);
    for (int64_t j = 0; j < taps; ++j) {
      const T* x = tap(j);
      if (!x) continue;
      const A* w = wt + j * channels + c0;
      x += c0;
      for (int64_t c = 0; c < cn; ++c) acc[c] = math::depthwise_term(acc[c], w[c], x[c]);
    }
    for (int64_t c = 0; c < cn; ++c) y[c0 + c] = math::depthwise_round<T>(acc[c]);
  });
}

/// Calls f(row, c0, cn) for every row of `rows` and chunk of C channels, over the thread pool
/// (each task weighs its chunk times K taps).
template <typename F>
void for_row_chunks(int64_t rows, int64_t channels, int64_t taps, F&& f) {
  const int64_t chunks = (channels + kChannelChunk - 1) / kChannelChunk;
  cpu::parallel_rows(rows * chunks, std::min(channels, kChannelChunk) * taps, [&](int64_t t) {
    const int64_t c0 = (t % chunks) * kChannelChunk;
    f(t / chunks, c0, std::min(kChannelChunk, channels - c0));
  });
}

} // namespace

void DepthwiseConv1d::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::as_row_contiguous(inputs[0]), w = cpu::as_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const math::DepthwiseConv1dShape g = geometry(x.shape(), w.shape(1));
  dispatch_float_types(x.dtype(), "conv1d", [&]<typename T>() {
    const std::vector<acc_t<T>> wt = weight_by_tap<T>(w, g.channels, g.taps);
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    for_row_chunks(g.batch * g.out_length, g.channels, g.taps, [&](int64_t r, int64_t c0, int64_t cn) {
      const int64_t n = r / g.out_length, o = r % g.out_length;
      const T* xn = src + n * g.length * g.channels;
      auto tap = [&](int64_t j) -> const T* {
        const int64_t i = math::depthwise_tap_position(g, o, j);
        return i < 0 ? nullptr : xn + i * g.channels;
      };
      tap_sum_chunk(wt.data(), g.channels, g.taps, c0, cn, tap, dst + r * g.channels);
    });
  });
}

void CausalConv1dStep::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::as_row_contiguous(inputs[0]), w = cpu::as_row_contiguous(inputs[1]);
  const array state = cpu::as_row_contiguous(inputs[2]);
  array &y = outputs[0], &next = outputs[1];
  y.set_data(allocator::malloc(y.nbytes()));
  next.set_data(allocator::malloc(next.nbytes()));
  if (y.size() == 0) return;
  const int64_t batch = x.shape(0), channels = x.shape(2), taps = w.shape(1);
  dispatch_float_types(x.dtype(), "causal_conv1d_step", [&]<typename T>() {
    const std::vector<acc_t<T>> wt = weight_by_tap<T>(w, channels, taps);
    const T* xp = static_cast<const T*>(x.raw_data());
    const T* sp = static_cast<const T*>(state.raw_data());
    T* yp = static_cast<T*>(y.raw_data());
    T* np = static_cast<T*>(next.raw_data());
    for_row_chunks(batch, channels, taps, [&](int64_t n, int64_t c0, int64_t cn) {
      // Window row j of sequence n: state row j, then x (row K − 1).
      auto row = [&](int64_t j) { return j < taps - 1 ? sp + (n * (taps - 1) + j) * channels : xp + n * channels; };
      tap_sum_chunk(wt.data(), channels, taps, c0, cn, row, yp + n * channels);
      // The new state is window rows 1 ... K − 1, read while the chunk is in cache.
      for (int64_t j = 1; j < taps; ++j) {
        std::memcpy(np + (n * (taps - 1) + j - 1) * channels + c0, row(j) + c0, cn * sizeof(T));
      }
    });
  });
}

} // namespace nuvec
