// The GatedDelta fused primitive (src/fast/gated_delta.h): gated_delta, gated_delta_steps and
// gated_delta_slots. The kernels (CPU, and GPU when the suite runs with the GPU as default
// device) against a float64 loop of the recurrence and against the node's fallback graph in
// float64, on random inputs as the model feeds them (L2-normalised q and k, decays in (0, 1],
// beta in (0, 1)) of T in {1, 2, 63, 64, 65, 1000}, Hv / Hk in {1, 2, 4}, Dk and Dv in
// {32, 64, 128} and odd sizes the GPU leaves to the fallback, q in float32, bfloat16 and
// float16 with float32 and bfloat16 states; every step's state; slots of a larger pool (out of
// range ones raising at eval); decays of any sign; GPU against CPU and the GPU's chunked
// kernel (T >= 64) against its recurrent one; the rules (vjp and jvp against central
// differences for every input, vmap against a loop); the backward kernel GatedDeltaVjp
// against the fallback's vjp (CPU) and its CUDA kernel against the CPU one; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "checker.h"
#include "donation_checks.h"
#include "fast/gated_delta.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

struct Case {
  int b, t, hk, hv, dk, dv;
};

std::string describe(const Case& c) {
  return "B" + std::to_string(c.b) + " T" + std::to_string(c.t) + " Hk" + std::to_string(c.hk) + " Hv" +
      std::to_string(c.hv) + " Dk" + std::to_string(c.dk) + " Dv" + std::to_string(c.dv);
}

// Inputs as a Gated DeltaNet layer makes them: q and k L2-normalised over Dk (the rule is a
// contraction only then), decays in [0.5, 1), beta in (0, 1), a random state.
struct Inputs {
  array q, k, v, g, beta, state;
};

array l2_normalised(const array& x) {
  return divide(x, sqrt(sum(square(x), -1, true)));
}

Inputs make_inputs(const Case& c, Dtype dt, Dtype state_dt) {
  return {
      astype(l2_normalised(randn({c.b, c.t, c.hk, c.dk})), dt),
      astype(l2_normalised(randn({c.b, c.t, c.hk, c.dk})), dt),
      astype(randn({c.b, c.t, c.hv, c.dv}), dt),
      astype(uniform({c.b, c.t, c.hv}, 0.5, 1.0), dt),
      astype(uniform({c.b, c.t, c.hv}, 0.01, 0.99), dt),
      astype(multiply(randn({c.b, c.hv, c.dv, c.dk}), array(0.3)), state_dt),
  };
}

// The recurrence in float64, straight from its definition:
// S ← g S;  S ← S + k (β (v − S k))ᵀ;  y = S q.  Returns y and every step's state.
struct Reference {
  std::vector<double> y, states; // [B, T, Hv, Dv], [B, T, Hv, Dv, Dk]
  std::vector<double> final_state;
};

Reference reference(const Inputs& in, const Case& c) {
  const auto q = to_vector(in.q), k = to_vector(in.k), v = to_vector(in.v), g = to_vector(in.g),
             beta = to_vector(in.beta);
  auto S = to_vector(in.state);
  Reference r;
  r.y.assign(size_t(c.b) * c.t * c.hv * c.dv, 0.0);
  r.states.assign(size_t(c.b) * c.t * c.hv * c.dv * c.dk, 0.0);
  const size_t head = size_t(c.dv) * c.dk;
  for (int b = 0; b < c.b; ++b) {
    for (int h = 0; h < c.hv; ++h) {
      double* s = &S[(size_t(b) * c.hv + h) * head];
      const int kh = h / (c.hv / c.hk);
      for (int t = 0; t < c.t; ++t) {
        const size_t bt = size_t(b) * c.t + t;
        const double* kt = &k[(bt * c.hk + kh) * c.dk];
        const double* qt = &q[(bt * c.hk + kh) * c.dk];
        const double gt = g[bt * c.hv + h], bt_ = beta[bt * c.hv + h];
        for (size_t e = 0; e < head; ++e) s[e] *= gt;
        for (int i = 0; i < c.dv; ++i) {
          double kv = 0;
          for (int j = 0; j < c.dk; ++j) kv += s[i * c.dk + j] * kt[j];
          const double delta = bt_ * (v[(bt * c.hv + h) * c.dv + i] - kv);
          for (int j = 0; j < c.dk; ++j) s[i * c.dk + j] += kt[j] * delta;
          double y = 0;
          for (int j = 0; j < c.dk; ++j) y += s[i * c.dk + j] * qt[j];
          r.y[(bt * c.hv + h) * c.dv + i] = y;
        }
        std::copy(s, s + head, &r.states[(bt * c.hv + h) * head]);
      }
    }
  }
  r.final_state = S;
  return r;
}

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-9 : dt == float32 ? 2e-4 : dt == float16 ? 4e-3 : 2.5e-2;
}

void expect_near_vector(const array& a, const std::vector<double>& e, double tol) {
  const auto got = to_vector(a);
  ASSERT_EQ(got.size(), e.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - e[i]) <= tol + tol * std::abs(e[i]))) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << e[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

bool is_node(const array& a) {
  return a.has_primitive() && dynamic_cast<const GatedDelta*>(&a.primitive()) != nullptr;
}

// Whether the op records its node for keys of dk features of dtype on the default device.
bool node_expected(int dk, Dtype dt) {
  return default_device() == Device::cpu || gated_delta_gpu_covers(dk, dt);
}

// The node's fallback on its inputs cast to float64.
std::vector<array> fallback64(const array& out) {
  auto& p = dynamic_cast<fast::FastPrimitive&>(out.primitive());
  std::vector<array> in = out.inputs();
  for (auto& a : in) {
    if (issubdtype(a.dtype(), floating)) a = astype(a, float64);
  }
  return p.fallback()(in);
}

} // namespace

TEST(FastGatedDelta, KernelsMatchAFloat64Loop) {
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 32, 32},  {2, 2, 1, 2, 64, 32},  {1, 63, 2, 4, 32, 64}, {1, 64, 1, 4, 128, 128},
      {2, 65, 2, 2, 64, 64}, {1, 7, 1, 1, 20, 5},   {3, 5, 3, 6, 40, 33},  {1, 3, 1, 1, 256, 16},
  };
  for (const Case& c : cases) {
    for (Dtype dt : {float32, bfloat16, float16}) {
      for (Dtype sdt : {float32, bfloat16}) {
        SCOPED_TRACE(describe(c) + " " + dtype_name(dt) + " state " + dtype_name(sdt));
        const Inputs in = make_inputs(c, dt, sdt);
        const Reference r = reference(in, c);
        auto [y, s] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state);
        EXPECT_EQ(is_node(y), node_expected(c.dk, dt));
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_EQ(s.dtype(), sdt);
        ASSERT_EQ(y.shape(), (Shape{c.b, c.t, c.hv, c.dv}));
        ASSERT_EQ(s.shape(), (Shape{c.b, c.hv, c.dv, c.dk}));
        // y is rounded to q's dtype, the state to its own; the recurrence runs in float32.
        expect_near_vector(y, r.y, tol_of(dt) + 2e-4);
        expect_near_vector(s, r.final_state, tol_of(sdt) + 2e-4);
      }
    }
  }
}

TEST(FastGatedDelta, LongSequences) {
  const Case c{1, 1000, 1, 2, 32, 16};
  const Inputs in = make_inputs(c, float32, float32);
  const Reference r = reference(in, c);
  auto [y, s] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state);
  expect_near_vector(y, r.y, 5e-4);
  expect_near_vector(s, r.final_state, 5e-4);
}

TEST(FastGatedDelta, KernelMatchesItsFallbackInFloat64) {
  for (const Case& c : {Case{2, 9, 2, 4, 32, 24}, Case{1, 4, 1, 1, 16, 8}}) {
    SCOPED_TRACE(describe(c));
    const Inputs in = make_inputs(c, float32, float32);
    auto [y, s] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state);
    if (!is_node(y)) continue; // a GPU run of the keys it leaves to the fallback
    auto ref = fallback64(y);
    expect_allclose(astype(y, float64), ref[0], 1e-4, 1e-5);
    expect_allclose(astype(s, float64), ref[1], 1e-4, 1e-5);
    // float64 inputs run the kernel in float64 (the CPU) or the fallback (the GPU): either
    // matches the loop to rounding.
    Inputs wide{astype(in.q, float64), astype(in.k, float64), astype(in.v, float64),
                astype(in.g, float64), astype(in.beta, float64), astype(in.state, float64)};
    const Reference r = reference(wide, c);
    auto [y64, s64] = fast::gated_delta(wide.q, wide.k, wide.v, wide.g, wide.beta, wide.state);
    EXPECT_EQ(y64.dtype(), float64);
    expect_near_vector(y64, r.y, 1e-10);
    expect_near_vector(s64, r.final_state, 1e-10);
  }
}

TEST(FastGatedDelta, MixedDtypesTakeTheFallback) {
  const Case c{1, 3, 1, 2, 32, 8};
  Inputs in = make_inputs(c, float32, float32);
  const Reference r = reference(in, c);
  // v in bfloat16 beside float32 q and k: the fallback (the rule in float32), y in q's dtype.
  auto [y, s] = fast::gated_delta(in.q, in.k, astype(in.v, bfloat16), in.g, in.beta, in.state);
  EXPECT_FALSE(is_node(y));
  EXPECT_EQ(y.dtype(), float32);
  const Reference rb = reference({in.q, in.k, astype(astype(in.v, bfloat16), float32), in.g, in.beta, in.state}, c);
  expect_near_vector(y, rb.y, 2e-4);
  // g and beta in float16 and the state in float16 still run the kernel.
  auto [y2, s2] = fast::gated_delta(in.q, in.k, in.v, astype(in.g, float16), astype(in.beta, float16),
                                    astype(in.state, float16));
  EXPECT_TRUE(is_node(y2));
  EXPECT_EQ(s2.dtype(), float16);
  const Reference rh = reference(
      {in.q, in.k, in.v, astype(astype(in.g, float16), float32), astype(astype(in.beta, float16), float32),
       astype(astype(in.state, float16), float32)},
      c);
  expect_near_vector(y2, rh.y, 2e-3);
  expect_near_vector(s2, rh.final_state, 4e-3);
}

TEST(FastGatedDelta, EveryStepsState) {
  for (const Case& c : {Case{2, 5, 1, 2, 32, 16}, Case{1, 65, 2, 2, 64, 32}, Case{1, 3, 1, 1, 12, 3}}) {
    for (Dtype sdt : {float32, bfloat16}) {
      SCOPED_TRACE(describe(c) + " state " + dtype_name(sdt));
      const Inputs in = make_inputs(c, float32, sdt);
      const Reference r = reference(in, c);
      auto [y, states] = fast::gated_delta_steps(in.q, in.k, in.v, in.g, in.beta, in.state);
      EXPECT_EQ(is_node(y), node_expected(c.dk, float32));
      ASSERT_EQ(states.shape(), (Shape{c.b, c.t, c.hv, c.dv, c.dk}));
      EXPECT_EQ(states.dtype(), sdt);
      expect_near_vector(y, r.y, 3e-4);
      expect_near_vector(states, r.states, tol_of(sdt) + 3e-4);
    }
  }
  // No steps: empty outputs, and gated_delta returns the state as it was.
  const Case c{2, 0, 1, 1, 32, 4};
  const Inputs in = make_inputs(c, float32, float32);
  auto [y, states] = fast::gated_delta_steps(in.q, in.k, in.v, in.g, in.beta, in.state);
  EXPECT_EQ(y.shape(), (Shape{2, 0, 1, 4}));
  EXPECT_EQ(states.shape(), (Shape{2, 0, 1, 4, 32}));
  eval({y, states});
  auto s0 = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state).second;
  expect_allclose(s0, in.state, 0, 0);
}

TEST(FastGatedDelta, SlotsOfAPool) {
  const int pool_size = 7;
  // T 4 runs the GPU's recurrent kernel, T 70 its chunked one.
  for (const Case& c : {Case{3, 4, 1, 2, 32, 16}, Case{3, 70, 1, 2, 32, 16}})
  for (Dtype sdt : {float32, bfloat16}) {
    SCOPED_TRACE(describe(c) + " state " + dtype_name(sdt));
    Inputs in = make_inputs(c, float32, sdt);
    const array pool = astype(multiply(randn({pool_size, c.hv, c.dv, c.dk}), array(0.3)), sdt);
    // A random permutation's first B rows, one of them counted from the end.
    std::vector<int> rows(pool_size);
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), rng());
    rows.resize(c.b);
    std::vector<int> given = rows;
    given[1] -= pool_size;
    for (Dtype idt : {int32, int64, uint32}) {
      SCOPED_TRACE(dtype_name(idt));
      std::vector<int> ids = idt == uint32 ? rows : given;
      const array slots = astype(array(ids.begin(), {c.b}, int32), idt);
      auto [y, updated] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, slots);
      EXPECT_TRUE(is_node(y));
      ASSERT_EQ(updated.shape(), pool.shape());
      in.state = take(pool, array(rows.begin(), {c.b}, int32), 0);
      const Reference r = reference(in, c);
      expect_near_vector(y, r.y, 3e-4);
      // The named rows hold the final states, the others are the pool's.
      const auto got = to_vector(updated), before = to_vector(pool);
      const size_t head = size_t(c.hv) * c.dv * c.dk;
      for (int p = 0; p < pool_size; ++p) {
        const auto at = std::find(rows.begin(), rows.end(), p);
        for (size_t e = 0; e < head; ++e) {
          const double want = at == rows.end() ? before[p * head + e] : r.final_state[(at - rows.begin()) * head + e];
          ASSERT_NEAR(got[p * head + e], want, tol_of(sdt) * (1 + std::abs(want)) + 3e-4) << "row " << p;
        }
      }
    }
  }
  // A slot outside the pool raises at eval, naming the op; so does one int32 cannot hold.
  for (const Case& c : {Case{3, 4, 1, 2, 32, 16}, Case{3, 70, 1, 2, 32, 16}}) {
    const Inputs in = make_inputs(c, float32, float32);
    const array pool = zeros({pool_size, c.hv, c.dv, c.dk});
    for (const array& slots : {array({0, 7, 1}, int32), array({0, -8, 1}, int32),
                               array({int64_t(0), int64_t(1) << 32, int64_t(1)}, int64)}) {
      auto [y, updated] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, slots);
      EXPECT_THROW(eval({y, updated}), std::out_of_range) << describe(c);
    }
  }
  // Two sequences naming one row (6 and -1 are the same row of 7) would race on it: refused at
  // eval, naming the op, by the CPU kernel and both GPU kernels.
  for (const Case& c : {Case{3, 4, 1, 2, 32, 16}, Case{3, 70, 1, 2, 32, 16}}) {
    const Inputs in = make_inputs(c, float32, float32);
    const array pool = zeros({pool_size, c.hv, c.dv, c.dk});
    for (const array& slots : {array({1, 1, 1}, int32), array({0, 6, -1}, int32), array({3, 2, 3}, int64)}) {
      auto [y, updated] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, slots);
      try {
        eval({y, updated});
        ADD_FAILURE() << "no exception " << describe(c);
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("distinct"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("gated_delta_slots"), std::string::npos) << e.what();
      }
    }
  }
  // An empty pool: every slot is outside it, std::out_of_range on the kernel's route and on the
  // fallback's (v in float16; its take would refuse the empty axis with invalid_argument).
  for (Dtype vt : {float32, float16}) {
    const Case c{3, 4, 1, 2, 32, 16};
    const Inputs in = make_inputs(c, float32, float32);
    const array empty = zeros({0, c.hv, c.dv, c.dk});
    expect_throws_naming<std::out_of_range>(
        [&] {
          auto [y, updated] = fast::gated_delta_slots(in.q, in.k, astype(in.v, vt), in.g, in.beta, empty,
                                                      array({0, 1, 2}, int32));
          eval({y, updated});
        },
        "gated_delta_slots");
    // No sequences, no slots: nothing to refuse.
    auto none = [](const array& x) {
      Shape end = x.shape();
      end[0] = 0;
      return slice(x, Shape(x.ndim(), 0), end);
    };
    auto [y, updated] = fast::gated_delta_slots(none(in.q), none(in.k), none(astype(in.v, vt)), none(in.g),
                                                none(in.beta), empty, array({}, int32));
    eval({y, updated});
    EXPECT_EQ(updated.shape(), empty.shape());
  }
  const Case c{3, 4, 1, 2, 32, 16};
  const Inputs in = make_inputs(c, float32, float32);
  const array pool = zeros({pool_size, c.hv, c.dv, c.dk});
  try {
    auto [y, updated] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, array({2, 9, 1}, int32));
    eval({y, updated});
    ADD_FAILURE() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("gated_delta_slots"), std::string::npos) << e.what();
  }
}

// The fallback (q, k, v of different dtypes) does not refuse two sequences naming one row:
// the last one lands, and the overwritten sequence's final state gets no gradient (a plain
// scatter's vjp gave it the cotangent and landed an unpromised one).
TEST(FastGatedDelta, SlotsFallbackKeepsTheLastOfRepeatedRows) {
  const Case c{3, 5, 1, 2, 32, 8};
  const Inputs in = make_inputs(c, float32, float32);
  const array v16 = astype(in.v, float16);
  const array pool = multiply(randn({4, c.hv, c.dv, c.dk}), array(0.3f));
  const array slots = array({1, 3, -3}, int32); // -3 is row 1 again: sequence 2 lands there
  auto [y, updated] = fast::gated_delta_slots(in.q, in.k, v16, in.g, in.beta, pool, slots);
  auto [y_each, finals] = fast::gated_delta(in.q, in.k, v16, in.g, in.beta, take(pool, slots, 0));
  expect_allclose(take(updated, array({1, 3}, int32), 0), take(finals, array({2, 1}, int32), 0), 0, 0);
  expect_allclose(take(updated, array({0, 2}, int32), 0), take(pool, array({0, 2}, int32), 0), 0, 0);
  auto loss = [&](const std::vector<array>& x) {
    return std::vector<array>{sum(fast::gated_delta_slots(in.q, in.k, x[0], in.g, in.beta, pool, slots).second)};
  };
  const array dv = vjp(loss, {v16}, {array(1.0f)}).second[0];
  EXPECT_EQ(max(abs(slice(dv, {0, 0, 0, 0}, {1, c.t, c.hv, c.dv}))).item<float>(), 0.0f);
  EXPECT_GT(max(abs(slice(dv, {2, 0, 0, 0}, {3, c.t, c.hv, c.dv}))).item<float>(), 0.0f);
}

// A pool nothing else refers to is updated in its own buffer (the serving engine's state
// pools): T 4 and T 70 (on the GPU the recurrent and the chunked kernel; on the CPU the one
// loop); one the caller still holds is copied and left as it was. Both give the same rows.
TEST(FastGatedDelta, SlotsUpdateAnUnsharedPoolInPlace) {
  for (const Case& c : {Case{3, 4, 1, 2, 32, 16}, Case{2, 70, 1, 2, 32, 16}}) {
    SCOPED_TRACE(describe(c));
    const Inputs in = make_inputs(c, float32, float32);
    const array base = multiply(randn({6, c.hv, c.dv, c.dk}), array(0.3f));
    const array slots = array({4, 0, 2}, int32);
    const array used = slice(slots, {0}, {c.b});
    auto [want_y, want] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, base, used);
    eval({want_y, want});
    array pool = fresh_buffer(base);
    std::weak_ptr<array::Data> buffer = watch_buffer(pool);
    auto [y, updated] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, used);
    pool = array(0.0f); // the node's input is now the pool's only handle
    eval({y, updated});
    EXPECT_EQ(updated.data_shared_ptr(), buffer.lock()) << "the pool's buffer was not reused";
    expect_allclose(updated, want, 0, 0);
    expect_allclose(y, want_y, 0, 0);
    array held = fresh_buffer(base);
    auto [y2, updated2] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, held, used);
    eval({y2, updated2});
    EXPECT_NE(updated2.data_shared_ptr(), held.data_shared_ptr());
    expect_allclose(held, base, 0, 0);
    expect_allclose(updated2, want, 0, 0);
  }
}

TEST(FastGatedDelta, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (const Case& c : {Case{2, 70, 2, 4, 128, 128}, Case{3, 1, 1, 2, 64, 40}, Case{1, 9, 1, 1, 96, 32}}) {
    for (Dtype dt : {float32, bfloat16, float16}) {
      SCOPED_TRACE(describe(c) + " " + dtype_name(dt));
      const Inputs in = make_inputs(c, dt, float32);
      auto run = [&](Device d) { return fast::gated_delta_steps(in.q, in.k, in.v, in.g, in.beta, in.state, d); };
      auto [yg, sg] = run(Device::gpu);
      auto [yc, sc] = run(Device::cpu);
      EXPECT_TRUE(is_node(yg));
      expect_allclose(astype(yg, float32), astype(yc, float32), tol_of(dt), tol_of(dt));
      expect_allclose(sg, sc, 1e-4, 1e-4);
    }
  }
}

namespace {

// The GPU's chunked kernel (gated_delta from T 64 on) against its recurrent one
// (gated_delta_steps, every step's state) on one case: the same rule, summed in another order.
void expect_chunked_matches_recurrent(const Case& c, Dtype dt, Dtype state_dt) {
  SCOPED_TRACE(describe(c) + " " + dtype_name(dt) + " state " + dtype_name(state_dt));
  const Inputs in = make_inputs(c, dt, state_dt);
  auto [yc, sc] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state, Device::gpu);
  auto [yr, states] = fast::gated_delta_steps(in.q, in.k, in.v, in.g, in.beta, in.state, Device::gpu);
  const array last = squeeze(slice(states, {0, c.t - 1, 0, 0, 0}, states.shape()), 1);
  // y is rounded to dt by both, the states to state_dt; the float32 sums differ in order only.
  const double tol = dt == float32 ? 5e-5 : 1.6e-2;
  const double state_tol = state_dt == float32 ? 5e-5 : 1.6e-2;
  expect_allclose(astype(yc, float32), astype(yr, float32), tol, tol);
  expect_allclose(astype(sc, float32), astype(last, float32), state_tol, state_tol);
}

const std::vector<Case>& chunked_cases() {
  static const std::vector<Case> cases = {
      {1, 64, 1, 2, 128, 128}, {2, 65, 2, 4, 64, 48}, {1, 200, 1, 1, 32, 16}, {2, 1000, 2, 2, 128, 64},
      {1, 129, 3, 3, 120, 32},
  };
  return cases;
}

} // namespace

TEST(FastGatedDelta, ChunkedMatchesRecurrent) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (const Case& c : chunked_cases()) {
    for (Dtype dt : {float32, bfloat16}) expect_chunked_matches_recurrent(c, dt, float32);
  }
}

// The chunked kernels on tensor cores (NUVEC_GATED_DELTA_TENSOR_CORES=1: the prepare kernel
// and the state pass with tf32 products, float32 operands split in two): the same checks as
// the CUDA-core kernels, plus f16 inputs, a 16-bit state, Dk 40 (an odd count of k steps),
// Dv 160 (two panels of values), the slots mode and decays of any sign against the float64
// loop.
TEST(FastGatedDelta, ChunkedOnTensorCores) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  ScopedEnv on("NUVEC_GATED_DELTA_TENSOR_CORES", "1");
  for (const Case& c : chunked_cases()) {
    for (Dtype dt : {float32, bfloat16, float16}) expect_chunked_matches_recurrent(c, dt, float32);
  }
  expect_chunked_matches_recurrent({3, 64, 1, 2, 40, 16}, float32, float32);
  expect_chunked_matches_recurrent({1, 70, 1, 1, 64, 160}, bfloat16, float32); // two panels of values
  {
    // The switch took effect (it is read at launch, so each result is evaluated in its
    // scope): the tensor cores sum in another order, so on a long sequence some element of y
    // differs from the CUDA-core kernels' in its last bits.
    const Case c{2, 1000, 2, 2, 128, 64};
    const Inputs in = make_inputs(c, float32, float32);
    array y_tc = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state, Device::gpu).first;
    eval(y_tc);
    ScopedEnv off("NUVEC_GATED_DELTA_TENSOR_CORES", "0");
    array y_cc = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state, Device::gpu).first;
    eval(y_cc);
    EXPECT_FALSE(array_equal(y_tc, y_cc).item<bool>()) << "the tensor-core kernels did not run";
  }
  expect_chunked_matches_recurrent({1, 150, 1, 2, 128, 32}, bfloat16, bfloat16);
  {
    // Sequences 0..2 at pool rows 4, 0, 2; rows 1, 3, 5 untouched.
    const Case c{3, 100, 1, 2, 64, 32};
    SCOPED_TRACE("slots " + describe(c));
    const Inputs in = make_inputs(c, float32, float32);
    const array pool = multiply(randn({6, c.hv, c.dv, c.dk}), array(0.3f));
    const array slots = array({4, 0, 2}, int32);
    auto [y, updated] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, slots, Device::gpu);
    auto [want_y, want_s] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, take(pool, slots, 0), Device::cpu);
    expect_allclose(y, want_y, 5e-5, 5e-5);
    expect_allclose(take(updated, slots, 0), want_s, 5e-5, 5e-5);
    const array others = array({1, 3, 5}, int32);
    expect_allclose(take(updated, others, 0), take(pool, others, 0), 0, 0);
  }
  {
    const Case c{1, 130, 1, 2, 64, 32};
    SCOPED_TRACE("decays of any sign " + describe(c));
    Inputs in = make_inputs(c, float32, float32);
    const array u = uniform({c.b, c.t, c.hv}, 0.0, 1.0, float32);
    in.g = where(less(u, array(0.1f)), array(0.f),
                 where(less(u, array(0.2f)), array(1.f), uniform({c.b, c.t, c.hv}, -1.0, 1.0, float32)));
    const Reference r = reference(in, c);
    auto [y, s] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state, Device::gpu);
    expect_near_vector(y, r.y, 4e-4);
    expect_near_vector(s, r.final_state, 4e-4);
  }
}

// Decays are taken as any real number, not only (0, 1]: zeros (a reset), negatives and ones,
// on every backend (the chunked GPU kernel carries the sign beside the log-decay).
TEST(FastGatedDelta, DecaysOfAnySign) {
  for (const Case& c : {Case{1, 130, 1, 2, 64, 32}, Case{2, 9, 1, 1, 32, 16}}) {
    SCOPED_TRACE(describe(c));
    Inputs in = make_inputs(c, float32, float32);
    const array u = uniform({c.b, c.t, c.hv}, 0.0, 1.0, float32);
    // A tenth of the steps reset the state, a tenth keep it, the rest decay with either sign.
    in.g = where(less(u, array(0.1f)), array(0.f),
                 where(less(u, array(0.2f)), array(1.f), uniform({c.b, c.t, c.hv}, -1.0, 1.0, float32)));
    ASSERT_EQ(in.g.dtype(), float32);
    const Reference r = reference(in, c);
    auto [y, s] = fast::gated_delta(in.q, in.k, in.v, in.g, in.beta, in.state);
    EXPECT_TRUE(is_node(y));
    expect_near_vector(y, r.y, 4e-4);
    expect_near_vector(s, r.final_state, 4e-4);
  }
}

TEST(FastGatedDelta, GradientsOfEveryInput) {
  // Both outputs enter the loss: y and the final state (or every state, or the pool).
  const Case c{2, 3, 1, 2, 8, 3};
  const Inputs in = make_inputs(c, float64, float64);
  auto joined = [](const std::pair<array, array>& o) {
    return concatenate({flatten(o.first), flatten(o.second)}, 0);
  };
  GradCheckOptions opts;
  opts.rtol = 1e-5;
  opts.atol = 1e-6;
  check_grad([&](const std::vector<array>& x) {
    return joined(fast::gated_delta(x[0], x[1], x[2], x[3], x[4], x[5]));
  }, {in.q, in.k, in.v, in.g, in.beta, in.state}, opts);
  check_grad([&](const std::vector<array>& x) {
    return joined(fast::gated_delta_steps(x[0], x[1], x[2], x[3], x[4], x[5]));
  }, {in.q, in.k, in.v, in.g, in.beta, in.state}, opts);
  const array pool = randn({4, c.hv, c.dv, c.dk}), slots = array({3, 1}, int32);
  check_grad([&](const std::vector<array>& x) {
    return joined(fast::gated_delta_slots(x[0], x[1], x[2], x[3], x[4], x[5], slots));
  }, {in.q, in.k, in.v, in.g, in.beta, pool}, opts);
  // The kernel's node (float32) differentiates through the same graph: its vjp matches the
  // float64 one to float32 rounding.
  const Inputs f = make_inputs({1, 4, 1, 2, 32, 8}, float32, float32);
  auto loss = [](const std::vector<array>& x) {
    auto [y, s] = fast::gated_delta(x[0], x[1], x[2], x[3], x[4], x[5]);
    return sum(square(y)) + sum(s);
  };
  std::vector<array> args{f.q, f.k, f.v, f.g, f.beta, f.state};
  auto grads = grad(loss, {0, 1, 2, 3, 4, 5})(args);
  std::vector<array> wide;
  for (auto& a : args) wide.push_back(astype(a, float64));
  auto grads64 = grad(loss, {0, 1, 2, 3, 4, 5})(wide);
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    expect_allclose(astype(grads[i], float64), grads64[i], 1e-3, 1e-4);
  }
}

// The backward kernel (GatedDeltaVjp, the recurrence run backwards over chunks recomputed from
// checkpoints) against the vjp of the fallback graph, in float64: T across the checkpoint
// chunks of kGatedDeltaVjpChunk (1, 63, 64, 65, 200), Hv / Hk 1, 2 and 4 (dq and dk summed
// over value heads), odd head sizes; cotangents of both outputs, of y alone (the state's
// zeros) and of the state alone. On the CPU, where the node is recorded.
TEST(FastGatedDelta, BackwardKernelMatchesTheFallbackVjp) {
  if (default_device() != Device::cpu) GTEST_SKIP() << "GatedDeltaVjp is recorded on the CPU";
  for (const Case& c : {Case{2, 1, 1, 1, 5, 3}, Case{1, 63, 2, 4, 8, 5}, Case{2, 64, 1, 2, 33, 7},
                        Case{1, 65, 2, 2, 16, 16}, Case{1, 200, 1, 4, 9, 6}}) {
    SCOPED_TRACE(describe(c));
    const Inputs in = make_inputs(c, float64, float64);
    const std::vector<array> primals{in.q, in.k, in.v, in.g, in.beta, in.state};
    const array dy = randn({c.b, c.t, c.hv, c.dv}, float64), ds = randn({c.b, c.hv, c.dv, c.dk}, float64);
    for (int which = 0; which < 3; ++which) {
      SCOPED_TRACE(which == 0 ? "both cotangents" : which == 1 ? "y's alone" : "the state's alone");
      const std::vector<array> cot{which == 2 ? zeros_like(dy) : dy, which == 1 ? zeros_like(ds) : ds};
      auto [outs, grads] = vjp([](const std::vector<array>& x) {
        auto [y, s] = fast::gated_delta(x[0], x[1], x[2], x[3], x[4], x[5]);
        return std::vector<array>{y, s};
      }, primals, cot);
      ASSERT_TRUE(grads[0].has_primitive());
      EXPECT_STREQ(grads[0].primitive().name(), "GatedDeltaVjp");
      auto& node = dynamic_cast<fast::FastPrimitive&>(grads[0].primitive());
      std::vector<array> node_in = primals;
      node_in.insert(node_in.end(), cot.begin(), cot.end());
      const std::vector<array> want = node.fallback()(node_in);
      for (int i = 0; i < 6; ++i) {
        SCOPED_TRACE("input " + std::to_string(i));
        ASSERT_EQ(grads[i].shape(), primals[i].shape());
        expect_allclose(grads[i], want[i], 1e-9, 1e-10);
      }
    }
  }
}

// The backward kernel in float32 and bfloat16 (bfloat16 q, k, v, g, beta, a float32 state):
// its gradients in the inputs' dtypes, within their rounding of the float64 ones.
TEST(FastGatedDelta, BackwardKernelInLowPrecision) {
  if (default_device() != Device::cpu) GTEST_SKIP() << "GatedDeltaVjp is recorded on the CPU";
  const Case c{2, 70, 2, 4, 32, 16};
  const Inputs wide = make_inputs(c, float64, float64);
  auto loss = [](const std::vector<array>& x) {
    auto [y, s] = fast::gated_delta(x[0], x[1], x[2], x[3], x[4], x[5]);
    return sum(square(y)) + sum(multiply(s, s));
  };
  for (Dtype dt : {float32, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<array> args{astype(wide.q, dt), astype(wide.k, dt), astype(wide.v, dt), astype(wide.g, dt),
                            astype(wide.beta, dt), astype(wide.state, float32)};
    std::vector<array> args64;
    for (auto& a : args) args64.push_back(astype(a, float64));
    auto grads = grad(loss, {0, 1, 2, 3, 4, 5})(args);
    auto grads64 = grad(loss, {0, 1, 2, 3, 4, 5})(args64);
    for (int i = 0; i < 6; ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      EXPECT_EQ(grads[i].dtype(), args[i].dtype());
      // Relative to the gradient's scale: bfloat16 rounds y and the gradients it returns.
      const double scale = max(abs(grads64[i])).item<double>();
      const double tol = (dt == float32 ? 2e-4 : 3e-2) * scale;
      expect_allclose(astype(grads[i], float64), grads64[i], 0.0, tol);
    }
  }
}

// GatedDeltaVjp's CUDA kernel against its CPU kernel on the same inputs (the node recorded on
// each device): float32 and bfloat16 q, k, v with float32 and bfloat16 states; T across the
// checkpoint chunks; Hv / Hk 1 and 4 (dq and dk summed with atomics); Dk 32, 48 (a partial
// lane column), 128 and Dv 16, 128. Then GatedDelta's vjp on the GPU with the kernel (NUVEC_GATED_DELTA_VJP_GPU=1,
// the default) against the fallback's rule there (=0).
TEST(FastGatedDelta, GpuBackwardMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  const Device cpu(Device::cpu), gpu(Device::gpu);
  for (const Case& c : {Case{2, 1, 1, 1, 32, 16}, Case{1, 65, 1, 4, 128, 128}, Case{2, 130, 2, 2, 48, 16},
                        Case{1, 64, 4, 4, 128, 16}}) {
    for (auto [dt, st] : {std::pair{float32, float32}, std::pair{bfloat16, float32}, std::pair{bfloat16, bfloat16}}) {
      SCOPED_TRACE(describe(c) + " " + dtype_name(dt) + " state " + dtype_name(st));
      const Inputs in = make_inputs(c, dt, st);
      std::vector<array> node_in{in.q, in.k, in.v, in.g, in.beta, in.state,
                                 astype(randn({c.b, c.t, c.hv, c.dv}), dt), astype(randn({c.b, c.hv, c.dv, c.dk}), st)};
      eval(node_in);
      std::vector<Shape> shapes;
      std::vector<Dtype> dtypes;
      for (int i = 0; i < 6; ++i) {
        shapes.push_back(node_in[i].shape());
        dtypes.push_back(node_in[i].dtype());
      }
      auto on = [&](Device d) {
        auto g = array::make_arrays(shapes, dtypes, std::make_shared<GatedDeltaVjp>(default_stream(d)), node_in);
        eval(g);
        return g;
      };
      const auto want = on(cpu), got = on(gpu);
      for (int i = 0; i < 6; ++i) {
        SCOPED_TRACE("gradient " + std::to_string(i));
        const double scale = max(abs(astype(want[i], float32, cpu)), cpu).item<float>() + 1e-6;
        const double tol = (dtypes[i] == float32 ? 1e-4 : 1e-2) * scale;
        expect_allclose(astype(got[i], float32, cpu), astype(want[i], float32, cpu), 0.0, tol);
      }
    }
  }
  const Inputs in = make_inputs({1, 70, 2, 4, 64, 32}, float32, float32);
  auto loss = [&](const std::vector<array>& x) {
    auto [y, s] = fast::gated_delta(x[0], x[1], x[2], x[3], x[4], x[5], gpu);
    return sum(square(y), gpu) + sum(s, gpu);
  };
  std::vector<array> args{in.q, in.k, in.v, in.g, in.beta, in.state};
  auto grads_with = [&](const char* kernel_on) {
    ScopedEnv on("NUVEC_GATED_DELTA_VJP_GPU", kernel_on);
    auto g = grad(loss, {0, 1, 2, 3, 4, 5})(args);
    eval(g);
    return g;
  };
  auto kernel = grads_with("1");
  auto graph = grads_with("0");
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    expect_allclose(kernel[i], graph[i], 1e-3, 1e-4);
  }
}

TEST(FastGatedDelta, VmapFoldsIntoTheBatch) {
  const Case c{2, 3, 1, 2, 32, 8};
  const int n = 3;
  // Batched q, v, beta and state (on other axes than B), unbatched k and g.
  const Inputs in = make_inputs({n * c.b, c.t, c.hk, c.hv, c.dk, c.dv}, float32, float32);
  auto split = [&](const array& x, int axis) {
    Shape s = x.shape();
    s[0] = c.b;
    s.insert(s.begin(), n);
    return moveaxis(reshape(x, s), 0, axis);
  };
  const array k = slice(in.k, {0, 0, 0, 0}, {c.b, c.t, c.hk, c.dk});
  const array g = slice(in.g, {0, 0, 0}, {c.b, c.t, c.hv});
  const std::vector<array> batched{split(in.q, 1), k, split(in.v, 0), g, split(in.beta, 3), split(in.state, 2)};
  const std::vector<int> axes{1, -1, 0, -1, 3, 2};
  for (bool steps : {false, true}) {
    SCOPED_TRACE(steps ? "steps" : "final");
    check_vmap(
        [&](const std::vector<array>& x) {
          auto [y, s] = steps ? fast::gated_delta_steps(x[0], x[1], x[2], x[3], x[4], x[5])
                              : fast::gated_delta(x[0], x[1], x[2], x[3], x[4], x[5]);
          return std::vector<array>{y, s};
        },
        batched, axes, 1e-5, 1e-5);
  }
  // An empty mapped axis: n = 0 calls, outputs [0, B, ...] (the fold once divided by n).
  for (bool steps : {false, true}) {
    const Inputs one = make_inputs(c, float32, float32);
    const array q0 = zeros({0, c.b, c.t, c.hk, c.dk});
    auto out = vmap(
        [&](const std::vector<array>& x) {
          auto [y, s] = steps ? fast::gated_delta_steps(x[0], one.k, one.v, one.g, one.beta, one.state)
                              : fast::gated_delta(x[0], one.k, one.v, one.g, one.beta, one.state);
          return std::vector<array>{y, s};
        },
        {0})({q0});
    eval(out);
    EXPECT_EQ(out[0].shape(), (Shape{0, c.b, c.t, c.hv, c.dv}));
  }
  // The slots mode over one shared pool batches its fallback.
  const array pool = randn({5, c.hv, c.dv, c.dk}, float32);
  const array slots = stack({array({0, 3}, int32), array({4, 1}, int32), array({2, 0}, int32)}, 0);
  check_vmap(
      [&](const std::vector<array>& x) {
        auto [y, p] = fast::gated_delta_slots(x[0], x[1], x[2], x[3], x[4], pool, x[5]);
        return std::vector<array>{y, p};
      },
      {batched[0], k, batched[2], g, batched[4], slots}, {1, -1, 0, -1, 3, 0}, 1e-5, 1e-5);
}

// A slot outside the pool under vmap (the slots mode's fallback, a take of the pool's rows)
// throws std::out_of_range naming gated_delta_slots, not take.
TEST(FastGatedDelta, VmappedSlotOutOfThePoolNamesTheOp) {
  const Case c{2, 3, 1, 2, 32, 8};
  const Inputs in = make_inputs(c, float32, float32);
  const array pool = randn({5, c.hv, c.dv, c.dk}, float32);
  const array slots = stack({array({0, 3}, int32), array({4, 7}, int32)}, 0); // 7: past the pool
  auto f = [&](const std::vector<array>& x) {
    auto [y, p] = fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, x[0]);
    return std::vector<array>{y, p};
  };
  expect_throws_naming<std::out_of_range>([&] { eval(vmap(f, {0}, {0, 0})({slots})); }, "gated_delta_slots");
}

TEST(FastGatedDelta, BadInput) {
  const Case c{2, 3, 2, 4, 32, 8};
  const Inputs in = make_inputs(c, float32, float32);
  auto call = [](const array& q, const array& k, const array& v, const array& g, const array& beta,
                 const array& state) { return fast::gated_delta(q, k, v, g, beta, state); };
  const std::string op = "[gated_delta]";
  expect_throws_naming<std::invalid_argument>([&] { call(in.q, in.k, in.v, in.g, in.beta, astype(in.state, int32)); }, op);
  expect_throws_naming<std::invalid_argument>([&] { call(astype(in.q, int32), in.k, in.v, in.g, in.beta, in.state); }, op);
  // k of another shape; q not 4-d.
  expect_throws_naming<std::invalid_argument>(
      [&] { call(in.q, slice(in.k, {0, 0, 0, 0}, {2, 3, 2, 16}), in.v, in.g, in.beta, in.state); }, op);
  expect_throws_naming<std::invalid_argument>([&] { call(flatten(in.q), in.k, in.v, in.g, in.beta, in.state); }, op);
  // Hv (3) not a multiple of Hk (2).
  expect_throws_naming<std::invalid_argument>(
      [&] { call(in.q, in.k, zeros({2, 3, 3, 8}), zeros({2, 3, 3}), zeros({2, 3, 3}), zeros({2, 3, 8, 32})); }, op);
  // v of another batch or length; g and beta of the wrong shape; a state of the wrong shape.
  expect_throws_naming<std::invalid_argument>(
      [&] { call(in.q, in.k, zeros({2, 4, 4, 8}), in.g, in.beta, in.state); }, op);
  expect_throws_naming<std::invalid_argument>([&] { call(in.q, in.k, in.v, zeros({2, 3, 2}), in.beta, in.state); }, op);
  expect_throws_naming<std::invalid_argument>([&] { call(in.q, in.k, in.v, in.g, zeros({2, 3}), in.state); }, op);
  expect_throws_naming<std::invalid_argument>(
      [&] { call(in.q, in.k, in.v, in.g, in.beta, zeros({2, 4, 32, 8})); }, op);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::gated_delta_steps(in.q, in.k, in.v, in.g, in.beta, zeros({1, 4, 8, 32})); }, "[gated_delta_steps]");
  // The pool's rows must be states; slots one integer per sequence.
  const std::string sop = "[gated_delta_slots]";
  const array pool = zeros({5, 4, 8, 32});
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, zeros({5, 4, 8, 16}), array({0, 1}, int32)); }, sop);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, array({0.0f, 1.0f})); }, sop);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, array({0, 1, 2}, int32)); }, sop);
  expect_throws_naming<std::invalid_argument>(
      [&] { fast::gated_delta_slots(in.q, in.k, in.v, in.g, in.beta, pool, reshape(array({0, 1}, int32), {1, 2})); }, sop);
}
