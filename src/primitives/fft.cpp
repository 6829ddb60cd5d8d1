// nuvec: rules of the FFT family (shapes, vjp, jvp, vmap, equivalence). The transforms are
// linear, so jvp applies the same transform to the tangent; vjp applies the adjoint in
// nuvec's complex convention (cotangent = dL/dRe + i dL/dIm, as Matmul's conjugate rule):
// fft -> N * (unscaled inverse), ifft -> fft / N, rfft -> real part of the adjoint of the
// zero-padded full transform, irfft -> rfft weighted by 1 / N at the unpaired bins and 2 / N
// at the bins standing for a conjugate pair (MLX's mask of doubled bins, with odd n handled).
#include <typeinfo>

#include "primitives/batching.h"
#include "primitives/fft.h"

namespace nuvec {

namespace {

// The product of the real-signal lengths of the transformed axes of a node with this input.
double transform_size(const array& in, const std::vector<int>& axes, bool real, bool inverse, int real_length) {
  double n = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    bool last = i + 1 == axes.size();
    n *= (real && inverse && last) ? real_length : in.shape(axes[i]);
  }
  return n;
}

array scaled(const array& x, double s) {
  return multiply(x, array(static_cast<float>(s), float32));
}

} // namespace

array fft_node(const array& x, std::vector<int> axes, bool inverse, bool real, int real_length, Stream s) {
  auto prim = std::make_shared<FFT>(s, std::move(axes), inverse, real, real_length);
  Shape shape = prim->output_shapes({x})[0];
  Dtype dtype = (real && inverse) ? float32 : complex64;
  return array(shape, dtype, prim, {x});
}

const char* FFT::name() const {
  return "FFT";
}

std::vector<Shape> FFT::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  if (real_) {
    int last = axes_.back();
    shape[last] = inverse_ ? real_length_ : shape[last] / 2 + 1;
  }
  return {shape};
}

std::vector<array> FFT::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  const array& in = primals[0];
  const array& g = cotangents[0];
  double n = transform_size(in, axes_, real_, inverse_, real_length_);
  if (!real_) {
    // The unscaled forward DFT F has adjoint conj(F) = N * (scaled inverse); the scaled
    // inverse conj(F) / N has adjoint F / N.
    array t = fft_node(g, axes_, !inverse_, false, 0, stream());
    return {scaled(t, inverse_ ? 1.0 / n : n)};
  }
  int last = axes_.back();
  if (!inverse_) {
    // rfft = (keep the first n/2 + 1 bins) o F on a real signal: the adjoint zero-pads the
    // cotangent to the full length, applies conj(F) and keeps the real part.
    int len = in.shape(last);
    int kept = g.shape(last);
    array padded = pad(g, {last}, {0}, {len - kept}, array(0.0f, complex64));
    array t = fft_node(padded, axes_, true, false, 0, stream());
    return {nuvec::real(scaled(t, n))};
  }
  // irfft: bin k of the half spectrum enters the signal once (k = 0, or k = n/2 for even n)
  // or twice (as itself and as its conjugate at n - k).
  array spectrum = fft_node(g, axes_, false, true, 0, stream());
  int bins = in.shape(last);
  std::vector<float> w(bins, 2.0f);
  w[0] = 1.0f;
  if (real_length_ % 2 == 0) w[bins - 1] = 1.0f;
  Shape wshape(in.ndim(), 1);
  wshape[last] = bins;
  array weights = array(w.begin(), wshape, float32);
  return {multiply(spectrum, scaled(weights, 1.0 / n))};
}

std::vector<array> FFT::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {fft_node(tangents[0], axes_, inverse_, real_, real_length_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> FFT::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[0] < 0) return {{fft_node(inputs[0], axes_, inverse_, real_, real_length_, stream())}, {-1}};
  // Batch axis to the front; the transformed axes (counted without it) shift by one.
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  std::vector<int> shifted;
  for (int a : axes_) shifted.push_back(a + 1);
  return {{fft_node(x, shifted, inverse_, real_, real_length_, stream())}, {0}};
}

bool FFT::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const FFT*>(&other);
  return o && o->axes_ == axes_ && o->inverse_ == inverse_ && o->real_ == real_ &&
      o->real_length_ == real_length_;
}

} // namespace nuvec
