// nuvec: the FFT primitive family (complex, real-to-complex and complex-to-real transforms
// over a set of axes). Rules in src/primitives/fft.cpp, FFTW kernel in src/backend/cpu/fft.cpp.
#pragma once

#include <vector>

#include "primitives/primitives.h"

namespace nuvec {

/// A multi-dimensional DFT over `axes` of its one input; ops pad/crop and normalise around it.
/// - !real: complex64 -> complex64, same shape; forward unscaled, inverse scaled by 1/N.
/// - real && !inverse (rfft): float32 -> complex64, axes.back() becomes n / 2 + 1.
/// - real && inverse (irfft): complex64 (axes.back() of length n / 2 + 1) -> float32 with
///   axes.back() of length `real_length`, scaled by 1/N.
/// N is the product of the transformed (real-signal) lengths. `real_length` is kept because
/// n / 2 + 1 bins do not tell an odd n from an even one.
class FFT : public Primitive {
 public:
  FFT(Stream stream, std::vector<int> axes, bool inverse, bool real, int real_length = 0)
      : Primitive(stream),
        axes_(std::move(axes)),
        inverse_(inverse),
        real_(real),
        real_length_(real_length) {}
  const std::vector<int>& axes() const { return axes_; }
  bool inverse() const { return inverse_; }
  bool real() const { return real_; }
  int real_length() const { return real_length_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<std::vector<int>, bool, bool, int> state() const { return {axes_, inverse_, real_, real_length_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_;
  bool inverse_;
  bool real_;
  int real_length_;
};

/// Records one FFT node on x (already of the primitive's input dtype and shape, axes
/// normalised); shared by the ops and by the rules, which differentiate through it again.
array fft_node(const array& x, std::vector<int> axes, bool inverse, bool real, int real_length, Stream s);

} // namespace nuvec
