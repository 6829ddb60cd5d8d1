// nuvec tests: nuvec::nn (layers, the Module tree, value_and_grad over modules, losses,
// activations, safetensors weights) against float64 references written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <unistd.h>

#include "backend/common/threefry.h"
#include "checker.h"
#include "nuvec/io.h"
#include "nuvec/nn.h"
#include "nuvec/random.h"
#include "test_utils.h"

namespace nuvec {
namespace {

using namespace nuvec::testing;
using nn::ParamMap;

// Converts every parameter of m to float64, so finite differences are exact enough.
void to_f64(nn::Module& m) {
  ParamMap p = m.parameters();
  for (auto& [k, v] : p) v = astype(v, float64);
  m.update(p);
}

// Sets parameter `path` to random values (float64).
void randomize(nn::Module& m, const std::string& path) {
  auto p = m.parameters();
  m.update({{path, randn(p.at(path).shape())}});
}

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "nuvec_nn_" + std::to_string(::getpid()) + "_" + name;
}

// ---------------------------------------------------------------------------------------
// Layers against hand loops

TEST(Linear, MatchesHandLoopAndInitRange) {
  nn::Linear lin(5, 3);
  auto w = to_vector(lin.parameters().at("weight"));
  auto b = to_vector(lin.parameters().at("bias"));
  const double bound = 1.0 / std::sqrt(5.0);
  for (double v : w) EXPECT_LE(std::abs(v), bound);
  for (double v : b) EXPECT_LE(std::abs(v), bound);
  EXPECT_EQ(lin.parameters().at("weight").shape(), (Shape{3, 5}));
  EXPECT_EQ(lin.parameters().at("weight").dtype(), float32);
  for (Shape xs : {Shape{4, 5}, Shape{2, 3, 5}}) {
    auto x = randn(xs, float32);
    auto xv = to_vector(x);
    size_t rows = x.size() / 5;
    std::vector<double> ref(rows * 3);
    for (size_t r = 0; r < rows; ++r) {
      for (int o = 0; o < 3; ++o) {
        double acc = b[o];
        for (int i = 0; i < 5; ++i) acc += xv[r * 5 + i] * w[o * 5 + i];
        ref[r * 3 + o] = acc;
      }
    }
    Shape out = xs;
    out.back() = 3;
    expect_close(lin(x), out, ref, 1e-5, 1e-5);
  }
  expect_throws_naming<std::invalid_argument>([&] { lin(randn({4, 4}, float32)); }, "[nn.Linear]");
  expect_throws_naming<std::invalid_argument>([] { nn::Linear(0, 3); }, "[nn.Linear]");
  nn::Linear nob(5, 3, false);
  EXPECT_EQ(nob.parameters().size(), 1u);
}

TEST(Init, SeedReproducesWeights) {
  nn::seed(42);
  nn::Linear a(6, 4);
  nn::seed(42);
  nn::Linear b(6, 4);
  nn::Linear c(6, 4);
  EXPECT_EQ(to_vector(a.parameters().at("weight")), to_vector(b.parameters().at("weight")));
  EXPECT_NE(to_vector(b.parameters().at("weight")), to_vector(c.parameters().at("weight")));
  auto e = nn::Embedding(1000, 16).parameters().at("weight");
  double var = to_vector(mean(square(e))).at(0);
  EXPECT_NEAR(var, 1.0 / 16, 0.1 / 16); // normal(0, 1/sqrt(dims)) as MLX
}

// The layers draw from nuvec::random's default key sequence, one key per draw in MLX's
// order, with MLX's Python formulas (Python floats passed as float32 arrays): after
// random::seed(s) the weights are those of the same calls with the sequence's keys.
TEST(Init, LayersDrawMlxNumbersFromTheSeededKeySequence) {
  random::seed(17);
  nn::Linear lin(6, 4);
  nn::Conv2d conv(3, 2, 3);
  nn::Embedding emb(10, 8);
  random::KeySequence ks(17);
  auto k_w = ks.next(), k_b = ks.next(), k_conv = ks.next(), k_emb = ks.next();
  // Linear: uniform(-sqrt(1/in), sqrt(1/in)) for the weight, then the bias.
  const float s = static_cast<float>(std::sqrt(1.0 / 6));
  auto w = lin.parameters().at("weight");
  ASSERT_EQ(w.dtype(), float32);
  expect_allclose(w, random::uniform(array(-s), array(s), {4, 6}, float32, k_w), 0, 0);
  expect_allclose(lin.parameters().at("bias"), random::uniform(array(-s), array(s), {4}, float32, k_b), 0, 0);
  // By hand from the key's bits: (s - (-s)) * min(b / (2^32 - 1), 1 - 2^-24) + (-s) in float32.
  auto kw = to_vector(k_w);
  std::vector<uint32_t> b(24);
  threefry::fill_bits({static_cast<uint32_t>(kw[0]), static_cast<uint32_t>(kw[1])}, b.data(), 4 * b.size());
  auto wv = to_vector(w);
  for (int i = 0; i < 24; ++i) {
    volatile float q = static_cast<float>(b[i]) / 4294967295.0f;
    volatile float u = std::min(static_cast<float>(q), std::nextafter(1.0f, 0.0f));
    volatile float range = s - (-s);
    volatile float scaled = range * u;
    EXPECT_EQ(static_cast<float>(wv[i]), scaled + (-s)) << i;
  }
  // Conv2d: uniform(+-sqrt(1 / (in * kh * kw))) of (out, kh, kw, in); the bias is zeros (no draw).
  const float sc = static_cast<float>(std::sqrt(1.0 / (3 * 3 * 3)));
  expect_allclose(conv.parameters().at("weight"),
                  random::uniform(array(-sc), array(sc), {2, 3, 3, 3}, float32, k_conv), 0, 0);
  expect_allclose(conv.parameters().at("bias"), zeros({2}), 0, 0);
  // Embedding: normal(scale = sqrt(1 / dims)).
  expect_allclose(emb.parameters().at("weight"),
                  random::normal({10, 8}, float32, 0.0f, static_cast<float>(std::sqrt(1.0 / 8)), k_emb), 0, 0);
  // Dropout: mask = bernoulli(1 - p, x.shape), output x * mask / (1 - p).
  nn::Dropout d(0.25f);
  auto x = astype(uniform({8, 8}, 1.0, 2.0), float32);
  auto k_mask = ks.next();
  auto y = d(x);
  auto mask = astype(random::bernoulli(array(0.75f), {8, 8}, k_mask), float32);
  expect_allclose(y, multiply(multiply(x, mask), array(1.0f / 0.75f)), 1e-7, 0);
}

// Reference conv2d: NHWC input, (C_out, KH, KW, C_in) weight.
std::vector<double> conv2d_ref(
    const std::vector<double>& x, Shape xs, const std::vector<double>& w, Shape ws, const std::vector<double>& b,
    std::pair<int, int> st, std::pair<int, int> pd, Shape& out) {
  int N = xs[0], H = xs[1], W = xs[2], C = xs[3], O = ws[0], KH = ws[1], KW = ws[2];
  int HO = (H + 2 * pd.first - KH) / st.first + 1, WO = (W + 2 * pd.second - KW) / st.second + 1;
  out = {N, HO, WO, O};
  std::vector<double> y(N * HO * WO * O);
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < HO; ++i)
      for (int j = 0; j < WO; ++j)
        for (int o = 0; o < O; ++o) {
          double acc = b[o];
          for (int kh = 0; kh < KH; ++kh)
            for (int kw = 0; kw < KW; ++kw) {
              int h = i * st.first + kh - pd.first, ww = j * st.second + kw - pd.second;
              if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
              for (int c = 0; c < C; ++c) {
                acc += x[((n * H + h) * W + ww) * C + c] * w[((o * KH + kh) * KW + kw) * C + c];
              }
            }
          y[((n * HO + i) * WO + j) * O + o] = acc;
        }
  return y;
}

TEST(Conv, Conv2dAndConv1dMatchHandLoops) {
  nn::Conv2d conv(3, 4, {3, 2}, {2, 1}, {1, 0});
  auto p = conv.parameters();
  EXPECT_EQ(p.at("weight").shape(), (Shape{4, 3, 2, 3}));
  const double bound = std::sqrt(1.0 / (3 * 3 * 2));
  for (double v : to_vector(p.at("weight"))) EXPECT_LE(std::abs(v), bound);
  for (double v : to_vector(p.at("bias"))) EXPECT_EQ(v, 0.0);
  randomize(conv, "bias");
  to_f64(conv);
  auto x = randn({2, 5, 6, 3});
  Shape out;
  auto ref = conv2d_ref(
      to_vector(x), x.shape(), to_vector(conv.parameters().at("weight")), {4, 3, 2, 3},
      to_vector(conv.parameters().at("bias")), {2, 1}, {1, 0}, out);
  expect_close(conv(x), out, ref, 1e-10, 1e-10);
  expect_throws_naming<std::invalid_argument>([&] { conv(randn({2, 5, 6, 2})); }, "[nn.Conv2d]");

  // Conv1d as a conv2d with H = 1.
  nn::Conv1d c1(2, 3, 3, 2, 1);
  randomize(c1, "bias");
  to_f64(c1);
  auto x1 = randn({2, 7, 2});
  auto w1 = c1.parameters().at("weight");
  ref = conv2d_ref(
      to_vector(x1), {2, 1, 7, 2}, to_vector(w1), {3, 1, 3, 2}, to_vector(c1.parameters().at("bias")), {1, 2},
      {0, 1}, out);
  expect_close(c1(x1), {out[0], out[2], out[3]}, ref, 1e-10, 1e-10);
  expect_throws_naming<std::invalid_argument>([] { nn::Conv1d(3, 4, 3, 1, 0, 1, 2); }, "[nn.Conv1d]");
}

TEST(Embedding, GathersRowsAndAccumulatesGradients) {
  nn::Embedding emb(6, 3);
  to_f64(emb);
  auto w = to_vector(emb.parameters().at("weight"));
  auto idx = array({1, 5, 1, 0}, {2, 2}, int32);
  std::vector<double> ref;
  for (int i : {1, 5, 1, 0}) {
    for (int d = 0; d < 3; ++d) ref.push_back(w[i * 3 + d]);
  }
  expect_close(emb(idx), {2, 2, 3}, ref);
  auto c = randn({2, 2, 3});
  auto vg = nn::value_and_grad(emb, [&](const std::vector<array>& a) { return sum(emb(a[0]) * c); });
  auto [loss, grads] = vg({idx});
  auto cv = to_vector(c);
  std::vector<double> g(18, 0.0);
  int k = 0;
  for (int i : {1, 5, 1, 0}) {
    for (int d = 0; d < 3; ++d) g[i * 3 + d] += cv[k++];
  }
  expect_close(grads.at("weight"), {6, 3}, g);
  expect_close(emb.as_linear(randn({2, 3}) * 0.0), {2, 6}, std::vector<double>(12, 0.0));
  expect_throws_naming<std::invalid_argument>([&] { emb(randn({2})); }, "[nn.Embedding]");
}

TEST(Norms, RMSNormAndLayerNormMatchFormulas) {
  const int D = 5;
  auto x = randn({3, 4, D});
  auto xv = to_vector(x);
  nn::RMSNorm rms(D, 1e-5f);
  nn::LayerNorm ln(D, 1e-5f);
  to_f64(rms);
  to_f64(ln);
  randomize(rms, "weight");
  randomize(ln, "weight");
  randomize(ln, "bias");
  auto rw = to_vector(rms.parameters().at("weight"));
  auto lw = to_vector(ln.parameters().at("weight"));
  auto lb = to_vector(ln.parameters().at("bias"));
  std::vector<double> r_ref(xv.size()), l_ref(xv.size());
  for (size_t row = 0; row < xv.size() / D; ++row) {
    double ms = 0, mu = 0, var = 0;
    for (int d = 0; d < D; ++d) ms += xv[row * D + d] * xv[row * D + d] / D, mu += xv[row * D + d] / D;
    for (int d = 0; d < D; ++d) var += (xv[row * D + d] - mu) * (xv[row * D + d] - mu) / D;
    for (int d = 0; d < D; ++d) {
      r_ref[row * D + d] = xv[row * D + d] / std::sqrt(ms + 1e-5) * rw[d];
      l_ref[row * D + d] = (xv[row * D + d] - mu) / std::sqrt(var + 1e-5) * lw[d] + lb[d];
    }
  }
  expect_close(rms(x), x.shape(), r_ref, 1e-6, 1e-6);
  expect_close(ln(x), x.shape(), l_ref, 1e-6, 1e-6);
  check_grad([&](const std::vector<array>& a) { return ln(a[0]); }, {randn({2, D})});
  check_grad([&](const std::vector<array>& a) { return rms(a[0]); }, {randn({2, D})});
  expect_throws_naming<std::invalid_argument>([&] { ln(randn({2, 4})); }, "[nn.LayerNorm]");
  expect_throws_naming<std::invalid_argument>([&] { rms(randn({2, 4})); }, "[nn.RMSNorm]");
  nn::LayerNorm plain(D, 1e-5f, false);
  EXPECT_TRUE(plain.parameters().empty());
}

TEST(BatchNorm, TrainUpdatesRunningStatsEvalUsesThem) {
  const int C = 3;
  nn::BatchNorm bn(C);
  to_f64(bn);
  auto p = bn.parameters();
  EXPECT_EQ(p.size(), 4u);
  auto tp = bn.trainable_parameters();
  EXPECT_EQ(tp.size(), 2u);
  EXPECT_FALSE(tp.count("running_mean"));
  bn.unfreeze(); // buffers stay frozen
  EXPECT_EQ(bn.trainable_parameters().size(), 2u);

  auto x = randn({4, 2, C}) * array(2.0) + array(1.0);
  auto xv = to_vector(x);
  const int R = 8;
  std::vector<double> mu(C, 0), var(C, 0);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) mu[c] += xv[r * C + c] / R;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) var[c] += (xv[r * C + c] - mu[c]) * (xv[r * C + c] - mu[c]) / R;
  std::vector<double> ref(xv.size());
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) ref[r * C + c] = (xv[r * C + c] - mu[c]) / std::sqrt(var[c] + 1e-5);
  expect_close(bn(x), x.shape(), ref, 1e-6, 1e-6);
  std::vector<double> rm(C), rv(C);
  // The running variance from the unbiased batch variance (R / (R - 1), as MLX and PyTorch).
  for (int c = 0; c < C; ++c) rm[c] = 0.1 * mu[c], rv[c] = 0.9 + 0.1 * var[c] * R / (R - 1);
  expect_close(bn.parameters().at("running_mean"), {C}, rm, 1e-6, 1e-6);
  expect_close(bn.parameters().at("running_var"), {C}, rv, 1e-6, 1e-6);

  bn.eval();
  EXPECT_FALSE(bn.training());
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) ref[r * C + c] = (xv[r * C + c] - rm[c]) / std::sqrt(rv[c] + 1e-5);
  expect_close(bn(x), x.shape(), ref, 1e-6, 1e-6);
  expect_close(bn.parameters().at("running_mean"), {C}, rm, 1e-6, 1e-6); // unchanged in eval
  expect_throws_naming<std::invalid_argument>([&] { bn(randn({4, 2})); }, "[nn.BatchNorm]");
  // MLX: one value per feature cannot train (test_batch_norm_stats); eps must be positive
  // for every norm (test_norm_eps_validation).
  nn::BatchNorm one(C);
  expect_throws_naming<std::invalid_argument>([&] { one(randn({1, C})); }, "[nn.BatchNorm]");
  for (float eps : {-1.0f, -1e-30f, 0.0f}) {
    expect_throws_naming<std::invalid_argument>([&] { nn::BatchNorm b(C, eps); }, "[nn.BatchNorm]");
    expect_throws_naming<std::invalid_argument>([&] { nn::LayerNorm l(C, eps); }, "[nn.LayerNorm]");
    expect_throws_naming<std::invalid_argument>([&] { nn::RMSNorm r(C, eps); }, "[nn.RMSNorm]");
  }
  nn::RMSNorm tiny(C, 1e-30f); // anything positive constructs
}

TEST(Dropout, MasksScalesAndIsIdentityInEval) {
  nn::seed(3);
  nn::Dropout d(0.25f);
  auto x = uniform({100, 100}, 1.0, 2.0);
  auto y = to_vector(d(x));
  auto xv = to_vector(x);
  int zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0) {
      ++zeros;
    } else {
      EXPECT_NEAR(y[i], xv[i] / 0.75, 1e-12);
    }
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.03);
  nn::seed(3);
  EXPECT_EQ(to_vector(d(x)), y); // the key sequence restarts: same seed, same masks
  EXPECT_NE(to_vector(d(x)), y); // next call, next mask
  d.eval();
  EXPECT_EQ(to_vector(d(x)), xv);
  expect_throws_naming<std::invalid_argument>([] { nn::Dropout(1.0f); }, "[nn.Dropout]");
}

// Reference pooling over NHWC with -inf (max) or 0 (avg) padding.
std::vector<double> pool2d_ref(const array& x, int k, int s, int p, bool is_max, Shape& out) {
  auto xv = to_vector(x);
  int N = x.shape(0), H = x.shape(1), W = x.shape(2), C = x.shape(3);
  int HO = (H + 2 * p - k) / s + 1, WO = (W + 2 * p - k) / s + 1;
  out = {N, HO, WO, C};
  std::vector<double> y;
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < HO; ++i)
      for (int j = 0; j < WO; ++j)
        for (int c = 0; c < C; ++c) {
          double acc = is_max ? -INFINITY : 0.0;
          for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b) {
              int h = i * s + a - p, w = j * s + b - p;
              double v = (h < 0 || h >= H || w < 0 || w >= W) ? (is_max ? -INFINITY : 0.0)
                                                              : xv[((n * H + h) * W + w) * C + c];
              acc = is_max ? std::max(acc, v) : acc + v / (k * k);
            }
          y.push_back(acc);
        }
  return y;
}

TEST(Pooling, MaxAndAvgMatchHandLoopsAndDifferentiate) {
  auto x = randn({2, 7, 6, 3});
  Shape out;
  for (auto [k, s, p] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}, std::tuple{3, 1, 0}}) {
    SCOPED_TRACE("k=" + std::to_string(k) + " s=" + std::to_string(s) + " p=" + std::to_string(p));
    auto ref = pool2d_ref(x, k, s, p, true, out);
    expect_close(nn::MaxPool2d(k, s, p)(x), out, ref, 1e-12, 1e-12);
    ref = pool2d_ref(x, k, s, p, false, out);
    expect_close(nn::AvgPool2d(k, s, p)(x), out, ref, 1e-12, 1e-12);
  }
  // 1d through the 2d reference with H = 1.
  auto x1 = randn({2, 9, 2});
  auto ref = pool2d_ref(reshape(x1, {2, 1, 9, 2}), 1, 1, 0, true, out);
  nn::MaxPool1d mp(3, 2);
  nn::AvgPool1d ap(3, 2);
  Shape o1;
  std::vector<double> mref, aref;
  auto xv = to_vector(x1);
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < 2; ++c) {
        double m = -INFINITY, a = 0;
        for (int t = 0; t < 3; ++t) {
          double v = xv[(n * 9 + i * 2 + t) * 2 + c];
          m = std::max(m, v);
          a += v / 3;
        }
        mref.push_back(m);
        aref.push_back(a);
      }
  expect_close(mp(x1), {2, 4, 2}, mref, 1e-12, 1e-12);
  expect_close(ap(x1), {2, 4, 2}, aref, 1e-12, 1e-12);
  nn::MaxPool2d mp2(2);
  nn::AvgPool2d ap2(3, 2, 1);
  check_grad([&](const std::vector<array>& a) { return mp2(a[0]); }, {randn({1, 4, 4, 2})});
  check_grad([&](const std::vector<array>& a) { return ap2(a[0]); }, {randn({1, 5, 4, 2})});
  expect_throws_naming<std::invalid_argument>([&] { mp2(randn({4, 4, 2})); }, "[nn.MaxPool2d]");
  expect_throws_naming<std::invalid_argument>([] { nn::AvgPool2d(2, 1, -1); }, "[nn.AvgPool2d]");
  // Padding past half the kernel, as MLX allows (test_pooling: MaxPool1d(3, padding=2)): the
  // windows [pad, pad, x0], [x1, x2, x3], [x4, pad, pad].
  const array x5 = reshape(array({3.0f, -1.0f, 5.0f, 2.0f, -4.0f}), {1, 5, 1});
  EXPECT_TRUE(array_equal(nn::MaxPool1d(3, 0, 2)(x5), reshape(array({3.0f, 5.0f, -4.0f}), {1, 3, 1})).item<bool>());
  EXPECT_TRUE(allclose(nn::AvgPool1d(3, 0, 2)(x5), reshape(array({1.0f, 2.0f, -4.0f / 3}), {1, 3, 1})).item<bool>());
}

// ---------------------------------------------------------------------------------------
// Activations and losses

TEST(Activations, MatchFormulas) {
  auto x = randn({40}) * array(3.0);
  auto xv = to_vector(x);
  auto check = [&](const array& y, auto f, double tol = 1e-12) {
    std::vector<double> ref;
    for (double v : xv) ref.push_back(f(v));
    expect_close(y, x.shape(), ref, tol, tol);
  };
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  check(nn::relu(x), [](double v) { return std::max(v, 0.0); });
  check(nn::gelu(x), [](double v) { return v * 0.5 * (1 + std::erf(v / std::sqrt(2.0))); });
  check(nn::gelu_approx(x), [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  });
  check(nn::gelu_fast_approx(x), [&](double v) { return v * sig(1.702 * v); });
  check(nn::silu(x), [&](double v) { return v * sig(v); });
  check(nn::sigmoid(x), sig);
  check(nn::leaky_relu(x, 0.1f), [](double v) { return v > 0 ? v : 0.1 * v; }, 1e-7);
  auto m = reshape(x, {4, 10});
  auto mv = to_vector(m);
  std::vector<double> sm, lsm;
  for (int r = 0; r < 4; ++r) {
    double mx = -INFINITY, s = 0;
    for (int c = 0; c < 10; ++c) mx = std::max(mx, mv[r * 10 + c]);
    for (int c = 0; c < 10; ++c) s += std::exp(mv[r * 10 + c] - mx);
    for (int c = 0; c < 10; ++c) {
      sm.push_back(std::exp(mv[r * 10 + c] - mx) / s);
      lsm.push_back(mv[r * 10 + c] - mx - std::log(s));
    }
  }
  expect_close(nn::softmax(m), {4, 10}, sm, 1e-12, 1e-12);
  expect_close(nn::log_softmax(m), {4, 10}, lsm, 1e-12, 1e-12);
  check_grad([](const std::vector<array>& a) { return nn::gelu(a[0]); }, {randn({6})});
  check_grad([](const std::vector<array>& a) { return nn::log_softmax(a[0]); }, {randn({2, 5})});
  EXPECT_EQ(nn::relu(randn({3}, float32)).dtype(), float32);
  EXPECT_EQ(nn::gelu(randn({3}, float16)).dtype(), float16);
}

TEST(Losses, CrossEntropyWithLabelSmoothingAndReductions) {
  const int B = 6, K = 5;
  auto logits = randn({B, K});
  auto targets = randint({B}, 0, K - 1);
  auto lv = to_vector(logits);
  auto tv = to_vector(targets);
  for (double ls : {0.0, 0.2}) {
    std::vector<double> ref;
    for (int b = 0; b < B; ++b) {
      double mx = -INFINITY, s = 0, mean = 0;
      for (int k = 0; k < K; ++k) mx = std::max(mx, lv[b * K + k]);
      for (int k = 0; k < K; ++k) s += std::exp(lv[b * K + k] - mx), mean += lv[b * K + k] / K;
      double lse = mx + std::log(s);
      // Smoothed one-hot q = (1 - ls) e_t + ls / K; loss = -sum q log_softmax.
      double loss = 0;
      for (int k = 0; k < K; ++k) {
        double q = (k == tv[b] ? 1 - ls : 0) + ls / K;
        loss -= q * (lv[b * K + k] - lse);
      }
      ref.push_back(loss);
    }
    double total = 0;
    for (double v : ref) total += v;
    auto ce = [&](const std::string& red) {
      return nn::losses::cross_entropy(logits, targets, std::nullopt, -1, static_cast<float>(ls), red);
    };
    expect_close(ce("none"), {B}, ref, 1e-6, 1e-6);
    expect_close(ce("sum"), {}, {total}, 1e-6, 1e-6);
    expect_close(ce("mean"), {}, {total / B}, 1e-6, 1e-6);
  }
  // Probability targets equal index targets given as one-hot rows.
  std::vector<double> onehot(B * K, 0.0);
  for (int b = 0; b < B; ++b) onehot[b * K + static_cast<int>(tv[b])] = 1.0;
  auto probs = array(onehot.begin(), {B, K}, float64);
  expect_allclose(
      nn::losses::cross_entropy(logits, probs), nn::losses::cross_entropy(logits, targets), 1e-10, 1e-10);
  // Weights and axis.
  auto w = uniform({B}, 0.5, 1.5);
  expect_allclose(
      nn::losses::cross_entropy(logits, targets, w), nn::losses::cross_entropy(logits, targets) * w, 1e-12, 1e-12);
  expect_allclose(
      nn::losses::cross_entropy(transpose(logits), targets, std::nullopt, 0),
      nn::losses::cross_entropy(logits, targets), 1e-12, 1e-12);
  // nll on log_softmax equals cross entropy.
  expect_allclose(
      nn::losses::nll_loss(nn::log_softmax(logits), targets, -1, "mean"),
      nn::losses::cross_entropy(logits, targets, std::nullopt, -1, 0.0f, "mean"), 1e-10, 1e-10);
  check_grad(
      [&](const std::vector<array>& a) {
        return nn::losses::cross_entropy(a[0], targets, std::nullopt, -1, 0.1f, "none");
      },
      {logits});
  expect_throws_naming<std::invalid_argument>(
      [&] { nn::losses::cross_entropy(logits, targets, std::nullopt, -1, 0.0f, "avg"); }, "[cross_entropy]");
  expect_throws_naming<std::invalid_argument>(
      [&] { nn::losses::cross_entropy(logits, randint({B + 1}, 0, 1)); }, "[cross_entropy]");
  expect_throws_naming<std::invalid_argument>(
      [&] { nn::losses::nll_loss(logits, randn({B})); }, "[nll_loss]");
}

TEST(Losses, RegressionAndBinaryLosses) {
  auto p = randn({4, 3}), t = randn({4, 3});
  auto pv = to_vector(p), tv = to_vector(t);
  double mse = 0, l1 = 0;
  std::vector<double> mse_none;
  for (size_t i = 0; i < pv.size(); ++i) {
    mse_none.push_back((pv[i] - tv[i]) * (pv[i] - tv[i]));
    mse += mse_none.back() / 12;
    l1 += std::abs(pv[i] - tv[i]) / 12;
  }
  expect_close(nn::losses::mse_loss(p, t), {}, {mse}, 1e-12, 1e-12);
  expect_close(nn::losses::mse_loss(p, t, "none"), {4, 3}, mse_none, 1e-12, 1e-12);
  expect_close(nn::losses::l1_loss(p, t), {}, {l1}, 1e-12, 1e-12);
  expect_close(nn::losses::l1_loss(p, t, "sum"), {}, {l1 * 12}, 1e-12, 1e-12);

  auto y = astype(randint({4, 3}, 0, 1), float64);
  auto yv = to_vector(y);
  std::vector<double> logit_ref, prob_ref;
  for (size_t i = 0; i < pv.size(); ++i) {
    double s = 1 / (1 + std::exp(-pv[i]));
    logit_ref.push_back(std::log1p(std::exp(pv[i])) - pv[i] * yv[i]);
    prob_ref.push_back(-(yv[i] * std::log(s) + (1 - yv[i]) * std::log(1 - s)));
  }
  expect_close(nn::losses::binary_cross_entropy(p, y, std::nullopt, true, "none"), {4, 3}, logit_ref, 1e-10, 1e-10);
  expect_close(
      nn::losses::binary_cross_entropy(sigmoid(p), y, std::nullopt, false, "none"), {4, 3}, prob_ref, 1e-8, 1e-8);
  // Probabilities of exactly 0 and 1 are clamped at log = -100, not inf.
  auto edge = nn::losses::binary_cross_entropy(array({0.0, 1.0}), array({1.0, 0.0}), std::nullopt, false, "none");
  expect_close(edge, {2}, {100.0, 100.0});
  check_grad([&](const std::vector<array>& a) { return nn::losses::binary_cross_entropy(a[0], y); }, {p});
  expect_throws_naming<std::invalid_argument>([&] { nn::losses::mse_loss(p, randn({3, 4})); }, "[mse_loss]");
  expect_throws_naming<std::invalid_argument>([&] { nn::losses::l1_loss(p, t, "max"); }, "[l1_loss]");
  expect_throws_naming<std::invalid_argument>(
      [&] { nn::losses::binary_cross_entropy(p, randn({12})); }, "[binary_cross_entropy]");
}

// ---------------------------------------------------------------------------------------
// The Module tree

struct Block : nn::Module {
  std::shared_ptr<nn::Linear> proj = register_module("proj", std::make_shared<nn::Linear>(3, 3));
  std::shared_ptr<nn::LayerNorm> norm = register_module("norm", std::make_shared<nn::LayerNorm>(3));
  std::string name() const override { return "Block"; }
  array forward(const array& x) override { return norm->forward(nn::relu(proj->forward(x))); }
};

TEST(Module, MLXPathsAndTreeRoundTrip) {
  nn::Sequential model({std::make_shared<nn::Linear>(4, 3), nn::ReLU(), std::make_shared<Block>()});
  std::vector<std::string> keys;
  for (auto& [k, v] : model.parameters()) keys.push_back(k);
  std::vector<std::string> expected = {"layers.0.bias",       "layers.0.weight",      "layers.2.norm.bias",
                                       "layers.2.norm.weight", "layers.2.proj.bias", "layers.2.proj.weight"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(model.size(), 3u);
  EXPECT_EQ(model[1].name(), "ReLU");
  auto mods = model.named_modules();
  EXPECT_EQ(mods.size(), 6u); // itself, 3 layers, proj, norm
  EXPECT_EQ(mods.back().first, "layers.2.norm");

  // Flatten, change, rebuild.
  ParamMap p = model.parameters();
  for (auto& [k, v] : p) v = randn(v.shape(), float32);
  model.update(p);
  for (auto& [k, v] : model.parameters()) expect_allclose(v, p.at(k), 0, 0);
  expect_throws_naming<std::invalid_argument>(
      [&] { model.update({{"layers.9.weight", randn({1})}}); }, "[nn.Module.update]");
  expect_throws_naming<std::invalid_argument>(
      [&] { model.update({{"layers.0.weight", randn({3, 3})}}); }, "[nn.Module.update]");
  EXPECT_NO_THROW(model(randn({2, 4}, float32)));

  model.eval();
  for (auto& [path, m] : model.named_modules()) EXPECT_FALSE(m->training()) << path;
  model.train();
  EXPECT_TRUE(model[2].training());
}

TEST(Module, FreezeUnfreezeByPathAndModule) {
  nn::Sequential model({std::make_shared<nn::Linear>(4, 3), nn::ReLU(), std::make_shared<Block>()});
  model.freeze({"layers.0", "layers.2.proj.bias"});
  std::vector<std::string> keys;
  for (auto& [k, v] : model.trainable_parameters()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"layers.2.norm.bias", "layers.2.norm.weight", "layers.2.proj.weight"}));
  EXPECT_EQ(model.parameters().size(), 6u);
  model.unfreeze({"layers.0.weight"});
  EXPECT_EQ(model.trainable_parameters().size(), 4u);
  model.freeze();
  EXPECT_TRUE(model.trainable_parameters().empty());
  model.unfreeze();
  EXPECT_EQ(model.trainable_parameters().size(), 6u);
  expect_throws_naming<std::invalid_argument>([&] { model.freeze({"layers.7"}); }, "[nn.Module.freeze]");
  expect_throws_naming<std::invalid_argument>([&] { model.unfreeze({"layers.0.w"}); }, "[nn.Module.unfreeze]");
  // A local name applies in every module (MLX's freeze(keys="bias")).
  model.freeze({"bias"});
  keys.clear();
  for (auto& [k, v] : model.trainable_parameters()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"layers.0.weight", "layers.2.norm.weight", "layers.2.proj.weight"}));
  expect_throws_naming<std::invalid_argument>([&] { model.freeze({"gamma"}); }, "[nn.Module.freeze]");
}

TEST(Module, ValueAndGradMatchesFiniteDifferencesAndRespectsFreezing) {
  nn::Sequential model({std::make_shared<nn::Linear>(3, 4), nn::Tanh(), std::make_shared<nn::Linear>(4, 2)});
  to_f64(model);
  auto x = randn({5, 3}), y = randn({5, 2});
  auto loss_fn = [&](const std::vector<array>& a) { return nn::losses::mse_loss(model(a[0]), a[1]); };
  auto vg = nn::value_and_grad(model, loss_fn);
  auto [loss, grads] = vg({x, y});
  EXPECT_EQ(grads.size(), 4u);
  const double l0 = loss.item<double>();
  EXPECT_NEAR(l0, loss_fn({x, y}).item<double>(), 1e-12);
  // The model holds its original parameters again (not the traced copies).
  const ParamMap before = model.parameters();
  for (auto& [path, g] : grads) {
    SCOPED_TRACE(path);
    ASSERT_EQ(g.shape(), before.at(path).shape());
    auto gv = to_vector(g);
    auto pv = to_vector(before.at(path));
    for (size_t k = 0; k < pv.size(); ++k) {
      auto eval_at = [&](double delta) {
        auto q = pv;
        q[k] += delta;
        model.update({{path, array(q.begin(), before.at(path).shape(), float64)}});
        double v = loss_fn({x, y}).item<double>();
        model.update({{path, before.at(path)}});
        return v;
      };
      double fd = (eval_at(1e-6) - eval_at(-1e-6)) / 2e-6;
      EXPECT_NEAR(gv[k], fd, 1e-6 + 1e-5 * std::abs(fd)) << "element " << k;
    }
  }
  // Frozen parameters get no gradient; the others' gradients do not change.
  model.freeze({"layers.0"});
  auto [loss2, grads2] = vg({x, y});
  EXPECT_NEAR(loss2.item<double>(), l0, 1e-12);
  std::vector<std::string> keys;
  for (auto& [k, v] : grads2) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"layers.2.bias", "layers.2.weight"}));
  expect_allclose(grads2.at("layers.2.weight"), grads.at("layers.2.weight"), 1e-12, 1e-12);
  model.freeze();
  expect_throws_naming<std::invalid_argument>([&] { vg({x, y}); }, "[nn.value_and_grad]");
}

// ---------------------------------------------------------------------------------------
// Safetensors and weights

TEST(Safetensors, RoundTripsDtypesAndMetadata) {
  std::unordered_map<std::string, array> arrays = {
      {"f32", randn({2, 3}, float32)},
      {"f64", randn({4})},
      {"f16", randn({3, 1}, float16)},
      {"i32", randint({5}, -100, 100)},
      {"i64", randint({2, 2}, -5, 5, int64)},
      {"u8", randint({7}, 0, 255, uint8)},
      {"b", randint({3}, 0, 1, bool_)},
      {"scalar", array(2.5f)},
      {"empty", zeros({0, 3})},
      {"strided", transpose(randn({3, 2}, float32))}};
  auto file = tmp_path("rt.safetensors");
  save_safetensors(file, arrays, {{"format", "mlx"}, {"note", "hi"}});
  auto [loaded, meta] = load_safetensors(file);
  EXPECT_EQ(meta.at("note"), "hi");
  EXPECT_EQ(meta.at("format"), "mlx");
  ASSERT_EQ(loaded.size(), arrays.size());
  for (auto& [k, v] : arrays) {
    SCOPED_TRACE(k);
    ASSERT_TRUE(loaded.count(k));
    EXPECT_EQ(loaded.at(k).dtype(), v.dtype());
    expect_allclose(loaded.at(k), v, 0, 0);
  }
  // The extension is appended when missing (MLX).
  save_safetensors(tmp_path("noext"), {{"a", array({1.0f})}});
  EXPECT_NO_THROW(load_safetensors(tmp_path("noext") + ".safetensors"));
  // complex64 is written as MLX writes it ("C64") and reads back.
  save_safetensors(file, {{"c", array(std::complex<float>(1, 2))}});
  EXPECT_EQ(load_safetensors(file).first.at("c").item<complex64_t>(), complex64_t(1, 2));
  std::remove(file.c_str());
  std::remove((tmp_path("noext") + ".safetensors").c_str());
}

void write_bytes(const std::string& file, const std::string& bytes) {
  std::ofstream os(file, std::ios::binary | std::ios::trunc);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string with_header(const std::string& json, const std::string& data = "") {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + json + data;
}

TEST(Safetensors, TruncatedOrCorruptFilesThrowClearly) {
  auto good = tmp_path("good.safetensors");
  save_safetensors(good, {{"w", randn({16, 16}, float32)}});
  std::string bytes;
  {
    std::ifstream is(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(is), {});
  }
  auto bad = tmp_path("bad.safetensors");
  auto expect_corrupt = [&](const std::string& content, const std::string& what) {
    SCOPED_TRACE(what);
    write_bytes(bad, content);
    try {
      load_safetensors(bad);
      ADD_FAILURE() << "expected an error";
    } catch (const std::runtime_error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[load_safetensors]"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  };
  expect_corrupt(bytes.substr(0, bytes.size() - 10), "outside the");           // data cut short
  expect_corrupt(bytes.substr(0, 40), "follow (truncated?)");                   // header cut short
  expect_corrupt(bytes.substr(0, 5), "shorter than");                           // no size field
  expect_corrupt(with_header("{\"w\": {\"dtype\": \"F32\""), "not valid JSON"); // broken JSON
  expect_corrupt(with_header("[1, 2]"), "not a JSON object");
  expect_corrupt(with_header(R"({"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})", "abcd"), "unknown dtype");
  expect_corrupt(with_header(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", "abcd"), "need 8");
  expect_corrupt(with_header(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd"), "invalid dimension");
  expect_corrupt(with_header(R"({"w": {"dtype": "F32", "shape": [1]}})", "abcd"), "lacks");
  expect_corrupt(with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", "abcd"), "outside the");
  std::string huge(8, '\xFF');
  expect_corrupt(huge + "{}", "header size field");
  expect_throws_naming<std::runtime_error>([&] { load_safetensors(tmp_path("missing.safetensors")); }, "[load_safetensors]");
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(Module, SaveAndLoadWeights) {
  auto make = [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 3), nn::ReLU(), std::make_shared<nn::BatchNorm>(3)});
  };
  auto a = make();
  (*a)(randn({5, 4}, float32)); // moves BatchNorm's running stats away from their defaults
  auto file = tmp_path("weights.safetensors");
  a->save_weights(file);
  auto b = make();
  b->load_weights(file);
  auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), 6u);
  for (auto& [k, v] : pa) expect_allclose(pb.at(k), v, 0, 0);
  a->eval();
  b->eval();
  auto x = randn({2, 4}, float32);
  expect_allclose((*a)(x), (*b)(x), 0, 0);

  // Strict loading rejects a file that misses parameters or has a different architecture.
  save_safetensors(file, {{"layers.0.weight", randn({3, 4}, float32)}});
  expect_throws_naming<std::invalid_argument>([&] { b->load_weights(file); }, "[nn.Module.load_weights]");
  EXPECT_NO_THROW(b->load_weights(file, false));
  save_safetensors(file, {{"layers.0.weight", randn({2, 4}, float32)}});
  expect_throws_naming<std::invalid_argument>([&] { b->load_weights(file, false); }, "[nn.Module.load_weights]");
  expect_throws_naming<std::invalid_argument>([&] { b->save_weights(tmp_path("w.npz")); }, "[nn.Module.save_weights]");
  std::remove(file.c_str());
}

} // namespace
} // namespace nuvec
