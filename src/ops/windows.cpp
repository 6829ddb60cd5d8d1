// nuvec: the window functions (hanning, hamming, bartlett, blackman) with NumPy's formulas
// and MLX's edge cases (empty for M < 1, [1] for M == 1), float32.
#include <cmath>
#include <numbers>

#include "ops/ops_common.h"

namespace nuvec {

namespace {

// 2 pi n / (M - 1) for n in [0, M), float32: the phase every cosine window is built on.
array window_phase(int M, StreamOrDevice s) {
  return multiply(
      arange(0, M, float32, s), array(static_cast<float>(2.0 * std::numbers::pi / (M - 1))), s);
}

// The window for M points, or the degenerate results shared by all windows.
template <typename F>
array window(int M, StreamOrDevice s, F&& body) {
  if (M < 1) return zeros({0}, float32, s);
  if (M == 1) return ones({1}, float32, s);
  return body();
}

} // namespace

array hanning(int M, StreamOrDevice s) {
  return window(M, s, [&] {
    return square(sin(multiply(window_phase(M, s), array(0.5f), s), s), s);
  });
}

array hamming(int M, StreamOrDevice s) {
  return window(M, s, [&] {
    return subtract(array(0.54f), multiply(array(0.46f), cos(window_phase(M, s), s), s), s);
  });
}

array bartlett(int M, StreamOrDevice s) {
  return window(M, s, [&] {
    array x = multiply(arange(0, M, float32, s), array(2.0f / static_cast<float>(M - 1)), s);
    return subtract(array(1.0f), abs(subtract(x, array(1.0f), s), s), s);
  });
}

array blackman(int M, StreamOrDevice s) {
  return window(M, s, [&] {
    array p = window_phase(M, s);
    return add(
        subtract(array(0.42f), multiply(array(0.5f), cos(p, s), s), s),
        multiply(array(0.08f), cos(multiply(p, array(2.0f), s), s), s), s);
  });
}

} // namespace nuvec
