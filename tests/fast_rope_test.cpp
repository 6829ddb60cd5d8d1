// The Rope fused primitive (src/fast/rope.h): the kernels (CPU, and GPU when the suite runs
// with the GPU as default device) against the fallback graph for every floating dtype, dims <
// D and = D, traditional and not, base and freqs, scalar and per-batch offsets, scale != 1,
// non-contiguous input; a float64 loop; GPU against CPU; the rule (the inverse rotation)
// against central differences; vmap against a loop; bad input; nn::RoPE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/rope.h"
#include "nuvec/nn.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-6 : dt == float32 ? 1e-5 : dt == float16 ? 4e-3 : 3e-2;
}

void expect_node_matches(const array& y, Dtype dt) {
  ASSERT_STREQ(y.primitive().name(), "Rope");
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  const std::vector<array> in = y.inputs();
  array ref = p.fallback()(in)[0];
  expect_allclose(y, ref, tol_of(dt), tol_of(dt));
}

} // namespace

TEST(FastRope, KernelMatchesItsFallback) {
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (bool traditional : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (traditional ? " traditional" : ""));
      array x = astype(randn({2, 3, 5, 12}, float64), dt);
      expect_node_matches(fast::rope(x, 12, traditional, 10000.0f, 1.0f, 3), dt);
      expect_node_matches(fast::rope(x, 8, traditional, 500.0f, 0.5f, 0), dt);
      // Per-batch offsets, freqs instead of the base.
      array offs = array({7, 1}, int32);
      array freqs = add(abs(randn({4}, float32)), array(0.5f));
      expect_node_matches(fast::rope(x, 8, traditional, std::nullopt, 2.0f, offs, freqs), dt);
      // A transposed (non-contiguous) input, 3 axes.
      array x3 = transpose(astype(randn({6, 7, 2}, float64), dt), {2, 1, 0});
      expect_node_matches(fast::rope(x3, 4, traditional, 10000.0f, 1.0f, 11), dt);
    }
  }
}

TEST(FastRope, Float64AgainstALoop) {
  const int b = 2, t = 3, d = 6, dims = 4;
  array x = randn({b, 1, t, d}, float64);
  auto xv = to_vector(x);
  std::vector<double> want(xv.size());
  const std::vector<int> offs = {5, 9};
  for (int bi = 0; bi < b; ++bi) {
    for (int ti = 0; ti < t; ++ti) {
      const int r = (bi * t + ti) * d;
      for (int j = 0; j < d; ++j) want[r + j] = xv[r + j];
      for (int i = 0; i < dims / 2; ++i) {
        const float inv = std::exp(static_cast<float>(-i) * (std::log(1000.0f) / 2.0f));
        const float theta = (static_cast<float>(ti) + offs[bi]) * 0.5f * inv;
        const double c = std::cos(theta), s = std::sin(theta);
        const double x1 = xv[r + i], x2 = xv[r + i + dims / 2];
        want[r + i] = x1 * c - x2 * s;
        want[r + i + dims / 2] = x1 * s + x2 * c;
      }
    }
  }
  expect_close(fast::rope(x, dims, false, 1000.0f, 0.5f, array({5, 9}, int32)), {b, 1, t, d}, want, 1e-6, 1e-6);
}

TEST(FastRope, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (Dtype dt : {float32, bfloat16, float16}) {
    for (bool traditional : {false, true}) {
      array x = astype(randn({3, 4, 33, 128}, float32), dt);
      array offs = array({0, 100, 4000}, int32);
      auto on = [&](Device dev) { return fast::rope(x, 96, traditional, 10000.0f, 1.0f, offs, std::nullopt, dev); };
      // The angles are float32 (the fallback's): at positions near 4000 one ulp of an angle
      // is ~2.4e-4 rad, and the devices' exp and sin may differ by an ulp.
      const double tol = std::max(tol_of(dt), 4100 * 2 * 1.2e-7);
      expect_allclose(on(Device::gpu), on(Device::cpu), tol, tol);
      auto grad_on = [&](Device dev) {
        auto f = [&, dev](const std::vector<array>& in) {
          return std::vector<array>{fast::rope(in[0], 96, traditional, 10000.0f, 1.0f, offs, std::nullopt, dev)};
        };
        return vjp(f, {x}, {x}).second[0];
      };
      expect_allclose(grad_on(Device::gpu), grad_on(Device::cpu), tol, tol);
    }
  }
}

TEST(FastRope, RuleAndVmap) {
  array x = randn({2, 3, 4, 6}, float64);
  for (bool traditional : {false, true}) {
    check_grad([&](const std::vector<array>& in) { return fast::rope(in[0], 4, traditional, 100.0f, 1.5f, 2); }, {x});
    check_grad([&](const std::vector<array>& in) {
      return fast::rope(in[0], 6, traditional, 100.0f, 1.0f, array({1, 4}, int32));
    }, {x});
  }
  // The inverse rotation undoes the rotation: vjp with the output as cotangent gives x back.
  auto f = [](const std::vector<array>& in) { return std::vector<array>{fast::rope(in[0], 6, false, 10.0f, 1.0f, 3)}; };
  auto [outs, grads] = vjp(f, {x}, {f({x})[0]});
  expect_allclose(grads[0], x, 1e-6, 1e-6);
  for (int ax : {0, 1}) {
    check_vmap([](const std::vector<array>& in) { return std::vector<array>{fast::rope(in[0], 4, false, 100.0f, 1.0f, 5)}; },
               {x}, {ax}, 1e-6, 1e-6);
  }
  // A batch axis inside the rows (t or d) runs the graph, still equal to the loop.
  array x2 = randn({2, 3, 4, 6, 5}, float64);
  check_vmap([](const std::vector<array>& in) { return std::vector<array>{fast::rope(in[0], 4, true, 100.0f, 1.0f, 5)}; },
             {x2}, {4}, 1e-6, 1e-6);
  auto batched = vmap([](const array& a) { return fast::rope(a, 4, false, 100.0f, 1.0f, 5); })(x);
  EXPECT_STREQ(batched.primitive().name(), "Rope");
}

TEST(FastRope, BadInputNamesTheOp) {
  auto bad = [](auto f) { expect_throws_naming<std::invalid_argument>(f, "[rope]"); };
  array x = ones({2, 3, 8});
  bad([&] { fast::rope(ones({3, 8}), 8, false, 10000.0f, 1.0f, 0); });
  bad([&] { fast::rope(x, 7, false, 10000.0f, 1.0f, 0); });
  bad([&] { fast::rope(x, 10, false, 10000.0f, 1.0f, 0); });
  bad([&] { fast::rope(x, 0, false, 10000.0f, 1.0f, 0); });
  bad([&] { fast::rope(astype(x, int32), 8, false, 10000.0f, 1.0f, 0); });
  bad([&] { fast::rope(x, 8, false, std::nullopt, 1.0f, 0); });
  bad([&] { fast::rope(x, 8, false, 10000.0f, 1.0f, 0, ones({4})); });
  bad([&] { fast::rope(x, 8, false, std::nullopt, 1.0f, 0, ones({3})); });
  bad([&] { fast::rope(x, 8, false, 10000.0f, 1.0f, array({1, 2, 3}, int32)); });
  bad([&] { fast::rope(x, 8, false, 10000.0f, 1.0f, array(1.5f)); });
}

TEST(FastRope, RoPELayer) {
  nn::RoPE rope(8);
  array x = randn({1, 2, 5, 8}, float32);
  array y = rope.forward(x, 4);
  EXPECT_STREQ(y.primitive().name(), "Rope");
  expect_allclose(y, fast::rope(x, 8, false, 10000.0f, 1.0f, 4), 0, 0);
}

TEST(FastNormRope, ComposesNormRopeAndTheCacheWrite) {
  array x = randn({2, 3, 4, 16}, float32), w = randn({16}, float32);
  fast::Rotation rot{8, false, 10000.0f, 1.0f, std::nullopt};
  // Normalised and rotated rows.
  array want = fast::rope(fast::rms_norm(x, w, 1e-5f), 8, false, 10000.0f, 1.0f, 5);
  expect_allclose(fast::norm_rope(x, w, 1e-5f, rot, 5), want, 0, 0);
  // No norm: rope alone.
  expect_allclose(fast::norm_rope(x, std::nullopt, std::nullopt, rot, 5),
                  fast::rope(x, 8, false, 10000.0f, 1.0f, 5), 0, 0);
  // With a cache: rows land at positions 5..8, the rest of the cache is untouched.
  array cache = randn({2, 3, 12, 16}, float32);
  array updated = fast::norm_rope(x, w, 1e-5f, rot, 5, cache);
  expect_allclose(slice(updated, {0, 0, 5, 0}, {2, 3, 9, 16}), want, 0, 0);
  expect_allclose(slice(updated, {0, 0, 0, 0}, {2, 3, 5, 16}), slice(cache, {0, 0, 0, 0}, {2, 3, 5, 16}), 0, 0);
  expect_allclose(slice(updated, {0, 0, 9, 0}, {2, 3, 12, 16}), slice(cache, {0, 0, 9, 0}, {2, 3, 12, 16}), 0, 0);
  // Traditional pairs and freqs.
  fast::Rotation rf{16, true, std::nullopt, 0.5f, add(abs(randn({8}, float32)), array(0.1f))};
  expect_allclose(fast::norm_rope(x, std::nullopt, 1e-6f, rf, 0),
                  fast::rope(fast::rms_norm(x, std::nullopt, 1e-6f), 16, true, std::nullopt, 0.5f, 0, rf.freqs), 0, 0);
  // Gradients flow through the fused nodes.
  check_grad([&](const std::vector<array>& in) {
    return fast::norm_rope(in[0], in[1], 1e-5f, fast::Rotation{8, false, 100.0f, 1.0f, std::nullopt}, 2);
  }, {astype(x, float64), astype(w, float64)});
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
  expect_throws_naming<std::invalid_argument>([&] { fast::norm_rope(x, std::nullopt, 1e-5f, fast::Rotation{7, false, 1.0f}, 0); }, "[rope]");
}

TEST(FastRope, EmptyInputsAndBatches) {
  EXPECT_EQ(fast::rope(zeros({0, 4, 8}), 8, false, 1e4f, 1.0f, 0).shape(), (Shape{0, 4, 8}));
  EXPECT_EQ(fast::rope(zeros({2, 3, 0, 8}), 8, false, 1e4f, 1.0f, 0).shape(), (Shape{2, 3, 0, 8}));
  auto f = vmap([](const array& a) { return fast::rope(a, 8, false, 1e4f, 1.0f, 0); });
  array y = f(zeros({0, 2, 4, 8}));
  eval(y);
  EXPECT_EQ(y.shape(), (Shape{0, 2, 4, 8}));
  // norm_rope keeps x's dtype with a wider weight.
  fast::Rotation rot{8, false, 10000.0f, 1.0f, std::nullopt};
  EXPECT_EQ(fast::norm_rope(astype(ones({1, 2, 3, 8}), bfloat16), ones({8}, float32), 1e-5f, rot, 0).dtype(), bfloat16);
}
