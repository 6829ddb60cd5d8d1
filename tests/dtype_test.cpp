// nuvec tests: dtypes, categories, the promotion table (against MLX's table written out
// here independently of the rules in src/core/dtype.cpp), and the 16-bit float types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "nuvec/nuvec.h"

using namespace nuvec;

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(size_of(bool_), 1);
  EXPECT_EQ(size_of(uint16), 2);
  EXPECT_EQ(size_of(int64), 8);
  EXPECT_EQ(size_of(float16), 2);
  EXPECT_EQ(size_of(bfloat16), 2);
  EXPECT_EQ(size_of(complex64), 8);
  EXPECT_EQ(dtype_name(bfloat16), "bfloat16");
  std::ostringstream os;
  os << float32 << " " << bool_;
  EXPECT_EQ(os.str(), "float32 bool");
}

TEST(Dtype, PromotionMatchesMlxTable) {
  // Rows and columns in MLX's order: b u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64 bf16 c64.
  const Dtype b = bool_, u8 = uint8, u16 = uint16, u32 = uint32, u64 = uint64, i8 = int8,
              i16 = int16, i32 = int32, i64 = int64, f16 = float16, f32 = float32,
              f64 = float64, bf = bfloat16, c = complex64;
  const Dtype table[14][14] = {
      {b, u8, u16, u32, u64, i8, i16, i32, i64, f16, f32, f64, bf, c},
      {u8, u8, u16, u32, u64, i16, i16, i32, i64, f16, f32, f64, bf, c},
      {u16, u16, u16, u32, u64, i32, i32, i32, i64, f16, f32, f64, bf, c},
      {u32, u32, u32, u32, u64, i64, i64, i64, i64, f16, f32, f64, bf, c},
      {u64, u64, u64, u64, u64, f32, f32, f32, f32, f16, f32, f64, bf, c},
      {i8, i16, i32, i64, f32, i8, i16, i32, i64, f16, f32, f64, bf, c},
      {i16, i16, i32, i64, f32, i16, i16, i32, i64, f16, f32, f64, bf, c},
      {i32, i32, i32, i64, f32, i32, i32, i32, i64, f16, f32, f64, bf, c},
      {i64, i64, i64, i64, f32, i64, i64, i64, i64, f16, f32, f64, bf, c},
      {f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f32, f64, f32, c},
      {f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f64, f32, c},
      {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, c},
      {bf, bf, bf, bf, bf, bf, bf, bf, bf, f32, f32, f64, bf, c},
      {c, c, c, c, c, c, c, c, c, c, c, c, c, c},
  };
  for (int i = 0; i < 14; ++i) {
    for (int j = 0; j < 14; ++j) {
      EXPECT_EQ(promote_types(all_dtypes[i], all_dtypes[j]), table[i][j])
          << all_dtypes[i] << " with " << all_dtypes[j];
    }
  }
}

TEST(Dtype, Categories) {
  EXPECT_TRUE(issubdtype(float32, floating));
  EXPECT_TRUE(issubdtype(bfloat16, inexact));
  EXPECT_TRUE(issubdtype(complex64, complexfloating));
  EXPECT_FALSE(issubdtype(complex64, floating));
  EXPECT_TRUE(issubdtype(int8, signedinteger));
  EXPECT_TRUE(issubdtype(uint32, integer));
  EXPECT_TRUE(issubdtype(uint32, number));
  EXPECT_FALSE(issubdtype(uint32, signedinteger));
  EXPECT_FALSE(issubdtype(bool_, number));
  EXPECT_TRUE(issubdtype(bool_, generic));
  EXPECT_TRUE(issubdtype(floating, inexact));
  EXPECT_TRUE(issubdtype(signedinteger, integer));
  EXPECT_FALSE(issubdtype(integer, signedinteger));
  EXPECT_FALSE(issubdtype(inexact, float32));
  EXPECT_TRUE(issubdtype(int16, int16));
  EXPECT_FALSE(issubdtype(int16, int32));
}

TEST(Dtype, ArrayProtocol) {
  EXPECT_EQ(dtype_to_array_protocol(float32), "<f4");
  EXPECT_EQ(dtype_to_array_protocol(bool_), "|b1");
  EXPECT_EQ(dtype_to_array_protocol(uint8), "|u1");
  for (auto d : all_dtypes) {
    EXPECT_EQ(dtype_from_array_protocol(dtype_to_array_protocol(d)), d);
  }
  EXPECT_THROW(dtype_from_array_protocol("<x9"), std::invalid_argument);
}

// Reference conversion: exact rounding done in double (binary16 has 11 significant bits).
static double round_to_half(double x) {
  if (std::isnan(x)) return x;
  double ax = std::abs(x);
  if (ax >= 65520.0) return std::copysign(INFINITY, x);
  int e;
  std::frexp(ax, &e); // ax = m * 2^e, m in [0.5, 1)
  int exp = std::max(e - 1, -14); // subnormals share the exponent of 2^-14
  double quantum = std::ldexp(1.0, exp - 10);
  double q = ax / quantum;
  double r = std::nearbyint(q); // ties to even under the default rounding mode
  return std::copysign(r * quantum, x);
}

TEST(HalfTypes, Float16RoundTripAndRounding) {
  // Every finite half converts to float and back exactly.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    auto h = float16_t::from_bits(static_cast<uint16_t>(bits));
    float f = h;
    if (std::isnan(f)) continue;
    EXPECT_EQ(float16_t(f).bits_, bits);
  }
  std::mt19937 gen(std::random_device{}());
  std::uniform_real_distribution<double> mant(0.5, 1.0);
  std::uniform_int_distribution<int> ex(-26, 17);
  for (int i = 0; i < 20000; ++i) {
    float x = static_cast<float>(std::ldexp(mant(gen), ex(gen)) * (i % 2 ? -1 : 1));
    EXPECT_EQ(static_cast<double>(static_cast<float>(float16_t(x))), round_to_half(x)) << x;
  }
  EXPECT_TRUE(std::isinf(static_cast<float>(float16_t(70000.0f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(float16_t(NAN))));
  EXPECT_EQ(static_cast<float>(float16_t(65504.0f)), 65504.0f);
}

TEST(HalfTypes, BFloat16Rounding) {
  // bfloat16 keeps the top 16 bits of a float, rounding to nearest even.
  EXPECT_EQ(bfloat16_t(1.0f).bits_, 0x3f80);
  float tie_down, tie_up;
  uint32_t u = 0x3f808000; // exactly halfway between 0x3f80 and 0x3f81 -> even (0x3f80)
  std::memcpy(&tie_down, &u, 4);
  u = 0x3f818000; // halfway between 0x3f81 and 0x3f82 -> even (0x3f82)
  std::memcpy(&tie_up, &u, 4);
  EXPECT_EQ(bfloat16_t(tie_down).bits_, 0x3f80);
  EXPECT_EQ(bfloat16_t(tie_up).bits_, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16_t(NAN))));
  EXPECT_FLOAT_EQ(static_cast<float>(bfloat16_t(3.0f) * bfloat16_t(2.0f)), 6.0f);
}
