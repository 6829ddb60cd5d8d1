// The kernels of the quantized and gathered products (src/quantized/quantized.h; CPU:
// src/backend/cpu/quantized/, GPU: src/backend/cuda/quantized/), each primitive recorded
// directly on the default device's stream and compared with its fallback graph (the op's
// meaning) evaluated on the CPU from float64 casts: QuantizedMatmul for every affine bit
// width (2, 3, 4, 5, 6, 8) and group size (32, 64, 128) and the fp modes (mxfp4, mxfp8,
// nvfp4), transpose and not, float32/float16/bfloat16 x, odd row counts (1, 3, 7, 33),
// leading batch axes and a strided x; GatherQmm with unsorted and sorted (repeated) indices;
// GatherMm in float32, float64, bfloat16 and float16, tiny (loop) and large (BLAS) products;
// indices past x's or w's batch -> std::out_of_range at eval; QQMatmul in the three fp
// modes; the CPU kernels' bits equal in every vector version. Also the encoders of
// backend/common/math/quant.h against the graphs of src/ops/quantized.cpp (to_fp8,
// quantize's E2M1 codes and fp scale codes), bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/common/math/quant.h"
#include "backend/cpu/quantized/qdot.h"
#include "backend/cpu/simd.h"
#include "nuvec/nuvec.h"
#include "quantized/quantized.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

Stream node_stream() {
  return default_stream(default_device());
}
Stream cpu_stream() {
  return default_stream(Device::cpu);
}

array record(const std::shared_ptr<Primitive>& p, const Shape& shape, Dtype dt, const std::vector<array>& in) {
  return array::make_arrays({shape}, {dt}, p, in)[0];
}

// The inputs with every floating one cast to float64 (x, affine scales and biases, a, b).
std::vector<array> as_f64(const std::vector<array>& in) {
  std::vector<array> out;
  for (const auto& a : in) out.push_back(issubdtype(a.dtype(), floating) ? astype(a, float64) : a);
  return out;
}

// Relative precision of a dtype's rounding of the output.
double out_eps(Dtype dt) {
  if (dt == float16) return 1.0 / 1024;
  if (dt == bfloat16) return 1.0 / 128;
  return 1e-6;
}

// Absolute tolerance of a product of K terms of unit size: float32 summation error, and for
// the half types the rounding of each dequantized weight to the activation dtype that the
// GPU's tensor-core kernels do (as MLX's), a random walk of K roundings of half an ulp.
// float32: the kernel's float32 sum is off the float64 reference by a random walk of about eps · sqrt(K) · |partial
// sums|, and the partial sums reach ~20 (nvfp4 weights reach 6 · scale); 6e-6 · sqrt(K) is
// ~6 of its standard deviations (2e-6 was ~2: seed 1339419177 failed at 2.4, nvfp4 float32
// M=70 N=257 K=512, one element of 18k off by 6.6e-5).
double product_tol(Dtype dt, int K) {
  const double k = std::sqrt(static_cast<double>(K));
  return dt == float32 ? 6e-6 * k : 2e-6 * k * 4.0 + 2.0 * out_eps(dt) * k;
}

const char* mode_str(QuantMode m) {
  return quant_mode_name(m);
}

// A quantized weight: {w_q, scales[, biases]} of a (..., rows, cols) normal(0, 1) weight,
// quantized along cols; affine scales/biases in dt.
std::vector<array> quantized_weight(const QuantSpec& spec, const Shape& shape, Dtype dt) {
  array w = randn(shape, spec.mode == QuantMode::Affine ? dt : float32);
  auto q = quantize(w, spec.group_size, spec.bits, mode_str(spec.mode), std::nullopt, cpu_stream());
  eval(q);
  return q;
}

std::string spec_name(const QuantSpec& s) {
  return std::string(mode_str(s.mode)) + " g" + std::to_string(s.group_size) + " b" + std::to_string(s.bits);
}

// A QuantizedMatmul of x (lead..., M, K) with a weight of N outputs, against the fallback.
void check_qmm(const QuantSpec& spec, bool transpose, Dtype dt, const Shape& lead, int M, int N, int K, bool strided_x = false) {
  SCOPED_TRACE(spec_name(spec) + (transpose ? " T " : " N ") + dtype_name(dt) + " M=" + std::to_string(M) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K) + (strided_x ? " strided" : ""));
  Shape xs = lead;
  xs.push_back(M);
  xs.push_back(K);
  array x = randn(xs, dt);
  if (strided_x) {
    // (..., M, K) read through swapped strides of a (..., K, M) buffer.
    Shape ts = lead;
    ts.push_back(K);
    ts.push_back(M);
    x = swapaxes(randn(ts, dt), -1, -2);
  }
  std::vector<array> in = {x};
  for (auto& a : quantized_weight(spec, transpose ? Shape{N, K} : Shape{K, N}, dt)) in.push_back(a);
  Shape os = lead;
  os.push_back(M);
  os.push_back(N);
  array out = record(std::make_shared<QuantizedMatmul>(node_stream(), spec, transpose), os, dt, in);
  auto ref = std::make_shared<QuantizedMatmul>(cpu_stream(), spec, transpose)->fallback()(as_f64(in))[0];
  const double tol = product_tol(dt, K);
  expect_close(out, os, to_vector(ref), out_eps(dt), tol);
}

const int kRows[] = {1, 3, 7, 33};

TEST(QuantizedKernels, AffineEveryWidthAndGroup) {
  int i = 0;
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int gs : {32, 64, 128}) {
      const QuantSpec spec{QuantMode::Affine, gs, bits};
      const int K = gs == 128 ? 384 : 192;
      for (bool t : {true, false}) {
        const int M = kRows[i++ % 4];
        check_qmm(spec, t, float32, {}, M, t ? 40 : 3 * gs, K);
      }
    }
  }
}

TEST(QuantizedKernels, AffineHalfTypes) {
  for (Dtype dt : {float16, bfloat16}) {
    int i = 0;
    for (int bits : {3, 4, 8}) {
      for (bool t : {true, false}) {
        const int M = kRows[i++ % 4];
        check_qmm({QuantMode::Affine, 64, bits}, t, dt, {}, M, t ? 96 : 320, 320);
      }
    }
  }
}

TEST(QuantizedKernels, FpModes) {
  const QuantSpec specs[] = {{QuantMode::Mxfp4, 32, 4}, {QuantMode::Mxfp8, 32, 8}, {QuantMode::Nvfp4, 16, 4}};
  int i = 0;
  for (const auto& spec : specs) {
    for (Dtype dt : {float32, float16, bfloat16}) {
      for (bool t : {true, false}) {
        const int M = kRows[i++ % 4];
        check_qmm(spec, t, dt, {}, M, t ? 40 : 96, 192);
      }
    }
  }
}

// Leading axes are rows; a strided x is read through its strides (or a copy); a product large
// enough to be split over threads with several column blocks (N = 320 > 256).
TEST(QuantizedKernels, LeadingAxesStridedAndLarge) {
  check_qmm({QuantMode::Affine, 64, 4}, true, float32, {2, 3}, 5, 40, 192);
  check_qmm({QuantMode::Affine, 64, 4}, false, bfloat16, {2}, 3, 128, 192);
  check_qmm({QuantMode::Affine, 32, 5}, true, float32, {}, 7, 40, 192, true);
  check_qmm({QuantMode::Mxfp4, 32, 4}, false, float16, {2}, 7, 64, 96, true);
  check_qmm({QuantMode::Affine, 64, 6}, false, float32, {}, 70, 320, 256);
  check_qmm({QuantMode::Nvfp4, 16, 4}, true, float32, {}, 70, 257, 512);
}

// The decode-shaped products (qdot.h's qmv: at most 8 rows, 4 or 8 bits, transposed): every
// row count up to the bound and one past it, N large enough to be split over the pool, the
// half types, a leading axis, every fp mode.
TEST(QuantizedKernels, FewRowsSplitOverThreads) {
  for (int M : {1, 2, 5, 8, 9}) check_qmm({QuantMode::Affine, 64, 4}, true, float32, {}, M, 1001, 512);
  check_qmm({QuantMode::Affine, 128, 8}, true, float16, {}, 4, 777, 384);
  check_qmm({QuantMode::Affine, 32, 4}, true, bfloat16, {2}, 3, 515, 256);
  check_qmm({QuantMode::Affine, 32, 8}, true, float32, {}, 6, 64, 4096);
  for (int M : {1, 3, 8}) {
    check_qmm({QuantMode::Mxfp4, 32, 4}, true, float32, {}, M, 1001, 512);
    check_qmm({QuantMode::Nvfp4, 16, 4}, true, bfloat16, {}, M, 515, 272);
    check_qmm({QuantMode::Mxfp8, 32, 8}, true, float16, {}, M, 777, 384);
  }
}

// The CPU's few-row products decode E2M1 and E4M3 codes 16 at a time from their bits: every
// code gives math::fp4_e2m1_value's / fp8_e4m3_value's value (NaN for E4M3's 0x7f and 0xff).
TEST(QuantizedKernels, VectorCodeDecodesMatchScalar) {
  for (int bits : {4, 8}) {
    for (uint32_t c0 = 0; c0 < (1u << bits); c0 += 16) {
      cpu::qdot::u32x16 c;
      for (int t = 0; t < 16; ++t) c[t] = c0 + t;
      const auto v = bits == 4 ? cpu::qdot::e2m1_values16(c) : cpu::qdot::e4m3_values16(c);
      for (int t = 0; t < 16; ++t) {
        const float want = bits == 4 ? math::fp4_e2m1_value(c0 + t) : math::fp8_e4m3_value(c0 + t);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(v[t])) << bits << " bits, code " << c0 + t;
        } else {
          EXPECT_EQ(v[t], want) << bits << " bits, code " << c0 + t;
          EXPECT_EQ(std::signbit(v[t]), std::signbit(want)) << bits << " bits, code " << c0 + t;
        }
      }
    }
  }
}

// Infinities and NaNs in x reach the CPU's few-row products' outputs as through the
// dequantized weight: x · (s q + b) (a factored sum s (x · q) + b Σx would give inf · 0 =
// NaN). CPU only: the GPU kernels decode with fma(s, q, b), whose zero point is often a tiny
// non-zero where the graph's s·q + b is exactly 0, so inf · w differs there (±inf or NaN).
TEST(QuantizedKernels, FewRowsNonFiniteActivations) {
  const QuantSpec spec{QuantMode::Affine, 64, 4};
  const int K = 128, N = 24;
  std::vector<float> xv(3 * K);
  for (int i = 0; i < 3 * K; ++i) xv[i] = std::sin(0.37f * float(i));
  xv[5] = std::numeric_limits<float>::infinity();
  xv[K + 70] = -std::numeric_limits<float>::infinity();
  xv[2 * K + 3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<array> in = {array(xv.begin(), {3, K}, float32)};
  for (auto& a : quantized_weight(spec, {N, K}, float32)) in.push_back(a);
  array out = record(std::make_shared<QuantizedMatmul>(cpu_stream(), spec, true), {3, N}, float32, in);
  auto ref = std::make_shared<QuantizedMatmul>(cpu_stream(), spec, true)->fallback()(in)[0];
  const auto got = to_vector(out), want = to_vector(ref);
  int infinite = 0;
  for (int i = 0; i < 3 * N; ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (std::isinf(want[i])) {
      ++infinite;
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    }
  }
  // Rows 0 and 1 are ±inf wherever the weight at their infinity is not exactly 0 (an affine
  // zero point decodes to 0: those are NaN on both sides).
  EXPECT_GE(infinite, N);
}

// A GatherQmm of x (A, M, K) and E weights against the fallback, for given indices.
void check_gather_qmm(const QuantSpec& spec, bool transpose, Dtype dt, int A, int E, int M, int N, int K,
                      const std::vector<uint32_t>& lhs, const std::vector<uint32_t>& rhs, bool sorted) {
  SCOPED_TRACE(spec_name(spec) + (transpose ? " T " : " N ") + dtype_name(dt) + (sorted ? " sorted" : ""));
  std::vector<array> in = {randn({A, M, K}, dt)};
  for (auto& a : quantized_weight(spec, transpose ? Shape{E, N, K} : Shape{E, K, N}, dt)) in.push_back(a);
  const int B = static_cast<int>(lhs.size());
  in.push_back(array(lhs.begin(), {B}, uint32));
  in.push_back(array(rhs.begin(), {B}, uint32));
  array out = record(std::make_shared<GatherQmm>(node_stream(), spec, transpose, sorted), {B, M, N}, dt, in);
  auto ref = std::make_shared<GatherQmm>(cpu_stream(), spec, transpose, sorted)->fallback()(as_f64(in))[0];
  const double tol = product_tol(dt, K);
  expect_close(out, {B, M, N}, to_vector(ref), out_eps(dt), tol);
}

TEST(QuantizedKernels, GatherQmmUnsortedAndSorted) {
  const QuantSpec specs[] = {{QuantMode::Affine, 64, 4}, {QuantMode::Affine, 32, 3}, {QuantMode::Mxfp4, 32, 4},
                             {QuantMode::Mxfp8, 32, 8}, {QuantMode::Nvfp4, 16, 4}};
  int i = 0;
  for (const auto& spec : specs) {
    for (bool t : {true, false}) {
      const Dtype dt = i % 3 == 0 ? float32 : (i % 3 == 1 ? bfloat16 : float16);
      const int M = kRows[i++ % 4];
      check_gather_qmm(spec, t, dt, 3, 4, M, t ? 40 : 64, 192, {2, 0, 1, 2, 0, 1, 1}, {3, 1, 0, 3, 2, 1, 3}, false);
      check_gather_qmm(spec, t, dt, 3, 4, M, t ? 40 : 64, 192, {0, 1, 2, 0, 1, 2, 0}, {0, 0, 1, 1, 1, 3, 3}, true);
    }
  }
  // One row per entry, many entries of few experts (the decode case).
  check_gather_qmm({QuantMode::Affine, 64, 4}, true, float32, 16, 3, 1, 96, 256,
                   {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                   {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}, true);
}

TEST(QuantizedKernels, GatherQmmIndexPastBatchThrowsAtEval) {
  const QuantSpec spec{QuantMode::Affine, 64, 4};
  for (bool bad_rhs : {false, true}) {
    std::vector<array> in = {randn({2, 3, 64}, float32)};
    for (auto& a : quantized_weight(spec, {3, 8, 64}, float32)) in.push_back(a);
    std::vector<uint32_t> lhs = {0, bad_rhs ? 1u : 2u}, rhs = {1, bad_rhs ? 3u : 2u};
    in.push_back(array(lhs.begin(), {2}, uint32));
    in.push_back(array(rhs.begin(), {2}, uint32));
    array out = record(std::make_shared<GatherQmm>(node_stream(), spec, true, false), {2, 3, 8}, float32, in);
    expect_throws_naming<std::out_of_range>([&] { eval(out); }, "gather_qmm");
  }
}

/// How check_gather_mm's b is laid out: row-contiguous; the swapaxes view of [E, N, K] (a
/// mixture-of-experts layer's stacked Linear weights: read in place, column-major); one
/// matrix broadcast over E (batch stride 0); every other column of a wider matrix (no BLAS
/// layout: copied).
enum class BKind { Contiguous, Transposed, Broadcast, Strided };

array b_operand(BKind kind, int E, int K, int N, Dtype dt) {
  array b = array(0.0f);
  switch (kind) {
    case BKind::Contiguous: b = randn({E, K, N}, dt); break;
    case BKind::Transposed: b = swapaxes(randn({E, N, K}, dt), 1, 2); break;
    case BKind::Broadcast: b = broadcast_to(randn({1, K, N}, dt), {E, K, N}); break;
    case BKind::Strided: b = slice(randn({E, K, 2 * N}, dt), {0, 0, 0}, {E, K, 2 * N}, {1, 1, 2}); break;
  }
  eval(b);
  return b;
}

void check_gather_mm(Dtype dt, int A, int E, int M, int N, int K, const std::vector<uint32_t>& lhs,
                     const std::vector<uint32_t>& rhs, bool sorted, BKind kind = BKind::Contiguous) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
               " K=" + std::to_string(K) + (sorted ? " sorted" : "") + " b kind " + std::to_string(int(kind)));
  const int B = static_cast<int>(lhs.size());
  std::vector<array> in = {randn({A, M, K}, dt), b_operand(kind, E, K, N, dt), array(lhs.begin(), {B}, uint32),
                           array(rhs.begin(), {B}, uint32)};
  array out = record(std::make_shared<GatherMm>(node_stream(), sorted), {B, M, N}, dt, in);
  auto ref = std::make_shared<GatherMm>(cpu_stream(), sorted)->fallback()(as_f64(in))[0];
  const double sum_eps = dt == float64 ? 1e-13 : 2e-6;
  expect_close(out, {B, M, N}, to_vector(ref), dt == float32 || dt == float64 ? sum_eps : out_eps(dt),
               sum_eps * std::sqrt(static_cast<double>(K)) * 4);
}

TEST(QuantizedKernels, GatherMm) {
  const std::vector<uint32_t> lhs = {1, 0, 2, 1, 1}, rhs = {2, 0, 2, 1, 0};
  const std::vector<uint32_t> slhs = {0, 1, 2, 0, 1}, srhs = {0, 0, 1, 1, 3};
  for (Dtype dt : {float32, float64, bfloat16, float16}) {
    for (BKind kind : {BKind::Contiguous, BKind::Transposed, BKind::Broadcast, BKind::Strided}) {
      check_gather_mm(dt, 3, 4, 3, 7, 5, lhs, rhs, false, kind);   // tiny: the loop
      check_gather_mm(dt, 3, 4, 33, 40, 64, lhs, rhs, false, kind); // BLAS
      check_gather_mm(dt, 3, 4, 1, 96, 320, slhs, srhs, true, kind);
      check_gather_mm(dt, 3, 4, 7, 40, 192, slhs, srhs, true, kind);
    }
  }
}

TEST(QuantizedKernels, GatherMmIndexPastBatchThrowsAtEval) {
  for (bool bad_rhs : {false, true}) {
    std::vector<uint32_t> lhs = {0, bad_rhs ? 1u : 5u}, rhs = {1, bad_rhs ? 4u : 0u};
    std::vector<array> in = {randn({2, 3, 8}, float32), randn({4, 8, 5}, float32), array(lhs.begin(), {2}, uint32),
                             array(rhs.begin(), {2}, uint32)};
    array out = record(std::make_shared<GatherMm>(node_stream(), false), {2, 3, 5}, float32, in);
    expect_throws_naming<std::out_of_range>([&] { eval(out); }, "gather_mm");
  }
}

TEST(QuantizedKernels, QQMatmulFpModes) {
  const QuantSpec specs[] = {{QuantMode::Mxfp4, 32, 4}, {QuantMode::Mxfp8, 32, 8}, {QuantMode::Nvfp4, 16, 4}};
  int i = 0;
  for (const auto& spec : specs) {
    for (Dtype dt : {float32, bfloat16, float16}) {
      const int M = kRows[i++ % 4], N = 40, K = 320;
      SCOPED_TRACE(spec_name(spec) + " " + dtype_name(dt) + " M=" + std::to_string(M));
      // Rows of very different magnitudes (within float16's range after the product), so that
      // groups get different scales.
      array x = astype(multiply(randn({M, K}), exp(multiply(uniform({M, 1}, -4.0, 2.0), array(1.0, float64)))), dt);
      std::vector<array> in = {x};
      for (auto& a : quantized_weight(spec, {N, K}, float32)) in.push_back(a);
      array out = record(std::make_shared<QQMatmul>(node_stream(), spec), {M, N}, dt, in);
      // The fallback rounds x in float32 itself; a float32 product, so float32 inputs.
      array ref = std::make_shared<QQMatmul>(cpu_stream(), spec)->fallback()(in)[0];
      array ref_abs = astype(ref, float64);
      eval({out, ref_abs});
      const auto want = to_vector(ref_abs);
      // Scale of the sums: the largest |out| of each row. On the GPU, float16 and float32 x
      // run on the FP8 tensor cores, whose accumulation keeps fewer bits than float32 (about
      // 4e-4 of the sum of |terms| measured on the H200; bfloat16 x takes the exact bf16 route).
      const double tol = node_stream().device == Device::gpu && dt != bfloat16 ? 2e-4 : 1e-6;
      auto got = to_vector(out);
      for (int m = 0; m < M; ++m) {
        double big = 0;
        for (int n = 0; n < N; ++n) big = std::max(big, std::abs(want[m * N + n]));
        ASSERT_TRUE(std::isfinite(big));
        for (int n = 0; n < N; ++n) {
          const double w = want[m * N + n];
          EXPECT_NEAR(got[m * N + n], w, tol * std::sqrt(K) * big + out_eps(dt) * std::abs(w)) << "at " << m << ", " << n;
        }
      }
    }
  }
}

// The CPU kernels give the same bits in every vector version (baseline, AVX2, AVX-512, as far
// as this CPU goes): their sums have a fixed order and contraction is off in all of them.
TEST(QuantizedKernels, CpuSameBitsInEveryVectorVersion) {
  const cpu::Isa widest = cpu::active_isa();
  const Stream s = cpu_stream();
  for (bool t : {true, false}) {
    for (const QuantSpec& spec : {QuantSpec{QuantMode::Affine, 64, 4}, QuantSpec{QuantMode::Affine, 32, 5},
                                  QuantSpec{QuantMode::Mxfp4, 32, 4}, QuantSpec{QuantMode::Mxfp8, 32, 8}}) {
      SCOPED_TRACE(spec_name(spec) + (t ? " T" : " N"));
      std::vector<array> in = {randn({7, 192}, bfloat16)};
      for (auto& a : quantized_weight(spec, t ? Shape{128, 192} : Shape{192, 128}, bfloat16)) in.push_back(a);
      std::vector<array> outs;
      for (auto isa : {cpu::Isa::baseline, cpu::Isa::avx2, cpu::Isa::avx512}) {
        if (isa > widest) continue;
        cpu::set_isa(isa);
        outs.push_back(record(std::make_shared<QuantizedMatmul>(s, spec, t), {7, 128}, bfloat16, in));
        eval(outs.back());
      }
      cpu::set_isa(widest);
      for (size_t i = 1; i < outs.size(); ++i) {
        EXPECT_EQ(std::memcmp(outs[0].raw_data(), outs[i].raw_data(), outs[0].nbytes()), 0) << "version " << i;
      }
    }
  }
}

// ---- the encoders of backend/common/math/quant.h against the graphs ----

std::vector<float> interesting_floats() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, -448.0f, 447.99f, 464.0f, 463.99f, 480.0f, 1e30f,
                          INFINITY, -INFINITY, NAN, -NAN, 1e-30f, -1e-30f, 1e-45f, 0.015625f, 0.0156249f,
                          0.001953125f, 0.0009765625f, 0.00097656f, 0.0029296875f, 0.25f, 0.75f, 1.25f, 1.75f,
                          2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 0.2499f, 0.2501f, 5.0001f, 4.9999f};
  // Every E4M3 value, the midpoints between neighbours, and one ulp either side of those.
  for (uint32_t c = 0; c < 0x7f; ++c) {
    const float a = math::fp8_e4m3_value(c), b = math::fp8_e4m3_value(c + 1);
    for (float f : {a, 0.5f * (a + b)}) {
      for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, 1e9f)}) {
        v.push_back(g);
        v.push_back(-g);
      }
    }
  }
  // Random bit patterns over the exponents that matter (2^-30 .. 2^12).
  for (int i = 0; i < 20000; ++i) {
    uint32_t b = static_cast<uint32_t>(rng()());
    const uint32_t e = 97 + (b >> 23) % 42;
    b = (b & 0x807FFFFFu) | (e << 23);
    float f;
    std::memcpy(&f, &b, 4);
    v.push_back(f);
  }
  return v;
}

TEST(QuantizedKernels, Fp8EncoderMatchesToFp8) {
  const auto v = interesting_floats();
  array codes = to_fp8(array(v.begin(), {static_cast<int>(v.size())}, float32), cpu_stream());
  eval(codes);
  const uint8_t* c = codes.data<uint8_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(math::fp8_e4m3_code(v[i]), c[i]) << "x = " << v[i] << " at " << i;
  }
}

// quantize's E2M1 codes, read from groups whose maximum is 6 (scale code 127: the codes of
// the values themselves), and the E8M0 / E4M3 scale codes of random groups.
TEST(QuantizedKernels, Fp4AndScaleEncodersMatchQuantize) {
  auto v = interesting_floats();
  std::vector<float> w;
  for (size_t i = 0; i < v.size(); i += 31) {
    w.push_back(6.0f);
    for (size_t j = i; j < i + 31; ++j) {
      const float f = j < v.size() ? v[j] : 0.0f;
      w.push_back(std::isfinite(f) && std::fabs(f) <= 6.0f ? f : 0.0f); // keep the group's max 6
    }
  }
  const int groups = static_cast<int>(w.size() / 32);
  auto q = quantize(array(w.begin(), {groups, 32}, float32), 32, 4, "mxfp4", std::nullopt, cpu_stream());
  eval(q);
  const uint32_t* words = q[0].data<uint32_t>();
  for (int g = 0; g < groups; ++g) {
    ASSERT_EQ(q[1].data<uint8_t>()[g], 127);
    for (int e = 0; e < 32; ++e) {
      ASSERT_EQ(math::quant_code(words + g * 4, e, 4), math::fp4_e2m1_code(w[g * 32 + e])) << "x = " << w[g * 32 + e];
    }
  }
  for (auto [mode, gs, bits] : {std::tuple{"mxfp4", 32, 4}, {"mxfp8", 32, 8}, {"nvfp4", 16, 4}}) {
    SCOPED_TRACE(mode);
    array x = astype(multiply(randn({64, gs}), exp(multiply(randn({64, 1}), array(12.0, float64)))), float32);
    auto qs = quantize(x, gs, bits, mode, std::nullopt, cpu_stream());
    eval(qs);
    const auto xv = to_vector(x);
    const QuantMode m = parse_quant_mode(mode, "test");
    for (int g = 0; g < 64; ++g) {
      float amax = 0;
      for (int e = 0; e < gs; ++e) amax = std::max(amax, std::fabs(static_cast<float>(xv[g * gs + e])));
      ASSERT_EQ(math::fp_scale_code(m, amax / (bits == 4 ? 6.0f : 448.0f)), qs[1].data<uint8_t>()[g]) << "amax " << amax;
    }
  }
}

} // namespace
