// The CrossEntropy fused primitive and its one-pass backward (src/fast/cross_entropy.h): the
// kernels (CPU, and GPU when the suite runs with the GPU as default device) against their
// fallback graphs for every floating dtype and class counts up to 2^17 + 5, negative and
// out-of-range targets, a float64 loop, GPU against CPU, the rule against central
// differences, vmap against a loop, bad input, and nn::losses::cross_entropy on it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/cross_entropy.h"
#include "nuvec/nn.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-12 : dt == float32 ? 1e-5 : dt == float16 ? 2e-3 : 1.6e-2;
}

array logits_of(const Shape& shape, Dtype dt) {
  return astype(multiply(randn(shape, float64), array(3.0, float64)), dt);
}

// Targets in [-classes, classes), with the first row's out of range when there are >= 2 rows.
array targets_of(const Shape& rows, int classes, bool out_of_range = true) {
  array t = random::randint(-classes, classes, rows, int32);
  if (out_of_range && rows.size() == 1 && rows[0] >= 2) {
    t = concatenate({array({classes + 3}, int32), slice(t, {1}, {rows[0]})});
  }
  return t;
}

} // namespace

TEST(FastCrossEntropy, KernelsMatchTheirFallbacks) {
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (int c : {1, 3, 64, 4097, (1 << 17) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " classes " + std::to_string(c));
      const int rows = c > 5000 ? 3 : 9;
      array x = logits_of({rows, c}, dt);
      array t = targets_of({rows}, c);
      array loss = fast::cross_entropy(x, t);
      EXPECT_EQ(loss.shape(), (Shape{rows}));
      EXPECT_EQ(loss.dtype(), dt == float64 ? float64 : float32);
      ASSERT_STREQ(loss.primitive().name(), "CrossEntropy");
      auto& p = dynamic_cast<fast::FastPrimitive&>(loss.primitive());
      const std::vector<array> node_inputs = loss.inputs(); // eval detaches the node
      array ref = p.fallback()(node_inputs)[0];
      expect_allclose(loss, ref, tol_of(dt), tol_of(dt));
      // The backward kernel against its fallback (the gradient formula).
      array g = astype(randn({rows}, float64), loss.dtype());
      auto vp = std::make_shared<CrossEntropyVjp>(default_stream(default_device()));
      std::vector<array> in = {x, node_inputs[1], loss, g};
      array dx(x.shape(), x.dtype(), vp, in);
      array dref = vp->fallback()(in)[0];
      expect_allclose(dx, dref, tol_of(dt), tol_of(dt));
    }
  }
}

TEST(FastCrossEntropy, Float64AgainstALoop) {
  const int rows = 5, c = 11;
  array x = logits_of({rows, c}, float64);
  array t = array({0, 10, -1, -11, 12}, int32); // first, last, from the end, out of range
  auto xv = to_vector(x);
  std::vector<int> tv = {0, 10, 10, 0, -1};
  std::vector<double> want(rows), dwant(rows * c);
  std::vector<double> gv = {0.5, -1.0, 2.0, 0.25, 1.5};
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < c; ++j) m = std::max(m, xv[r * c + j]);
    for (int j = 0; j < c; ++j) s += std::exp(xv[r * c + j] - m);
    const double lse = m + std::log(s);
    want[r] = lse - (tv[r] >= 0 ? xv[r * c + tv[r]] : 0.0);
    for (int j = 0; j < c; ++j) dwant[r * c + j] = gv[r] * (std::exp(xv[r * c + j] - lse) - (j == tv[r]));
  }
  expect_close(fast::cross_entropy(x, t), {rows}, want, 1e-12, 1e-12);
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) { return std::vector<array>{fast::cross_entropy(in[0], t)}; }, {x},
      {array(gv.begin(), {rows}, float64)});
  expect_close(grads[0], {rows, c}, dwant, 1e-12, 1e-12);
  // Any integer dtype of targets, and a non-contiguous (transposed) logits array.
  expect_allclose(fast::cross_entropy(x, astype(t, int64)), fast::cross_entropy(x, t), 0, 0);
  array xt = transpose(logits_of({c, rows}, float64));
  expect_allclose(fast::cross_entropy(xt, t), fast::cross_entropy(contiguous(xt), t), 1e-14, 1e-14);
}

TEST(FastCrossEntropy, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (Dtype dt : {float32, bfloat16, float16}) {
    for (int c : {3, 1000, 4099, 151936}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " classes " + std::to_string(c));
      array x = logits_of({6, c}, dt);
      array t = targets_of({6}, c);
      const double tol = tol_of(dt) * 4;
      expect_allclose(fast::cross_entropy(x, t, Device::gpu), fast::cross_entropy(x, t, Device::cpu), tol, tol);
      array g = randn({6}, float32);
      auto grad_on = [&](Device dev) {
        auto f = [&, dev](const std::vector<array>& in) {
          return std::vector<array>{fast::cross_entropy(in[0], t, dev)};
        };
        return vjp(f, {x}, {g}).second[0];
      };
      expect_allclose(grad_on(Device::gpu), grad_on(Device::cpu), tol, tol);
    }
  }
}

TEST(FastCrossEntropy, RuleAndVmap) {
  array x = logits_of({3, 4, 7}, float64);
  array t = random::randint(-7, 7, {3, 4}, int32);
  check_grad([&](const std::vector<array>& in) { return fast::cross_entropy(in[0], t); }, {x});
  // Second derivative through the backward's fallback.
  check_grad([&](const std::vector<array>& in) {
    return grad([&](const array& a) { return sum(fast::cross_entropy(a, t)); })(in[0]);
  }, {x});
  EXPECT_THROW(
      vjp([&](const std::vector<array>& in) { return std::vector<array>{fast::cross_entropy(x, in[0])}; },
          {astype(t, float64)}, {ones({3, 4}, float64)}),
      std::invalid_argument); // float targets: rejected
  for (int ax : {0, 1}) {
    SCOPED_TRACE("batch axis " + std::to_string(ax));
    check_vmap([](const std::vector<array>& in) { return std::vector<array>{fast::cross_entropy(in[0], in[1])}; },
               {x, t}, {ax, ax}, 1e-12, 1e-12);
  }
  // Logits batched along their class axis' neighbour, targets unbatched.
  array x2 = logits_of({3, 7, 5}, float64);
  array t2 = random::randint(0, 7, {3}, int32);
  check_vmap([&](const std::vector<array>& in) { return std::vector<array>{fast::cross_entropy(in[0], t2)}; },
             {x2}, {2}, 1e-12, 1e-12);
  auto batched = vmap([&](const array& a) { return fast::cross_entropy(a, t2); }, 2)(x2);
  EXPECT_STREQ(batched.primitive().name(), "CrossEntropy");
}

TEST(FastCrossEntropy, BadInputNamesTheOp) {
  auto bad = [](auto f) { expect_throws_naming<std::invalid_argument>(f, "[cross_entropy]"); };
  array x = ones({2, 5});
  bad([&] { fast::cross_entropy(array(1.0f), array(0, int32)); });
  bad([&] { fast::cross_entropy(x, zeros({3}, int32)); });
  bad([&] { fast::cross_entropy(x, zeros({2, 5}, int32)); });
  bad([&] { fast::cross_entropy(astype(x, int32), zeros({2}, int32)); });
  bad([&] { fast::cross_entropy(x, zeros({2}, float32)); });
  EXPECT_EQ(fast::cross_entropy(zeros({0, 5}), zeros({0}, int32)).shape(), (Shape{0}));
  // No classes: rows cannot be scored (once an error from inside max); no rows, an empty loss.
  bad([&] { fast::cross_entropy(zeros({2, 0}), zeros({2}, int32)); });
  array none = fast::cross_entropy(zeros({0, 0}), zeros({0}, int32));
  eval(none);
  EXPECT_EQ(none.shape(), (Shape{0}));
}

TEST(FastCrossEntropy, LossesUseTheKernel) {
  array x = logits_of({4, 6}, float32);
  array t = array({1, 0, 5, 2}, int32);
  array loss = nn::losses::cross_entropy(x, t);
  EXPECT_STREQ(loss.primitive().name(), "CrossEntropy");
  expect_allclose(loss, subtract(logsumexp(x, -1), reshape(take_along_axis(x, expand_dims(t, -1), -1), {4})), 1e-5, 1e-5);
  // Classes on another axis, weights and a reduction go around the fused node.
  array xa = transpose(x);
  expect_allclose(nn::losses::cross_entropy(xa, t, std::nullopt, 0), loss, 1e-6, 1e-6);
  expect_allclose(nn::losses::cross_entropy(x, t, ones({4}), -1, 0.0f, "mean"), mean(loss), 1e-6, 1e-6);
}

TEST(FastCrossEntropy, WideTargetsOutOfRangePickNothing) {
  array x = logits_of({4, 5}, float64);
  array lse = logsumexp(x, -1);
  // 2^32 + 3 would wrap to class 3 in int32; 2^64 - 1 (uint64) to -1, the last class.
  array t64 = array({int64_t(1) << 32 | 3, int64_t(2), -int64_t(1) << 40, int64_t(-1)}, int64);
  array l64 = fast::cross_entropy(x, t64);
  auto xv = to_vector(x);
  auto lv = to_vector(lse);
  expect_close(l64, {4}, {lv[0], lv[1] - xv[5 + 2], lv[2], lv[3] - xv[15 + 4]}, 1e-12, 1e-12);
  array tu = array({uint64_t(-1), uint64_t(4), uint64_t(5), uint64_t(0)}, uint64);
  expect_close(fast::cross_entropy(x, tu), {4}, {lv[0], lv[1] - xv[5 + 4], lv[2], lv[3] - xv[15]}, 1e-12, 1e-12);
}

TEST(FastCrossEntropy, VmapOverAnEmptyBatch) {
  array x = zeros({0, 3, 5}, float32);
  array t = zeros({0, 3}, int32);
  auto f = vmap([](const std::vector<array>& in) { return std::vector<array>{fast::cross_entropy(in[0], in[1])}; });
  EXPECT_EQ(f({x, t})[0].shape(), (Shape{0, 3}));
}

// Large logits keep their digits (MLX's test_losses/test_nn): the loss is (max − x_t) +
// log(sum(exp(x − max))) and the gradient's exponent (x − x_t) − loss, where lse − x_t and
// exp(x − (loss + x_t)) rounded at the logits' magnitude (1e6 + [2, −1] gave 0.0625 for
// 0.048587; [1e8, 1e8] gave 0 and a gradient [0, 1]). Kernel and fallback alike, and through
// nn::losses::cross_entropy (fused, smoothed, probabilities) and nn::log_softmax.
TEST(FastCrossEntropy, LargeLogitsKeepTheirDigits) {
  const array shifted = add(array({2.0f, -1.0f}, {1, 2}), array(1e6f));
  const array target = array({0}, int32);
  EXPECT_NEAR(fast::cross_entropy(shifted, target).item<float>(), 0.048587351f, 1e-6);
  for (float big : {1e4f, 1e8f, 1e20f, 1e36f}) {
    SCOPED_TRACE(big);
    const array even = full({1, 2}, array(big), float32);
    EXPECT_NEAR(fast::cross_entropy(even, target).item<float>(), 0.69314718f, 1e-6);
    const array g = grad([&](const array& x) { return sum(fast::cross_entropy(x, target)); })(even);
    expect_allclose(g, array({-0.5f, 0.5f}, {1, 2}), 1e-6, 1e-6);
    // The fallback graph (its meaning) agrees with the kernel.
    const array node = fast::cross_entropy(even, target); // holds the primitive the reference reads
    const auto& fb = dynamic_cast<fast::FastPrimitive&>(node.primitive()).fallback();
    EXPECT_NEAR(fb({even, target})[0].item<float>(), 0.69314718f, 1e-6);
    expect_allclose(nn::log_softmax(even), full({1, 2}, array(-0.69314718f), float32), 1e-6, 1e-6);
    EXPECT_NEAR(nn::losses::cross_entropy(even, target, std::nullopt, -1, 0.3f).item<float>(), 0.69314718f, 1e-6);
    EXPECT_NEAR(nn::losses::cross_entropy(even, array({1.0f, 0.0f}, {1, 2})).item<float>(), 0.69314718f, 1e-6);
  }
  // MLX's test_cross_entropy: label smoothing with probability targets, [0.498587] twice.
  const array l = array({2.0f, -1.0f, -1.0f, 2.0f}, {2, 2}), probs = array({1.0f, 0.0f, 0.0f, 1.0f}, {2, 2});
  expect_allclose(nn::losses::cross_entropy(l, probs, std::nullopt, -1, 0.3f), array({0.49858735f, 0.49858735f}),
                  1e-6, 1e-6);
}
