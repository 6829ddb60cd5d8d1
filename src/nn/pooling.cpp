// nuvec::nn: max and average pooling over channels-last inputs, built from strided slices:
// one slice per kernel offset, stacked and reduced with max or mean (so vjp, jvp and vmap come
// from slice, stack and the reductions). Semantics from MLX's python/mlx/nn/layers/pooling.py.
#include <limits>

#include "core/errors.h"
#include "nuvec/nn/layers.h"
#include "nuvec/ops.h"
#include "nuvec/utils.h"

namespace nuvec::nn {

namespace {

// x: (N, spatial..., C) with spatial.size() == kernel.size().
array pool(
    const char* op,
    const array& x,
    const std::vector<int>& kernel,
    const std::vector<int>& stride,
    const std::vector<int>& padding,
    bool is_max) {
  const int nd = static_cast<int>(kernel.size());
  if (static_cast<int>(x.ndim()) != nd + 2) {
    throw_invalid_argument(
        op, "input must have ", nd + 2, " dimensions (N, ", nd == 1 ? "L" : "H, W", ", C); got shape ", x.shape(), ".");
  }
  array xp = x;
  bool padded = false;
  for (int d = 0; d < nd; ++d) padded |= padding[d] > 0;
  if (padded) {
    std::vector<int> axes;
    Shape lo, hi;
    for (int d = 0; d < nd; ++d) {
      axes.push_back(d + 1);
      lo.push_back(padding[d]);
      hi.push_back(padding[d]);
    }
    // Padding with -inf keeps padded cells out of every max; zeros count in the average (MLX).
    array value = is_max ? array(-std::numeric_limits<double>::infinity(), x.dtype()) : array(0, x.dtype());
    xp = pad(x, axes, lo, hi, value);
  }
  Shape out_spatial;
  for (int d = 0; d < nd; ++d) {
    int size = xp.shape(d + 1);
    if (size < kernel[d]) {
      throw_invalid_argument(
          op, "the padded input must be at least the kernel size ", kernel[d], " along axis ", d + 1, "; got ", size, ".");
    }
    out_spatial.push_back((size - kernel[d]) / stride[d] + 1);
  }
  // One strided slice per kernel offset, enumerated like a counter over the kernel's axes.
  std::vector<array> windows;
  std::vector<int> offset(nd, 0);
  while (true) {
    Shape start(xp.ndim(), 0), stop = xp.shape(), step(xp.ndim(), 1);
    for (int d = 0; d < nd; ++d) {
      start[d + 1] = offset[d];
      stop[d + 1] = offset[d] + stride[d] * (out_spatial[d] - 1) + 1;
      step[d + 1] = stride[d];
    }
    windows.push_back(slice(xp, start, stop, step));
    int d = nd - 1;
    while (d >= 0 && ++offset[d] == kernel[d]) offset[d--] = 0;
    if (d < 0) break;
  }
  if (windows.size() == 1) return windows[0];
  auto stacked = stack(windows, 0);
  return is_max ? max(stacked, 0) : mean(stacked, 0);
}

void check_pool_args(const char* op, const std::vector<int>& k, const std::vector<int>& s, const std::vector<int>& p) {
  for (size_t d = 0; d < k.size(); ++d) {
    if (k[d] <= 0) throw_invalid_argument(op, "kernel_size must be positive; got ", k[d], ".");
    if (s[d] <= 0) throw_invalid_argument(op, "stride must be positive; got ", s[d], ".");
    // Any padding, as MLX (PyTorch caps it at half the kernel): a window inside the padding
    // is -inf for max and 0 for the average.
    if (p[d] < 0) throw_invalid_argument(op, "padding must be non-negative; got ", p[d], ".");
  }
}

} // namespace

MaxPool1d::MaxPool1d(int kernel_size, int stride, int padding)
    : k_(kernel_size), s_(stride == 0 ? kernel_size : stride), p_(padding) {
  check_pool_args("nn.MaxPool1d", {k_}, {s_}, {p_});
}

array MaxPool1d::forward(const array& x) {
  return pool("nn.MaxPool1d", x, {k_}, {s_}, {p_}, true);
}

AvgPool1d::AvgPool1d(int kernel_size, int stride, int padding)
    : k_(kernel_size), s_(stride == 0 ? kernel_size : stride), p_(padding) {
  check_pool_args("nn.AvgPool1d", {k_}, {s_}, {p_});
}

array AvgPool1d::forward(const array& x) {
  return pool("nn.AvgPool1d", x, {k_}, {s_}, {p_}, false);
}

namespace {
std::pair<int, int> default_stride(std::pair<int, int> stride, std::pair<int, int> kernel) {
  return {stride.first == 0 ? kernel.first : stride.first, stride.second == 0 ? kernel.second : stride.second};
}
} // namespace

MaxPool2d::MaxPool2d(std::pair<int, int> kernel_size, std::pair<int, int> stride, std::pair<int, int> padding)
    : k_(kernel_size), s_(default_stride(stride, kernel_size)), p_(padding) {
  check_pool_args("nn.MaxPool2d", {k_.first, k_.second}, {s_.first, s_.second}, {p_.first, p_.second});
}

array MaxPool2d::forward(const array& x) {
  return pool("nn.MaxPool2d", x, {k_.first, k_.second}, {s_.first, s_.second}, {p_.first, p_.second}, true);
}

AvgPool2d::AvgPool2d(std::pair<int, int> kernel_size, std::pair<int, int> stride, std::pair<int, int> padding)
    : k_(kernel_size), s_(default_stride(stride, kernel_size)), p_(padding) {
  check_pool_args("nn.AvgPool2d", {k_.first, k_.second}, {s_.first, s_.second}, {p_.first, p_.second});
}

array AvgPool2d::forward(const array& x) {
  return pool("nn.AvgPool2d", x, {k_.first, k_.second}, {s_.first, s_.second}, {p_.first, p_.second}, false);
}

} // namespace nuvec::nn
