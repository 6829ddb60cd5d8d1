// nuvec: the GPU kernels of the quantized and gathered products (QuantizedMatmul, GatherQmm,
// GatherMm: src/backend/cuda/quantized/) on fresh random inputs, against the float64
// product of the dequantized weights (the fallback graph's meaning) and against the CPU
// kernels: every mode and bit width, float32/float16/bfloat16 (float64 for gather_mm), few
// rows (qmv, split over clusters for long rows) and many (qmm or the generic kernel),
// transposed or not, gathered with sorted and unsorted indices, non-contiguous inputs, and
// index range errors. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "nuvec/nuvec.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define REQUIRE_GPU() \
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu = Device::cpu;
const Device kGpu = Device::gpu;

struct Format {
  std::string mode;
  int group_size;
  int bits;
};

const std::vector<Format> kFormats = {
    {"affine", 64, 2},  {"affine", 64, 3},  {"affine", 64, 4},  {"affine", 64, 5}, {"affine", 64, 6},
    {"affine", 64, 8},  {"affine", 32, 4},  {"affine", 128, 4}, {"affine", 32, 8}, {"mxfp4", 32, 4},
    {"mxfp8", 32, 8},   {"nvfp4", 16, 4},
};

std::string name_of(const Format& f, Dtype dt) {
  return f.mode + " g" + std::to_string(f.group_size) + " b" + std::to_string(f.bits) + " " + dtype_name(dt);
}

std::vector<double> host_values(const array& a) {
  array c = astype(contiguous(a, false, kCpu), float64, kCpu);
  eval(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.size());
}

/// Unit roundoff of the kernels' arithmetic for dtype (bf16 and f16 weights are rounded to
/// the dtype before the tensor-core product) plus float32 summation over K.
double eps_of(Dtype dt, int64_t K) {
  const double e = dt == bfloat16 ? 0x1p-8 : dt == float16 ? 0x1p-11 : dt == float64 ? 0x1p-50 : 0x1p-22;
  return e + 0x1p-24 * std::sqrt(static_cast<double>(K));
}

/// Asserts got matches ref elementwise within eps (4 |ref| + 16 rms(ref)): the weights'
/// rounding to the dtype errs by up to eps |scale * q| + eps |bias| per term (several times
/// the dequantized value), summed over K like the output; an indexing error (a wrong row,
/// column, group or expert) moves elements by about rms(ref).
void expect_near(const array& got, const array& ref, double eps) {
  ASSERT_EQ(got.shape(), ref.shape());
  auto g = host_values(got), r = host_values(ref);
  double ss = 0;
  for (double v : r) ss += v * v;
  const double rms = r.empty() ? 0.0 : std::sqrt(ss / r.size());
  ASSERT_GT(rms, 0.0) << "reference is all zeros";
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = eps * (4 * std::abs(r[i]) + 16 * rms);
    if (!(std::abs(g[i] - r[i]) <= tol) && bad++ < 5) first << " [" << i << "] got " << g[i] << " ref " << r[i] << ";";
  }
  EXPECT_EQ(bad, 0u) << "mismatches of " << g.size() << " (rms " << rms << "):" << first.str();
}

/// A quantized weight of `rows` x `cols` (packed along cols) from random values in dt, with
/// its float32 dequantization for the reference.
struct QWeight {
  array w, scales;
  std::optional<array> biases;
  array dense; // float64 (..., rows, cols)
};

QWeight make_weight(const Shape& shape, const Format& f, Dtype dt) {
  array raw = randn(shape, dt);
  auto q = quantize(raw, f.group_size, f.bits, f.mode, std::nullopt, kCpu);
  QWeight r{q[0], q[1], std::nullopt, raw};
  if (f.mode == "affine") r.biases = q[2];
  // dequantize's graph takes rows of whole 32-code words; shorter rows (nvfp4, 48 codes) are
  // checked against the CPU kernel alone (dense left as the raw values, unused).
  if (shape.back() % 32 == 0) {
    r.dense = astype(
        dequantize(r.w, r.scales, r.biases, f.group_size, f.bits, f.mode, std::nullopt, float32, kCpu), float64, kCpu);
  }
  eval({r.w, r.scales, r.dense});
  if (r.biases) eval(*r.biases);
  return r;
}

array qmm(const array& x, const QWeight& w, bool transpose, const Format& f, Device d) {
  return quantized_matmul(x, w.w, w.scales, w.biases, transpose, f.group_size, f.bits, f.mode, d);
}

/// x (..., M, K) against a W of N x K (transpose) or K x N: GPU vs float64 reference and vs
/// the CPU kernel.
void check_product(const Format& f, Dtype dt, const Shape& x_shape, int N, bool transpose) {
  const int K = x_shape.back();
  SCOPED_TRACE(name_of(f, dt) + " M " + std::to_string(x_shape[x_shape.size() - 2]) + " N " + std::to_string(N) +
               " K " + std::to_string(K) + (transpose ? " T" : " N"));
  array x = randn(x_shape, dt);
  eval(x);
  QWeight w = make_weight(transpose ? Shape{N, K} : Shape{K, N}, f, dt);
  array ref = matmul(astype(x, float64, kCpu), transpose ? swapaxes(w.dense, 0, 1, kCpu) : w.dense, kCpu);
  array gpu = qmm(x, w, transpose, f, kGpu);
  array cpu = qmm(x, w, transpose, f, kCpu);
  eval({gpu, cpu, ref});
  ASSERT_EQ(gpu.dtype(), dt);
  if (w.dense.shape().back() % 32 == 0) expect_near(gpu, ref, eps_of(dt, K));
  expect_near(gpu, cpu, 2 * eps_of(dt, K));
}

// Few rows (qmv): every format and dtype, 1, 5 and 8 rows (one to eight mma columns), N not
// a multiple of the 128-row block, K = 384 (three chunks of 128 codes).
TEST(GpuQuantized, QmvEveryFormatAndDtype) {
  REQUIRE_GPU();
  for (const auto& f : kFormats) {
    for (Dtype dt : {float32, float16, bfloat16}) {
      for (int M : {1, 5, 8}) check_product(f, dt, {M, 384}, 200, true);
    }
  }
}

// Leading axes are rows: (2, 3, K) is six rows.
TEST(GpuQuantized, QmvLeadingAxesAreRows) {
  REQUIRE_GPU();
  check_product({"affine", 64, 4}, bfloat16, {2, 3, 256}, 70, true);
  check_product({"mxfp4", 32, 4}, float32, {2, 3, 256}, 70, true);
}

// Long rows: the K split over a cluster of blocks (small N); several shared-memory slices of
// activations per block (8 rows, K = 16896: 80 chunks a block of the 8-block cluster against
// a 64-chunk staging budget); K = 160 is a partial round.
TEST(GpuQuantized, QmvLongRowsSplitOverClusters) {
  REQUIRE_GPU();
  for (const Format& f : {Format{"affine", 64, 4}, Format{"affine", 64, 8}, Format{"affine", 128, 3},
                          Format{"mxfp4", 32, 4}}) {
    for (Dtype dt : {bfloat16, float16}) {
      check_product(f, dt, {1, 20480}, 130, true);
      check_product(f, dt, {4, 4096}, 300, true);
      check_product(f, dt, {8, 16896}, 72, true);
    }
  }
  check_product({"affine", 32, 4}, bfloat16, {3, 160}, 1000, true);
  check_product({"affine", 64, 4}, float32, {2, 8192}, 129, true);
}

// Many rows (the tensor-core qmm or the generic kernel), W not transposed (generic), and
// nvfp4 rows of 48 codes (not a whole 32-code chunk: generic).
TEST(GpuQuantized, ManyRowsAndNotTransposed) {
  REQUIRE_GPU();
  for (const Format& f : {Format{"affine", 64, 4}, Format{"affine", 32, 3}, Format{"affine", 128, 8},
                          Format{"mxfp8", 32, 8}, Format{"nvfp4", 16, 4}}) {
    for (Dtype dt : {float32, float16, bfloat16}) {
      check_product(f, dt, {13, 256}, 136, true);
      check_product(f, dt, {70, 128}, 65, true);
      check_product(f, dt, {1, 128}, 256, false);
      check_product(f, dt, {13, 96}, 384, false);
    }
  }
  check_product({"nvfp4", 16, 4}, bfloat16, {3, 48}, 40, true);
}

// Non-contiguous activations (a transposed view, a strided slice) are made row-contiguous.
TEST(GpuQuantized, NonContiguousActivations) {
  REQUIRE_GPU();
  const Format f{"affine", 64, 4};
  QWeight w = make_weight({96, 256}, f, bfloat16);
  array xt = swapaxes(randn({256, 4}, bfloat16), 0, 1, kCpu);
  array xs = slice(randn({10, 512}, bfloat16), {1, 0}, {9, 512}, {2, 2}, kCpu);
  for (const array& x : {xt, xs}) {
    array ref = matmul(astype(x, float64, kCpu), swapaxes(w.dense, 0, 1, kCpu), kCpu);
    expect_near(qmm(x, w, true, f, kGpu), ref, eps_of(bfloat16, 256));
  }
}

/// gather_qmm of x (A, M, K) against E experts with index arrays of `batch` shape, GPU vs
/// float64 reference (taken row by row) and vs the CPU kernel.
void check_gather(const Format& f, Dtype dt, int A, int E, int M, int N, int K, const Shape& batch, bool transpose,
                  bool sorted) {
  SCOPED_TRACE(name_of(f, dt) + " A " + std::to_string(A) + " E " + std::to_string(E) + " M " + std::to_string(M) +
               " N " + std::to_string(N) + " K " + std::to_string(K) + (transpose ? " T" : " N") +
               (sorted ? " sorted" : " unsorted"));
  array x = randn({A, M, K}, dt);
  QWeight w = make_weight(transpose ? Shape{E, N, K} : Shape{E, K, N}, f, dt);
  array lhs = randint(batch, 0, A - 1, int32);
  array rhs = randint(batch, 0, E - 1, int32);
  if (sorted) rhs = reshape(sort(flatten(rhs, kCpu), -1, kCpu), batch, kCpu);
  eval({x, lhs, rhs});
  auto run = [&](Device d) {
    return gather_qmm(x, w.w, w.scales, w.biases, lhs, rhs, transpose, f.group_size, f.bits, f.mode, sorted, d);
  };
  array gpu = run(kGpu), cpu = run(kCpu);
  // Reference: the gathered operands materialised, then a float64 batched product.
  array xl = take(astype(x, float64, kCpu), flatten(lhs, kCpu), 0, kCpu);
  array wr = take(w.dense, flatten(rhs, kCpu), 0, kCpu);
  array ref = matmul(xl, transpose ? swapaxes(wr, 1, 2, kCpu) : wr, kCpu);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  ref = reshape(ref, out_shape, kCpu);
  eval({gpu, cpu, ref});
  expect_near(gpu, ref, eps_of(dt, K));
  expect_near(gpu, cpu, 2 * eps_of(dt, K));
}

// Gathered products: decode-shaped (M 1 and 3: qmv jobs of up to 8 / M entries sharing an
// expert), sorted (runs longer than a job) and unsorted, a batch of 2 x 37 entries; many rows
// and W not transposed (qmm or generic).
TEST(GpuQuantized, GatherQmmSortedAndUnsorted) {
  REQUIRE_GPU();
  for (const Format& f : {Format{"affine", 64, 4}, Format{"affine", 64, 8}, Format{"affine", 32, 6},
                          Format{"mxfp4", 32, 4}, Format{"nvfp4", 16, 4}}) {
    for (Dtype dt : {bfloat16, float16, float32}) {
      for (bool sorted : {true, false}) {
        check_gather(f, dt, 5, 6, 1, 200, 256, {2, 37}, true, sorted);
        check_gather(f, dt, 5, 3, 3, 72, 384, {29}, true, sorted);
      }
      check_gather(f, dt, 4, 3, 12, 72, 128, {5}, true, true);
      check_gather(f, dt, 4, 3, 2, 128, 96, {7}, false, true);
    }
  }
  // Every entry on one expert: jobs of 8 entries over one long run.
  check_gather({"affine", 64, 4}, bfloat16, 3, 1, 1, 300, 512, {40}, true, true);
}

// gather_mm (GatherMm): plain matrices in every floating dtype, sorted and unsorted.
TEST(GpuQuantized, GatherMmEveryDtype) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    for (bool sorted : {true, false}) {
      SCOPED_TRACE(dtype_name(dt) + (sorted ? " sorted" : " unsorted"));
      const int A = 4, E = 5, M = 7, K = 100, N = 90;
      array a = randn({A, M, K}, dt), b = randn({E, K, N}, dt);
      array lhs = randint({23}, 0, A - 1, int32), rhs = randint({23}, 0, E - 1, int32);
      if (sorted) rhs = sort(rhs, -1, kCpu);
      eval({a, b, lhs, rhs});
      array gpu = gather_mm(a, b, lhs, rhs, sorted, kGpu);
      array cpu = gather_mm(a, b, lhs, rhs, sorted, kCpu);
      array ref = matmul(take(astype(a, float64, kCpu), lhs, 0, kCpu), take(astype(b, float64, kCpu), rhs, 0, kCpu), kCpu);
      eval({gpu, cpu, ref});
      ASSERT_EQ(gpu.dtype(), dt);
      expect_near(gpu, ref, eps_of(dt, K));
      expect_near(gpu, cpu, 2 * eps_of(dt, K));
    }
  }
}

// gather_mm(a, swapaxes(w)) with w stacked [E, N, K] weights (how a mixture-of-experts layer
// passes its Linear-shaped experts, read in place) against float64 and the CPU; the view's
// buffer unchanged.
void check_transposed_gather(Dtype dt, int A, int E, int M, int K, int N, int entries, bool sorted) {
  SCOPED_TRACE(dtype_name(dt) + " M " + std::to_string(M) + " K " + std::to_string(K) + " entries " +
               std::to_string(entries) + (sorted ? " sorted" : ""));
  array a = randn({A, M, K}, dt), w = randn({E, N, K}, dt);
  array lhs = randint({entries}, 0, A - 1, int32), rhs = randint({entries}, 0, E - 1, int32);
  if (sorted) rhs = sort(rhs, -1, kCpu);
  eval({a, w, lhs, rhs});
  const std::vector<double> w_before = host_values(w);
  array gpu = gather_mm(a, swapaxes(w, -1, -2, kGpu), lhs, rhs, sorted, kGpu);
  array cpu = gather_mm(a, swapaxes(w, -1, -2, kCpu), lhs, rhs, sorted, kCpu);
  array ref = matmul(take(astype(a, float64, kCpu), lhs, 0, kCpu),
                     swapaxes(take(astype(w, float64, kCpu), rhs, 0, kCpu), -1, -2, kCpu), kCpu);
  eval({gpu, cpu, ref});
  ASSERT_EQ(gpu.shape(), (Shape{entries, M, N}));
  expect_near(gpu, ref, eps_of(dt, K));
  expect_near(gpu, cpu, 2 * eps_of(dt, K));
  EXPECT_EQ(host_values(w), w_before);
}

// The transposed plain W: few rows a batch entry (M 1, 3, 8: gemv_plain, K a whole number of
// 16-byte vectors) and more (M 12) or K 100 (not a whole number of vectors in half types: the
// generic kernel, transposed); an entry of w's batch reused, sorted and unsorted.
TEST(GpuQuantized, GatherMmTransposedWeightsInPlace) {
  REQUIRE_GPU();
  for (Dtype dt : {bfloat16, float16, float32, float64}) {
    for (int M : {1, 3, 8, 12}) {
      for (int K : {128, 100}) {
        for (bool sorted : {true, false}) check_transposed_gather(dt, 6, 5, M, K, 90, 31, sorted);
      }
    }
  }
}

// The same on the tiled tensor-core kernel (NUVEC_GATHER_MM_TENSOR_CORES=1 until this test
// has passed on a GPU): the mixture-of-experts prefill (one row an entry, sorted: runs of one
// expert share its W tiles, runs crossing row tiles), M 12, 70 and 150 an entry (row tiles
// within an entry), K 64, 192 and 1024 (split over blocks), N 90 and 260 (partial column
// tiles); float16 and bfloat16.
TEST(GpuQuantized, GatherMmTransposedWeightsOnTensorCores) {
  REQUIRE_GPU();
  ScopedEnv on("NUVEC_GATHER_MM_TENSOR_CORES", "1");
  for (Dtype dt : {bfloat16, float16}) {
    for (int K : {64, 192}) {
      check_transposed_gather(dt, 300, 7, 1, K, 90, 300, true);
      check_transposed_gather(dt, 40, 3, 1, K, 260, 500, true);
      check_transposed_gather(dt, 6, 5, 12, K, 90, 9, false);
      check_transposed_gather(dt, 4, 3, 70, K, 260, 5, true);
      check_transposed_gather(dt, 3, 2, 150, K, 90, 3, false); // two row tiles an entry
      check_transposed_gather(dt, 5, 4, 24, K, 90, 6, false);  // 17-32 rows: the 32-row tile
      check_transposed_gather(dt, 9, 3, 12, K, 130, 40, true); // sorted entries of 12 rows
    }
    check_transposed_gather(dt, 4, 3, 1, 1024, 90, 20, true); // few tiles: K split over blocks
  }
  // The switch took effect: the tiled kernel sums K in another order than gemv_plain, so over
  // K 1024 some element differs in its last bits (each result evaluated in its switch's scope).
  {
    array a = randn({64, 1, 1024}, bfloat16), w = swapaxes(randn({4, 96, 1024}, bfloat16), -1, -2);
    array lhs = arange(64, int32), rhs = sort(randint({64}, 0, 3, int32), -1, kCpu);
    array tiled = gather_mm(a, w, lhs, rhs, true, kGpu);
    eval(tiled);
    ScopedEnv off("NUVEC_GATHER_MM_TENSOR_CORES", "0");
    array plain = gather_mm(a, w, lhs, rhs, true, kGpu);
    eval(plain);
    EXPECT_FALSE(array_equal(tiled, plain).item<bool>()) << "the tiled tensor-core kernel did not run";
  }
  // An expert index past w's batch (the last of a sorted run), or a row index past a's, throws
  // naming gather_mm.
  array a = randn({20, 1, 64}, bfloat16), w = swapaxes(randn({3, 16, 64}, bfloat16), -1, -2);
  std::vector<int> r(20, 1);
  r.back() = 3;
  array lhs = arange(20, int32), rhs(r.begin(), {20}, int32);
  EXPECT_NE(range_error(gather_mm(a, w, lhs, rhs, true, kGpu)).find("gather_mm"), std::string::npos);
  std::vector<int> l(20, 2);
  l.back() = 20;
  array bad_lhs(l.begin(), {20}, int32), good_rhs = zeros({20}, int32);
  EXPECT_NE(range_error(gather_mm(a, w, bad_lhs, good_rhs, true, kGpu)).find("gather_mm"), std::string::npos);
  EXPECT_EQ(range_error(gather_mm(a, w, lhs, good_rhs, true, kGpu)), ""); // the stream serves on
}

// An index past x's or w's first axis raises std::out_of_range naming the op at eval, on
// every path (qmv, generic, gather_mm's generic and gemv_plain), and the stream keeps working
// afterwards.
TEST(GpuQuantized, IndicesOutOfRangeThrow) {
  REQUIRE_GPU();
  const Format f{"affine", 64, 4};
  array x = randn({3, 1, 128}, bfloat16), xm = randn({3, 12, 128}, bfloat16);
  QWeight w = make_weight({4, 64, 128}, f, bfloat16);
  array good = array({0, 1, 2}, {3}, int32);
  array bad_w = array({0, 4, 1}, {3}, int32), bad_x = array({3, 0, 1}, {3}, int32);
  for (bool transpose : {true, false}) {
    QWeight wt = transpose ? w : make_weight({4, 128, 64}, f, bfloat16);
    for (const array& xx : {x, xm}) {
      auto run = [&](const array& l, const array& r) {
        return gather_qmm(xx, wt.w, wt.scales, wt.biases, l, r, transpose, 64, 4, "affine", false, kGpu);
      };
      EXPECT_NE(range_error(run(good, bad_w)).find("gather_qmm"), std::string::npos);
      EXPECT_NE(range_error(run(bad_x, good)).find("gather_qmm"), std::string::npos);
      EXPECT_EQ(range_error(run(good, good)), "");
    }
  }
  array a = randn({3, 4, 8}, float32), b = randn({4, 8, 5}, float32);
  EXPECT_NE(range_error(gather_mm(a, b, good, bad_w, false, kGpu)).find("gather_mm"), std::string::npos);
  EXPECT_NE(range_error(gather_mm(a, b, bad_x, good, false, kGpu)).find("gather_mm"), std::string::npos);
  // The transposed plain W read in place (few rows: gemv_plain).
  array a1 = randn({3, 1, 8}, float32), bt = swapaxes(randn({4, 5, 8}, float32), -1, -2);
  EXPECT_NE(range_error(gather_mm(a1, bt, good, bad_w, false, kGpu)).find("gather_mm"), std::string::npos);
  EXPECT_NE(range_error(gather_mm(a1, bt, bad_x, good, false, kGpu)).find("gather_mm"), std::string::npos);
  array ok = gather_mm(a, b, good, good, false, kGpu);
  expect_near(ok, matmul(astype(a, float64, kCpu), take(astype(b, float64, kCpu), good, 0, kCpu), kCpu),
              eps_of(float32, 8));
}

} // namespace
} // namespace nuvec::testing
