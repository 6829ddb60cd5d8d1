// The NormRope fused primitive (src/fast/norm_rope.h): the kernels (CPU, and GPU when the suite
// runs with the GPU as default device) against the fallback graph (the composition of rms_norm,
// rope and slice_update) in the same dtype and in float64, on random shapes with and without
// the norm, the weight and the cache, traditional and not, base and freqs, dims < D; the cases
// the kernels leave to the composition; a float64 loop; GPU against CPU; the rules derived from
// the fallback (vjp and jvp against central differences, vmap against a loop); an export round
// trip; bad input, the cache too short among it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/common/rope_plan.h"
#include "checker.h"
#include "fast/norm_rope.h"
#include "nuvec/export.h"
#include "nuvec/nuvec.h"
#include "donation_checks.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-6 : dt == float32 ? 2e-5 : dt == float16 ? 4e-3 : 3e-2;
}

// The node's fallback on its inputs, or on its inputs cast to float64 (the frequencies come
// back to float32 inside rope).
array fallback_of(const array& y, bool in_float64) {
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  std::vector<array> in = y.inputs();
  if (in_float64) {
    for (auto& a : in) a = astype(a, float64);
  }
  return p.fallback()(in)[0];
}

// One random norm_rope call: x [B, H, L, D] of odd sizes, the norm (and its weight) or not,
// a cache or not, dims <= D, base or freqs, an offset and a scale.
struct NormRopeCase {
  Shape shape;
  bool norm, weight, cache;
  fast::Rotation rotation;
  int offset, lmax;

  // The call on x (dtype dt) with the weight and cache drawn for it.
  array run(const array& x, const array& w, const array& c, StreamOrDevice s = {}) const {
    return fast::norm_rope(x, weight ? std::optional<array>(w) : std::nullopt,
                           norm ? std::optional<float>(1e-5f) : std::nullopt, rotation, offset,
                           cache ? std::optional<array>(c) : std::nullopt, s);
  }
  int max_position() const { return static_cast<int>((offset + shape[2]) * rotation.scale) + 1; }
};

NormRopeCase random_case(std::mt19937_64& gen) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  NormRopeCase c;
  const int ds[] = {8, 16, 24, 64, 72, 128, 136, 256, 6};
  const int d = ds[pick(0, 8)];
  c.shape = {pick(1, 3), pick(1, 5), pick(0, 2) == 0 ? 1 : pick(2, 6), d};
  c.norm = pick(0, 3) != 0;
  c.weight = c.norm && pick(0, 2) != 0;
  c.cache = pick(0, 1) == 0;
  const int dims_choice = pick(0, 2);
  const int dims = dims_choice == 0 ? d : dims_choice == 1 ? std::max(2, d / 16 * 16) : 2 * pick(1, 3);
  c.rotation.dims = std::min(dims, d);
  c.rotation.traditional = pick(0, 1) == 0;
  c.rotation.scale = pick(0, 1) == 0 ? 1.0f : 0.5f;
  if (pick(0, 1) == 0) c.rotation.base = 10000.0f;
  else c.rotation.freqs = uniform({c.rotation.dims / 2}, 0.5, 50.0, float32);
  c.offset = pick(0, 40);
  c.lmax = c.offset + c.shape[2] + pick(0, 5);
  return c;
}

std::string describe(const NormRopeCase& c, Dtype dt) {
  std::ostringstream s;
  s << dtype_name(dt) << " x " << c.shape << (c.norm ? " norm" : "") << (c.weight ? " weight" : "")
    << (c.cache ? " cache of " + std::to_string(c.lmax) : "") << " dims " << c.rotation.dims
    << (c.rotation.traditional ? " traditional" : "") << (c.rotation.freqs ? " freqs" : " base") << " offset "
    << c.offset << " scale " << c.rotation.scale;
  return s.str();
}

} // namespace

TEST(FastNormRope, KernelMatchesItsFallback) {
  auto& gen = rng();
  for (int trial = 0; trial < 16; ++trial) {
    const NormRopeCase c = random_case(gen);
    for (Dtype dt : {float64, float32, float16, bfloat16}) {
      SCOPED_TRACE(describe(c, dt));
      array x = astype(randn(c.shape, float64), dt);
      array w = astype(randn({c.shape[3]}, float64), dt);
      array cache = astype(randn({c.shape[0], c.shape[1], c.lmax, c.shape[3]}, float64), dt);
      array y = c.run(x, w, cache);
      const bool covered = !c.norm ||
          norm_rope_kernel_covers(c.shape[3], c.rotation.dims, c.rotation.traditional, dt.size());
      if (!covered) {
        // The composition: no NormRope node, its result.
        EXPECT_STRNE(y.primitive().name(), "NormRope");
        continue;
      }
      ASSERT_STREQ(y.primitive().name(), "NormRope");
      EXPECT_EQ(y.shape(), c.cache ? cache.shape() : x.shape());
      EXPECT_EQ(y.dtype(), dt);
      // One rounding of an angle moves cos and sin by up to |angle| · 2^-23; the statistic's
      // summation order differs from the graph's.
      const double tol = tol_of(dt) + 2.5e-7 * c.max_position();
      // Both references before y's evaluation detaches its graph.
      array ref = fallback_of(y, false), ref64 = fallback_of(y, true);
      expect_allclose(y, ref, tol, tol);
      expect_allclose(y, ref64, 2 * tol, 2 * tol);
    }
  }
}

TEST(FastNormRope, Float64AgainstALoop) {
  const int b = 2, h = 3, l = 2, d = 6, dims = 4, lmax = 7, offset = 4;
  const float eps = 1e-5f, base = 1000.0f, scale = 0.5f;
  array x = randn({b, h, l, d}, float64), w = randn({d}, float64), cache = randn({b, h, lmax, d}, float64);
  auto xv = to_vector(x), wv = to_vector(w);
  std::vector<double> want = to_vector(cache);
  for (int r = 0; r < b * h * l; ++r) {
    const int bh = r / l, t = r % l;
    const double* xr = &xv[r * d];
    double ms = 0;
    for (int j = 0; j < d; ++j) ms += xr[j] * xr[j] / d;
    std::vector<double> y(d);
    for (int j = 0; j < d; ++j) y[j] = xr[j] / std::sqrt(ms + eps) * wv[j];
    for (int i = 0; i < dims / 2; ++i) {
      // The angle in float32, as the fallback computes it.
      const float inv = std::exp(static_cast<float>(-i) * (std::log(base) / 2.0f));
      const float theta = (static_cast<float>(t) + offset) * scale * inv;
      const double c = std::cos(theta), s = std::sin(theta);
      const double x1 = y[i], x2 = y[i + dims / 2];
      y[i] = x1 * c - x2 * s;
      y[i + dims / 2] = x1 * s + x2 * c;
    }
    for (int j = 0; j < d; ++j) want[(bh * lmax + offset + t) * d + j] = y[j];
  }
  const fast::Rotation rot{dims, false, base, scale, std::nullopt};
  array got = fast::norm_rope(x, w, eps, rot, offset, cache);
  EXPECT_STREQ(got.primitive().name(), "NormRope");
  expect_close(got, {b, h, lmax, d}, want, 1e-6, 1e-6);
}

TEST(FastNormRope, ComposesNormRopeAndTheCacheWrite) {
  array x = randn({2, 3, 4, 16}, float32), w = randn({16}, float32);
  fast::Rotation rot{8, false, 10000.0f, 1.0f, std::nullopt};
  // Normalised and rotated rows.
  array want = fast::rope(fast::rms_norm(x, w, 1e-5f), 8, false, 10000.0f, 1.0f, 5);
  expect_allclose(fast::norm_rope(x, w, 1e-5f, rot, 5), want, 2e-6, 2e-6);
  // No norm: rope alone.
  expect_allclose(fast::norm_rope(x, std::nullopt, std::nullopt, rot, 5),
                  fast::rope(x, 8, false, 10000.0f, 1.0f, 5), 1e-6, 1e-6);
  // With a cache: rows land at positions 5..8, the rest of the cache is untouched.
  array cache = randn({2, 3, 12, 16}, float32);
  array updated = fast::norm_rope(x, w, 1e-5f, rot, 5, cache);
  expect_allclose(slice(updated, {0, 0, 5, 0}, {2, 3, 9, 16}), want, 2e-6, 2e-6);
  expect_allclose(slice(updated, {0, 0, 0, 0}, {2, 3, 5, 16}), slice(cache, {0, 0, 0, 0}, {2, 3, 5, 16}), 0, 0);
  expect_allclose(slice(updated, {0, 0, 9, 0}, {2, 3, 12, 16}), slice(cache, {0, 0, 9, 0}, {2, 3, 12, 16}), 0, 0);
  // A cache of any layout (a transposed view): the same result.
  array cache_view = swapaxes(contiguous(swapaxes(cache, 1, 2)), 1, 2);
  expect_allclose(fast::norm_rope(x, w, 1e-5f, rot, 5, cache_view), updated, 0, 0);
  // The rows fill the cache (offset 0, L = Lmax): nothing of it is kept.
  array full = fast::norm_rope(x, w, 1e-5f, rot, 0, randn({2, 3, 4, 16}, float32));
  expect_allclose(full, fast::norm_rope(x, w, 1e-5f, rot, 0), 0, 0);
  // Traditional pairs and freqs.
  fast::Rotation rf{16, true, std::nullopt, 0.5f, add(abs(randn({8}, float32)), array(0.1f))};
  expect_allclose(fast::norm_rope(x, std::nullopt, 1e-6f, rf, 0),
                  fast::rope(fast::rms_norm(x, std::nullopt, 1e-6f), 16, true, std::nullopt, 0.5f, 0, rf.freqs),
                  2e-6, 2e-6);
  // Decode: one row per head written at the cache's last position.
  array xd = randn({4, 2, 1, 16}, float32), cd = randn({4, 2, 9, 16}, float32);
  array wantd = fast::rope(fast::rms_norm(xd, w, 1e-5f), 8, false, 10000.0f, 1.0f, 8);
  expect_allclose(slice(fast::norm_rope(xd, w, 1e-5f, rot, 8, cd), {0, 0, 8, 0}, {4, 2, 9, 16}), wantd, 2e-6, 2e-6);
}

TEST(FastNormRope, UncoveredCasesRunTheComposition) {
  const fast::Rotation rot{72, false, 10000.0f, 1.0f, std::nullopt};
  // bf16 rows of 72 features: each half (36) is no whole number of 8-element vectors.
  array x = astype(randn({1, 2, 3, 72}, float32), bfloat16);
  array y = fast::norm_rope(x, std::nullopt, 1e-5f, rot, 0);
  EXPECT_STRNE(y.primitive().name(), "NormRope");
  expect_allclose(y, fast::rope(fast::rms_norm(x, std::nullopt, 1e-5f), 72, false, 10000.0f, 1.0f, 0), 0, 0);
  // Without the norm every row shape is a NormRope node (Rope's kernels take any row).
  EXPECT_STREQ(fast::norm_rope(x, std::nullopt, std::nullopt, rot, 0).primitive().name(), "NormRope");
  // Rows a warp cannot hold, with the norm.
  array wide = randn({1, 1, 2, 4096}, float32);
  EXPECT_STRNE(fast::norm_rope(wide, std::nullopt, 1e-5f, fast::Rotation{64, false, 1e4f}, 0).primitive().name(),
               "NormRope");
  // Empty rows.
  EXPECT_EQ(fast::norm_rope(zeros({1, 2, 0, 8}), std::nullopt, 1e-5f, fast::Rotation{8, false, 1e4f}, 0).shape(),
            (Shape{1, 2, 0, 8}));
  // x's dtype with a wider weight.
  fast::Rotation r8{8, false, 10000.0f, 1.0f, std::nullopt};
  EXPECT_EQ(fast::norm_rope(astype(ones({1, 2, 3, 8}), bfloat16), ones({8}, float32), 1e-5f, r8, 0).dtype(), bfloat16);
}

TEST(FastNormRope, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (Dtype dt : {float32, bfloat16, float16, float64}) {
    for (bool traditional : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (traditional ? " traditional" : ""));
      array x = astype(randn({3, 5, 33, 128}, float32), dt), w = astype(randn({128}, float32), dt);
      array cache = astype(randn({3, 5, 100, 128}, float32), dt);
      const fast::Rotation rot{96, traditional, 10000.0f, 1.0f, std::nullopt};
      auto on = [&](Device dev) { return fast::norm_rope(x, w, 1e-6f, rot, 60, cache, dev); };
      // Positions up to 93: the devices' exp (inverse frequencies) and cos and sin may each
      // differ by an ulp, ~1.1e-5 each at these angles.
      const double tol = tol_of(dt) + 5e-5;
      expect_allclose(on(Device::gpu), on(Device::cpu), tol, tol);
      // Without the norm, and with frequencies.
      const fast::Rotation rf{128, traditional, std::nullopt, 0.5f, uniform({64}, 0.5, 50.0, float32)};
      auto plain = [&](Device dev) { return fast::norm_rope(x, std::nullopt, std::nullopt, rf, 3, std::nullopt, dev); };
      expect_allclose(plain(Device::gpu), plain(Device::cpu), tol, tol);
    }
  }
}

TEST(FastNormRope, HeadsInUnevenChunks) {
  // The benchmark's prefill with 37 heads: the GPU kernel gives each lane group a chunk of
  // several heads (8 for bf16, 13 for float32) that 37 does not divide, two heads at a time,
  // and writes them into a cache. Compared on the device (|y − ref| / (1 + |ref|), its
  // maximum).
  if (default_device() != Device::gpu) GTEST_SKIP() << "a GPU-sized case";
  for (Dtype dt : {bfloat16, float32}) {
    SCOPED_TRACE(dtype_name(dt));
    auto normal = [&](const Shape& shape) {
      return astype(random::normal(shape, float32, std::nullopt, std::nullopt, std::nullopt), dt);
    };
    array x = normal({1, 37, 16384, 128}), w = normal({128}), cache = normal({1, 37, 16400, 128});
    array y = fast::norm_rope(x, w, 1e-6f, fast::Rotation{128, false, 10000.0f}, 3, cache);
    ASSERT_STREQ(y.primitive().name(), "NormRope");
    array a = astype(y, float32), r = astype(fallback_of(y, false), float32);
    const double err = to_vector(max(divide(abs(subtract(a, r)), add(abs(r), array(1.0f)))))[0];
    EXPECT_LE(err, tol_of(dt) + 2.5e-7 * 16400);
  }
}

TEST(FastNormRope, RulesFromTheFallback) {
  array x = randn({2, 3, 2, 8}, float64), w = randn({8}, float64), cache = randn({2, 3, 5, 8}, float64);
  for (bool traditional : {false, true}) {
    SCOPED_TRACE(traditional ? "traditional" : "halves");
    const fast::Rotation rot{8, traditional, 100.0f, 1.0f, std::nullopt};
    check_grad([&](const std::vector<array>& in) { return fast::norm_rope(in[0], in[1], 1e-5f, rot, 2); }, {x, w});
    check_grad([&](const std::vector<array>& in) { return fast::norm_rope(in[0], in[1], 1e-5f, rot, 1, in[2]); },
               {x, w, cache});
    check_grad([&](const std::vector<array>& in) { return fast::norm_rope(in[0], std::nullopt, std::nullopt, rot, 3); },
               {x});
    check_grad([&](const std::vector<array>& in) { return fast::norm_rope(in[0], std::nullopt, 1e-5f, rot, 0, in[1]); },
               {x, cache});
  }
  // vmap against a loop: x and the cache batched, or x alone (at an inner axis).
  const fast::Rotation rot{6, false, 100.0f, 1.0f, std::nullopt};
  array xs = randn({3, 2, 3, 2, 8}, float64), caches = randn({3, 2, 3, 5, 8}, float64);
  check_vmap([&](const std::vector<array>& in) {
    return std::vector<array>{fast::norm_rope(in[0], w, 1e-5f, rot, 2, in[1])};
  }, {xs, caches}, {0, 0}, 1e-10, 1e-10);
  check_vmap([&](const std::vector<array>& in) {
    return std::vector<array>{fast::norm_rope(in[0], w, 1e-5f, rot, 2, cache)};
  }, {xs}, {0}, 1e-10, 1e-10);
  check_vmap([&](const std::vector<array>& in) {
    return std::vector<array>{fast::norm_rope(in[0], std::nullopt, 1e-5f, rot, 1)};
  }, {moveaxis(xs, 0, 3)}, {3}, 1e-10, 1e-10);
}

TEST(FastNormRope, ExportRoundTrip) {
  array x = randn({1, 2, 3, 16}, float32), w = randn({16}, float32), cache = randn({1, 2, 8, 16}, float32);
  const fast::Rotation rot{16, true, 10000.0f, 2.0f, std::nullopt};
  auto f = [&](const Args& a) { return std::vector<array>{fast::norm_rope(a[0], a[1], 1e-5f, rot, 4, a[2])}; };
  const std::string path = (scratch_dir() / "norm_rope.nuvecfn").string();
  export_function(path, f, {x, w, cache});
  auto imported = import_function(path);
  expect_allclose(imported({x, w, cache})[0], f({x, w, cache})[0], 0, 0);
}

TEST(FastNormRope, BadInputNamesTheOp) {
  auto bad = [](auto f) { expect_throws_naming<std::invalid_argument>(f, "[norm_rope]"); };
  array x = ones({1, 2, 3, 8});
  fast::Rotation rot{8, false, 10000.0f, 1.0f, std::nullopt};
  bad([&] { fast::norm_rope(ones({2, 3, 8}), std::nullopt, 1e-5f, rot, 0); });
  bad([&] { fast::norm_rope(x, ones({8}), std::nullopt, rot, 0); });
  bad([&] { fast::norm_rope(x, std::nullopt, 1e-5f, rot, -1); });
  bad([&] { fast::norm_rope(x, std::nullopt, 1e-5f, rot, 0, ones({1, 2, 4, 4})); });
  bad([&] { fast::norm_rope(x, std::nullopt, 1e-5f, rot, 2, ones({1, 2, 4, 8})); }); // too short
  bad([&] { fast::norm_rope(x, std::nullopt, 1e-5f, rot, 0, ones({1, 2, 4, 8}, float16)); });
  auto bad_rope = [](auto f) { expect_throws_naming<std::invalid_argument>(f, "[rope]"); };
  bad_rope([&] { fast::norm_rope(x, std::nullopt, 1e-5f, fast::Rotation{7, false, 1.0f}, 0); });
  bad_rope([&] { fast::norm_rope(x, std::nullopt, 1e-5f, fast::Rotation{8, false, std::nullopt}, 0); });
  bad_rope([&] { fast::norm_rope(x, std::nullopt, 1e-5f, fast::Rotation{8, false, 1.0f, 1.0f, ones({4})}, 0); });
  bad_rope([&] { fast::norm_rope(x, std::nullopt, 1e-5f, fast::Rotation{8, false, std::nullopt, 1.0f, ones({3})}, 0); });
  expect_throws_naming<std::invalid_argument>([&] { fast::norm_rope(x, ones({5}), 1e-5f, rot, 0); }, "[rms_norm]");
}

// The cache is written in its own buffer when the caller replaced its handle (a decode
// loop); another handle to it keeps the old values.
TEST(FastNormRope, CacheWrittenInPlaceOnlyWhenNothingElseSeesIt) {
  array x = randn({2, 3, 1, 16}, float32), w = randn({16}, float32);
  fast::Rotation rot{16, false, 10000.0f, 1.0f, std::nullopt};
  array base = randn({2, 3, 9, 16}, float32);
  const array want = fast::norm_rope(x, w, 1e-5f, rot, 4, base); // base is held: a copy
  eval(want);
  array cache = fresh_buffer(base);
  std::weak_ptr<array::Data> buffer = watch_buffer(cache);
  cache = fast::norm_rope(x, w, 1e-5f, rot, 4, cache);
  eval(cache);
  EXPECT_EQ(cache.data_shared_ptr(), buffer.lock()) << "the cache's buffer was not reused";
  expect_allclose(cache, want, 0, 0);
  // Held elsewhere: copied, the old cache unchanged.
  array cache2 = fresh_buffer(base);
  array keep = cache2;
  cache2 = fast::norm_rope(x, w, 1e-5f, rot, 4, cache2);
  eval(cache2);
  expect_allclose(cache2, want, 0, 0);
  expect_allclose(keep, base, 0, 0);
}

// The array-offset overload (the serving engine's tokens, each a batch row at its own
// position): equal to the int overload called row by row, to rms_norm then rope with the same
// offsets, in every floating dtype, with and without the norm, base or freqs, one offset per
// row or one for all; its gradient is the composition's; bad offsets are rejected by name.
TEST(FastNormRope, ArrayOffsetsEqualTheIntOverloadPerRow) {
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (const Shape& shape : {Shape{5, 3, 1, 64}, Shape{3, 2, 4, 128}, Shape{2, 4, 3, 24}}) {
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " variant " + std::to_string(variant));
        const int B = shape[0], D = shape[3];
        fast::Rotation rot{D, variant == 1, std::nullopt, variant == 2 ? 0.5f : 1.0f, std::nullopt};
        if (variant == 1) rot.freqs = uniform({D / 2}, 0.5, 50.0, float32);
        else rot.base = 10000.0f;
        const std::optional<float> eps = variant == 2 ? std::nullopt : std::optional<float>(1e-5f);
        array x = astype(randn(shape, float64), dt), w = astype(randn({D}, float64), dt);
        std::optional<array> weight;
        if (eps) weight = w;
        std::vector<int> offs(B);
        for (int b = 0; b < B; ++b) offs[b] = int(rng()() % 300);
        array offsets(offs.begin(), {B}, int32);
        array y = fast::norm_rope(x, weight, eps, rot, offsets);
        if (!eps || norm_rope_kernel_covers(D, rot.dims, rot.traditional, dt.size())) {
          EXPECT_STREQ(y.primitive().name(), "NormRope");
        }
        const double tol = tol_of(dt) + 2.5e-7 * 300;
        array h = eps ? fast::rms_norm(x, weight, *eps) : x;
        expect_allclose(y, fast::rope(h, rot.dims, rot.traditional, rot.base, rot.scale, offsets, rot.freqs), tol, tol);
        std::vector<array> rows;
        for (int b = 0; b < B; ++b) {
          Shape hi = shape;
          hi[0] = b + 1;
          rows.push_back(fast::norm_rope(slice(x, {b, 0, 0, 0}, hi), weight, eps, rot, offs[b]));
        }
        expect_allclose(y, concatenate(rows, 0), tol, tol);
        // One offset for every row.
        array one = fast::norm_rope(x, weight, eps, rot, array(offs[0], int32));
        expect_allclose(one, fast::norm_rope(x, weight, eps, rot, offs[0]), tol, tol);
      }
    }
  }
  // Gradient (x and the weight) through the rules: the composition's.
  array x = randn({3, 2, 2, 16}, float64), w = randn({16}, float64);
  array offsets = array({7, 0, 40}, int32);
  fast::Rotation rot{16, false, 10000.0f, 1.0f, std::nullopt};
  auto loss = [&](bool fused) {
    return [&, fused](const std::vector<array>& in) {
      array y = fused ? fast::norm_rope(in[0], in[1], 1e-5f, rot, offsets)
                      : fast::rope(fast::rms_norm(in[0], in[1], 1e-5f), 16, false, 10000.0f, 1.0f, offsets);
      return std::vector<array>{sum(multiply(y, cos(in[0])))};
    };
  };
  auto g = vjp(loss(true), {x, w}, {array(1.0, float64)}).second;
  auto want = vjp(loss(false), {x, w}, {array(1.0, float64)}).second;
  expect_allclose(g[0], want[0], 1e-10, 1e-10);
  expect_allclose(g[1], want[1], 1e-10, 1e-10);
  // Bad offsets.
  array x4 = randn({3, 2, 1, 16});
  EXPECT_THROW(fast::norm_rope(x4, std::nullopt, 1e-5f, rot, array({1.0f, 2.0f, 3.0f})), std::invalid_argument);
  EXPECT_THROW(fast::norm_rope(x4, std::nullopt, 1e-5f, rot, array({1, 2}, int32)), std::invalid_argument);
  EXPECT_THROW(fast::norm_rope(randn({3, 16}), std::nullopt, 1e-5f, rot, array({1, 2, 3}, int32)),
               std::invalid_argument);
  try {
    fast::norm_rope(x4, std::nullopt, 1e-5f, rot, zeros({3, 1}, int32));
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("norm_rope"), std::string::npos) << e.what();
  }
}
