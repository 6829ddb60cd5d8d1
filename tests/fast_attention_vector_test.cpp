// The CUDA decode attention kernels (cu::attention_vector, src/backend/cuda/fast/
// attention_vector.cu), recorded directly as ScaledDotProductAttention nodes with
// params.passes 1 or 2 and chosen key_blocks, against the fallback graph
// (fast::attention_graph) evaluated in float64 on the CPU: out and lse, every dtype
// (float32, float16, bfloat16), D/Dv 64, 80, 96, 128, 256 (equal and different), Lq 1, 3, 8
// (and beyond), Lk 1, 7, 4109, GQA ratios 1, 4, 8 (and 5, 32), causal (with rows that see
// nothing when Lq > Lk), windows, a bool mask with a fully false row, additive masks of
// broadcast shapes, sinks, K/V read through strides (a slice along L of a longer cache, rows
// that are not 16-byte aligned, a [B, L, H, D] buffer), and two passes with key_blocks from 1
// to more blocks than keys. Rows that see no key follow src/backend/common/attention.h: their
// lse is lowest(dtype) + log Lk, which the float64 graph cannot give (its lowest is float64's),
// so those rows' lse is checked against the rule. GPU suite only (NUVEC_TEST_DEVICE=gpu);
// the schedule test (vector_schedule) is host arithmetic and runs everywhere. One case
// prints the benchmark decode shape's times for one and two passes (no assertion).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fast/attention.h"
#include "fast/attention_plan.h"
#include "nuvec/backend/gpu/device_info.h"
#include "nuvec/nuvec.h"
#include "nuvec/utils.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

#define NUVEC_REQUIRE_GPU_SUITE()                                          \
  if (!gpu::is_available() || default_device() != Device::gpu) GTEST_SKIP() \
      << "GPU suite only (NUVEC_TEST_DEVICE=gpu with a GPU)"

const Device kCpu(Device::cpu);

// One attention configuration as the kernels see it.
struct Case {
  Dtype dt = bfloat16;
  int b = 2, hq = 8, hkv = 2, lq = 3, lk = 7, d = 128, dv = 128;
  bool causal = false;
  int window = 0;
  // 0 none; 1 bool [B, Hq, Lq, Lk] (30% false) with row (0, 0, 0) all false; additive in the
  // dtype: 2 [1, 1, Lq, Lk], 3 [B, 1, 1, Lk], 4 [1, Hq, 1, 1], 5 [B, Hq, Lq, Lk].
  int mask = 0;
  bool sinks = false;
  // 0 contiguous; 1 a slice along L of a cache 5 keys longer (offset 3); 2 a slice of a last
  // axis one element wider (rows not 16-byte aligned: the element-wise copy path); 3 a
  // [B, Lk, Hkv, D] buffer seen as [B, Hkv, Lk, D].
  int layout = 0;
  float scale = 0.37f;

  std::string name() const {
    return std::string(dtype_name(dt)) + " b" + std::to_string(b) + " hq" + std::to_string(hq) + " hkv" +
        std::to_string(hkv) + " lq" + std::to_string(lq) + " lk" + std::to_string(lk) + " d" + std::to_string(d) +
        " dv" + std::to_string(dv) + (causal ? " causal" : "") + (window ? " window" + std::to_string(window) : "") +
        " mask" + std::to_string(mask) + (sinks ? " sinks" : "") + " layout" + std::to_string(layout);
  }

  fast::AttentionParams params(int passes, int key_blocks) const {
    fast::AttentionParams p;
    p.scale = scale;
    p.causal = causal;
    p.window = window;
    p.has_mask = mask != 0;
    p.has_sinks = sinks;
    p.passes = passes;
    p.key_blocks = key_blocks;
    return p;
  }
};

struct Inputs {
  array q, k, v;
  std::optional<array> mask; // broadcast to [B, Hq, Lq, Lk]
  std::optional<array> sinks;
  std::vector<array> list() const {
    std::vector<array> xs{q, k, v};
    if (mask) xs.push_back(*mask);
    if (sinks) xs.push_back(*sinks);
    return xs;
  }
};

// K or V [B, Hkv, Lk, n] in the case's layout, evaluated on the CPU.
array kv_of(const Case& c, int n) {
  array x = zeros({1}, c.dt, kCpu);
  switch (c.layout) {
    case 1: {
      array big = astype(randn({c.b, c.hkv, c.lk + 5, n}), c.dt, kCpu);
      x = slice(big, {0, 0, 3, 0}, {c.b, c.hkv, 3 + c.lk, n}, kCpu);
      break;
    }
    case 2: {
      array big = astype(randn({c.b, c.hkv, c.lk, n + 1}), c.dt, kCpu);
      x = slice(big, {0, 0, 0, 1}, {c.b, c.hkv, c.lk, n + 1}, kCpu);
      break;
    }
    case 3:
      x = transpose(astype(randn({c.b, c.lk, c.hkv, n}), c.dt, kCpu), {0, 2, 1, 3}, kCpu);
      break;
    default:
      x = astype(randn({c.b, c.hkv, c.lk, n}), c.dt, kCpu);
  }
  eval(x);
  return x;
}

Inputs make_inputs(const Case& c) {
  Inputs in{astype(randn({c.b, c.hq, c.lq, c.d}), c.dt, kCpu), kv_of(c, c.d), kv_of(c, c.dv), std::nullopt, std::nullopt};
  const Shape full{c.b, c.hq, c.lq, c.lk};
  if (c.mask == 1) {
    array m = greater(uniform(full, 0, 1), array(0.3), kCpu);
    m = slice_update(m, zeros({1, 1, 1, c.lk}, bool_, kCpu), {0, 0, 0, 0}, {1, 1, 1, c.lk}, kCpu);
    in.mask = m;
  } else if (c.mask >= 2) {
    const Shape shape = c.mask == 2 ? Shape{1, 1, c.lq, c.lk}
        : c.mask == 3               ? Shape{c.b, 1, 1, c.lk}
        : c.mask == 4               ? Shape{1, c.hq, 1, 1}
                                    : full;
    in.mask = astype(uniform(shape, -3, 1), c.dt, kCpu);
  }
  if (in.mask) in.mask = broadcast_to(*in.mask, full, kCpu);
  if (c.sinks) in.sinks = astype(randn({c.hq}), c.dt, kCpu);
  for (const array& x : in.list()) eval(x);
  return in;
}

// What the kernels must give: the float64 graph's out and lse, with the lse of rows that see
// no key (and have no sink) replaced by the rule's lowest(dtype) + log Lk.
struct Expected {
  std::vector<double> out, lse;
};

Expected expected_of(const Case& c, const Inputs& in) {
  std::vector<array> xs;
  for (const array& x : in.list()) xs.push_back(x.dtype() == bool_ ? x : astype(x, float64, kCpu));
  auto ref = fast::attention_graph(xs, c.params(0, 1), std::nullopt, kCpu);
  Expected e{to_vector(ref[0]), to_vector(ref[1])};
  if (c.sinks) return e;
  std::vector<double> mask;
  if (c.mask == 1 && !c.causal) mask = to_vector(*in.mask);
  const double rule = double(float(finfo(c.dt).min) + std::log(float(c.lk)));
  for (int bi = 0; bi < c.b; ++bi) {
    for (int h = 0; h < c.hq; ++h) {
      for (int i = 0; i < c.lq; ++i) {
        bool none;
        if (c.causal) {
          none = i + c.lk - c.lq < 0;
        } else if (c.mask == 1) {
          none = true;
          const size_t row = (size_t(bi) * c.hq + h) * c.lq + i;
          for (int j = 0; j < c.lk; ++j) none = none && mask[row * c.lk + j] == 0.0;
        } else {
          none = false;
        }
        if (none) e.lse[(size_t(bi) * c.hq + h) * c.lq + i] = rule;
      }
    }
  }
  return e;
}

double tol_of(Dtype dt) {
  // float32 accumulation against float64, then the output's rounding to the dtype.
  return dt == float32 ? 1e-4 : dt == float16 ? 2e-3 : 1e-2;
}

// Runs the node on the GPU with (passes, key_blocks) and checks out and lse.
void check_run(const Case& c, const Inputs& in, const Expected& e, int passes, int key_blocks) {
  SCOPED_TRACE(c.name() + " passes " + std::to_string(passes) + " key_blocks " + std::to_string(key_blocks));
  const Stream gpu = default_stream(Device::gpu);
  auto outs = array::make_arrays(
      {{c.b, c.hq, c.lq, c.dv}, {c.b, c.hq, c.lq}}, {c.dt, float32},
      std::make_shared<ScaledDotProductAttention>(gpu, c.params(passes, key_blocks)), in.list());
  eval(outs);
  EXPECT_EQ(outs[0].dtype(), c.dt);
  const double tol = tol_of(c.dt);
  expect_close(outs[0], {c.b, c.hq, c.lq, c.dv}, e.out, tol, tol);
  expect_close(outs[1], {c.b, c.hq, c.lq}, e.lse, 1e-5, 1e-4);
}

// Every case in one pass and in two passes: 3 key blocks, and more blocks than keys (64 for
// long contexts).
void check_case(const Case& c) {
  const Inputs in = make_inputs(c);
  const Expected e = expected_of(c, in);
  check_run(c, in, e, 1, 1);
  check_run(c, in, e, 2, 3);
  check_run(c, in, e, 2, c.lk < 100 ? c.lk + 2 : 64);
}

const std::vector<Dtype> kDtypes = {float32, float16, bfloat16};

} // namespace

TEST(FastAttentionVector, EveryDtypeAndHeadSize) {
  NUVEC_REQUIRE_GPU_SUITE();
  // Head pairs covering every lane layout: 8, 16 and 32 lanes a key for the half types; 16
  // and 32 lanes with one or two vectors of K and of V for float32.
  const std::vector<std::pair<int, int>> heads = {{64, 64}, {80, 80}, {96, 64}, {128, 128}, {256, 256}, {256, 128},
                                                  {128, 256}, {64, 256}};
  const int lqs[] = {1, 3, 8}, lks[] = {1, 7, 4109};
  const std::pair<int, int> groups[] = {{4, 4}, {8, 2}, {8, 1}}; // GQA ratios 1, 4, 8
  int n = 0;
  for (Dtype dt : kDtypes) {
    for (auto [d, dv] : heads) {
      Case c;
      c.dt = dt;
      c.d = d;
      c.dv = dv;
      c.lq = lqs[n % 3];
      c.lk = lks[(n / 3) % 3];
      c.hq = groups[(n + 1) % 3].first;
      c.hkv = groups[(n + 1) % 3].second;
      ++n;
      check_case(c);
    }
  }
}

TEST(FastAttentionVector, EveryQueryAndKeyLengthAndGroup) {
  NUVEC_REQUIRE_GPU_SUITE();
  for (int lq : {1, 3, 8}) {
    for (int lk : {1, 7, 4109}) {
      for (auto [hq, hkv] : {std::pair{2, 2}, std::pair{8, 2}, std::pair{8, 1}}) {
        Case c;
        c.dt = bfloat16;
        c.lq = lq;
        c.lk = lk;
        c.hq = hq;
        c.hkv = hkv;
        check_case(c);
      }
    }
  }
}

TEST(FastAttentionVector, MasksCausalWindowsAndSinks) {
  NUVEC_REQUIRE_GPU_SUITE();
  std::vector<Case> cs;
  for (int lk : {7, 4109}) {
    Case causal;
    causal.lq = 8;
    causal.lk = lk; // Lk 7 < Lq 8: query 0 sees nothing and attends to every key uniformly
    causal.causal = true;
    cs.push_back(causal);
    Case window = causal;
    window.window = lk == 7 ? 2 : 1000;
    cs.push_back(window);
    Case one = causal;
    one.lq = 1; // causal with one query: every key
    one.window = lk == 7 ? 3 : 0;
    cs.push_back(one);
    for (int mask = 1; mask <= 5; ++mask) {
      Case m;
      m.lq = 3;
      m.lk = lk;
      m.mask = mask;
      cs.push_back(m);
    }
    Case sinks = causal;
    sinks.sinks = true; // with a sink, the row that sees nothing gives out 0, lse = sink
    cs.push_back(sinks);
    Case sinks_mask;
    sinks_mask.lq = 3;
    sinks_mask.lk = lk;
    sinks_mask.mask = 1;
    sinks_mask.sinks = true;
    cs.push_back(sinks_mask);
    Case sinks_add = sinks_mask;
    sinks_add.mask = 3;
    cs.push_back(sinks_add);
    Case sinks_only;
    sinks_only.lq = 1;
    sinks_only.lk = lk;
    sinks_only.sinks = true;
    cs.push_back(sinks_only);
    Case causal_and_mask = causal; // the fallback ignores an array mask under causal
    causal_and_mask.mask = 2;
    cs.push_back(causal_and_mask);
  }
  for (Dtype dt : kDtypes) {
    for (Case c : cs) {
      c.dt = dt;
      check_case(c);
    }
  }
}

TEST(FastAttentionVector, StridedKeysAndValues) {
  NUVEC_REQUIRE_GPU_SUITE();
  for (Dtype dt : kDtypes) {
    for (int layout : {1, 2, 3}) {
      for (int lk : {7, 4109}) {
        Case c;
        c.dt = dt;
        c.layout = layout;
        c.lk = lk;
        c.lq = lk == 7 ? 8 : 1;
        c.causal = lk == 7;
        c.d = dt == float32 ? 80 : 128;
        c.dv = dt == float32 ? 80 : 64;
        check_case(c);
      }
    }
  }
}

TEST(FastAttentionVector, KeyBlocksFromOneToMoreThanTheKeys) {
  NUVEC_REQUIRE_GPU_SUITE();
  for (int lk : {7, 4109}) {
    for (bool causal : {false, true}) {
      Case c;
      c.lq = 8;
      c.lk = lk;
      c.causal = causal;
      c.window = causal && lk > 7 ? 300 : 0;
      c.sinks = causal;
      const Inputs in = make_inputs(c);
      const Expected e = expected_of(c, in);
      for (int kb : {1, 2, 5, 7, 9, 64, 1024}) check_run(c, in, e, 2, kb);
    }
  }
  // A bool mask whose fully false row sees keys in no block, and rows seeing keys in only some.
  Case m;
  m.lq = 2;
  m.lk = 40;
  m.mask = 1;
  const Inputs in = make_inputs(m);
  const Expected e = expected_of(m, in);
  for (int kb : {2, 13, 40, 41}) check_run(m, in, e, 2, kb);
}

TEST(FastAttentionVector, ManyOrFewRowsPerKeyHead) {
  NUVEC_REQUIRE_GPU_SUITE();
  std::vector<Case> cs;
  Case mqa; // 32 query heads on one key head, 8 queries: 256 rows, rounds of warps
  mqa.b = 1;
  mqa.hq = 32;
  mqa.hkv = 1;
  mqa.lq = 8;
  mqa.lk = 300;
  mqa.causal = true;
  cs.push_back(mqa);
  Case five; // a group of 5: a chunk with one row
  five.hq = 10;
  five.hkv = 2;
  five.lq = 1;
  five.lk = 1000;
  cs.push_back(five);
  Case twelve; // 12 rows: three chunks, two warps each
  twelve.hq = 8;
  twelve.hkv = 2;
  twelve.lq = 3;
  twelve.lk = 777;
  twelve.mask = 5;
  cs.push_back(twelve);
  Case long_q; // more queries than decode uses: the kernel takes any Lq
  long_q.hq = 4;
  long_q.hkv = 4;
  long_q.lq = 17;
  long_q.lk = 40;
  long_q.causal = true;
  cs.push_back(long_q);
  for (Dtype dt : kDtypes) {
    for (Case c : cs) {
      c.dt = dt;
      check_case(c);
    }
  }
}

TEST(FastAttentionVector, PassesAgree) {
  NUVEC_REQUIRE_GPU_SUITE();
  // The benchmark's shape, smaller: one and two passes give the same answer to rounding.
  Case c;
  c.b = 4;
  c.hq = 32;
  c.hkv = 8;
  c.lq = 1;
  c.lk = 2048;
  c.scale = 1.0f / std::sqrt(128.0f);
  const Inputs in = make_inputs(c);
  const Expected e = expected_of(c, in);
  check_run(c, in, e, 1, 1);
  check_run(c, in, e, 2, 4);
  check_run(c, in, e, 2, 16);
}

TEST(FastAttentionVector, ScheduleFillsTheGpu) {
  // Host arithmetic (fast::vector_schedule): one pass from one block per multiprocessor on;
  // below, key blocks that fill two blocks per multiprocessor, each over >= 64 keys.
  fast::RouteKey k;
  k.gpu = true;
  k.sm_count = 132;
  k.lq = 1;
  k.d = k.dv = 128;
  k.b = 32;
  k.hq = 32;
  k.hkv = 8;
  k.lk = 8192;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{1, 1})); // 256 blocks
  k.lk = 512;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{1, 1}));
  k.b = 1;
  k.lk = 8192;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{2, 33})); // 8 blocks; ceil(264 / 8)
  k.lk = 131072;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{2, 33})); // ceil(264 / 8)
  k.lk = 1000;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{2, 15})); // 1000 / 64
  k.lk = 100;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{1, 1})); // one block of 64 keys
  k.b = 16;
  k.lk = 65536;
  EXPECT_EQ(fast::vector_schedule(k), (std::pair<int, int>{2, 3})); // 128 blocks: ceil(264 / 128)
}

TEST(FastAttentionVector, DecodeTimingsReport) {
  NUVEC_REQUIRE_GPU_SUITE();
  // No assertion: times of the benchmark's decode shape (B 32, Hq 32, Hkv 8, D 128, bf16) at
  // Lk 8192 and 512 for one pass and several two-pass splits, for tuning vector_schedule
  // (the first line is the schedule it picks on this GPU). Bytes: K and V read
  // once; twenty nodes evaluated together, so the host overlaps the kernels; a tiny call first
  // gives the host's cost of a node, the floor of these times.
  const Device g(Device::gpu);
  // The host's cost of one node (a launch-sized call): the floor of the times below.
  {
    array q = random::normal({1, 4, 1, 128}, bfloat16, std::nullopt, std::nullopt, std::nullopt, g);
    array k = random::normal({1, 1, 16, 128}, bfloat16, std::nullopt, std::nullopt, std::nullopt, g);
    eval({q, k});
    fast::AttentionParams p;
    p.scale = 0.1f;
    auto node = [&] {
      return array::make_arrays(
          {{1, 4, 1, 128}, {1, 4, 1}}, {bfloat16, float32},
          std::make_shared<ScaledDotProductAttention>(default_stream(g), p), {q, k, k})[0];
    };
    eval(node());
    constexpr int kIters = 20;
    std::vector<array> ys;
    for (int i = 0; i < kIters; ++i) ys.push_back(node());
    const auto t0 = std::chrono::steady_clock::now();
    eval(ys);
    const auto t1 = std::chrono::steady_clock::now();
    std::printf(
        "[attention_vector bf16 B1 Hq4 Hkv1 D128 Lk 16] passes 1: %.1f us (the per-node floor)\n",
        std::chrono::duration<double, std::micro>(t1 - t0).count() / kIters);
  }
  for (int lk : {8192, 512}) {
    const int b = 32, hq = 32, hkv = 8, d = 128;
    array q = random::normal({b, hq, 1, d}, bfloat16, std::nullopt, std::nullopt, std::nullopt, g);
    array k = random::normal({b, hkv, lk, d}, bfloat16, std::nullopt, std::nullopt, std::nullopt, g);
    array v = random::normal({b, hkv, lk, d}, bfloat16, std::nullopt, std::nullopt, std::nullopt, g);
    eval({q, k, v});
    const double bytes = 2.0 * b * hkv * double(lk) * d * 2.0;
    fast::RouteKey key;
    key.b = b;
    key.hq = hq;
    key.hkv = hkv;
    key.lq = 1;
    key.lk = lk;
    key.d = key.dv = d;
    key.gpu = true;
    key.sm_count = static_cast<int>(std::get<size_t>(gpu::device_info(0).at("multiprocessor_count")));
    std::vector<std::pair<int, int>> schedules = {fast::vector_schedule(key), {1, 1}, {2, 2}, {2, 3}, {2, 4}, {2, 8}};
    for (auto [passes, kb] : schedules) {
      fast::AttentionParams p;
      p.scale = 1.0f / std::sqrt(float(d));
      p.passes = passes;
      p.key_blocks = kb;
      auto node = [&] {
        return array::make_arrays(
            {{b, hq, 1, d}, {b, hq, 1}}, {bfloat16, float32},
            std::make_shared<ScaledDotProductAttention>(default_stream(g), p), {q, k, v})[0];
      };
      eval(node()); // warm-up
      constexpr int kIters = 20;
      std::vector<array> ys;
      for (int i = 0; i < kIters; ++i) ys.push_back(node());
      const auto t0 = std::chrono::steady_clock::now();
      eval(ys);
      const auto t1 = std::chrono::steady_clock::now();
      const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kIters;
      std::printf(
          "[attention_vector bf16 B32 Hq32 Hkv8 D128 Lk %d] passes %d key_blocks %d: %.1f us, %.0f GB/s\n", lk, passes,
          kb, us, bytes / (us * 1e3));
    }
  }
}
