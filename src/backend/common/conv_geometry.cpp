// nuvec: building the shared convolution geometry (conv_geometry.h).
#include "backend/common/conv_geometry.h"

#include "core/errors.h"

namespace nuvec {

ConvGeometry conv_geometry(
    const array& in,
    const array& wt,
    const array& out,
    const std::vector<int>& strides,
    const std::vector<int>& padding_lo,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation,
    int groups) {
  const int spatial = static_cast<int>(in.ndim()) - 2;
  if (spatial > kMaxConvSpatial) {
    throw_invalid_argument(
        "conv_general", "at most ", kMaxConvSpatial, " spatial axes are supported; got ", spatial, ".");
  }
  ConvGeometry g{};
  g.spatial = spatial;
  g.c_in = in.shape(-1);
  g.c_out = out.shape(-1);
  g.groups = groups;
  g.cig = g.c_in / groups;
  g.cog = g.c_out / groups;
  g.taps = 1;
  g.positions = 1;
  for (int d = 0; d < spatial; ++d) {
    g.in_size[d] = in.shape(1 + d);
    g.out_size[d] = out.shape(1 + d);
    g.k_size[d] = wt.shape(1 + d);
    g.stride[d] = strides[d];
    g.pad_lo[d] = padding_lo[d];
    g.kdil[d] = kernel_dilation[d];
    g.idil[d] = input_dilation[d];
    g.in_sp_stride[d] = in.strides()[1 + d];
    g.w_sp_stride[d] = wt.strides()[1 + d];
    g.taps *= g.k_size[d];
    g.positions *= g.out_size[d];
  }
  g.rows = int64_t{out.shape(0)} * g.positions;
  g.kc = g.taps * g.cig;
  g.in_n_stride = in.strides()[0];
  g.in_c_stride = in.strides().back();
  g.w_co_stride = wt.strides()[0];
  g.w_c_stride = wt.strides().back();
  return g;
}

bool input_is_im2col(const ConvGeometry& g, const array& in) {
  if (g.taps != 1 || !in.flags().row_contiguous) return false;
  for (int d = 0; d < g.spatial; ++d) {
    if (g.out_size[d] != g.in_size[d]) return false;
    for (int64_t o = 0; o < g.out_size[d]; ++o) {
      if (tap_index(g, d, o, 0) != o) return false;
    }
  }
  return true;
}

} // namespace nuvec
