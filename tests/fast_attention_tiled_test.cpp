// The CUDA tiled flash-attention forward (src/backend/cuda/fast/attention_tiled.cu):
// ScaledDotProductAttention recorded directly on the GPU with params.passes = 0 (the planner
// is not asked), against fast::attention_graph (the op's meaning) evaluated on the CPU on
// float64 casts of the same inputs: float16 and bfloat16; D = Dv 64, 80, 96, 128, 256;
// Lq 1, 3, 17, 130, 1000; Lk 1, 7, 200, 1000, 4109 (partial query and key tiles); query heads
// per key head 1, 4, 8; no mask, causal (with Lq > Lk: rows that see no key), windows, bool
// masks with rows all false, additive masks broadcast from [1, 1, Lq, Lk] (a row all −inf:
// NaN out) and [B, 1, 1, Lk], sinks; the lse output; q, k, v read in place through strides
// (slices along L of [B, L, H, D] buffers). Skipped without a GPU. One case prints the
// throughput of B 4, H 32, L 4096, D 128 bfloat16 (causal and not; a report for the lead, no
// assertion). Cases, inputs and the reference: tests/attention_cases.h.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "attention_cases.h"
#include "fast/attention.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
using namespace nuvec::testing::attn;

namespace {

const Device kGpu(Device::gpu);

// out: the kernel rounds P to the dtype before P V and the result once more (tol_of); lse:
// float32 arithmetic throughout.
void check(const Case& c, Dtype dt) {
  SCOPED_TRACE(c.name(dt));
  check_kernel(c, dt, make_inputs(c, dt), params_of(c, standard_scale(c)), kGpu, tol_of(dt), 2e-5);
}

} // namespace

// Small and odd shapes, every variant: Lq 1, 3, 17 (one partial query tile), Lk 1, 7 (one
// partial key tile) and 4109 (64 full tiles and a partial one); GQA 1, 4, 8.
TEST(FastAttentionTiled, MatchesTheFallbackInFloat64) {
  NUVEC_REQUIRE_GPU();
  const std::vector<Case> shapes = {
      {2, 4, 4, 17, 7, 64, 64},     {1, 8, 1, 17, 4109, 128, 128}, {2, 8, 2, 3, 1, 64, 64},
      {1, 4, 1, 1, 4109, 64, 64},   {2, 4, 4, 3, 7, 128, 128},     {1, 8, 8, 17, 200, 128, 128},
      {1, 4, 4, 17, 33, 256, 256},  {2, 4, 2, 130, 200, 80, 80},   {1, 4, 4, 130, 200, 96, 96},
  };
  for (Dtype dt : {float16, bfloat16}) {
    for (const Case& s : shapes) {
      for (const Case& c : variants(s)) check(c, dt);
    }
  }
}

// Long queries (many query tiles; under causal, tiles that skip keys, diagonal tiles, and
// with Lq > Lk whole tiles of rows that see no key).
TEST(FastAttentionTiled, LongQueries) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16}) {
    check({1, 2, 1, 1000, 4109, 64, 64, true}, dt);
    check({1, 2, 2, 1000, 1000, 128, 128, true}, dt);
    check({1, 4, 1, 1000, 7, 64, 64, true, 5}, dt);
    check({1, 2, 2, 1000, 1000, 128, 128}, dt);
    check({1, 8, 2, 1000, 1000, 64, 64, true, 100, Mask::none, true}, dt);
    check({1, 4, 4, 1000, 1, 128, 128, true}, dt);
    check({1, 2, 2, 1000, 300, 256, 256, true, 40}, dt);
  }
  check({1, 4, 4, 1000, 17, 128, 128, false, 0, Mask::additive_batch}, bfloat16);
  check({1, 2, 1, 1000, 1000, 128, 128, false, 0, Mask::boolean, true}, float16);
  check({2, 2, 2, 1000, 1000, 64, 64, false, 0, Mask::additive_rows_inf}, bfloat16);
}

// q, k and v read in place as slices of [B, L, H, D] buffers, with GQA and masks.
TEST(FastAttentionTiled, StridedInputs) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16}) {
    for (Case c : {Case{2, 8, 2, 17, 300, 64, 64}, Case{1, 4, 1, 3, 4109, 128, 128}, Case{2, 4, 4, 140, 65, 128, 128}}) {
      c.q_layout = c.k_layout = c.v_layout = Layout::sequence_major;
      for (const Case& v : variants(c)) check(v, dt);
    }
  }
}

// The same inputs twice give the same bits (a race between the block's warps would show as
// a moving result), on a shape with partial tiles on both axes.
TEST(FastAttentionTiled, Deterministic) {
  NUVEC_REQUIRE_GPU();
  const Case c{2, 8, 2, 333, 517, 128, 128, true, 0, Mask::none, true};
  const Inputs in = make_inputs(c, bfloat16);
  const Outputs a = record_attention(in, params_of(c, standard_scale(c)), kGpu);
  const Outputs b = record_attention(in, params_of(c, standard_scale(c)), kGpu);
  expect_allclose(a.out, b.out, 0.0, 0.0);
  expect_allclose(a.lse, b.lse, 0.0, 0.0);
}

// Throughput of the prefill shape B 4, H 32, L 4096, D 128 in bfloat16 (a report for the lead:
// FlashAttention-2 reaches about 330-350 TFLOP/s on H100-class GPUs; no assertion). Inputs
// drawn on the GPU.
TEST(FastAttentionTiled, ThroughputB4H32L4096D128) {
  NUVEC_REQUIRE_GPU();
  const int b = 4, h = 32, l = 4096, d = 128;
  auto draw = [&] { return random::normal({b, h, l, d}, bfloat16, std::nullopt, std::nullopt, std::nullopt, kGpu); };
  const Inputs in{draw(), draw(), draw(), std::nullopt, std::nullopt};
  eval({in.q, in.k, in.v});
  for (bool causal : {false, true}) {
    fast::AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.causal = causal;
    for (int i = 0; i < 2; ++i) record_attention(in, p, kGpu); // warm-up
    constexpr int kIters = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kIters; ++i) record_attention(in, p, kGpu);
    const auto t1 = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / kIters;
    const double flops = 4.0 * b * h * double(l) * l * d * (causal ? 0.5 : 1.0);
    std::printf("[attention tiled bf16 B4 H32 L4096 D128%s] %.3f ms, %.1f TFLOP/s\n", causal ? " causal" : "", ms,
                flops / (ms * 1e9));
    array lse = record_attention(in, p, kGpu).lse;
    EXPECT_TRUE(all(isfinite(lse, kGpu), kGpu).item<bool>());
  }
}
