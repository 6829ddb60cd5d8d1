// The CPU kernels of the attention primitives (src/backend/cpu/fast/attention.cpp):
// ScaledDotProductAttention's online-softmax loop recorded directly on a CPU stream, against
// fast::attention_graph (the fallback, the op's meaning) evaluated on float64 casts of the
// same inputs: float32, float16, bfloat16; D 24, 64, 80, 128; Lq 1 to 1000, Lk 1 to 4109;
// query heads per key head 1, 4, 8; no mask, causal (rows that see nothing when Lq > Lk),
// windows, bool masks with a row all false, additive masks broadcast from [1, 1, Lq, Lk] and
// [B, 1, 1, Lk] with a row all −inf, sinks; the lse output; q, k and v read through strides
// (slices of larger buffers, a transposed layout, a k whose last axis is strided). The shapes
// reach both loops (tasks of at most 8 rows, decode, take the dot-product one). Every vector
// version gives the same bits. PagedWrite's kernel against an explicit loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/simd.h"
#include "fast/attention.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

enum class MaskKind { none, boolean, add_rows, add_batch };

struct Case {
  int b, hq, hkv, lq, lk, d, dv;
  bool causal = false;
  int window = 0;
  MaskKind mask = MaskKind::none;
  bool sinks = false;
  bool strided = false; // q, k, v as views into larger buffers (k's last axis strided)

  std::string name(Dtype dt) const {
    std::string s = std::string(dtype_name(dt)) + " B" + std::to_string(b) + " Hq" + std::to_string(hq) + " Hkv" +
        std::to_string(hkv) + " Lq" + std::to_string(lq) + " Lk" + std::to_string(lk) + " D" + std::to_string(d) +
        " Dv" + std::to_string(dv);
    if (causal) s += " causal";
    if (window) s += " window " + std::to_string(window);
    const char* m[] = {"", " bool mask", " additive [1,1,Lq,Lk]", " additive [B,1,1,Lk]"};
    s += m[static_cast<int>(mask)];
    if (sinks) s += " sinks";
    if (strided) s += " strided";
    return s;
  }
};

Stream cpu_stream() {
  return default_stream(Device(Device::cpu));
}

// Normal(0, 1) samples in dtype from nuvec's generator (quicker than test_utils' randn for
// the millions of elements here), keyed from the test's seed so a failure replays.
array normal_of(const Shape& shape, Dtype dt) {
  return random::normal(shape, dt, std::nullopt, std::nullopt, random::key(rng()()));
}

// A [b, h, l, d] input: plain, or (strided) a slice along L of a [b, l + 5, h, d] buffer seen
// as [b, h, l, d], with (last_strided) its last axis strided too.
array input_of(int b, int h, int l, int d, Dtype dt, bool strided, bool last_strided = false) {
  if (!strided) return normal_of({b, h, l, d}, dt);
  if (last_strided) {
    array buf = normal_of({b, h, d, l + 5}, dt);
    return swapaxes(slice(buf, {0, 0, 0, 3}, {b, h, d, l + 3}), 2, 3);
  }
  array buf = normal_of({b, l + 5, h, d}, dt);
  return swapaxes(slice(buf, {0, 2, 0, 0}, {b, l + 2, h, d}), 1, 2);
}

// q, k and v of a case's shape (evaluated; a shape's variants share them).
std::vector<array> qkv_of(const Case& c, Dtype dt) {
  std::vector<array> in = {
      input_of(c.b, c.hq, c.lq, c.d, dt, c.strided), input_of(c.b, c.hkv, c.lk, c.d, dt, c.strided, true),
      input_of(c.b, c.hkv, c.lk, c.dv, dt, c.strided)};
  eval(in);
  return in;
}

// The inputs {q, k, v[, mask][, sinks]} of a case (evaluated) from its q, k and v, the mask
// broadcast to [B, Hq, Lq, Lk] as the op passes it.
std::vector<array> inputs_of(const Case& c, Dtype dt, std::vector<array> in) {
  const Shape full{c.b, c.hq, c.lq, c.lk};
  if (c.mask == MaskKind::boolean) {
    // About 70% visible, and the last query row of batch 0, head 0 sees nothing.
    array m = less(random::uniform(full, float32, random::key(rng()())), array(0.7f));
    array row = less(arange(0, c.lq, 1), array(c.lq - 1, int32)); // false on the last row
    array hide = logical_or(
        reshape(row, {1, 1, c.lq, 1}),
        reshape(greater(arange(0, c.b * c.hq, 1), array(0, int32)), {c.b, c.hq, 1, 1}));
    in.push_back(logical_and(m, hide));
  } else if (c.mask == MaskKind::add_rows) {
    // Random logits added, the last row −inf everywhere (NaN out, −inf lse) when Lq > 1.
    array m = multiply(normal_of({1, 1, c.lq, c.lk}, dt), array(2.0, dt));
    if (c.lq > 1) {
      array last = equal(reshape(arange(0, c.lq, 1), {1, 1, c.lq, 1}), array(c.lq - 1, int32));
      m = where(last, array(-std::numeric_limits<float>::infinity(), dt), m);
    }
    in.push_back(broadcast_to(m, full));
  } else if (c.mask == MaskKind::add_batch) {
    in.push_back(broadcast_to(random::uniform(-3.0, 1.0, {c.b, 1, 1, c.lk}, dt, random::key(rng()())), full));
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
  p.has_mask = c.mask != MaskKind::none;
  p.has_sinks = c.sinks;
  return p;
}

// The CPU kernel: the node recorded directly (no planner), evaluated: {out, lse}.
std::vector<array> kernel(const std::vector<array>& in, const fast::AttentionParams& p) {
  const Shape& q = in[0].shape();
  auto outs = array::make_arrays(
      {{q[0], q[1], q[2], in[2].shape(3)}, {q[0], q[1], q[2]}}, {in[0].dtype(), float32},
      std::make_shared<ScaledDotProductAttention>(cpu_stream(), p), in);
  eval(outs);
  return outs;
}

// The fallback graph on float64 casts of the inputs (a bool mask stays bool).
std::vector<array> reference(const std::vector<array>& in, const fast::AttentionParams& p) {
  std::vector<array> in64;
  for (const array& a : in) in64.push_back(a.dtype() == bool_ ? a : astype(a, float64));
  auto outs = fast::attention_graph(in64, p, std::nullopt, cpu_stream());
  eval(outs);
  return outs;
}

std::vector<Case> variants(Case s);

double out_tol(Dtype dt) {
  return dt == float32 ? 3e-5 : dt == float16 ? 2e-3 : 1.6e-2;
}

// Checks the kernel's {out, lse} against the float64 fallback. A row that sees no key has
// lse = lowest + log Lk with the dtype's lowest (the float64 graph's is float64's lowest):
// such rows are checked against that formula in float32.
void check_case(const Case& c, Dtype dt, const std::vector<array>& qkv) {
  SCOPED_TRACE(c.name(dt));
  const auto in = inputs_of(c, dt, qkv);
  const auto p = params_of(c);
  const auto got = kernel(in, p);
  const auto ref = reference(in, p);
  ASSERT_EQ(got[0].dtype(), dt);
  ASSERT_EQ(got[1].dtype(), float32);
  expect_allclose(got[0], ref[0], out_tol(dt), out_tol(dt));
  std::vector<double> lse = to_vector(ref[1]);
  const float lowest = static_cast<float>(finfo(dt).min);
  for (double& x : lse) {
    if (std::isfinite(x) && x < -1e300) x = static_cast<double>(lowest + std::log(static_cast<float>(c.lk)));
  }
  expect_close(got[1], ref[1].shape(), lse, 1e-5, 1e-4);
}

void check_case(const Case& c, Dtype dt) {
  check_case(c, dt, qkv_of(c, dt));
}

// Every variant of a shape on one q, k, v.
void check_variants(const Case& shape, Dtype dt) {
  const auto qkv = qkv_of(shape, dt);
  for (const Case& c : variants(shape)) check_case(c, dt, qkv);
}

// The shapes: decode (Lq 1, 3, 8) and prefill (17, 1000), keys 1, 7 and 4109, head sizes
// 24, 64, 80, 128, query heads per key head 1, 4, 8.
std::vector<Case> shapes() {
  return {
      {2, 4, 4, 1, 7, 64, 64},      {1, 8, 1, 3, 4109, 128, 128}, {2, 8, 2, 8, 1, 80, 80},
      {1, 4, 1, 17, 7, 24, 24},     {1, 4, 4, 17, 4109, 64, 64},  {1, 8, 8, 1, 4109, 80, 80},
      {1, 8, 1, 17, 7, 128, 64},    {2, 4, 4, 3, 1, 24, 80},
  };
}

// The mask variants of one shape: everything the loop distinguishes.
std::vector<Case> variants(Case s) {
  std::vector<Case> v;
  auto with = [&](bool causal, int window, MaskKind m, bool sinks) {
    Case c = s;
    c.causal = causal;
    c.window = window;
    c.mask = m;
    c.sinks = sinks;
    v.push_back(c);
  };
  with(false, 0, MaskKind::none, false);
  with(true, 0, MaskKind::none, false);
  with(true, 3, MaskKind::none, false);
  with(false, 0, MaskKind::boolean, false);
  with(false, 0, MaskKind::add_rows, false);
  with(false, 0, MaskKind::add_batch, false);
  with(false, 0, MaskKind::none, true);
  with(true, 0, MaskKind::none, true);
  with(false, 0, MaskKind::boolean, true);
  with(false, 0, MaskKind::add_rows, true);
  return v;
}

} // namespace

// The CPU kernels: the suite's run with the GPU as default device (NUVEC_TEST_DEVICE=gpu)
// would repeat the same CPU work, so it skips.
class FastAttentionCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (default_device() == Device::gpu) GTEST_SKIP() << "CPU kernels; the CPU run checks them";
  }
};

TEST_F(FastAttentionCpu, KernelMatchesTheFallbackInFloat64) {
  for (Dtype dt : {float32, float16, bfloat16}) {
    for (const Case& s : shapes()) check_variants(s, dt);
  }
}

// Long queries (Lq 1000, so many query blocks and, under causal, blocks that skip keys), few
// heads to keep the float64 reference quick: Lq <= Lk and Lq > Lk.
TEST_F(FastAttentionCpu, LongQueries) {
  for (Dtype dt : {float32, float16, bfloat16}) {
    check_case({1, 1, 1, 1000, 4109, 64, 64, true}, dt);
    check_case({1, 4, 1, 1000, 7, 64, 64, true, 5}, dt);
  }
  check_case({1, 2, 2, 1000, 1000, 80, 80}, float32);
  check_case({1, 4, 4, 1000, 17, 128, 128, false, 0, MaskKind::add_batch}, bfloat16);
  check_case({1, 8, 2, 1000, 1000, 64, 64, true, 100, MaskKind::none, true}, float16);
}

// q, k and v as slices of larger buffers, transposed from [B, L, H, D], k's last axis strided
// (the kernel copies it; the others are read in place), with masks and GQA.
TEST_F(FastAttentionCpu, StridedInputs) {
  for (Dtype dt : {float32, float16, bfloat16}) {
    for (Case c : {Case{2, 8, 2, 17, 300, 64, 64}, Case{1, 4, 1, 3, 4109, 128, 128}, Case{2, 4, 4, 40, 33, 80, 80},
                   Case{2, 4, 2, 1, 300, 80, 80}}) {
      c.strided = true;
      check_variants(c, dt);
    }
  }
}

// Every vector version (baseline, AVX2, AVX-512, as far as this CPU goes) gives the same bits:
// the loops fix the order of every sum, and contraction is off in all of them.
TEST_F(FastAttentionCpu, SameBitsInEveryVectorVersion) {
  const cpu::Isa widest = cpu::active_isa();
  for (Dtype dt : {float32, bfloat16}) {
    for (Case c : {Case{1, 8, 2, 33, 300, 80, 80, true}, Case{2, 4, 4, 1, 129, 64, 64, false, 0, MaskKind::boolean}}) {
      SCOPED_TRACE(c.name(dt));
      const auto in = inputs_of(c, dt, qkv_of(c, dt));
      std::vector<std::vector<array>> outs;
      for (auto isa : {cpu::Isa::baseline, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (isa > widest) continue;
        cpu::set_isa(isa);
        outs.push_back(kernel(in, params_of(c)));
      }
      cpu::set_isa(widest);
      for (size_t i = 1; i < outs.size(); ++i) {
        for (int o = 0; o < 2; ++o) {
          const array& a = outs[0][o];
          const array& b = outs[i][o];
          EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "version " << i << " output " << o;
        }
      }
    }
  }
}

// The kernel through the public op on the CPU (the planner's Tiled route records it).
TEST_F(FastAttentionCpu, PublicOpRunsTheKernel) {
  array q = astype(randn({1, 8, 5, 64}), float32), k = astype(randn({1, 2, 9, 64}), float32),
        v = astype(randn({1, 2, 9, 64}), float32);
  fast::AttentionOptions o;
  o.mask_mode = "causal";
  array out = fast::scaled_dot_product_attention(q, k, v, 0.125f, o, Device(Device::cpu));
  EXPECT_STREQ(out.primitive().name(), "ScaledDotProductAttention");
  fast::AttentionParams p;
  p.scale = 0.125f;
  p.causal = true;
  auto ref = reference({q, k, v}, p);
  expect_allclose(out, ref[0], 3e-5, 3e-5);
}

// PagedWrite's kernel against a loop: the cache (a transposed view, so the kernel copies it
// from strides) with rows written at their slots; slots out of range (negative, past the
// end) write nothing. Each dtype size.
TEST_F(FastAttentionCpu, PagedWriteKernel) {
  const int blocks = 3, hkv = 2, bs = 4, d = 5;
  for (Dtype dt : {float32, float16, int8, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    array cache = swapaxes(astype(multiply(randn({blocks, bs, hkv, d}), array(20.0, float64)), dt), 1, 2);
    array values = astype(multiply(randn({5, hkv, d}), array(20.0, float64)), dt);
    array slots = array({7, -1, 0, 12, 11}, int32);
    eval({cache, values, slots});
    array out = array::make_arrays(
        {cache.shape()}, {dt}, std::make_shared<PagedWrite>(cpu_stream()), {cache, values, slots})[0];
    std::vector<double> want = to_vector(cache);
    const std::vector<double> vals = to_vector(values);
    const int sl[] = {7, -1, 0, 12, 11};
    for (int n = 0; n < 5; ++n) {
      if (sl[n] < 0 || sl[n] >= blocks * bs) continue;
      for (int h = 0; h < hkv; ++h) {
        for (int x = 0; x < d; ++x) {
          want[((sl[n] / bs * hkv + h) * bs + sl[n] % bs) * d + x] = vals[(n * hkv + h) * d + x];
        }
      }
    }
    expect_close(out, cache.shape(), want, 0.0, 0.0);
  }
}

// The primitives the CPU never records say so, and the kernel names the op for a dtype it
// does not take (float64 runs the composed graph).
TEST_F(FastAttentionCpu, UnrecordedPrimitivesThrow) {
  const Case c{1, 2, 1, 3, 5, 8, 8};
  const auto in64 = qkv_of(c, float64);
  expect_throws_naming<std::invalid_argument>([&] { kernel(in64, params_of(c)); }, "scaled_dot_product_attention");
  array q = zeros({1, 1, 1, 4}, float32);
  auto p = std::make_shared<PagedAttention>(cpu_stream(), 1.0f);
  std::vector<array> outs = {q};
  EXPECT_THROW(p->eval_cpu({q}, outs), std::logic_error);
  auto vjp = std::make_shared<ScaledDotProductAttentionVjp>(cpu_stream(), fast::AttentionParams{});
  EXPECT_THROW(vjp->eval_cpu({q}, outs), std::logic_error);
}
