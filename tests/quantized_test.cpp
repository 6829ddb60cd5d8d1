// nuvec tests: quantize / dequantize (affine for every bits and group size; mxfp4, mxfp8,
// nvfp4) and to_fp8 / from_fp8. References: words packed by hand and by an independent
// scalar model of MLX's CPU quantize kernel (mlx/backend/cpu/quantized.cpp, which writes
// 3/5/6-bit values as 3- or 5-byte packs), known E4M3 codes, error bounds from MLX's tests.
#include <cmath>
#include <cstring>
#include <limits>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

const std::vector<int> kGroups = {32, 64, 128};
const std::vector<int> kBits = {2, 3, 4, 5, 6, 8};

std::vector<uint32_t> words_of(const array& a) {
  auto v = to_vector(a);
  return std::vector<uint32_t>(v.begin(), v.end());
}

// MLX's affine fit of one group, in float32 as its CPU kernel does, then the values written
// bit by bit into a byte stream (bit b of value i at stream bit i*bits + b), read back as
// little-endian uint32 words.
struct AffineModel {
  std::vector<uint32_t> words;
  std::vector<float> scales, biases;
};

AffineModel model_quantize(const std::vector<float>& w, int K, int group_size, int bits) {
  AffineModel m;
  float n_bins = static_cast<float>((1 << bits) - 1);
  size_t rows = w.size() / K;
  std::vector<uint8_t> bytes(rows * K * bits / 8, 0);
  for (size_t g = 0; g < w.size() / group_size; ++g) {
    const float* x = &w[g * group_size];
    float lo = *std::min_element(x, x + group_size);
    float hi = *std::max_element(x, x + group_size);
    bool low_edge = std::abs(lo) > std::abs(hi);
    float scale = std::max((hi - lo) / n_bins, 1e-7f);
    if (!low_edge) scale = -scale;
    float edge = low_edge ? lo : hi;
    float q0 = std::nearbyint(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    m.scales.push_back(scale);
    m.biases.push_back(bias);
    for (int j = 0; j < group_size; ++j) {
      auto q = static_cast<uint32_t>(std::clamp(std::nearbyint((x[j] - bias) / scale), 0.0f, n_bins));
      size_t pos = (g * group_size + j) * static_cast<size_t>(bits);
      for (int b = 0; b < bits; ++b, ++pos) {
        if ((q >> b) & 1u) bytes[pos / 8] |= static_cast<uint8_t>(1u << (pos % 8));
      }
    }
  }
  m.words.resize(bytes.size() / 4);
  std::memcpy(m.words.data(), bytes.data(), bytes.size());
  return m;
}

std::vector<float> floats_of(const array& a) {
  auto v = to_vector(a);
  return std::vector<float>(v.begin(), v.end());
}

uint8_t fp8_code(float x) {
  return static_cast<uint8_t>(to_vector(to_fp8(array(x)))[0]);
}

float fp8_value(int code) {
  return static_cast<float>(to_vector(from_fp8(array(static_cast<uint8_t>(code), uint8), float32))[0]);
}

} // namespace

TEST(Quantize, AffineShapesDtypesAndErrorBound) {
  for (auto dt : {float32, float16, bfloat16}) {
    auto w = randn({6, 256}, dt);
    for (int gs : kGroups) {
      for (int bits : kBits) {
        SCOPED_TRACE("gs " + std::to_string(gs) + " bits " + std::to_string(bits));
        auto r = quantize(w, gs, bits);
        ASSERT_EQ(r.size(), 3u);
        EXPECT_EQ(r[0].shape(), (Shape{6, 256 * bits / 32}));
        EXPECT_EQ(r[0].dtype(), uint32);
        EXPECT_EQ(r[1].shape(), (Shape{6, 256 / gs}));
        EXPECT_EQ(r[1].dtype(), dt);
        EXPECT_EQ(r[2].shape(), (Shape{6, 256 / gs}));
        EXPECT_EQ(r[2].dtype(), dt);
        auto w_hat = dequantize(r[0], r[1], r[2], gs, bits);
        EXPECT_EQ(w_hat.dtype(), dt);
        // MLX's bound (python/tests/test_quantized.py) is |scale| per group in float32 (not
        // |scale|/2: the scale is moved so that the group's edge is exact, and the other end
        // may clip). In a half type the stored scale is rounded (unit roundoff u), which q up
        // to 2^bits - 1 magnifies, and the dequantized value is rounded again:
        // |s| (1 + (2^bits - 1) u) plus 4 u max|w| over the group covers both.
        const float u = dt == float32 ? 0x1p-24f : (dt == float16 ? 0x1p-11f : 0x1p-8f);
        auto err = reshape(abs(subtract(astype(w, float32), astype(w_hat, float32))), {6, 256 / gs, gs});
        auto w_max = max(abs(reshape(astype(w, float32), {6, 256 / gs, gs})), -1, true);
        auto s_abs = abs(expand_dims(astype(r[1], float32), -1));
        auto bound = add(
            add(multiply(s_abs, array(1.0f + ((1 << bits) - 1) * u)),
                multiply(w_max, array(4 * u))),
            array(1e-6f));
        EXPECT_TRUE(all(less_equal(err, bound)).item<bool>());
      }
    }
  }
}

TEST(Quantize, AffinePackingMatchesModelOfMlxKernel) {
  auto w = randn({4, 384}, float32);
  auto wv = floats_of(w);
  for (int gs : kGroups) {
    for (int bits : kBits) {
      SCOPED_TRACE("gs " + std::to_string(gs) + " bits " + std::to_string(bits));
      auto r = quantize(w, gs, bits);
      auto m = model_quantize(wv, 384, gs, bits);
      EXPECT_EQ(words_of(r[0]), m.words);
      EXPECT_EQ(floats_of(r[1]), m.scales);
      EXPECT_EQ(floats_of(r[2]), m.biases);
    }
  }
}

TEST(Quantize, AffineHandPacked4And3Bits) {
  // Values 15 - (i % 16): the fit is scale -1, bias 15 (max is the edge), so q_i = i % 16.
  std::vector<float> v4(32), v3(32);
  for (int i = 0; i < 32; ++i) {
    v4[i] = static_cast<float>(15 - i % 16);
    v3[i] = static_cast<float>(7 - i % 8);
  }
  auto w4 = array(v4.begin(), {1, 32}, float32);
  auto r4 = quantize(w4, 32, 4);
  EXPECT_EQ(words_of(r4[0]), (std::vector<uint32_t>{0x76543210u, 0xFEDCBA98u, 0x76543210u, 0xFEDCBA98u}));
  EXPECT_EQ(floats_of(r4[1]), std::vector<float>{-1.0f});
  EXPECT_EQ(floats_of(r4[2]), std::vector<float>{15.0f});
  EXPECT_EQ(floats_of(dequantize(r4[0], r4[1], r4[2], 32, 4)), v4);

  // 3 bits, q_i = i % 8: each 8 values fill 3 bytes 0x88 0xc6 0xfa, words straddle values.
  auto w3 = array(v3.begin(), {1, 32}, float32);
  auto r3 = quantize(w3, 32, 3);
  EXPECT_EQ(words_of(r3[0]), (std::vector<uint32_t>{0x88FAC688u, 0xC688FAC6u, 0xFAC688FAu}));
  EXPECT_EQ(floats_of(r3[1]), std::vector<float>{-1.0f});
  EXPECT_EQ(floats_of(r3[2]), std::vector<float>{7.0f});
  EXPECT_EQ(floats_of(dequantize(r3[0], r3[1], r3[2], 32, 3)), v3);

  // Dequantize of hand-made 5-bit words: value i of the stream is i (0..31).
  std::vector<uint8_t> bytes(20, 0);
  for (int i = 0; i < 32; ++i) {
    for (int b = 0; b < 5; ++b) {
      if ((i >> b) & 1) bytes[(i * 5 + b) / 8] |= static_cast<uint8_t>(1u << ((i * 5 + b) % 8));
    }
  }
  std::vector<uint32_t> words(5);
  std::memcpy(words.data(), bytes.data(), 20);
  auto deq = dequantize(array(words.begin(), {1, 5}, uint32), array({1.0f}, {1, 1}), array({0.0f}, {1, 1}), 32, 5);
  std::vector<float> expected(32);
  for (int i = 0; i < 32; ++i) expected[i] = static_cast<float>(i);
  EXPECT_EQ(floats_of(deq), expected);
}

TEST(Quantize, AffineExactOnRepresentableValues) {
  // Integer groups spanning exactly 2^bits - 1 come back exactly (scale +-1, integer bias).
  for (auto dt : {float32, float16, bfloat16}) {
    for (int bits : kBits) {
      int n = (1 << bits) - 1;
      int gs = 64;
      auto q = randint({8, 4, gs}, 0, n, int32);
      auto ends = concatenate({zeros({8, 4, 1}, int32), full({8, 4, 1}, n, int32)}, -1);
      q = concatenate({ends, slice(q, {0, 0, 2}, {8, 4, gs})}, -1);
      auto offset = randint({8, 4, 1}, -n, 0, int32);
      auto w = astype(reshape(add(q, offset), {8, 4 * gs}), dt);
      auto r = quantize(w, gs, bits);
      auto w_hat = dequantize(r[0], r[1], r[2], gs, bits);
      EXPECT_TRUE(array_equal(w_hat, w).item<bool>()) << "bits " << bits;
    }
  }
}

TEST(Quantize, ZerosAndBatchDims) {
  for (int bits : kBits) {
    auto r = quantize(zeros({2, 3, 128}), 32, bits);
    EXPECT_EQ(r[0].shape(), (Shape{2, 3, 4 * bits}));
    auto back = dequantize(r[0], r[1], r[2], 32, bits);
    EXPECT_EQ(back.shape(), (Shape{2, 3, 128}));
    EXPECT_TRUE(all(equal(back, array(0.0f))).item<bool>());
  }
  // Defaults: affine, group 64, 4 bits.
  auto r = quantize(randn({2, 128}, float32));
  EXPECT_EQ(r[0].shape(), (Shape{2, 16}));
  EXPECT_EQ(r[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(dequantize(r[0], r[1], r[2]).shape(), (Shape{2, 128}));
  EXPECT_EQ(dequantize(r[0], r[1], r[2], 64, 4, "affine", std::nullopt, float16).dtype(), float16);
}

TEST(Quantize, LazyVmapAndGrad) {
  auto w = randn({3, 4, 64}, float32);
  auto r = quantize(w, 32, 5);
  EXPECT_FALSE(r[0].is_available());
  auto f = [](const std::vector<array>& xs) { return quantize(xs[0], 32, 5); };
  check_vmap(f, {w}, {0}, 0.0, 0.0);
  check_vmap(f, {w}, {1}, 0.0, 0.0);
  auto g = [](const std::vector<array>& xs) { return std::vector<array>{dequantize(xs[0], xs[1], xs[2], 32, 5)}; };
  check_vmap(g, {r[0], r[1], r[2]}, {0, 0, 0}, 0.0, 0.0);
  // d sum(dequantize) / d biases = group size, / d scales = the group's sum of q.
  auto fb = [&](const array& b) { return sum(dequantize(r[0], r[1], b, 32, 5)); };
  auto db = grad(fb)(r[2]);
  EXPECT_TRUE(array_equal(db, full(r[2].shape(), 32.0f)).item<bool>());
  auto fs = [&](const array& sc) { return sum(dequantize(r[0], sc, r[2], 32, 5)); };
  auto ds = grad(fs)(r[1]);
  auto qsum = sum(reshape(astype(dequantize(r[0], ones_like(r[1]), zeros_like(r[2]), 32, 5), float32), {3, 4, 2, 32}), -1);
  EXPECT_TRUE(array_equal(ds, qsum).item<bool>());
  auto to = [](const array& x) { return to_fp8(x); };
  auto codes = randint({5, 7}, 0, 255, uint8);
  auto from = [](const array& c) { return from_fp8(c, float32); };
  auto xs = randn({5, 7}, float32);
  EXPECT_TRUE(array_equal(vmap(to, 1, 1)(xs), to_fp8(xs)).item<bool>());
  EXPECT_TRUE(array_equal(vmap(from)(codes), from_fp8(codes, float32), true).item<bool>());
}

TEST(Quantize, Errors) {
  auto w = randn({4, 128}, float32);
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 16, 4); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 256, 4); }, "[quantize]");
  for (int bits : {0, 1, 7, 9}) {
    expect_throws_naming<std::invalid_argument>([&] { quantize(w, 64, bits); }, "[quantize]");
  }
  expect_throws_naming<std::invalid_argument>([&] { quantize(zeros({4, 128}, int32)); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(zeros({4, 128}, int32), std::nullopt, std::nullopt, "mxfp4"); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(zeros({128})); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(zeros({4, 96}), 64); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 64, 4, "xyz"); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 32, 3, "mxfp4"); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 64, 4, "mxfp4"); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 64, 4, "nvfp4"); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 32, 7, "mxfp8"); }, "[quantize]");
  expect_throws_naming<std::invalid_argument>([&] { quantize(w, 64, 4, "affine", array(1.0f)); }, "[quantize]");

  auto r = quantize(w, 32, 4);
  auto& wq = r[0];
  auto& sc = r[1];
  auto& bi = r[2];
  expect_throws_naming<std::invalid_argument>([&] { dequantize(astype(wq, int32), sc, bi, 32, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(reshape(wq, {-1}), reshape(sc, {-1}), reshape(bi, {-1}), 32, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, sc, bi, 64, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, sc, bi, 32, 8); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, sc, slice(bi, {0, 0}, {4, 2}), 32, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, reshape(sc, {2, 8}), reshape(bi, {2, 8}), 32, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, sc, std::nullopt, 32, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, astype(sc, int32), astype(bi, int32), 32, 4); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, sc, bi, 32, 4, "affine", std::nullopt, int32); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(wq, sc, bi, 32, 4, "xyz"); }, "[dequantize]");
  auto fp = quantize(w, std::nullopt, std::nullopt, "mxfp4");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(fp[0], fp[1], bi, std::nullopt, std::nullopt, "mxfp4"); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(fp[0], fp[1], std::nullopt, 32, 3, "mxfp4"); }, "[dequantize]");
  expect_throws_naming<std::invalid_argument>([&] { dequantize(fp[0], fp[1], std::nullopt, 64, 4, "mxfp4"); }, "[dequantize]");

  expect_throws_naming<std::invalid_argument>([&] { to_fp8(array({1, 2}, int32)); }, "[to_fp8]");
  expect_throws_naming<std::invalid_argument>([&] { from_fp8(array({1.0f}), float32); }, "[from_fp8]");
  expect_throws_naming<std::invalid_argument>([&] { from_fp8(array({1}, uint8), int32); }, "[from_fp8]");
}

TEST(Fp8, KnownCodes) {
  EXPECT_EQ(fp8_code(1.0f), 0x38);
  EXPECT_EQ(fp8_code(-1.0f), 0xB8);
  EXPECT_EQ(fp8_code(448.0f), 0x7E);
  EXPECT_EQ(fp8_code(-448.0f), 0xFE);
  EXPECT_EQ(fp8_code(0.0f), 0x00);
  EXPECT_EQ(fp8_code(-0.0f), 0x80);
  EXPECT_EQ(fp8_code(0.5f), 0x30);
  EXPECT_EQ(fp8_code(1.125f), 0x39);
  EXPECT_EQ(fp8_code(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(fp8_code(std::ldexp(7.0f, -9)), 0x07);  // largest subnormal
  EXPECT_EQ(fp8_code(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  // Ties to even, normal and subnormal.
  EXPECT_EQ(fp8_code(1.0625f), 0x38);
  EXPECT_EQ(fp8_code(1.1875f), 0x3A);
  EXPECT_EQ(fp8_code(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(fp8_code(std::ldexp(3.0f, -10)), 0x02);
  // Saturation (MLX's CPU rule): from 448 up, inf and NaN give 0x7e; never the NaN code.
  EXPECT_EQ(fp8_code(447.0f), 0x7E);
  EXPECT_EQ(fp8_code(470.0f), 0x7E);
  EXPECT_EQ(fp8_code(480.0f), 0x7E);
  EXPECT_EQ(fp8_code(std::ldexp(1.0f, 100)), 0x7E);
  EXPECT_EQ(fp8_code(-std::numeric_limits<float>::quiet_NaN()), 0xFE);
  EXPECT_EQ(fp8_code(-600.0f), 0xFE);
  EXPECT_EQ(fp8_code(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(fp8_code(std::numeric_limits<float>::quiet_NaN()), 0x7E);

  EXPECT_EQ(fp8_value(0x38), 1.0f);
  EXPECT_EQ(fp8_value(0x7E), 448.0f);
  EXPECT_EQ(fp8_value(0xFE), -448.0f);
  EXPECT_EQ(fp8_value(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_value(0x08), std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(fp8_value(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_value(0xFF)));
  EXPECT_TRUE(std::signbit(fp8_value(0x80)));
}

TEST(Fp8, EveryCodeRoundTripsInEveryFloatDtype) {
  std::vector<uint8_t> all_codes;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) != 0x7F) all_codes.push_back(static_cast<uint8_t>(c));
  }
  auto codes = array(all_codes.begin(), {static_cast<int>(all_codes.size())}, uint8);
  for (auto dt : {float32, float16, bfloat16, float64}) {
    auto vals = from_fp8(codes, dt);
    EXPECT_EQ(vals.dtype(), dt);
    EXPECT_TRUE(array_equal(to_fp8(vals), codes).item<bool>());
  }
  // Values halfway between neighbours go to the even code; just above, to the upper one.
  auto lo = from_fp8(array({0x40, 0x41}, uint8), float32);
  auto mid = divide(add(slice(lo, {0}, {1}), slice(lo, {1}, {2})), array(2.0f));
  EXPECT_EQ(to_vector(to_fp8(mid))[0], 0x40);
}

TEST(QuantizeFp, Mxfp4AndNvfp4ExactOnLutValues) {
  std::vector<float> lut = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (std::string mode : {"mxfp4", "nvfp4"}) {
    int gs = mode == "mxfp4" ? 32 : 16;
    auto idx = randint({8, 128}, 0, 15, uint32);
    auto w = take(array(lut.begin(), {16}, float32), idx);
    // Every group holds a 6 so its scale is 1.
    w = where(equal(remainder(arange(128), array(gs)), array(0)), array(6.0f), w);
    auto r = quantize(w, std::nullopt, std::nullopt, mode);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].shape(), (Shape{8, 16}));
    EXPECT_EQ(r[1].shape(), (Shape{8, 128 / gs}));
    EXPECT_EQ(r[1].dtype(), uint8);
    auto back = dequantize(r[0], r[1], std::nullopt, std::nullopt, std::nullopt, mode);
    EXPECT_EQ(back.dtype(), bfloat16);
    EXPECT_TRUE(array_equal(back, w).item<bool>()) << mode;
    // Scaled by a power of two, the values stay exact and the scale moves.
    auto w8 = multiply(w, array(8.0f));
    auto r8 = quantize(w8, std::nullopt, std::nullopt, mode);
    EXPECT_TRUE(array_equal(dequantize(r8[0], r8[1], std::nullopt, std::nullopt, std::nullopt, mode, std::nullopt, float32), w8).item<bool>());
    // Zeros stay zeros.
    auto z = quantize(zeros({4, 64}), std::nullopt, std::nullopt, mode);
    EXPECT_TRUE(all(equal(dequantize(z[0], z[1], std::nullopt, std::nullopt, std::nullopt, mode), array(0.0f))).item<bool>());
  }
  // The first word of a mxfp4 row whose values are lut[i % 16]: nibble i is code i % 8... as
  // E2M1 codes are the LUT's indices.
  std::vector<float> row(32);
  for (int i = 0; i < 32; ++i) row[i] = lut[i % 16];
  auto r = quantize(array(row.begin(), {1, 32}, float32), std::nullopt, std::nullopt, "mxfp4");
  EXPECT_EQ(words_of(r[0]), (std::vector<uint32_t>{0x76543210u, 0xFEDCBA98u, 0x76543210u, 0xFEDCBA98u}));
  EXPECT_EQ(to_vector(r[1])[0], 127.0);  // E8M0 code of scale 1
}

TEST(QuantizeFp, Mxfp8AndGlobalScale) {
  auto w = astype(uniform({64, 64}, -1.0, 1.0), bfloat16);
  auto r = quantize(w, 32, 8, "mxfp8");
  EXPECT_EQ(r[0].shape(), (Shape{64, 16}));
  auto back = dequantize(r[0], r[1], std::nullopt, 32, 8, "mxfp8");
  EXPECT_TRUE(allclose(back, w, 1e-1, 1e-1).item<bool>());
  // Scale code 127 + round(log2(amax / 448)); values the nearest E4M3 of w / 2^(code - 127).
  auto wf = reshape(astype(w, float32), {64, 2, 32});
  auto amax = to_vector(max(abs(wf), -1));
  auto codes = to_vector(r[1]);
  for (size_t i = 0; i < amax.size(); ++i) {
    EXPECT_EQ(codes[i], 127 + std::nearbyint(std::log2(static_cast<float>(amax[i]) / 448.0f))) << i;
  }
  auto dec = expand_dims(power(array(2.0f), subtract(astype(r[1], float32), array(127.0f))), -1);
  auto expected = multiply(from_fp8(to_fp8(divide(wf, dec)), float32), dec);
  EXPECT_TRUE(array_equal(reshape(astype(back, float32), {64, 2, 32}), expected).item<bool>());

  std::vector<float> lut = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  auto wl = take(array(lut.begin(), {8}, float32), randint({16, 64}, 0, 7, uint32));
  wl = where(equal(remainder(arange(64), array(16)), array(0)), array(6.0f), wl);
  auto gs = max(abs(wl));
  auto q = quantize(wl, std::nullopt, std::nullopt, "nvfp4", gs);
  auto back_g = dequantize(q[0], q[1], std::nullopt, 16, 4, "nvfp4", gs, float32);
  EXPECT_TRUE(allclose(back_g, wl, 1e-5, 1e-5).item<bool>());
}

// MLX's ops_tests.cpp "test quantize dequantize", as GoogleTest.
TEST(Quantize, MlxOpsTestCase) {
  auto x = multiply(ones({128, 1}), expand_dims(arange(0, 512, float32), 0));
  for (int i = 2; i <= 8; i *= 2) {
    auto res = quantize(x, 128, i);
    EXPECT_EQ(res[0].shape(), (Shape{128, 512 / (32 / i)}));
    EXPECT_EQ(res[1].shape(), (Shape{128, 4}));
    auto x_hat = dequantize(res[0], res[1], res[2], 128, i);
    EXPECT_LE(max(abs(subtract(x, x_hat))).item<float>(), 127.0 / (1 << i));
  }
}
