// nuvec: decoding quantized weights inside the CUDA kernels (qmv.cu, qmm_generic.cu, and
// qmm.cu if it likes): one group's scale and bias, one code's value, and the chunk decoders
// of the tensor-core paths, which turn the `bits` packed words of 32 consecutive codes into
// 16 pairs of T (two A-fragment halves each). Number formats: src/backend/common/math/quant.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend/common/math/quant.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/mma.cuh"
#include "quantized/quant_spec.h"

namespace nuvec::cu::quant {

/// One group's parameters in float32: affine value = scale * q + bias; fp modes value =
/// code_value(q) * scale (bias 0).
struct GroupParams {
  float scale;
  float bias;
};

/// The parameters of group i (flat index into the scales/biases arrays): affine reads T
/// scales and biases, the fp modes decode a uint8 scale code (E8M0, or E4M3 for nvfp4).
template <typename T>
__device__ __forceinline__ GroupParams group_params(QuantMode mode, const void* scales, const void* biases, int64_t i) {
  if (mode == QuantMode::Affine) {
    return {to_acc(static_cast<const T*>(scales)[i]), to_acc(static_cast<const T*>(biases)[i])};
  }
  return {math::fp_scale_value(mode, static_cast<const uint8_t*>(scales)[i]), 0.0f};
}

/// The value of code q under its group's parameters, in float32.
__device__ __forceinline__ float code_value(QuantMode mode, int bits, uint32_t q, GroupParams g) {
  return mode == QuantMode::Affine ? fmaf(g.scale, static_cast<float>(q), g.bias)
                                   : math::fp_code_value(bits, q) * g.scale;
}

/// One group's parameters as raw bits, what the tensor-core paths keep in flight (one
/// register a group): affine: the scale's T bits (16-bit T) in the low half and the bias's in
/// the high half; fp modes: the uint8 scale code. i: flat index into scales/biases.
template <typename T>
__device__ __forceinline__ uint32_t group_raw(QuantMode mode, const void* scales, const void* biases, int64_t i) {
  static_assert(sizeof(T) == 2, "group_raw: 16-bit T");
  if (mode == QuantMode::Affine) {
    return uint32_t(__ldg(static_cast<const unsigned short*>(scales) + i)) |
        (uint32_t(__ldg(static_cast<const unsigned short*>(biases) + i)) << 16);
  }
  return __ldg(static_cast<const unsigned char*>(scales) + i);
}

/// The float32 value of the 16-bit T whose bits are b.
template <typename T>
__device__ __forceinline__ float half_bits_value(uint32_t b) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
  else return __uint_as_float(b << 16);
}

/// The parameters group_raw's bits stand for.
template <typename T>
__device__ __forceinline__ GroupParams from_raw(QuantMode mode, uint32_t raw) {
  if (mode == QuantMode::Affine) return {half_bits_value<T>(raw & 0xffffu), half_bits_value<T>(raw >> 16)};
  return {math::fp_scale_value(mode, raw), 0.0f};
}

/// Codes in one chunk: a lane of the tensor-core paths reads 32 consecutive codes of a row,
/// `bits` 32-bit words starting on a word boundary whatever the width.
constexpr int kChunkCodes = 32;

/// Loads the BITS words of one chunk (aligned to its vector width: the launcher checks the
/// row length) through the read-only path, or zeros.
template <int BITS>
__device__ __forceinline__ void load_chunk(uint32_t (&w)[BITS], const uint32_t* src, bool valid) {
  if constexpr (BITS % 4 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 4; ++i) {
      const uint4 v = valid ? __ldg(reinterpret_cast<const uint4*>(src) + i) : make_uint4(0, 0, 0, 0);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (BITS % 2 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 2; ++i) {
      const uint2 v = valid ? __ldg(reinterpret_cast<const uint2*>(src) + i) : make_uint2(0, 0);
      w[2 * i] = v.x, w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < BITS; ++i) w[i] = valid ? __ldg(src + i) : 0u;
  }
}

/// Which decoder a (mode, bits, T) takes: the affine 4-bit codes, and 8-bit ones into
/// float16, become T by or-ing them into the mantissa of a power of two (exact) and one
/// packed fused multiply-add each pair; everything else goes through float32.
enum class ChunkKind { Affine4, Affine8Half, Generic };

template <typename T, bool kAffine, int BITS>
inline constexpr ChunkKind chunk_kind = !kAffine ? ChunkKind::Generic
    : BITS == 4                                  ? ChunkKind::Affine4
    : (BITS == 8 && std::is_same_v<T, __half>)   ? ChunkKind::Affine8Half
                                                 : ChunkKind::Generic;

/// The chunk decoder of T (__half or __nv_bfloat16), affine or fp codes of BITS bits. It
/// writes pair p (0..15) as the values of codes code(p, 0) (low half) and code(p, 1): the
/// order the packed bits make cheapest to extract. A kernel pairs the activations the same
/// way (a dot product may permute its terms), so only the decoder and the activation staging
/// need to agree.
template <typename T, bool kAffine, int BITS>
struct ChunkDecoder {
  static constexpr ChunkKind kKind = chunk_kind<T, kAffine, BITS>;
  static constexpr int kWords = BITS;

  /// Code index (0..31) of half h of pair p.
  __host__ __device__ static constexpr int code(int p, int h) {
    if constexpr (kKind == ChunkKind::Affine4) return (p / 4) * 8 + p % 4 + 4 * h; // nibbles j, j+4
    else if constexpr (kKind == ChunkKind::Affine8Half) return (p / 2) * 4 + p % 2 + 2 * h; // bytes j, j+2
    else return 2 * p + h;
  }

  /// Decodes words (the chunk's BITS words) into 16 pairs; raw[0] holds the parameters
  /// (group_raw's bits) of codes 0..15 and raw[1] of codes 16..31 (equal unless group_size
  /// is 16); mode tells the fp modes' scale codes apart.
  __device__ __forceinline__ static void decode(
      const uint32_t (&w)[BITS], const uint32_t (&raw)[2], QuantMode mode, uint32_t (&out)[16]) {
    if constexpr (kKind == ChunkKind::Affine4 || kKind == ChunkKind::Affine8Half) {
      // q | magic is the T of (2^e + q) exactly; subtracting 2^e leaves q, then one fma.
      using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
      constexpr uint32_t kMagic = std::is_same_v<T, __half> ? 0x64006400u : 0x43004300u; // 1024 / 128
      constexpr uint32_t kMask = BITS == 4 ? 0x000F000Fu : 0x00FF00FFu;
      constexpr int kPerWord = BITS == 4 ? 4 : 2;
      T2 magic, s[2], b[2];
      magic = bits_to<T2>(kMagic);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[h] = bits_to<T2>(__byte_perm(raw[h], 0u, 0x1010)); // the scale in both halves
        b[h] = bits_to<T2>(__byte_perm(raw[h], 0u, 0x3232)); // the bias in both halves
      }
      (void)mode;
#pragma unroll
      for (int p = 0; p < 16; ++p) {
        const int word = p / kPerWord, j = p % kPerWord;
        const int h = code(p, 0) >= 16 ? 1 : 0;
        const uint32_t v = ((w[word] >> (j * BITS)) & kMask) | kMagic;
        const T2 q = __hsub2(bits_to<T2>(v), magic);
        const T2 r = __hfma2(q, s[h], b[h]);
        out[p] = to_bits(r);
      }
    } else {
      const GroupParams g[2] = {from_raw<T>(mode, raw[0]), from_raw<T>(mode, raw[1])};
#pragma unroll
      for (int p = 0; p < 16; ++p) {
        float v[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = code(p, h);
          const uint32_t q = extract(w, c);
          const GroupParams& gp = g[c >= 16 ? 1 : 0];
          if constexpr (kAffine) v[h] = fmaf(gp.scale, static_cast<float>(q), gp.bias);
          else v[h] = math::fp_code_value(BITS, q) * gp.scale;
        }
        out[p] = pack2<T>(v[0], v[1]);
      }
    }
  }

  /// The pair and half holding code c (code's inverse; compile-time).
  __host__ __device__ static constexpr int pair_of(int c) {
    for (int p = 0; p < 16; ++p) {
      if (code(p, 0) == c || code(p, 1) == c) return p;
    }
    return -1;
  }
  __host__ __device__ static constexpr int half_of(int c) {
    return code(pair_of(c), 0) == c ? 0 : 1;
  }

  /// decode's pairs in natural order: word m of `out` holds codes 2m (low half) and 2m + 1,
  /// one byte permutation each (what a dequantized matrix stores).
  __device__ __forceinline__ static void natural(const uint32_t (&pairs)[16], uint32_t (&out)[16]) {
    natural_words(pairs, out, std::make_integer_sequence<int, 16>{});
  }

  /// Code c (a compile-time constant after unrolling) of the chunk: bits [c*BITS, (c+1)*BITS)
  /// of the little-endian word stream, straddling two words for 3, 5 and 6 bits.
  __device__ __forceinline__ static uint32_t extract(const uint32_t (&w)[BITS], int c) {
    const int bit = c * BITS, word = bit / 32, shift = bit % 32;
    uint32_t v = w[word] >> shift;
    if (shift + BITS > 32) v |= w[word + 1] << (32 - shift);
    return v & ((1u << BITS) - 1u);
  }

 private:
  // Word m of natural(): the pair indices and byte selectors are template constants, so
  // the pairs stay in registers.
  template <int... M>
  __device__ __forceinline__ static void natural_words(
      const uint32_t (&pairs)[16], uint32_t (&out)[16], std::integer_sequence<int, M...>) {
    ((out[M] = __byte_perm(pairs[pair_of(2 * M)], pairs[pair_of(2 * M + 1)],
                           (half_of(2 * M) ? 0x32u : 0x10u) | ((half_of(2 * M + 1) ? 0x76u : 0x54u) << 8))),
     ...);
  }

  template <typename P>
  __device__ __forceinline__ static P bits_to(uint32_t v) {
    P r;
    memcpy(&r, &v, 4);
    return r;
  }
  template <typename P>
  __device__ __forceinline__ static uint32_t to_bits(P v) {
    uint32_t r;
    memcpy(&r, &v, 4);
    return r;
  }
};

/// Calls f.template operator()<kAffine, BITS>() for spec's format: affine 2, 3, 4, 5, 6 or 8
/// bits, or the fp modes (4 bits: mxfp4, nvfp4; 8 bits: mxfp8; their scale codes are read
/// by the mode at run time). Host side, for the launchers.
template <typename F>
void dispatch_format(const QuantSpec& spec, F&& f) {
  if (spec.mode != QuantMode::Affine) {
    if (spec.bits == 8) f.template operator()<false, 8>();
    else f.template operator()<false, 4>();
    return;
  }
  switch (spec.bits) {
    case 2: f.template operator()<true, 2>(); break;
    case 3: f.template operator()<true, 3>(); break;
    case 4: f.template operator()<true, 4>(); break;
    case 5: f.template operator()<true, 5>(); break;
    case 6: f.template operator()<true, 6>(); break;
    default: f.template operator()<true, 8>(); break;
  }
}

} // namespace nuvec::cu::quant
