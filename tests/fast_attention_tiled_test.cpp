// The CUDA tiled flash-attention forward (src/backend/cuda/fast/attention_tiled.cu):
// ScaledDotProductAttention recorded directly on the GPU with params.passes = 0 (the planner
// is not asked), against fast::attention_graph (the op's meaning) evaluated on the CPU on
// float64 casts of the same inputs: float16 and bfloat16; D = Dv 64, 80, 96, 128, 256;
// Lq 1, 3, 17, 130, 1000; Lk 1, 7, 200, 1000, 4109 (partial query and key tiles); query heads
// per key head 1, 4, 8; no mask, causal (with Lq > Lk: rows that see no key), windows, bool
// masks with a row all false, additive masks broadcast from [1, 1, Lq, Lk] (a row all −inf:
// NaN out) and [B, 1, 1, Lk], sinks; the lse output; q, k, v read in place through strides
// (slices along L of [B, L, H, D] buffers). Skipped without a GPU. One case prints the
// throughput of B 4, H 32, L 4096, D 128 bfloat16 (causal and not; a report for the lead, no
// assertion).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fast/attention.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

#define NUVEC_REQUIRE_GPU() \
  if (!gpu::is_available()) GTEST_SKIP() << "no GPU"

enum class Mask { none, boolean, add_rows, add_batch };

struct Case {
  int b, hq, hkv, lq, lk, d;
  bool causal = false;
  int window = 0;
  Mask mask = Mask::none;
  bool sinks = false;
  bool strided = false;

  std::string name(Dtype dt) const {
    static const char* masks[] = {"", " bool", " add[1,1,Lq,Lk]", " add[B,1,1,Lk]"};
    return std::string(dtype_name(dt)) + " B" + std::to_string(b) + " Hq" + std::to_string(hq) + " Hkv" +
        std::to_string(hkv) + " Lq" + std::to_string(lq) + " Lk" + std::to_string(lk) + " D" + std::to_string(d) +
        (causal ? " causal" : "") + (window ? " window " + std::to_string(window) : std::string()) +
        masks[static_cast<int>(mask)] + (sinks ? " sinks" : "") + (strided ? " strided" : "");
  }
};

// A [b, h, l, d] input: contiguous, or a slice along L (rows 2 .. l + 1) of a [b, l + 4, h, d]
// buffer seen as [b, h, l, d]: strides (l + 4) h d, d, h d, 1, all multiples of 8 elements and
// 16-byte aligned, which the kernel reads in place.
array input(int b, int h, int l, int d, Dtype dt, bool strided) {
  if (!strided) return astype(randn({b, h, l, d}), dt);
  array buf = astype(randn({b, l + 4, h, d}), dt);
  return swapaxes(slice(buf, {0, 2, 0, 0}, {b, l + 2, h, d}), 1, 2);
}

// {q, k, v[, mask][, sinks]}, evaluated; the mask broadcast to [B, Hq, Lq, Lk] as the op
// passes it (stride 0 along the broadcast axes).
std::vector<array> inputs_of(const Case& c, Dtype dt) {
  std::vector<array> in = {
      input(c.b, c.hq, c.lq, c.d, dt, c.strided), input(c.b, c.hkv, c.lk, c.d, dt, c.strided),
      input(c.b, c.hkv, c.lk, c.d, dt, c.strided)};
  const Shape full{c.b, c.hq, c.lq, c.lk};
  if (c.mask == Mask::boolean) {
    // About 60% visible; row Lq / 2 of batch 0, head 0 sees nothing.
    array keep = less(uniform(full, 0.0, 1.0), array(0.6, float64));
    array not_row = not_equal(reshape(arange(0, c.lq, 1), {1, 1, c.lq, 1}), array(c.lq / 2, int32));
    array not_bh0 = reshape(greater(arange(0, c.b * c.hq, 1), array(0, int32)), {c.b, c.hq, 1, 1});
    in.push_back(logical_and(keep, logical_or(not_row, not_bh0)));
  } else if (c.mask == Mask::add_rows) {
    // Logits of scale 2 added; the last row all −inf (NaN out, −inf lse; sinks: 0, sink).
    array m = astype(multiply(randn({1, 1, c.lq, c.lk}), array(2.0, float64)), dt);
    if (c.lq > 1) {
      array last = equal(reshape(arange(0, c.lq, 1), {1, 1, c.lq, 1}), array(c.lq - 1, int32));
      m = where(last, array(-std::numeric_limits<float>::infinity(), dt), m);
    }
    in.push_back(broadcast_to(m, full));
  } else if (c.mask == Mask::add_batch) {
    in.push_back(broadcast_to(astype(uniform({c.b, 1, 1, c.lk}, -4.0, 1.0), dt), full));
  }
  if (c.sinks) in.push_back(astype(multiply(randn({c.hq}), array(2.0, float64)), dt));
  eval(in);
  return in;
}

fast::AttentionParams params_of(const Case& c) {
  fast::AttentionParams p;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  p.causal = c.causal;
  p.window = c.window;
  p.has_mask = c.mask != Mask::none;
  p.has_sinks = c.sinks;
  p.passes = 0; // the tiled kernel
  return p;
}

// The tiled kernel: the node recorded on the GPU's stream, evaluated: {out, lse}.
std::vector<array> tiled(const std::vector<array>& in, const fast::AttentionParams& p) {
  const Shape& q = in[0].shape();
  auto outs = array::make_arrays(
      {{q[0], q[1], q[2], in[2].shape(3)}, {q[0], q[1], q[2]}}, {in[0].dtype(), float32},
      std::make_shared<ScaledDotProductAttention>(default_stream(Device(Device::gpu)), p), in);
  eval(outs);
  return outs;
}

// The meaning: the fallback graph on the CPU on float64 casts (a bool mask stays bool).
std::vector<array> reference(const std::vector<array>& in, const fast::AttentionParams& p) {
  std::vector<array> in64;
  for (const array& a : in) in64.push_back(a.dtype() == bool_ ? a : astype(a, float64, Device(Device::cpu)));
  auto outs = fast::attention_graph(in64, p, std::nullopt, default_stream(Device(Device::cpu)));
  eval(outs);
  return outs;
}

// out: the kernel rounds P to the dtype before P V and the result once more (float16 2^-11,
// bfloat16 2^-8 relative), on values of order 1. lse: float32 arithmetic throughout.
double out_tol(Dtype dt) {
  return dt == float16 ? 2e-3 : 1.6e-2;
}

void check(const Case& c, Dtype dt) {
  SCOPED_TRACE(c.name(dt));
  const auto in = inputs_of(c, dt);
  const auto p = params_of(c);
  const auto got = tiled(in, p);
  const auto ref = reference(in, p);
  ASSERT_EQ(got[0].dtype(), dt);
  ASSERT_EQ(got[1].dtype(), float32);
  expect_allclose(got[0], ref[0], out_tol(dt), out_tol(dt));
  // A row that sees no key has lse = lowest + log Lk with the dtype's lowest (the float64
  // graph's is float64's lowest).
  std::vector<double> lse = to_vector(ref[1]);
  const float lowest = static_cast<float>(finfo(dt).min);
  for (double& x : lse) {
    if (std::isfinite(x) && x < -1e300) x = static_cast<double>(lowest + std::log(static_cast<float>(c.lk)));
  }
  expect_close(got[1], ref[1].shape(), lse, 2e-5, 2e-4);
}

// Every mask variant of a shape (causal ones only where asked: they need Lq <= Lk to be
// ordinary, and show the no-key rows otherwise).
std::vector<Case> variants(Case s) {
  std::vector<Case> v;
  auto with = [&](bool causal, int window, Mask m, bool sinks) {
    Case c = s;
    c.causal = causal;
    c.window = window;
    c.mask = m;
    c.sinks = sinks;
    v.push_back(c);
  };
  with(false, 0, Mask::none, false);
  with(true, 0, Mask::none, false);
  with(true, 5, Mask::none, false);
  with(true, 70, Mask::none, true);
  with(false, 0, Mask::boolean, false);
  with(false, 0, Mask::add_rows, false);
  with(false, 0, Mask::add_batch, false);
  with(false, 0, Mask::none, true);
  with(true, 0, Mask::none, true);
  with(false, 0, Mask::boolean, true);
  with(false, 0, Mask::add_rows, true);
  return v;
}

} // namespace

// Small and odd shapes, every variant: Lq 1, 3, 17 (one partial query tile), Lk 1, 7 (one
// partial key tile) and 4109 (64 full tiles and a partial one); GQA 1, 4, 8.
TEST(FastAttentionTiled, MatchesTheFallbackInFloat64) {
  NUVEC_REQUIRE_GPU();
  const std::vector<Case> shapes = {
      {2, 4, 4, 17, 7, 64},   {1, 8, 1, 17, 4109, 128}, {2, 8, 2, 3, 1, 64},  {1, 4, 1, 1, 4109, 64},
      {2, 4, 4, 3, 7, 128},   {1, 8, 8, 17, 200, 128},  {1, 4, 4, 17, 33, 256}, {2, 4, 2, 130, 200, 80},
      {1, 4, 4, 130, 200, 96},
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
    check({1, 2, 1, 1000, 4109, 64, true}, dt);
    check({1, 2, 2, 1000, 1000, 128, true}, dt);
    check({1, 4, 1, 1000, 7, 64, true, 5}, dt);
    check({1, 2, 2, 1000, 1000, 128}, dt);
    check({1, 8, 2, 1000, 1000, 64, true, 100, Mask::none, true}, dt);
    check({1, 4, 4, 1000, 1, 128, true}, dt);
    check({1, 2, 2, 1000, 300, 256, true, 40}, dt);
  }
  check({1, 4, 4, 1000, 17, 128, false, 0, Mask::add_batch}, bfloat16);
  check({1, 2, 1, 1000, 1000, 128, false, 0, Mask::boolean, true}, float16);
  check({2, 2, 2, 1000, 1000, 64, false, 0, Mask::add_rows}, bfloat16);
}

// q, k and v read in place as slices of [B, L, H, D] buffers, with GQA and masks.
TEST(FastAttentionTiled, StridedInputs) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16}) {
    for (Case c : {Case{2, 8, 2, 17, 300, 64}, Case{1, 4, 1, 3, 4109, 128}, Case{2, 4, 4, 140, 65, 128}}) {
      c.strided = true;
      for (const Case& v : variants(c)) check(v, dt);
    }
  }
}

// The same inputs twice give the same bits (a race between the block's warps would show as
// a moving result), on a shape with partial tiles on both axes.
TEST(FastAttentionTiled, Deterministic) {
  NUVEC_REQUIRE_GPU();
  Case c{2, 8, 2, 333, 517, 128, true, 0, Mask::none, true};
  const auto in = inputs_of(c, bfloat16);
  const auto a = tiled(in, params_of(c));
  const auto b = tiled(in, params_of(c));
  for (int o = 0; o < 2; ++o) expect_allclose(a[o], b[o], 0.0, 0.0);
}

// Throughput of the prefill shape B 4, H 32, L 4096, D 128 in bfloat16 (a report for the lead:
// FlashAttention-2 reaches about 330-350 TFLOP/s on H100-class GPUs; no assertion). Inputs
// drawn on the GPU.
TEST(FastAttentionTiled, ThroughputB4H32L4096D128) {
  NUVEC_REQUIRE_GPU();
  const Device gpu(Device::gpu);
  const int b = 4, h = 32, l = 4096, d = 128;
  std::vector<array> in;
  for (int i = 0; i < 3; ++i) in.push_back(random::normal({b, h, l, d}, bfloat16, std::nullopt, std::nullopt, std::nullopt, gpu));
  eval(in);
  for (bool causal : {false, true}) {
    fast::AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.causal = causal;
    for (int i = 0; i < 2; ++i) tiled(in, p); // warm-up
    constexpr int kIters = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kIters; ++i) tiled(in, p);
    const auto t1 = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / kIters;
    const double flops = 4.0 * b * h * double(l) * l * d * (causal ? 0.5 : 1.0);
    std::printf("[attention tiled bf16 B4 H32 L4096 D128%s] %.3f ms, %.1f TFLOP/s\n", causal ? " causal" : "", ms,
                flops / (ms * 1e9));
    const auto out = tiled(in, p);
    array lse = out[1];
    EXPECT_TRUE(all(isfinite(lse, gpu), gpu).item<bool>());
  }
}
