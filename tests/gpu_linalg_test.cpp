// nuvec: the GPU matrix products, convolutions and FFTs (Matmul, AddMM, Convolution, FFT)
// against the CPU kernels on fresh random inputs: the same graph is built once with
// Device::gpu and once with Device::cpu and the results compared on the host, over dtypes,
// shapes (including odd, empty and multi-block ones) and layouts (transposed, sliced with
// steps and offsets, reversed, broadcast and batched).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "nuvec/nuvec.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define REQUIRE_GPU() \
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU"

using fft::FFTNorm;
using Build = std::function<array(StreamOrDevice)>;

/// Element-wise tolerance |gpu - cpu| <= atol + rtol |cpu|.
struct Tol {
  double rtol, atol;
};

/// Tolerance of a product with k-term sums of unit-variance terms in dtype: the CPU and the
/// GPU sum in different orders (float32 for the half types), then round once to dtype.
Tol product_tol(Dtype t, int64_t k) {
  double kk = static_cast<double>(std::max<int64_t>(k, 1));
  if (t == float16) return {2e-3, 2e-3};
  if (t == bfloat16) return {1.6e-2, 1.6e-2};
  if (t == float64) return {1e-11, 1e-12 * kk};
  // float32 and complex64 (true float32 products: TF32 is off by default).
  return {1e-4, 2e-6 * kk + 1e-5};
}

/// A shape as "(2, 3)" (Shape's operator<< is not found by ADL from gtest's messages).
std::string shape_str(const Shape& s) {
  std::ostringstream os;
  nuvec::operator<<(os, s);
  return os.str();
}

/// Row-major elements of a as doubles; complex arrays give their real parts then their
/// imaginary parts.
std::vector<double> host_values(const array& a) {
  if (a.dtype() != complex64) return to_vector(a);
  auto re = to_vector(real(a, Device::cpu));
  auto im = to_vector(imag(a, Device::cpu));
  re.insert(re.end(), im.begin(), im.end());
  return re;
}

/// Asserts gpu and cpu have the same shape and dtype and close elements; reports the number
/// of mismatches and the first few (NaNs must match NaNs, infinities be equal).
void expect_match(const array& gpu, const array& cpu, Tol tol) {
  ASSERT_EQ(gpu.shape(), cpu.shape());
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  auto g = host_values(gpu);
  auto c = host_values(cpu);
  ASSERT_EQ(g.size(), c.size());
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(c[i])) {
      ok = std::isnan(g[i]);
    } else if (std::isinf(c[i])) {
      ok = g[i] == c[i];
    } else {
      ok = std::abs(g[i] - c[i]) <= tol.atol + tol.rtol * std::abs(c[i]);
    }
    if (!ok && bad++ < 5) first << " [" << i << "] gpu " << g[i] << " cpu " << c[i] << ";";
  }
  EXPECT_EQ(bad, 0u) << "of " << g.size() << " elements (" << gpu.dtype() << ", shape "
                     << shape_str(gpu.shape()) << "):" << first.str();
}

/// Evaluates build on the GPU and on the CPU and compares the results.
void compare(const Build& build, Tol tol) {
  array g = build(Device::gpu);
  array c = build(Device::cpu);
  eval(g);
  eval(c);
  expect_match(g, c, tol);
}

/// Evaluated normal samples of dtype; complex64 gets independent real and imaginary parts.
array rand_of(const Shape& shape, Dtype dtype) {
  array x = dtype == complex64
      ? add(astype(randn(shape), complex64, Device::cpu),
            multiply(astype(randn(shape), complex64, Device::cpu), array(complex64_t(0, 1)),
                     Device::cpu),
            Device::cpu)
      : randn(shape, dtype);
  eval(x);
  return x;
}

const std::vector<Dtype> kFloatTypes = {float32, float16, bfloat16, float64, complex64};

// ---------------------------------------------------------------------------------------
// Matmul

// Plain 2-d products of several sizes, from 1x1x1 to an output over a million elements.
TEST(GpuMatmul, ShapesAndDtypes) {
  REQUIRE_GPU();
  const std::vector<std::array<int, 3>> mkn = {
      {1, 1, 1}, {3, 5, 7}, {64, 128, 96}, {257, 129, 65}, {1, 300, 17}, {40, 8, 1},
      {1025, 33, 1023}};
  for (Dtype t : kFloatTypes) {
    for (auto [m, k, n] : mkn) {
      SCOPED_TRACE(::testing::Message() << t << " m=" << m << " k=" << k << " n=" << n);
      array a = rand_of({m, k}, t), b = rand_of({k, n}, t);
      compare([&](StreamOrDevice s) { return matmul(a, b, s); }, product_tol(t, k));
    }
  }
}

// Square products at the sizes the performance goal is measured at (4096^3 in every
// floating type except float64, whose CPU reference would be slow).
TEST(GpuMatmul, Large) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, bfloat16}) {
    SCOPED_TRACE(::testing::Message() << t);
    array a = rand_of({2048, 1024}, t), b = rand_of({1024, 2048}, t);
    compare([&](StreamOrDevice s) { return matmul(a, b, s); }, product_tol(t, 1024));
  }
}

// Decode's products: up to 8 rows times a Linear layer's transposed weight run the GEMV kernel
// (gemv.cu) — every row count 1..8 (one kernel per count), K from one 16-byte vector to
// several thousand, N from 1 to past a block's columns, weights with rows further apart than
// K (a row slice), rows folded from batch axes; beside them the shapes that stay on cuBLASLt
// (9 rows, K not a multiple of the vector, an unaligned x).
TEST(GpuMatmul, FewRowsTimesTransposedWeight) {
  REQUIRE_GPU();
  const std::vector<std::array<int, 2>> kn = {{8, 1}, {64, 7}, {1000, 300}, {4104, 1025}, {2048, 3}};
  for (Dtype t : {float32, float16, bfloat16}) {
    for (auto [k, n] : kn) {
      array w = rand_of({n, k}, t), wide = rand_of({n, k + 8}, t);
      for (int m : {1, 2, 3, 4, 5, 6, 7, 8, 9}) {
        SCOPED_TRACE(::testing::Message() << t << " m=" << m << " k=" << k << " n=" << n);
        array x = rand_of({m, k}, t);
        Tol tol = product_tol(t, k);
        compare([&](StreamOrDevice s) { return matmul(x, transpose(w, s), s); }, tol);
        compare([&](StreamOrDevice s) { return matmul(x, transpose(slice(wide, {0, 0}, {n, k}, s), s), s); }, tol);
      }
      array xb = rand_of({2, 4, k}, t), x1 = rand_of({3, 1, k}, t), xo = rand_of({2, k + 1}, t);
      Tol tol = product_tol(t, k);
      compare([&](StreamOrDevice s) { return matmul(xb, transpose(w, s), s); }, tol);           // 8 rows
      compare([&](StreamOrDevice s) { return matmul(x1, transpose(w, s), s); }, tol);           // 3 rows
      compare([&](StreamOrDevice s) { return matmul(slice(xo, {0, 1}, {2, k + 1}, s), transpose(w, s), s); }, tol);
    }
  }
  // K not a multiple of the vector: cuBLASLt.
  array x = rand_of({2, 37}, bfloat16), w = rand_of({19, 37}, bfloat16);
  compare([&](StreamOrDevice s) { return matmul(x, transpose(w, s), s); }, product_tol(bfloat16, 37));
}

// Row- and column-major operands in every combination (no copies on the GPU).
TEST(GpuMatmul, TransposedOperands) {
  REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    for (auto [m, k, n] : std::vector<std::array<int, 3>>{{67, 45, 39}, {256, 512, 384}}) {
      SCOPED_TRACE(::testing::Message() << t << " m=" << m << " k=" << k << " n=" << n);
      array a = rand_of({m, k}, t), at = rand_of({k, m}, t);
      array b = rand_of({k, n}, t), bt = rand_of({n, k}, t);
      Tol tol = product_tol(t, k);
      compare([&](StreamOrDevice s) { return matmul(transpose(at, s), b, s); }, tol);
      compare([&](StreamOrDevice s) { return matmul(a, transpose(bt, s), s); }, tol);
      compare([&](StreamOrDevice s) { return matmul(transpose(at, s), transpose(bt, s), s); }, tol);
    }
  }
}

// Views: row steps (leading dimension above the width, odd element offsets that break 16-byte
// alignment), column steps (copied first), reversed rows (negative strides, copied first).
TEST(GpuMatmul, SlicedOperands) {
  REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(::testing::Message() << t);
    const int m = 37, k = 29, n = 41;
    array big_a = rand_of({2 * m + 1, k + 3}, t), big_b = rand_of({k + 1, 2 * n + 2}, t);
    array wide_a = rand_of({m, 2 * k}, t), wide_b = rand_of({k, 2 * n}, t);
    Tol tol = product_tol(t, k);
    compare(
        [&](StreamOrDevice s) {
          array a = slice(big_a, {1, 1}, {2 * m + 1, k + 1}, {2, 1}, s); // ld = k + 3, offset
          array b = slice(big_b, {1, 0}, {k + 1, n}, s);
          return matmul(a, b, s);
        },
        tol);
    compare(
        [&](StreamOrDevice s) {
          array a = slice(wide_a, {0, 0}, {m, 2 * k}, {1, 2}, s); // column step 2
          array b = slice(wide_b, {0, 1}, {k, 2 * n}, {1, 2}, s);
          return matmul(a, b, s);
        },
        tol);
    compare(
        [&](StreamOrDevice s) {
          array a = slice(big_a, {2 * m, 0}, {-2 * m - 2, k}, {-1, 1}, s); // reversed rows
          array b = slice(big_b, {0, 0}, {k, n}, s);
          return matmul(a, b, s);
        },
        tol);
  }
}

// Batches: dense, broadcast on either side (stride-0 batches), several unmergeable batch
// axes, more batch runs than the GPU issues separately (copied to dense first), transposed
// batch axes, a 2-d right operand (folded into rows), vectors.
TEST(GpuMatmul, Batched) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, bfloat16, complex64}) {
    SCOPED_TRACE(::testing::Message() << t);
    const int m = 19, k = 24, n = 13;
    Tol tol = product_tol(t, k);
    array a3 = rand_of({5, m, k}, t), b3 = rand_of({5, k, n}, t);
    compare([&](StreamOrDevice s) { return matmul(a3, b3, s); }, tol);
    array a1 = rand_of({1, m, k}, t), b2 = rand_of({k, n}, t);
    compare([&](StreamOrDevice s) { return matmul(a1, b3, s); }, tol);
    compare([&](StreamOrDevice s) { return matmul(a3, b2, s); }, tol);
    array a4 = rand_of({4, 1, m, k}, t), b4 = rand_of({1, 3, k, n}, t);
    compare([&](StreamOrDevice s) { return matmul(a4, b4, s); }, tol);
    array many_a = rand_of({100, 1, 4, k}, t), many_b = rand_of({1, 3, k, 5}, t);
    compare([&](StreamOrDevice s) { return matmul(many_a, many_b, s); }, tol);
    array perm = rand_of({3, 4, m, k}, t), pbt = rand_of({4, 3, n, k}, t);
    compare(
        [&](StreamOrDevice s) {
          return matmul(transpose(perm, {1, 0, 2, 3}, s), swapaxes(pbt, 2, 3, s), s);
        },
        tol);
    array bt = rand_of({5, n, k}, t);
    compare([&](StreamOrDevice s) { return matmul(a3, swapaxes(bt, 1, 2, s), s); }, tol);
    array small_a = rand_of({1000, 4, 4}, t), small_b = rand_of({1000, 4, 4}, t);
    compare([&](StreamOrDevice s) { return matmul(small_a, small_b, s); }, product_tol(t, 4));
    array v = rand_of({k}, t), w = rand_of({k}, t);
    compare([&](StreamOrDevice s) { return matmul(a3, v, s); }, tol);
    compare([&](StreamOrDevice s) { return matmul(w, b3, s); }, tol);
    compare([&](StreamOrDevice s) { return matmul(v, w, s); }, tol);
  }
}

// Integer and bool products: exact, with wrap-around (int32 sums overflow here).
TEST(GpuMatmul, Integers) {
  REQUIRE_GPU();
  struct Case {
    Dtype t;
    int64_t lo, hi;
  };
  for (auto c : {Case{int32, -100000, 100000}, Case{int8, -128, 127}, Case{uint8, 0, 255},
                 Case{int16, -30000, 30000}, Case{uint16, 0, 65535}, Case{uint32, 0, 4000000000},
                 Case{int64, -(int64_t{1} << 40), int64_t{1} << 40}, Case{uint64, 0, 1 << 30},
                 Case{bool_, 0, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.t);
    array a = randint({33, 70}, c.lo, c.hi, c.t), b = randint({70, 21}, c.lo, c.hi, c.t);
    array at = randint({70, 33}, c.lo, c.hi, c.t);
    array a3 = randint({3, 17, 5}, c.lo, c.hi, c.t), b3 = randint({1, 5, 18}, c.lo, c.hi, c.t);
    eval({a, b, at, a3, b3});
    compare([&](StreamOrDevice s) { return matmul(a, b, s); }, {0, 0});
    compare([&](StreamOrDevice s) { return matmul(transpose(at, s), b, s); }, {0, 0});
    compare([&](StreamOrDevice s) { return matmul(a3, b3, s); }, {0, 0});
    compare(
        [&](StreamOrDevice s) { return matmul(slice(a, {32, 0}, {-34, 70}, {-2, 1}, s), b, s); },
        {0, 0});
  }
}

// Empty operands: k = 0 gives zeros, m = 0 or a zero batch gives empty results.
TEST(GpuMatmul, Empty) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, int32}) {
    SCOPED_TRACE(::testing::Message() << t);
    array a = zeros({3, 0}, t), b = zeros({0, 4}, t);
    compare([&](StreamOrDevice s) { return matmul(a, b, s); }, {0, 0});
    array e = zeros({0, 5}, t), f = ones({5, 2}, t);
    compare([&](StreamOrDevice s) { return matmul(e, f, s); }, {0, 0});
    array g = zeros({0, 3, 5}, t), h = ones({0, 5, 2}, t);
    compare([&](StreamOrDevice s) { return matmul(g, h, s); }, {0, 0});
  }
}

// Products on two GPU streams at once (per-stream workspaces, shared plan cache).
TEST(GpuMatmul, TwoStreams) {
  REQUIRE_GPU();
  Stream s1 = new_stream(Device::gpu), s2 = new_stream(Device::gpu);
  std::vector<array> gpu, cpu;
  for (int i = 0; i < 8; ++i) {
    int m = 64 + 16 * i;
    array a = rand_of({m, 96}, float32), b = rand_of({96, 80}, float32);
    gpu.push_back(matmul(a, b, i % 2 ? s1 : s2));
    cpu.push_back(matmul(a, b, Device::cpu));
  }
  eval(gpu);
  eval(cpu);
  for (size_t i = 0; i < gpu.size(); ++i) expect_match(gpu[i], cpu[i], product_tol(float32, 96));
}

// ---------------------------------------------------------------------------------------
// AddMM

TEST(GpuAddmm, AlphaBetaAndBroadcastC) {
  REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(::testing::Message() << t);
    const int m = 45, k = 70, n = 33;
    array a = rand_of({m, k}, t), b = rand_of({k, n}, t);
    array c = rand_of({m, n}, t), row = rand_of({n}, t), one = rand_of({1, 1}, t);
    array ct = rand_of({n, m}, t), at = rand_of({k, m}, t);
    Tol tol = product_tol(t, k + 1);
    for (auto [alpha, beta] : std::vector<std::pair<float, float>>{{1, 1}, {0.5f, 2}, {-1.5f, 0.25f}}) {
      SCOPED_TRACE(::testing::Message() << "alpha " << alpha << " beta " << beta);
      compare([&](StreamOrDevice s) { return addmm(c, a, b, alpha, beta, s); }, tol);
      compare([&](StreamOrDevice s) { return addmm(row, a, b, alpha, beta, s); }, tol);
      compare([&](StreamOrDevice s) { return addmm(one, a, b, alpha, beta, s); }, tol);
      compare([&](StreamOrDevice s) { return addmm(transpose(ct, s), a, b, alpha, beta, s); }, tol);
      compare(
          [&](StreamOrDevice s) { return addmm(c, transpose(at, s), b, alpha, beta, s); },
          tol);
    }
  }
}

// beta = 0 never reads c (NaNs in it vanish, as in BLAS); k = 0 gives beta * c.
TEST(GpuAddmm, BetaZeroAndEmptyK) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, bfloat16, float64, complex64}) {
    SCOPED_TRACE(::testing::Message() << t);
    array a = rand_of({6, 9}, t), b = rand_of({9, 7}, t);
    array nan_c = astype(full({6, 7}, NAN, float32), t);
    eval(nan_c);
    compare([&](StreamOrDevice s) { return addmm(nan_c, a, b, 2.0f, 0.0f, s); }, product_tol(t, 9));
    array e = zeros({6, 0}, t), f = zeros({0, 7}, t), c = rand_of({6, 7}, t), c1 = rand_of({7}, t);
    compare([&](StreamOrDevice s) { return addmm(c, e, f, 3.0f, 0.5f, s); }, product_tol(t, 1));
    compare([&](StreamOrDevice s) { return addmm(c1, e, f, 3.0f, -2.0f, s); },
            product_tol(t, 1));
  }
}

TEST(GpuAddmm, Batched) {
  REQUIRE_GPU();
  for (Dtype t : {float32, bfloat16}) {
    SCOPED_TRACE(::testing::Message() << t);
    array a = rand_of({4, 3, 20, 16}, t), b = rand_of({1, 3, 16, 12}, t);
    array c = rand_of({4, 3, 20, 12}, t), cb = rand_of({3, 1, 12}, t);
    compare([&](StreamOrDevice s) { return addmm(c, a, b, 0.75f, 1.25f, s); }, product_tol(t, 17));
    compare([&](StreamOrDevice s) { return addmm(cb, a, b, 1.0f, 1.0f, s); }, product_tol(t, 17));
  }
}

// ---------------------------------------------------------------------------------------
// Convolution

/// Tolerance of a convolution summing `taps` products per output.
Tol conv_tol(Dtype t, int64_t taps) {
  return product_tol(t, taps);
}

TEST(GpuConv, Conv1d) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, bfloat16, float64}) {
    SCOPED_TRACE(::testing::Message() << t);
    array x = rand_of({3, 50, 8}, t);
    array w = rand_of({12, 5, 8}, t), wg = rand_of({12, 5, 2}, t), w1 = rand_of({6, 1, 8}, t);
    array wd = rand_of({8, 1, 2}, t), wtr = rand_of({4, 3, 8}, t);
    Tol tol = conv_tol(t, 40);
    compare([&](StreamOrDevice s) { return conv1d(x, w, 1, 0, 1, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv1d(x, w, 2, 3, 1, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv1d(x, w, 3, 2, 2, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv1d(x, wg, 1, 1, 1, 4, s); }, tol);
    compare([&](StreamOrDevice s) { return conv1d(x, w1, 1, 0, 1, 1, s); }, tol); // 1x1: in place
    compare([&](StreamOrDevice s) { return conv1d(x, wd, 1, 0, 1, 4, s); }, tol);
    // Transposed and stepped input, transposed weight.
    array xt = rand_of({3, 8, 50}, t), wt = rand_of({12, 8, 5}, t);
    compare(
        [&](StreamOrDevice s) {
          return conv1d(swapaxes(xt, 1, 2, s), swapaxes(wt, 1, 2, s), 1, 2, 1, 1, s);
        },
        tol);
    array xs = rand_of({3, 100, 8}, t);
    compare(
        [&](StreamOrDevice s) { return conv1d(slice(xs, {0, 1, 0}, {3, 100, 8}, {1, 2, 1}, s), w, 1, 1, 1, 1, s); },
        tol);
    compare(
        [&](StreamOrDevice s) { return conv_transpose1d(x, wtr, 2, 1, 1, 1, 1, s); },
        conv_tol(t, 24));
  }
}

TEST(GpuConv, Conv2d) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, bfloat16, float64}) {
    SCOPED_TRACE(::testing::Message() << t);
    array x = rand_of({2, 17, 23, 6}, t);
    array w = rand_of({10, 3, 3, 6}, t), wg = rand_of({9, 3, 2, 2}, t);
    array wd = rand_of({6, 3, 3, 1}, t), wtr = rand_of({5, 3, 2, 6}, t);
    Tol tol = conv_tol(t, 54);
    compare([&](StreamOrDevice s) { return conv2d(x, w, {1, 1}, {0, 0}, {1, 1}, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv2d(x, w, {2, 3}, {1, 2}, {1, 1}, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv2d(x, w, {1, 2}, {2, 0}, {2, 3}, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv2d(x, wg, {1, 1}, {1, 1}, {1, 1}, 3, s); }, tol);
    compare([&](StreamOrDevice s) { return conv2d(x, wd, {1, 1}, {1, 1}, {1, 1}, 6, s); },
            tol); // depthwise
    compare(
        [&](StreamOrDevice s) { return conv_transpose2d(x, wtr, {2, 2}, {1, 0}, {1, 1}, {1, 0}, 1, s); },
        tol);
    // Asymmetric and negative (cropping) padding, input dilation and flip.
    compare(
        [&](StreamOrDevice s) {
          return conv_general(x, w, {1, 2}, {2, -1}, {0, 3}, {1, 2}, {2, 1}, 1, true, s);
        },
        tol);
    // Spatial axes transposed (a non-contiguous input).
    array xt = rand_of({2, 23, 17, 6}, t);
    compare(
        [&](StreamOrDevice s) { return conv2d(transpose(xt, {0, 2, 1, 3}, s), w, {1, 1}, {1, 1}, {1, 1}, 1, s); },
        tol);
  }
}

// More than a million outputs (several row chunks of the GPU's kernels at once).
TEST(GpuConv, Conv2dLarge) {
  REQUIRE_GPU();
  array x = rand_of({8, 64, 64, 16}, float32), w = rand_of({32, 3, 3, 16}, float32);
  compare([&](StreamOrDevice s) { return conv2d(x, w, {1, 1}, {1, 1}, {1, 1}, 1, s); },
          conv_tol(float32, 144));
  array xh = rand_of({4, 32, 32, 64}, float16), wh = rand_of({64, 1, 1, 64}, float16);
  compare([&](StreamOrDevice s) { return conv2d(xh, wh, {1, 1}, {0, 0}, {1, 1}, 1, s); },
          conv_tol(float16, 64));
}

TEST(GpuConv, Conv3d) {
  REQUIRE_GPU();
  for (Dtype t : {float32, float16, float64}) {
    SCOPED_TRACE(::testing::Message() << t);
    array x = rand_of({2, 7, 9, 8, 4}, t);
    array w = rand_of({5, 2, 3, 3, 4}, t), wg = rand_of({6, 3, 2, 2, 2}, t);
    Tol tol = conv_tol(t, 72);
    compare([&](StreamOrDevice s) { return conv3d(x, w, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv3d(x, w, {2, 1, 3}, {1, 2, 0}, {1, 2, 1}, 1, s); }, tol);
    compare([&](StreamOrDevice s) { return conv3d(x, wg, {1, 2, 1}, {1, 1, 1}, {2, 1, 1}, 2, s); }, tol);
  }
}

TEST(GpuConv, EmptyBatch) {
  REQUIRE_GPU();
  array x = zeros({0, 10, 3}, float32), w = rand_of({4, 3, 3}, float32);
  compare([&](StreamOrDevice s) { return conv1d(x, w, 1, 0, 1, 1, s); }, {0, 0});
}

// ---------------------------------------------------------------------------------------
// FFT

/// Tolerance of a transform whose outputs sum n unit-variance terms (float32 both ways; the
/// magnitudes grow as sqrt(n) and the error as log n).
Tol fft_tol(int64_t n) {
  double dn = static_cast<double>(std::max<int64_t>(n, 2));
  return {2e-4, 2e-6 * std::sqrt(dn) * std::log2(dn) + 1e-5};
}

TEST(GpuFft, OneDimensional) {
  REQUIRE_GPU();
  for (int n : {1, 2, 7, 64, 100, 127, 1000, 4096}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    array z = rand_of({3, n}, complex64), r = rand_of({3, n}, float32);
    Tol tol = fft_tol(n);
    compare([&](StreamOrDevice s) { return fft::fft(z, -1, FFTNorm::Backward, s); }, tol);
    compare([&](StreamOrDevice s) { return fft::ifft(z, -1, FFTNorm::Backward, s); }, tol);
    compare([&](StreamOrDevice s) { return fft::fft(r, -1, FFTNorm::Ortho, s); }, tol);
    compare([&](StreamOrDevice s) { return fft::rfft(r, -1, FFTNorm::Backward, s); }, tol);
    // irfft of a Hermitian spectrum (a real signal's), even and odd lengths.
    array spec = fft::rfft(r, -1, FFTNorm::Backward, Device::cpu);
    eval(spec);
    compare([&](StreamOrDevice s) { return fft::irfft(spec, n, -1, FFTNorm::Backward, s); }, tol);
    // Unscaled, the inverse's outputs are n times the signal (magnitudes n, not sqrt(n)), and
    // so are its rounding errors: the absolute tolerance grows by another sqrt(n). With the
    // sqrt(n) bound an element near 0 failed at n = 4096 (GPU 0.82959, CPU 0.831543 among
    // values of magnitude ~4096: a relative error of 5e-7 of the row's scale).
    const Tol unscaled{tol.rtol, tol.atol * std::sqrt(static_cast<double>(n))};
    compare([&](StreamOrDevice s) { return fft::irfft(spec, n, -1, FFTNorm::Forward, s); }, unscaled);
    // n padding and cropping.
    compare([&](StreamOrDevice s) { return fft::fft(z, n + 3, -1, FFTNorm::Backward, s); }, fft_tol(n + 3));
    compare([&](StreamOrDevice s) { return fft::rfft(r, std::max(1, n / 2), -1, FFTNorm::Backward, s); }, tol);
  }
}

// Over a million points in one transform, and a long batch of short ones.
TEST(GpuFft, Large) {
  REQUIRE_GPU();
  const int n = (1 << 20) + 17;
  array z = rand_of({n}, complex64), r = rand_of({n}, float32);
  compare([&](StreamOrDevice s) { return fft::fft(z, -1, FFTNorm::Backward, s); }, fft_tol(n));
  compare([&](StreamOrDevice s) { return fft::rfft(r, -1, FFTNorm::Backward, s); }, fft_tol(n));
  array many = rand_of({1 << 14, 64}, complex64);
  compare([&](StreamOrDevice s) { return fft::ifft(many, -1, FFTNorm::Backward, s); }, fft_tol(64));
}

// Axes that are not the last: strided passes looping over the outer index, over the inner
// index, or transposed when both are large; odd real lengths (misaligned float offsets).
TEST(GpuFft, InnerAxes) {
  REQUIRE_GPU();
  for (Shape shape : {Shape{3, 40, 5}, Shape{40, 100, 3}, Shape{33, 34, 35}, Shape{3, 41, 5},
                      Shape{20, 41, 20}}) {
    SCOPED_TRACE(shape_str(shape));
    array z = rand_of(shape, complex64), r = rand_of(shape, float32);
    Tol tol = fft_tol(shape[1]);
    compare([&](StreamOrDevice s) { return fft::fft(z, 1, FFTNorm::Backward, s); }, tol);
    compare([&](StreamOrDevice s) { return fft::ifft(z, 0, FFTNorm::Backward, s); }, fft_tol(shape[0]));
    compare([&](StreamOrDevice s) { return fft::rfft(r, 1, FFTNorm::Backward, s); }, tol);
    compare([&](StreamOrDevice s) { return fft::rfft(r, 0, FFTNorm::Backward, s); }, fft_tol(shape[0]));
    array spec = fft::rfft(r, 1, FFTNorm::Backward, Device::cpu);
    eval(spec);
    compare([&](StreamOrDevice s) { return fft::irfft(spec, shape[1], 1, FFTNorm::Backward, s); }, tol);
  }
}

// Several axes: fft2/ifft2/rfft2/irfft2 on the last two, fftn over 3 and 4 axes (two
// cuFFT passes), unsorted and non-trailing axes (rfftn's real axis not the last dimension).
TEST(GpuFft, MultiDimensional) {
  REQUIRE_GPU();
  array z = rand_of({4, 12, 18, 10}, complex64), r = rand_of({4, 12, 18, 10}, float32);
  Tol tol = fft_tol(4 * 12 * 18 * 10);
  compare([&](StreamOrDevice s) { return fft::fft2(z, {-2, -1}, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::ifft2(z, {-2, -1}, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::fftn(z, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::ifftn(z, {0, 1, 3}, FFTNorm::Ortho, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::fftn(z, {2, 0}, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::rfft2(r, {-2, -1}, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::rfftn(r, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::rfftn(r, {3, 1}, FFTNorm::Backward, s); }, tol);
  compare([&](StreamOrDevice s) { return fft::rfftn(r, {2, 0}, FFTNorm::Backward, s); }, tol);
  for (std::vector<int> axes : {std::vector<int>{-2, -1}, std::vector<int>{0, 1, 2, 3},
                                std::vector<int>{3, 1}, std::vector<int>{2, 0}}) {
    SCOPED_TRACE(::testing::Message() << "irfftn over " << axes.size() << " axes ending at " << axes.back());
    array spec = fft::rfftn(r, axes, FFTNorm::Backward, Device::cpu);
    eval(spec);
    Shape n;
    for (int a : axes) n.push_back(r.shape(a));
    compare([&](StreamOrDevice s) { return fft::irfftn(spec, n, axes, FFTNorm::Backward, s); }, tol);
  }
  compare(
      [&](StreamOrDevice s) { return fft::fftn(z, Shape{5, 20}, std::vector<int>{1, 3}, FFTNorm::Backward, s); },
      tol);
}

// Inputs of other layouts and dtypes: transposed, stepped, float64 and integers (cast
// by the ops), and an empty batch.
TEST(GpuFft, LayoutsAndDtypes) {
  REQUIRE_GPU();
  array zt = rand_of({30, 8}, complex64), rs = rand_of({8, 61}, float32);
  Tol tol = fft_tol(30);
  compare([&](StreamOrDevice s) { return fft::fft(transpose(zt, s), -1, FFTNorm::Backward, s); }, tol);
  compare(
      [&](StreamOrDevice s) { return fft::rfft(slice(rs, {0, 1}, {8, 61}, {1, 2}, s), -1, FFTNorm::Backward, s); },
      tol);
  array d = rand_of({5, 16}, float64);
  compare([&](StreamOrDevice s) { return fft::fft(d, -1, FFTNorm::Backward, s); }, fft_tol(16));
  array i = randint({5, 16}, -10, 10, int32);
  eval(i);
  compare([&](StreamOrDevice s) { return fft::rfft(i, -1, FFTNorm::Backward, s); }, fft_tol(16));
  array e = zeros({0, 16}, complex64);
  compare([&](StreamOrDevice s) { return fft::fft(e, -1, FFTNorm::Backward, s); }, {0, 0});
}

} // namespace
} // namespace nuvec::testing
