// nuvec: the convolution as index arithmetic, shared by the CPU kernel
// (backend/cpu/conv.cpp) and the CUDA kernels (backend/cuda/conv.cu): sizes, strides and the
// tap rule of one Convolution node, a fixed-size struct both backends read (the CUDA kernels
// take it by value). Built by conv_geometry (conv_geometry.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/common/math/config.h"
#include "nuvec/array.h"

namespace nuvec {

/// Most spatial axes a convolution has (conv1d-3d need 3; conv_general checks the rank
/// against this).
constexpr int kMaxConvSpatial = 8;

/// A convolution of input (N, spatial..., C_in) with weight (C_out, K..., C_in / groups)
/// into output (N, out..., C_out). Input position along spatial axis d read by output o
/// through kernel tap k: j = o * stride + k * kdil - pad_lo, a real input element
/// i = j / idil when j >= 0, j % idil == 0 and i < in_size (else a zero of the padding or of
/// a hole left by the input dilation).
struct ConvGeometry {
  int spatial;
  int64_t c_in, c_out, groups, cig, cog; // cig = C_in / groups, cog = C_out / groups
  int64_t taps;      // prod(k_size)
  int64_t positions; // prod(out_size)
  int64_t rows;      // N * positions: one im2col row per output position
  int64_t kc;        // taps * cig: the columns of one group's im2col matrix
  int64_t in_size[kMaxConvSpatial], out_size[kMaxConvSpatial], k_size[kMaxConvSpatial];
  int64_t stride[kMaxConvSpatial], pad_lo[kMaxConvSpatial], kdil[kMaxConvSpatial], idil[kMaxConvSpatial];
  // Input strides (elements): batch, spatial axes, channel.
  int64_t in_n_stride, in_c_stride, in_sp_stride[kMaxConvSpatial];
  // Weight strides (elements): output channel, spatial axes, input channel.
  int64_t w_co_stride, w_c_stride, w_sp_stride[kMaxConvSpatial];
};

/// The input index along axis d that output o reads through tap k, or -1 (see ConvGeometry).
NUVEC_HD inline int64_t tap_index(const ConvGeometry& g, int d, int64_t o, int64_t k) {
  const int64_t j = o * g.stride[d] + k * g.kdil[d] - g.pad_lo[d];
  if (j < 0 || j % g.idil[d] != 0) return -1;
  const int64_t i = j / g.idil[d];
  return i < g.in_size[d] ? i : -1;
}

/// The geometry of Convolution(in, wt) -> out with per-axis strides, low padding and
/// dilations. Throws std::invalid_argument naming conv_general beyond kMaxConvSpatial
/// spatial axes (the op rejects those first).
ConvGeometry conv_geometry(
    const array& in,
    const array& wt,
    const array& out,
    const std::vector<int>& strides,
    const std::vector<int>& padding_lo,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation,
    int groups);

/// Whether the input is its own im2col matrix: one kernel tap reading every input position
/// once in order (a 1x1 convolution without stride, padding or dilation) on dense rows.
bool input_is_im2col(const ConvGeometry& g, const array& in);

} // namespace nuvec
