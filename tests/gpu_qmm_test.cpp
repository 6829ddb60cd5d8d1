// nuvec tests: the tensor-core quantized product (src/backend/cuda/quantized/qmm.cu, reached
// through quantized_matmul and gather_qmm on the GPU for more than 8 rows) against the
// meaning of the op: x · dequantize(w)ᵀ computed on the CPU in float32 from the dequantized
// weights rounded once to x's dtype (see reference()). Every format qmm covers (affine
// 2/4/8 bits, groups 32/64/128; mxfp4, mxfp8, nvfp4), float16 and bfloat16, M in {9, 17, 64,
// 130} (one tile, a partial tile, full tiles, two tiles of 128), N not a multiple of the
// 128-column tile, a long K (split over blocks); gathered products with many rows per entry,
// the sorted one-row-per-entry case (tiles spanning entries, grouped by expert) and
// out-of-range indices (std::out_of_range at evaluation); the swapped kernel's shapes
// (M <= 256, affine 4/8 bits). Timing-free. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
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
  const char* mode;
  int group_size;
  int bits;
};
const Format kFormats[] = {{"affine", 64, 4}, {"affine", 32, 4}, {"affine", 128, 4}, {"affine", 64, 8},
                           {"affine", 32, 8}, {"affine", 128, 8}, {"affine", 64, 2}, {"mxfp4", 32, 4},
                           {"mxfp8", 32, 8},  {"nvfp4", 16, 4}};

// Normal values of a shape as dtype, evaluated on the CPU.
array values(const Shape& shape, Dtype t) {
  array a = randn(shape, float32);
  a = astype(a, t, kCpu);
  eval(a);
  return a;
}

// The quantized form of a random (..., N, K) weight, evaluated on the CPU.
std::vector<array> quantized_weight(const Shape& shape, const Format& f, Dtype t) {
  auto q = quantize(values(shape, t), f.group_size, f.bits, f.mode, std::nullopt, kCpu);
  for (auto& a : q) eval(a);
  return q;
}

// The reference: x · dequantize(w)ᵀ in float32 on the CPU, each weight rounded once to t, as
// the kernels (and MLX's) round s * q + b. Affine weights are dequantized in float32 and then
// rounded: the graph's dequantize in t rounds the product and the sum separately, which near
// cancellation (bias = the group's edge, s * q close to -bias) moves a weight by up to ~90%
// relative (measured on the CPU, bfloat16, half the weights differ).
array reference(const array& x, const std::vector<array>& q, const Format& f, Dtype t) {
  array w = q.size() > 2 ? astype(dequantize(q[0], astype(q[1], float32, kCpu), astype(q[2], float32, kCpu), f.group_size,
                                             f.bits, f.mode, std::nullopt, float32, kCpu),
                                  t, kCpu)
                         : dequantize(q[0], q[1], std::nullopt, f.group_size, f.bits, f.mode, std::nullopt, t, kCpu);
  w = astype(w, float32, kCpu);
  return matmul(astype(x, float32, kCpu), swapaxes(w, -1, -2, kCpu), kCpu);
}

// GPU vs reference: the output rounding of t plus float32 summation over K, relative to the
// row's magnitude (sqrt(K) * |x| * |w|) for values near 0.
void expect_close(const array& got, const array& ref, Dtype t, int64_t K, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.dtype(), t);
  ASSERT_EQ(got.shape(), ref.shape());
  const double rtol = t == bfloat16 ? 1.6e-2 : 2e-3;
  array g = astype(got, float64, kCpu), r = astype(ref, float64, kCpu);
  eval(g), eval(r);
  const double* gp = g.data<double>();
  const double* rp = r.data<double>();
  double scale = 0;
  for (size_t i = 0; i < r.size(); ++i) scale = std::max(scale, std::fabs(rp[i]));
  int bad = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const double tol = rtol * std::fabs(rp[i]) + 1e-3 * scale / std::sqrt(double(K)) + 1e-6;
    if (!(std::fabs(gp[i] - rp[i]) <= tol)) {
      if (bad < 5) ADD_FAILURE() << "element " << i << ": got " << gp[i] << ", want " << rp[i];
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0);
}

std::string name_of(const Format& f, Dtype t, int64_t M, int64_t N, int64_t K) {
  return std::string(f.mode) + " g" + std::to_string(f.group_size) + " b" + std::to_string(f.bits) + " " +
      dtype_name(t) + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

TEST(GpuQmm, EveryFormatAndRowCount) {
  REQUIRE_GPU();
  for (const Format& f : kFormats) {
    for (Dtype t : {bfloat16, float16}) {
      for (int M : {9, 17, 64, 130}) {
        const int N = M == 130 ? 136 : 200, K = M == 64 ? 1024 : 384;
        auto q = quantized_weight({N, K}, f, t);
        array x = values({M, K}, t);
        std::optional<array> biases;
        if (q.size() > 2) biases = q[2];
        array got = quantized_matmul(x, q[0], q[1], biases, true, f.group_size, f.bits, f.mode, kGpu);
        expect_close(got, reference(x, q, f, t), t, K, name_of(f, t, M, N, K));
      }
    }
  }
}

TEST(GpuQmm, LongKSplitOverBlocks) {
  REQUIRE_GPU();
  const Format f{"affine", 64, 4};
  const int M = 17, N = 256, K = 4096; // few tiles: K is split, partial sums added
  auto q = quantized_weight({N, K}, f, bfloat16);
  array x = values({2, M, K}, bfloat16); // leading axes are rows
  array got = quantized_matmul(x, q[0], q[1], q[2], true, f.group_size, f.bits, f.mode, kGpu);
  expect_close(got, reference(x, q, f, bfloat16), bfloat16, K, "split K");
}

// The swapped kernel (affine 4/8 bits, 8 < M <= 256, one W): every token tile (16, 32, 64,
// 128 tokens), partial row and token tiles, groups per row odd (rows whose scales start in
// the upper half of a 4-byte word), split K (long K, few tiles), groups 32 and 128.
TEST(GpuQmm, SwappedKernelShapes) {
  REQUIRE_GPU();
  struct Case {
    int M, N, K, group_size;
  };
  const Case cases[] = {{12, 1024, 2048, 32}, {40, 264, 448, 64}, {33, 128, 2368, 64}, {200, 392, 1024, 128},
                        {256, 136, 320, 64}};
  for (int bits : {4, 8}) {
    for (Dtype t : {bfloat16, float16}) {
      for (const Case& c : cases) {
        const Format f{"affine", c.group_size, bits};
        auto q = quantized_weight({c.N, c.K}, f, t);
        array x = values({c.M, c.K}, t);
        array got = quantized_matmul(x, q[0], q[1], q[2], true, f.group_size, f.bits, f.mode, kGpu);
        expect_close(got, reference(x, q, f, t), t, c.K, name_of(f, t, c.M, c.N, c.K));
      }
    }
  }
}

// out[b] = x[lhs[b]] · dequantize(w[rhs[b]])ᵀ, reference by a loop over b.
void check_gather(int M, int N, int K, const std::vector<uint32_t>& l, const std::vector<uint32_t>& r,
                  int A, int E, bool sorted, const Format& f, Dtype t, const std::string& what) {
  auto q = quantized_weight({E, N, K}, f, t);
  array x = values({A, M, K}, t);
  const int64_t B = static_cast<int64_t>(l.size());
  array lhs(l.begin(), {static_cast<int>(B)}, uint32), rhs(r.begin(), {static_cast<int>(B)}, uint32);
  std::optional<array> biases;
  if (q.size() > 2) biases = q[2];
  array got = gather_qmm(x, q[0], q[1], biases, lhs, rhs, true, f.group_size, f.bits, f.mode, sorted, kGpu);
  std::vector<array> refs;
  for (int64_t b = 0; b < B; ++b) {
    const int e = static_cast<int>(r[b]), a = static_cast<int>(l[b]);
    std::vector<array> qe = {take(q[0], array(e), 0, kCpu), take(q[1], array(e), 0, kCpu)};
    if (q.size() > 2) qe.push_back(take(q[2], array(e), 0, kCpu));
    refs.push_back(reference(take(x, array(a), 0, kCpu), qe, f, t));
  }
  expect_close(got, stack(refs, 0, kCpu), t, K, what);
}

TEST(GpuQmm, GatheredManyRowsPerEntry) {
  REQUIRE_GPU();
  check_gather(20, 136, 256, {2, 0, 1, 1, 2}, {3, 1, 0, 3, 2}, 3, 4, false, {"affine", 64, 4}, bfloat16,
               "unsorted, 20 rows an entry");
  check_gather(12, 200, 384, {0, 1, 0}, {1, 1, 0}, 2, 2, false, {"mxfp4", 32, 4}, float16, "mxfp4 f16");
}

TEST(GpuQmm, SortedOneRowPerEntryGroupsByExpert) {
  REQUIRE_GPU();
  std::vector<uint32_t> l(70), r(70);
  for (int i = 0; i < 70; ++i) l[i] = (i * 7) % 40, r[i] = (i * 6) / 70; // runs of about 12 per expert
  check_gather(1, 264, 512, l, r, 40, 6, true, {"affine", 64, 4}, bfloat16, "sorted M=1");
  check_gather(3, 200, 256, l, r, 40, 6, true, {"affine", 32, 8}, float16, "sorted M=3");
}

TEST(GpuQmm, IndexOutOfRangeThrows) {
  REQUIRE_GPU();
  const Format f{"affine", 64, 4};
  auto q = quantized_weight({3, 136, 256}, f, bfloat16);
  array x = values({2, 16, 256}, bfloat16);
  std::vector<uint32_t> l = {0, 1}, r_bad = {0, 3}, l_bad = {2, 0}, r = {0, 1};
  array a1 = gather_qmm(x, q[0], q[1], q[2], array(l.begin(), {2}, uint32), array(r_bad.begin(), {2}, uint32), true,
                        64, 4, "affine", false, kGpu);
  EXPECT_THROW(eval(a1), std::out_of_range);
  array a2 = gather_qmm(x, q[0], q[1], q[2], array(l_bad.begin(), {2}, uint32), array(r.begin(), {2}, uint32), true,
                        64, 4, "affine", false, kGpu);
  EXPECT_THROW(eval(a2), std::out_of_range);
}

} // namespace
} // namespace nuvec::testing
