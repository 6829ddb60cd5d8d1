// nuvec: GPU kernels of DepthwiseConv1d and CausalConv1dStep (rules and fallbacks in
// src/fast/depthwise_conv1d.cpp; the geometry and the tap sum are math/depthwise_conv1d.h's, the
// CPU loops' too). Both are memory-bound: the aim is one read of the input and one write of the
// output, in 16-byte vectors of channels (contiguous in MLX's layout), with float sums.
//  - depthwise_conv1d_kernel: a thread per (n, vector of channels, kOutputs consecutive
//    outputs): it holds its channels' weights and computes the outputs one after the other.
//    Neighbouring outputs read overlapping inputs, which come from L1/L2: the device memory
//    reads stay near one pass over x.
//  - causal_conv1d_step_kernel: a thread per (n, vector of channels) reads its K window rows
//    (the state's K − 1, then x) once, writes y, and writes rows 1 ... K − 1 as the new state.
// The weights: a thread's W channels and K taps are W·K contiguous elements of the [C, K]
// weight. For K <= kMaxHeldTaps they are read once with K 16-byte loads and held in registers
// (ChannelWeights); one tap's weights read as W scalars touch 16 cache lines per warp-wide
// load, which made L1 the bottleneck when read per output. Other K read them that way, from
// L1. Channels that do not split into vectors, or unaligned buffers, take the same kernels one
// channel per thread. Inputs that are not row-contiguous are copied first.
#include <cstdint>

#include "backend/cuda/copy.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/depthwise_conv1d.h"

namespace nuvec {

namespace {

constexpr int kThreads = 256;

/// Outputs per thread of depthwise_conv1d_kernel: the held weights serve all of them, so
/// their loads cost 1/kOutputs of an output's; a prefill still has millions of threads.
constexpr int kOutputs = 8;

/// The largest K whose weights a thread holds in registers (W·K elements packed: 16 registers
/// at K = 4 for every dtype); Mamba's and Qwen3-Next's short convolutions have K = 4.
constexpr int kMaxHeldTaps = 4;

/// Blocks per SM depthwise_conv1d_kernel is built for: 64 registers a thread (left to itself,
/// ptxas picked 48 for some instantiations and spilled there).
constexpr int kMinBlocks = 4;

/// The weights of a thread's W channels c0 ... c0 + W − 1, by (channel k, tap j). kTaps > 0
/// (K = kTaps): all W·K of them, read once with K vector loads (w + c0·K is 16-byte aligned
/// when w is and W·sizeof(T) = 16) and held packed; at(k, j) must then have indices known at
/// compile time (unrolled loops).
template <typename T, int W, int kTaps>
struct ChannelWeights {
  cu::Packed<T, W> v[kTaps];

  __device__ __forceinline__ ChannelWeights(const T* w, int64_t c0, int64_t) {
#pragma unroll
    for (int q = 0; q < kTaps; ++q) v[q] = cu::load_packed<W, cu::Load::ReadOnly>(w + c0 * kTaps + q * W);
  }
  __device__ __forceinline__ math::compute_t<T> at(int k, int64_t j) const {
    const int e = k * kTaps + static_cast<int>(j);
    return cu::acc_at(v[e / W], e % W);
  }
};

/// kTaps == 0 (any K): each weight read when needed (from L1: a warp's channels reuse it).
template <typename T, int W>
struct ChannelWeights<T, W, 0> {
  const T* w;
  int64_t c0, taps;

  __device__ __forceinline__ ChannelWeights(const T* w_, int64_t c0_, int64_t taps_) : w(w_), c0(c0_), taps(taps_) {}
  __device__ __forceinline__ math::compute_t<T> at(int k, int64_t j) const {
    return cu::to_acc(w[(c0 + k) * taps + j]);
  }
};

template <typename T, int W, int kTaps>
__global__ void __launch_bounds__(kThreads, kMinBlocks) depthwise_conv1d_kernel(
    const T* __restrict__ x,
    const T* __restrict__ w,
    T* __restrict__ y,
    const math::DepthwiseConv1dShape s,
    int64_t output_groups,
    int64_t items) {
  using A = cu::device_acc_t<T>;
  const int64_t vecs = s.channels / W, taps = kTaps > 0 ? kTaps : s.taps;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < items; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c0 = (t % vecs) * W, rest = t / vecs;
    const int64_t o0 = (rest % output_groups) * kOutputs, n = rest / output_groups;
    const int64_t o_end = o0 + kOutputs < s.out_length ? o0 + kOutputs : s.out_length;
    const ChannelWeights<T, W, kTaps> wt(w, c0, taps);
    const T* xn = x + n * s.length * s.channels + c0;
    T* yn = y + n * s.out_length * s.channels + c0;
    // One output at a time: its K loads are independent, and 1024 threads an SM keep enough
    // of them in flight (two at a time took 76 registers, or spilled for float16).
    for (int64_t o = o0; o < o_end; ++o) {
      A acc[W];
#pragma unroll
      for (int k = 0; k < W; ++k) acc[k] = A(0);
#pragma unroll
      for (int64_t j = 0; j < taps; ++j) {
        const int64_t i = math::depthwise_tap_position(s, o, j);
        if (i >= 0) {
          const auto xv = cu::load_vec<W, cu::Load::ReadOnly>(xn + i * s.channels);
#pragma unroll
          for (int k = 0; k < W; ++k) acc[k] = math::depthwise_term(acc[k], wt.at(k, j), xv[k]);
        }
      }
      cu::Vec<T, W> out;
#pragma unroll
      for (int k = 0; k < W; ++k) out[k] = math::depthwise_round<T>(acc[k]);
      cu::store_vec<W>(yn + o * s.channels, out);
    }
  }
}

template <typename T, int W, int kTaps>
__global__ void __launch_bounds__(kThreads) causal_conv1d_step_kernel(
    const T* __restrict__ x,
    const T* __restrict__ w,
    const T* __restrict__ state,
    T* __restrict__ y,
    T* __restrict__ next,
    int64_t channels,
    int64_t any_taps,
    int64_t items) {
  using A = cu::device_acc_t<T>;
  const int64_t vecs = channels / W, taps = kTaps > 0 ? kTaps : any_taps;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < items; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c0 = (t % vecs) * W, n = t / vecs;
    const ChannelWeights<T, W, kTaps> wt(w, c0, taps);
    A acc[W];
#pragma unroll
    for (int k = 0; k < W; ++k) acc[k] = A(0);
#pragma unroll
    for (int64_t j = 0; j < taps; ++j) {
      // Window row j: state row j, then x (row K − 1).
      const T* src = j < taps - 1 ? state + (n * (taps - 1) + j) * channels + c0 : x + n * channels + c0;
      const auto xv = cu::load_vec<W, cu::Load::ReadOnly>(src);
#pragma unroll
      for (int k = 0; k < W; ++k) acc[k] = math::depthwise_term(acc[k], wt.at(k, j), xv[k]);
      if (j > 0) cu::store_vec<W>(next + (n * (taps - 1) + j - 1) * channels + c0, xv);
    }
    cu::Vec<T, W> out;
#pragma unroll
    for (int k = 0; k < W; ++k) out[k] = math::depthwise_round<T>(acc[k]);
    cu::store_vec<W>(y + n * channels + c0, out);
  }
}

/// Launches `kernel` over `items` threads' work (grid-stride; the resident-block count is the
/// kernel's own: one static per instantiation).
template <auto kernel, typename... Args>
void launch(int64_t items, const char* name, Args... args) {
  static const int resident = cu::resident_blocks(kernel, kThreads);
  kernel<<<cu::grid_blocks(cu::ceil_div(items, kThreads), resident), kThreads, 0, cu::stream()>>>(args..., items);
  cu::check_launch(name);
}

/// Calls f.template operator()<W, kTaps>(): W = kVec<T> (16-byte vectors) when the channels
/// split into vectors and every buffer (the weight's included) is 16-byte aligned, with
/// kTaps = K when K <= kMaxHeldTaps (weights held) and 0 otherwise; else one channel per thread
/// (W = 1, kTaps = 0).
template <typename T, typename F>
void with_layout(int64_t channels, int64_t taps, std::initializer_list<const void*> buffers, F&& f) {
  constexpr int W = cu::kVec<T>;
  bool vectors = channels % W == 0;
  for (const void* p : buffers) vectors = vectors && cu::is_aligned(p, 16);
  if (!vectors) return f.template operator()<1, 0>();
  switch (taps) {
    case 1: return f.template operator()<W, 1>();
    case 2: return f.template operator()<W, 2>();
    case 3: return f.template operator()<W, 3>();
    case kMaxHeldTaps: return f.template operator()<W, kMaxHeldTaps>();
    default: return f.template operator()<W, 0>();
  }
}

} // namespace

void DepthwiseConv1d::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cu::as_row_contiguous(inputs[0]), w = cu::as_row_contiguous(inputs[1]);
  void* out = cu::alloc_output(outputs[0]);
  if (outputs[0].size() == 0) return;
  const math::DepthwiseConv1dShape g = geometry(x.shape(), w.shape(1));
  const int64_t output_groups = cu::ceil_div(g.out_length, kOutputs);
  cu::dispatch_device_float_types(x.dtype(), "conv1d", [&]<typename T>() {
    const T* xp = cu::device_ptr<T>(x);
    const T* wp = cu::device_ptr<T>(w);
    T* yp = static_cast<T*>(out);
    with_layout<T>(g.channels, g.taps, {xp, wp, yp}, [&]<int W, int kTaps>() {
      const int64_t items = g.batch * output_groups * (g.channels / W);
      launch<depthwise_conv1d_kernel<T, W, kTaps>>(items, "depthwise_conv1d_kernel", xp, wp, yp, g, output_groups);
    });
  });
}

void CausalConv1dStep::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cu::as_row_contiguous(inputs[0]), w = cu::as_row_contiguous(inputs[1]);
  const array state = cu::as_row_contiguous(inputs[2]);
  void* y = cu::alloc_output(outputs[0]);
  void* next = cu::alloc_output(outputs[1]);
  if (outputs[0].size() == 0) return;
  const int64_t batch = x.shape(0), channels = x.shape(2), taps = w.shape(1);
  cu::dispatch_device_float_types(x.dtype(), "causal_conv1d_step", [&]<typename T>() {
    const T* xp = cu::device_ptr<T>(x);
    const T* wp = cu::device_ptr<T>(w);
    // An empty state (K = 1) has no buffer to read.
    const T* sp = state.size() > 0 ? cu::device_ptr<T>(state) : nullptr;
    T* yp = static_cast<T*>(y);
    T* np = static_cast<T*>(next);
    with_layout<T>(channels, taps, {xp, wp, sp, yp, np}, [&]<int W, int kTaps>() {
      launch<causal_conv1d_step_kernel<T, W, kTaps>>(
          batch * (channels / W), "causal_conv1d_step_kernel", xp, wp, sp, yp, np, channels, taps);
    });
  });
}

} // namespace nuvec
