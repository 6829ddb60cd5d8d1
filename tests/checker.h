// nuvec tests: the generic checker every differentiable primitive goes through. Reverse and
// forward mode are compared with central finite differences in float64; vmap with a loop
// over the batch (stacking the per-example results).
#pragma once

#include <functional>
#include <vector>

#include "test_utils.h"

namespace nuvec::testing {

struct GradCheckOptions {
  double eps = 1e-6; // finite-difference step
  double rtol = 1e-5;
  double atol = 1e-6;
  std::vector<int> argnums; // inputs to differentiate (empty: every floating input)
};

namespace detail {
inline array perturbed(const array& x, size_t flat, double delta) {
  auto v = to_vector(x);
  v[flat] += delta;
  return array(v.begin(), x.shape(), float64);
}
} // namespace detail

/// Checks the vjp (with a random cotangent) and the jvp (with a random tangent) of f at
/// `inputs` (float64) against central differences of f, input by input and element by
/// element: dL/dx_i = (L(x + e_i) - L(x - e_i)) / 2eps with L = <cotangent, f(x)>.
inline void check_grad(
    const std::function<array(const std::vector<array>&)>& f,
    const std::vector<array>& inputs,
    GradCheckOptions opts = {}) {
  std::vector<int> argnums = opts.argnums;
  if (argnums.empty()) {
    for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
      if (issubdtype(inputs[i].dtype(), floating)) argnums.push_back(i);
    }
  }
  auto out = f(inputs);
  eval(out);
  auto cot = randn(out.shape(), out.dtype());
  auto fv = [&](const std::vector<array>& xs) { return std::vector<array>{f(xs)}; };
  auto [outs, vjps] = vjp(fv, inputs, {cot});
  auto cot_v = to_vector(cot);
  auto loss = [&](const std::vector<array>& xs) {
    auto y = to_vector(f(xs));
    double acc = 0;
    for (size_t k = 0; k < y.size(); ++k) acc += y[k] * cot_v[k];
    return acc;
  };
  for (int i : argnums) {
    SCOPED_TRACE("vjp of input " + std::to_string(i));
    auto g = to_vector(vjps[i]);
    ASSERT_EQ(vjps[i].shape(), inputs[i].shape());
    for (size_t k = 0; k < inputs[i].size(); ++k) {
      auto xp = inputs, xm = inputs;
      xp[i] = detail::perturbed(inputs[i], k, opts.eps);
      xm[i] = detail::perturbed(inputs[i], k, -opts.eps);
      double fd = (loss(xp) - loss(xm)) / (2 * opts.eps);
      EXPECT_NEAR(g[k], fd, opts.atol + opts.rtol * std::abs(fd)) << "element " << k;
    }
  }
  // Forward mode: one random tangent for all differentiated inputs at once. Only those
  // inputs are primals; the rest (integer indices, say) are held fixed, since a jvp with
  // respect to an integer input is refused (as in MLX).
  std::vector<array> tangents, primals;
  for (int i : argnums) {
    primals.push_back(inputs[i]);
    tangents.push_back(randn(inputs[i].shape(), inputs[i].dtype()));
  }
  auto f_of_primals = [&](const std::vector<array>& ps) {
    auto xs = inputs;
    for (size_t j = 0; j < argnums.size(); ++j) xs[argnums[j]] = ps[j];
    return std::vector<array>{f(xs)};
  };
  auto [jouts, jvps] = jvp(f_of_primals, primals, tangents);
  auto jv = to_vector(jvps[0]);
  ASSERT_EQ(jvps[0].shape(), out.shape());
  std::vector<array> xp = inputs, xm = inputs;
  for (size_t j = 0; j < argnums.size(); ++j) {
    int i = argnums[j];
    xp[i] = add(inputs[i], multiply(tangents[j], array(opts.eps, inputs[i].dtype())));
    xm[i] = subtract(inputs[i], multiply(tangents[j], array(opts.eps, inputs[i].dtype())));
  }
  auto yp = to_vector(f(xp)), ym = to_vector(f(xm));
  SCOPED_TRACE("jvp");
  for (size_t k = 0; k < jv.size(); ++k) {
    double fd = (yp[k] - ym[k]) / (2 * opts.eps);
    EXPECT_NEAR(jv[k], fd, opts.atol + opts.rtol * std::abs(fd)) << "element " << k;
  }
}

/// Checks vmap(f, in_axes)(batched) against stacking f over the batch (out axis 0).
inline void check_vmap(
    const std::function<std::vector<array>(const std::vector<array>&)>& f,
    const std::vector<array>& batched,
    const std::vector<int>& in_axes,
    double rtol = 1e-6,
    double atol = 1e-7) {
  auto vf = vmap(f, in_axes);
  auto got = vf(batched);
  int n = -1;
  for (size_t i = 0; i < batched.size(); ++i) {
    if (in_axes[i] >= 0) n = batched[i].shape(in_axes[i]);
  }
  ASSERT_GE(n, 0);
  std::vector<std::vector<array>> per_out(got.size());
  for (int b = 0; b < n; ++b) {
    std::vector<array> xs;
    for (size_t i = 0; i < batched.size(); ++i) {
      if (in_axes[i] < 0) {
        xs.push_back(batched[i]);
      } else {
        Shape start(batched[i].ndim(), 0), stop = batched[i].shape();
        start[in_axes[i]] = b;
        stop[in_axes[i]] = b + 1;
        xs.push_back(squeeze(slice(batched[i], start, stop), in_axes[i]));
      }
    }
    auto ys = f(xs);
    ASSERT_EQ(ys.size(), got.size());
    for (size_t j = 0; j < ys.size(); ++j) per_out[j].push_back(ys[j]);
  }
  for (size_t j = 0; j < got.size(); ++j) {
    SCOPED_TRACE("vmap output " + std::to_string(j));
    auto expected = stack(per_out[j], 0);
    ASSERT_EQ(got[j].dtype(), expected.dtype());
    expect_allclose(got[j], expected, rtol, atol);
  }
}

} // namespace nuvec::testing
