// nuvec: rules of the Convolution family (shapes, vjp, jvp, vmap, equivalence). As in MLX's
// primitives.cpp, both gradients are convolutions with the roles of the operands swapped;
// the padding arithmetic here is derived from the forward index map, written out below.
#include <numeric>
#include <optional>
#include <typeinfo>

#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Per spatial axis, the forward convolution reads dilated-input position
//   j = o * stride + k * kernel_dilation - padding_lo        (o output, k kernel index)
// and in_size = (I - 1) * input_dilation + 1, out_size = (O - 1) * stride + 1,
// wt_size = (K - 1) * kernel_dilation + 1 are the extents of the dilated input, the
// stride-dilated output and the dilated kernel.
struct AxisExtents {
  int64_t in_size, out_size, wt_size; // int64: dilated extents can pass 2^31
};

AxisExtents extents(
    int axis, const array& in, const array& wt, const Shape& out_shape,
    const std::vector<int>& strides, const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation) {
  return {
      (int64_t{in.shape(1 + axis)} - 1) * input_dilation[axis] + 1,
      (int64_t{out_shape[1 + axis]} - 1) * strides[axis] + 1,
      (int64_t{wt.shape(1 + axis)} - 1) * kernel_dilation[axis] + 1};
}

std::vector<int> iota_from(int first, int count) {
  std::vector<int> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// (G * A, X..., B) -> (G * B, X..., A): swaps the leading and trailing channel roles inside
// each of the `groups` blocks of the leading axis (a grouped weight's transpose).
array group_transpose(const array& w, int groups) {
  int nd = static_cast<int>(w.ndim());
  int a = w.shape(0) / groups, b = w.shape(-1);
  Shape split = w.shape();
  split[0] = a;
  split.insert(split.begin(), groups);
  // (G, A, X..., B) -> (G, B, X..., A)
  std::vector<int> perm = {0, nd};
  for (int i = 2; i < nd; ++i) perm.push_back(i);
  perm.push_back(1);
  Shape out = w.shape();
  out[0] = groups * b;
  out.back() = a;
  return reshape(transpose(reshape(w, split), perm), out);
}

} // namespace

const char* Convolution::name() const {
  return "Convolution";
}

std::vector<Shape> Convolution::output_shapes(const std::vector<array>& inputs) {
  const array& in = inputs[0];
  const array& wt = inputs[1];
  int spatial = static_cast<int>(in.ndim()) - 2;
  Shape out = {in.shape(0)};
  for (int d = 0; d < spatial; ++d) {
    int64_t padded = (int64_t{in.shape(1 + d)} - 1) * input_dilation_[d] + 1 +
        int64_t{padding_lo_[d]} + padding_hi_[d];
    int64_t kernel = (int64_t{wt.shape(1 + d)} - 1) * kernel_dilation_[d] + 1;
    out.push_back(checked_int32((padded - kernel) / strides_[d] + 1, "conv_general", "the output size"));
  }
  out.push_back(wt.shape(0));
  return {out};
}

std::vector<array> Convolution::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& in = primals[0];
  const array& wt = primals[1];
  const array& g = cotangents[0];
  int spatial = static_cast<int>(in.ndim()) - 2;
  std::vector<array> grads;
  for (int arg : argnums) {
    std::vector<int> lo(spatial), hi(spatial);
    for (int d = 0; d < spatial; ++d) {
      auto e = extents(d, in, wt, g.shape(), strides_, kernel_dilation_, input_dilation_);
      if (arg == 0) {
        // The cotangent dilated by the stride, correlated with the reversed kernel; the
        // output walks the dilated input with stride input_dilation and ends exactly at
        // its last element, so positions the forward never read get zero.
        lo[d] = checked_int32(e.wt_size - 1 - padding_lo_[d], "conv_general", "the input gradient's padding");
        hi[d] = checked_int32(e.in_size - e.out_size + padding_lo_[d], "conv_general", "the input gradient's padding");
      } else {
        // The input correlated with the stride-dilated cotangent as kernel; the output
        // walks the kernel positions (stride kernel_dilation) and has exactly K of them.
        lo[d] = padding_lo_[d];
        hi[d] = checked_int32(
            e.wt_size - 1 + e.out_size - e.in_size - padding_lo_[d], "conv_general",
            "the weight gradient's padding");
      }
    }
    if (arg == 0) {
      // Input gradient: conv of the cotangent with the per-group transposed weight
      // (C_in, K..., C_out / groups), kernel reversed relative to the forward.
      grads.push_back(conv_general(
          g, group_transpose(wt, groups_), input_dilation_, lo, hi, kernel_dilation_,
          strides_, groups_, !flip_, stream()));
    } else {
      // Weight gradient: batch and channel roles swap. Input (N, S..., G*Cig) becomes
      // (Cig, S..., G*N); the cotangent (N, O..., G*Cog) becomes the kernel (G*Cog, O..., N);
      // the result (Cig, K..., G*Cog) is moved back to (C_out, K..., Cig).
      int n = in.shape(0), c_in = in.shape(-1), c_out = wt.shape(0);
      int cig = c_in / groups_, cog = c_out / groups_;
      Shape in_split(in.shape().begin(), in.shape().end() - 1);
      in_split.insert(in_split.end(), {groups_, cig});
      std::vector<int> in_perm = {spatial + 2};
      for (int d = 0; d < spatial; ++d) in_perm.push_back(1 + d);
      in_perm.insert(in_perm.end(), {spatial + 1, 0});
      Shape in2_shape = {cig};
      in2_shape.insert(in2_shape.end(), in.shape().begin() + 1, in.shape().end() - 1);
      in2_shape.push_back(groups_ * n);
      array in2 = reshape(transpose(reshape(in, in_split), in_perm), in2_shape);

      Shape g_split(g.shape().begin(), g.shape().end() - 1);
      g_split.insert(g_split.end(), {groups_, cog});
      std::vector<int> g_perm = {spatial + 1, spatial + 2};
      for (int d = 0; d < spatial; ++d) g_perm.push_back(1 + d);
      g_perm.push_back(0);
      Shape g2_shape = {c_out};
      g2_shape.insert(g2_shape.end(), g.shape().begin() + 1, g.shape().end() - 1);
      g2_shape.push_back(n);
      array g2 = reshape(transpose(reshape(g, g_split), g_perm), g2_shape);

      array dw = conv_general(
          in2, g2, kernel_dilation_, lo, hi, strides_, input_dilation_, groups_, false,
          stream());
      std::vector<int> back = {spatial + 1};
      for (int d = 0; d < spatial; ++d) back.push_back(1 + d);
      back.push_back(0);
      dw = transpose(dw, back);
      // With flip the forward used kernel index K-1-k where this computed k.
      if (flip_) dw = flip(dw, iota_from(1, spatial), stream());
      grads.push_back(dw);
    }
  }
  return grads;
}

std::vector<array> Convolution::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  // Bilinear: d conv(x, w) = conv(dx, w) + conv(x, dw).
  std::optional<array> total;
  for (size_t i = 0; i < argnums.size(); ++i) {
    const array& x = argnums[i] == 0 ? tangents[i] : primals[0];
    const array& w = argnums[i] == 0 ? primals[1] : tangents[i];
    array term = conv_general(
        x, w, strides_, padding_lo_, padding_hi_, kernel_dilation_, input_dilation_, groups_,
        flip_, stream());
    total = total ? add(*total, term, stream()) : term;
  }
  if (!total) return {zeros(output_shapes(primals)[0], primals[0].dtype(), stream())};
  return {*total};
}

std::pair<std::vector<array>, std::vector<int>> Convolution::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  array in = inputs[0];
  array wt = inputs[1];
  int spatial = static_cast<int>(in.ndim()) - 2 - (axes[0] >= 0 ? 1 : 0);
  auto conv = [&](const array& x, const array& w, int groups) {
    return conv_general(
        x, w, strides_, padding_lo_, padding_hi_, kernel_dilation_, input_dilation_, groups,
        flip_, stream());
  };
  if (axes[1] < 0) {
    if (axes[0] < 0) return {{conv(in, wt, groups_)}, {-1}};
    // The batch folds into N: (B, N, S..., C) -> (B * N, S..., C).
    array x = moveaxis(in, axes[0], 0, stream());
    Shape folded(x.shape().begin() + 1, x.shape().end());
    int b = x.shape(0);
    folded[0] *= b;
    array y = conv(reshape(x, folded, stream()), wt, groups_);
    Shape unfolded = y.shape();
    unfolded[0] = x.shape(1);
    unfolded.insert(unfolded.begin(), b);
    return {{reshape(y, unfolded, stream())}, {0}};
  }
  // A batched weight folds into the groups: weights (B, C_out, K..., Cig) become
  // (B * C_out, K..., Cig) with B * groups groups, and the input's channels are repeated
  // per batch element (its own when batched): (N, S..., B, C) -> (N, S..., B * C).
  array w = moveaxis(wt, axes[1], 0, stream());
  int b = w.shape(0);
  Shape w_folded(w.shape().begin() + 1, w.shape().end());
  w_folded[0] *= b;
  w = reshape(w, w_folded, stream());
  array x = in;
  if (axes[0] >= 0) {
    x = moveaxis(in, axes[0], spatial + 1, stream());
  } else {
    Shape shape = in.shape();
    shape.insert(shape.end() - 1, b);
    x = broadcast_to(expand_dims(in, spatial + 1, stream()), shape, stream());
  }
  Shape x_folded(x.shape().begin(), x.shape().end() - 1);
  x_folded.back() *= x.shape(-1);
  array y = conv(reshape(x, x_folded, stream()), w, b * groups_);
  Shape unfolded(y.shape().begin(), y.shape().end() - 1);
  unfolded.insert(unfolded.end(), {b, y.shape(-1) / b});
  return {{reshape(y, unfolded, stream())}, {spatial + 1}};
}

bool Convolution::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Convolution*>(&other);
  return o && o->strides_ == strides_ && o->padding_lo_ == padding_lo_ &&
      o->padding_hi_ == padding_hi_ && o->kernel_dilation_ == kernel_dilation_ &&
      o->input_dilation_ == input_dilation_ && o->groups_ == groups_ && o->flip_ == flip_;
}

} // namespace nuvec
