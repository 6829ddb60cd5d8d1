// nuvec: the fft ops (MLX's fft.h signatures with NumPy's norm modes): validation, dtype
// promotion (MLX has only complex64, so float64 becomes complex64 / float32), padding or
// cropping to n, one FFT node, then the norm's scale. fftfreq/rfftfreq/fftshift as NumPy.
#include "nuvec/fft.h"

#include <cmath>
#include <string>

#include "ops/ops_common.h"
#include "primitives/fft.h"

namespace nuvec::fft {

namespace {

// x padded with zeros (at the end) or cropped (from the end) to `len` along axis.
array fit_axis(const array& x, int axis, int len, StreamOrDevice s) {
  int have = x.shape(axis);
  if (have == len) return x;
  if (have > len) {
    Shape start(x.ndim(), 0), stop = x.shape();
    stop[axis] = len;
    return slice(x, start, stop, s);
  }
  return pad(x, {axis}, {0}, {len - have}, array(0.0f, x.dtype()), "constant", s);
}

// The shared body of every transform; n empty means "the input's lengths".
array transform(
    const char* op,
    const array& a,
    const Shape& n_in,
    const std::vector<int>& axes_in,
    bool inverse,
    bool real,
    FFTNorm norm,
    StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (!n_in.empty() && n_in.size() != axes_in.size()) {
    throw_invalid_argument(
        op, "n and axes must have the same length; got n ", n_in, " and axes ",
        Shape(axes_in.begin(), axes_in.end()), ".");
  }
  if (axes_in.empty()) {
    // NumPy: a transform over no axes is the identity (real transforms need one axis).
    if (real) throw_invalid_argument(op, "axes must not be empty; got ().");
    return astype(a, complex64, s);
  }
  std::vector<int> axes;
  for (int ax : axes_in) axes.push_back(normalize_axis_index(ax, nd, op));
  normalize_axes(axes, nd, op); // throws on repeats
  Shape n = n_in;
  if (n.empty()) {
    for (int ax : axes) n.push_back(a.shape(ax));
    if (real && inverse) n.back() = 2 * (n.back() - 1);
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] <= 0) throw_invalid_argument(op, "n must be positive; got ", n, ".");
  }
  array x = a;
  if (real && !inverse) {
    if (a.dtype() == complex64) {
      throw_invalid_argument(op, "input must be real; got complex64.");
    }
    x = astype(x, float32, s);
  } else {
    x = astype(x, complex64, s);
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    bool half = real && inverse && i + 1 == axes.size();
    x = fit_axis(x, axes[i], half ? n[i] / 2 + 1 : n[i], s);
  }
  array out = fft_node(x, axes, inverse, real, real ? n.back() : 0, to_stream(s));
  double total = 1;
  for (int v : n) total *= v;
  double scale = 1;
  switch (norm) {
    case FFTNorm::Backward: break; // the node scales inverses by 1/N already
    case FFTNorm::Ortho: scale = inverse ? std::sqrt(total) : 1.0 / std::sqrt(total); break;
    case FFTNorm::Forward: scale = inverse ? total : 1.0 / total; break;
  }
  if (scale != 1) out = multiply(out, array(static_cast<float>(scale), float32), s);
  return out;
}

} // namespace

array fftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("fftn", a, n, axes, false, false, norm, s);
}
array fftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("fftn", a, {}, axes, false, false, norm, s);
}
array fftn(const array& a, FFTNorm norm, StreamOrDevice s) {
  return transform("fftn", a, {}, all_axes(static_cast<int>(a.ndim())), false, false, norm, s);
}

array ifftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("ifftn", a, n, axes, true, false, norm, s);
}
array ifftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("ifftn", a, {}, axes, true, false, norm, s);
}
array ifftn(const array& a, FFTNorm norm, StreamOrDevice s) {
  return transform("ifftn", a, {}, all_axes(static_cast<int>(a.ndim())), true, false, norm, s);
}

array fft(const array& a, int n, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("fft", a, {n}, {axis}, false, false, norm, s);
}
array fft(const array& a, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("fft", a, {}, {axis}, false, false, norm, s);
}
array ifft(const array& a, int n, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("ifft", a, {n}, {axis}, true, false, norm, s);
}
array ifft(const array& a, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("ifft", a, {}, {axis}, true, false, norm, s);
}

array fft2(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("fft2", a, n, axes, false, false, norm, s);
}
array fft2(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("fft2", a, {}, axes, false, false, norm, s);
}
array ifft2(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("ifft2", a, n, axes, true, false, norm, s);
}
array ifft2(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("ifft2", a, {}, axes, true, false, norm, s);
}

array rfftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("rfftn", a, n, axes, false, true, norm, s);
}
array rfftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("rfftn", a, {}, axes, false, true, norm, s);
}
array rfftn(const array& a, FFTNorm norm, StreamOrDevice s) {
  return transform("rfftn", a, {}, all_axes(static_cast<int>(a.ndim())), false, true, norm, s);
}
array irfftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("irfftn", a, n, axes, true, true, norm, s);
}
array irfftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("irfftn", a, {}, axes, true, true, norm, s);
}
array irfftn(const array& a, FFTNorm norm, StreamOrDevice s) {
  return transform("irfftn", a, {}, all_axes(static_cast<int>(a.ndim())), true, true, norm, s);
}

array rfft(const array& a, int n, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("rfft", a, {n}, {axis}, false, true, norm, s);
}
array rfft(const array& a, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("rfft", a, {}, {axis}, false, true, norm, s);
}
array irfft(const array& a, int n, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("irfft", a, {n}, {axis}, true, true, norm, s);
}
array irfft(const array& a, int axis, FFTNorm norm, StreamOrDevice s) {
  return transform("irfft", a, {}, {axis}, true, true, norm, s);
}

array rfft2(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("rfft2", a, n, axes, false, true, norm, s);
}
array rfft2(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("rfft2", a, {}, axes, false, true, norm, s);
}
array irfft2(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("irfft2", a, n, axes, true, true, norm, s);
}
array irfft2(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("irfft2", a, {}, axes, true, true, norm, s);
}

array fftfreq(int n, double d, StreamOrDevice s) {
  if (n <= 0) throw_invalid_argument("fftfreq", "n must be positive; got ", n, ".");
  if (d == 0) throw_invalid_argument("fftfreq", "d must be nonzero; got 0.");
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i < (n + 1) / 2 ? i : i - n) / (d * n);
  return astype(array(v.begin(), {n}, float64), float32, s);
}

array rfftfreq(int n, double d, StreamOrDevice s) {
  if (n <= 0) throw_invalid_argument("rfftfreq", "n must be positive; got ", n, ".");
  if (d == 0) throw_invalid_argument("rfftfreq", "d must be nonzero; got 0.");
  int m = n / 2 + 1;
  std::vector<double> v(m);
  for (int i = 0; i < m; ++i) v[i] = i / (d * n);
  return astype(array(v.begin(), {m}, float64), float32, s);
}

namespace {

array shift(const char* op, const array& a, std::optional<std::vector<int>> axes_in, bool inverse, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  std::vector<int> axes = axes_in ? normalize_axes(*axes_in, nd, op) : all_axes(nd);
  if (axes.empty()) return a;
  Shape shifts;
  for (int ax : axes) {
    int half = a.shape(ax) / 2;
    shifts.push_back(inverse ? -half : half);
  }
  return roll(a, shifts, axes, s);
}

} // namespace

array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift("fftshift", a, axes, false, s);
}
array fftshift(const array& a, StreamOrDevice s) {
  return shift("fftshift", a, std::nullopt, false, s);
}

array ifftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift("ifftshift", a, axes, true, s);
}
array ifftshift(const array& a, StreamOrDevice s) {
  return shift("ifftshift", a, std::nullopt, true, s);
}

} // namespace nuvec::fft
