// The paged KV-cache kernels on the GPU (src/backend/cuda/fast/paged_attention.cu): PagedAttention
// and PagedWrite nodes recorded directly on the GPU stream, against their fallback graphs
// (src/fast/attention.cpp) evaluated on the CPU in float64. PagedAttention: float32, float16,
// bfloat16; head sizes 64, 128, 256; block sizes 1, 16, 32; 1, 4 and 8 query heads per key
// head; 1, 3 and 17 queries; random block tables (permuted ids, some out of range, which
// clamp); lengths 0, below L (rows that see nothing attend uniformly), inside and past the
// capacity; long contexts that take the split (two-pass) route, and a prefill that takes many
// row chunks; gpt-oss's windows and sinks on the decode kernel; prefill on the Hopper kernel
// (the default on sm_90, both schedules; half-type prefill also with NUVEC_ATTENTION_HOPPER=0).
// PagedWrite: several element sizes, rows of 3 to 256 elements, out-of-range slots, a repeated
// slot (one whole row wins), a strided cache.
// Then paged_write followed by paged_attention against scaled_dot_product_attention over the
// concatenated keys and values, through the public API, with sinks and windows too (and
// their rules). The kernel tests need a GPU (skipped without one). The skip, the CPU device
// and the kernels' tolerance: tests/attention_cases.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "fast/attention.h"
#include "nuvec/fast.h"
#include "nuvec/nuvec.h"
#include "checker.h"
#include "donation_checks.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
using nuvec::testing::attn::kCpu;
using nuvec::testing::attn::tol_of;

namespace {

// Evaluated on the CPU, so that the node under test is the only GPU work.
array on_cpu(const array& a) {
  array c = copy(a, kCpu);
  eval(c);
  return c;
}

// Block tables [b, max_blocks]: a random permutation of the block ids (repeating once they
// run out), with about one entry in ten out of range (negative or >= blocks: they clamp).
array random_tables(int b, int max_blocks, int blocks) {
  std::vector<int> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng());
  std::uniform_int_distribution<int> tenth(0, 9), off(1, 5);
  std::vector<int> t(size_t(b) * max_blocks);
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = ids[i % blocks];
    if (tenth(rng()) == 0) t[i] = off(rng()) % 2 ? -off(rng()) : blocks - 1 + off(rng());
  }
  return on_cpu(array(t.begin(), {b, max_blocks}, int32));
}

// Lengths [b] cycling through: 0, below L, past the capacity, and random in [L, capacity].
array lengths_for(int b, int l, int cap) {
  std::vector<int> v(b);
  for (int i = 0; i < b; ++i) {
    switch (i % 4) {
      case 0: v[i] = std::uniform_int_distribution<int>(std::min(l, cap), cap)(rng()); break;
      case 1: v[i] = 0; break;
      case 2: v[i] = cap + 1 + i; break;
      default: v[i] = std::uniform_int_distribution<int>(0, std::max(0, l - 1))(rng()); break;
    }
  }
  return on_cpu(array(v.begin(), {b}, int32));
}

struct PagedCase {
  Dtype dt = float32;
  int b = 4, hkv = 2, group = 4, l = 1, d = 64, bs = 16, blocks = 20, max_blocks = 4;
  float scale = 0.3f;

  std::string name() const {
    return std::string(dtype_name(dt)) + " b" + std::to_string(b) + " hkv" + std::to_string(hkv) + " group" +
        std::to_string(group) + " l" + std::to_string(l) + " d" + std::to_string(d) + " bs" + std::to_string(bs) +
        " blocks" + std::to_string(blocks) + " max_blocks" + std::to_string(max_blocks);
  }
};

// One PagedAttention node on the GPU against the fallback in float64 on the CPU (with a
// window when window > 0, and random sinks when `sinks`).
void check_paged_attention(const PagedCase& c, const array& lengths, int window = 0, bool sinks = false) {
  SCOPED_TRACE(c.name() + " lengths " + std::to_string(to_vector(lengths).front()) + "... window " +
               std::to_string(window) + (sinks ? " sinks" : ""));
  const int hq = c.hkv * c.group;
  array q = on_cpu(astype(randn({c.b, hq, c.l, c.d}), c.dt));
  array kc = on_cpu(astype(randn({c.blocks, c.hkv, c.bs, c.d}), c.dt));
  array vc = on_cpu(astype(randn({c.blocks, c.hkv, c.bs, c.d}), c.dt));
  array tables = random_tables(c.b, c.max_blocks, c.blocks);
  std::vector<array> in{q, kc, vc, tables, lengths};
  std::vector<array> in64{astype(q, float64, kCpu), astype(kc, float64, kCpu), astype(vc, float64, kCpu), tables, lengths};
  if (sinks) {
    array sk = on_cpu(astype(multiply(randn({hq}), array(2.0f)), c.dt));
    in.push_back(sk);
    in64.push_back(astype(sk, float64, kCpu));
  }
  array out(q.shape(), c.dt, std::make_shared<PagedAttention>(default_stream(Device::gpu), c.scale, window, sinks), in);
  eval(out);
  auto ref_prim = std::make_shared<PagedAttention>(default_stream(kCpu), c.scale, window, sinks);
  array ref = ref_prim->fallback()(in64)[0];
  const double tol = tol_of(c.dt);
  expect_allclose(out, ref, tol, tol);
}

} // namespace

// The decode and prefill shapes of every dtype, head size, block size, group and query count;
// half-type prefill on the Hopper kernel (the default on sm_90) and on the CUDA-core paged
// kernel (NUVEC_ATTENTION_HOPPER=0).
TEST(FastPagedAttention, KernelMatchesTheFloat64Fallback) {
  NUVEC_REQUIRE_GPU();
  for (const char* hopper : {"1", "0"}) {
    ScopedEnv route("NUVEC_ATTENTION_HOPPER", hopper);
    SCOPED_TRACE(std::string("NUVEC_ATTENTION_HOPPER=") + hopper);
    for (Dtype dt : {float32, float16, bfloat16}) {
      for (int d : {64, 128, 256}) {
        for (int bs : {1, 16, 32}) {
          for (int group : {1, 4, 8}) {
            for (int l : {1, 3, 17}) {
              // About 40-70 positions a sequence; fewer blocks than the tables list, so ids repeat.
              const PagedCase c{.dt = dt, .b = 4, .hkv = 2, .group = group, .l = l, .d = d, .bs = bs,
                                .blocks = bs == 1 ? 150 : 7, .max_blocks = bs == 1 ? 45 : bs == 16 ? 4 : 2};
              check_paged_attention(c, lengths_for(c.b, c.l, c.max_blocks * c.bs));
            }
          }
        }
      }
    }
  }
}

// gpt-oss's options on the tensor-core decode kernel (float16, bfloat16; at most 16 query rows
// a key head): windows of 1, 3 and 40 positions, with and without sinks, and sinks alone; the
// lengths of lengths_for (rows that see nothing: 0 with sinks, uniform without), one and two
// queries, the three head sizes; and long contexts that take the two-pass split.
TEST(FastPagedAttention, SinksAndWindowsKernelMatchesTheFloat64Fallback) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float16, bfloat16}) {
    for (const PagedCase& c : {PagedCase{.dt = dt, .b = 4, .hkv = 2, .group = 4, .l = 1, .d = 64, .bs = 16, .blocks = 20, .max_blocks = 4},
                               PagedCase{.dt = dt, .b = 5, .hkv = 2, .group = 8, .l = 2, .d = 128, .bs = 16, .blocks = 30, .max_blocks = 6},
                               PagedCase{.dt = dt, .b = 3, .hkv = 1, .group = 8, .l = 1, .d = 256, .bs = 32, .blocks = 12, .max_blocks = 3},
                               PagedCase{.dt = dt, .b = 2, .hkv = 2, .group = 8, .l = 1, .d = 64, .bs = 1, .blocks = 150, .max_blocks = 45}}) {
      for (int window : {0, 1, 3, 40}) {
        for (bool sinks : {false, true}) {
          if (window == 0 && !sinks) continue;
          check_paged_attention(c, lengths_for(c.b, c.l, c.max_blocks * c.bs), window, sinks);
        }
      }
    }
  }
  // Two passes: 2400 positions of one or three sequences (few blocks: the split route).
  const PagedCase c{.dt = bfloat16, .b = 3, .hkv = 2, .group = 8, .l = 1, .d = 128, .bs = 16, .blocks = 400, .max_blocks = 150};
  for (int window : {0, 128, 1000}) {
    std::vector<int> lens{2400, 1777, 0};
    check_paged_attention(c, on_cpu(array(lens.begin(), {3}, int32)), window, true);
    if (window > 0) check_paged_attention(c, on_cpu(array(lens.begin(), {3}, int32)), window, false);
  }
}

// Prefill on the Hopper forward through the block tables (attention_hopper_paged, the default
// on sm_90; both schedules of its key loop): float16 and bfloat16; head sizes
// 64, 128, 256; block sizes 8 and 16 (several cache blocks a key tile), 128 and 256 (one
// block per tile or several tiles a block); lengths of lengths_for (rows that see nothing get
// the mean of the gathered rows from the second kernel, lengths 0 and past the capacity);
// queries 100 and 300 (partial query tiles). On a GPU other than Hopper the call falls back
// to paged_attention_kernel, which the same comparison then checks.
TEST(FastPagedAttention, HopperPrefillMatchesTheFloat64Fallback) {
  NUVEC_REQUIRE_GPU();
  ScopedEnv route("NUVEC_ATTENTION_HOPPER", "1");
  for (const char* pipeline : {"0", "1"}) {
    ScopedEnv schedule("NUVEC_ATTENTION_HOPPER_PIPELINE", pipeline);
    SCOPED_TRACE(std::string("pipeline ") + pipeline);
    for (Dtype dt : {float16, bfloat16}) {
      for (const PagedCase& c :
           {PagedCase{.dt = dt, .b = 4, .hkv = 2, .group = 4, .l = 100, .d = 128, .bs = 16, .blocks = 90, .max_blocks = 20},
            PagedCase{.dt = dt, .b = 3, .hkv = 1, .group = 1, .l = 300, .d = 64, .bs = 8, .blocks = 200, .max_blocks = 70},
            PagedCase{.dt = dt, .b = 2, .hkv = 2, .group = 2, .l = 130, .d = 256, .bs = 128, .blocks = 9, .max_blocks = 4},
            PagedCase{.dt = dt, .b = 2, .hkv = 1, .group = 8, .l = 200, .d = 128, .bs = 256, .blocks = 5, .max_blocks = 3}}) {
        check_paged_attention(c, lengths_for(c.b, c.l, c.max_blocks * c.bs));
      }
    }
  }
}

// Long contexts with few (sequence, key head) pairs: the positions split across blocks and a
// combine kernel merges them (several tiles a split, partial tiles at the ends; rows that see
// nothing take every split).
TEST(FastPagedAttention, SplitContextsMatchTheFloat64Fallback) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16, float16}) {
    for (int l : {1, 3, 8, 17}) { // 17: several row chunks, each split
      // 150 blocks of 16: 2400 positions, 10 tiles of 256.
      const PagedCase c{.dt = dt, .b = 3, .hkv = 2, .group = 4, .l = l, .d = 128, .bs = 16, .blocks = 400, .max_blocks = 150};
      std::vector<int> lens{2400, 1777, 5};
      check_paged_attention(c, on_cpu(array(lens.begin(), {3}, int32)));
      std::vector<int> odd{0, 2399, 100000};
      check_paged_attention(c, on_cpu(array(odd.begin(), {3}, int32)));
    }
  }
  // A single sequence and key head with 8 query heads, block size 32.
  const PagedCase c{.dt = bfloat16, .b = 1, .hkv = 1, .group = 8, .d = 256, .bs = 32, .blocks = 90, .max_blocks = 70};
  std::vector<int> lens{70 * 32 - 3};
  check_paged_attention(c, on_cpu(array(lens.begin(), {1}, int32)));
}

// A prefill: many query rows a key head (row chunks in the grid), causal over the cache.
TEST(FastPagedAttention, PrefillMatchesTheFloat64Fallback) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16}) {
    // 44 blocks of 16: 704 positions, 3 tiles.
    const PagedCase c{.dt = dt, .b = 2, .hkv = 4, .group = 4, .l = 100, .d = 128, .bs = 16, .blocks = 100, .max_blocks = 44};
    std::vector<int> lens{650, 99};
    check_paged_attention(c, on_cpu(array(lens.begin(), {2}, int32)));
  }
}

// PagedWrite against its fallback (exact: both copy), for 1- to 8-byte elements and rows of
// 3 to 256 elements (vector widths 1 to 16 bytes), with out-of-range slots.
TEST(FastPagedAttention, PagedWriteMatchesTheFallback) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float32, float16, bfloat16, float64, int8}) {
    for (int d : {3, 8, 64, 256}) {
      for (int bs : {1, 16, 5}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " d" + std::to_string(d) + " bs" + std::to_string(bs));
        const int blocks = 6, hkv = 3, cap = blocks * bs;
        array cache = on_cpu(astype(multiply(randn({blocks, hkv, bs, d}), array(10.0)), dt));
        // Distinct valid slots, then out-of-range ones.
        std::vector<int> slots(cap);
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng());
        slots.resize(std::min(cap, 7));
        for (int bad : {-1, -1000, cap, cap + 13}) slots.push_back(bad);
        std::shuffle(slots.begin(), slots.end(), rng());
        const int n = int(slots.size());
        array values = on_cpu(astype(multiply(randn({n, hkv, d}), array(10.0)), dt));
        array sl = on_cpu(array(slots.begin(), {n}, int32));
        const std::vector<array> in{cache, values, sl};
        array out(cache.shape(), dt, std::make_shared<PagedWrite>(default_stream(Device::gpu)), in);
        eval(out);
        auto ref_prim = std::make_shared<PagedWrite>(default_stream(kCpu));
        array ref = ref_prim->fallback()(in)[0];
        expect_allclose(out, ref, 0, 0);
      }
    }
  }
}

// A strided cache (a transposed view) is copied in its logical order; a slot given twice holds
// one of its rows whole.
TEST(FastPagedAttention, PagedWriteStridedCacheAndRepeatedSlot) {
  NUVEC_REQUIRE_GPU();
  const int blocks = 4, hkv = 2, bs = 8, d = 128;
  array base = on_cpu(astype(randn({blocks, bs, hkv, d}), bfloat16));
  array cache = transpose(base, {0, 2, 1, 3}); // [blocks, hkv, bs, d], not row-contiguous
  std::vector<int> slots{5, 17, 5, 31};
  array values = on_cpu(astype(randn({4, hkv, d}), bfloat16));
  array sl = on_cpu(array(slots.begin(), {4}, int32));
  const std::vector<array> in{cache, values, sl};
  array out(cache.shape(), bfloat16, std::make_shared<PagedWrite>(default_stream(Device::gpu)), in);
  eval(out);
  // Everything but slot 5 is as the fallback gives.
  auto ref_prim = std::make_shared<PagedWrite>(default_stream(kCpu));
  array ref = ref_prim->fallback()({cache, slice(values, {1, 0, 0}, {4, hkv, d}), slice(sl, {1}, {4})})[0];
  auto got = to_vector(out), want = to_vector(ref);
  auto row = [&](int slot, int h) { return ((slot / bs) * hkv + h) * bs + slot % bs; };
  auto vals = to_vector(values);
  for (int h = 0; h < hkv; ++h) {
    for (int s = 0; s < blocks * bs; ++s) {
      const size_t at = size_t(row(s, h)) * d;
      if (s != 5) {
        for (int j = 0; j < d; ++j) ASSERT_EQ(got[at + j], want[at + j]) << "slot " << s << " head " << h;
        continue;
      }
      // Slot 5: rows 0 and 2 of values wrote it; one of them, whole.
      bool is0 = true, is2 = true;
      for (int j = 0; j < d; ++j) {
        is0 = is0 && got[at + j] == vals[(0 * hkv + h) * d + j];
        is2 = is2 && got[at + j] == vals[(2 * hkv + h) * d + j];
      }
      EXPECT_TRUE(is0 || is2) << "head " << h;
    }
  }
}

// Repeated slots on both kernels (up to 256 rows: the one-kernel write that finds each slot's
// last writer in shared memory; more: the winner pass): every slot holds the row of its last
// occurrence, whole; slots nobody names keep the cache's rows; out-of-range slots are dropped.
TEST(FastPagedAttention, PagedWriteKeepsTheLastOfRepeatedSlots) {
  NUVEC_REQUIRE_GPU();
  for (int n : {9, 256, 257, 700}) {
    SCOPED_TRACE("rows " + std::to_string(n));
    const int blocks = 24, hkv = 3, bs = 8, d = 40, cap = blocks * bs;
    std::uniform_int_distribution<int> pick(-3, cap + 2); // repeats and out-of-range slots
    std::vector<int> slots(n);
    for (auto& x : slots) x = pick(rng());
    array cache = on_cpu(astype(randn({blocks, hkv, bs, d}), bfloat16));
    array values = on_cpu(astype(randn({n, hkv, d}), bfloat16));
    array sl = on_cpu(array(slots.begin(), {n}, int32));
    array out(cache.shape(), bfloat16, std::make_shared<PagedWrite>(default_stream(Device::gpu)),
              std::vector<array>{cache, values, sl});
    eval(out);
    auto got = to_vector(out), old = to_vector(cache), vals = to_vector(values);
    std::vector<int> last(cap, -1);
    for (int r = 0; r < n; ++r) {
      if (slots[r] >= 0 && slots[r] < cap) last[slots[r]] = r;
    }
    for (int s = 0; s < cap; ++s) {
      for (int h = 0; h < hkv; ++h) {
        const size_t at = size_t(((s / bs) * hkv + h) * bs + s % bs) * d;
        for (int j = 0; j < d; ++j) {
          const double want = last[s] < 0 ? old[at + j] : vals[(size_t(last[s]) * hkv + h) * d + j];
          ASSERT_EQ(got[at + j], want) << "slot " << s << " head " << h << " element " << j;
        }
      }
    }
  }
}

// A decode step through the public API: the history and the new token written with
// paged_write, then paged_attention over the cache equals scaled_dot_product_attention over
// the concatenated keys and values (causal for several new queries).
TEST(FastPagedAttention, PagedWriteThenAttentionEqualsAttentionOverTheConcatenation) {
  NUVEC_REQUIRE_GPU();
  const StreamOrDevice gpu = Device::gpu;
  for (Dtype dt : {float32, bfloat16}) {
    for (int l : {1, 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " l" + std::to_string(l));
      const int b = 3, hkv = 2, hq = 8, d = 128, bs = 16, blocks = 40, max_blocks = 10;
      std::vector<int> hist{37, 100, 0}; // positions already cached per sequence
      // Disjoint blocks per sequence, in a shuffled order.
      std::vector<int> ids(blocks);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng());
      std::vector<int> tab(ids.begin(), ids.begin() + b * max_blocks);
      array tables(tab.begin(), {b, max_blocks}, int32);
      array kc = astype(randn({blocks, hkv, bs, d}), dt, gpu), vc = astype(randn({blocks, hkv, bs, d}), dt, gpu);
      std::vector<array> ks, vs;
      std::vector<int> lens(b);
      array q = astype(randn({b, hq, l, d}), dt, gpu);
      for (int s = 0; s < b; ++s) {
        const int total = hist[s] + l;
        lens[s] = total;
        array k = astype(randn({1, hkv, total, d}), dt, gpu), v = astype(randn({1, hkv, total, d}), dt, gpu);
        ks.push_back(k);
        vs.push_back(v);
        // History first, then the new rows, each a paged_write of [n, hkv, d] rows.
        for (auto [from, count] : {std::pair{0, hist[s]}, std::pair{hist[s], l}}) {
          if (count == 0) continue;
          std::vector<int> sl;
          for (int p = from; p < from + count; ++p) sl.push_back(tab[s * max_blocks + p / bs] * bs + p % bs);
          array slots(sl.begin(), {count}, int32);
          auto rows = [&](const array& x) {
            return reshape(transpose(slice(x, {0, 0, from, 0}, {1, hkv, from + count, d}, gpu), {0, 2, 1, 3}, gpu),
                           {count, hkv, d}, gpu);
          };
          kc = fast::paged_write(kc, rows(k), slots, gpu);
          vc = fast::paged_write(vc, rows(v), slots, gpu);
        }
      }
      array out = fast::paged_attention(q, kc, vc, tables, array(lens.begin(), {b}, int32), 0.09f, gpu);
      for (int s = 0; s < b; ++s) {
        array qs = slice(q, {s, 0, 0, 0}, {s + 1, hq, l, d}, gpu);
        array want = fast::scaled_dot_product_attention(
            astype(qs, float64, kCpu), astype(ks[s], float64, kCpu), astype(vs[s], float64, kCpu), 0.09f,
            l > 1 ? "causal" : "", std::nullopt, std::nullopt, kCpu);
        const double tol = tol_of(dt);
        expect_allclose(slice(out, {s, 0, 0, 0}, {s + 1, hq, l, d}, gpu), want, tol, tol);
      }
    }
  }
}

// gpt-oss's options (sinks, a sliding window) over the pool equal scaled_dot_product_attention
// with them over each sequence's keys, in float64, for decode and prefill rows, windows
// shorter and longer than the context; bad sinks or windows throw naming the op.
TEST(FastPagedAttention, SinksAndWindowsEqualAttentionOverTheConcatenation) {
  const int b = 3, hkv = 2, hq = 4, d = 16, bs = 4, blocks = 30, max_blocks = 9;
  const std::vector<int> hist{13, 30, 0};
  std::vector<int> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng());
  std::vector<int> tab(ids.begin(), ids.begin() + b * max_blocks);
  const array tables(tab.begin(), {b, max_blocks}, int32);
  const array sinks = randn({hq}, float64);
  for (int l : {1, 5}) {
    array kc = zeros({blocks, hkv, bs, d}, float64), vc = zeros({blocks, hkv, bs, d}, float64);
    std::vector<array> ks, vs;
    std::vector<int> lens(b);
    const array q = randn({b, hq, l, d}, float64);
    for (int s = 0; s < b; ++s) {
      const int total = hist[s] + l;
      lens[s] = total;
      array k = randn({1, hkv, total, d}, float64), v = randn({1, hkv, total, d}, float64);
      ks.push_back(k);
      vs.push_back(v);
      std::vector<int> sl;
      for (int p = 0; p < total; ++p) sl.push_back(tab[s * max_blocks + p / bs] * bs + p % bs);
      auto rows = [&](const array& x) { return reshape(transpose(x, {0, 2, 1, 3}), {total, hkv, d}); };
      kc = fast::paged_write(kc, rows(k), array(sl.begin(), {total}, int32));
      vc = fast::paged_write(vc, rows(v), array(sl.begin(), {total}, int32));
    }
    for (std::optional<int> window : {std::optional<int>(), std::optional<int>(1), std::optional<int>(3),
                                      std::optional<int>(40)}) {
      for (bool with_sinks : {false, true}) {
        if (!window && !with_sinks) continue;
        SCOPED_TRACE("l " + std::to_string(l) + " window " + (window ? std::to_string(*window) : "none") +
                     (with_sinks ? " sinks" : ""));
        const std::optional<array> sk = with_sinks ? std::optional<array>(sinks) : std::nullopt;
        array out = fast::paged_attention(q, kc, vc, tables, array(lens.begin(), {b}, int32), 0.3f, sk, window);
        for (int s = 0; s < b; ++s) {
          fast::AttentionOptions o;
          o.mask_mode = "causal";
          o.sinks = sk;
          o.window = window;
          array want = fast::scaled_dot_product_attention(slice(q, {s, 0, 0, 0}, {s + 1, hq, l, d}), ks[s], vs[s], 0.3f, o);
          expect_allclose(slice(out, {s, 0, 0, 0}, {s + 1, hq, l, d}), want, 1e-12, 1e-12);
        }
      }
    }
  }
  const array lengths = array({1, 2, 3}, int32);
  const array q = randn({b, hq, 1, d});
  const array kc = zeros({blocks, hkv, bs, d}), vc = zeros({blocks, hkv, bs, d});
  auto throws = [&](const std::optional<array>& sk, std::optional<int> w) {
    try {
      fast::paged_attention(q, kc, vc, tables, lengths, 1.0f, sk, w);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).find("paged_attention") != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(throws(zeros({hq + 1}), std::nullopt));
  EXPECT_TRUE(throws(array({1, 2, 3, 4}, int32), std::nullopt));
  EXPECT_TRUE(throws(std::nullopt, 0));
  EXPECT_TRUE(throws(zeros({hq}), -2));
}

// paged_write's rules with repeated, negative and out-of-range slots (float64, central
// differences, vjp and jvp): a row that a later row overwrites, or that lands nowhere, has
// no effect on the output and gets no gradient (the scatter in the graph once gave every
// repeat the cotangent).
TEST(FastPagedAttention, PagedWriteRulesWithRepeatedAndDroppedSlots) {
  const array cache = randn({3, 2, 2, 3}, float64), values = randn({6, 2, 3}, float64);
  const array slots = array({1, 4, 1, -1, 6, 4}, int32); // 6 slots: 1 and 4 twice, -1 and 6 dropped
  GradCheckOptions opts;
  opts.rtol = 1e-6;
  opts.atol = 1e-8;
  check_grad([&](const std::vector<array>& x) { return fast::paged_write(x[0], x[1], slots); }, {cache, values},
             opts);
  auto [out, grads] = vjp([&](const std::vector<array>& x) { return std::vector<array>{fast::paged_write(cache, x[0], slots)}; },
                          {values}, {ones(cache.shape(), float64)});
  const auto g = to_vector(sum(grads[0], {1, 2}));
  EXPECT_EQ(g, (std::vector<double>{0, 0, 6, 0, 0, 6})); // only rows 2 and 5 land
}

// The sinks/window overload's rules are its graph's: gradients for q, the caches and the
// sinks against central differences (float64), and vmap over q against a loop.
TEST(FastPagedAttention, SinksAndWindowsRules) {
  const int b = 2, hkv = 1, hq = 2, d = 4, bs = 2, blocks = 5, l = 2;
  const array tables = array({3, 0, 4, 1, 2, 0}, {b, 3}, int32);
  const array lengths = array({5, 3}, int32);
  const array q = randn({b, hq, l, d}, float64), kc = randn({blocks, hkv, bs, d}, float64),
              vc = randn({blocks, hkv, bs, d}, float64), sinks = randn({hq}, float64);
  GradCheckOptions opts;
  opts.rtol = 1e-5;
  opts.atol = 1e-7;
  check_grad([&](const std::vector<array>& x) {
    return fast::paged_attention(x[0], x[1], x[2], tables, lengths, 0.7f, x[3], 2);
  }, {q, kc, vc, sinks}, opts);
  const array qs = randn({3, b, hq, l, d}, float64);
  check_vmap([&](const std::vector<array>& x) {
    return std::vector<array>{fast::paged_attention(x[0], kc, vc, tables, lengths, 0.7f, sinks, 3)};
  }, {qs}, {0}, 1e-12, 1e-12);
}

// The paged decode benchmark shape, B 32, Hq 32, Hkv 8, 8192 positions, D 128, bfloat16,
// blocks of 16 in a shuffled order: prints the time of one PagedAttention node and the bandwidth
// of its K and V reads (1.07 GB; no assertion: a report for the lead; the goal is >= 90% of the
// copy bandwidth, about 4.2 TB/s on the H200, so about 0.28 ms).
TEST(FastPagedAttention, DecodeBandwidthReport) {
  NUVEC_REQUIRE_GPU();
  const StreamOrDevice gpu = Device::gpu;
  const int b = 32, hq = 32, hkv = 8, d = 128, bs = 16, ctx = 8192, max_blocks = ctx / bs, blocks = b * max_blocks;
  array kc = random::normal({blocks, hkv, bs, d}, bfloat16, std::nullopt, gpu);
  array vc = random::normal({blocks, hkv, bs, d}, bfloat16, std::nullopt, gpu);
  std::vector<int> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng());
  array tables(ids.begin(), {b, max_blocks}, int32);
  array lengths = full({b}, ctx, int32, gpu);
  eval({kc, vc, tables, lengths});
  auto node = [&](const array& q) {
    return array(q.shape(), bfloat16, std::make_shared<PagedAttention>(default_stream(Device::gpu), 0.088f),
                 {q, kc, vc, tables, lengths});
  };
  constexpr int kIters = 20;
  std::vector<array> qs;
  for (int i = 0; i < kIters; ++i) qs.push_back(random::normal({b, hq, 1, d}, bfloat16, std::nullopt, gpu));
  eval(qs);
  eval(node(qs[0])); // warm-up: module load, the occupancy query
  const double bytes = 2.0 * b * hkv * double(ctx) * d * 2;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) eval(node(qs[i]));
  auto t1 = std::chrono::steady_clock::now();
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kIters;
  std::printf("[paged_attention bf16 B32 Hq32 Hkv8 ctx8192 D128 bs16] one eval per call: %.1f us, %.0f GB/s\n", us,
              bytes / (us * 1e3));
  // Independent nodes evaluated together: the kernels run back to back (host overhead overlapped).
  std::vector<array> outs;
  for (int i = 0; i < kIters; ++i) outs.push_back(node(qs[i]));
  auto t2 = std::chrono::steady_clock::now();
  eval(outs);
  auto t3 = std::chrono::steady_clock::now();
  us = std::chrono::duration<double, std::micro>(t3 - t2).count() / kIters;
  std::printf("[paged_attention bf16 B32 Hq32 Hkv8 ctx8192 D128 bs16] %d in one eval: %.1f us each, %.0f GB/s\n", kIters,
              us, bytes / (us * 1e3));
  // The outputs are averages of unit normals: finite and small.
  array worst = max(abs(astype(outs.back(), float32, gpu), gpu), false, gpu);
  EXPECT_LT(worst.item<float>(), 10.0f);
}

// A pool the caller replaces with paged_write's result is written in place (a serving engine
// does this every layer and step); another handle keeps the old pool.
TEST(FastPagedAttention, PagedWriteReusesAPoolNothingElseSees) {
  const int blocks = 5, hkv = 2, bs = 4, d = 8;
  array base = randn({blocks, hkv, bs, d}, float32);
  array values = randn({3, hkv, d}, float32);
  array slots = array({2, 9, 17}, int32);
  array want = fast::paged_write(base, values, slots); // base held: a copy
  eval(want);
  array pool = fresh_buffer(base);
  std::weak_ptr<array::Data> buffer = watch_buffer(pool);
  pool = fast::paged_write(pool, values, slots);
  eval(pool);
  EXPECT_EQ(pool.data_shared_ptr(), buffer.lock()) << "the pool's buffer was not reused";
  expect_allclose(pool, want, 0, 0);
  array pool2 = fresh_buffer(base);
  array keep = pool2;
  pool2 = fast::paged_write(pool2, values, slots);
  eval(pool2);
  expect_allclose(pool2, want, 0, 0);
  expect_allclose(keep, base, 0, 0);
}

// 64-bit block ids and lengths past int32's range clamp as the documented ones do (to the last
// block, to the capacity; negative ones to 0), on the default device: they were cast to int32
// and wrapped (2^32 + 1 became 1).
TEST(FastPagedAttention, WideIndicesClampWithoutWrapping) {
  const int b = 3, hkv = 2, hq = 4, d = 64, bs = 4, blocks = 5, max_blocks = 3;
  array q = astype(randn({b, hq, 1, d}), float32);
  array kc = randn({blocks, hkv, bs, d}), vc = randn({blocks, hkv, bs, d});
  const int64_t big = (int64_t(1) << 32);
  const std::vector<int64_t> wide_ids{big + 2, 0, 3, 1, -big + 1, 2, 4, big * 3, 0};
  array wide_tables = array(wide_ids.begin(), {b, max_blocks}, int64);
  array clamped_tables = array({blocks - 1, 0, 3, 1, 0, 2, 4, blocks - 1, 0}, {b, max_blocks}, int32);
  const std::vector<int64_t> wide_lens{big + 1, 7, -big + 3};
  array wide_lengths = array(wide_lens.begin(), {b}, int64);
  array clamped_lengths = array({max_blocks * bs, 7, 0}, {b}, int32);
  array got = fast::paged_attention(q, kc, vc, wide_tables, wide_lengths, 0.2f);
  array want = fast::paged_attention(q, kc, vc, clamped_tables, clamped_lengths, 0.2f);
  expect_allclose(got, want, 0.0, 0.0);
  const std::vector<uint64_t> unsigned_lens{uint64_t(big) + 1, 7, 0};
  array unsigned_lengths = array(unsigned_lens.begin(), {b}, uint64);
  expect_allclose(fast::paged_attention(q, kc, vc, clamped_tables, unsigned_lengths, 0.2f), want, 0.0, 0.0);
}
