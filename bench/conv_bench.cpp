// nuvec benchmark for convolution (issue 3): conv2d with batch 32, 64 -> 64 channels, 3x3
// kernel, 56x56 input, padding 1, float32, channels-last. bench/conv_compare.py runs it beside
// PyTorch's CPU conv2d on the same problem and prints the ratio.
#include <benchmark/benchmark.h>

#include <vector>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

namespace {

nx::array random_f32(nx::Shape shape) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(n);
  uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  return nx::array(v.begin(), shape, nx::float32);
}

// 2 * N * H_out * W_out * C_out * KH * KW * C_in floating-point operations.
void BM_conv2d_resnet_3x3(benchmark::State& state) {
  constexpr int n = 32, h = 56, w = 56, c = 64, k = 3;
  auto x = random_f32({n, h, w, c});
  auto wt = random_f32({c, k, k, c});
  nx::eval(x, wt);
  for (auto _ : state) {
    auto y = nx::conv2d(x, wt, {1, 1}, {1, 1});
    nx::eval(y);
  }
  double flops = 2.0 * n * h * w * c * k * k * c;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_conv2d_resnet_3x3)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
