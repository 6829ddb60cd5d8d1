// nuvec: the convolution ops (conv_general, conv1d/2d/3d, conv_transpose1d/2d/3d) with MLX's
// channels-last layout, signatures and defaults. Each validates and records one Convolution
// node (conv1d a DepthwiseConv1d node for a depthwise call, src/fast/depthwise_conv1d.h); the
// transposed ones are conv_general with input dilation and a flipped kernel (MLX).
#include <tuple>

#include "backend/common/conv_geometry.h"
#include "fast/depthwise_conv1d.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// One parameter vector normalised to one entry per spatial axis: empty means `fill`, a
// single entry applies to every axis.
std::vector<int> per_axis(
    const char* op, const char* what, std::vector<int> v, int spatial, int fill) {
  if (v.empty()) return std::vector<int>(spatial, fill);
  if (v.size() == 1 && spatial > 1) return std::vector<int>(spatial, v[0]);
  if (static_cast<int>(v.size()) != spatial) {
    throw_invalid_argument(
        op, what, " must have one entry per spatial axis (", spatial, "); got ", Shape(v),
        ".");
  }
  return v;
}

void require_positive(const char* op, const char* what, const std::vector<int>& v) {
  for (int x : v) {
    if (x <= 0) throw_invalid_argument(op, what, " must be positive; got ", Shape(v), ".");
  }
}

// Ranks first, so that a wrong rank is reported as such rather than as a parameter vector
// of the wrong length.
void validate_ranks(const char* op, const array& in, const array& wt) {
  if (in.ndim() < 3) {
    throw_invalid_argument(
        op, "input must have at least 3 dimensions (N, spatial..., C_in); got shape ",
        in.shape(), ".");
  }
  if (in.ndim() - 2 > size_t(kMaxConvSpatial)) {
    throw_invalid_argument(
        op, "at most ", kMaxConvSpatial, " spatial axes are supported; got input ", in.shape(), ".");
  }
  if (wt.ndim() != in.ndim()) {
    throw_invalid_argument(
        op, "weight must have the input's rank ", in.ndim(),
        " (C_out, K..., C_in / groups); got input ", in.shape(), " and weight ", wt.shape(),
        ".");
  }
}

// The size of n elements with `dilation - 1` zeros between neighbours.
int64_t dilated_size(int64_t n, int dilation) {
  return n > 0 ? (n - 1) * dilation + 1 : 0;
}

// The checks shared by every convolution op on normalised parameters; `op` names the
// public function called.
void validate(
    const char* op,
    const array& in,
    const array& wt,
    const std::vector<int>& stride,
    const std::vector<int>& padding_lo,
    const std::vector<int>& padding_hi,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation,
    int groups) {
  Dtype dtype = promote_types(in.dtype(), wt.dtype());
  if (!issubdtype(dtype, floating)) {
    throw_invalid_argument(
        op, "input and weight must promote to a floating dtype; got ", in.dtype(), " and ",
        wt.dtype(), ".");
  }
  require_positive(op, "stride", stride);
  require_positive(op, "kernel_dilation", kernel_dilation);
  require_positive(op, "input_dilation", input_dilation);
  if (groups <= 0) throw_invalid_argument(op, "groups must be positive; got ", groups, ".");
  int c_in = in.shape(-1), c_out = wt.shape(0);
  if (c_in % groups != 0 || c_out % groups != 0) {
    throw_invalid_argument(
        op, "groups must divide C_in and C_out; got groups ", groups, " for input ",
        in.shape(), " and weight ", wt.shape(), ".");
  }
  if (wt.shape(-1) * groups != c_in) {
    throw_invalid_argument(
        op, "weight's last dimension must be C_in / groups = ", c_in / groups,
        "; got input ", in.shape(), " and weight ", wt.shape(), " with groups ", groups, ".");
  }
  int spatial = static_cast<int>(in.ndim()) - 2;
  for (int d = 0; d < spatial; ++d) {
    if (padding_lo[d] == INT32_MIN || padding_hi[d] == INT32_MIN) {
      // Negative padding crops; INT32_MIN has no int32 negation (MLX raises here too).
      throw_overflow(op, "padding of ", INT32_MIN, " along spatial axis ", d, " cannot be negated.");
    }
    int64_t padded =
        dilated_size(in.shape(1 + d), input_dilation[d]) + padding_lo[d] + padding_hi[d];
    int64_t kernel = (int64_t{wt.shape(1 + d)} - 1) * kernel_dilation[d] + 1;
    if (wt.shape(1 + d) <= 0 || padded < kernel) {
      throw_invalid_argument(
          op, "the (dilated) kernel must fit in the padded input along spatial axis ", d,
          "; got kernel size ", kernel, " and padded input size ", padded, " for input ",
          in.shape(), " and weight ", wt.shape(), ".");
    }
    checked_int32((padded - kernel) / stride[d] + 1, op, "the output size along a spatial axis");
  }
}

// Normalises the parameter vectors, validates, promotes, and records the Convolution node.
array record_conv(
    const char* op,
    array in,
    array wt,
    std::vector<int> stride,
    std::vector<int> padding_lo,
    std::vector<int> padding_hi,
    std::vector<int> kernel_dilation,
    std::vector<int> input_dilation,
    int groups,
    bool flip,
    StreamOrDevice s) {
  validate_ranks(op, in, wt);
  int spatial = static_cast<int>(in.ndim()) - 2;
  stride = per_axis(op, "stride", std::move(stride), spatial, 1);
  padding_lo = per_axis(op, "padding_lo", std::move(padding_lo), spatial, 0);
  padding_hi = per_axis(op, "padding_hi", std::move(padding_hi), spatial, 0);
  kernel_dilation = per_axis(op, "kernel_dilation", std::move(kernel_dilation), spatial, 1);
  input_dilation = per_axis(op, "input_dilation", std::move(input_dilation), spatial, 1);
  validate(op, in, wt, stride, padding_lo, padding_hi, kernel_dilation, input_dilation, groups);
  Dtype dtype = promote_types(in.dtype(), wt.dtype());
  if (in.dtype() != dtype) in = astype(in, dtype, s);
  if (wt.dtype() != dtype) wt = astype(wt, dtype, s);
  Shape out_shape = {in.shape(0)};
  for (int d = 0; d < spatial; ++d) {
    int64_t padded =
        dilated_size(in.shape(1 + d), input_dilation[d]) + padding_lo[d] + padding_hi[d];
    int64_t kernel = (int64_t{wt.shape(1 + d)} - 1) * kernel_dilation[d] + 1;
    out_shape.push_back(static_cast<int32_t>((padded - kernel) / stride[d] + 1));
  }
  out_shape.push_back(wt.shape(0));
  auto prim = std::make_shared<Convolution>(
      to_stream(s), std::move(stride), std::move(padding_lo), std::move(padding_hi),
      std::move(kernel_dilation), std::move(input_dilation), groups, flip);
  return array(std::move(out_shape), dtype, std::move(prim), {in, wt});
}

// conv_transpose in terms of conv_general (the input gradient of a strided convolution):
// per axis padding_lo = dilation * (K - 1) - padding and padding_hi = padding_lo +
// output_padding, input dilated by the stride, kernel flipped.
array conv_transpose(
    const char* op,
    const array& in,
    const array& wt,
    std::vector<int> stride,
    std::vector<int> padding,
    std::vector<int> dilation,
    std::vector<int> output_padding,
    int groups,
    StreamOrDevice s) {
  require_positive(op, "stride", stride);
  require_positive(op, "dilation", dilation);
  int spatial = static_cast<int>(stride.size());
  std::vector<int> lo(spatial), hi(spatial);
  for (int d = 0; d < spatial; ++d) {
    if (padding[d] == INT32_MIN) {
      throw_overflow(op, "padding of ", INT32_MIN, " along spatial axis ", d, " cannot be negated.");
    }
    int64_t l = int64_t{dilation[d]} * (wt.shape(1 + d) - 1) - padding[d];
    lo[d] = checked_int32(l, op, "the transposed convolution's low padding");
    hi[d] = checked_int32(l + output_padding[d], op, "the transposed convolution's high padding");
  }
  return record_conv(
      op, in, wt, std::vector<int>(spatial, 1), lo, hi, dilation, stride, groups, true, s);
}

std::vector<int> vec(const std::pair<int, int>& p) {
  return {p.first, p.second};
}

std::vector<int> vec(const std::tuple<int, int, int>& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t)};
}

// The spatial rank a fixed-rank op needs: rank 2 + spatial for both operands.
void require_rank(const char* op, const array& in, const array& wt, int spatial) {
  int rank = spatial + 2;
  if (static_cast<int>(in.ndim()) != rank || static_cast<int>(wt.ndim()) != rank) {
    throw_invalid_argument(
        op, "input and weight must have ", rank, " dimensions; got input ", in.shape(),
        " and weight ", wt.shape(), ".");
  }
}

} // namespace

array conv_general(
    array input,
    array weight,
    std::vector<int> stride,
    std::vector<int> padding_lo,
    std::vector<int> padding_hi,
    std::vector<int> kernel_dilation,
    std::vector<int> input_dilation,
    int groups,
    bool flip,
    StreamOrDevice s) {
  return record_conv(
      "conv_general", std::move(input), std::move(weight), std::move(stride),
      std::move(padding_lo), std::move(padding_hi), std::move(kernel_dilation),
      std::move(input_dilation), groups, flip, s);
}

array conv1d(
    const array& input,
    const array& weight,
    int stride,
    int padding,
    int dilation,
    int groups,
    StreamOrDevice s) {
  require_rank("conv1d", input, weight, 1);
  if (fast::is_depthwise_conv1d(input, weight, padding, groups)) {
    // The depthwise case has direct kernels (a DepthwiseConv1d node, whose fallback is the
    // Convolution node below); checked as that node's call is.
    validate("conv1d", input, weight, {stride}, {padding}, {padding}, {dilation}, {1}, groups);
    return fast::depthwise_conv1d(input, weight, stride, padding, dilation, s);
  }
  return record_conv(
      "conv1d", input, weight, {stride}, {padding}, {padding}, {dilation}, {1}, groups, false,
      s);
}

array conv2d(
    const array& input,
    const array& weight,
    const std::pair<int, int>& stride,
    const std::pair<int, int>& padding,
    const std::pair<int, int>& dilation,
    int groups,
    StreamOrDevice s) {
  require_rank("conv2d", input, weight, 2);
  return record_conv(
      "conv2d", input, weight, vec(stride), vec(padding), vec(padding), vec(dilation), {1, 1},
      groups, false, s);
}

array conv3d(
    const array& input,
    const array& weight,
    const std::tuple<int, int, int>& stride,
    const std::tuple<int, int, int>& padding,
    const std::tuple<int, int, int>& dilation,
    int groups,
    StreamOrDevice s) {
  require_rank("conv3d", input, weight, 3);
  return record_conv(
      "conv3d", input, weight, vec(stride), vec(padding), vec(padding), vec(dilation),
      {1, 1, 1}, groups, false, s);
}

array conv_transpose1d(
    const array& input,
    const array& weight,
    int stride,
    int padding,
    int dilation,
    int output_padding,
    int groups,
    StreamOrDevice s) {
  require_rank("conv_transpose1d", input, weight, 1);
  return conv_transpose(
      "conv_transpose1d", input, weight, {stride}, {padding}, {dilation}, {output_padding},
      groups, s);
}

array conv_transpose2d(
    const array& input,
    const array& weight,
    const std::pair<int, int>& stride,
    const std::pair<int, int>& padding,
    const std::pair<int, int>& dilation,
    const std::pair<int, int>& output_padding,
    int groups,
    StreamOrDevice s) {
  require_rank("conv_transpose2d", input, weight, 2);
  return conv_transpose(
      "conv_transpose2d", input, weight, vec(stride), vec(padding), vec(dilation),
      vec(output_padding), groups, s);
}

array conv_transpose3d(
    const array& input,
    const array& weight,
    const std::tuple<int, int, int>& stride,
    const std::tuple<int, int, int>& padding,
    const std::tuple<int, int, int>& dilation,
    const std::tuple<int, int, int>& output_padding,
    int groups,
    StreamOrDevice s) {
  require_rank("conv_transpose3d", input, weight, 3);
  return conv_transpose(
      "conv_transpose3d", input, weight, vec(stride), vec(padding), vec(dilation),
      vec(output_padding), groups, s);
}

} // namespace nuvec
