// The backward primitives of softmax and logsumexp over the last axis (SoftmaxVjp in
// src/fast/softmax.h, LogSumExpVjp in src/fast/logsumexp.h). Their kernels (CPU, and GPU when
// the suite runs with the GPU as default device) against their fallbacks on random rows of
// odd sizes up to 2^17 + 5, every floating dtype, special rows (-inf, +inf, NaN), far-off and
// coarse lse values, non-contiguous and misaligned inputs; LogSumExpVjp's fallback against
// the derivative of LogSumExp's own fallback graph; GPU against CPU; the vjps against central
// differences, second derivatives through the new nodes, vmap against a loop, empty inputs,
// export and import.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "checker.h"
#include "fast/logsumexp.h"
#include "fast/softmax.h"
#include "nuvec/export.h"
#include "nuvec/graph_utils.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double tol_of(Dtype dt) {
  return dt == float64 ? 1e-12 : dt == float32 ? 1e-5 : dt == float16 ? 2e-3 : 1.6e-2;
}

array rows_of(const Shape& shape, Dtype dt, double scale = 2.0) {
  return astype(multiply(randn(shape, float64), array(scale, float64)), dt);
}

// x (rows x d) with special rows: all -inf, one +inf, one NaN, a single -inf, an offset of 80
// (exp would overflow float32 without a shift); the rest random.
array special_rows(int rows, int d, Dtype dt) {
  auto v = to_vector(rows_of({rows, d}, float64, 3.0));
  for (int j = 0; j < d; ++j) v[j] = -kInf;
  if (rows > 1) v[1 * d + d / 2] = kInf;
  if (rows > 2) v[2 * d + d - 1] = std::nan("");
  if (rows > 3) v[3 * d] = -kInf;
  if (rows > 4) {
    for (int j = 0; j < d; ++j) v[4 * d + j] += 80.0;
  }
  return astype(array(v.begin(), {rows, d}, float64), dt);
}

Stream stream_of(Device dev) {
  return default_stream(dev);
}

// The backward nodes built directly on `dev` (default: the default device).
array softmax_vjp_node(const array& y, const array& d, Device dev = default_device()) {
  return array(y.shape(), y.dtype(), std::make_shared<SoftmaxVjp>(stream_of(dev)), {y, d});
}
array logsumexp_vjp_node(const array& x, const array& lse, const array& g, Device dev = default_device()) {
  return array(x.shape(), x.dtype(), std::make_shared<LogSumExpVjp>(stream_of(dev)), {x, lse, g});
}

// A node's output against its primitive's fallback on the same inputs (taken before eval,
// which detaches the node).
void expect_matches_fallback(const array& out, const char* name, double tol) {
  ASSERT_TRUE(out.has_primitive());
  ASSERT_STREQ(out.primitive().name(), name);
  auto& p = dynamic_cast<fast::FastPrimitive&>(out.primitive());
  array ref = p.fallback()(out.inputs())[0];
  eval(out, ref);
  EXPECT_EQ(out.dtype(), ref.dtype());
  expect_allclose(out, ref, tol, tol);
}

// The inputs of both backward nodes for rows x of dtype dt: (y, d) and (x, lse, g).
struct Backward {
  array y, d, x, lse, g;
  explicit Backward(const array& xs)
      : y(softmax(xs, -1)),
        d(rows_of(xs.shape(), xs.dtype())),
        x(xs),
        lse(logsumexp(xs, -1, true)),
        g(rows_of(lse.shape(), xs.dtype())) {}
};

} // namespace

TEST(FastSoftmaxVjp, KernelsMatchTheirFallbacks) {
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (int n : {1, 3, 64, 4097, (1 << 17) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      const int rows = n > 5000 ? 3 : 9;
      Backward random(rows_of({rows, n}, dt));
      expect_matches_fallback(softmax_vjp_node(random.y, random.d), "SoftmaxVjp", tol_of(dt));
      expect_matches_fallback(logsumexp_vjp_node(random.x, random.lse, random.g), "LogSumExpVjp", tol_of(dt));
      Backward special(special_rows(rows, n, dt));
      expect_matches_fallback(softmax_vjp_node(special.y, special.d), "SoftmaxVjp", tol_of(dt));
      expect_matches_fallback(logsumexp_vjp_node(special.x, special.lse, special.g), "LogSumExpVjp", tol_of(dt));
    }
  }
}

TEST(FastSoftmaxVjp, TheOpsRecordTheNodes) {
  array x = rows_of({4, 33}, bfloat16);
  auto sm = [](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], -1)}; };
  auto lse = [](const std::vector<array>& in) { return std::vector<array>{logsumexp(in[0], -1)}; };
  array ds = vjp(sm, {x}, {rows_of({4, 33}, bfloat16)}).second[0];
  EXPECT_STREQ(ds.primitive().name(), "SoftmaxVjp");
  EXPECT_EQ(ds.dtype(), bfloat16);
  // logsumexp without keepdims squeezes the node's (4, 1) output: the cotangent reaches the
  // node as (4, 1).
  array dl = vjp(lse, {x}, {rows_of({4}, bfloat16)}).second[0];
  EXPECT_STREQ(dl.primitive().name(), "LogSumExpVjp");
  EXPECT_EQ(dl.shape(), x.shape());
  EXPECT_EQ(dl.dtype(), bfloat16);
  // A cotangent of a wider dtype (vjp casts its seeds, but a rule may pass one on) keeps its
  // precision through the fallback: no node.
  array y = softmax(x, -1), l = logsumexp(x, -1, true);
  array c32 = rows_of({4, 33}, float32), cl32 = rows_of({4, 1}, float32);
  array wide = y.primitive().vjp(y.inputs(), {c32}, {0}, {y})[0];
  EXPECT_STRNE(wide.primitive().name(), "SoftmaxVjp");
  EXPECT_EQ(wide.dtype(), bfloat16);
  array narrow = y.primitive().vjp(y.inputs(), {astype(c32, bfloat16)}, {0}, {y})[0];
  EXPECT_STREQ(narrow.primitive().name(), "SoftmaxVjp");
  expect_allclose(wide, narrow, tol_of(bfloat16), 1e-3);
  array wide_l = l.primitive().vjp(l.inputs(), {cl32}, {0}, {l})[0];
  EXPECT_STRNE(wide_l.primitive().name(), "LogSumExpVjp");
  EXPECT_EQ(wide_l.dtype(), bfloat16);
  array narrow_l = l.primitive().vjp(l.inputs(), {astype(cl32, bfloat16)}, {0}, {l})[0];
  expect_allclose(wide_l, narrow_l, tol_of(bfloat16), 1e-3);
}

TEST(FastSoftmaxVjp, LogSumExpVjpKeepsTheDerivedAnswers) {
  // Before the dedicated rule, LogSumExp's vjp was the derivative of its fallback graph: the
  // new fallback and the kernels give the same values, special rows included.
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const int n = 37;
    array x = special_rows(7, n, dt);
    array g = rows_of({7, 1}, dt);
    auto graph = [](const std::vector<array>& in) {
      return std::vector<array>{fast::logsumexp_graph(in[0], {-1}, default_device())};
    };
    array derived = vjp(graph, {x}, {g}).second[0];
    auto op = [](const std::vector<array>& in) { return std::vector<array>{logsumexp(in[0], -1, true)}; };
    array dx = vjp(op, {x}, {g}).second[0];
    ASSERT_STREQ(dx.primitive().name(), "LogSumExpVjp");
    auto& p = dynamic_cast<fast::FastPrimitive&>(dx.primitive());
    array fallback = p.fallback()(dx.inputs())[0];
    expect_allclose(fallback, derived, 0, 0);
    expect_allclose(dx, derived, tol_of(dt), tol_of(dt));
    auto v = to_vector(dx);
    for (int j = 0; j < n; ++j) {
      EXPECT_TRUE(std::isnan(v[j])) << "a row of -inf: 0 * g / 0, at " << j;
      if (j == n / 2) EXPECT_TRUE(std::isnan(v[n + j])) << "the +inf element: inf * g / inf";
      else EXPECT_EQ(v[n + j], 0.0) << "a finite element beside +inf, at " << j;
      EXPECT_TRUE(std::isnan(v[2 * n + j])) << "a row holding NaN, at " << j;
    }
    EXPECT_EQ(v[3 * n], 0.0); // a single -inf in a finite row
  }
}

TEST(FastSoftmaxVjp, LseIsOnlyTheShift) {
  // The kernels renormalise by the sum of exp(x - lse): any finite lse gives the fallback's
  // value (which does not read lse), one within 22 of the truth directly, one farther off by
  // shifting with the row's max instead.
  for (Dtype dt : {float64, float32, float16, bfloat16}) {
    for (int n : {5, 300, 5000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      Backward b(rows_of({6, n}, dt));
      for (double off : {-200.0, -30.0, -15.0, -1.0, 1.0, 15.0, 30.0, 200.0}) {
        SCOPED_TRACE("lse offset " + std::to_string(off));
        array lse = astype(add(astype(b.lse, float64), array(off, float64)), dt);
        expect_matches_fallback(logsumexp_vjp_node(b.x, lse, b.g), "LogSumExpVjp", tol_of(dt));
      }
    }
  }
  // bfloat16 rows near 40000: lse rounds to a multiple of 256, too coarse to shift by.
  array x = astype(add(multiply(randn({4, 257}, float64), array(300.0, float64)), array(40000.0, float64)), bfloat16);
  array lse = logsumexp(x, -1, true);
  expect_matches_fallback(logsumexp_vjp_node(x, lse, rows_of({4, 1}, bfloat16)), "LogSumExpVjp", tol_of(bfloat16));
  // A +inf lse over a finite row (a float16 row whose logsumexp passes 65504 rounds to it):
  // the row's max is the shift, the fallback's answer (not NaN from exp(x − 0) overflowing).
  for (Dtype dt : {float16, float32, float64}) {
    SCOPED_TRACE(std::string("+inf lse ") + dtype_name(dt));
    array xf = add(rows_of({3, 300}, dt), array(60.0, dt));
    array inf_lse = full({3, 1}, array(std::numeric_limits<float>::infinity()), dt);
    expect_matches_fallback(logsumexp_vjp_node(xf, inf_lse, rows_of({3, 1}, dt)), "LogSumExpVjp", tol_of(dt));
  }
  // The rounding of a half type's lse cancels: the gradient is g times softmax(x), within
  // the output's rounding, however far the rounded lse is from the true one.
  array xb = rows_of({3, 4096}, bfloat16, 3.0);
  array ones_g = ones({3, 1}, bfloat16);
  array dx = logsumexp_vjp_node(xb, logsumexp(xb, -1, true), ones_g);
  expect_allclose(dx, softmax(astype(xb, float64), -1), 8e-3, 1e-9);
}

TEST(FastSoftmaxVjp, NonContiguousAndMisalignedInputs) {
  for (Dtype dt : {float32, bfloat16, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    // A transposed input (strided last axis) and a broadcast cotangent.
    array xt = transpose(rows_of({40, 5, 6}, dt), {1, 2, 0});
    array y = softmax(xt, -1);
    array d = broadcast_to(rows_of({40}, dt), y.shape());
    expect_matches_fallback(softmax_vjp_node(y, d), "SoftmaxVjp", tol_of(dt));
    expect_matches_fallback(softmax_vjp_node(transpose(y, {1, 0, 2}), transpose(d, {1, 0, 2})), "SoftmaxVjp",
                            tol_of(dt));
    array lse = logsumexp(xt, -1, true);
    array g = broadcast_to(rows_of({1, 1, 1}, dt), lse.shape());
    expect_matches_fallback(logsumexp_vjp_node(xt, lse, g), "LogSumExpVjp", tol_of(dt));
    // Sliced rows, and a dense input one element off the start of its buffer (rows off the
    // 16-byte boundary: the GPU streams them).
    array xs = slice(rows_of({4, 9, 72}, dt), {0, 1, 3}, {4, 9, 67});
    Backward b(xs);
    expect_matches_fallback(softmax_vjp_node(b.y, b.d), "SoftmaxVjp", tol_of(dt));
    expect_matches_fallback(logsumexp_vjp_node(b.x, b.lse, b.g), "LogSumExpVjp", tol_of(dt));
    array flat = rows_of({1 + 6 * 64}, dt);
    array xo = reshape(slice(flat, {1}, {1 + 6 * 64}), {6, 64});
    Backward o(xo);
    array yo = reshape(slice(concatenate({zeros({1}, dt), flatten(o.y)}), {1}, {1 + 6 * 64}), {6, 64});
    expect_matches_fallback(softmax_vjp_node(yo, o.d), "SoftmaxVjp", tol_of(dt));
    expect_matches_fallback(logsumexp_vjp_node(xo, o.lse, o.g), "LogSumExpVjp", tol_of(dt));
  }
}

TEST(FastSoftmaxVjp, Float64AgainstALoop) {
  const int rows = 5, n = 23;
  array x = rows_of({rows, n}, float64, 4.0), d = rows_of({rows, n}, float64), g = rows_of({rows, 1}, float64);
  auto xv = to_vector(x), dv = to_vector(d), gv = to_vector(g);
  std::vector<double> ds(rows * n), dl(rows * n);
  for (int r = 0; r < rows; ++r) {
    double m = -kInf, s = 0, dot = 0;
    for (int j = 0; j < n; ++j) m = std::max(m, xv[r * n + j]);
    for (int j = 0; j < n; ++j) s += std::exp(xv[r * n + j] - m);
    for (int j = 0; j < n; ++j) dot += dv[r * n + j] * std::exp(xv[r * n + j] - m) / s;
    for (int j = 0; j < n; ++j) {
      const double p = std::exp(xv[r * n + j] - m) / s;
      ds[r * n + j] = p * (dv[r * n + j] - dot);
      dl[r * n + j] = gv[r] * p;
    }
  }
  auto sm = [](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], -1)}; };
  auto lse = [](const std::vector<array>& in) { return std::vector<array>{logsumexp(in[0], -1, true)}; };
  expect_close(vjp(sm, {x}, {d}).second[0], {rows, n}, ds, 1e-12, 1e-14);
  expect_close(vjp(lse, {x}, {g}).second[0], {rows, n}, dl, 1e-12, 1e-14);
}

TEST(FastSoftmaxVjp, GpuMatchesCpu) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  const Device gpu(Device::gpu), cpu(Device::cpu);
  for (Dtype dt : {float32, bfloat16, float16, float64}) {
    // Register rows of every block size, the largest they hold, one vector more (streamed),
    // odd rows (streamed element by element) and long ones.
    for (int n : {3, 8, 64, 1000, 4096, 4097, 4098, 8192, 8200, 16384, 16392, 32768, 32776, 40001, (1 << 17) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      const int rows = n > 5000 ? 5 : 33;
      Backward b(special_rows(rows, n, dt));
      const double tol = tol_of(dt) * 4;
      expect_allclose(softmax_vjp_node(b.y, b.d, gpu), softmax_vjp_node(b.y, b.d, cpu), tol, tol);
      expect_allclose(logsumexp_vjp_node(b.x, b.lse, b.g, gpu), logsumexp_vjp_node(b.x, b.lse, b.g, cpu), tol, tol);
    }
  }
  // The whole backward on each device, through the ops.
  array x = rows_of({64, 4096}, bfloat16);
  array c = rows_of({64, 4096}, bfloat16), cl = rows_of({64}, bfloat16);
  auto grads = [&](Device dev) {
    auto f = [&, dev](const std::vector<array>& in) {
      return std::vector<array>{softmax(in[0], -1, false, dev), logsumexp(in[0], -1, false, dev)};
    };
    return vjp(f, {x}, {c, cl}).second[0];
  };
  expect_allclose(grads(gpu), grads(cpu), tol_of(bfloat16) * 4, tol_of(bfloat16) * 4);
}

TEST(FastSoftmaxVjp, RulesAgainstCentralDifferences) {
  array x = rows_of({3, 4, 7}, float64);
  check_grad([](const std::vector<array>& in) { return softmax(in[0], -1); }, {x});
  check_grad([](const std::vector<array>& in) { return logsumexp(in[0], -1); }, {x});
  check_grad([](const std::vector<array>& in) { return logsumexp(in[0], -1, true); }, {x});
  // Second derivatives: the backward nodes' rules (from their fallbacks) against central
  // differences of the backward kernels, in the input and in the cotangent.
  auto softmax_vjp = [](const std::vector<array>& in) {
    auto f = [](const std::vector<array>& xs) { return std::vector<array>{softmax(xs[0], -1)}; };
    array dx = vjp(f, {in[0]}, {in[1]}).second[0];
    EXPECT_STREQ(dx.primitive().name(), "SoftmaxVjp");
    return dx;
  };
  auto logsumexp_vjp = [](const std::vector<array>& in) {
    auto f = [](const std::vector<array>& xs) { return std::vector<array>{logsumexp(xs[0], -1, true)}; };
    array dx = vjp(f, {in[0]}, {in[1]}).second[0];
    EXPECT_STREQ(dx.primitive().name(), "LogSumExpVjp");
    return dx;
  };
  check_grad(softmax_vjp, {x, rows_of({3, 4, 7}, float64)});
  check_grad(logsumexp_vjp, {x, rows_of({3, 4, 1}, float64)});
  // grad of grad, through both nodes.
  array w = rows_of({3, 4, 7}, float64);
  auto inner = [&](const array& a) {
    return sum(multiply(softmax(a, -1), w)) + sum(logsumexp(a, -1));
  };
  check_grad([&](const std::vector<array>& in) { return grad(inner)(in[0]); }, {x});
}

TEST(FastSoftmaxVjp, VmapAgainstALoop) {
  array x = rows_of({3, 5, 7}, float64), d = rows_of({3, 5, 7}, float64), g = rows_of({3, 5, 1}, float64);
  auto sm = [](const std::vector<array>& in) {
    auto f = [](const std::vector<array>& xs) { return std::vector<array>{softmax(xs[0], -1)}; };
    return vjp(f, {in[0]}, {in[1]}).second;
  };
  auto lse = [](const std::vector<array>& in) {
    auto f = [](const std::vector<array>& xs) { return std::vector<array>{logsumexp(xs[0], -1, true)}; };
    return vjp(f, {in[0]}, {in[1]}).second;
  };
  for (int ax : {0, 1, 2}) {
    SCOPED_TRACE("batch axis " + std::to_string(ax));
    check_vmap(sm, {x, d}, {ax, ax}, 1e-12, 1e-12);
    Shape one = x.shape(); // an unbatched cotangent: one example's shape
    one.erase(one.begin() + ax);
    check_vmap(sm, {x, rows_of(one, float64)}, {ax, -1}, 1e-12, 1e-12);
  }
  for (int ax : {0, 1}) {
    SCOPED_TRACE("batch axis " + std::to_string(ax));
    check_vmap(lse, {x, g}, {ax, ax}, 1e-12, 1e-12);
  }
  check_vmap(lse, {x, rows_of({5, 1}, float64)}, {0, -1}, 1e-12, 1e-12);
  // The nodes themselves under vmap (their rules come from the fallbacks).
  array y = softmax(x, -1), l = logsumexp(x, -1, true);
  check_vmap([](const std::vector<array>& in) { return std::vector<array>{softmax_vjp_node(in[0], in[1])}; },
             {y, d}, {1, 1}, 1e-12, 1e-12);
  check_vmap([](const std::vector<array>& in) {
    return std::vector<array>{logsumexp_vjp_node(in[0], in[1], in[2])};
  }, {x, l, g}, {0, 0, 0}, 1e-12, 1e-12);
}

TEST(FastSoftmaxVjp, EmptyInputs) {
  for (const Shape& shape : {Shape{0, 5}, Shape{3, 0}, Shape{2, 0, 4}}) {
    Shape rows = shape;
    rows.back() = 1;
    array y = zeros(shape, float32), d = zeros(shape, float32);
    array dx = softmax_vjp_node(y, d);
    array dl = logsumexp_vjp_node(y, zeros(rows, float32), zeros(rows, float32));
    eval(dx, dl);
    EXPECT_EQ(dx.shape(), shape);
    EXPECT_EQ(dl.shape(), shape);
  }
  // A vmap over an empty batch records the forward nodes; their backward is empty too.
  auto f = vmap([](const array& a) { return softmax(a, -1) + logsumexp(a, -1, true); });
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) { return std::vector<array>{f(in[0])}; }, {zeros({0, 3, 7})},
      {zeros({0, 3, 7})});
  eval(grads);
  EXPECT_EQ(grads[0].shape(), (Shape{0, 3, 7}));
}

TEST(FastSoftmaxVjp, ExportRoundTrip) {
  // A traced backward holds both nodes; the file rebuilds them (src/export/primitive_table.cpp).
  auto backward = [](const std::vector<array>& in) {
    auto f = [](const std::vector<array>& xs) {
      return std::vector<array>{softmax(xs[0], -1), logsumexp(xs[0], -1, true)};
    };
    return vjp(f, {in[0]}, {in[1], in[2]}).second;
  };
  std::vector<array> inputs = {rows_of({3, 40}, float32), rows_of({3, 40}, float32), rows_of({3, 1}, float32)};
  std::ostringstream graph;
  print_graph(graph, backward(inputs));
  EXPECT_NE(graph.str().find("SoftmaxVjp"), std::string::npos) << graph.str();
  EXPECT_NE(graph.str().find("LogSumExpVjp"), std::string::npos) << graph.str();
  const std::string path = (scratch_dir() / "softmax_vjp.nuvecfn").string();
  export_function(path, backward, inputs);
  auto imported = import_function(path);
  expect_allclose(imported(inputs)[0], backward(inputs)[0], 1e-6, 1e-7);
}
