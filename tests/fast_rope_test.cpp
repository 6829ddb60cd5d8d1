// The Rope fused primitive (src/fast/rope.h): the kernels (CPU, and GPU when the suite runs
// with the GPU as default device) against the fallback graph for every floating dtype, dims <
// D and = D, traditional and not, base and freqs, scalar and per-batch offsets, scale != 1,
// non-contiguous input, random odd shapes (the GPU's vector and scalar paths), decode (T = 1)
// and head counts that split into uneven chunks; a float64 loop; GPU against CPU; the rule
// (the inverse rotation) against central differences; vmap against a loop; bad input;
// nn::RoPE. norm_rope's tests are tests/fast_norm_rope_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
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

void expect_node_matches(const array& y, Dtype dt, double tol = 0) {
  ASSERT_STREQ(y.primitive().name(), "Rope");
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  const std::vector<array> in = y.inputs();
  array ref = p.fallback()(in)[0];
  tol = std::max(tol, tol_of(dt));
  expect_allclose(y, ref, tol, tol);
}

// The node's fallback run on its inputs cast to float64 (x; the offsets and the float32
// frequencies as they are): the rotation without the dtype's roundings.
array fallback_in_float64(const array& y) {
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  std::vector<array> in = y.inputs();
  in[0] = astype(in[0], float64);
  return p.fallback()(in)[0];
}

// One random rope case: x [B, (middle axes), T, D] with odd sizes, dims <= D, base or freqs,
// a scalar or per-batch offset, a scale.
struct RopeCase {
  Shape shape;
  int dims;
  std::optional<float> base;
  std::optional<array> freqs;
  array offset = array(0, int32);
  float scale;
  int max_position;
};

RopeCase random_case(std::mt19937_64& gen) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  RopeCase c;
  const int b = pick(1, 3), t = pick(0, 2) == 0 ? 1 : pick(2, 9);
  const int ds[] = {2, 7, 8, 16, 24, 33, 64, 72, 128, 136, 200};
  const int d = ds[pick(0, 10)];
  c.shape = {b};
  for (int m = pick(0, 2); m > 0; --m) c.shape.push_back(pick(1, 5));
  c.shape.push_back(t);
  c.shape.push_back(d);
  // All features, the largest multiple of 16 below D, or a small even count.
  const int even = d - d % 2, dims_choice = pick(0, 2);
  c.dims = dims_choice == 0 ? even : dims_choice == 1 ? std::max(2, d / 16 * 16) : std::min(even, 2 * pick(1, 3));
  if (pick(0, 1) == 0) {
    c.base = pick(0, 1) == 0 ? 10000.0f : 500.0f;
  } else {
    c.freqs = uniform({c.dims / 2}, 0.5, 50.0, float32);
  }
  int max_offset = 0;
  if (pick(0, 1) == 0) {
    max_offset = pick(0, 300);
    c.offset = array(max_offset, int32);
  } else {
    array offs = randint({b}, 0, 300, pick(0, 1) == 0 ? int32 : int64);
    for (double v : to_vector(offs)) max_offset = std::max(max_offset, static_cast<int>(v));
    c.offset = offs;
  }
  const float scales[] = {1.0f, 0.5f, 3.0f};
  c.scale = scales[pick(0, 2)];
  c.max_position = static_cast<int>((max_offset + t) * c.scale) + 1;
  return c;
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

TEST(FastRope, KernelMatchesItsFallbackOnRandomShapes) {
  // Odd sizes: rows that split into 16-byte vectors and rows that do not (the GPU's scalar
  // path), D past dims, 3 to 5 axes, T = 1 (decode). The inverse rotation (the vjp's node)
  // too. Against the fallback in the same dtype (the same angles: equal up to one rounding
  // of an angle, the CPU's exp being vectorised in the graph) and in float64.
  auto& gen = rng();
  for (int trial = 0; trial < 12; ++trial) {
    const RopeCase c = random_case(gen);
    for (Dtype dt : {float64, float32, float16, bfloat16}) {
      for (bool traditional : {false, true}) {
        std::ostringstream what;
        what << dtype_name(dt) << (traditional ? " traditional" : "") << " shape " << c.shape << " dims "
             << c.dims << (c.freqs ? " freqs" : " base") << " offset " << c.offset.shape() << " scale " << c.scale;
        SCOPED_TRACE(what.str());
        array x = astype(randn(c.shape, float64), dt);
        array y = fast::rope(x, c.dims, traditional, c.base, c.scale, c.offset, c.freqs);
        // One rounding of an angle moves cos and sin by up to |angle| · 2^-23.
        const double angle_tol = 2.5e-7 * c.max_position;
        array ref64 = fallback_in_float64(y); // before y's evaluation detaches its graph
        expect_node_matches(y, dt, angle_tol);
        expect_allclose(y, ref64, tol_of(dt) + angle_tol, tol_of(dt) + angle_tol);
        auto f = [&](const std::vector<array>& in) {
          return std::vector<array>{fast::rope(in[0], c.dims, traditional, c.base, c.scale, c.offset, c.freqs)};
        };
        array back = vjp(f, {x}, {y}).second[0];
        expect_node_matches(back, dt, angle_tol);
      }
    }
  }
}

TEST(FastRope, HeadsInUnevenChunks) {
  // Enough rows that the GPU kernel gives each thread a chunk of several heads (about two
  // waves of threads: 8 heads a chunk for bf16, 13 for float32), with 37 heads that the chunks
  // and the two heads a thread loads at once do not divide; decode shapes, whose chunk is one
  // head. Compared on the device (|y − ref| / (1 + |ref|), its maximum): the CPU loop is
  // checked by the other tests, and this size is slow in its float64 graph.
  if (default_device() != Device::gpu) GTEST_SKIP() << "a GPU-sized case";
  auto max_error = [](const array& y, const array& ref) {
    array a = astype(y, float32), r = astype(ref, float32);
    return to_vector(max(divide(abs(subtract(a, r)), add(abs(r), array(1.0f)))))[0];
  };
  for (Dtype dt : {bfloat16, float32}) {
    for (bool traditional : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (traditional ? " traditional" : ""));
      array x = astype(random::normal({1, 37, 16384, 128}, float32, std::nullopt, std::nullopt, std::nullopt), dt);
      array y = fast::rope(x, 128, traditional, 10000.0f, 1.0f, 5);
      ASSERT_STREQ(y.primitive().name(), "Rope");
      array ref = dynamic_cast<fast::FastPrimitive&>(y.primitive()).fallback()(y.inputs())[0];
      EXPECT_LE(max_error(y, ref), tol_of(dt) + 2.5e-7 * 16390);
      array xd = astype(randn({32, 32, 1, 128}, float32), dt);
      array offs = randint({32}, 0, 4096, int32);
      expect_node_matches(fast::rope(xd, 128, traditional, 10000.0f, 1.0f, offs), dt, 2.5e-7 * 4097);
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
      // Frequencies, a scale, an odd D (the scalar path) and a scalar offset.
      array xo = astype(randn({2, 3, 5, 67}, float32), dt);
      array freqs = uniform({24}, 0.5, 50.0, float32);
      auto odd_on = [&](Device dev) { return fast::rope(xo, 48, traditional, std::nullopt, 0.5f, 7, freqs, dev); };
      expect_allclose(odd_on(Device::gpu), odd_on(Device::cpu), tol_of(dt), tol_of(dt));
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
  // The offset mapped with x, or alone (each call's scalar offset): the graph, against the loop.
  array offsets = array({1, 20, 300});
  array x3 = randn({3, 2, 3, 4, 8}, float64);
  auto ro = [](const std::vector<array>& in) { return std::vector<array>{fast::rope(in[0], 8, false, 1e4f, 1.0f, in[1])}; };
  check_vmap(ro, {x3, offsets}, {0, 0}, 1e-6, 1e-6);
  check_vmap(ro, {slice(x3, {0, 0, 0, 0, 0}, {1, 2, 3, 4, 8}), offsets}, {-1, 0}, 1e-6, 1e-6);
  auto nro = [](const std::vector<array>& in) {
    return std::vector<array>{fast::norm_rope(in[0], std::nullopt, 1e-5f, fast::Rotation{8, false, 1e4f}, in[1])};
  };
  check_vmap(nro, {x3, offsets}, {0, 0}, 1e-6, 1e-6);
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
  // freqs of the wrong size are refused for an empty input too.
  bad([&] { fast::rope(zeros({0, 3, 8}), 8, false, std::nullopt, 1.0f, 0, ones({3})); });
}

// Offsets wider than int32 saturate to its range (a plain cast once wrapped 2^32 + 7 to 7 and
// 3·10^9 to a negative position), in rope and in norm_rope's array overload.
TEST(FastRope, WideOffsetsSaturate) {
  const array x = randn({1, 2, 3, 8}, float32);
  auto at = [&](const array& offset) { return fast::rope(x, 8, false, 10000.0f, 1.0f, offset); };
  const array top = at(array(std::numeric_limits<int32_t>::max(), int32));
  const array bottom = at(array(std::numeric_limits<int32_t>::min(), int32));
  expect_allclose(at(array(int64_t(4294967303LL), int64)), top, 0, 0);
  expect_allclose(at(array(uint32_t(3000000000u), uint32)), top, 0, 0);
  expect_allclose(at(array(int64_t(-4294967303LL), int64)), bottom, 0, 0);
  const array wide = array({int64_t(4294967303LL)}, int64);
  const fast::Rotation rot{8, false, 10000.0f, 1.0f, std::nullopt};
  expect_allclose(fast::norm_rope(x, std::nullopt, std::nullopt, rot, wide),
                  fast::norm_rope(x, std::nullopt, std::nullopt, rot, array({std::numeric_limits<int32_t>::max()}, int32)), 0, 0);
}

TEST(FastRope, RoPELayer) {
  nn::RoPE rope(8);
  array x = randn({1, 2, 5, 8}, float32);
  array y = rope.forward(x, 4);
  EXPECT_STREQ(y.primitive().name(), "Rope");
  expect_allclose(y, fast::rope(x, 8, false, 10000.0f, 1.0f, 4), 0, 0);
}

TEST(FastRope, EmptyInputsAndBatches) {
  EXPECT_EQ(fast::rope(zeros({0, 4, 8}), 8, false, 1e4f, 1.0f, 0).shape(), (Shape{0, 4, 8}));
  EXPECT_EQ(fast::rope(zeros({2, 3, 0, 8}), 8, false, 1e4f, 1.0f, 0).shape(), (Shape{2, 3, 0, 8}));
  auto f = vmap([](const array& a) { return fast::rope(a, 8, false, 1e4f, 1.0f, 0); });
  array y = f(zeros({0, 2, 4, 8}));
  eval(y);
  EXPECT_EQ(y.shape(), (Shape{0, 2, 4, 8}));
}
