// nuvec: reading quantized weights, one text for the CPU and CUDA kernels (MLX's packing and
// number formats; the graphs of src/ops/quantized.cpp are the reference). A row of a packed
// matrix is one little-endian bitstream of `bits`-bit codes: code j occupies bits
// [j*bits, (j+1)*bits) of the row, bit k of the row being bit k % 32 of word k / 32, so 3-,
// 5- and 6-bit codes may straddle two words.
#pragma once

#include <cstdint>

#include "backend/common/math/config.h"
#include "backend/common/math/functions.h"
#include "quantized/quant_spec.h"

NUVEC_MATH_BEGIN

/// The float32 whose bits are `b`.
NUVEC_HD inline float float_from_bits(uint32_t b) {
  return __builtin_bit_cast(float, b);
}

/// Code j of a packed row of `bits`-bit codes (any width 1..8).
NUVEC_HD inline uint32_t quant_code(const uint32_t* row, int64_t j, int bits) {
  const int64_t p = j * bits;
  const int64_t word = p >> 5;
  const int shift = static_cast<int>(p & 31);
  uint32_t v = row[word] >> shift;
  if (shift + bits > 32) v |= row[word + 1] << (32 - shift);
  return v & ((1u << bits) - 1u);
}

/// The value of an E2M1 (fp4) code: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign.
NUVEC_HD inline float fp4_e2m1_value(uint32_t code) {
  const uint32_t m = code & 7u;
  // 0.5 * m for m < 4 (0, 0.5, 1, 1.5); else 2^(m/2 - 1) * (1 + (m & 1) / 2): 2, 3, 4, 6.
  const float mag = m < 4u ? 0.5f * static_cast<float>(m)
                           : static_cast<float>(1u << ((m >> 1) - 1u)) * (1.0f + 0.5f * static_cast<float>(m & 1u));
  return (code & 8u) ? -mag : mag;
}

/// The value of an E4M3 (fn) code: bias 7, subnormals m * 2^-9, 0x7f/0xff NaN, no infinity.
NUVEC_HD inline float fp8_e4m3_value(uint32_t code) {
  const uint32_t e = (code >> 3) & 15u;
  const uint32_t m = code & 7u;
  float mag;
  if (e == 0u) {
    mag = static_cast<float>(m) * 0.001953125f; // 2^-9
  } else if (e == 15u && m == 7u) {
    mag = float_from_bits(0x7FC00000u);
  } else {
    mag = float_from_bits(((e + 120u) << 23) | (m << 20)); // (1 + m/8) * 2^(e - 7)
  }
  return (code & 0x80u) ? -mag : mag;
}

/// The value of an E8M0 scale code: 2^(code - 127) (code 0 is 2^-127); 0xFF is NaN (OCP MX).
NUVEC_HD inline float e8m0_value(uint32_t code) {
  if (code == 255u) return float_from_bits(0x7FC00000u);
  return code == 0u ? float_from_bits(0x00400000u) : float_from_bits(code << 23);
}

/// The scale of a group of an fp mode from its uint8 code: E4M3 (nvfp4) or E8M0 (mx modes).
NUVEC_HD inline float fp_scale_value(QuantMode mode, uint32_t code) {
  return mode == QuantMode::Nvfp4 ? fp8_e4m3_value(code) : e8m0_value(code);
}

/// The unscaled value of a code of an fp mode: E2M1 for 4 bits, E4M3 for 8.
NUVEC_HD inline float fp_code_value(int bits, uint32_t code) {
  return bits == 4 ? fp4_e2m1_value(code) : fp8_e4m3_value(code);
}

/// The E4M3 (fn) code of x (MLX's detail::ToFP8, the graph of to_fp8 in
/// src/ops/quantized.cpp, bit for bit): magnitudes below 2^-6 rounded to multiples of 2^-9
/// (by adding 2^14 in float32), larger ones to 3 mantissa bits, nearest-even; from 448 up,
/// infinities and NaN give 0x7e (448) with x's sign bit. A code in [0, 255].
NUVEC_HD inline uint32_t fp8_e4m3_code(float x) {
  const uint32_t b = __builtin_bit_cast(uint32_t, x);
  const uint32_t sign = b & 0x80000000u;
  const uint32_t mag = b ^ sign;
  uint32_t code;
  if (mag >= (543u << 21)) { // 448.0f; inf and NaN compare above it as integers
    code = 0x7Eu;
  } else if (mag < (121u << 23)) { // below 2^-6: the subnormal codes
    const float denorm = float_from_bits(141u << 23); // 2^14
    code = __builtin_bit_cast(uint32_t, float_from_bits(mag) + denorm) - (141u << 23);
  } else {
    const uint32_t odd = (mag >> 20) & 1u;
    code = (mag + ((static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFFu) + odd) >> 20;
  }
  return code | (sign >> 24);
}

/// The E2M1 (fp4) code of x (to_fp4_codes in src/ops/quantized.cpp, MLX's to_fp4_e2m1):
/// the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6, ties to the even code, |x| > 5 saturating to
/// 6; bit 3 is x's sign bit (so -0 is 8); NaN is 7. A code in [0, 15].
NUVEC_HD inline uint32_t fp4_e2m1_code(float x) {
  if (x != x) return 7u;
  const float a = x < 0.0f ? -x : x;
  const uint32_t code = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
      static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
      static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
      static_cast<uint32_t>(a > 5.0f);
  return code | ((__builtin_bit_cast(uint32_t, x) >> 31) << 3);
}

/// The uint8 scale code of a group of an fp mode whose scale (amax / 6 or amax / 448) is
/// `scale` (fp_quantize in src/ops/quantized.cpp, no global scale): E4M3 for nvfp4; for the
/// mx modes E8M0, 127 + round-half-even(log2(scale)) clamped to [-127, 127], 127 for 0.
NUVEC_HD inline uint32_t fp_scale_code(QuantMode mode, float scale) {
  if (mode == QuantMode::Nvfp4) return fp8_e4m3_code(scale);
  if (scale == 0.0f) return 127u;
  // The graph's rule (src/ops/quantized.cpp): round-half-even of the float32 log2, clamped;
  // NaN (a NaN in the group) is the NaN code 0xFF. log2 is taken in double and rounded once
  // to float, the correctly rounded float log2 that the host's log2f gives (the device's
  // log2f is off by up to an ulp, which would move values landing on n + 0.5).
  if (scale != scale) return 255u;
  float e = math::rint(static_cast<float>(::log2(static_cast<double>(scale))));
  e = e > 127.0f ? 127.0f : (e > -127.0f ? e : -127.0f);
  return static_cast<uint32_t>(static_cast<int>(e) + 127);
}

/// The value x takes after quantizing with a group scale decoded as `scale` (nonzero: a
/// zero scale gives 0): the E2M1 (bits 4) or E4M3 (bits 8) code of x / scale, its value,
/// times scale. Exact in float32.
NUVEC_HD inline float fp_requantize(int bits, float x, float scale) {
  if (scale == 0.0f) return 0.0f;
  const float v = x / scale;
  return fp_code_value(bits, bits == 4 ? fp4_e2m1_code(v) : fp8_e4m3_code(v)) * scale;
}

NUVEC_MATH_END
