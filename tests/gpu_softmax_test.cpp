// nuvec tests: the Softmax primitive on the GPU (src/backend/cuda/fast/softmax.cu) against the CPU
// kernel, which defines the semantics. Each case evaluates the input on the CPU (so only the
// softmax kernel runs on the GPU), then compares softmax on Device::gpu and Device::cpu on
// the host. Row lengths cover every kernel configuration (a warp per row with 1, 2 or 4
// vectors per lane, a block per row of 64 to 1024 threads, the two-pass looped kernel), with
// and without 16-byte alignment; layouts contiguous, transposed, sliced, broadcast,
// reversed; -inf, all -inf, NaN and +inf rows. Skipped without a GPU. One case prints the
// bandwidth of a 16384 x 4096 bfloat16 softmax (no assertion: a report for the lead).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define NUVEC_REQUIRE_GPU() \
  if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu(Device::cpu);
const Device kGpu(Device::gpu);
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::vector<Dtype> kFloatTypes = {float32, float64, float16, bfloat16};

// GPU vs CPU: both accumulate in the same type; they differ only in summation order and
// exp's last bits, then in the output rounding (one half-type ulp at most).
struct Tol {
  double rtol, atol;
};
Tol tol_of(Dtype t) {
  if (t == float64) return {1e-12, 1e-15};
  if (t == float32) return {2e-6, 1e-12};
  if (t == float16) return {2e-3, 1e-7};
  return {1.6e-2, 1e-7}; // bfloat16: one ulp is 2^-8 relative
}

// Normal values (scale 3) as dtype t, evaluated on the CPU; inf_rate of them -inf.
array make_values(const Shape& shape, Dtype t, double inf_rate = 0.0) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::normal_distribution<double> normal(0.0, 3.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = unit(rng()) < inf_rate ? -kInf : normal(rng());
  array out = astype(array(v.begin(), shape, float64), t, kCpu);
  eval(out);
  return out;
}

void compare(const array& x, const std::string& what) {
  SCOPED_TRACE(what + " " + dtype_name(x.dtype()));
  array g = softmax(x, -1, false, kGpu);
  array c = softmax(x, -1, false, kCpu);
  EXPECT_EQ(g.dtype(), x.dtype());
  auto t = tol_of(x.dtype());
  expect_allclose(g, c, t.rtol, t.atol);
}

TEST(GpuSoftmax, EveryKernelConfiguration) {
  NUVEC_REQUIRE_GPU();
  // Row lengths around each configuration's capacity for 2-, 4- and 8-byte types.
  const std::vector<int> lengths = {1,    3,    8,    31,   64,    200,   256,   257,
                                        512,  1000, 1024, 1025, 2048,  4096,  4100,  8192,
                                        8193, 16384, 16385, 32768, 32769, 50000, 100000};
  for (Dtype t : kFloatTypes) {
    for (int n : lengths) {
      int rows = n >= 16384 ? 3 : 37;
      compare(make_values({rows, n}, t), "n=" + std::to_string(n));
    }
  }
}

TEST(GpuSoftmax, ManyRows) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    compare(make_values({70000, 16}, t), "70000 x 16");
    compare(make_values({2049, 4096}, t), "2049 x 4096");
    compare(make_values({8, 33, 129}, t), "8 x 33 x 129");
  }
}

TEST(GpuSoftmax, Layouts) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    for (int n : {40, 1000, 40000}) {
      array base = make_values({24, n}, t);
      compare(transpose(make_values({n, 24}, t)), "transposed n=" + std::to_string(n));
      compare(slice(base, {1, 1}, {23, n}, {2, 3}, kCpu), "stepped n=" + std::to_string(n));
      compare(slice(base, {0, 1}, {24, n}, kCpu), "misaligned n=" + std::to_string(n));
      compare(flip(base, std::vector<int>{1}, kCpu), "reversed n=" + std::to_string(n));
      compare(broadcast_to(slice(base, {2, 0}, {3, n}, kCpu), {5, n}, kCpu), "broadcast n=" + std::to_string(n));
    }
  }
}

TEST(GpuSoftmax, SpecialValues) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    for (int n : {5, 300, 3000, 40000}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      // Rows: random -inf entries; all -inf; -inf except one; a NaN; a +inf; two +inf.
      std::vector<double> v = to_vector(make_values({6, n}, t, 0.3));
      for (int i = 0; i < n; ++i) v[n + i] = -kInf;
      for (int i = 0; i < n; ++i) v[2 * n + i] = i == n / 2 ? 1.5 : -kInf;
      v[3 * n + n / 3] = kNaN;
      v[4 * n + n - 1] = kInf;
      v[5 * n] = kInf;
      v[5 * n + n / 2] = kInf;
      array x = astype(array(v.begin(), {6, n}, float64), t, kCpu);
      eval(x);
      compare(x, "special values");
      auto y = to_vector(softmax(x, -1, false, kGpu));
      EXPECT_TRUE(std::isnan(y[n])) << "all -inf row";
      EXPECT_EQ(y[2 * n + n / 2], 1.0) << "single finite entry";
      EXPECT_TRUE(std::isnan(y[3 * n])) << "NaN row";
      EXPECT_TRUE(std::isnan(y[4 * n])) << "+inf row";
      EXPECT_TRUE(std::isnan(y[5 * n + 1])) << "two +inf row";
    }
  }
}

TEST(GpuSoftmax, GradientOnTheGpu) {
  NUVEC_REQUIRE_GPU();
  array x = make_values({64, 1000}, float32);
  array w = make_values({64, 1000}, float32);
  auto loss = [&](const Device& d) {
    return std::function<array(const array&)>([&w, d](const array& a) {
      return sum(multiply(softmax(a, -1, false, d), w, d), d);
    });
  };
  // The vjp rule's ops run on the default device; compare against the CPU's whole graph.
  auto gg = grad(loss(kGpu))(x);
  auto gc = grad(loss(kCpu))(x);
  expect_allclose(gg, gc, 1e-4, 1e-7);
}

TEST(GpuSoftmax, Bandwidth16384x4096Bf16) {
  NUVEC_REQUIRE_GPU();
  array x = astype(make_values({16384, 4096}, float32), bfloat16, kGpu);
  eval(x);
  for (int i = 0; i < 3; ++i) eval(softmax(x, -1, false, kGpu)); // warm-up
  constexpr int kIters = 20;
  constexpr double kBytes = 2.0 * 2.0 * 16384.0 * 4096.0; // bf16 read once, written once
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) eval(softmax(x, -1, false, kGpu));
  auto t1 = std::chrono::steady_clock::now();
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kIters;
  std::printf("[softmax bf16 16384x4096] one eval per call: %.1f us, %.0f GB/s\n", us, kBytes / (us * 1e3));
  // Independent nodes evaluated together: the kernels run back to back on the stream, so
  // this is closer to the kernel's own time (the host overhead overlaps it).
  std::vector<array> ys;
  for (int i = 0; i < kIters; ++i) ys.push_back(softmax(x, -1, false, kGpu));
  auto t2 = std::chrono::steady_clock::now();
  eval(ys);
  auto t3 = std::chrono::steady_clock::now();
  us = std::chrono::duration<double, std::micro>(t3 - t2).count() / kIters;
  std::printf("[softmax bf16 16384x4096] %d in one eval: %.1f us each, %.0f GB/s\n", kIters, us, kBytes / (us * 1e3));
  ys.clear();
  compare(slice(x, {0, 0}, {64, 4096}, kGpu), "bandwidth case, first rows");
}

} // namespace
} // namespace nuvec::testing
