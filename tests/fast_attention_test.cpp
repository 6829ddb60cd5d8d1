// scaled_dot_product_attention, plan_attention, paged_attention and paged_write through the
// public API (include/nuvec/fast.h): every route against the fallback graph evaluated in
// float64 on the CPU (so the GPU suite compares GPU against CPU), the planner's decisions,
// the composed route in query blocks under a memory cap, the rules (central differences,
// the fused path's gradients against the float64 graph's, vmap against a loop), the paged
// ops against contiguous attention, and bad input. Kernel-level tests of each route:
// tests/fast_attention_{cpu,vector,tiled,backward}_test.cpp, tests/fast_paged_attention_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/attention.h"
#include "fast/attention_plan.h"
#include "nuvec/fast.h"
#include "nuvec/memory.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
using fast::AttentionOptions;
using fast::AttentionRoute;

namespace {

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-10 : dt == float32 ? 2e-4 : dt == float16 ? 4e-3 : 3e-2;
}

bool default_is_gpu() {
  return default_device() == Device::gpu;
}

// One attention configuration.
struct Config {
  int b = 2, hq = 4, hkv = 2, lq = 3, lk = 7, d = 64, dv = 64;
  std::string mode;   // "", "causal", "array"
  int mask = 0;       // 0 none, 1 bool [B,Hq,Lq,Lk] with a fully-false row, 2 additive [1,1,Lq,Lk], 3 additive [B,1,1,Lk]
  bool sinks = false;
  int window = 0;

  std::string name() const {
    return "b" + std::to_string(b) + " hq" + std::to_string(hq) + " hkv" + std::to_string(hkv) + " lq" +
        std::to_string(lq) + " lk" + std::to_string(lk) + " d" + std::to_string(d) + " dv" + std::to_string(dv) +
        " mode '" + mode + "' mask" + std::to_string(mask) + (sinks ? " sinks" : "") + " window" +
        std::to_string(window);
  }
};

struct Inputs {
  array q, k, v;
  std::optional<array> mask, sinks;
};

Inputs make_inputs(const Config& c, Dtype dt) {
  Inputs in{
      astype(randn({c.b, c.hq, c.lq, c.d}), dt), astype(randn({c.b, c.hkv, c.lk, c.d}), dt),
      astype(randn({c.b, c.hkv, c.lk, c.dv}), dt), std::nullopt, std::nullopt};
  if (c.mask == 1) {
    array m = greater(uniform({c.b, c.hq, c.lq, c.lk}, 0, 1), array(0.3));
    // Row 0 of (batch 0, head 0) sees nothing: it attends uniformly to every key.
    array row = zeros({1, 1, 1, c.lk}, bool_);
    m = slice_update(m, row, {0, 0, 0, 0}, {1, 1, 1, c.lk});
    in.mask = m;
  } else if (c.mask == 2) {
    in.mask = astype(uniform({1, 1, c.lq, c.lk}, -2, 1), dt);
  } else if (c.mask == 3) {
    in.mask = astype(uniform({c.b, 1, 1, c.lk}, -2, 1), dt);
  }
  if (c.sinks) in.sinks = astype(randn({c.hq}), dt);
  return in;
}

AttentionOptions options_of(const Config& c, const Inputs& in) {
  AttentionOptions o;
  o.mask_mode = c.mode;
  o.mask = in.mask;
  o.sinks = in.sinks;
  if (c.window > 0) o.window = c.window;
  return o;
}

// The fallback graph in float64 on the CPU: the meaning.
array reference(const Config& c, const Inputs& in, float scale) {
  const Device cpu = Device::cpu;
  fast::AttentionParams p;
  p.scale = scale;
  p.causal = c.mode == "causal";
  p.window = c.window;
  p.has_mask = in.mask.has_value();
  p.has_sinks = in.sinks.has_value();
  std::vector<array> xs{astype(in.q, float64, cpu), astype(in.k, float64, cpu), astype(in.v, float64, cpu)};
  if (in.mask) {
    array m = in.mask->dtype() == bool_ ? *in.mask : astype(*in.mask, float64, cpu);
    xs.push_back(broadcast_to(m, {c.b, c.hq, c.lq, c.lk}, cpu));
  }
  if (in.sinks) xs.push_back(astype(*in.sinks, float64, cpu));
  return fast::attention_graph(xs, p, std::nullopt, cpu)[0];
}

std::vector<Config> route_configs() {
  std::vector<Config> cs;
  for (int lq : {1, 3, 8, 17}) {
    for (int lk : {1, 7, 300}) {
      Config c;
      c.lq = lq;
      c.lk = lk;
      cs.push_back(c);
      Config causal = c;
      causal.mode = "causal";
      cs.push_back(causal);
    }
  }
  Config gqa8;
  gqa8.hq = 8;
  gqa8.hkv = 1;
  gqa8.lq = 5;
  gqa8.lk = 129;
  cs.push_back(gqa8);
  for (int mask : {1, 2, 3}) {
    Config m;
    m.lq = 9;
    m.lk = 33;
    m.mask = mask;
    cs.push_back(m);
  }
  Config sinks;
  sinks.lq = 4;
  sinks.lk = 50;
  sinks.sinks = true;
  sinks.mode = "causal";
  cs.push_back(sinks);
  Config window;
  window.lq = 20;
  window.lk = 40;
  window.mode = "causal";
  window.window = 6;
  cs.push_back(window);
  Config d128;
  d128.d = d128.dv = 128;
  d128.lq = 64;
  d128.lk = 100;
  d128.mode = "causal";
  cs.push_back(d128);
  Config dv;
  dv.d = 96;
  dv.dv = 64;
  dv.lq = 2;
  dv.lk = 65;
  cs.push_back(dv);
  return cs;
}

} // namespace

TEST(FastAttention, EveryRouteMatchesTheFloat64Graph) {
  const float scale = 0.37f;
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    for (const Config& c : route_configs()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.name());
      Inputs in = make_inputs(c, dt);
      array out = fast::scaled_dot_product_attention(in.q, in.k, in.v, scale, options_of(c, in));
      EXPECT_EQ(out.shape(), (Shape{c.b, c.hq, c.lq, c.dv}));
      EXPECT_EQ(out.dtype(), dt);
      expect_allclose(out, reference(c, in, scale), tol_of(dt), tol_of(dt));
    }
  }
}

TEST(FastAttention, MlxSignatureMeansTheSame) {
  Config c;
  c.lq = 5;
  c.lk = 11;
  c.mask = 1;
  Inputs in = make_inputs(c, float32);
  array a = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.5f, "", in.mask);
  array b = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.5f, "array", in.mask);
  expect_allclose(a, reference(c, in, 0.5f), tol_of(float32), tol_of(float32));
  expect_allclose(b, a, 0, 0);
  Config causal = c;
  causal.mask = 0;
  causal.mode = "causal";
  Inputs ic = make_inputs(causal, float32);
  array cz = fast::scaled_dot_product_attention(ic.q, ic.k, ic.v, 0.5f, "causal");
  expect_allclose(cz, reference(causal, ic, 0.5f), tol_of(float32), tol_of(float32));
  // Promotion: float16 q with float32 k, v runs in float32.
  array mixed = fast::scaled_dot_product_attention(astype(ic.q, float16), ic.k, ic.v, 0.5f, "causal");
  EXPECT_EQ(mixed.dtype(), float32);
}

TEST(FastAttention, PlannerPicksTheDocumentedRoute) {
  const Dtype bf = bfloat16;
  AttentionOptions none;
  AttentionOptions causal;
  causal.mask_mode = "causal";
  // The CPU: the fused loop for half and float32, the composition for float64.
  {
    StreamOrDevice cpu = Device::cpu;
    auto p = fast::plan_attention({1, 8, 100, 64}, {1, 2, 100, 64}, {1, 2, 100, 64}, float32, causal, cpu);
    EXPECT_EQ(p.route, AttentionRoute::Tiled);
    auto p64 = fast::plan_attention({1, 8, 100, 64}, {1, 2, 100, 64}, {1, 2, 100, 64}, float64, causal, cpu);
    EXPECT_EQ(p64.route, AttentionRoute::Composed);
    EXPECT_EQ(p64.query_rows, 100);
    EXPECT_FALSE(p64.capped);
    EXPECT_EQ(p64.max_intermediate_bytes, size_t(8) * 100 * 100 * 8);
    AttentionOptions capped = causal;
    capped.max_score_bytes = size_t(8) * 100 * 8 * 10 * fast::kComposedLiveScores; // 10 rows
    auto pc = fast::plan_attention({1, 8, 100, 64}, {1, 2, 100, 64}, {1, 2, 100, 64}, float64, capped, cpu);
    EXPECT_EQ(pc.route, AttentionRoute::Composed);
    EXPECT_EQ(pc.query_rows, 10);
    EXPECT_TRUE(pc.capped);
  }
  if (!gpu::is_available()) return;
  StreamOrDevice g = Device::gpu;
  // Decode: the vector kernels; a long context over few heads takes two passes.
  auto dec = fast::plan_attention({32, 32, 1, 128}, {32, 8, 8192, 128}, {32, 8, 8192, 128}, bf, none, g);
  EXPECT_EQ(dec.route, AttentionRoute::Vector);
  auto few = fast::plan_attention({1, 32, 1, 128}, {1, 8, 8192, 128}, {1, 8, 8192, 128}, bf, none, g);
  EXPECT_EQ(few.route, AttentionRoute::Vector);
  EXPECT_EQ(few.passes, 2);
  EXPECT_GT(few.key_blocks, 1);
  EXPECT_GT(few.scratch_bytes, 0u);
  // Prefill: the tiled kernel for bf16 D 128; float32 and D 80 compose.
  auto pre = fast::plan_attention({4, 32, 4096, 128}, {4, 32, 4096, 128}, {4, 32, 4096, 128}, bf, causal, g);
  EXPECT_EQ(pre.route, AttentionRoute::Tiled);
  auto f32 = fast::plan_attention({1, 4, 300, 128}, {1, 4, 300, 128}, {1, 4, 300, 128}, float32, causal, g);
  EXPECT_EQ(f32.route, AttentionRoute::Composed);
  // Causal with more queries than keys: rows that see nothing; the composition.
  auto more = fast::plan_attention({1, 4, 300, 128}, {1, 4, 100, 128}, {1, 4, 100, 128}, bf, causal, g);
  EXPECT_EQ(more.route, AttentionRoute::Composed);
}

TEST(FastAttention, ComposedBlocksMatchTheWholeGraph) {
  // float64 always composes; a small cap splits the queries into blocks, each with only the
  // keys it sees (causal prefix, window), except blocks holding rows that see nothing.
  std::vector<Config> cs;
  Config causal;
  causal.lq = 37;
  causal.lk = 23; // rows 0..13 see nothing
  causal.mode = "causal";
  cs.push_back(causal);
  Config window = causal;
  window.lk = 60;
  window.window = 5;
  cs.push_back(window);
  Config masked;
  masked.lq = 30;
  masked.lk = 31;
  masked.mask = 1;
  masked.sinks = true;
  cs.push_back(masked);
  for (const Config& c : cs) {
    SCOPED_TRACE(c.name());
    Inputs in = make_inputs(c, float64);
    AttentionOptions o = options_of(c, in);
    o.max_score_bytes = size_t(c.b) * c.hq * c.lk * 8 * 4 * fast::kComposedLiveScores; // 4 rows a block
    auto plan = fast::plan_attention(in.q.shape(), in.k.shape(), in.v.shape(), float64, o);
    ASSERT_EQ(plan.route, AttentionRoute::Composed);
    EXPECT_EQ(plan.query_rows, 4);
    EXPECT_TRUE(plan.capped);
    array out = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.3f, o);
    expect_allclose(out, reference(c, in, 0.3f), 1e-10, 1e-10);
  }
}

TEST(FastAttention, EvaluationUnderACapStaysUnderIt) {
  Config c;
  c.b = 1;
  c.hq = 4;
  c.hkv = 4;
  c.lq = 512;
  c.lk = 512;
  c.d = c.dv = 16;
  c.mode = "causal";
  // On the CPU stream: there a node's buffers are released as soon as its consumers ran.
  // On the GPU a buffer is released once the device has run its kernels, so the host
  // enqueueing ahead can keep a few blocks' scores live at once (each block's still under
  // the cap).
  StreamOrDevice cpu = Device::cpu;
  Inputs in = make_inputs(c, float64);
  eval({in.q, in.k, in.v});
  AttentionOptions o = options_of(c, in);
  const size_t cap = size_t(256) << 10; // 256 KiB; the whole score matrix is 8 MiB
  o.max_score_bytes = cap;
  array out = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.25f, o, cpu);
  const size_t before = get_active_memory();
  reset_peak_memory();
  eval(out);
  const size_t peak = get_peak_memory();
  const size_t out_bytes = out.nbytes();
  // The output blocks and their concatenation are live together (2 × out); the scores of
  // one block stay under the cap.
  EXPECT_LE(peak, before + cap + 2 * out_bytes + (size_t(64) << 10)) << "before " << before << " peak " << peak;
  expect_allclose(out, reference(c, in, 0.25f), 1e-10, 1e-10);
}

TEST(FastAttention, GradientsMatchCentralDifferences) {
  // float64: the composed graph's rules, q, k, v and sinks.
  std::vector<Config> cs;
  Config causal;
  causal.b = 1;
  causal.hq = 4;
  causal.hkv = 2;
  causal.lq = 3;
  causal.lk = 5;
  causal.d = causal.dv = 4;
  causal.mode = "causal";
  causal.sinks = true;
  cs.push_back(causal);
  Config masked = causal;
  masked.mode = "";
  masked.mask = 1;
  masked.sinks = false;
  cs.push_back(masked);
  for (const Config& c : cs) {
    SCOPED_TRACE(c.name());
    Inputs in = make_inputs(c, float64);
    std::vector<array> xs{in.q, in.k, in.v};
    if (in.sinks) xs.push_back(*in.sinks);
    auto f = [&](const std::vector<array>& a) {
      AttentionOptions o = options_of(c, in);
      if (in.sinks) o.sinks = a[3];
      return fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.7f, o);
    };
    GradCheckOptions opts;
    opts.rtol = 1e-5;
    opts.atol = 1e-7;
    check_grad(f, xs, opts);
  }
}

TEST(FastAttention, FusedGradientsMatchTheFloat64Graph) {
  // float32 takes the fused route (on the GPU its backward kernel); the float64 graph's
  // gradients are the reference.
  std::vector<Config> cs;
  Config causal;
  causal.lq = 17;
  causal.lk = 40;
  causal.mode = "causal";
  causal.sinks = true;
  cs.push_back(causal);
  Config decode;
  decode.lq = 1;
  decode.lk = 300;
  decode.hq = 8;
  decode.hkv = 2;
  cs.push_back(decode);
  Config masked;
  masked.lq = 9;
  masked.lk = 9;
  masked.mask = 1;
  cs.push_back(masked);
  for (Dtype dt : {float32, bfloat16}) {
    for (const Config& c : cs) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.name());
      Inputs in = make_inputs(c, dt);
      array dout = astype(randn({c.b, c.hq, c.lq, c.dv}), dt);
      auto grads_of = [&](const Inputs& x, const array& g) {
        std::vector<array> xs{x.q, x.k, x.v};
        if (x.sinks) xs.push_back(*x.sinks);
        auto f = [&](const std::vector<array>& a) {
          AttentionOptions o = options_of(c, x);
          if (x.sinks) o.sinks = a[3];
          return std::vector<array>{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.3f, o)};
        };
        return vjp(f, xs, {g}).second;
      };
      auto got = grads_of(in, dout);
      Inputs in64{
          astype(in.q, float64, Device::cpu), astype(in.k, float64, Device::cpu), astype(in.v, float64, Device::cpu),
          in.mask ? std::optional<array>(in.mask->dtype() == bool_ ? *in.mask : astype(*in.mask, float64, Device::cpu))
                  : std::nullopt,
          in.sinks ? std::optional<array>(astype(*in.sinks, float64, Device::cpu)) : std::nullopt};
      std::vector<array> want;
      {
        StreamOrDevice cpu = Device::cpu;
        std::vector<array> xs{in64.q, in64.k, in64.v};
        if (in64.sinks) xs.push_back(*in64.sinks);
        auto f = [&](const std::vector<array>& a) {
          AttentionOptions o = options_of(c, in64);
          if (in64.sinks) o.sinks = a[3];
          return std::vector<array>{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.3f, o, cpu)};
        };
        want = vjp(f, xs, {astype(dout, float64, Device::cpu)}).second;
      }
      ASSERT_EQ(got.size(), want.size());
      // Gradients sum over Lk or Lq terms: the tolerance grows with the sum's length.
      const double tol = (dt == float32 ? 1e-3 : 6e-2);
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("gradient " + std::to_string(i));
        EXPECT_EQ(got[i].dtype(), dt);
        expect_allclose(got[i], want[i], tol, tol);
      }
    }
  }
}

TEST(FastAttention, AdditiveMaskGradientOnEveryRoute) {
  // The mask's gradient is the scores' gradient summed over its broadcast axes: central
  // differences in float64 (composed), and the fused float32 route against the float64 graph.
  Config c;
  c.b = 1;
  c.hq = 2;
  c.hkv = 1;
  c.lq = 3;
  c.lk = 4;
  c.d = c.dv = 4;
  c.mask = 3; // [B, 1, 1, Lk]
  Inputs in = make_inputs(c, float64);
  auto f = [&](const std::vector<array>& a) {
    AttentionOptions o;
    o.mask = a[3];
    return fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.6f, o);
  };
  check_grad(f, {in.q, in.k, in.v, *in.mask});
  std::vector<array> x32{astype(in.q, float32), astype(in.k, float32), astype(in.v, float32), astype(*in.mask, float32)};
  array g = randn({c.b, c.hq, c.lq, c.dv});
  auto fv = [&](const std::vector<array>& a) { return std::vector<array>{f(a)}; };
  auto got = vjp(fv, x32, {astype(g, float32)}).second;
  auto want = vjp(fv, {in.q, in.k, in.v, *in.mask}, {g}).second;
  for (int i = 0; i < 4; ++i) expect_allclose(got[i], want[i], 1e-4, 1e-4);
}

TEST(FastAttention, VmapMatchesALoop) {
  Config c;
  c.b = 2;
  c.lq = 3;
  c.lk = 9;
  c.mode = "causal";
  for (Dtype dt : {float32, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    array q = astype(randn({3, c.b, c.hq, c.lq, c.d}), dt);
    array k = astype(randn({c.b, c.hkv, c.lk, c.d, 3}), dt); // batch axis last
    array v = astype(randn({c.b, c.hkv, c.lk, c.dv}), dt);   // unbatched
    auto f = [](const std::vector<array>& a) {
      return std::vector<array>{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.5f, "causal")};
    };
    const double tol = dt == float64 ? 1e-12 : 1e-5;
    check_vmap(f, {q, k, v}, {0, 4, -1}, tol, tol);
    // Batched sinks take the fallback's batching.
    array sk = astype(randn({3, c.hq}), dt);
    auto fs = [](const std::vector<array>& a) {
      AttentionOptions o;
      o.sinks = a[3];
      return std::vector<array>{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.5f, o)};
    };
    check_vmap(fs, {q, astype(randn({c.b, c.hkv, c.lk, c.d}), dt), v, sk}, {0, -1, -1, 0}, tol, tol);
  }
}

TEST(FastAttention, PagedAttentionEqualsAttentionOverTheGatheredKeys) {
  for (Dtype dt : {float32, bfloat16}) {
    for (int bs : {1, 16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " block size " + std::to_string(bs));
      const int b = 3, hq = 8, hkv = 2, d = 64, blocks = 40, max_blocks = 32 / bs + 2, l = 2;
      array kc = astype(randn({blocks, hkv, bs, d}), dt), vc = astype(randn({blocks, hkv, bs, d}), dt);
      array tables = randint({b, max_blocks}, 0, blocks);
      std::vector<int> lens{2, 17, 30}; // at least L: every query sees a key
      array lengths(lens.begin(), {b}, int32);
      array q = astype(randn({b, hq, l, d}), dt);
      array out = fast::paged_attention(q, kc, vc, tables, lengths, 0.125f);
      eval(out);
      // Per sequence: its positions gathered in order, then causal attention over them.
      auto tv = to_vector(tables);
      for (int s = 0; s < b; ++s) {
        std::vector<int> rows;
        for (int p = 0; p < lens[s]; ++p) {
          const int id = std::min(int(tv[s * max_blocks + p / bs]), blocks - 1); // ids clamp
          rows.push_back(id * bs + p % bs);
        }
        array idx(rows.begin(), {int(rows.size())}, int32);
        auto gather = [&](const array& cache) {
          array flat = reshape(transpose(cache, {0, 2, 1, 3}), {blocks * bs, hkv, d});
          return expand_dims(transpose(take(flat, idx, 0), {1, 0, 2}), 0); // [1, Hkv, len, D]
        };
        array qs = slice(q, {s, 0, 0, 0}, {s + 1, hq, l, d});
        array want = fast::scaled_dot_product_attention(qs, gather(kc), gather(vc), 0.125f, "causal");
        expect_allclose(slice(out, {s, 0, 0, 0}, {s + 1, hq, l, d}), want, tol_of(dt), tol_of(dt));
      }
    }
  }
}

TEST(FastAttention, PagedWriteThenPagedAttentionEqualsAttentionOverTheConcatenation) {
  const Dtype dt = float32;
  const int b = 2, hq = 4, hkv = 2, d = 64, bs = 4, blocks = 12, max_blocks = 5;
  array kc = astype(randn({blocks, hkv, bs, d}), dt), vc = astype(randn({blocks, hkv, bs, d}), dt);
  // Sequence 0 owns blocks 3, 7, 1; sequence 1 owns 0, 9, 10, 2, 5; 6 positions then 1 new.
  std::vector<int> tab{3, 7, 1, 11, 11, 0, 9, 10, 2, 5};
  array tables(tab.begin(), {b, max_blocks}, int32);
  array k_hist = astype(randn({b, hkv, 6, d}), dt), v_hist = astype(randn({b, hkv, 6, d}), dt);
  array k_new = astype(randn({b, hkv, 1, d}), dt), v_new = astype(randn({b, hkv, 1, d}), dt);
  auto slots_for = [&](int from, int count) {
    std::vector<int> sl;
    for (int s = 0; s < b; ++s) {
      for (int p = from; p < from + count; ++p) sl.push_back(tab[s * max_blocks + p / bs] * bs + p % bs);
    }
    return array(sl.begin(), {int(sl.size())}, int32);
  };
  auto rows_of = [&](const array& x) { // [B, Hkv, n, D] -> [B·n, Hkv, D]
    return reshape(transpose(x, {0, 2, 1, 3}), {-1, hkv, d});
  };
  kc = fast::paged_write(kc, rows_of(k_hist), slots_for(0, 6));
  vc = fast::paged_write(vc, rows_of(v_hist), slots_for(0, 6));
  kc = fast::paged_write(kc, rows_of(k_new), slots_for(6, 1));
  vc = fast::paged_write(vc, rows_of(v_new), slots_for(6, 1));
  // An out-of-range slot writes nothing.
  array before = kc;
  kc = fast::paged_write(kc, astype(randn({2, hkv, d}), dt), array({-1, blocks * bs}, int32));
  expect_allclose(kc, before, 0, 0);
  array q = astype(randn({b, hq, 1, d}), dt);
  array out = fast::paged_attention(q, kc, vc, tables, array({7, 7}, int32), 0.2f);
  array want = fast::scaled_dot_product_attention(
      q, concatenate({k_hist, k_new}, 2), concatenate({v_hist, v_new}, 2), 0.2f);
  expect_allclose(out, want, 1e-4, 1e-4);
}

TEST(FastAttention, BadInputThrowsNamingTheOp) {
  const std::string op = "scaled_dot_product_attention";
  array q = randn({1, 4, 3, 8}, float32), k = randn({1, 2, 5, 8}, float32), v = randn({1, 2, 5, 8}, float32);
  auto sdpa = [&](const array& a, const array& b, const array& c, const AttentionOptions& o) {
    return fast::scaled_dot_product_attention(a, b, c, 1.0f, o);
  };
  AttentionOptions none;
  expect_throws_naming<std::invalid_argument>([&] { sdpa(randn({4, 3, 8}, float32), k, v, none); }, op);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(randn({1, 3, 3, 8}, float32), k, v, none); }, op);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(randn({1, 4, 3, 7}, float32), k, v, none); }, op);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, randn({1, 2, 6, 8}, float32), none); }, op);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(randn({2, 4, 3, 8}, float32), k, v, none); }, op);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(astype(q, int32), astype(k, int32), astype(v, int32), none); }, op);
  AttentionOptions bad_mode;
  bad_mode.mask_mode = "sliding";
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, bad_mode); }, op);
  AttentionOptions causal_with_mask;
  causal_with_mask.mask_mode = "causal";
  causal_with_mask.mask = ones({3, 5}, bool_);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, causal_with_mask); }, op);
  AttentionOptions array_without;
  array_without.mask_mode = "array";
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, array_without); }, op);
  AttentionOptions wrong_mask;
  wrong_mask.mask = ones({3, 4}, bool_);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, wrong_mask); }, op);
  AttentionOptions deep_mask;
  deep_mask.mask = ones({1, 1, 1, 3, 5}, bool_);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, deep_mask); }, op);
  AttentionOptions f64_mask;
  f64_mask.mask = zeros({3, 5}, float64);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, f64_mask); }, op);
  AttentionOptions bad_sinks;
  bad_sinks.sinks = zeros({2}, float32);
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, bad_sinks); }, op);
  AttentionOptions bad_window;
  bad_window.mask_mode = "causal";
  bad_window.window = 0;
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, bad_window); }, op);
  AttentionOptions window_no_causal;
  window_no_causal.window = 3;
  expect_throws_naming<std::invalid_argument>([&] { sdpa(q, k, v, window_no_causal); }, op);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::scaled_dot_product_attention(q, k, v, 1.0f, "causal", ones({3, 5}, bool_)); }, op);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::scaled_dot_product_attention(astype(q, float64), astype(k, float64), astype(v, float64), 1.0f, "", {}, {}, true, Device::cpu); },
      op);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::plan_attention({1, 4, -3, 8}, k.shape(), v.shape(), float32, none); }, "plan_attention");
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::plan_attention({1, 4, 3, 8}, {1, 3, 5, 8}, {1, 3, 5, 8}, float32, none); }, op);
  const std::string pop = "paged_attention";
  array kc = randn({4, 2, 16, 8}, float32), vc = randn({4, 2, 16, 8}, float32);
  array tables = zeros({1, 3}, int32), lengths = ones({1}, int32);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({4, 3, 8}, float32), kc, vc, tables, lengths, 1.0f); }, pop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({1, 3, 1, 8}, float32), kc, vc, tables, lengths, 1.0f); }, pop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({1, 4, 1, 4}, float32), kc, vc, tables, lengths, 1.0f); }, pop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({1, 4, 1, 8}, float32), kc, vc, zeros({2, 3}, int32), lengths, 1.0f); }, pop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({1, 4, 1, 8}, float32), kc, vc, zeros({1, 3}, float32), lengths, 1.0f); }, pop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({1, 4, 1, 8}, float32), kc, vc, tables, ones({2}, int32), 1.0f); }, pop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_attention(randn({1, 4, 1, 8}, float32), kc, randn({4, 2, 8, 8}, float32), tables, lengths, 1.0f); }, pop);
  const std::string wop = "paged_write";
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_write(kc, randn({3, 2, 4}, float32), zeros({3}, int32)); }, wop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_write(kc, randn({3, 2, 8}, float32), zeros({2}, int32)); }, wop);
  expect_throws_naming<std::invalid_argument>([&] { fast::paged_write(kc, randn({3, 2, 8}, float32), zeros({3}, float32)); }, wop);
}
