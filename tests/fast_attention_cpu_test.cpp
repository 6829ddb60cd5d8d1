// The CPU kernels of the attention primitives (src/backend/cpu/fast/attention.cpp):
// ScaledDotProductAttention's online-softmax loop recorded directly on a CPU stream, against
// fast::attention_graph (the fallback, the op's meaning) evaluated on float64 casts of the
// same inputs: float32, float16, bfloat16; D 24, 64, 80, 128; Lq 1 to 1000, Lk 1 to 4109;
// query heads per key head 1, 4, 8; no mask, causal (rows that see nothing when Lq > Lk),
// windows, bool masks with rows all false, additive masks broadcast from [1, 1, Lq, Lk] (a
// row all −inf) and [B, 1, 1, Lk], sinks; the lse output; q, k and v read through strides
// (slices of larger buffers, a transposed layout, a k whose last axis is strided). The shapes
// reach both loops (tasks of at most 8 rows, decode, take the dot-product one). Every vector
// version gives the same bits. PagedWrite's kernel against an explicit loop. Cases, inputs
// and the reference: tests/attention_cases.h.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "attention_cases.h"
#include "backend/cpu/simd.h"
#include "fast/attention.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
using namespace nuvec::testing::attn;

namespace {

// The CPU kernel against the float64 fallback, on the given q, k and v.
void check_case(const Case& c, Dtype dt, const Inputs& qkv) {
  SCOPED_TRACE(c.name(dt));
  check_kernel(c, dt, make_inputs(c, dt, qkv), params_of(c, standard_scale(c)), Device::cpu, tol_of(dt), 1e-5);
}

void check_case(const Case& c, Dtype dt) {
  check_case(c, dt, make_qkv(c, dt));
}

// Every variant of a shape on one q, k, v.
void check_variants(const Case& shape, Dtype dt) {
  const Inputs qkv = make_qkv(shape, dt);
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
  check_case({1, 4, 4, 1000, 17, 128, 128, false, 0, Mask::additive_batch}, bfloat16);
  check_case({1, 8, 2, 1000, 1000, 64, 64, true, 100, Mask::none, true}, float16);
}

// q, k and v as slices of larger buffers, transposed from [B, L, H, D], k's last axis strided
// (the kernel copies it; the others are read in place), with masks and GQA.
TEST_F(FastAttentionCpu, StridedInputs) {
  for (Dtype dt : {float32, float16, bfloat16}) {
    for (Case c : {Case{2, 8, 2, 17, 300, 64, 64}, Case{1, 4, 1, 3, 4109, 128, 128}, Case{2, 4, 4, 40, 33, 80, 80},
                   Case{2, 4, 2, 1, 300, 80, 80}}) {
      c.q_layout = c.v_layout = Layout::sequence_major;
      c.k_layout = Layout::strided_last;
      check_variants(c, dt);
    }
  }
}

// Every vector version (baseline, AVX2, AVX-512, as far as this CPU goes) gives the same bits:
// the loops fix the order of every sum, and contraction is off in all of them.
TEST_F(FastAttentionCpu, SameBitsInEveryVectorVersion) {
  const cpu::Isa widest = cpu::active_isa();
  for (Dtype dt : {float32, bfloat16}) {
    for (Case c : {Case{1, 8, 2, 33, 300, 80, 80, true}, Case{2, 4, 4, 1, 129, 64, 64, false, 0, Mask::boolean}}) {
      SCOPED_TRACE(c.name(dt));
      const Inputs in = make_inputs(c, dt);
      std::vector<Outputs> outs;
      for (auto isa : {cpu::Isa::baseline, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (isa > widest) continue;
        cpu::set_isa(isa);
        outs.push_back(record_attention(in, params_of(c, standard_scale(c)), Device::cpu));
      }
      cpu::set_isa(widest);
      for (size_t i = 1; i < outs.size(); ++i) {
        for (int o = 0; o < 2; ++o) {
          const array& a = o == 0 ? outs[0].out : outs[0].lse;
          const array& b = o == 0 ? outs[i].out : outs[i].lse;
          EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "version " << i << " output " << o;
        }
      }
    }
  }
}

// The kernel through the public op on the CPU (the planner's Tiled route records it).
TEST_F(FastAttentionCpu, PublicOpRunsTheKernel) {
  const Case c{1, 8, 2, 5, 9, 64, 64, true};
  const Inputs in = make_inputs(c, float32);
  fast::AttentionOptions o;
  o.mask_mode = "causal";
  array out = fast::scaled_dot_product_attention(in.q, in.k, in.v, 0.125f, o, Device(Device::cpu));
  EXPECT_STREQ(out.primitive().name(), "ScaledDotProductAttention");
  expect_allclose(out, reference(c, in, 0.125f).out, tol_of(float32), tol_of(float32));
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
        {cache.shape()}, {dt}, std::make_shared<PagedWrite>(default_stream(kCpu)), {cache, values, slots})[0];
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
  const Inputs in64 = make_inputs(c, float64);
  expect_throws_naming<std::invalid_argument>(
      [&] { record_attention(in64, params_of(c, standard_scale(c)), Device::cpu); }, "scaled_dot_product_attention");
  array q = zeros({1, 1, 1, 4}, float32);
  auto p = std::make_shared<PagedAttention>(default_stream(kCpu), 1.0f);
  std::vector<array> outs = {q};
  EXPECT_THROW(p->eval_cpu({q}, outs), std::logic_error);
  auto vjp = std::make_shared<ScaledDotProductAttentionVjp>(default_stream(kCpu), fast::AttentionParams{});
  EXPECT_THROW(vjp->eval_cpu({q}, outs), std::logic_error);
}
