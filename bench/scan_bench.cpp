// nuvec benchmarks for the scans-and-sorting issue: cumsum of 10^7 float32 and sort of 10^6
// float32 (the sizes). NumPy's times for the same work are measured separately
// (see the closing note of the scan work) with /usr/bin/python3.
#include <benchmark/benchmark.h>

#include <vector>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

namespace {

nx::array random_f32(int n) {
  std::vector<float> v(n);
  uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  return nx::array(v.begin(), {n}, nx::float32);
}

void BM_cumsum_1e7(benchmark::State& state) {
  auto a = random_f32(10'000'000);
  nx::eval(a);
  for (auto _ : state) {
    auto y = nx::cumsum(a, 0);
    nx::eval(y);
  }
}

void BM_sort_1e6(benchmark::State& state) {
  auto a = random_f32(1'000'000);
  nx::eval(a);
  for (auto _ : state) {
    auto y = nx::sort(a, 0);
    nx::eval(y);
  }
}

} // namespace

BENCHMARK(BM_cumsum_1e7)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sort_1e6)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
