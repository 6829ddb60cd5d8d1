// nuvec: dequantizing packed weights on the device, 32 codes at a time into packed pairs of
// float16 / bfloat16 (the B operand of the tensor-core products, qmm.cu). Meaning: MLX's
// packing and number formats as src/backend/common/math/quant.h states them (this file is
// its fast device form and must agree with it element for element, up to the final
// rounding to T). A "unit" is 32 consecutive codes of one row, `bits` 32-bit words (bits in
// {2, 4, 8}: a unit never straddles a word boundary); its value pairs come out in row order,
// pair i holding codes 2i (low half) and 2i + 1. Scales and biases are given per half unit
// (16 codes): the group sizes are 16 or more, so each half lies in one group.
//
// Fast paths (integer codes exactly into T's mantissa with a magic exponent, then one fused
// multiply-add in T2, so each value is rounded once, as fmaf then rounding would):
//   affine 4 bits, both types: 0x6400 | q is 1024 + q in float16, 0x4300 | q is 128 + q in
//   bfloat16 (q < 16 fits either mantissa);
//   affine 8 bits, float16: 0x6400 | q (q < 256 fits float16's 10 mantissa bits).
// Elsewhere (affine 2 bits, affine 8 bits in bfloat16, the fp modes) values go through
// float32: q | 0x4b000000 is 2^23 + q; E2M1 codes map onto float16 bits exactly (value =
// half(sign << 15 | em << 9) * 2^14), E4M3 by the hardware's cvt to f16x2 (sm_89+), then a
// float32 multiply by the scale and one rounding to T.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/device/mma.cuh"
#include "quantized/quant_spec.h"

namespace nuvec::cu::dq {

/// Byte permute (PTX prmt.b32): result byte k is byte sel[4k..4k+3] of the 8 bytes {b:a}.
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

template <typename T>
struct Pair; // T2 arithmetic on a packed uint32 pair

template <>
struct Pair<__half> {
  static constexpr uint32_t kMagic = 0x64006400u; // 1024 in each half
  __device__ static uint32_t of(float v) {
    const __half2 h = __float2half2_rn(v);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  /// (p - magic) * s + b on each half (exact subtraction, one rounding).
  __device__ static uint32_t fma_unbias(uint32_t p, uint32_t s, uint32_t b) {
    const uint32_t m = kMagic;
    const __half2 q = __hsub2(*reinterpret_cast<const __half2*>(&p), *reinterpret_cast<const __half2*>(&m));
    const __half2 r = __hfma2(q, *reinterpret_cast<const __half2*>(&s), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};

template <>
struct Pair<__nv_bfloat16> {
  static constexpr uint32_t kMagic = 0x43004300u; // 128 in each half
  __device__ static uint32_t of(float v) {
    const __nv_bfloat162 h = __float2bfloat162_rn(v);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ static uint32_t fma_unbias(uint32_t p, uint32_t s, uint32_t b) {
    const uint32_t m = kMagic;
    const __nv_bfloat162 q =
        __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&p), *reinterpret_cast<const __nv_bfloat162*>(&m));
    const __nv_bfloat162 r = __hfma2(
        q, *reinterpret_cast<const __nv_bfloat162*>(&s), *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};

/// A pair of float16 values as float32.
__device__ __forceinline__ float2 half2_bits_to_float2(uint32_t p) {
  return __half22float2(*reinterpret_cast<const __half2*>(&p));
}

/// Whether dequant_unit covers (mode, bits): affine 2, 4, 8 bits and the three fp modes.
constexpr bool unit_covers(QuantMode mode, int bits) {
  return mode == QuantMode::Affine ? (bits == 2 || bits == 4 || bits == 8)
                                   : (bits == (mode == QuantMode::Mxfp8 ? 8 : 4));
}

/// One unit of 32 codes (w: its BITS words) into 16 packed T pairs (out, row order).
/// Affine: value = s * q + b; fp modes: value = code_value(q) * s (b unused). s_lo/b_lo
/// apply to codes 0..15, s_hi/b_hi to 16..31 (float32; affine scales and biases are T
/// values, so converting them back to T is exact).
template <typename T, QuantMode MODE, int BITS>
__device__ __forceinline__ void dequant_unit(
    const uint32_t (&w)[BITS], float s_lo, float b_lo, float s_hi, float b_hi, uint32_t (&out)[16]) {
  static_assert(unit_covers(MODE, BITS), "dequant_unit: affine 2/4/8 bits or an fp mode");
  constexpr bool kHalf = std::is_same_v<T, __half>;
  if constexpr (MODE == QuantMode::Affine && BITS == 4) {
    const uint32_t s2[2] = {Pair<T>::of(s_lo), Pair<T>::of(s_hi)};
    const uint32_t b2[2] = {Pair<T>::of(b_lo), Pair<T>::of(b_hi)};
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {
      const uint32_t w4 = w[wi] >> 4;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // Byte i of the word holds codes 8wi + 2i (low nibble) and 8wi + 2i + 1 (high).
        const uint32_t p = (prmt(w[wi], w4, uint32_t(i) | (uint32_t(4 + i) << 8)) & 0x000F000Fu) | Pair<T>::kMagic;
        out[wi * 4 + i] = Pair<T>::fma_unbias(p, s2[wi / 2], b2[wi / 2]);
      }
    }
  } else if constexpr (MODE == QuantMode::Affine && BITS == 8 && kHalf) {
    const uint32_t s2[2] = {Pair<T>::of(s_lo), Pair<T>::of(s_hi)};
    const uint32_t b2[2] = {Pair<T>::of(b_lo), Pair<T>::of(b_hi)};
#pragma unroll
    for (int wi = 0; wi < 8; ++wi) {
      out[wi * 2] = Pair<T>::fma_unbias(prmt(w[wi], 0x64646464u, 0x4140u), s2[wi / 4], b2[wi / 4]);
      out[wi * 2 + 1] = Pair<T>::fma_unbias(prmt(w[wi], 0x64646464u, 0x4342u), s2[wi / 4], b2[wi / 4]);
    }
  } else if constexpr (MODE == QuantMode::Affine) {
    constexpr uint32_t kMask = (1u << BITS) - 1u;
    constexpr int kPerWord = 32 / BITS;
#pragma unroll
    for (int j = 0; j < 32; j += 2) {
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = j + e;
        const uint32_t q = (w[c / kPerWord] >> ((c % kPerWord) * BITS)) & kMask;
        const float qf = __uint_as_float(q | 0x4B000000u) - 8388608.0f;
        v[e] = c < 16 ? fmaf(s_lo, qf, b_lo) : fmaf(s_hi, qf, b_hi);
      }
      out[j / 2] = pack2<T>(v[0], v[1]);
    }
  } else if constexpr (BITS == 4) { // mxfp4, nvfp4: E2M1 codes
    const float sc[2] = {s_lo, s_hi};
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {
      const uint32_t w4 = w[wi] >> 4;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // Codes in bits 0..3 and 16..19 (as the affine path), then sign to bit 15, em to 9..11.
        const uint32_t p = prmt(w[wi], w4, uint32_t(i) | (uint32_t(4 + i) << 8));
        const uint32_t h = ((p << 9) & 0x0E000E00u) | ((p << 12) & 0x80008000u);
        const float2 f = half2_bits_to_float2(h);
        // Times 2^14 first (exact), so that a scale near float's top does not overflow alone.
        out[wi * 4 + i] = pack2<T>(f.x * 16384.0f * sc[wi / 2], f.y * 16384.0f * sc[wi / 2]);
      }
    }
  } else { // mxfp8: E4M3 codes, two at a time by the hardware conversion
#pragma unroll
    for (int wi = 0; wi < 8; ++wi) {
      const float sc = wi < 4 ? s_lo : s_hi;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const __half2_raw hr =
            __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[wi] >> (16 * i)), __NV_E4M3);
        const uint32_t h = uint32_t(hr.x) | (uint32_t(hr.y) << 16);
        const float2 f = half2_bits_to_float2(h);
        out[wi * 2 + i] = pack2<T>(f.x * sc, f.y * sc);
      }
    }
  }
}

// ---- Register fragments (the swapped product in qmm.cu: W is mma's A operand) ----
// There a thread dequantizes straight into mma.sync A registers, 4 codes of one W row per
// k-step: the 4 consecutive codes of byte pair {i, i + 1} of a 4-bit word (codes 2i .. 2i + 3,
// i in {0, 2}) or of an 8-bit word (codes 4 .. 4 + 3 of bytes 0..3: two pairs). Each packed
// pair holds consecutive codes (low half first), as the B operand's x pairs do.

/// A W row's affine scale and bias for a fragment: packed (s, s) and (b, b) pairs of T for
/// the T2 paths, float32 for bfloat16 8-bit codes (which bfloat16's 8-bit significand cannot
/// hold offset by a magic number).
template <typename T, int BITS>
struct RowAffine {
  static constexpr bool kFloat = BITS == 8 && std::is_same_v<T, __nv_bfloat16>;
  uint32_t s2, b2; // T2 paths
  float s, b;      // kFloat
  /// From the aligned 4-byte words holding the scale and the bias; `hi` picks the upper
  /// 16-bit element of each.
  __device__ __forceinline__ void set(uint32_t sw, uint32_t bw, bool hi) {
    if constexpr (kFloat) {
      s = __uint_as_float(hi ? (sw & 0xFFFF0000u) : (sw << 16));
      b = __uint_as_float(hi ? (bw & 0xFFFF0000u) : (bw << 16));
    } else {
      const uint32_t sel = hi ? 0x3232u : 0x1010u;
      s2 = prmt(sw, sw, sel);
      b2 = prmt(bw, bw, sel);
    }
  }
};

/// Codes 2i and 2i + 1 of a word of 4-bit codes (w4 = w >> 4) dequantized: s * q + b per
/// half, rounded once, packed (code 2i in the low half).
template <typename T>
__device__ __forceinline__ uint32_t affine4_pair(uint32_t w, uint32_t w4, int i, const RowAffine<T, 4>& r) {
  // Byte i's low nibble to bits 0..3, its high nibble (low nibble of w4's byte i) to 16..19.
  const uint32_t p = (prmt(w, w4, uint32_t(i) | (uint32_t(4 + i) << 8)) & 0x000F000Fu) | Pair<T>::kMagic;
  return Pair<T>::fma_unbias(p, r.s2, r.b2);
}

/// Codes i and i + 1 (bytes, i in {0, 2}) of a word of 8-bit codes dequantized and packed.
template <typename T>
__device__ __forceinline__ uint32_t affine8_pair(uint32_t w, int i, const RowAffine<T, 8>& r) {
  if constexpr (RowAffine<T, 8>::kFloat) {
    // 2^23 + q exactly in float32 (byte into the mantissa), then s * q + b and one rounding.
    const float q0 = __uint_as_float(prmt(w, 0x4B000000u, 0x7650u | uint32_t(i))) - 8388608.0f;
    const float q1 = __uint_as_float(prmt(w, 0x4B000000u, 0x7650u | uint32_t(i + 1))) - 8388608.0f;
    return pack2<T>(fmaf(r.s, q0, r.b), fmaf(r.s, q1, r.b));
  } else { // float16: 1024 + q is exact for q < 256
    return Pair<T>::fma_unbias(prmt(w, 0x64646464u, uint32_t(i) | 0x40u | (uint32_t(i + 1) << 8) | 0x4000u), r.s2, r.b2);
  }
}

} // namespace nuvec::cu::dq
