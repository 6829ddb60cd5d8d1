// nuvec tests: the quantized and gathered products as ops (quantized_matmul, gather_qmm,
// gather_mm, qqmm, gather_qqmm): values against matmul with the dequantized weight computed
// in float64, gathers against loops of single products, broadcasting, the rules (vjp, jvp
// against the float64 graph and central differences, vmap against a loop) and bad input.
// The kernels alone against their fallbacks: tests/quantized_kernels_test.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

struct Format {
  std::string mode;
  int group_size;
  int bits;
};

std::vector<Format> all_formats() {
  std::vector<Format> f;
  for (int bits : {2, 3, 4, 5, 6, 8}) f.push_back({"affine", 64, bits});
  f.push_back({"affine", 32, 4});
  f.push_back({"affine", 128, 8});
  f.push_back({"mxfp4", 32, 4});
  f.push_back({"mxfp8", 32, 8});
  f.push_back({"nvfp4", 16, 4});
  return f;
}

// A quantized weight: w (rows, cols) random, quantized along cols.
struct QWeight {
  array w_q, scales;
  std::optional<array> biases;
  Format f;
  // The dequantized weight in float64 (the meaning of the packed words).
  array dense() const {
    return dequantize(w_q, scales, biases, f.group_size, f.bits, f.mode, std::nullopt, float64);
  }
};

QWeight make_weight(const Shape& shape, const Format& f, Dtype dtype = float32) {
  auto q = quantize(astype(randn(shape), dtype), f.group_size, f.bits, f.mode);
  QWeight w{q[0], q[1], std::nullopt, f};
  if (q.size() > 2) w.biases = q[2];
  return w;
}

double tol_for(Dtype dt) {
  return dt == float32 ? 2e-4 : dt == float16 ? 4e-3 : 3e-2;
}

// |a - b| <= tol * (max |b| + 1), elementwise: the products' rounding scales with the output.
void expect_near_scaled(const array& a, const array& b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  auto va = to_vector(a), vb = to_vector(b);
  double scale = 1;
  for (double v : vb) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < va.size(); ++i) {
    ASSERT_NEAR(va[i], vb[i], tol * scale) << "at flat index " << i;
  }
}

// qqmm's tolerance relative to the output's scale: float32 sums on the CPU and on the GPU's
// bf16 route; float16/float32 x run on the GPU's FP8 tensor cores, whose accumulation keeps
// fewer bits (about 4e-4 of the sum of |terms|, include/nuvec/ops.h).
double qq_tol(Dtype dt) {
  if (dt == bfloat16) return 1e-2;
  return default_device() == Device::gpu ? 3e-3 : 1e-5;
}

// The last two axes swapped.
array transpose_(const array& a) {
  return swapaxes(a, -1, -2);
}

array reference(const array& x, const QWeight& w, bool transpose) {
  array d = w.dense();
  return matmul(astype(x, float64), transpose ? swapaxes(d, -1, -2) : d);
}

} // namespace

TEST(QuantizedMatmul, EveryFormatAgainstDequantizedMatmul) {
  for (const auto& f : all_formats()) {
    for (bool transpose : {true, false}) {
      for (Dtype dt : {float32, float16, bfloat16}) {
        SCOPED_TRACE(f.mode + " bits " + std::to_string(f.bits) + " group " + std::to_string(f.group_size) +
                     (transpose ? " transposed " : " ") + std::string(dtype_name(dt)));
        const int K = transpose ? 256 : 96, N = transpose ? 40 : 128;
        auto w = make_weight(transpose ? Shape{N, K} : Shape{K, N}, f, dt);
        array x = astype(randn({3, 5, K}), dt);
        array out = quantized_matmul(x, w.w_q, w.scales, w.biases, transpose, f.group_size, f.bits, f.mode);
        EXPECT_EQ(out.dtype(), dt);
        expect_near_scaled(out, reference(x, w, transpose), tol_for(dt));
      }
    }
  }
}

// Untransposed w has K rows, any count (MLX's test_non_multiples: K 33 and 3): the CPU
// kernel for fewer than 64 rows of x steps over w's rows four at a time, and once read past
// the last row of w and of each row of x. Here w is the first K rows of a larger packed
// matrix and x rows of a wider one, so reading past either gives wrong values. Also through
// the x-gradient of a transposed product with 37 outputs (its vjp is the untransposed
// product with K = 37), and through gather_qmm.
TEST(QuantizedMatmul, UntransposedRowsOfAnyCount) {
  for (const auto& f : {Format{"affine", 64, 4}, Format{"affine", 32, 3}, Format{"mxfp4", 32, 4},
                        Format{"nvfp4", 16, 4}}) {
    for (int K : {1, 3, 33, 37}) {
      for (Dtype dt : {float32, bfloat16}) {
        SCOPED_TRACE(f.mode + " bits " + std::to_string(f.bits) + " K " + std::to_string(K) + " " +
                     std::string(dtype_name(dt)));
        const int N = 128;
        QWeight big = make_weight({K + 3, N}, f, dt);
        QWeight w = big;
        w.w_q = slice(big.w_q, {0, 0}, {K, big.w_q.shape(1)});
        w.scales = slice(big.scales, {0, 0}, {K, big.scales.shape(1)});
        if (big.biases) w.biases = slice(*big.biases, {0, 0}, {K, big.biases->shape(1)});
        const array wide = astype(randn({5, K + 3}), dt);
        const array x = slice(wide, {0, 0}, {5, K});
        array out = quantized_matmul(x, w.w_q, w.scales, w.biases, false, f.group_size, f.bits, f.mode);
        expect_near_scaled(out, reference(x, w, false), tol_for(dt));
        array gathered = gather_qmm(expand_dims(x, 0), w.w_q, w.scales, w.biases, std::nullopt, std::nullopt, false,
                                    f.group_size, f.bits, f.mode);
        expect_near_scaled(squeeze(gathered, 0), reference(x, w, false), tol_for(dt));
      }
    }
  }
  const Format f{"affine", 64, 4};
  QWeight w = make_weight({37, 128}, f);
  const array x = randn({4, 128});
  auto loss = [&](const array& xs) {
    return sum(square(quantized_matmul(xs, w.w_q, w.scales, w.biases, true, f.group_size, f.bits, f.mode)));
  };
  // d/dx sum(y²) = 2 y · W (W the dequantized weight, N x K).
  const array want = matmul(multiply(array(2.0), reference(x, w, true)), w.dense());
  expect_near_scaled(grad(loss)(x), want, 2e-4);
}

// From 64 rows the CPU dequantizes blocks of w and multiplies them with sgemm (qdot.h's
// qmm_blas): 70 rows, N over two blocks of 512 (and a partial one), both layouts, a half
// type (staged in float32), against the float64 product of the dequantized weight.
TEST(QuantizedMatmul, ManyRowsThroughBlockedSgemm) {
  for (const auto& f : {Format{"affine", 64, 4}, Format{"affine", 32, 3}, Format{"mxfp4", 32, 4}}) {
    for (bool transpose : {true, false}) {
      for (Dtype dt : {float32, bfloat16}) {
        SCOPED_TRACE(f.mode + " bits " + std::to_string(f.bits) + (transpose ? " transposed " : " ") +
                     std::string(dtype_name(dt)));
        const int K = 192, N = 1088;
        auto w = make_weight(transpose ? Shape{N, K} : Shape{K, N}, f, dt);
        array x = astype(randn({2, 35, K}), dt);
        array out = quantized_matmul(x, w.w_q, w.scales, w.biases, transpose, f.group_size, f.bits, f.mode);
        expect_near_scaled(out, reference(x, w, transpose), tol_for(dt));
      }
    }
  }
}

TEST(QuantizedMatmul, DefaultsOneDimensionalXAndFloat64) {
  auto w = make_weight({24, 128}, {"affine", 64, 4});
  array x = randn({128});
  array out = quantized_matmul(x, w.w_q, w.scales, w.biases);
  EXPECT_EQ(out.shape(), Shape({24}));
  EXPECT_EQ(out.dtype(), float64); // float64 in, float64 out (computed in float32)
  expect_near_scaled(out, reference(x, w, true), 2e-5);
  // The rows of a decode step, M = 1.
  array x1 = astype(randn({1, 128}), float32);
  expect_near_scaled(quantized_matmul(x1, w.w_q, w.scales, w.biases), reference(x1, w, true), 2e-4);
}

TEST(QuantizedMatmul, BatchedWeightsBroadcastAgainstX) {
  Format f{"affine", 32, 8};
  auto w = make_weight({1, 3, 16, 64}, f);
  array x = astype(randn({2, 1, 5, 64}), float32);
  array out = quantized_matmul(x, w.w_q, w.scales, w.biases, true, 32, 8);
  ASSERT_EQ(out.shape(), Shape({2, 3, 5, 16}));
  expect_near_scaled(out, reference(x, w, true), 2e-4);
  // x without batch axes against a batched weight.
  array x2 = astype(randn({4, 64}), float32);
  array out2 = quantized_matmul(x2, w.w_q, w.scales, w.biases, true, 32, 8);
  ASSERT_EQ(out2.shape(), Shape({1, 3, 4, 16}));
  expect_near_scaled(out2, reference(x2, w, true), 2e-4);
}

TEST(QuantizedMatmul, EmptyRows) {
  auto w = make_weight({8, 64}, {"affine", 64, 4});
  array out = quantized_matmul(zeros({0, 64}), w.w_q, w.scales, w.biases);
  EXPECT_EQ(out.shape(), Shape({0, 8}));
  eval(out);
}

// An empty inner dimension: the products are zeros, and every expert of the weight is still
// there to be named (the kernels counted 1 expert when the packed rows were empty).
TEST(GatherQmm, EmptyInnerDimensionGivesZeros) {
  auto q = quantize(zeros({5, 8, 0}), 64, 4);
  array out = gather_qmm(ones({3, 1, 0}), q[0], q[1], q[2], std::nullopt, array({4, 1, 0}, int32));
  ASSERT_EQ(out.shape(), Shape({3, 1, 8}));
  EXPECT_EQ(max(abs(out)).item<float>(), 0.0f);
  EXPECT_THROW(eval(gather_qmm(ones({3, 1, 0}), q[0], q[1], q[2], std::nullopt, array({5, 1, 0}, int32))),
               std::out_of_range);
}

TEST(GatherQmm, AgainstLoopSortedAndUnsorted) {
  for (const auto& f : {Format{"affine", 64, 4}, Format{"affine", 32, 3}, Format{"mxfp4", 32, 4}, Format{"nvfp4", 16, 4}}) {
    for (bool transpose : {true, false}) {
      SCOPED_TRACE(f.mode + " bits " + std::to_string(f.bits) + (transpose ? " transposed" : ""));
      const int E = 5, K = 64, N = 64, A = 4, M = 3;
      auto w = make_weight(transpose ? Shape{E, N, K} : Shape{E, K, N}, f);
      array x = astype(randn({A, M, K}), float32);
      std::vector<uint32_t> lhs_v{3, 0, 1, 1, 2, 0, 3}, rhs_v{4, 0, 2, 2, 1, 4, 0}, sorted_v{0, 0, 1, 2, 2, 4, 4};
      array lhs(lhs_v.begin(), {7}, uint32);
      array dense = w.dense();
      for (bool sorted : {false, true}) {
        array rhs = sorted ? array(sorted_v.begin(), {7}, uint32) : array(rhs_v.begin(), {7}, uint32);
        array out = gather_qmm(x, w.w_q, w.scales, w.biases, lhs, rhs, transpose, f.group_size, f.bits, f.mode, sorted);
        ASSERT_EQ(out.shape(), Shape({7, M, N}));
        auto& rv = sorted ? sorted_v : rhs_v;
        for (int b = 0; b < 7; ++b) {
          array wb = take(dense, array(static_cast<int>(rv[b])), 0);
          array ref = matmul(astype(take(x, array(static_cast<int>(lhs_v[b])), 0), float64), transpose ? transpose_(wb) : wb);
          expect_near_scaled(take(out, array(b), 0), ref, 2e-4);
        }
      }
    }
  }
}

// An expert group of 64 rows or more takes the blocked sgemm route with its gathered rows
// staged (qdot.h's qmm_blas): 60 entries of 2 rows, 40 of them on expert 1 (80 rows: sgemm),
// 10 each on experts 0 and 2 (20 rows: dot products), sorted and not, against per-entry
// products.
TEST(GatherQmm, LargeExpertGroupsThroughBlockedSgemm) {
  for (const auto& f : {Format{"affine", 64, 4}, Format{"mxfp4", 32, 4}}) {
    for (bool transpose : {true, false}) {
      for (Dtype dt : {float32, bfloat16}) {
        SCOPED_TRACE(f.mode + (transpose ? " transposed " : " ") + std::string(dtype_name(dt)));
        const int E = 3, K = 128, N = 576, A = 7, M = 2, B = 60;
        auto w = make_weight(transpose ? Shape{E, N, K} : Shape{E, K, N}, f, dt);
        array x = astype(randn({A, M, K}), dt);
        std::vector<uint32_t> lhs_v(B), rhs_v(B);
        for (int b = 0; b < B; ++b) lhs_v[b] = (b * 5) % A, rhs_v[b] = b < 40 ? 1 : (b % 2 ? 0 : 2);
        array dense = w.dense();
        for (bool sorted : {false, true}) {
          std::vector<uint32_t> rv = rhs_v;
          if (sorted) std::sort(rv.begin(), rv.end());
          array out = gather_qmm(x, w.w_q, w.scales, w.biases, array(lhs_v.begin(), {B}, uint32),
                                 array(rv.begin(), {B}, uint32), transpose, f.group_size, f.bits, f.mode, sorted);
          ASSERT_EQ(out.shape(), Shape({B, M, N}));
          for (int b : {0, 7, 39, 40, 41, 59}) {
            array wb = take(dense, array(static_cast<int>(rv[b])), 0);
            array ref = matmul(astype(take(x, array(static_cast<int>(lhs_v[b])), 0), float64), transpose ? transpose_(wb) : wb);
            expect_near_scaled(take(out, array(b), 0), ref, tol_for(dt));
          }
        }
      }
    }
  }
}

TEST(GatherQmm, MixtureOfExpertsShapesAndBroadcastIndices) {
  // Tokens (T, 1, K) each routed to top-k experts: x indices (T, k) broadcast with experts.
  Format f{"affine", 64, 4};
  const int E = 6, K = 128, N = 32, T = 5, top = 2;
  auto w = make_weight({E, N, K}, f);
  array x = astype(randn({T, 1, 1, K}), bfloat16);
  array rhs = randint({T, top}, 0, E - 1, int32); // inclusive bounds
  array out = gather_qmm(x, w.w_q, w.scales, w.biases, std::nullopt, rhs);
  ASSERT_EQ(out.shape(), Shape({T, top, 1, N}));
  array dense = astype(w.dense(), float64);
  auto rv = to_vector(rhs);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < top; ++j) {
      array ref = matmul(astype(take(reshape(x, {T, 1, K}), array(t), 0), float64),
                         transpose_(take(dense, array(static_cast<int>(rv[t * top + j])), 0)));
      expect_near_scaled(reshape(slice(out, {t, j, 0, 0}, {t + 1, j + 1, 1, N}), {1, N}), ref, 3e-2);
    }
  }
  // Default indices: each x batch against the weight batch at the same position.
  array xb = astype(randn({E, 2, K}), float32);
  array own = gather_qmm(xb, w.w_q, w.scales, w.biases);
  expect_near_scaled(own, matmul(astype(xb, float64), swapaxes(dense, -1, -2)), 2e-4);
}

TEST(GatherQmm, IndexOutOfRangeThrowsAtEvaluation) {
  auto w = make_weight({3, 16, 64}, {"affine", 64, 4});
  array x = randn({2, 1, 64}, float32);
  array bad_rhs = array({0u, 3u}, {2}, uint32);
  EXPECT_THROW(eval(gather_qmm(x, w.w_q, w.scales, w.biases, array({0u, 1u}, {2}, uint32), bad_rhs)), std::out_of_range);
  EXPECT_THROW(eval(gather_qmm(x, w.w_q, w.scales, w.biases, array({0u, 2u}, {2}, uint32), array({0u, 1u}, {2}, uint32))), std::out_of_range);
  EXPECT_THROW(eval(gather_mm(randn({2, 3, 4}, float32), randn({3, 4, 5}, float32), std::nullopt, array({0, 5}, {2}, int32))), std::out_of_range);
}

TEST(GatherMm, AgainstLoopEveryFloatDtype) {
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    SCOPED_TRACE(dtype_name(dt));
    array a = astype(randn({3, 7, 33}), dt), b = astype(randn({4, 33, 9}), dt);
    std::vector<int> lv{2, 0, 1, 1, 2}, rv{3, 3, 0, 2, 1};
    array lhs(lv.begin(), {5}, int32), rhs(rv.begin(), {5}, int32);
    for (bool sorted : {false, true}) {
      array out = gather_mm(a, b, lhs, rhs, sorted);
      ASSERT_EQ(out.shape(), Shape({5, 7, 9}));
      EXPECT_EQ(out.dtype(), dt);
      for (int i = 0; i < 5; ++i) {
        array ref = matmul(astype(take(a, array(lv[i]), 0), float64), astype(take(b, array(rv[i]), 0), float64));
        expect_near_scaled(take(out, array(i), 0), ref, dt == float64 ? 1e-12 : tol_for(dt));
      }
    }
  }
  // Integer products keep matmul's integer kernels through the fallback.
  array ai = randint({2, 2, 3}, -5, 5, int32), bi = randint({2, 3, 2}, -5, 5, int32);
  array oi = gather_mm(ai, bi);
  EXPECT_EQ(oi.dtype(), int32);
  expect_allclose(oi, matmul(ai, bi));
}

TEST(QuantizedMatmul, GradientsAgainstFloat64GraphAndDifferences) {
  Format f{"affine", 32, 4};
  for (bool transpose : {true, false}) {
    SCOPED_TRACE(transpose ? "transposed" : "not transposed");
    const int K = 64, N = 32;
    auto w = make_weight(transpose ? Shape{N, K} : Shape{K, N}, f);
    array x = astype(randn({2, 3, K}), float32);
    array cot = astype(randn({2, 3, N}), float32);
    auto fq = [&](const std::vector<array>& in) {
      return std::vector<array>{quantized_matmul(in[0], w.w_q, in[1], in[2], transpose, f.group_size, f.bits)};
    };
    auto [out, grads] = vjp(fq, {x, w.scales, *w.biases}, {cot});
    // The float64 graph: the dequantized weight differentiates through its scales and biases.
    auto f64 = [&](const std::vector<array>& in) {
      array d = dequantize(w.w_q, in[1], in[2], f.group_size, f.bits, "affine", std::nullopt, float64);
      return std::vector<array>{matmul(in[0], transpose ? swapaxes(d, -1, -2) : d)};
    };
    auto [out64, grads64] = vjp(f64, {astype(x, float64), astype(w.scales, float64), astype(*w.biases, float64)}, {astype(cot, float64)});
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      expect_near_scaled(grads[i], grads64[i], 2e-4);
    }
    // Central differences of <cot, f(x)> in x (the product is linear: exact up to rounding).
    auto loss = [&](const array& xx) {
      return to_vector(sum(multiply(astype(quantized_matmul(xx, w.w_q, w.scales, w.biases, transpose, 32, 4), float64), astype(cot, float64))))[0];
    };
    auto gx = to_vector(grads[0]);
    auto xv = to_vector(x);
    for (size_t k : {size_t{0}, size_t{17}, xv.size() - 1}) {
      auto xp = xv, xm = xv;
      xp[k] += 0.25;
      xm[k] -= 0.25;
      double fd = (loss(array(xp.begin(), x.shape(), float32)) - loss(array(xm.begin(), x.shape(), float32))) / 0.5;
      EXPECT_NEAR(gx[k], fd, 2e-3 * (1 + std::abs(fd)));
    }
    // jvp: the product of the tangent (linear in x) and of the scales' and biases' tangents.
    array tx = astype(randn(x.shape()), float32), ts = astype(randn(w.scales.shape()), float32);
    auto [o1, jv] = jvp(fq, {x, w.scales, *w.biases}, {tx, ts, zeros_like(*w.biases)});
    auto [o2, jv64] = jvp(f64, {astype(x, float64), astype(w.scales, float64), astype(*w.biases, float64)},
                          {astype(tx, float64), astype(ts, float64), zeros(w.biases->shape(), float64)});
    expect_near_scaled(jv[0], jv64[0], 2e-4);
  }
}

TEST(QuantizedMatmul, NoGradientForPackedWeightsOrFpScales) {
  auto w = make_weight({16, 64}, {"affine", 64, 4});
  array x = randn({2, 64}, float32);
  auto f = [&](const std::vector<array>& in) {
    return std::vector<array>{quantized_matmul(x, in[0], w.scales, w.biases)};
  };
  expect_throws_naming<std::invalid_argument>([&] { vjp(f, {w.w_q}, {ones({2, 16})}); }, "quantized_matmul");
  auto m = make_weight({16, 64}, {"mxfp4", 32, 4});
  auto fs = [&](const std::vector<array>& in) {
    return std::vector<array>{quantized_matmul(x, m.w_q, in[0], std::nullopt, true, 32, 4, "mxfp4")};
  };
  expect_throws_naming<std::invalid_argument>([&] { vjp(fs, {m.scales}, {ones({2, 16})}); }, "quantized_matmul");
  // gather_qmm: x's gradient is scatter-added over repeated lhs indices.
  auto wb = make_weight({3, 16, 64}, {"affine", 64, 4});
  array xb = astype(randn({2, 1, 64}), float32);
  array lhs = array({1u, 1u, 0u}, {3}, uint32), rhs = array({0u, 2u, 1u}, {3}, uint32);
  auto g = grad([&](const array& xx) { return sum(gather_qmm(xx, wb.w_q, wb.scales, wb.biases, lhs, rhs)); })(xb);
  array dense = wb.dense();
  array expect1 = add(sum(take(dense, array(0), 0), 0), sum(take(dense, array(2), 0), 0));
  expect_near_scaled(reshape(slice(g, {1, 0, 0}, {2, 1, 64}), {64}), expect1, 2e-4);
  expect_throws_naming<std::invalid_argument>(
      [&] { grad([&](const array& ww) { return sum(gather_qmm(xb, ww, wb.scales, wb.biases, lhs, rhs)); })(wb.w_q); },
      "gather_qmm");
}

TEST(QuantizedMatmul, VmapAgainstLoop) {
  auto w = make_weight({24, 64}, {"affine", 64, 8});
  array xs = astype(randn({3, 4, 64}), float32);
  // Batched along axis 1: each slice xs[:, i] is one call.
  auto f = [&](const array& x) { return quantized_matmul(x, w.w_q, w.scales, w.biases, true, 64, 8); };
  array out = vmap(f, 1)(xs);
  ASSERT_EQ(out.shape(), Shape({4, 3, 24}));
  for (int i = 0; i < 4; ++i) {
    expect_near_scaled(take(out, array(i), 0), f(take(xs, array(i), 1)), 1e-5);
  }
  // Batched scales (the fallback's vmap).
  array scales = stack({w.scales, multiply(w.scales, array(2.0f))});
  auto fs = [&](const array& sc) { return quantized_matmul(take(xs, array(0), 0), w.w_q, sc, w.biases, true, 64, 8); };
  array outs = vmap(fs)(scales);
  for (int i = 0; i < 2; ++i) expect_near_scaled(take(outs, array(i), 0), fs(take(scales, array(i), 0)), 1e-4);
}

TEST(Qqmm, EveryFpModeAgainstRoundedOperands) {
  for (const auto& f : {Format{"mxfp4", 32, 4}, Format{"mxfp8", 32, 8}, Format{"nvfp4", 16, 4}}) {
    for (Dtype dt : {float32, bfloat16}) {
      SCOPED_TRACE(f.mode + " " + std::string(dtype_name(dt)));
      array x = astype(randn({3, 5, 96}), dt), w = astype(randn({40, 96}), dt);
      auto fq = [&](const array& a) {
        auto q = quantize(a, f.group_size, f.bits, f.mode);
        return dequantize(q[0], q[1], std::nullopt, f.group_size, f.bits, f.mode, std::nullopt, float64);
      };
      array ref = matmul(fq(reshape(x, {15, 96})), transpose_(fq(w)));
      array out = qqmm(x, w, std::nullopt, f.group_size, f.bits, f.mode);
      ASSERT_EQ(out.shape(), Shape({3, 5, 40}));
      EXPECT_EQ(out.dtype(), dt);
      expect_near_scaled(reshape(out, {15, 40}), ref, qq_tol(dt));
      // The weight given packed gives the same products.
      auto q = quantize(w, f.group_size, f.bits, f.mode);
      expect_near_scaled(qqmm(x, q[0], q[1], f.group_size, f.bits, f.mode), out, 1e-6);
      // Straight-through gradient: g @ fq(w).
      array cot = astype(randn({3, 5, 40}), dt);
      auto [o, g] = vjp([&](const std::vector<array>& in) { return std::vector<array>{qqmm(in[0], q[0], q[1], f.group_size, f.bits, f.mode)}; }, {x}, {cot});
      expect_near_scaled(reshape(g[0], {15, 96}), matmul(astype(reshape(cot, {15, 40}), float64), fq(w)), dt == float32 ? 1e-5 : 1e-2);
    }
  }
  // nvfp4 with global scales (the graph).
  array x = randn({4, 64}, float32), w = randn({8, 64}, float32);
  array gx = max(abs(x)), gw = max(abs(w));
  array out = qqmm(x, w, std::nullopt, std::nullopt, std::nullopt, "nvfp4", gx, gw);
  auto qx = quantize(x, 16, 4, "nvfp4", gx), qw = quantize(w, 16, 4, "nvfp4", gw);
  array ref = matmul(dequantize(qx[0], qx[1], std::nullopt, 16, 4, "nvfp4", gx, float64),
                     transpose_(dequantize(qw[0], qw[1], std::nullopt, 16, 4, "nvfp4", gw, float64)));
  expect_near_scaled(out, ref, 1e-5);
}

TEST(Qqmm, GatherAgainstLoop) {
  array x = randn({3, 2, 64}, float32), w = randn({4, 16, 64}, float32);
  array lhs = array({2u, 0u, 1u, 2u}, {4}, uint32), rhs = array({3u, 3u, 0u, 1u}, {4}, uint32);
  array out = gather_qqmm(x, w, std::nullopt, lhs, rhs, std::nullopt, std::nullopt, "mxfp8");
  ASSERT_EQ(out.shape(), Shape({4, 2, 16}));
  std::vector<int> lv{2, 0, 1, 2}, rv{3, 3, 0, 1};
  for (int b = 0; b < 4; ++b) {
    array ref = qqmm(take(x, array(lv[b]), 0), take(w, array(rv[b]), 0), std::nullopt, std::nullopt, std::nullopt, "mxfp8");
    expect_near_scaled(take(out, array(b), 0), ref, qq_tol(float32));
  }
}

TEST(QuantizedMatmul, BadInputNamesTheOp) {
  auto w = make_weight({16, 64}, {"affine", 64, 4});
  array x = randn({2, 64}, float32);
  auto m = make_weight({16, 64}, {"mxfp4", 32, 4});
  auto bad = [&](auto&& f, const char* op) { expect_throws_naming<std::invalid_argument>(f, op); };
  bad([&] { quantized_matmul(randn({2, 32}, float32), w.w_q, w.scales, w.biases); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, astype(w.w_q, int32), w.scales, w.biases); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, w.w_q, w.scales, std::nullopt); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, w.w_q, reshape(w.scales, {16, 1, 1}), w.biases); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, w.w_q, w.scales, w.biases, true, 64, 7); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, w.w_q, w.scales, w.biases, true, 48); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, w.w_q, w.scales, w.biases, true, 32); }, "quantized_matmul"); // scales per 64
  bad([&] { quantized_matmul(x, w.w_q, w.scales, w.biases, false); }, "quantized_matmul");   // K = 16 then
  bad([&] { quantized_matmul(x, w.w_q, w.scales, w.biases, true, 64, 4, "mxfp4"); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, w.w_q, w.scales, w.biases, true, 64, 4, "int4"); }, "quantized_matmul");
  bad([&] { quantized_matmul(randint({2, 64}, 0, 3, int32), m.w_q, m.scales, std::nullopt, true, 32, 4, "mxfp4"); }, "quantized_matmul");
  bad([&] { quantized_matmul(x, m.w_q, astype(m.scales, float32), std::nullopt, true, 32, 4, "mxfp4"); }, "quantized_matmul");
  bad([&] { gather_qmm(randn({64}, float32), w.w_q, w.scales, w.biases); }, "gather_qmm"); // x must be (..., M, K)
  bad([&] { gather_qmm(reshape(x, {2, 1, 64}), w.w_q, w.scales, w.biases, array({0.5f}), std::nullopt); }, "gather_qmm");
  bad([&] { gather_qmm(reshape(x, {2, 1, 64}), w.w_q, w.scales, w.biases, array({0, 1, 0}, {3}, int32), array({0, 0}, {2}, int32)); }, "gather_qmm");
  bad([&] { gather_mm(randn({2, 3, 4}), randn({2, 5, 6})); }, "gather_mm");
  bad([&] { qqmm(x, randn({16, 64}, float32), std::nullopt, 64, 4, "affine"); }, "qqmm");
  bad([&] { qqmm(x, m.w_q, std::nullopt, 32, 4, "mxfp4"); }, "qqmm");
  bad([&] { qqmm(x, randn({16, 64}, float32), m.scales, 32, 4, "mxfp4"); }, "qqmm");
  bad([&] { qqmm(x, randn({16, 64}, float32), std::nullopt, std::nullopt, std::nullopt, "nvfp4", array(1.0f)); }, "qqmm");
  bad([&] { qqmm(x, randn({16, 48}, float32), std::nullopt, 32, 8, "mxfp8"); }, "qqmm");
}

TEST(Quantize, GpuPackingEqualsCpuBitForBit) {
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU";
  for (const auto& f : all_formats()) {
    SCOPED_TRACE(f.mode + " bits " + std::to_string(f.bits));
    for (Dtype dt : {float32, bfloat16}) {
      array w = astype(randn({7, 256}), dt);
      eval(w);
      auto c = quantize(w, f.group_size, f.bits, f.mode, std::nullopt, Device::cpu);
      auto g = quantize(w, f.group_size, f.bits, f.mode, std::nullopt, Device::gpu);
      for (size_t i = 0; i < c.size(); ++i) {
        // Compare the bytes: the codes, and the scales/biases as stored.
        array cb = view(c[i], c[i].dtype() == uint32 ? uint32 : c[i].dtype() == uint8 ? uint8 : uint16);
        array gb = view(g[i], g[i].dtype() == uint32 ? uint32 : g[i].dtype() == uint8 ? uint8 : uint16);
        if (c[i].dtype() == float32) {
          cb = view(c[i], uint32);
          gb = view(g[i], uint32);
        }
        EXPECT_TRUE(array_equal(cb, gb, false, Device::cpu).item<bool>()) << "output " << i;
      }
    }
  }
}

TEST(QuantizedMatmul, Nvfp4RowsOfPartialWords) {
  // 48 values of 4 bits are 6 words: not a whole number of 32-value blocks.
  array w = randn({40, 48}, float32);
  auto q = quantize(w, 16, 4, "nvfp4");
  ASSERT_EQ(q[0].shape(), Shape({40, 6}));
  array back = dequantize(q[0], q[1], std::nullopt, 16, 4, "nvfp4", std::nullopt, float32);
  ASSERT_EQ(back.shape(), Shape({40, 48}));
  // Each value within half an E2M1 step of 2 times its group's scale (steps are at most 2).
  auto wv = to_vector(w), bv = to_vector(back);
  auto sv = to_vector(from_fp8(q[1], float32));
  for (size_t i = 0; i < wv.size(); ++i) ASSERT_LE(std::abs(wv[i] - bv[i]), sv[i / 16] * 1.0 + 1e-6) << i;
  array x = randn({3, 48}, float32);
  QWeight qw{q[0], q[1], std::nullopt, {"nvfp4", 16, 4}};
  expect_near_scaled(quantized_matmul(x, q[0], q[1], std::nullopt, true, 16, 4, "nvfp4"), reference(x, qw, true), 2e-4);
}

TEST(Quantize, NanGroupsStayNanInEveryMode) {
  // A NaN weight must not vanish into a healthy-looking group: E8M0's NaN code for the mx
  // modes, NaN values for affine; nvfp4 keeps MLX's E4M3 rule (NaN codes to 448).
  array w = where(equal(arange(64), array(3)), array(NAN), randn({1, 64}, float32));
  for (const auto& f : {Format{"mxfp4", 32, 4}, Format{"mxfp8", 32, 8}, Format{"affine", 32, 4}}) {
    SCOPED_TRACE(f.mode);
    auto q = quantize(w, f.group_size, f.bits, f.mode);
    std::optional<array> b;
    if (q.size() > 2) b = q[2];
    auto v = to_vector(dequantize(q[0], q[1], b, f.group_size, f.bits, f.mode, std::nullopt, float32));
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[31])) << "the NaN's group";
    EXPECT_TRUE(std::isfinite(v[32]) && std::isfinite(v[63])) << "the other group";
  }
  // qqmm rounds x the same way: a NaN in x makes its row NaN.
  array x = where(equal(reshape(arange(128), {2, 64}), array(5)), array(NAN), randn({2, 64}, float32)); // row 0 only
  auto out = to_vector(qqmm(x, randn({4, 64}, float32), std::nullopt, std::nullopt, std::nullopt, "mxfp8"));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isfinite(out[4]));
}

TEST(Quantize, AffineDequantizeDoesNotOverflowInHalfScales) {
  // scale * q overflows float16 (-468.75 * 255) though scale * q + bias does not.
  array w = astype(where(equal(arange(64), array(0)), array(-60000.0f), full({1, 64}, 60000.0f)), float16);
  auto q = quantize(w, 64, 8);
  auto d = to_vector(dequantize(q[0], q[1], q[2], 64, 8, "affine", std::nullopt, float32));
  EXPECT_NEAR(d[0], -60000.0, 600.0);
  EXPECT_NEAR(d[1], 60000.0, 600.0);
  expect_throws_naming<std::invalid_argument>([&] { dequantize(q[0], astype(q[1], int32), q[2]); }, "dequantize");
}

TEST(GatherQmm, SixtyFourBitIndicesPastUint32AreOutOfRange) {
  array a = randn({2, 3, 4}, float32), b = randn({3, 4, 5}, float32);
  std::vector<int64_t> big{(int64_t{1} << 32) + 1};
  array idx(big.begin(), {1}, int64);
  EXPECT_THROW(eval(gather_mm(a, b, array({0}, {1}, int32), idx)), std::out_of_range);
  // The CPU kernel's message says what such an index became (it printed 4294967289 for -7
  // alone).
  for (const array& bad : {idx, array({-7}, {1}, int32)}) {
    try {
      eval(gather_mm(a, b, array({0}, {1}, int32), bad, false, Device::cpu));
      ADD_FAILURE() << "no exception";
    } catch (const std::out_of_range& e) {
      EXPECT_NE(std::string(e.what()).find("read as uint32: a negative i of 32 bits or fewer wraps"), std::string::npos) << e.what();
    }
  }
  auto w = make_weight({4, 16, 64}, {"affine", 64, 4});
  EXPECT_THROW(eval(gather_qmm(randn({3, 2, 64}, float32), w.w_q, w.scales, w.biases, idx, array({0}, {1}, int32))), std::out_of_range);
  EXPECT_THROW(eval(gather_qmm(randn({3, 2, 64}, float32), w.w_q, w.scales, w.biases, array({0}, {1}, int32), idx)), std::out_of_range);
}

// Out-of-range indices of the products whose meaning is a graph over take (gather_qqmm, and
// gather_mm of integers, which runs its fallback) throw std::out_of_range naming the product.
TEST(GatherQmm, IndexErrorsOfTheGraphsNameTheProduct) {
  array x = randn({2, 1, 64}, float32), w = randn({3, 8, 64}, float32);
  array good = array({0, 1}, {2}, int32), bad = array({0, 3}, {2}, int32);
  expect_throws_naming<std::out_of_range>(
      [&] { eval(gather_qqmm(x, w, std::nullopt, good, bad, std::nullopt, std::nullopt, "mxfp8")); }, "gather_qqmm");
  expect_throws_naming<std::out_of_range>(
      [&] { eval(gather_qqmm(x, w, std::nullopt, bad, good, std::nullopt, std::nullopt, "mxfp8")); }, "gather_qqmm");
  array a = astype(randint({2, 3, 4}, -5, 5), int32), b = astype(randint({3, 4, 5}, -5, 5), int32);
  expect_throws_naming<std::out_of_range>([&] { eval(gather_mm(a, b, good, bad)); }, "gather_mm");
}

TEST(Qqmm, GlobalScalesOnlyForNvfp4AndForwardMode) {
  array x = randn({3, 64}, float32), w = randn({8, 64}, float32);
  expect_throws_naming<std::invalid_argument>(
      [&] { qqmm(x, w, std::nullopt, 32, 4, "mxfp4", array(1.0f), array(1.0f)); }, "qqmm");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 32, 8, "mxfp8", array(1.0f)); }, "quantize");
  // jvp: the straight-through tangent t @ fq(w).T.
  array t = randn({3, 64}, float32);
  auto [o, tan] = jvp([&](const std::vector<array>& in) { return std::vector<array>{qqmm(in[0], w, std::nullopt, 32, 8, "mxfp8")}; }, {x}, {t});
  auto q = quantize(w, 32, 8, "mxfp8");
  array fw = dequantize(q[0], q[1], std::nullopt, 32, 8, "mxfp8", std::nullopt, float64);
  expect_near_scaled(tan[0], matmul(astype(t, float64), transpose_(fw)), qq_tol(float32));
  auto [o2, tan2] = jvp([&](const std::vector<array>& in) { return std::vector<array>{gather_qqmm(reshape(in[0], {3, 1, 64}), w, std::nullopt, std::nullopt, array({0}, {1}, int32), 32, 8, "mxfp8")}; }, {x}, {t});
  expect_near_scaled(reshape(tan2[0], {3, 8}), matmul(astype(t, float64), transpose_(fw)), 1e-5);
}

TEST(Quantize, Nvfp4ZeroGlobalScale) {
  // An all-zero tensor's amax is 0: the round trip gives zeros, not NaN.
  array z = zeros({2, 32}, float32);
  auto q = quantize(z, 16, 4, "nvfp4", array(0.0f));
  auto back = to_vector(dequantize(q[0], q[1], std::nullopt, 16, 4, "nvfp4", array(0.0f), float32));
  for (double v : back) EXPECT_EQ(v, 0.0);
  // A zero global scale on other data encodes as no global scale.
  array w = randn({2, 32}, float32);
  auto qg = quantize(w, 16, 4, "nvfp4", array(0.0f));
  auto qn = quantize(w, 16, 4, "nvfp4");
  expect_allclose(dequantize(qg[0], qg[1], std::nullopt, 16, 4, "nvfp4", array(0.0f), float32),
                  dequantize(qn[0], qn[1], std::nullopt, 16, 4, "nvfp4", std::nullopt, float32), 0, 0);
}
