// nuvec tests: nuvec::optimizers (update rules against the formulas written here in float64,
// schedules, clipping, state save/load) and an end-to-end training run of a small MLP.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include <unistd.h>

#include "nuvec/nn.h"
#include "nuvec/optimizers.h"
#include "test_utils.h"

namespace nuvec {
namespace {

using namespace nuvec::testing;
using nn::ParamMap;
namespace opt = nuvec::optimizers;

// Per-element reference rule: (p, g, state, lr, t) -> new p, updating state in place.
using RefRule = std::function<double(double p, double g, std::vector<double>& s, double lr, int t)>;

// Runs `steps` updates of o on two parameters with fresh random gradients and compares each
// step with the reference rule applied element by element (states start at zero).
void check_rule(opt::Optimizer& o, const RefRule& rule, double lr, int nslots, int steps = 3) {
  ParamMap params = {{"a.weight", randn({3, 4})}, {"b", randn({5})}};
  std::map<std::string, std::vector<double>> ref;
  std::map<std::string, std::vector<std::vector<double>>> state;
  for (auto& [k, v] : params) {
    ref[k] = to_vector(v);
    state[k].assign(v.size(), std::vector<double>(nslots, 0.0));
  }
  for (int t = 1; t <= steps; ++t) {
    ParamMap grads;
    for (auto& [k, v] : params) grads.insert_or_assign(k, randn(v.shape()));
    params = o.apply_gradients(grads, params);
    EXPECT_EQ(o.step(), t);
    for (auto& [k, v] : params) {
      SCOPED_TRACE(k + " step " + std::to_string(t));
      auto g = to_vector(grads.at(k));
      for (size_t i = 0; i < g.size(); ++i) ref[k][i] = rule(ref[k][i], g[i], state[k][i], lr, t);
      expect_close(v, v.shape(), ref[k], 1e-12, 1e-12);
    }
  }
}

TEST(SGD, PlainMomentumNesterovDecayDampening) {
  {
    opt::SGD o(0.1);
    check_rule(o, [](double p, double g, auto&, double lr, int) { return p - lr * g; }, 0.1, 0);
  }
  for (auto [mu, wd, tau, nest] :
       {std::tuple{0.9, 0.0, 0.0, false}, std::tuple{0.9, 0.01, 0.0, true}, std::tuple{0.5, 0.1, 0.3, false}}) {
    SCOPED_TRACE("momentum " + std::to_string(mu) + " nesterov " + std::to_string(nest));
    opt::SGD o(0.05, mu, wd, tau, nest);
    check_rule(
        o,
        [=](double p, double g, std::vector<double>& s, double lr, int) {
          g += wd * p;
          s[0] = mu * s[0] + (tau > 0 ? (1 - tau) * g : g);
          double u = nest ? g + mu * s[0] : s[0];
          return p - lr * u;
        },
        0.05, 1);
    EXPECT_EQ(o.state().size(), 2u); // one "v" per parameter
    EXPECT_TRUE(o.state().count("a.weight.v"));
  }
  expect_throws_naming<std::invalid_argument>([] { opt::SGD(0.1, 0.0, 0.0, 0.0, true); }, "[SGD]");
  expect_throws_naming<std::invalid_argument>([] { opt::SGD(0.1, 0.9, 0.0, 0.1, true); }, "[SGD]");
}

TEST(Adam, WithAndWithoutBiasCorrectionAndAdamW) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (bool bc : {false, true}) {
    opt::Adam o(1e-2, {b1, b2}, eps, bc);
    check_rule(
        o,
        [=](double p, double g, std::vector<double>& s, double lr, int t) {
          s[0] = b1 * s[0] + (1 - b1) * g;
          s[1] = b2 * s[1] + (1 - b2) * g * g;
          if (!bc) return p - lr * s[0] / (std::sqrt(s[1]) + eps);
          double mh = s[0] / (1 - std::pow(b1, t)), vh = s[1] / (1 - std::pow(b2, t));
          return p - lr * mh / (std::sqrt(vh) + eps);
        },
        1e-2, 2);
  }
  opt::AdamW w(1e-2, {0.8, 0.99}, 1e-6, 0.1);
  check_rule(
      w,
      [](double p, double g, std::vector<double>& s, double lr, int) {
        p *= 1 - lr * 0.1;
        s[0] = 0.8 * s[0] + 0.2 * g;
        s[1] = 0.99 * s[1] + 0.01 * g * g;
        return p - lr * s[0] / (std::sqrt(s[1]) + 1e-6);
      },
      1e-2, 2);
  expect_throws_naming<std::invalid_argument>([] { opt::Adam(0.1, {1.0, 0.9}); }, "[Adam]");
}

TEST(Optimizers, AdagradRMSpropLion) {
  opt::Adagrad ag(0.1, 1e-8);
  check_rule(
      ag,
      [](double p, double g, std::vector<double>& s, double lr, int) {
        s[0] += g * g;
        return p - lr * g / (std::sqrt(s[0]) + 1e-8);
      },
      0.1, 1);
  opt::RMSprop rp(0.01, 0.9, 1e-8);
  check_rule(
      rp,
      [](double p, double g, std::vector<double>& s, double lr, int) {
        s[0] = 0.9 * s[0] + 0.1 * g * g;
        return p - lr * g / (std::sqrt(s[0]) + 1e-8);
      },
      0.01, 1);
  opt::Lion li(1e-3, {0.9, 0.99}, 0.1);
  check_rule(
      li,
      [](double p, double g, std::vector<double>& s, double lr, int) {
        double c = 0.9 * s[0] + 0.1 * g;
        s[0] = 0.99 * s[0] + 0.01 * g;
        p *= 1 - lr * 0.1;
        return p - lr * (c > 0 ? 1.0 : (c < 0 ? -1.0 : 0.0));
      },
      1e-3, 1);
}

TEST(Optimizers, RejectsMismatchedGradients) {
  opt::Adam o(0.1);
  ParamMap params = {{"w", randn({2})}};
  expect_throws_naming<std::invalid_argument>([&] { o.apply_gradients({{"v", randn({2})}}, params); }, "[Adam.update]");
  expect_throws_naming<std::invalid_argument>([&] { o.apply_gradients({{"w", randn({3})}}, params); }, "[Adam.update]");
  EXPECT_EQ(o.step(), 0);
}

TEST(Schedules, ValuesMatchFormulas) {
  auto ed = opt::exponential_decay(0.1, 0.9);
  auto sd = opt::step_decay(0.1, 0.5, 3);
  auto cd = opt::cosine_decay(0.1, 10, 0.01);
  auto ls = opt::linear_schedule(0.0, 0.1, 4);
  for (int t : {0, 1, 2, 3, 5, 9, 10, 20}) {
    EXPECT_NEAR(ed(t), 0.1 * std::pow(0.9, t), 1e-15);
    EXPECT_NEAR(sd(t), 0.1 * std::pow(0.5, t / 3), 1e-15);
    double s = std::min(t, 10);
    EXPECT_NEAR(cd(t), 0.01 + 0.5 * (1 + std::cos(M_PI * s / 10)) * 0.09, 1e-15);
    EXPECT_NEAR(ls(t), 0.1 * std::min(t, 4) / 4.0, 1e-15);
  }
  auto joined = opt::join_schedules({ls, cd}, {4});
  for (int t = 0; t < 20; ++t) EXPECT_NEAR(joined(t), t < 4 ? ls(t) : cd(t - 4), 1e-15) << t;
  expect_throws_naming<std::invalid_argument>([&] { opt::join_schedules({ls, cd}, {}); }, "[join_schedules]");
  expect_throws_naming<std::invalid_argument>([] { opt::cosine_decay(0.1, 0); }, "[cosine_decay]");

  // The optimizer uses schedule(step) for the update at that step, as MLX.
  opt::SGD o(opt::step_decay(1.0, 0.5, 1));
  ParamMap p = {{"w", array({0.0})}};
  std::vector<double> seen;
  for (int t = 0; t < 3; ++t) {
    EXPECT_DOUBLE_EQ(o.learning_rate(), std::pow(0.5, t));
    p = o.apply_gradients({{"w", array({-1.0})}}, p);
    seen.push_back(p.at("w").item<double>());
  }
  EXPECT_EQ(seen, (std::vector<double>{1.0, 1.5, 1.75}));
  opt::Adam lambda_lr([](int64_t step) { return 0.1 / (step + 1); });
  EXPECT_DOUBLE_EQ(lambda_lr.learning_rate(), 0.1);
}

TEST(ClipGradNorm, ScalesByGlobalNorm) {
  ParamMap g = {{"a", randn({3, 2})}, {"b", randn({4})}};
  double sq = 0;
  for (auto& [k, v] : g)
    for (double x : to_vector(v)) sq += x * x;
  double norm = std::sqrt(sq);
  auto [clipped, n] = opt::clip_grad_norm(g, norm / 2);
  EXPECT_NEAR(n.item<double>(), norm, 1e-12);
  double scale = (norm / 2) / (norm + 1e-6);
  for (auto& [k, v] : g) expect_allclose(clipped.at(k), v * array(scale, float64), 1e-12, 1e-12);
  auto [same, n2] = opt::clip_grad_norm(g, norm * 2);
  for (auto& [k, v] : g) expect_allclose(same.at(k), v, 1e-12, 1e-12);
  expect_throws_naming<std::invalid_argument>([&] { opt::clip_grad_norm(g, -1); }, "[clip_grad_norm]");
}

TEST(OptimizerState, SaveLoadRoundTrip) {
  ParamMap params = {{"layers.0.weight", randn({3, 2})}, {"layers.0.bias", randn({3})}};
  std::vector<ParamMap> grads;
  for (int i = 0; i < 3; ++i) grads.push_back({{"layers.0.weight", randn({3, 2})}, {"layers.0.bias", randn({3})}});
  opt::Adam a(0.01, {0.9, 0.999}, 1e-8, true);
  auto p = a.apply_gradients(grads[0], params);
  p = a.apply_gradients(grads[1], p);
  eval(a.state_arrays());
  auto file = ::testing::TempDir() + "nuvec_opt_" + std::to_string(::getpid()) + ".safetensors";
  a.save_state(file);
  opt::Adam b(0.01, {0.9, 0.999}, 1e-8, true);
  b.load_state(file);
  EXPECT_EQ(b.step(), 2);
  ASSERT_EQ(b.state().size(), 4u);
  EXPECT_TRUE(b.state().count("layers.0.weight.m"));
  for (auto& [k, v] : a.state()) expect_allclose(b.state().at(k), v, 0, 0);
  auto pa = a.apply_gradients(grads[2], p);
  auto pb = b.apply_gradients(grads[2], p);
  for (auto& [k, v] : pa) expect_allclose(pb.at(k), v, 0, 0);
  opt::SGD other(0.1);
  expect_throws_naming<std::invalid_argument>([&] { other.load_state(file); }, "[SGD.load_state]");
  std::remove(file.c_str());
}

TEST(EndToEnd, SmallMLPLossDecreases) {
  nn::seed(1);
  // Two interleaved classes: label = (x0 * x1 > 0), not linearly separable.
  auto x = randn({256, 2}, float32);
  auto xv = to_vector(x);
  std::vector<int32_t> labels;
  for (int i = 0; i < 256; ++i) labels.push_back(xv[2 * i] * xv[2 * i + 1] > 0);
  auto y = array(labels.begin(), {256}, int32);
  nn::Sequential model({std::make_shared<nn::Linear>(2, 32), nn::ReLU(), std::make_shared<nn::Linear>(32, 2)});
  auto loss_fn = [&](const std::vector<array>& a) {
    return nn::losses::cross_entropy(model(a[0]), a[1], std::nullopt, -1, 0.0f, "mean");
  };
  auto vg = nn::value_and_grad(model, loss_fn);
  opt::Adam o(0.05);
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    auto [loss, grads] = vg({x, y});
    o.update(model, grads);
    eval(nn::tree_leaves(model.parameters()));
    eval(o.state_arrays());
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  auto pred = argmax(model(x), -1);
  double acc = to_vector(mean(astype(equal(astype(pred, int32), y), float32)))[0];
  EXPECT_GT(acc, 0.9);
}

} // namespace
} // namespace nuvec
