// nuvec tests: qqmm on the GPU (QQMatmul::eval_gpu, src/backend/cuda/quantized/qqmm.cu: x
// quantized on the device; the product on FP8 tensor cores with per-group promotion, or for
// bfloat16 x through bfloat16 values and cuBLASLt: both routes, NUVEC_QQMM_ROUTE) against
// the CPU kernel (src/backend/cpu/quantized/qqmm.cpp), for mxfp8, mxfp4 and nvfp4,
// x in float32, float16 and bfloat16, odd row and column counts, K not a multiple of the
// kernel's 128-slot tile. x's rounding is checked bit for bit through a one-hot w (each
// output is then one product, exact on both sides); the general products within a bound
// that scales with Σ|fq(x)||fq(w)| (the FP8 tensor core adds the 32 products of an mxfp8
// group at reduced precision: about 4e-4 of the bound seen on the H200). Skipped without
// a GPU.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define NUVEC_REQUIRE_GPU() \
  if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu(Device::cpu);
const Device kGpu(Device::gpu);

struct Mode {
  const char* name;
  int group_size;
};
const Mode kModes[] = {{"mxfp8", 32}, {"mxfp4", 32}, {"nvfp4", 16}};
const Dtype kTypes[] = {float32, float16, bfloat16};

// The GPU routes a dtype can take (qqmm.cu): bfloat16 x both, the others the fp8 one.
std::vector<const char*> routes_of(Dtype t) {
  if (t == bfloat16) return {"bf16", "fp8"};
  return {"fp8"};
}

// Sets NUVEC_QQMM_ROUTE for its lifetime.
struct RouteGuard {
  explicit RouteGuard(const char* route) { ::setenv("NUVEC_QQMM_ROUTE", route, 1); }
  ~RouteGuard() { ::unsetenv("NUVEC_QQMM_ROUTE"); }
};

// Unit of roundoff of the output dtype (both sides round the float32 sum once to it).
double out_eps(Dtype t) {
  if (t == float16) return std::ldexp(1.0, -10);
  if (t == bfloat16) return std::ldexp(1.0, -7);
  return 0.0;
}

// Rows of normal values whose magnitudes spread over many binades (so groups get many
// different scales), with one all-zero group and, in larger inputs, a huge and a tiny value.
// float16 rows stay small enough that no output overflows float16.
array make_x(int64_t R, int64_t K, int gs, Dtype t) {
  std::vector<double> v(R * K);
  std::normal_distribution<double> normal(0.0, 1.0);
  const bool half = t == float16;
  std::uniform_int_distribution<int> binade(-12, half ? 0 : 12);
  for (int64_t r = 0; r < R; ++r) {
    const double s = std::ldexp(1.0, binade(rng()));
    for (int64_t k = 0; k < K; ++k) v[r * K + k] = normal(rng()) * s;
  }
  for (int k = 0; k < gs && k < K; ++k) v[k] = 0.0;
  if (R * K > 2 * gs + 3) {
    v[gs + 1] = half ? 3e2 : 3e4; // a group with one dominant value
    v[2 * gs + 2] = 1e-6;
  }
  array x = astype(array(v.begin(), {static_cast<int>(R), static_cast<int>(K)}, float64), t, kCpu);
  eval(x);
  return x;
}

// qqmm(x, w_q, scales) on the GPU (route `route`) against the CPU kernel, elementwise within
// |g - c| <= tol Σ_k |fq(x)||fq(w)| + eps(T) |c| (one output rounding apart); tol 2e-3 for
// mxfp8 products on FP8 tensor cores, else 1e-5.
void expect_matches_cpu(const Mode& m, const char* route, const array& x, const std::vector<array>& q) {
  RouteGuard guard(route);
  const Dtype t = x.dtype();
  const double rel = std::string(m.name) == "mxfp8" && std::string(route) == "fp8" ? 2e-3 : 1e-5;
  array g = qqmm(x, q[0], q[1], std::nullopt, std::nullopt, m.name, std::nullopt, std::nullopt, kGpu);
  array c = qqmm(x, q[0], q[1], std::nullopt, std::nullopt, m.name, std::nullopt, std::nullopt, kCpu);
  ASSERT_EQ(g.shape(), c.shape());
  ASSERT_EQ(g.dtype(), t);
  // Σ|fq(x)||fq(w)| on the CPU in float64.
  auto qx = quantize(x, std::nullopt, std::nullopt, m.name, std::nullopt, kCpu);
  array fx = dequantize(qx[0], qx[1], std::nullopt, std::nullopt, std::nullopt, m.name, std::nullopt, float64, kCpu);
  array fw = dequantize(q[0], q[1], std::nullopt, std::nullopt, std::nullopt, m.name, std::nullopt, float64, kCpu);
  array bound = matmul(abs(fx, kCpu), transpose(abs(fw, kCpu), kCpu), kCpu);
  auto gv = to_vector(g), cv = to_vector(c), bv = to_vector(bound);
  ASSERT_EQ(gv.size(), bv.size());
  int64_t bad = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    if (gv[i] == cv[i]) continue; // equal infinities included
    const double tol = rel * bv[i] + out_eps(t) * std::abs(cv[i]);
    if (!(std::abs(gv[i] - cv[i]) <= tol)) {
      if (++bad <= 5) ADD_FAILURE() << "at " << i << ": gpu " << gv[i] << " cpu " << cv[i] << " bound " << bv[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

void compare(const Mode& m, Dtype t, const char* route, int64_t R, int64_t N, int64_t K) {
  SCOPED_TRACE(std::string(m.name) + " " + dtype_name(t) + " route " + route + " R=" + std::to_string(R) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K));
  array x = make_x(R, K, m.group_size, t);
  array w = astype(randn({static_cast<int>(N), static_cast<int>(K)}), float32, kCpu);
  auto q = quantize(w, std::nullopt, std::nullopt, m.name, std::nullopt, kCpu);
  eval(q);
  expect_matches_cpu(m, route, x, q);
}

TEST(GpuQqmm, MatchesCpuKernel) {
  NUVEC_REQUIRE_GPU();
  const int64_t shapes[][3] = {{1, 1, 32}, {3, 5, 96}, {37, 45, 160}, {129, 200, 256}, {67, 257, 1024}, {300, 131, 512}};
  for (const Mode& m : kModes) {
    for (Dtype t : kTypes) {
      for (const char* route : routes_of(t)) {
        for (auto& s : shapes) compare(m, t, route, s[0], s[1], s[2]);
      }
    }
  }
}

// With w one-hot (w[n][k] = 1 for k == n), out[r][n] is one product fq(x)[r][n] * fq(1):
// exact in float32 on both sides (then rounded once to T alike), so any difference in x's
// rounding shows.
TEST(GpuQqmm, RoundsXAsTheCpu) {
  NUVEC_REQUIRE_GPU();
  const int K = 256, R = 77;
  array w = eye(K, K, 0, float32, kCpu);
  for (const Mode& m : kModes) {
    auto q = quantize(w, std::nullopt, std::nullopt, m.name, std::nullopt, kCpu);
    eval(q);
    for (Dtype t : kTypes) {
      array x = make_x(R, K, m.group_size, t);
      array c = qqmm(x, q[0], q[1], std::nullopt, std::nullopt, m.name, std::nullopt, std::nullopt, kCpu);
      auto cv = to_vector(c);
      for (const char* route : routes_of(t)) {
        SCOPED_TRACE(std::string(m.name) + " " + dtype_name(t) + " route " + route);
        RouteGuard guard(route);
        array g = qqmm(x, q[0], q[1], std::nullopt, std::nullopt, m.name, std::nullopt, std::nullopt, kGpu);
        auto gv = to_vector(g);
        ASSERT_EQ(gv.size(), cv.size());
        int64_t bad = 0;
        for (size_t i = 0; i < gv.size(); ++i) {
          if (gv[i] != cv[i] && !(std::isnan(gv[i]) && std::isnan(cv[i]))) {
            if (++bad <= 5) ADD_FAILURE() << "at " << i << ": gpu " << gv[i] << " cpu " << cv[i];
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

// Leading axes of x are rows; a sliced (non-contiguous) x is copied first.
TEST(GpuQqmm, BatchedAndStridedX) {
  NUVEC_REQUIRE_GPU();
  array x = astype(randn({2, 3, 64}), bfloat16, kCpu);
  array xs = slice(astype(randn({5, 128}), float32, kCpu), {0, 0}, {5, 128}, {2, 2}); // (3, 64) strided
  array w = astype(randn({33, 64}), float32, kCpu);
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    auto q = quantize(w, std::nullopt, std::nullopt, m.name, std::nullopt, kCpu);
    eval(q);
    for (const array& in : {x, xs}) {
      for (const char* route : routes_of(in.dtype())) expect_matches_cpu(m, route, in, q);
    }
  }
}

} // namespace
} // namespace nuvec::testing
