// nuvec: quantize / dequantize (affine, mxfp4, mxfp8, nvfp4) and to_fp8 / from_fp8 as graphs
// of ordinary ops: the meaning a quantization kernel is tested against. Rules from MLX 0.32
// (mlx/ops.cpp affine_quantize, fp_quantize and their dequantize fallbacks; the CPU
// kernels in mlx/backend/cpu/quantized.cpp and the detail::ToFP8 / FromFP8 functors).
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/ops_common.h"
#include "quantized/quant_spec.h"

namespace nuvec {

namespace {

array u32(uint32_t v) {
  return array(v, uint32);
}
array f32(float v) {
  return array(v, float32);
}

// The shape with its last axis replaced by `last`, or split into (outer, inner).
Shape with_last(Shape shape, int last) {
  shape.back() = last;
  return shape;
}
Shape split_last(Shape shape, int outer, int inner) {
  shape.back() = outer;
  shape.push_back(inner);
  return shape;
}

// Packs the last axis of q (uint32 values below 2^bits, length a multiple of 32) into uint32
// words as one little-endian bitstream: value i occupies bits [i*bits, (i+1)*bits) of the
// row, and bit k of the row is bit k % 32 of word k / 32 (MLX's layout for every width).
array pack_bits(const array& q, int bits, StreamOrDevice s) {
  int n = q.shape(-1);
  if (32 % bits == 0) {
    int per_word = 32 / bits;
    auto shifts = left_shift(u32(1), arange(0, 32, bits, uint32, s), s);
    auto words = reshape(q, split_last(q.shape(), n / per_word, per_word), s);
    return sum(multiply(words, shifts, s), -1, false, s);
  }
  // Widths that straddle words: spread each value into its bits, regroup by 32, reassemble.
  auto bit = bitwise_and(right_shift(expand_dims(q, -1, s), arange(0, bits, 1, uint32, s), s), u32(1), s);
  auto stream = reshape(bit, split_last(q.shape(), n * bits / 32, 32), s);
  return sum(left_shift(stream, arange(0, 32, 1, uint32, s), s), -1, false, s);
}

// The inverse of pack_bits: the last axis of w (uint32 words) read as n = words * 32 / bits
// values of `bits` bits each, as uint32. For 3, 5 and 6 bits each block of 32 values spans
// `bits` words; value i of a block starts in word i*bits/32 at bit i*bits % 32 and may run
// into the next word.
array unpack_bits(const array& w, int bits, StreamOrDevice s) {
  int words = w.shape(-1);
  if (32 % bits == 0) {
    // Widths that divide 32 (2, 4, 8) never straddle words: value i of word j is bits
    // [i*bits, (i+1)*bits) of it. (Rows need not hold a multiple of 32 values: nvfp4 rows
    // of 48 values are 6 words.)
    int per_word = 32 / bits;
    auto shifts = arange(0, 32, bits, uint32, s);
    auto vals = bitwise_and(right_shift(expand_dims(w, -1, s), shifts, s), u32((1u << bits) - 1), s);
    return reshape(vals, with_last(w.shape(), words * per_word), s);
  }
  int blocks = words / bits;
  std::vector<uint32_t> lo_word(32), hi_word(32), lo_shift(32), hi_shift(32), hi_mask(32);
  for (int i = 0; i < 32; ++i) {
    int start = i * bits;
    int shift = start % 32;
    bool spills = shift + bits > 32;
    lo_word[i] = start / 32;
    lo_shift[i] = shift;
    hi_word[i] = spills ? start / 32 + 1 : start / 32;
    hi_shift[i] = spills ? 32 - shift : 0;
    hi_mask[i] = spills ? 0xFFFFFFFFu : 0u;
  }
  auto vec = [](const std::vector<uint32_t>& v) { return array(v.begin(), {32}, uint32); };
  auto blocked = reshape(w, split_last(w.shape(), blocks, bits), s);
  auto lo = right_shift(take(blocked, vec(lo_word), -1, s), vec(lo_shift), s);
  auto hi = bitwise_and(left_shift(take(blocked, vec(hi_word), -1, s), vec(hi_shift), s), vec(hi_mask), s);
  auto vals = bitwise_and(bitwise_or(lo, hi, s), u32((1u << bits) - 1), s);
  return reshape(vals, with_last(w.shape(), blocks * 32), s);
}

void check_float_input(const array& w, const char* op, const char* what) {
  if (!issubdtype(w.dtype(), floating)) {
    throw_invalid_argument(op, what, " must have a real floating dtype; got ", w.dtype(), ".");
  }
}

// MLX's affine rule per group: scale = (max - min) / (2^bits - 1) (at least 1e-7), signed
// so that the edge of larger magnitude (min or max) maps to an integer q0; when q0 != 0 the
// scale is refit to edge / q0 and the bias is the edge, so that 0 is represented exactly.
std::vector<array> affine_quantize(const array& w, int group_size, int bits, StreamOrDevice s) {
  int K = w.shape(-1);
  auto groups = reshape(w, split_last(w.shape(), K / group_size, group_size), s);
  auto n_bins = f32(static_cast<float>((1 << bits) - 1));
  auto zero = f32(0.0f);
  auto w_max = astype(max(groups, -1, true, s), float32, s);
  auto w_min = astype(min(groups, -1, true, s), float32, s);
  auto min_is_edge = greater(abs(w_min, s), abs(w_max, s), s);
  auto scale = maximum(divide(subtract(w_max, w_min, s), n_bins, s), f32(1e-7f), s);
  scale = where(min_is_edge, scale, negative(scale, s), s);
  auto edge = where(min_is_edge, w_min, w_max, s);
  auto q0 = round(divide(edge, scale, s), s);
  auto q0_zero = equal(q0, zero, s);
  scale = where(q0_zero, scale, divide(edge, q0, s), s);
  auto bias = where(q0_zero, zero, edge, s);
  auto q = clip(round(divide(subtract(groups, bias, s), scale, s), s), zero, n_bins, s);
  q = reshape(astype(q, uint32, s), w.shape(), s);
  auto sshape = with_last(w.shape(), K / group_size);
  return {
      pack_bits(q, bits, s),
      reshape(astype(scale, w.dtype(), s), sshape, s),
      reshape(astype(bias, w.dtype(), s), sshape, s)};
}

// E2M1 code of x rounded to nearest, ties to even (MLX's CPU to_fp4_e2m1): magnitudes
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 are codes 0..7, |x| > 5 saturates to 6, NaN is code 7; bit 3
// is the sign.
array to_fp4_codes(const array& x, StreamOrDevice s) {
  auto a = abs(x, s);
  auto code = zeros(x.shape(), uint32, s);
  auto step = [&](const array& passed) { code = add(code, astype(passed, uint32, s), s); };
  step(greater(a, f32(0.25f), s));
  step(greater_equal(a, f32(0.75f), s));
  step(greater(a, f32(1.25f), s));
  step(greater_equal(a, f32(1.75f), s));
  step(greater(a, f32(2.5f), s));
  step(greater_equal(a, f32(3.5f), s));
  step(greater(a, f32(5.0f), s));
  auto sign = left_shift(right_shift(view(astype(x, float32, s), uint32, s), u32(31), s), u32(3), s);
  return where(isnan(x, s), u32(7), bitwise_or(code, sign, s), s);
}

array fp4_values() {
  return array({0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f});
}

// The float32 value of every E4M3 (fn) code: 0x7f and 0xff are NaN, no infinities.
array fp8_values() {
  std::vector<float> v(256);
  for (int c = 0; c < 256; ++c) {
    int e = (c >> 3) & 0xF;
    int m = c & 7;
    float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                       : std::ldexp(1.0f + m / 8.0f, e - 7);
    if (e == 0xF && m == 7) mag = std::numeric_limits<float>::quiet_NaN();
    v[c] = (c & 0x80) ? -mag : mag;
  }
  return array(v.begin(), {256}, float32);
}

// The per-tensor encode factor of the fp modes with a global scale (MLX's CUDA kernels):
// 448 * 6 / global_scale, as a float32 scalar; 1 without one.
std::optional<array> global_encode(
    const std::optional<array>& global_scale,
    QuantMode m,
    const char* op,
    StreamOrDevice s) {
  if (!global_scale) return std::nullopt;
  if (m != QuantMode::Nvfp4) {
    throw_invalid_argument(op, "global_scale is only supported for the 'nvfp4' mode; got '", quant_mode_name(m), "'.");
  }
  if (global_scale->size() != 1) {
    throw_invalid_argument(op, "global_scale must have one element; got shape ", global_scale->shape(), ".");
  }
  check_float_input(*global_scale, op, "global_scale");
  // A zero amax (an all-zero tensor) would make the factor infinite and every scale 0 * inf =
  // NaN: it encodes as no global scale instead (the values are zeros either way).
  auto amax = astype(reshape(*global_scale, {}, s), float32, s);
  auto zero = equal(amax, f32(0.0f), s);
  return where(zero, f32(1.0f), divide(f32(448.0f * 6.0f), where(zero, f32(1.0f), amax, s), s), s);
}

// The scale of each group decoded from its uint8 code: E4M3 for nvfp4, 2^(code - 127) (E8M0)
// for the mx modes; float32, with the group axis appended.
array decode_scales(const array& codes, QuantMode m, StreamOrDevice s) {
  auto c = expand_dims(codes, -1, s);
  if (m == QuantMode::Nvfp4) return from_fp8(c, float32, s);
  auto value = power(f32(2.0f), subtract(astype(c, float32, s), f32(127.0f), s), s);
  return where(equal(c, array(uint8_t{255}, uint8), s), f32(std::numeric_limits<float>::quiet_NaN()), value, s);
}

// MLX's fp modes: per group amax / (6 or 448), times the global encode factor, stored as an
// E4M3 (nvfp4) or E8M0 (mx: round(log2), clamped to [-127, 127]) code; the values divided by
// the decoded scale and rounded to E2M1 or E4M3.
std::vector<array> fp_quantize(
    const array& w,
    QuantMode m,
    int group_size,
    int bits,
    const std::optional<array>& global_scale,
    StreamOrDevice s) {
  auto enc = global_encode(global_scale, m, "quantize", s);
  int K = w.shape(-1);
  auto groups = astype(reshape(w, split_last(w.shape(), K / group_size, group_size), s), float32, s);
  auto scale = divide(max(abs(groups, s), -1, false, s), f32(bits == 4 ? 6.0f : 448.0f), s);
  if (enc) scale = multiply(scale, *enc, s);
  // E8M0: 2^round(log2(scale)), exponents clamped to [-127, 127]; a group holding NaN gets
  // the format's NaN code 0xFF (so its values dequantize to NaN, as affine groups do).
  array codes = m == QuantMode::Nvfp4
      ? to_fp8(scale, s)
      : astype(
            where(isnan(scale, s), f32(255.0f),
                  add(where(equal(scale, f32(0.0f), s), f32(0.0f),
                            clip(round(log2(scale, s), s), f32(-127.0f), f32(127.0f), s), s),
                      f32(127.0f), s), s),
            uint8, s);
  auto dec = decode_scales(codes, m, s);
  auto scaled = where(equal(dec, f32(0.0f), s), f32(0.0f), divide(groups, dec, s), s);
  if (enc) scaled = multiply(scaled, *enc, s);
  auto q = bits == 4 ? to_fp4_codes(scaled, s) : astype(to_fp8(scaled, s), uint32, s);
  return {pack_bits(reshape(q, w.shape(), s), bits, s), codes};
}

// The checks MLX's dequantize makes on the packed matrix and its scales (and biases).
int dequantized_size(
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    int group_size,
    int bits) {
  const char* op = "dequantize";
  if (w.dtype() != uint32) {
    throw_invalid_argument(op, "w must have dtype uint32; got ", w.dtype(), ".");
  }
  if (w.ndim() < 2) {
    throw_invalid_argument(op, "w must have at least 2 dimensions; got shape ", w.shape(), ".");
  }
  auto same_batch = [&](const array& a) {
    return a.ndim() == w.ndim() && std::equal(w.shape().begin(), w.shape().end() - 1, a.shape().begin());
  };
  if (!same_batch(scales) || (biases && biases->shape() != scales.shape())) {
    throw_invalid_argument(
        op, "scales", biases ? " and biases" : "", " must match w's shape ", w.shape(),
        " but for the last axis; got ", scales.shape(), ".");
  }
  int64_t out = static_cast<int64_t>(w.shape(-1)) * 32;
  if (out % bits != 0 || out / bits != static_cast<int64_t>(scales.shape(-1)) * group_size) {
    throw_invalid_argument(
        op, "scales must have one entry per group of ", group_size, " values (w of shape ",
        w.shape(), " holds ", out / bits, " values of ", bits, " bits); got scales of shape ",
        scales.shape(), ".");
  }
  return static_cast<int>(out / bits);
}

} // namespace

std::vector<array> quantize(
    const array& w,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    const std::optional<array>& global_scale,
    StreamOrDevice s) {
  const char* op = "quantize";
  auto p = resolve_quant_spec(mode, group_size, bits, op);
  auto m = p.mode;
  check_float_input(w, op, "w");
  if (w.ndim() < 2) {
    throw_invalid_argument(op, "w must have at least 2 dimensions; got shape ", w.shape(), ".");
  }
  if (w.shape(-1) % p.group_size != 0) {
    throw_invalid_argument(
        op, "w's last axis must be divisible by the group size ", p.group_size, "; got shape ",
        w.shape(), ".");
  }
  if (m == QuantMode::Affine) {
    if (global_scale) {
      throw_invalid_argument(op, "global_scale must be absent for the 'affine' mode.");
    }
    return affine_quantize(w, p.group_size, p.bits, s);
  }
  return fp_quantize(w, m, p.group_size, p.bits, global_scale, s);
}

array dequantize(
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    const std::optional<array>& global_scale,
    std::optional<Dtype> dtype,
    StreamOrDevice s) {
  const char* op = "dequantize";
  auto m = parse_quant_mode(mode, op);
  if (dtype && !issubdtype(*dtype, floating)) {
    throw_invalid_argument(op, "dtype must be a real floating dtype; got ", *dtype, ".");
  }
  if (m == QuantMode::Affine && !biases) {
    throw_invalid_argument(op, "biases must be given for the 'affine' mode.");
  }
  if (m != QuantMode::Affine && biases) {
    throw_invalid_argument(op, "biases must be absent for the '", mode, "' mode.");
  }
  auto p = resolve_quant_spec(mode, group_size, bits, op);
  int n = dequantized_size(w, scales, biases, p.group_size, p.bits);
  auto groups_shape = split_last(w.shape(), n / p.group_size, p.group_size);
  auto out_shape = with_last(w.shape(), n);
  auto vals = reshape(unpack_bits(w, p.bits, s), groups_shape, s);
  if (m == QuantMode::Affine) {
    if (global_scale) {
      throw_invalid_argument(op, "global_scale must be absent for the 'affine' mode.");
    }
    if (!issubdtype(scales.dtype(), floating) || !issubdtype(biases->dtype(), floating)) {
      throw_invalid_argument(
          op, "scales and biases must have real floating dtypes; got ", scales.dtype(), " and ",
          biases->dtype(), ".");
    }
    auto t = promote_types(scales.dtype(), biases->dtype());
    // scale * q + bias in float32 (float64 for float64), rounded once to the result: in a half
    // dtype, scale * q alone can overflow (a group from -60000 to 60000 at 8 bits), and the
    // products' kernels round each weight once.
    const Dtype acc = t == float64 ? float64 : float32;
    auto out = add(
        multiply(astype(vals, acc, s), expand_dims(astype(scales, acc, s), -1, s), s),
        expand_dims(astype(*biases, acc, s), -1, s), s);
    return astype(reshape(out, out_shape, s), dtype.value_or(t), s);
  }
  if (scales.dtype() != uint8) {
    throw_invalid_argument(op, "scales must have dtype uint8 for the '", mode, "' mode; got ", scales.dtype(), ".");
  }
  auto enc = global_encode(global_scale, m, op, s);
  auto values = p.bits == 4 ? take(fp4_values(), vals, s) : from_fp8(astype(vals, uint8, s), float32, s);
  auto out = multiply(values, decode_scales(scales, m, s), s);
  if (enc) out = divide(out, *enc, s);
  return astype(reshape(out, out_shape, s), dtype.value_or(bfloat16), s);
}

array to_fp8(array x, StreamOrDevice s) {
  check_float_input(x, "to_fp8", "x");
  // MLX's detail::ToFP8 on the float32 bits: magnitudes below 2^-6 (E4M3's smallest normal)
  // are rounded to multiples of 2^-9 by adding 2^14 in float32; larger ones drop 20 mantissa
  // bits with round-to-nearest-even; from 448 up (and NaN, inf) the result is 0x7e (448).
  auto bits = view(astype(x, float32, s), uint32, s);
  auto sign = bitwise_and(bits, u32(0x80000000u), s);
  auto mag = bitwise_xor(bits, sign, s);
  auto denorm = u32(141u << 23);
  auto low = subtract(view(add(view(mag, float32, s), view(denorm, float32, s), s), uint32, s), denorm, s);
  auto odd = bitwise_and(right_shift(mag, u32(20), s), u32(1), s);
  auto high = right_shift(add(add(mag, u32((static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFFu), s), odd, s), u32(20), s);
  auto code = where(less(mag, u32(121u << 23), s), low, high, s);
  code = where(greater_equal(mag, u32(543u << 21), s), u32(0x7E), code, s);
  return astype(bitwise_or(code, right_shift(sign, u32(24), s), s), uint8, s);
}

array from_fp8(array x, Dtype dtype, StreamOrDevice s) {
  if (x.dtype() != uint8) {
    throw_invalid_argument("from_fp8", "x must have dtype uint8; got ", x.dtype(), ".");
  }
  if (!issubdtype(dtype, floating)) {
    throw_invalid_argument("from_fp8", "dtype must be a real floating dtype; got ", dtype, ".");
  }
  return astype(take(fp8_values(), x, s), dtype, s);
}

} // namespace nuvec
