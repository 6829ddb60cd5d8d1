// nuvec tests: quantize against known answers computed outside nuvec
// (tests/data/make_quantized_known_answers.py: NumPy, MLX 0.32's rules) bit for bit, for every
// affine group size and bit width and for mxfp4, mxfp8 and nvfp4; dequantize of those
// answers; and the round-trip error dequantize(quantize(w)) - w within each format's bound,
// on the fixed matrix and on random ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "backend/common/math/quant.h"
#include "data/quantized_known_answers.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
namespace ka = nuvec::testing::quantized_known_answers;

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

array known_input() {
  std::vector<float> v(ka::kRows * ka::kCols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = from_bits(ka::kInput[i]);
  return array(v.begin(), {ka::kRows, ka::kCols}, float32);
}

// The elements of an integer array (uint32 words, uint8 codes) or the float32 bits of a
// float32 array, row-major.
std::vector<uint32_t> words(const array& a) {
  auto v = to_vector(a);
  return std::vector<uint32_t>(v.begin(), v.end());
}
std::vector<uint32_t> float_bits(const array& a) {
  EXPECT_EQ(a.dtype(), float32);
  std::vector<uint32_t> out;
  for (double d : to_vector(a)) out.push_back(to_bits(static_cast<float>(d)));
  return out;
}

// Compares two arrays of words; one failure naming the first mismatch and the count.
void expect_same(const std::vector<uint32_t>& got, const uint32_t* expected, size_t n, const char* what) {
  ASSERT_EQ(got.size(), n) << what;
  size_t bad = 0, first = n;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != expected[i]) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad) {
    ADD_FAILURE() << what << ": " << bad << " of " << n << " differ; first at " << first << ": got 0x"
                  << std::hex << got[first] << ", expected 0x" << expected[first];
  }
}

std::string label(const ka::Case& c) {
  std::ostringstream s;
  s << c.mode << " group_size " << c.group_size << " bits " << c.bits;
  return s.str();
}

QuantMode mode_of(const std::string& m) {
  if (m == "mxfp4") return QuantMode::Mxfp4;
  if (m == "mxfp8") return QuantMode::Mxfp8;
  if (m == "nvfp4") return QuantMode::Nvfp4;
  return QuantMode::Affine;
}

// The non-negative values of an fp element format (E2M1 or E4M3 without NaN), ascending.
std::vector<double> format_values(int bits) {
  std::vector<double> v;
  const uint32_t n = bits == 4 ? 8 : 0x7F;
  for (uint32_t c = 0; c < n; ++c) v.push_back(math::fp_code_value(bits, c));
  return v;
}

// The largest error rounding |y| to the nearest format value can make: half the gap
// between the values around it, or the excess over the largest value (saturation).
double fp_bound(double y, const std::vector<double>& values) {
  const double a = std::abs(y);
  if (a >= values.back()) return a - values.back();
  auto hi = std::lower_bound(values.begin(), values.end(), a);
  if (*hi == a) return 0.0;
  return (*hi - *(hi - 1)) / 2;
}

// Checks |dequantize(quantize(w)) - w| per element against the format's bound: affine
// |scale| / 2, and |scale| for codes at either end of the range (MLX's fit makes the edge
// of larger magnitude exact and refits the scale, which can push the other edge up to one
// step past the range, where it is clipped); fp modes the rounding bound of the element
// format times the group's decoded scale. Plus a few float32 ulps for the arithmetic.
void check_round_trip(const array& w, const std::string& mode, int group_size, int bits) {
  SCOPED_TRACE(mode + " group_size " + std::to_string(group_size) + " bits " + std::to_string(bits));
  auto q = quantize(w, group_size, bits, mode);
  std::optional<array> biases;
  if (q.size() > 2) biases = q[2];
  auto deq = dequantize(q[0], q[1], biases, group_size, bits, mode, std::nullopt, float32);
  ASSERT_EQ(deq.shape(), w.shape());
  auto wv = to_vector(w), dv = to_vector(deq), sv = to_vector(q[1]);
  auto packed = words(q[0]);
  std::vector<double> bv = biases ? to_vector(*biases) : std::vector<double>();
  const int K = w.shape(-1);
  const int words_per_row = K * bits / 32;
  const auto values = format_values(bits);
  const QuantMode m = mode_of(mode);
  const uint32_t top = (1u << bits) - 1;
  int worst_at = -1;
  double worst = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < wv.size(); ++i) {
    const size_t row = i / K, col = i % K, g = i / group_size;
    const uint32_t code = math::quant_code(&packed[row * words_per_row], static_cast<int64_t>(col), bits);
    double bound;
    if (m == QuantMode::Affine) {
      const double step = std::abs(sv[g]);
      bound = (code == 0 || code == top) ? step : step / 2;
      bound += 4 * std::ldexp(std::abs(wv[i]) + std::abs(bv[g]), -24);
    } else {
      // A zero scale (nvfp4's all-zero group) leaves only exact zeros.
      const double s = math::fp_scale_value(m, static_cast<uint32_t>(sv[g]));
      bound = (s == 0 ? 0.0 : s * fp_bound(wv[i] / s, values)) + 2 * std::ldexp(std::abs(wv[i]), -24);
    }
    const double err = std::abs(dv[i] - wv[i]);
    if (!(err <= bound)) {
      if (bad++ == 0) worst_at = static_cast<int>(i);
    }
    worst = std::max(worst, err);
  }
  if (bad) {
    ADD_FAILURE() << bad << " elements past the bound; first at " << worst_at << ": w " << wv[worst_at]
                  << ", dequantized " << dv[worst_at] << ", scale " << sv[worst_at / group_size];
  }
}

} // namespace

TEST(QuantizedKnownAnswers, QuantizeMatchesBitForBit) {
  auto w = known_input();
  for (const auto& c : ka::kCases) {
    SCOPED_TRACE(label(c));
    auto q = quantize(w, c.group_size, c.bits, c.mode);
    const bool affine = c.biases != nullptr;
    ASSERT_EQ(q.size(), affine ? 3u : 2u);
    EXPECT_EQ(q[0].dtype(), uint32);
    EXPECT_EQ(q[0].shape(), (Shape{ka::kRows, ka::kCols * c.bits / 32}));
    EXPECT_EQ(q[1].shape(), (Shape{ka::kRows, ka::kCols / c.group_size}));
    expect_same(words(q[0]), c.words, c.n_words, "words");
    if (affine) {
      EXPECT_EQ(q[1].dtype(), float32);
      EXPECT_EQ(q[2].dtype(), float32);
      expect_same(float_bits(q[1]), c.scales, c.n_groups, "scales");
      expect_same(float_bits(q[2]), c.biases, c.n_groups, "biases");
    } else {
      EXPECT_EQ(q[1].dtype(), uint8);
      expect_same(words(q[1]), c.scales, c.n_groups, "scale codes");
    }
  }
}

// dequantize of the known words, scales and biases (independently of quantize): fp modes
// exactly (every E2M1 or E4M3 value times an E8M0 or E4M3 scale is a float32, and a
// bfloat16), affine within an ulp of code * scale + bias.
TEST(QuantizedKnownAnswers, DequantizeOfKnownAnswers) {
  for (const auto& c : ka::kCases) {
    SCOPED_TRACE(label(c));
    const int words_per_row = ka::kCols * c.bits / 32;
    const int groups_per_row = ka::kCols / c.group_size;
    array wq(c.words, {ka::kRows, words_per_row}, uint32);
    const bool affine = c.biases != nullptr;
    if (affine) {
      std::vector<float> s(c.n_groups), b(c.n_groups);
      for (int g = 0; g < c.n_groups; ++g) {
        s[g] = from_bits(c.scales[g]);
        b[g] = from_bits(c.biases[g]);
      }
      array scales(s.begin(), {ka::kRows, groups_per_row}, float32);
      array biases(b.begin(), {ka::kRows, groups_per_row}, float32);
      auto deq = dequantize(wq, scales, biases, c.group_size, c.bits, c.mode);
      EXPECT_EQ(deq.dtype(), float32);
      std::vector<double> expected(ka::kRows * ka::kCols);
      std::vector<double> tol(expected.size());
      for (int r = 0; r < ka::kRows; ++r) {
        for (int k = 0; k < ka::kCols; ++k) {
          const uint32_t q = math::quant_code(&c.words[r * words_per_row], k, c.bits);
          const int g = r * groups_per_row + k / c.group_size;
          const double prod = static_cast<double>(q) * s[g];
          expected[r * ka::kCols + k] = prod + b[g];
          tol[r * ka::kCols + k] = std::ldexp(std::abs(prod) + std::abs(b[g]), -23);
        }
      }
      auto got = to_vector(deq);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], expected[i], tol[i]) << "at " << i;
      }
    } else {
      std::vector<uint8_t> codes(c.n_groups);
      for (int g = 0; g < c.n_groups; ++g) codes[g] = static_cast<uint8_t>(c.scales[g]);
      array scales(codes.begin(), {ka::kRows, groups_per_row}, uint8);
      auto deq32 = dequantize(wq, scales, std::nullopt, c.group_size, c.bits, c.mode, std::nullopt, float32);
      expect_same(float_bits(deq32), c.dequantized, ka::kRows * ka::kCols, "dequantized");
      // The default dtype is bfloat16 (MLX's); every value here is one exactly.
      auto deq16 = dequantize(wq, scales, std::nullopt, c.group_size, c.bits, c.mode);
      EXPECT_EQ(deq16.dtype(), bfloat16);
      expect_same(float_bits(astype(deq16, float32)), c.dequantized, ka::kRows * ka::kCols, "dequantized bf16");
    }
  }
}

TEST(QuantizedKnownAnswers, RoundTripWithinTheFormatsBounds) {
  auto fixed = known_input();
  // Random rows of odd batch shape, normal with a few large outliers per row.
  auto random = multiply(randn({3, 5, 256}, float32), array(0.7f));
  random = where(greater(abs(randn({3, 5, 256}, float32)), array(2.8f)), multiply(random, array(9.0f)), random);
  for (const auto& w : {fixed, random}) {
    for (int g : {32, 64, 128}) {
      for (int b : {2, 3, 4, 5, 6, 8}) check_round_trip(w, "affine", g, b);
    }
    check_round_trip(w, "mxfp4", 32, 4);
    check_round_trip(w, "mxfp8", 32, 8);
    check_round_trip(w, "nvfp4", 16, 4);
  }
}
