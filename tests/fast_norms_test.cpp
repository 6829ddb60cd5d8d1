// The normalisation fused primitives (src/fast/norms.h): rms_norm, add_rms_norm, layer_norm
// and their backward primitives. Their kernels (CPU, and GPU when the suite runs with the GPU
// as default device) against their fallback graphs on random rows of odd sizes up to
// 2^17 + 5, every floating dtype, with and without parameters, non-contiguous inputs; the
// forward and backward against a float64 loop; GPU against CPU; every rule against central
// differences (second derivatives included) and vmap against a loop; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "checker.h"
#include "fast/norms.h"
#include "nuvec/nn.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-12 : dt == float32 ? 1e-5 : dt == float16 ? 2e-3 : 1.6e-2;
}

// Random rows with an offset, so that the mean matters to layer_norm.
array rows_of(const Shape& shape, Dtype dt) {
  return astype(add(multiply(randn(shape, float64), array(2.0, float64)), array(0.7, float64)), dt);
}

// Every output of the fused node that produced y, and its primitive's fallback on the same
// inputs, evaluated.
std::pair<std::vector<array>, std::vector<array>> node_and_fallback(const array& y, const char* name) {
  EXPECT_TRUE(y.has_primitive());
  EXPECT_STREQ(y.primitive().name(), name);
  auto& p = dynamic_cast<fast::FastPrimitive&>(y.primitive());
  std::vector<array> outs = y.outputs();
  if (outs.empty()) outs = {y};
  std::vector<array> ref = p.fallback()(y.inputs());
  eval(outs);
  eval(ref);
  return {outs, ref};
}

// `amp` scales the tolerance where the output is rounded more than once: y = round(round(v·w)
// + b) can differ by one ulp of |v·w| (up to |w| times the output's) when the statistics
// differ in their last bits, as the kernels' (double sums) and the graph's (float32
// reductions) do.
void expect_node_matches(const array& y, const char* name, Dtype dt, double amp = 1.0) {
  auto [k, f] = node_and_fallback(y, name);
  ASSERT_EQ(k.size(), f.size());
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(k[i].dtype(), f[i].dtype());
    expect_allclose(k[i], f[i], tol_of(dt) * amp, tol_of(dt) * amp);
  }
}

// A backward node built directly: grads = P(x, params..., g), compared with its fallback.
template <typename P>
void expect_backward_matches(const std::vector<array>& inputs, float eps, Dtype dt) {
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (size_t i = 0; i + 1 < inputs.size(); ++i) {
    shapes.push_back(inputs[i].shape());
    dtypes.push_back(inputs[i].dtype());
  }
  auto p = std::make_shared<P>(default_stream(default_device()), eps);
  auto grads = array::make_arrays(shapes, dtypes, p, inputs);
  auto ref = p->fallback()(inputs);
  eval(grads);
  eval(ref);
  // dx = g·w·n − x̂·mean(g·w·x̂)·n (x̂ = c·n, c = x − mean, or x for RmsNorm) cancels: its
  // rounding error is a few ulps of its terms, not of the result (for a row of one element
  // the true dx is near 0 and both sides give rounding noise). So each element's absolute
  // tolerance scales with its own terms, n·(|g·w| + |x̂|·mean(|g·w·x̂|)), from the row's own
  // statistic (var for LayerNorm, mean of squares for RmsNorm).
  const bool layer = std::is_same_v<P, LayerNormVjp>;
  const array x64 = astype(inputs[0], float64);
  const std::vector<int> last{-1};
  const array c = layer ? subtract(x64, mean(x64, last, true)) : x64;
  const array n = rsqrt(add(mean(square(c), last, true), array(static_cast<double>(eps))));
  const array xhat = abs(multiply(c, n));
  const array gw = abs(multiply(astype(inputs.back(), float64), astype(inputs[1], float64)));
  const auto terms = to_vector(multiply(n, add(gw, multiply(xhat, mean(multiply(gw, xhat), last, true)))));
  const double tol = tol_of(dt) * 4;
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE("gradient " + std::to_string(i));
    if (i == 0) {
      const auto got = to_vector(grads[0]), want = to_vector(ref[0]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_NEAR(got[k], want[k], tol * (1.0 + terms[k]) + tol * std::abs(want[k])) << "at flat index " << k;
      }
      continue;
    }
    // Parameter gradients sum over every row: scale the tolerance with the row count.
    const double rows = static_cast<double>(inputs[0].size() / inputs[0].shape(-1));
    expect_allclose(grads[i], ref[i], tol * std::sqrt(rows), tol * std::sqrt(rows));
  }
}

} // namespace

TEST(FastNormKernels, KernelsMatchTheirFallbacks) {
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (int d : {1, 3, 64, 4097, 12000, 30001, (1 << 17) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      const int rows = d > 5000 ? 3 : 9;
      array x = rows_of({rows, d}, dt), r = rows_of({rows, d}, dt);
      array w = rows_of({d}, dt), b = rows_of({d}, dt);
      const double amp = 1.0 + to_vector(max(abs(astype(w, float64)))).front();
      expect_node_matches(fast::rms_norm(x, w, 1e-5f), "RmsNorm", dt, amp);
      expect_node_matches(fast::rms_norm(x, std::nullopt, 1e-3f), "RmsNorm", dt);
      expect_node_matches(fast::layer_norm(x, w, b, 1e-5f), "LayerNorm", dt, amp);
      expect_node_matches(fast::layer_norm(x, std::nullopt, b, 1e-5f), "LayerNorm", dt);
      expect_node_matches(fast::layer_norm(x, w, std::nullopt, 1e-5f), "LayerNorm", dt, amp);
      expect_node_matches(fast::layer_norm(x, std::nullopt, std::nullopt, 1e-5f), "LayerNorm", dt);
      auto [h, y] = fast::add_rms_norm(x, r, w, 1e-5f);
      expect_node_matches(y, "AddRmsNorm", dt, amp);
      expect_allclose(h, add(x, r), 0, 0); // h is the rounded sum itself
      // Backward kernels against their fallbacks.
      array g = rows_of({rows, d}, dt);
      expect_backward_matches<RmsNormVjp>({x, w, g}, 1e-5f, dt);
      expect_backward_matches<RmsNormVjp>({x, array(1.0, dt), g}, 1e-5f, dt);
      expect_backward_matches<LayerNormVjp>({x, w, b, g}, 1e-5f, dt);
      expect_backward_matches<LayerNormVjp>({x, array(1.0, dt), array(0.0, dt), g}, 1e-5f, dt);
      // A cotangent along x: mean(g·w·x̂) is then of the order of g·w itself (for a random g
      // it is ~1/sqrt(d) of it), so the x̂ term of dx is as large as the first and a kernel
      // that got it wrong would fail at every size and dtype.
      expect_backward_matches<RmsNormVjp>({x, w, x}, 1e-5f, dt);
      expect_backward_matches<LayerNormVjp>({x, w, b, x}, 1e-5f, dt);
    }
  }
}

TEST(FastNormKernels, NonContiguousInputsAndBatches) {
  for (Dtype dt : {float32, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    // A transposed input (strided last axis), a sliced one, a broadcast weight row.
    array xt = transpose(rows_of({37, 5, 6}, dt), {1, 2, 0});
    array w = slice(rows_of({74}, dt), {0}, {74}, {2});
    expect_node_matches(fast::rms_norm(xt, w, 1e-5f), "RmsNorm", dt);
    expect_node_matches(fast::layer_norm(xt, w, w, 1e-5f), "LayerNorm", dt);
    array xs = slice(rows_of({4, 9, 40}, dt), {0, 1, 3}, {4, 9, 40});
    expect_node_matches(fast::rms_norm(xs, std::nullopt, 1e-5f), "RmsNorm", dt);
    auto [h, y] = fast::add_rms_norm(xs, xs, std::nullopt, 1e-6f);
    expect_node_matches(y, "AddRmsNorm", dt);
  }
}

TEST(FastNormKernels, Float64AgainstALoop) {
  const int rows = 6, d = 23;
  array x = rows_of({rows, d}, float64), w = rows_of({d}, float64), b = rows_of({d}, float64);
  array g = rows_of({rows, d}, float64);
  auto xv = to_vector(x), wv = to_vector(w), bv = to_vector(b), gv = to_vector(g);
  const double eps = 1e-5;
  std::vector<double> rms(rows * d), ln(rows * d), dx(rows * d), dw(d, 0.0);
  for (int r = 0; r < rows; ++r) {
    double ss = 0, s = 0;
    for (int j = 0; j < d; ++j) {
      ss += xv[r * d + j] * xv[r * d + j];
      s += xv[r * d + j];
    }
    const double n = 1 / std::sqrt(ss / d + static_cast<double>(static_cast<float>(eps)));
    const double mu = s / d;
    double v = 0;
    for (int j = 0; j < d; ++j) v += (xv[r * d + j] - mu) * (xv[r * d + j] - mu);
    const double nl = 1 / std::sqrt(v / d + static_cast<double>(static_cast<float>(eps)));
    double t = 0;
    for (int j = 0; j < d; ++j) t += gv[r * d + j] * wv[j] * xv[r * d + j];
    t /= d;
    for (int j = 0; j < d; ++j) {
      const int i = r * d + j;
      rms[i] = xv[i] * n * wv[j];
      ln[i] = (xv[i] - mu) * nl * wv[j] + bv[j];
      dx[i] = gv[i] * wv[j] * n - xv[i] * t * n * n * n;
      dw[j] += gv[i] * xv[i] * n;
    }
  }
  expect_close(fast::rms_norm(x, w, 1e-5f), {rows, d}, rms, 1e-12, 1e-12);
  expect_close(fast::layer_norm(x, w, b, 1e-5f), {rows, d}, ln, 1e-12, 1e-12);
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) { return std::vector<array>{fast::rms_norm(in[0], in[1], 1e-5f)}; },
      {x, w}, {g});
  expect_close(grads[0], {rows, d}, dx, 1e-12, 1e-12);
  expect_close(grads[1], {d}, dw, 1e-12, 1e-12);
}

TEST(FastNormKernels, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (Dtype dt : {float32, bfloat16, float16}) {
    for (int d : {3, 4096, 4099, 12000, 30001, (1 << 17) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      array x = rows_of({5, d}, dt), r = rows_of({5, d}, dt), w = rows_of({d}, dt), b = rows_of({d}, dt);
      // One ulp of |v·w| may separate the devices (see expect_node_matches).
      const double tol = tol_of(dt) * 2 * (1.0 + to_vector(max(abs(astype(w, float64)))).front());
      expect_allclose(fast::rms_norm(x, w, 1e-5f, Device::gpu), fast::rms_norm(x, w, 1e-5f, Device::cpu), tol, tol);
      expect_allclose(
          fast::layer_norm(x, w, b, 1e-5f, Device::gpu), fast::layer_norm(x, w, b, 1e-5f, Device::cpu), tol, tol);
      auto [hg, yg] = fast::add_rms_norm(x, r, w, 1e-5f, Device::gpu);
      auto [hc, yc] = fast::add_rms_norm(x, r, w, 1e-5f, Device::cpu);
      expect_allclose(hg, hc, 0, 0);
      expect_allclose(yg, yc, tol, tol);
      // The backward kernels, each device's own.
      array g = rows_of({5, d}, dt);
      auto grads_on = [&](Device dev) {
        auto f = [&, dev](const std::vector<array>& in) {
          return std::vector<array>{fast::layer_norm(in[0], in[1], in[2], 1e-5f, dev)};
        };
        return vjp(f, {x, w, b}, {g}).second;
      };
      auto gg = grads_on(Device::gpu), gc = grads_on(Device::cpu);
      for (size_t i = 0; i < gg.size(); ++i) expect_allclose(gg[i], gc[i], tol * 8, tol * 8);
      auto rms_on = [&](Device dev) {
        auto f = [&, dev](const std::vector<array>& in) {
          return std::vector<array>{fast::rms_norm(in[0], in[1], 1e-5f, dev)};
        };
        return vjp(f, {x, w}, {g}).second;
      };
      auto rg = rms_on(Device::gpu), rc = rms_on(Device::cpu);
      for (size_t i = 0; i < rg.size(); ++i) expect_allclose(rg[i], rc[i], tol * 8, tol * 8);
    }
  }
  // Many rows: the parameter gradients sum the partials of every block in a fixed order, so
  // two runs agree bit for bit.
  array x = rows_of({3000, 96}, float32), w = rows_of({96}, float32), g = rows_of({3000, 96}, float32);
  auto dw = [&] {
    auto f = [&](const std::vector<array>& in) {
      return std::vector<array>{fast::rms_norm(in[0], in[1], 1e-5f, Device::gpu)};
    };
    return vjp(f, {x, w}, {g}).second[1];
  };
  expect_allclose(dw(), dw(), 0, 0);
  auto fc = [&](const std::vector<array>& in) {
    return std::vector<array>{fast::rms_norm(in[0], in[1], 1e-5f, Device::cpu)};
  };
  expect_allclose(dw(), vjp(fc, {x, w}, {g}).second[1], 1e-4, 1e-3);
}

TEST(FastNormKernels, RulesAgainstCentralDifferences) {
  array x = rows_of({3, 4, 7}, float64), r = rows_of({3, 4, 7}, float64);
  array w = rows_of({7}, float64), b = rows_of({7}, float64);
  check_grad([](const std::vector<array>& in) { return fast::rms_norm(in[0], in[1], 1e-5f); }, {x, w});
  check_grad([](const std::vector<array>& in) { return fast::rms_norm(in[0], std::nullopt, 1e-5f); }, {x});
  check_grad([](const std::vector<array>& in) { return fast::layer_norm(in[0], in[1], in[2], 1e-5f); }, {x, w, b});
  check_grad([](const std::vector<array>& in) { return fast::layer_norm(in[0], std::nullopt, in[1], 1e-5f); }, {x, b});
  check_grad([](const std::vector<array>& in) { return fast::add_rms_norm(in[0], in[1], in[2], 1e-5f).second; }, {x, r, w});
  check_grad([](const std::vector<array>& in) { return fast::add_rms_norm(in[0], in[1], in[2], 1e-5f).first; }, {x, r, w});
  // Both outputs used: the dedicated vjp adds h's cotangent to the RmsNormVjp's.
  check_grad([&](const std::vector<array>& in) {
    auto [h, y] = fast::add_rms_norm(in[0], in[1], in[2], 1e-5f);
    return add(multiply(h, b), y);
  }, {x, r, w});
  // Second derivatives: the backward primitives' own rules (from their fallbacks) against
  // central differences of the backward kernels.
  array c = rows_of({3, 4, 7}, float64);
  check_grad([&](const std::vector<array>& in) {
    return grad([&](const std::vector<array>& p) { return sum(multiply(fast::rms_norm(p[0], p[1], 1e-5f), c)); },
                std::vector<int>{0})({in[0], in[1]})[0];
  }, {x, w});
  check_grad([&](const std::vector<array>& in) {
    return grad([&](const std::vector<array>& p) { return sum(multiply(fast::layer_norm(p[0], p[1], p[2], 1e-5f), c)); },
                std::vector<int>{1})({in[0], in[1], in[2]})[0];
  }, {x, w, b});
}

TEST(FastNormKernels, VmapAgainstALoop) {
  array x = rows_of({3, 7, 7}, float64), w = rows_of({7}, float64), b = rows_of({7}, float64);
  for (int ax : {0, 1, 2}) {
    SCOPED_TRACE("batch axis " + std::to_string(ax));
    check_vmap([&](const std::vector<array>& in) { return std::vector<array>{fast::rms_norm(in[0], w, 1e-5f)}; },
               {x}, {ax}, 1e-12, 1e-12);
    check_vmap([&](const std::vector<array>& in) { return std::vector<array>{fast::layer_norm(in[0], w, b, 1e-5f)}; },
               {x}, {ax}, 1e-12, 1e-12);
  }
  // A batched weight runs the graph, still equal to the loop.
  array ws = rows_of({3, 7}, float64);
  check_vmap([](const std::vector<array>& in) { return std::vector<array>{fast::rms_norm(in[0], in[1], 1e-5f)}; },
             {x, ws}, {0, 0}, 1e-12, 1e-12);
  // vmap keeps the kernel when the parameters are unbatched.
  auto batched = vmap([&](const array& a) { return fast::rms_norm(a, w, 1e-5f); })(x);
  EXPECT_STREQ(batched.primitive().name(), "RmsNorm");
}

TEST(FastNormKernels, BadInputNamesTheOp) {
  array x = ones({2, 3}), w = ones({3});
  auto bad = [](auto f, const char* op) { expect_throws_naming<std::invalid_argument>(f, op); };
  bad([&] { fast::rms_norm(array(1.0f), std::nullopt, 1e-5f); }, "[rms_norm]");
  bad([&] { fast::rms_norm(x, ones({4}), 1e-5f); }, "[rms_norm]");
  bad([&] { fast::rms_norm(x, ones({1, 3}), 1e-5f); }, "[rms_norm]");
  bad([&] { fast::rms_norm(astype(x, int32), std::nullopt, 1e-5f); }, "[rms_norm]");
  bad([&] { fast::rms_norm(astype(x, complex64), std::nullopt, 1e-5f); }, "[rms_norm]");
  bad([&] { fast::layer_norm(array(1.0f), w, w, 1e-5f); }, "[layer_norm]");
  bad([&] { fast::layer_norm(x, w, ones({2}), 1e-5f); }, "[layer_norm]");
  bad([&] { fast::layer_norm(x, ones({2}), std::nullopt, 1e-5f); }, "[layer_norm]");
  bad([&] { fast::layer_norm(astype(x, int32), std::nullopt, std::nullopt, 1e-5f); }, "[layer_norm]");
  bad([&] { fast::add_rms_norm(x, ones({2, 4}), w, 1e-5f); }, "[add]");
  bad([&] { fast::add_rms_norm(x, x, ones({4}), 1e-5f); }, "[rms_norm]");
  bad([&] { fast::add_rms_norm(astype(x, int32), astype(x, int32), std::nullopt, 1e-5f); }, "[rms_norm]");
  // Empty rows are fine: the fallback's empty result.
  EXPECT_EQ(fast::rms_norm(zeros({0, 3}), w, 1e-5f).shape(), (Shape{0, 3}));
}

TEST(FastNormKernels, LayersUseTheKernels) {
  nn::RMSNorm rms(8);
  nn::LayerNorm ln(8);
  array x = rows_of({2, 8}, float32);
  EXPECT_STREQ(rms(x).primitive().name(), "RmsNorm");
  EXPECT_STREQ(ln(x).primitive().name(), "LayerNorm");
  expect_allclose(rms(x), fast::rms_norm(x, ones({8}), 1e-5f), 1e-6, 1e-6);
}

TEST(FastNormKernels, VmapOverEmptyBatches) {
  array w = ones({7});
  auto f = vmap([&](const array& a) { return fast::rms_norm(a, w, 1e-5f); });
  array y = f(zeros({0, 3, 7}));
  eval(y);
  EXPECT_EQ(y.shape(), (Shape{0, 3, 7}));
  auto g = vmap([&](const array& a) { return fast::layer_norm(a, w, w, 1e-5f); });
  array z = g(zeros({0, 3, 7}));
  eval(z);
  EXPECT_EQ(z.shape(), (Shape{0, 3, 7}));
  // The backward of an empty batch: zero parameter gradients.
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) { return std::vector<array>{f(in[0]) * 1.0f}; }, {zeros({0, 3, 7})},
      {zeros({0, 3, 7})});
  eval(grads);
}

// The AddRmsNorm vjp skips a cotangent autodiff made with zeros_like (h unused), and only
// such a one: is_known_zeros recognises that graph without evaluating it.
TEST(FastNormKernels, KnownZeroCotangentsAreSkipped) {
  array x = rows_of({5, 16}, float32), r = rows_of({5, 16}, float32), w = rows_of({16}, float32);
  EXPECT_TRUE(fast::is_known_zeros(zeros_like(x)));
  EXPECT_TRUE(fast::is_known_zeros(zeros({3, 4}, bfloat16)));
  EXPECT_FALSE(fast::is_known_zeros(ones_like(x)));
  EXPECT_FALSE(fast::is_known_zeros(full({3}, array(-0.0f))));
  EXPECT_FALSE(fast::is_known_zeros(multiply(x, array(0.0f))));
  EXPECT_FALSE(fast::is_known_zeros(array(0.0f)));
  // y alone: dx is the RmsNormVjp output itself (no Add node after it), and dx and dr are one
  // array; with h used too, an Add joins the two cotangents.
  auto [outs, grads] = vjp([&](const std::vector<array>& in) {
    return std::vector<array>{fast::add_rms_norm(in[0], in[1], in[2], 1e-5f).second};
  }, {x, r, w}, {ones_like(x)});
  EXPECT_STREQ(grads[0].primitive().name(), "RmsNormVjp");
  EXPECT_EQ(grads[0].id(), grads[1].id());
  auto [outs2, grads2] = vjp([&](const std::vector<array>& in) {
    auto [h, y] = fast::add_rms_norm(in[0], in[1], in[2], 1e-5f);
    return std::vector<array>{h, y};
  }, {x, r, w}, {ones_like(x), ones_like(x)});
  EXPECT_STREQ(grads2[0].primitive().name(), "Add");
  // The same values either way as the composition's.
  auto composed = vjp([&](const std::vector<array>& in) {
    array h = add(in[0], in[1]);
    return std::vector<array>{h, fast::rms_norm(h, in[2], 1e-5f)};
  }, {x, r, w}, {ones_like(x), ones_like(x)}).second;
  for (int i = 0; i < 3; ++i) expect_allclose(grads2[i], composed[i], 1e-5, 1e-5);
}
