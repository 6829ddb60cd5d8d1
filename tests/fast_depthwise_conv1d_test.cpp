// The depthwise conv1d fused primitives (src/fast/depthwise_conv1d.h): conv1d's DepthwiseConv1d
// node and fast::causal_conv1d_step, their kernels (CPU, and GPU when the suite runs with the
// GPU as default device) against the fallback (the general convolution) in the same dtype and
// in float64, on odd sizes and every stride, padding and dilation variant; the causal use
// (padding K − 1, then the first L outputs) against a float64 loop; the decode step against
// conv1d on its window, and a decode loop against the whole causal conv; the calls left to
// the general path; GPU against CPU; the rules from the fallback (vjp and jvp against central
// differences, vmap against a loop); an export round trip; bad input.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/depthwise_conv1d.h"
#include "nuvec/export.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// Both sides round the same float32 sums once (in another order): an ulp of the dtype.
double tol_of(Dtype dt) {
  return dt == float64 ? 1e-12 : dt == float32 ? 2e-5 : dt == float16 ? 4e-3 : 3e-2;
}

const Dtype kDtypes[] = {float64, float32, float16, bfloat16};

// The node's fallback on its inputs, or on its inputs cast to float64.
std::vector<array> fallback_of(const array& y, bool in_float64) {
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  std::vector<array> in = y.inputs();
  if (in_float64) {
    for (auto& a : in) a = astype(a, float64);
  }
  return p.fallback()(in);
}

// A depthwise weight [C, K, 1] and input [N, L, C] of dtype dt.
array weight_of(int c, int k, Dtype dt) {
  return astype(randn({c, k, 1}), dt);
}

// The causal conv in float64: y[n, t, c] = Σ_j w[c, j] · x[n, t − K + 1 + j, c] (zeros before 0).
std::vector<double> causal_loop(const array& x, const array& w) {
  const int n = x.shape(0), l = x.shape(1), c = x.shape(2), k = w.shape(1);
  const auto xv = to_vector(x), wv = to_vector(w);
  std::vector<double> y(xv.size(), 0.0);
  for (int b = 0; b < n; ++b) {
    for (int t = 0; t < l; ++t) {
      for (int ch = 0; ch < c; ++ch) {
        for (int j = 0; j < k; ++j) {
          const int i = t - k + 1 + j;
          if (i >= 0) y[(b * l + t) * c + ch] += wv[ch * k + j] * xv[(b * l + i) * c + ch];
        }
      }
    }
  }
  return y;
}

// The causal conv through conv1d: padding K − 1 on both sides, the first L outputs kept (how
// Qwen3-Next's prefill and mlx-lm run it).
array causal_conv(const array& x, const array& w) {
  const int n = x.shape(0), l = x.shape(1), c = x.shape(2), k = w.shape(1);
  return slice(conv1d(x, w, 1, k - 1, 1, c), {0, 0, 0}, {n, l, c});
}

} // namespace

TEST(FastDepthwiseConv1d, KernelMatchesTheGeneralConv) {
  auto& gen = rng();
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  for (int c : {1, 3, 33, 1029}) {
    for (int k : {1, 2, 4}) {
      for (int l : {1, 7, 130}) {
        // A stride, padding and dilation whose dilated kernel fits the padded input.
        int stride, padding, dilation;
        do {
          stride = pick(1, 3);
          padding = std::vector<int>{0, k - 1, 2}[pick(0, 2)];
          dilation = pick(1, 2);
        } while (l + 2 * padding < dilation * (k - 1) + 1);
        const int n = pick(1, 3);
        for (Dtype dt : kDtypes) {
          std::ostringstream what;
          what << dtype_name(dt) << " N " << n << " L " << l << " C " << c << " K " << k << " stride " << stride
               << " padding " << padding << " dilation " << dilation;
          SCOPED_TRACE(what.str());
          array x = astype(randn({n, l, c}), dt), w = weight_of(c, k, dt);
          array y = conv1d(x, w, stride, padding, dilation, c);
          ASSERT_STREQ(y.primitive().name(), "DepthwiseConv1d");
          const int l_out = (l + 2 * padding - dilation * (k - 1) - 1) / stride + 1;
          EXPECT_EQ(y.shape(), (Shape{n, l_out, c}));
          EXPECT_EQ(y.dtype(), dt);
          // Both references before y's evaluation detaches its graph.
          array ref = fallback_of(y, false)[0], ref64 = fallback_of(y, true)[0];
          EXPECT_STREQ(ref.primitive().name(), "Convolution");
          expect_allclose(y, ref, tol_of(dt), tol_of(dt));
          expect_allclose(y, ref64, tol_of(dt), tol_of(dt));
        }
      }
    }
  }
}

TEST(FastDepthwiseConv1d, AnyLayout) {
  // A transposed view of x and of the weight: copied to rows by the kernels, same result.
  array x = randn({2, 9, 37}, float32), w = randn({37, 3, 1}, float32);
  array want = conv1d(x, w, 2, 1, 2, 37);
  array xv = swapaxes(contiguous(swapaxes(x, 1, 2)), 1, 2);
  array wv = swapaxes(contiguous(swapaxes(w, 0, 1)), 0, 1);
  array got = conv1d(xv, wv, 2, 1, 2, 37);
  ASSERT_STREQ(got.primitive().name(), "DepthwiseConv1d");
  expect_allclose(got, want, 0, 0);
  // A slice of a larger input (offset rows).
  array big = randn({3, 12, 37}, float32);
  array part = slice(big, {1, 2, 0}, {3, 11, 37});
  expect_allclose(conv1d(part, w, 1, 2, 1, 37), conv1d(contiguous(part), w, 1, 2, 1, 37), 0, 0);
}

TEST(FastDepthwiseConv1d, CausalUse) {
  for (Dtype dt : {float64, float32}) {
    for (int k : {1, 2, 4}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " K " + std::to_string(k));
      array x = astype(randn({2, 130, 33}), dt), w = weight_of(33, k, dt);
      array y = causal_conv(x, w);
      expect_close(y, x.shape(), causal_loop(x, w), tol_of(dt), tol_of(dt));
    }
  }
}

TEST(FastDepthwiseConv1d, UncoveredCallsTakeTheGeneralPath) {
  array x = randn({2, 7, 4}, float32);
  // Not depthwise: groups 1, a channel multiplier (C_out = 2C), groups 2.
  EXPECT_STREQ(conv1d(x, randn({4, 3, 4}, float32)).primitive().name(), "Convolution");
  EXPECT_STREQ(conv1d(x, randn({8, 3, 1}, float32), 1, 0, 1, 4).primitive().name(), "Convolution");
  EXPECT_STREQ(conv1d(x, randn({4, 3, 2}, float32), 1, 0, 1, 2).primitive().name(), "Convolution");
  // Depthwise, but a weight of another dtype (promoted), or a negative padding (crops).
  EXPECT_STREQ(conv1d(x, randn({4, 3, 1}, float16), 1, 0, 1, 4).primitive().name(), "Convolution");
  array cropped = conv1d(x, randn({4, 2, 1}, float32), 1, -1, 1, 4);
  EXPECT_STREQ(cropped.primitive().name(), "Convolution");
  EXPECT_EQ(cropped.shape(), (Shape{2, 4, 4}));
  // One channel is depthwise with groups 1; an empty batch too.
  EXPECT_STREQ(conv1d(randn({2, 7, 1}, float32), randn({1, 3, 1}, float32)).primitive().name(), "DepthwiseConv1d");
  array empty = conv1d(zeros({0, 7, 4}), zeros({4, 3, 1}), 1, 1, 1, 4);
  EXPECT_STREQ(empty.primitive().name(), "DepthwiseConv1d");
  EXPECT_EQ(empty.shape(), (Shape{0, 7, 4}));
  eval(empty);
}

TEST(FastDepthwiseConv1d, StepMatchesConvOnItsWindow) {
  auto& gen = rng();
  for (int c : {1, 3, 33, 1029}) {
    for (int k : {1, 2, 4}) {
      const int n = std::uniform_int_distribution<int>(1, 3)(gen);
      for (Dtype dt : kDtypes) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " N " + std::to_string(n) + " C " + std::to_string(c) + " K " +
                     std::to_string(k));
        array x = astype(randn({n, 1, c}), dt), w = weight_of(c, k, dt), state = astype(randn({n, k - 1, c}), dt);
        auto [y, next] = fast::causal_conv1d_step(x, w, state);
        ASSERT_STREQ(y.primitive().name(), "CausalConv1dStep");
        EXPECT_EQ(y.shape(), (Shape{n, 1, c}));
        EXPECT_EQ(next.shape(), (Shape{n, k - 1, c}));
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_EQ(next.dtype(), dt);
        auto ref = fallback_of(y, false), ref64 = fallback_of(y, true);
        array window = concatenate({state, x}, 1);
        expect_allclose(y, conv1d(window, w, 1, 0, 1, c), tol_of(dt), tol_of(dt));
        expect_allclose(y, ref[0], tol_of(dt), tol_of(dt));
        expect_allclose(y, ref64[0], tol_of(dt), tol_of(dt));
        // The new state is the window's last K − 1 rows, exactly.
        expect_allclose(next, slice(window, {0, 1, 0}, {n, k, c}), 0, 0);
        expect_allclose(next, ref[1], 0, 0);
      }
    }
  }
}

TEST(FastDepthwiseConv1d, DecodeLoopReproducesTheCausalConv) {
  for (Dtype dt : {float32, bfloat16}) {
    for (int k : {1, 2, 4}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " K " + std::to_string(k));
      const int n = 3, l = 11, c = 40;
      array x = astype(randn({n, l, c}), dt), w = weight_of(c, k, dt);
      array state = zeros({n, k - 1, c}, dt);
      std::vector<array> ys;
      for (int t = 0; t < l; ++t) {
        auto [y, next] = fast::causal_conv1d_step(slice(x, {0, t, 0}, {n, t + 1, c}), w, state);
        ys.push_back(y);
        state = next;
      }
      // Every step rounds as the whole conv does: the same sums, term by term.
      expect_allclose(concatenate(ys, 1), causal_conv(x, w), tol_of(dt), tol_of(dt));
      // The final state holds the last K − 1 inputs.
      expect_allclose(state, slice(x, {0, l - (k - 1), 0}, {n, l, c}), 0, 0);
    }
  }
}

TEST(FastDepthwiseConv1d, StepCastsWeightAndStateToXsDtype) {
  array x = astype(randn({2, 1, 8}), bfloat16);
  array w = randn({8, 4, 1}, float32), state = randn({2, 3, 8}, float32);
  auto [y, next] = fast::causal_conv1d_step(x, w, state);
  EXPECT_EQ(y.dtype(), bfloat16);
  EXPECT_EQ(next.dtype(), bfloat16);
  auto [y2, next2] = fast::causal_conv1d_step(x, astype(w, bfloat16), astype(state, bfloat16));
  expect_allclose(y, y2, 0, 0);
  expect_allclose(next, next2, 0, 0);
}

TEST(FastDepthwiseConv1d, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (Dtype dt : {float32, bfloat16, float16, float64}) {
    // 1024 channels split into 16-byte vectors; 1029 take the one-channel path.
    for (int c : {1024, 1029}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(c));
      array x = astype(randn({2, 70, c}), dt), w = weight_of(c, 4, dt);
      auto conv = [&](Device dev) { return conv1d(x, w, 1, 3, 1, c, dev); };
      auto strided = [&](Device dev) { return conv1d(x, w, 3, 2, 2, c, dev); };
      expect_allclose(conv(Device::gpu), conv(Device::cpu), tol_of(dt), tol_of(dt));
      expect_allclose(strided(Device::gpu), strided(Device::cpu), tol_of(dt), tol_of(dt));
      array xs = astype(randn({5, 1, c}), dt), state = astype(randn({5, 3, c}), dt);
      auto step = [&](Device dev) { return fast::causal_conv1d_step(xs, w, state, dev); };
      auto [yg, ng] = step(Device::gpu);
      auto [yc, nc] = step(Device::cpu);
      expect_allclose(yg, yc, tol_of(dt), tol_of(dt));
      expect_allclose(ng, nc, 0, 0);
    }
  }
}

TEST(FastDepthwiseConv1d, GradientsFromTheFallback) {
  // conv1d's depthwise node, input and weight, with stride, padding and dilation.
  for (auto [stride, padding, dilation] : {std::tuple{1, 2, 1}, std::tuple{2, 1, 2}, std::tuple{1, 0, 1}}) {
    SCOPED_TRACE("stride " + std::to_string(stride) + " padding " + std::to_string(padding) + " dilation " +
                 std::to_string(dilation));
    check_grad([=](const std::vector<array>& in) { return conv1d(in[0], in[1], stride, padding, dilation, 3); },
               {randn({2, 6, 3}), randn({3, 3, 1})});
  }
  // The step: y and the new state, for x, the weight and the state.
  for (int k : {1, 2, 4}) {
    SCOPED_TRACE("K " + std::to_string(k));
    const std::vector<array> in = {randn({2, 1, 3}), randn({3, k, 1}), randn({2, k - 1, 3})};
    GradCheckOptions opts;
    opts.argnums = k > 1 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1};
    check_grad([](const std::vector<array>& a) { return fast::causal_conv1d_step(a[0], a[1], a[2]).first; }, in,
               opts);
    if (k > 1) {
      check_grad([](const std::vector<array>& a) { return fast::causal_conv1d_step(a[0], a[1], a[2]).second; },
                 in, opts);
    }
  }
  // Second order: the weight gradient differentiated again.
  auto wgrad = [](const std::vector<array>& in) {
    auto loss = [](const std::vector<array>& xs) {
      array y = conv1d(xs[0], xs[1], 1, 1, 1, 2);
      return std::vector<array>{sum(multiply(y, y))};
    };
    return vjp(loss, in, {array(1.0, float64)}).second[1];
  };
  check_grad(wgrad, {randn({1, 5, 2}), randn({2, 2, 1})});
}

TEST(FastDepthwiseConv1d, VmapAgainstALoop) {
  auto conv = [](const std::vector<array>& in) { return std::vector<array>{conv1d(in[0], in[1], 1, 2, 1, 5)}; };
  array xs = randn({3, 2, 7, 5}), ws = randn({3, 5, 3, 1});
  array x = randn({2, 7, 5}), w = randn({5, 3, 1});
  check_vmap(conv, {xs, w}, {0, -1}, 1e-10, 1e-10);
  check_vmap(conv, {x, ws}, {-1, 0}, 1e-10, 1e-10);
  check_vmap(conv, {moveaxis(xs, 0, 2), ws}, {2, 0}, 1e-10, 1e-10);
  auto step = [](const std::vector<array>& in) {
    auto [y, next] = fast::causal_conv1d_step(in[0], in[1], in[2]);
    return std::vector<array>{y, next};
  };
  array xb = randn({4, 2, 1, 5}), sb = randn({4, 2, 2, 5}), wb = randn({4, 5, 3, 1});
  check_vmap(step, {xb, w, sb}, {0, -1, 0}, 1e-10, 1e-10);
  check_vmap(step, {xb, wb, sb}, {0, 0, 0}, 1e-10, 1e-10);
  check_vmap(step, {randn({2, 1, 5}), w, moveaxis(sb, 0, 1)}, {-1, -1, 1}, 1e-10, 1e-10);
}

TEST(FastDepthwiseConv1d, ExportRoundTrip) {
  array x = randn({2, 9, 6}, float32), w = randn({6, 4, 1}, float32), state = randn({2, 3, 6}, float32);
  auto f = [](const Args& a) {
    auto [y, next] = fast::causal_conv1d_step(slice(a[0], {0, 0, 0}, {2, 1, 6}), a[1], a[2]);
    return std::vector<array>{conv1d(a[0], a[1], 2, 3, 1, 6), y, next};
  };
  const std::string path = (scratch_dir() / "depthwise_conv1d.nuvecfn").string();
  export_function(path, f, {x, w, state});
  auto imported = import_function(path);
  auto got = imported({x, w, state}), want = f({x, w, state});
  for (size_t i = 0; i < want.size(); ++i) expect_allclose(got[i], want[i], 0, 0);
}

TEST(FastDepthwiseConv1d, BadInputNamesTheOp) {
  auto bad = [](auto f) { expect_throws_naming<std::invalid_argument>(f, "[causal_conv1d_step]"); };
  array x = ones({2, 1, 4}), w = ones({4, 3, 1}), state = ones({2, 2, 4});
  bad([&] { fast::causal_conv1d_step(ones({2, 4}), w, state); });                     // x rank
  bad([&] { fast::causal_conv1d_step(ones({2, 2, 4}), w, state); });                  // two steps
  bad([&] { fast::causal_conv1d_step(ones({2, 1, 0}), ones({0, 3, 1}), ones({2, 2, 0})); }); // no channels
  bad([&] { fast::causal_conv1d_step(x, ones({5, 3, 1}), state); });                  // weight's C
  bad([&] { fast::causal_conv1d_step(x, ones({4, 3, 2}), state); });                  // weight not [C, K, 1]
  bad([&] { fast::causal_conv1d_step(x, ones({4, 3}), state); });                     // weight rank
  bad([&] { fast::causal_conv1d_step(x, ones({4, 0, 1}), ones({2, 0, 4})); });         // K = 0
  bad([&] { fast::causal_conv1d_step(x, w, ones({2, 3, 4})); });                      // K − 1 != 2
  bad([&] { fast::causal_conv1d_step(x, w, ones({3, 2, 4})); });                      // batch
  bad([&] { fast::causal_conv1d_step(x, w, ones({2, 2, 5})); });                      // channels
  bad([&] { fast::causal_conv1d_step(astype(x, int32), w, state); });                 // dtypes
  bad([&] { fast::causal_conv1d_step(x, astype(w, int32), state); });
  bad([&] { fast::causal_conv1d_step(x, w, astype(state, complex64)); });
  // The depthwise conv1d is checked as conv1d: its errors name conv1d.
  auto bad_conv = [](auto f) { expect_throws_naming<std::invalid_argument>(f, "[conv1d]"); };
  array xc = ones({2, 5, 4});
  bad_conv([&] { conv1d(xc, ones({4, 6, 1}), 1, 0, 1, 4); }); // kernel past the input
  bad_conv([&] { conv1d(xc, ones({4, 3, 1}), 0, 0, 1, 4); }); // stride
  bad_conv([&] { conv1d(xc, ones({4, 3, 1}), 1, 0, 0, 4); }); // dilation
  bad_conv([&] { conv1d(xc, ones({4, 3, 1}), 1, 0, 3, 4); }); // dilated kernel past the input
}
