// nuvec tests: the transforms and their nesting (grad of grad, vmap of grad, jvp of vjp),
// argnums, custom_function / custom_vjp / checkpoint, and their errors. Per-primitive rules
// are checked by each family's suite through tests/checker.h.
#include <gtest/gtest.h>

#include "test_utils.h"
#include "checker.h"

using namespace nuvec;
using namespace nuvec::testing;

TEST(Transforms, GradOfGrad) {
  // f = x^3 sin(x): f'' = 6x sin x + 6x^2 cos x - x^3 sin x.
  auto f = [](const array& x) { return multiply(multiply(multiply(x, x), x), sin(x)); };
  auto d2 = grad(grad(f));
  auto d3 = grad(grad(grad(f)));
  for (double x : {0.3, -1.2, 2.5}) {
    double e2 = 6 * x * std::sin(x) + 6 * x * x * std::cos(x) - x * x * x * std::sin(x);
    EXPECT_NEAR(d2(array(x, float64)).item<double>(), e2, 1e-10);
    // f''' = 6 sin x + 18 x cos x - 9 x^2 sin x - x^3 cos x
    double e3 = 6 * std::sin(x) + 18 * x * std::cos(x) - 9 * x * x * std::sin(x) -
        x * x * x * std::cos(x);
    EXPECT_NEAR(d3(array(x, float64)).item<double>(), e3, 1e-9);
  }
}

TEST(Transforms, VmapOfGrad) {
  auto f = [](const array& x) { return sum(multiply(sin(x), x)); };
  auto per_example = vmap(grad(f));
  auto xs = randn({5, 3});
  auto g = per_example(xs);
  auto xv = to_vector(xs);
  std::vector<double> e(xv.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = std::cos(xv[i]) * xv[i] + std::sin(xv[i]);
  expect_close(g, {5, 3}, e, 1e-10, 1e-12);
  // in_axes = 1 and out_axes = 1.
  auto g1 = vmap(grad(f), 1, 1)(transpose(xs));
  expect_close(g1, {3, 5}, to_vector(transpose(g)), 1e-10, 1e-12);
}

TEST(Transforms, GradOfVmap) {
  auto f = [](const array& x) { return sum(vmap([](const array& r) { return exp(r); })(x)); };
  auto x = randn({4, 2});
  expect_allclose(grad(f)(x), exp(x), 1e-10, 1e-12);
}

TEST(Transforms, JvpOfVjp) {
  // h(x) = vjp of f at x with cotangent c; its jvp gives the Hessian-vector product.
  auto f = [](const array& x) { return sum(multiply(multiply(x, x), x)); };
  auto x = randn({3});
  auto v = randn({3});
  auto h = [&](const std::vector<array>& xs) {
    return std::vector<array>{vjp([&](const array& y) { return f(y); }, xs[0], array(1.0)).second};
  };
  auto [g, hv] = jvp(h, {x}, {v});
  auto xv = to_vector(x), vv = to_vector(v);
  std::vector<double> eg(3), ehv(3);
  for (int i = 0; i < 3; ++i) {
    eg[i] = 3 * xv[i] * xv[i];
    ehv[i] = 6 * xv[i] * vv[i];
  }
  expect_close(g[0], {3}, eg, 1e-10);
  expect_close(hv[0], {3}, ehv, 1e-10);
}

TEST(Transforms, ValueAndGradArgnums) {
  auto f = [](const std::vector<array>& xs) {
    return std::vector<array>{sum(multiply(xs[0], xs[1])), xs[0]};
  };
  auto a = randn({4}), b = randn({4});
  auto [vals, grads] = value_and_grad(f, std::vector<int>{1, 0})({a, b});
  ASSERT_EQ(grads.size(), 2u);
  expect_allclose(grads[0], a); // d/db first, as asked
  expect_allclose(grads[1], b);
  expect_allclose(vals[1], a); // auxiliary outputs come back unchanged
  auto g = grad([](const std::vector<array>& xs) { return sum(multiply(xs[0], xs[1])); }, 1)({a, b});
  expect_allclose(g[0], a);
  // Errors.
  expect_throws_naming<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{})({a, b}); }, "[grad]");
  expect_throws_naming<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{0, 0})({a, b}); }, "[grad]");
  expect_throws_naming<std::invalid_argument>(
      [&] { value_and_grad(f, std::vector<int>{2})({a, b}); }, "[grad]");
  expect_throws_naming<std::invalid_argument>(
      [&] { grad([](const array& x) { return multiply(x, x); })(a); }, "[vjp]");
}

TEST(Transforms, StopGradientCutsTheGraph) {
  auto f = [](const array& x) { return sum(multiply(x, stop_gradient(x))); };
  auto x = randn({5});
  expect_allclose(grad(f)(x), x); // d/dx (x * c) with c = x held constant
}

TEST(Transforms, VjpAndJvpErrors) {
  auto f = [](const std::vector<array>& xs) { return std::vector<array>{exp(xs[0])}; };
  auto x = randn({3});
  expect_throws_naming<std::invalid_argument>([&] { vjp(f, {x}, {}); }, "[vjp]");
  expect_throws_naming<std::invalid_argument>([&] { vjp(f, {x}, {randn({4})}); }, "[vjp]");
  expect_throws_naming<std::invalid_argument>([&] { jvp(f, {x}, {}); }, "[jvp]");
  expect_throws_naming<std::invalid_argument>([&] { jvp(f, {x}, {randn({2})}); }, "[jvp]");
}

TEST(Transforms, VmapAxesAndErrors) {
  auto f = [](const std::vector<array>& xs) { return std::vector<array>{add(xs[0], xs[1])}; };
  auto a = randn({3, 4}), b = randn({4});
  // b unmapped (-1): broadcast against every row.
  auto out = vmap(f, {0, -1})({a, b})[0];
  expect_allclose(out, add(a, b));
  // Output independent of the mapped input is repeated over the batch.
  auto c = vmap([&](const std::vector<array>& xs) { return std::vector<array>{b}; }, {0})({a})[0];
  expect_allclose(c, broadcast_to(b, {3, 4}));
  expect_throws_naming<std::invalid_argument>([&] { vmap(f, {0, 0})({a, randn({5, 4})}); }, "[vmap]");
  expect_throws_naming<std::invalid_argument>([&] { vmap(f, {2, -1})({a, b}); }, "[vmap]");
  expect_throws_naming<std::invalid_argument>([&] { vmap(f, {0})({a, b}); }, "[vmap]");
  expect_throws_naming<std::invalid_argument>([&] { vmap(f, {-1, -1})({a, b}); }, "[vmap]");
}

TEST(Transforms, CustomVjpReplacesTheRule) {
  // The forward is exp, but the vjp says "cotangent * 2": grad must follow the custom rule.
  auto f = custom_vjp(
      [](const std::vector<array>& xs) { return std::vector<array>{exp(xs[0])}; },
      [](const std::vector<array>&, const std::vector<array>& cts, const std::vector<array>&) {
        return std::vector<array>{multiply(cts[0], array(2.0))};
      });
  auto x = randn({4});
  auto y = f({x})[0];
  expect_allclose(y, exp(x));
  auto g = grad([&](const array& z) { return sum(f({z})[0]); })(x);
  expect_allclose(g, full({4}, array(2.0)));
}

TEST(Transforms, CustomFunctionJvpAndVmapRules) {
  auto fun = [](const std::vector<array>& xs) { return std::vector<array>{sin(xs[0])}; };
  int vmap_calls = 0;
  auto f = custom_function(
      fun, std::nullopt,
      [](const std::vector<array>&, const std::vector<array>& ts, const std::vector<int>&) {
        return std::vector<array>{multiply(ts[0], array(10.0))};
      },
      [&](const std::vector<array>& xs, const std::vector<int>& axes) {
        vmap_calls++;
        return std::make_pair(std::vector<array>{sin(xs[0])}, std::vector<int>{axes[0]});
      });
  auto x = randn({3});
  auto [ys, ts] = jvp(f, {x}, {ones({3}, float64)});
  expect_allclose(ts[0], full({3}, array(10.0)));
  // The vjp is derived from fun when not given: cos(x).
  auto g = grad([&](const array& z) { return sum(f({z})[0]); })(x);
  expect_allclose(g, cos(x), 1e-10);
  auto xs = randn({2, 3});
  auto vy = vmap(f, {0})({xs})[0];
  EXPECT_EQ(vmap_calls, 1);
  expect_allclose(vy, sin(xs));
}

TEST(Transforms, CheckpointGivesTheSameGradient) {
  auto body = [](const std::vector<array>& xs) {
    return std::vector<array>{tanh(multiply(exp(xs[0]), xs[1]))};
  };
  auto ck = checkpoint(body);
  auto a = randn({6}), b = randn({6});
  auto loss = [](auto fn) {
    return [fn](const std::vector<array>& xs) { return sum(fn(xs)[0]); };
  };
  auto g1 = grad(loss(body), std::vector<int>{0, 1})({a, b});
  auto g2 = grad(loss(ck), std::vector<int>{0, 1})({a, b});
  expect_allclose(g2[0], g1[0], 1e-12);
  expect_allclose(g2[1], g1[1], 1e-12);
}

TEST(Transforms, GenericCheckerOnAComposite) {
  check_grad(
      [](const std::vector<array>& xs) { return multiply(exp(xs[0]), sin(xs[1])); },
      {randn({2, 3}), randn({2, 3})});
  check_vmap(
      [](const std::vector<array>& xs) { return std::vector<array>{multiply(exp(xs[0]), xs[1])}; },
      {randn({4, 3}), randn({3})}, {0, -1});
}
