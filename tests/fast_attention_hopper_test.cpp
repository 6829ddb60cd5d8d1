// The Hopper flash-attention forward (src/backend/cuda/fast/attention_hopper.cu: TMA copies,
// a producer and two consumer warpgroups, wgmma for Q Kᵀ and P V): ScaledDotProductAttention
// recorded directly on the GPU with params.passes = 0 and params.hopper = true, against
// fast::attention_graph evaluated on the CPU on float64 casts of the same inputs. float16 and
// bfloat16; D = Dv 64, 128, 256 (the kernel's three shapes: 128-key tiles in 3 or 2 stages,
// 64-key tiles); Lq 1, 17, 130, 1000 (partial query tiles, a consumer warpgroup with no valid
// row), Lk 5, 33, 200, 1000, 4109 (partial key tiles, more tiles than stages so the ring
// wraps); query heads per key head 1, 2, 4, 8; causal with windows and sinks; q, k and v read
// in place as slices of sequence-major buffers (the tensor maps' strides). Calls outside the
// kernel's coverage (array masks, causal rows with no key) must give the same answers
// through the mma.sync kernel it hands them to. On a GPU other than Hopper the launcher runs
// the mma.sync kernel throughout (the cases then check that hand-over). The planner's choice
// is host arithmetic, checked without a GPU. Skipped without a GPU otherwise.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "attention_cases.h"
#include "fast/attention.h"
#include "fast/attention_plan.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
using namespace nuvec::testing::attn;

namespace {

const Device kGpu(Device::gpu);

fast::AttentionParams hopper_params(const Case& c) {
  fast::AttentionParams p = params_of(c, standard_scale(c));
  p.hopper = true;
  return p;
}

// Both schedules of the kernel's key loop (HopperConsumer::run_plain and run_pipelined, chosen
// per call by NUVEC_ATTENTION_HOPPER_PIPELINE).
const char* const kSchedules[] = {"0", "1"};

void check(const Case& c, Dtype dt) {
  const Inputs in = make_inputs(c, dt);
  for (const char* pipeline : kSchedules) {
    SCOPED_TRACE(c.name(dt) + " pipeline " + pipeline);
    ScopedEnv schedule("NUVEC_ATTENTION_HOPPER_PIPELINE", pipeline);
    check_kernel(c, dt, in, hopper_params(c), kGpu, tol_of(dt), 2e-5);
  }
}

bool on_hopper() {
  const auto& info = gpu::device_info(0);
  auto it = info.find("compute_capability_major");
  return it != info.end() && std::get<size_t>(it->second) == 9;
}

fast::RouteKey tiled_key(int lq, int lk, int d) {
  fast::RouteKey k;
  k.gpu = true;
  k.hopper = true;
  k.sm_count = 132;
  k.b = 2;
  k.hq = 8;
  k.hkv = 2;
  k.lq = lq;
  k.lk = lk;
  k.d = k.dv = d;
  k.dtype = bfloat16;
  return k;
}

} // namespace

// The planner (host arithmetic): the Hopper kernel for tiled calls it covers on a Hopper GPU
// with the kernel enabled, the mma.sync kernel otherwise.
TEST(FastAttentionHopper, PlannerChoosesItWhereItCovers) {
  fast::RouteKey k = tiled_key(1000, 1000, 128);
  EXPECT_EQ(fast::plan(k).route, fast::AttentionRoute::Tiled);
  EXPECT_TRUE(fast::plan(k).warp_specialized);
  for (int d : {64, 256}) {
    k.d = k.dv = d;
    EXPECT_TRUE(fast::plan(k).warp_specialized) << d;
  }
  k.d = k.dv = 96; // the mma.sync kernel's head sizes beyond the Hopper kernel's
  EXPECT_EQ(fast::plan(k).route, fast::AttentionRoute::Tiled);
  EXPECT_FALSE(fast::plan(k).warp_specialized);
  k.d = k.dv = 128;
  k.causal = true;
  k.window = 100;
  k.has_sinks = true;
  EXPECT_TRUE(fast::plan(k).warp_specialized);
  k.lq = 1001; // causal rows that see no key: the no-visible-key rule is the mma.sync kernel's
  EXPECT_EQ(fast::plan(k).route, fast::AttentionRoute::Composed);
  k.causal = false;
  k.window = 0;
  EXPECT_TRUE(fast::plan(k).warp_specialized);
  k.has_mask = true;
  EXPECT_EQ(fast::plan(k).route, fast::AttentionRoute::Tiled);
  EXPECT_FALSE(fast::plan(k).warp_specialized);
  k.has_mask = false;
  k.dtype = float32;
  EXPECT_FALSE(fast::plan(k).warp_specialized);
  k.dtype = float16;
  EXPECT_TRUE(fast::plan(k).warp_specialized);
  k.hopper = false; // another GPU, or the kernel not enabled
  EXPECT_FALSE(fast::plan(k).warp_specialized);
  k.hopper = true;
  k.lq = 8; // the vector (decode) route
  EXPECT_EQ(fast::plan(k).route, fast::AttentionRoute::Vector);
  EXPECT_FALSE(fast::plan(k).warp_specialized);
  k.gpu = false; // the CPU loop
  k.lq = 1000;
  EXPECT_FALSE(fast::plan(k).warp_specialized);
}

// Small and odd shapes with every variant (masks and causal rows with no key go to the
// mma.sync kernel): partial query and key tiles, GQA 1, 2, 4, 8, the three head sizes.
TEST(FastAttentionHopper, MatchesTheFallbackInFloat64) {
  NUVEC_REQUIRE_GPU();
  std::printf("[attention hopper] compute capability 9: %s\n", on_hopper() ? "yes (the Hopper kernel runs)" : "no");
  const std::vector<Case> shapes = {
      {2, 4, 4, 17, 7, 64, 64},      {1, 8, 1, 17, 4109, 128, 128}, {2, 8, 2, 130, 200, 64, 64},
      {2, 4, 4, 3, 5, 128, 128},     {1, 8, 8, 17, 200, 128, 128},  {1, 4, 4, 17, 33, 256, 256},
      {1, 4, 2, 130, 300, 256, 256}, {2, 2, 1, 1, 5, 128, 128},
  };
  for (Dtype dt : {float16, bfloat16}) {
    for (const Case& s : shapes) {
      for (const Case& c : variants(s)) check(c, dt);
    }
  }
}

// Long queries: many query tiles, causal tiles skipped and diagonal tiles masked, windows that
// start rows inside a tile, more key tiles than stages.
TEST(FastAttentionHopper, LongQueries) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16}) {
    check({1, 2, 1, 1000, 4109, 64, 64, true}, dt);
    check({1, 2, 2, 1000, 1000, 128, 128, true}, dt);
    check({1, 2, 2, 1000, 1000, 128, 128}, dt);
    check({1, 8, 2, 1000, 1000, 64, 64, true, 100, Mask::none, true}, dt);
    check({1, 2, 2, 1000, 1000, 256, 256, true, 40}, dt);
    check({2, 4, 1, 1000, 1003, 256, 256, true, 0, Mask::none, true}, dt);
    check({1, 4, 4, 257, 1000, 128, 128, true, 129}, dt);
  }
}

// q, k and v read in place as slices of [B, L, H, D] buffers (the tensor maps' strides), with
// GQA, causal and sinks.
TEST(FastAttentionHopper, StridedInputs) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16}) {
    for (Case c : {Case{2, 8, 2, 17, 300, 64, 64}, Case{1, 4, 1, 130, 4109, 128, 128}, Case{2, 4, 4, 140, 165, 256, 256}}) {
      c.q_layout = c.k_layout = c.v_layout = Layout::sequence_major;
      for (const Case& v : variants(c)) check(v, dt);
    }
  }
}

// The same inputs twice give the same bits (a race between the warpgroups, or a stage reused
// before its consumers released it, would show as a moving result).
TEST(FastAttentionHopper, Deterministic) {
  NUVEC_REQUIRE_GPU();
  for (int d : {64, 128, 256}) {
    const Case c{2, 8, 2, 333, 1517, d, d, true, 0, Mask::none, true};
    const Inputs in = make_inputs(c, bfloat16);
    for (const char* pipeline : kSchedules) {
      SCOPED_TRACE(std::string("D ") + std::to_string(d) + " pipeline " + pipeline);
      ScopedEnv schedule("NUVEC_ATTENTION_HOPPER_PIPELINE", pipeline);
      const Outputs a = record_attention(in, hopper_params(c), kGpu);
      const Outputs b = record_attention(in, hopper_params(c), kGpu);
      expect_allclose(a.out, b.out, 0.0, 0.0);
      expect_allclose(a.lse, b.lse, 0.0, 0.0);
    }
  }
}

// Throughput of B 4, H 32, L 4096, D 128 bfloat16 beside the mma.sync kernel in the same run (a
// report for the lead; bench/gpu_compare.py sets it beside cuDNN; no assertion on time). The
// two kernels' outputs agree to bfloat16 rounding.
TEST(FastAttentionHopper, ThroughputB4H32L4096D128) {
  NUVEC_REQUIRE_GPU();
  const int b = 4, h = 32, l = 4096, d = 128;
  auto draw = [&] { return random::normal({b, h, l, d}, bfloat16, std::nullopt, std::nullopt, std::nullopt, kGpu); };
  const Inputs in{draw(), draw(), draw(), std::nullopt, std::nullopt};
  eval({in.q, in.k, in.v});
  for (bool causal : {false, true}) {
    // The mma.sync kernel, then the Hopper kernel's plain and pipelined schedules.
    struct Kernel {
      const char* name;
      bool hopper;
      const char* pipeline;
    };
    for (const Kernel& k : {Kernel{"tiled", false, "0"}, Kernel{"hopper plain", true, "0"}, Kernel{"hopper pipelined", true, "1"}}) {
      const char* kernel = k.name;
      fast::AttentionParams p;
      p.scale = 1.0f / std::sqrt(static_cast<float>(d));
      p.causal = causal;
      p.hopper = k.hopper;
      ScopedEnv schedule("NUVEC_ATTENTION_HOPPER_PIPELINE", k.pipeline);
      for (int i = 0; i < 2; ++i) record_attention(in, p, kGpu); // warm-up
      constexpr int kIters = 10;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kIters; ++i) record_attention(in, p, kGpu);
      const auto t1 = std::chrono::steady_clock::now();
      const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / kIters;
      const double flops = 4.0 * b * h * double(l) * l * d * (causal ? 0.5 : 1.0);
      std::printf("[attention %s bf16 B4 H32 L4096 D128%s] %.3f ms, %.1f TFLOP/s\n", kernel, causal ? " causal" : "", ms,
                  flops / (ms * 1e9));
    }
    fast::AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.causal = causal;
    const Outputs tiled = record_attention(in, p, kGpu);
    p.hopper = true;
    const Outputs hop = record_attention(in, p, kGpu);
    expect_allclose(hop.out, tiled.out, 2e-2, 2e-2);
    expect_allclose(hop.lse, tiled.lse, 1e-4, 1e-4);
  }
}
