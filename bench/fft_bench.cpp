// nuvec benchmark for the FFT (issue 3): a one-dimensional complex64 fft of 2^20 points
// (FFTW, plan cached after the first call). bench/fft_compare.py runs NumPy's fft on the
// same problem in the same run and prints the ratio.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

namespace {

nx::array random_c64(int n) {
  std::vector<nx::complex64_t> v(n);
  uint32_t s = 12345;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  };
  for (auto& x : v) x = nx::complex64_t(next(), next());
  return nx::array(v.begin(), {n}, nx::complex64);
}

// 5 n log2(n) floating-point operations: the usual radix-2 count for a complex FFT.
void BM_fft_c64_2p20(benchmark::State& state) {
  constexpr int n = 1 << 20;
  auto x = random_c64(n);
  nx::eval(x);
  for (auto _ : state) {
    auto y = nx::fft::fft(x);
    nx::eval(y);
  }
  double flops = 5.0 * n * std::log2(static_cast<double>(n));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_fft_c64_2p20)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
