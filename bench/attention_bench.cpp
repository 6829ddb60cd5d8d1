// nuvec CPU benchmark for scaled-dot-product attention (issue 12): the fused CPU kernel (the
// route fast::scaled_dot_product_attention takes on the CPU) against the same attention
// composed of ordinary ops (the fallback graph's ops: matmul, where, softmax, matmul), on a
// prefill shape (B 1, H 8, L 1024, D 64, causal and not) and a decode shape (B 1, Hq 32,
// Hkv 8, Lq 1, Lk 4096, D 128), float32 and bfloat16. bench/attention_compare.py runs it
// beside NumPy and prints the ratios and the decode's memory floor.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

namespace {

nx::array random_of(nx::Shape shape, nx::Dtype dt) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(n);
  uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  return nx::astype(nx::array(v.begin(), shape, nx::float32), dt);
}

struct Shape4 {
  int b, hq, hkv, lq, lk, d;
};

// The composition the fallback graph builds (src/fast/attention.cpp's attention_graph):
// scaled q times kᵀ per key head group, the causal mask by where(), a float32 softmax, times v.
nx::array composed(const nx::array& q, const nx::array& k, const nx::array& v, float scale, bool causal) {
  const int b = q.shape(0), hq = q.shape(1), lq = q.shape(2), d = q.shape(3);
  const int hkv = k.shape(1), lk = k.shape(2);
  const int rep = hq / hkv;
  nx::array qs = nx::multiply(q, nx::array(scale, q.dtype()));
  nx::array kk = k, vv = v;
  if (rep > 1) {
    qs = nx::reshape(qs, {b, hkv, rep, lq, d});
    kk = nx::expand_dims(k, 2);
    vv = nx::expand_dims(v, 2);
  }
  nx::array s = nx::matmul(qs, nx::swapaxes(kk, -1, -2));
  if (causal) {
    nx::array qi = nx::expand_dims(nx::arange(lk - lq, lk, 1), 1);
    nx::array ki = nx::expand_dims(nx::arange(0, lk, 1), 0);
    s = nx::where(nx::greater_equal(qi, ki), s, nx::array(-std::numeric_limits<float>::max(), q.dtype()));
  }
  nx::array p = nx::astype(nx::softmax(nx::astype(s, nx::float32), -1), q.dtype());
  nx::array out = nx::matmul(p, vv);
  return nx::reshape(out, {b, hq, lq, v.shape(3)});
}

template <bool Fused>
void run(benchmark::State& state, Shape4 s, bool causal, nx::Dtype dt) {
  auto q = random_of({s.b, s.hq, s.lq, s.d}, dt);
  auto k = random_of({s.b, s.hkv, s.lk, s.d}, dt);
  auto v = random_of({s.b, s.hkv, s.lk, s.d}, dt);
  nx::eval(q, k, v);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  for (auto _ : state) {
    nx::array out = Fused ? nx::fast::scaled_dot_product_attention(q, k, v, scale, causal ? "causal" : "")
                          : composed(q, k, v, scale, causal);
    nx::eval(out);
  }
  // Multiply-adds of q kᵀ and p v (all of them: the causal kernel skips about half).
  const double flops = 4.0 * s.b * s.hq * s.lq * s.lk * s.d;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(k.nbytes() + v.nbytes()));
}

constexpr Shape4 kPrefill{1, 8, 8, 1024, 1024, 64};
constexpr Shape4 kDecode{1, 32, 8, 1, 4096, 128};

void BM_attention_prefill_fused(benchmark::State& st) { run<true>(st, kPrefill, false, nx::float32); }
void BM_attention_prefill_composed(benchmark::State& st) { run<false>(st, kPrefill, false, nx::float32); }
void BM_attention_prefill_causal_fused(benchmark::State& st) { run<true>(st, kPrefill, true, nx::float32); }
void BM_attention_prefill_causal_composed(benchmark::State& st) { run<false>(st, kPrefill, true, nx::float32); }
void BM_attention_prefill_bf16_fused(benchmark::State& st) { run<true>(st, kPrefill, false, nx::bfloat16); }
void BM_attention_decode_fused(benchmark::State& st) { run<true>(st, kDecode, false, nx::float32); }
void BM_attention_decode_composed(benchmark::State& st) { run<false>(st, kDecode, false, nx::float32); }
void BM_attention_decode_bf16_fused(benchmark::State& st) { run<true>(st, kDecode, false, nx::bfloat16); }

} // namespace

BENCHMARK(BM_attention_prefill_fused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_prefill_composed)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_prefill_causal_fused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_prefill_causal_composed)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_prefill_bf16_fused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_decode_fused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_decode_composed)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_decode_bf16_fused)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
