// nuvec: the element rule of the depthwise conv1d kernels (DepthwiseConv1d and CausalConv1dStep,
// src/fast/depthwise_conv1d.h), one text for the CPU loops (src/backend/cpu/fast/depthwise_conv1d.cpp)
// and the CUDA kernels (src/backend/cuda/fast/depthwise_conv1d.cu): the geometry (shared/seeds/001's
// output length; the tap rule of conv_general, backend/common/conv_geometry.h, with groups = C)
// and the tap sum, so that both backends sum the same products in the same order.
#pragma once

#include <cstdint>

#include "backend/common/math/cast.h"

NUVEC_MATH_BEGIN

/// A depthwise conv1d in MLX's layout: x [batch, length, channels] and y [batch, out_length,
/// channels], both row-contiguous, and the weight [channels, taps, 1] read as [channels, taps]
/// (row-contiguous). Plain data: the CUDA kernels take it by value.
struct DepthwiseConv1dShape {
  int64_t batch, length, channels, taps, out_length;
  int64_t stride, padding, dilation;
};

/// The output length (length + 2·padding − dilation·(taps − 1) − 1) / stride + 1 (the seed's),
/// for a call whose dilated kernel fits the padded input (conv1d checks that first).
NUVEC_HD inline int64_t depthwise_out_length(
    int64_t length, int64_t taps, int64_t stride, int64_t padding, int64_t dilation) {
  return (length + 2 * padding - dilation * (taps - 1) - 1) / stride + 1;
}

/// The input position output o reads through tap j, o·stride + j·dilation − padding, or −1
/// where that position is the zero padding (outside [0, length)).
NUVEC_HD inline int64_t depthwise_tap_position(const DepthwiseConv1dShape& s, int64_t o, int64_t j) {
  const int64_t i = o * s.stride + j * s.dilation - s.padding;
  return i >= 0 && i < s.length ? i : -1;
}

/// One term of the tap sum: acc + w·x in the compute type A (float for float32 and the half
/// types, double for float64). Every output element is 0 plus its taps' terms in increasing
/// tap order (taps on the padding skipped), rounded once to the element type with
/// depthwise_round; the general convolution (the fallback) sums the same products in another
/// order, so the two agree to rounding.
template <typename A, typename T>
NUVEC_HD A depthwise_term(A acc, A w, T x) {
  return acc + w * static_cast<A>(x);
}

/// The tap sum rounded to the element type T (once, at the end).
template <typename T, typename A>
NUVEC_HD T depthwise_round(A acc) {
  return cast_to<T>(acc);
}

NUVEC_MATH_END
