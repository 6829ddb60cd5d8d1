// The last-axis fused primitives on the fused-op base (src/fast/): Softmax and LogSumExp.
// Their kernels (CPU, and GPU when the suite runs with the GPU as default device) against
// their own fallback graphs on odd sizes, special rows and every floating dtype, GPU against
// CPU, the nodes the ops record, and the rules derived from the fallback (vjp and jvp
// against central differences, vmap against a loop).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/fast_primitive.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// x (rows x d, dtype dt) with special rows: one of -inf, one holding +inf, one holding NaN,
// one with a single -inf, the rest random with an offset (large magnitudes).
array special_rows(int rows, int d, Dtype dt) {
  const double inf = std::numeric_limits<double>::infinity();
  auto v = to_vector(multiply(randn({rows, d}, float64), array(3.0, float64)));
  for (int j = 0; j < d; ++j) v[0 * d + j] = -inf;
  if (rows > 1) v[1 * d + d / 2] = inf;
  if (rows > 2) v[2 * d + d - 1] = std::nan("");
  if (rows > 3) v[3 * d] = -inf;
  if (rows > 4) for (int j = 0; j < d; ++j) v[4 * d + j] += 80.0; // exp would overflow float32
  return astype(array(v.begin(), {rows, d}, float64), dt);
}

// The node's output and its primitive's fallback on the same inputs, both evaluated.
std::pair<array, array> kernel_and_fallback(const array& y, const char* name) {
  EXPECT_TRUE(y.has_primitive());
  EXPECT_STREQ(y.primitive().name(), name);
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  array ref = p.fallback()(y.inputs())[0];
  eval(y, ref);
  return {y, ref};
}

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-12 : dt == float32 ? 2e-6 : dt == float16 ? 2e-3 : 1.6e-2;
}

} // namespace

TEST(FastRows, KernelsMatchTheirFallbacks) {
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (int d : {1, 7, 33, 129, 1500}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      array x = special_rows(9, d, dt);
      // logsumexp over the last axis is one LogSumExp node of shape (..., 1).
      array l = logsumexp(x, -1, true);
      EXPECT_EQ(l.shape(), (Shape{9, 1}));
      EXPECT_EQ(l.dtype(), dt);
      auto [lk, lf] = kernel_and_fallback(l, "LogSumExp");
      expect_allclose(lk, lf, tol_of(dt), tol_of(dt));
      auto lv = to_vector(lk);
      EXPECT_EQ(lv[0], -std::numeric_limits<double>::infinity()); // a row of -inf
      EXPECT_EQ(lv[1], std::numeric_limits<double>::infinity()); // a row holding +inf
      EXPECT_TRUE(std::isnan(lv[2]));
      array s = softmax(x, -1);
      auto [sk, sf] = kernel_and_fallback(s, "Softmax");
      expect_allclose(sk, sf, tol_of(dt), tol_of(dt));
      // Not a dense last axis: the kernels copy first.
      array xt = transpose(special_rows(d, 9, dt));
      auto [tk, tf] = kernel_and_fallback(logsumexp(xt, -1, true), "LogSumExp");
      expect_allclose(tk, tf, tol_of(dt), tol_of(dt));
    }
  }
}

TEST(FastRows, Float64AgainstALoop) {
  array x = multiply(randn({4, 3, 37}, float64), array(5.0, float64));
  auto v = to_vector(x);
  std::vector<double> want(12);
  for (int r = 0; r < 12; ++r) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 37; ++j) m = std::max(m, v[r * 37 + j]);
    for (int j = 0; j < 37; ++j) s += std::exp(v[r * 37 + j] - m);
    want[r] = m + std::log(s);
  }
  expect_close(logsumexp(x, -1), {4, 3}, want, 1e-13, 1e-13);
  expect_close(logsumexp(x, 2, true), {4, 3, 1}, want, 1e-13, 1e-13);
  // Other axes run the graph (no node of its own) and agree with the last-axis kernel.
  expect_allclose(logsumexp(transpose(x, {0, 2, 1}), 1), logsumexp(x, -1), 1e-13, 1e-13);
  // Integers compute in float32, as the op's other float math.
  EXPECT_EQ(logsumexp(array({1, 2, 3}), -1).dtype(), float32);
  EXPECT_THROW(logsumexp(zeros({2, 0}), -1), std::invalid_argument);
}

TEST(FastRows, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (Dtype dt : {float32, bfloat16, float64}) {
    for (int d : {5, 1024, 1025, 40000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      array x = special_rows(7, d, dt);
      array c = logsumexp(x, -1, false, Device::cpu), g = logsumexp(x, -1, false, Device::gpu);
      expect_allclose(g, c, tol_of(dt) * 4, tol_of(dt) * 4);
      expect_allclose(softmax(x, -1, false, Device::gpu), softmax(x, -1, false, Device::cpu),
                      tol_of(dt) * 4, tol_of(dt) * 4);
    }
  }
}

TEST(FastRows, RulesFromTheFallback) {
  array x = randn({3, 5, 7}, float64);
  // vjp and jvp against central differences: the jvps are derived from the fallbacks, the
  // vjps are SoftmaxVjp and LogSumExpVjp nodes (tests/fast_softmax_vjp_test.cpp).
  check_grad([](const std::vector<array>& in) { return logsumexp(in[0], -1); }, {x});
  check_grad([](const std::vector<array>& in) { return logsumexp(in[0], -1, true); }, {x});
  check_grad([](const std::vector<array>& in) { return softmax(in[0], -1); }, {x});
  // Second order through the backward node's rules.
  auto g2 = grad([](const array& a) { return sum(grad([](const array& b) { return sum(logsumexp(b, -1)); })(a) * a); })(x);
  eval(g2);
  EXPECT_EQ(g2.shape(), x.shape());
  // vmap keeps the kernel on trailing axes, wherever the batch axis is.
  for (int ax : {0, 1, 2}) {
    SCOPED_TRACE("batch axis " + std::to_string(ax));
    check_vmap([](const std::vector<array>& in) { return std::vector<array>{logsumexp(in[0], -1, true)}; },
               {x}, {ax}, 1e-12, 1e-12);
    check_vmap([](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], -1)}; },
               {x}, {ax}, 1e-12, 1e-12);
  }
  auto batched = vmap([](const array& a) { return logsumexp(a, -1, true); })(x);
  EXPECT_STREQ(batched.primitive().name(), "LogSumExp");
}

TEST(FastRows, UncoveredDtypesRunTheFallback) {
  // complex64 has no row kernel: the op returns the fallback graph, no fused node.
  array re = randn({3, 6}, float32), im = randn({3, 6}, float32);
  array z = add(astype(re, complex64), multiply(astype(im, complex64), array(complex64_t(0.0f, 1.0f))));
  array l = logsumexp(z, -1);
  EXPECT_STRNE(l.primitive().name(), "LogSumExp");
  // exp of it is sum(exp(z)) (the imaginary part is defined up to 2 pi).
  expect_allclose(real(exp(l)), real(sum(exp(z), -1)), 1e-4, 1e-4);
  expect_allclose(imag(exp(l)), imag(sum(exp(z), -1)), 1e-4, 1e-4);
  array s = softmax(z, -1);
  EXPECT_STRNE(s.primitive().name(), "Softmax");
  expect_allclose(real(sum(s, -1)), ones({3}), 1e-5, 1e-5);
}
