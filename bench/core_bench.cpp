// nuvec benchmarks for the core issue: element-wise add and exp and a full sum over 10^7
// float32, the column sum of a 4096 x 1024 float32 array, a 1024^3 float32 matmul, and the per-op cost of building and evaluating a chain
// of 10,000 small ops; the fused row ops; the 4-bit quantized product (M 1 and 256). bench/run.sh runs this beside NumPy and prints the ratios.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

namespace {

constexpr int kN = 10'000'000;

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

// The physical floor for memory-bound ops: memcpy bandwidth measured in the same run, with
// as many threads as nuvec's CPU kernels use (NUVEC_NUM_THREADS, else every core), each
// copying its own slice (the threads' start, some tens of microseconds, is timed too).
void BM_memcpy(benchmark::State& state) {
  std::vector<float> a(kN, 1.0f), b(kN);
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char* env = std::getenv("NUVEC_NUM_THREADS")) threads = std::max(1, std::atoi(env));
  const size_t per = (kN + threads - 1) / threads;
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) {
      pool.emplace_back([&, t] {
        size_t lo = std::min<size_t>(kN, t * per), hi = std::min<size_t>(kN, lo + per);
        std::memcpy(b.data() + lo, a.data() + lo, (hi - lo) * sizeof(float));
      });
    }
    std::memcpy(b.data(), a.data(), std::min<size_t>(kN, per) * sizeof(float));
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kN * sizeof(float) * 2);
}

void BM_add(benchmark::State& state) {
  auto a = random_f32({kN}), b = random_f32({kN});
  nx::eval(a, b);
  for (auto _ : state) {
    auto c = nx::add(a, b);
    nx::eval(c);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kN * sizeof(float) * 3);
}

void BM_exp(benchmark::State& state) {
  auto a = random_f32({kN});
  nx::eval(a);
  for (auto _ : state) {
    auto c = nx::exp(a);
    nx::eval(c);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kN * sizeof(float) * 2);
}

void BM_sum(benchmark::State& state) {
  auto a = random_f32({kN});
  nx::eval(a);
  for (auto _ : state) {
    auto c = nx::sum(a);
    nx::eval(c);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kN * sizeof(float));
}

// The column sum of issue 10: axis 0 of a 4096 x 1024 float32 array.
void BM_sum_axis0_4096x1024(benchmark::State& state) {
  auto a = random_f32({4096, 1024});
  nx::eval(a);
  for (auto _ : state) {
    auto c = nx::sum(a, 0);
    nx::eval(c);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 4096 * 1024 * sizeof(float));
}

void BM_matmul_1024(benchmark::State& state) {
  auto a = random_f32({1024, 1024}), b = random_f32({1024, 1024});
  nx::eval(a, b);
  for (auto _ : state) {
    auto c = nx::matmul(a, b);
    nx::eval(c);
  }
  state.counters["FLOPs"] = benchmark::Counter(
      2.0 * 1024 * 1024 * 1024 * state.iterations(), benchmark::Counter::kIsRate);
}

// The fused row ops of issue 11 on float32 (the CPU kernels of src/backend/cpu/fast/).
void BM_rms_norm_4096x1024(benchmark::State& state) {
  auto x = random_f32({4096, 1024}), w = random_f32({1024});
  nx::eval(x, w);
  for (auto _ : state) nx::eval(nx::fast::rms_norm(x, w, 1e-5f));
  state.SetBytesProcessed(int64_t(state.iterations()) * 4096 * 1024 * sizeof(float) * 2);
}

void BM_layer_norm_4096x1024(benchmark::State& state) {
  auto x = random_f32({4096, 1024}), w = random_f32({1024}), b = random_f32({1024});
  nx::eval(x, w, b);
  for (auto _ : state) nx::eval(nx::fast::layer_norm(x, w, b, 1e-5f));
  state.SetBytesProcessed(int64_t(state.iterations()) * 4096 * 1024 * sizeof(float) * 2);
}

void BM_softmax_4096x1024(benchmark::State& state) {
  auto x = random_f32({4096, 1024});
  nx::eval(x);
  for (auto _ : state) nx::eval(nx::softmax(x, -1));
  state.SetBytesProcessed(int64_t(state.iterations()) * 4096 * 1024 * sizeof(float) * 2);
}

void BM_cross_entropy_512x32000(benchmark::State& state) {
  auto x = random_f32({512, 32000});
  auto t = nx::astype(nx::random::randint(0, 32000, {512}), nx::int32);
  nx::eval(x, t);
  for (auto _ : state) nx::eval(nx::fast::cross_entropy(x, t));
  state.SetBytesProcessed(int64_t(state.iterations()) * 512 * 32000 * sizeof(float));
}

void BM_rope_1x32x1024x128(benchmark::State& state) {
  auto x = random_f32({1, 32, 1024, 128});
  nx::eval(x);
  for (auto _ : state) nx::eval(nx::fast::rope(x, 128, false, 10000.0f, 1.0f, 0));
  state.SetBytesProcessed(int64_t(state.iterations()) * 32 * 1024 * 128 * sizeof(float) * 2);
}

// Build a chain of 10,000 small ops and evaluate it; reported per op.
void BM_chain_10k(benchmark::State& state) {
  auto x = random_f32({16});
  nx::eval(x);
  constexpr int kOps = 10'000;
  for (auto _ : state) {
    nx::array y = x;
    for (int i = 0; i < kOps; ++i) {
      y = (i % 2) ? nx::multiply(y, nx::array(0.999f)) : nx::add(y, nx::array(0.001f));
    }
    nx::eval(y);
  }
}

} // namespace

// Issue 13's quantized product on the CPU (src/backend/cpu/quantized/): float32 x of M rows
// against a 4096 x 4096 weight quantized to affine 4 bits, groups of 64 (the decode shape at
// M = 1, a prefill block at M = 256). compare.py times NumPy dequantizing and multiplying.
void quantized_matmul_bench(benchmark::State& state, int m) {
  auto w = nx::quantize(random_f32({4096, 4096}), 64, 4);
  auto x = random_f32({m, 4096});
  nx::eval(w);
  nx::eval(x);
  for (auto _ : state) {
    auto y = nx::quantized_matmul(x, w[0], w[1], w[2], true, 64, 4);
    nx::eval(y);
  }
}
void BM_qmm_w4g64_m1_4096(benchmark::State& state) {
  quantized_matmul_bench(state, 1);
}
void BM_qmm_w4g64_m256_4096(benchmark::State& state) {
  quantized_matmul_bench(state, 256);
}

// A mixture-of-experts decode step's expert product: one token's 8 experts of 64, each a
// Linear weight [768, 2048] (stacked [E, N, K], passed through swapaxes as the layers do).
void BM_gather_mm_moe_e64_top8(benchmark::State& state) {
  auto w = random_f32({64, 768, 2048});
  auto x = random_f32({1, 1, 2048});
  auto rhs = nx::astype(nx::arange(0, 56, 7), nx::uint32);
  auto lhs = nx::zeros({8}, nx::uint32);
  nx::eval({w, x, rhs, lhs});
  auto wt = nx::swapaxes(w, 1, 2);
  for (auto _ : state) {
    auto y = nx::gather_mm(x, wt, lhs, rhs, false);
    nx::eval(y);
  }
}

BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_add)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_exp)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sum)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sum_axis0_4096x1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rms_norm_4096x1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_layer_norm_4096x1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_softmax_4096x1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cross_entropy_512x32000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rope_1x32x1024x128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_chain_10k)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_qmm_w4g64_m1_4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_qmm_w4g64_m256_4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gather_mm_moe_e64_top8)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
