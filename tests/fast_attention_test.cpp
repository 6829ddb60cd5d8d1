// scaled_dot_product_attention, plan_attention, paged_attention and paged_write through the
// public API (include/nuvec/fast.h): every route against the fallback graph evaluated in
// float64 on the CPU (so the GPU suite compares GPU against CPU), the planner's decisions,
// the composed route in query blocks under a memory cap, the rules (central differences,
// the fused path's gradients against the float64 graph's, vmap against a loop), the paged
// ops against contiguous attention, and bad input. Kernel-level tests of each route:
// tests/fast_attention_{cpu,vector,tiled,backward}_test.cpp, tests/fast_paged_attention_test.cpp;
// cases, inputs and the reference: tests/attention_cases.h.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "checker.h"
#include "fast/attention.h"
#include "fast/attention_plan.h"
#include "nuvec/fast.h"
#include "nuvec/memory.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
using namespace nuvec::testing::attn;
using fast::AttentionOptions;
using fast::AttentionRoute;

namespace {

// Every route against the float64 graph: looser than the kernels' tol_of, as the composed
// route rounds the scores and probabilities to the dtype.
double route_tol(Dtype dt) {
  return dt == float64 ? 1e-10 : dt == float32 ? 2e-4 : dt == float16 ? 4e-3 : 3e-2;
}

AttentionOptions options_of(const Case& c, const Inputs& in) {
  AttentionOptions o;
  o.mask_mode = c.causal ? "causal" : "";
  o.mask = in.mask;
  o.sinks = in.sinks;
  if (c.window > 0) o.window = c.window;
  return o;
}

// The default case (B 2, Hq 4, Hkv 2, D 64) over query and key lengths, plain and causal, then
// one case for each of: GQA 8, each array mask, sinks, a window, D 128, D != Dv.
std::vector<Case> route_configs() {
  std::vector<Case> cs;
  for (int lq : {1, 3, 8, 17}) {
    for (int lk : {1, 7, 300}) {
      cs.push_back({.lq = lq, .lk = lk});
      cs.push_back({.lq = lq, .lk = lk, .causal = true});
    }
  }
  cs.push_back({.hq = 8, .hkv = 1, .lq = 5, .lk = 129});
  for (Mask mask : {Mask::boolean, Mask::additive_rows, Mask::additive_batch}) cs.push_back({.lq = 9, .lk = 33, .mask = mask});
  cs.push_back({.lq = 4, .lk = 50, .causal = true, .sinks = true});
  cs.push_back({.lq = 20, .lk = 40, .causal = true, .window = 6});
  cs.push_back({.lq = 64, .lk = 100, .d = 128, .dv = 128, .causal = true});
  cs.push_back({.lq = 2, .lk = 65, .d = 96, .dv = 64});
  return cs;
}

} // namespace

TEST(FastAttention, EveryRouteMatchesTheFloat64Graph) {
  const float scale = 0.37f;
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    for (const Case& c : route_configs()) {
      SCOPED_TRACE(c.name(dt));
      Inputs in = make_inputs(c, dt);
      array out = fast::scaled_dot_product_attention(in.q, in.k, in.v, scale, options_of(c, in));
      EXPECT_EQ(out.shape(), (Shape{c.b, c.hq, c.lq, c.dv}));
      EXPECT_EQ(out.dtype(), dt);
      expect_allclose(out, reference(c, in, scale).out, route_tol(dt), route_tol(dt));
    }
  }
}

TEST(FastAttention, MlxSignatureMeansTheSame) {
  const Case c{.lq = 5, .lk = 11, .mask = Mask::boolean};
  Inputs in = make_inputs(c, float32);
  array a = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.5f, "", in.mask);
  array b = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.5f, "array", in.mask);
  expect_allclose(a, reference(c, in, 0.5f).out, route_tol(float32), route_tol(float32));
  expect_allclose(b, a, 0, 0);
  const Case causal{.lq = 5, .lk = 11, .causal = true};
  Inputs ic = make_inputs(causal, float32);
  array cz = fast::scaled_dot_product_attention(ic.q, ic.k, ic.v, 0.5f, "causal");
  expect_allclose(cz, reference(causal, ic, 0.5f).out, route_tol(float32), route_tol(float32));
  // Promotion: float16 q with float32 k, v runs in float32.
  array mixed = fast::scaled_dot_product_attention(astype(ic.q, float16), ic.k, ic.v, 0.5f, "causal");
  EXPECT_EQ(mixed.dtype(), float32);
}

TEST(FastAttention, PlannerPicksTheDocumentedRoute) {
  const Dtype bf = bfloat16;
  AttentionOptions none;
  AttentionOptions causal;
  causal.mask_mode = "causal";
  // q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D].
  auto plan = [](const Shape& q, const Shape& kv, Dtype dt, const AttentionOptions& o, Device device) {
    return fast::plan_attention(q, kv, kv, dt, o, device);
  };
  // The CPU: the fused loop for half and float32, the composition for float64 (under a cap, in
  // blocks of query rows).
  const Device cpu = Device::cpu;
  EXPECT_EQ(plan({1, 8, 100, 64}, {1, 2, 100, 64}, float32, causal, cpu).route, AttentionRoute::Tiled);
  auto p64 = plan({1, 8, 100, 64}, {1, 2, 100, 64}, float64, causal, cpu);
  EXPECT_EQ(p64.route, AttentionRoute::Composed);
  EXPECT_EQ(p64.query_rows, 100);
  EXPECT_FALSE(p64.capped);
  EXPECT_EQ(p64.max_intermediate_bytes, size_t(8) * 100 * 100 * 8);
  AttentionOptions capped = causal;
  capped.max_score_bytes = size_t(8) * 100 * 8 * 10 * fast::kComposedLiveScores; // 10 rows
  auto pc = plan({1, 8, 100, 64}, {1, 2, 100, 64}, float64, capped, cpu);
  EXPECT_EQ(pc.route, AttentionRoute::Composed);
  EXPECT_EQ(pc.query_rows, 10);
  EXPECT_TRUE(pc.capped);
  if (!gpu::is_available()) return;
  const Device g = Device::gpu;
  // Decode: the vector kernels; a long context over few heads takes two passes.
  EXPECT_EQ(plan({32, 32, 1, 128}, {32, 8, 8192, 128}, bf, none, g).route, AttentionRoute::Vector);
  auto few = plan({1, 32, 1, 128}, {1, 8, 8192, 128}, bf, none, g);
  EXPECT_EQ(few.route, AttentionRoute::Vector);
  EXPECT_EQ(few.passes, 2);
  EXPECT_GT(few.key_blocks, 1);
  EXPECT_GT(few.scratch_bytes, 0u);
  // Prefill: the tiled kernel for bf16 D 128; float32 and D 80 compose.
  EXPECT_EQ(plan({4, 32, 4096, 128}, {4, 32, 4096, 128}, bf, causal, g).route, AttentionRoute::Tiled);
  EXPECT_EQ(plan({1, 4, 300, 128}, {1, 4, 300, 128}, float32, causal, g).route, AttentionRoute::Composed);
  // Causal with more queries than keys: rows that see nothing; the composition.
  EXPECT_EQ(plan({1, 4, 300, 128}, {1, 4, 100, 128}, bf, causal, g).route, AttentionRoute::Composed);
}

TEST(FastAttention, ComposedBlocksMatchTheWholeGraph) {
  // float64 always composes; a small cap splits the queries into blocks, each with only the
  // keys it sees (causal prefix, window), except blocks holding rows that see nothing.
  const std::vector<Case> cs = {
      {.lq = 37, .lk = 23, .causal = true}, // rows 0..13 see nothing
      {.lq = 37, .lk = 60, .causal = true, .window = 5},
      {.lq = 30, .lk = 31, .mask = Mask::boolean, .sinks = true},
  };
  for (const Case& c : cs) {
    SCOPED_TRACE(c.name(float64));
    Inputs in = make_inputs(c, float64);
    AttentionOptions o = options_of(c, in);
    o.max_score_bytes = size_t(c.b) * c.hq * c.lk * 8 * 4 * fast::kComposedLiveScores; // 4 rows a block
    auto plan = fast::plan_attention(in.q.shape(), in.k.shape(), in.v.shape(), float64, o);
    ASSERT_EQ(plan.route, AttentionRoute::Composed);
    EXPECT_EQ(plan.query_rows, 4);
    EXPECT_TRUE(plan.capped);
    array out = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.3f, o);
    expect_allclose(out, reference(c, in, 0.3f).out, 1e-10, 1e-10);
  }
}

TEST(FastAttention, EvaluationUnderACapStaysUnderIt) {
  const Case c{.b = 1, .hq = 4, .hkv = 4, .lq = 512, .lk = 512, .d = 16, .dv = 16, .causal = true};
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
  expect_allclose(out, reference(c, in, 0.25f).out, 1e-10, 1e-10);
}

TEST(FastAttention, GradientsMatchCentralDifferences) {
  // float64: the composed graph's rules, q, k, v and sinks.
  const std::vector<Case> cs = {
      {.b = 1, .hq = 4, .hkv = 2, .lq = 3, .lk = 5, .d = 4, .dv = 4, .causal = true, .sinks = true},
      {.b = 1, .hq = 4, .hkv = 2, .lq = 3, .lk = 5, .d = 4, .dv = 4, .mask = Mask::boolean},
  };
  for (const Case& c : cs) {
    SCOPED_TRACE(c.name(float64));
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
  const std::vector<Case> cs = {
      {.lq = 17, .lk = 40, .causal = true, .sinks = true},
      {.hq = 8, .hkv = 2, .lq = 1, .lk = 300}, // decode
      {.lq = 9, .lk = 9, .mask = Mask::boolean},
  };
  for (Dtype dt : {float32, bfloat16}) {
    for (const Case& c : cs) {
      SCOPED_TRACE(c.name(dt));
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
      const Inputs in64 = as_float64(in);
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
  const Case c{.b = 1, .hq = 2, .hkv = 1, .lq = 3, .lk = 4, .d = 4, .dv = 4, .mask = Mask::additive_batch};
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
  const Case c{.b = 2, .lq = 3, .lk = 9, .causal = true};
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
        expect_allclose(slice(out, {s, 0, 0, 0}, {s + 1, hq, l, d}), want, route_tol(dt), route_tol(dt));
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
  fast::AttentionOptions forced;
  forced.force_fused = true; // float64: no fused kernel covers it
  expect_throws_naming<std::invalid_argument>(
      [&] {
        fast::scaled_dot_product_attention(astype(q, float64), astype(k, float64), astype(v, float64), 1.0f, forced,
                                           Device::cpu);
      },
      op);
  // plan_attention refuses it too (validated as the op validates), not a Composed plan.
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::plan_attention(q.shape(), k.shape(), v.shape(), float64, forced, Device::cpu); }, "plan_attention");
  // MLX's argument order: the stream right after sinks.
  const array out_mlx = fast::scaled_dot_product_attention(q, k, v, 1.0f, "causal", {}, {}, Device::cpu);
  fast::AttentionOptions causal_only;
  causal_only.mask_mode = "causal";
  expect_allclose(out_mlx, fast::scaled_dot_product_attention(q, k, v, 1.0f, causal_only, Device::cpu), 0, 0);
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

// Empty queries give empty results and no keys give zeros (MLX's composed fallback), with a
// mask or sinks too; paged_attention likewise for an empty batch or no new positions, and a
// block size of 0 is refused when the op is called. (The nodes' log-sum-exp over no keys
// threw at eval, naming logsumexp.)
TEST(FastAttention, EmptyShapesGiveEmptyOrZeros) {
  auto n = [](Shape s) { return astype(random::normal(s), float32); };
  auto check = [](const array& y, const Shape& shape) {
    ASSERT_EQ(y.shape(), shape);
    EXPECT_EQ(max(abs(y)).item<float>(), 0.0f);
  };
  auto empty = [](const array& y, const Shape& shape) {
    ASSERT_EQ(y.shape(), shape);
    eval(y);
    EXPECT_EQ(y.size(), 0u);
  };
  empty(fast::scaled_dot_product_attention(n({0, 4, 3, 8}), n({0, 2, 5, 8}), n({0, 2, 5, 8}), 0.3f), {0, 4, 3, 8});
  empty(fast::scaled_dot_product_attention(n({2, 4, 0, 8}), n({2, 2, 5, 8}), n({2, 2, 5, 6}), 0.3f, "causal"),
        {2, 4, 0, 6});
  check(fast::scaled_dot_product_attention(n({2, 4, 3, 8}), n({2, 2, 0, 8}), n({2, 2, 0, 6}), 0.3f), {2, 4, 3, 6});
  check(fast::scaled_dot_product_attention(n({2, 4, 3, 8}), n({2, 2, 0, 8}), n({2, 2, 0, 8}), 0.3f, "",
                                           zeros({2, 4, 3, 0}, bool_), n({4})),
        {2, 4, 3, 8});
  // Head size 0 with keys: every score is 0, the output the mean of v over the keys.
  array v = reshape(astype(arange(12), float32), {1, 1, 3, 4});
  array mean_v = fast::scaled_dot_product_attention(zeros({1, 1, 2, 0}), zeros({1, 1, 3, 0}), v, 0.3f);
  expect_allclose(mean_v, broadcast_to(reshape(array({4.0f, 5.0f, 6.0f, 7.0f}), {1, 1, 1, 4}), {1, 1, 2, 4}), 1e-6,
                  1e-6);
  const array kc = n({3, 2, 4, 8}), tables = zeros({2, 2}, int32), lengths = array({3, 5}, int32);
  empty(fast::paged_attention(n({2, 4, 0, 8}), kc, kc, tables, lengths, 0.3f), {2, 4, 0, 8});
  empty(fast::paged_attention(n({0, 4, 1, 8}), kc, kc, zeros({0, 2}, int32), zeros({0}, int32), 0.3f), {0, 4, 1, 8});
  EXPECT_THROW(fast::paged_attention(n({2, 4, 1, 8}), n({3, 2, 0, 8}), n({3, 2, 0, 8}), tables, lengths, 0.3f),
               std::invalid_argument);
}
