// nuvec: discrete Fourier transforms (MLX's mlx/fft.h API: names, argument order, defaults),
// plus NumPy's norm modes, fftfreq/rfftfreq and fftshift/ifftshift. Ops in src/ops/fft.cpp,
// the FFT primitive's rules in src/primitives/fft.cpp, its FFTW kernel in src/backend/cpu/fft.cpp.
//
// Conventions for every transform below:
// - Forward: X[k] = sum_j x[j] exp(-2 pi i j k / n); inverse: x[j] = sum_k X[k] exp(+2 pi i j k / n),
//   per transformed axis, then scaled by the norm mode (N = product of the transformed lengths):
//   "backward" (default) 1 forward and 1/N inverse; "ortho" 1/sqrt(N) both ways; "forward"
//   1/N forward and 1 inverse (NumPy's norm argument).
// - `n` gives the transformed lengths: the input is zero-padded or cropped (from the end) to
//   them along `axes` first. Without `n`, the input's lengths (for irfft: 2 * (m - 1)).
// - Dtypes: complex transforms return complex64 (real and integer inputs are cast; MLX has no
//   complex128, so float64 input gives complex64); rfft* take real input (cast to float32) and
//   return complex64; irfft* return float32.
// - Throws std::out_of_range for an axis out of range, std::invalid_argument for repeated
//   axes, n and axes of different lengths, a non-positive n, complex input to rfft* or an
//   unknown norm; every message starts with "[fft...]" naming the op.
#pragma once

#include <optional>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/stream.h"

namespace nuvec::fft {

/// Scaling of a transform pair (NumPy's `norm`): Backward scales the inverse by 1/N, Ortho
/// both directions by 1/sqrt(N), Forward the forward transform by 1/N.
enum class FFTNorm { Backward, Ortho, Forward };

/// n-dimensional DFT over `axes` with lengths n (see the conventions above).
/// Shapes: out = a's shape with out[axes[i]] = n[i]. Source: MLX fft::fftn, NumPy fft.fftn.
array fftn(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array fftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array fftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// n-dimensional inverse DFT over `axes` (1/N scaling under the default norm).
/// Shapes: as fftn. Source: MLX fft::ifftn, NumPy fft.ifftn.
array ifftn(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array ifftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// One-dimensional DFT along axis (length n). Shapes: out[axis] = n. Source: MLX fft::fft.
array fft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array fft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// One-dimensional inverse DFT along axis. Source: MLX fft::ifft.
array ifft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// Two-dimensional DFT (fftn over axes, default {-2, -1}). Source: MLX fft::fft2.
array fft2(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array fft2(
    const array& a,
    const std::vector<int>& axes = {-2, -1},
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});

/// Two-dimensional inverse DFT (ifftn over axes, default {-2, -1}). Source: MLX fft::ifft2.
array ifft2(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array ifft2(
    const array& a,
    const std::vector<int>& axes = {-2, -1},
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});

/// DFT of real input over `axes`, keeping the n/2 + 1 non-negative frequencies of the last
/// axis in `axes` (the others are full). Shapes: out[axes[i]] = n[i], except
/// out[axes.back()] = n.back() / 2 + 1. Throws std::invalid_argument for complex input.
/// Source: MLX fft::rfftn, NumPy fft.rfftn.
array rfftn(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array rfftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// Inverse of rfftn: the real signal whose spectrum has the given non-negative frequencies
/// along the last axis in `axes` (Hermitian symmetry supplies the rest; the imaginary parts
/// of the zero and, for even n, Nyquist bins are ignored). The input's last transformed
/// axis is padded/cropped to n.back() / 2 + 1, the others to n[i]. Without n, the last
/// length is 2 * (m - 1). Shapes: out[axes[i]] = n[i]. Dtype: float32.
/// Source: MLX fft::irfftn, NumPy fft.irfftn.
array irfftn(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array irfftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array irfftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// One-dimensional real DFT along axis: n / 2 + 1 bins. Source: MLX fft::rfft.
array rfft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// One-dimensional inverse real DFT along axis: a real signal of length n (default
/// 2 * (m - 1)). Source: MLX fft::irfft.
array irfft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array irfft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

/// Two-dimensional real DFT (rfftn over axes, default {-2, -1}). Source: MLX fft::rfft2.
array rfft2(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array rfft2(
    const array& a,
    const std::vector<int>& axes = {-2, -1},
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});

/// Two-dimensional inverse real DFT (irfftn over axes, default {-2, -1}). Source: MLX
/// fft::irfft2.
array irfft2(
    const array& a,
    const Shape& n,
    const std::vector<int>& axes,
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});
array irfft2(
    const array& a,
    const std::vector<int>& axes = {-2, -1},
    FFTNorm norm = FFTNorm::Backward,
    StreamOrDevice s = {});

/// The sample frequencies of an n-point DFT with sample spacing d:
/// [0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (d * n). Shapes: (n,). Dtype: float32.
/// Throws std::invalid_argument for n <= 0 or d == 0. Source: NumPy fft.fftfreq.
array fftfreq(int n, double d = 1.0, StreamOrDevice s = {});

/// The non-negative sample frequencies of an n-point real DFT: [0, 1, ..., n/2] / (d * n).
/// Shapes: (n/2 + 1,). Dtype: float32. Throws as fftfreq. Source: NumPy fft.rfftfreq.
array rfftfreq(int n, double d = 1.0, StreamOrDevice s = {});

/// a rolled by floor(len/2) along each of axes (default: all), moving the zero frequency to
/// the centre. Throws std::invalid_argument for a bad axis (MLX). Source: NumPy
/// fft.fftshift; MLX's overloads.
array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array fftshift(const array& a, StreamOrDevice s = {});

/// The inverse of fftshift: a rolled by -floor(len/2) along each of axes (default: all).
/// Source: NumPy fft.ifftshift.
array ifftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array ifftshift(const array& a, StreamOrDevice s = {});

// MLX's exact signatures (no norm argument, the stream or device last): the same transforms
// under the default "backward" norm, so MLX-style calls that pass a stream positionally
// compile unchanged.
#define NUVEC_FFT_MLX_OVERLOADS(name)                                                       \
  inline array name(const array& a, const Shape& n, const std::vector<int>& axes, StreamOrDevice s) { \
    return name(a, n, axes, FFTNorm::Backward, s);                                           \
  }                                                                                          \
  inline array name(const array& a, const std::vector<int>& axes, StreamOrDevice s) {        \
    return name(a, axes, FFTNorm::Backward, s);                                              \
  }
#define NUVEC_FFT_MLX_OVERLOADS_1D(name)                                                    \
  inline array name(const array& a, int n, int axis, StreamOrDevice s) {                     \
    return name(a, n, axis, FFTNorm::Backward, s);                                           \
  }                                                                                          \
  inline array name(const array& a, int axis, StreamOrDevice s) {                            \
    return name(a, axis, FFTNorm::Backward, s);                                              \
  }
NUVEC_FFT_MLX_OVERLOADS(fftn)
NUVEC_FFT_MLX_OVERLOADS(ifftn)
NUVEC_FFT_MLX_OVERLOADS(rfftn)
NUVEC_FFT_MLX_OVERLOADS(irfftn)
NUVEC_FFT_MLX_OVERLOADS(fft2)
NUVEC_FFT_MLX_OVERLOADS(ifft2)
NUVEC_FFT_MLX_OVERLOADS(rfft2)
NUVEC_FFT_MLX_OVERLOADS(irfft2)
NUVEC_FFT_MLX_OVERLOADS_1D(fft)
NUVEC_FFT_MLX_OVERLOADS_1D(ifft)
NUVEC_FFT_MLX_OVERLOADS_1D(rfft)
NUVEC_FFT_MLX_OVERLOADS_1D(irfft)
#undef NUVEC_FFT_MLX_OVERLOADS
#undef NUVEC_FFT_MLX_OVERLOADS_1D

/// fftn / ifftn / rfftn / irfftn over every axis with the stream or device given (MLX's).
inline array fftn(const array& a, StreamOrDevice s) { return fftn(a, FFTNorm::Backward, s); }
inline array ifftn(const array& a, StreamOrDevice s) { return ifftn(a, FFTNorm::Backward, s); }
inline array rfftn(const array& a, StreamOrDevice s) { return rfftn(a, FFTNorm::Backward, s); }
inline array irfftn(const array& a, StreamOrDevice s) { return irfftn(a, FFTNorm::Backward, s); }

} // namespace nuvec::fft
