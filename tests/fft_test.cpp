// nuvec tests: the fft ops against a direct O(n^2) float64 DFT written here (NumPy's
// definitions and norm modes), n-padding/cropping, axes, round trips, real transforms with odd
// and even n; derivatives and batching of the FFT primitive through tests/checker.h.
#include <cmath>
#include <complex>
#include <numbers>
#include <thread>
#include <vector>

#include "checker.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

using cdouble = std::complex<double>;
using fft::FFTNorm;

// A dense row-major complex tensor of reference values.
struct CRef {
  Shape shape;
  std::vector<cdouble> v;
};

std::vector<int64_t> dense_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

CRef cref_of(const array& a) {
  array c = contiguous(astype(a, complex64));
  eval(c);
  const complex64_t* p = c.data<complex64_t>();
  CRef r{a.shape(), {}};
  for (size_t i = 0; i < c.size(); ++i) r.v.emplace_back(p[i].real(), p[i].imag());
  return r;
}

// Copies r into a shape where axis has length len: zero-padded or cropped at the end.
CRef fit(const CRef& r, int axis, int len) {
  Shape shape = r.shape;
  shape[axis] = len;
  CRef out{shape, std::vector<cdouble>(numel(shape))};
  auto is = dense_strides(r.shape), os = dense_strides(shape);
  for (int64_t i = 0; i < numel(shape); ++i) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t idx = rem / os[d];
      rem %= os[d];
      if (idx >= r.shape[d]) inside = false;
      src += idx * is[d];
    }
    if (inside) out.v[i] = r.v[src];
  }
  return out;
}

// The direct DFT along one axis: sign -1 forward, +1 inverse (unscaled).
CRef dft_axis(const CRef& r, int axis, int sign) {
  CRef out{r.shape, std::vector<cdouble>(r.v.size())};
  auto st = dense_strides(r.shape);
  int64_t n = r.shape[axis], s = st[axis];
  for (int64_t i = 0; i < numel(r.shape); ++i) {
    int64_t k = (i / s) % n;
    int64_t base = i - k * s;
    cdouble acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      double ang = sign * 2 * std::numbers::pi * double(j * k % n) / double(n);
      acc += r.v[base + j * s] * cdouble(std::cos(ang), std::sin(ang));
    }
    out.v[i] = acc;
  }
  return out;
}

double norm_scale(FFTNorm norm, bool inverse, double total) {
  switch (norm) {
    case FFTNorm::Backward: return inverse ? 1.0 / total : 1.0;
    case FFTNorm::Ortho: return 1.0 / std::sqrt(total);
    case FFTNorm::Forward: return inverse ? 1.0 : 1.0 / total;
  }
  return 1.0;
}

// NumPy's fftn / ifftn with lengths n over axes (normalised).
CRef ref_fftn(CRef r, const Shape& n, const std::vector<int>& axes, bool inverse, FFTNorm norm) {
  double total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    r = fit(r, axes[i], n[i]);
    r = dft_axis(r, axes[i], inverse ? 1 : -1);
    total *= n[i];
  }
  double sc = norm_scale(norm, inverse, total);
  for (auto& x : r.v) x *= sc;
  return r;
}

// NumPy's irfftn: fit every axis, unscaled inverse DFTs along all but the last axis, then
// along the last rebuild the Hermitian spectrum (ignoring the imaginary parts of bins with no
// partner), inverse transform, real part; finally the norm's scale.
CRef ref_irfftn(CRef r, const Shape& n, const std::vector<int>& axes, FFTNorm norm) {
  int last = axes.back();
  int len = n.back();
  double total = 1;
  for (size_t i = 0; i + 1 < axes.size(); ++i) {
    r = fit(r, axes[i], n[i]);
    r = dft_axis(r, axes[i], 1);
    total *= n[i];
  }
  total *= len;
  r = fit(r, last, len / 2 + 1);
  CRef full = fit(r, last, len);
  auto st = dense_strides(full.shape);
  int64_t s = st[last];
  for (int64_t i = 0; i < numel(full.shape); ++i) {
    int64_t k = (i / s) % len;
    int64_t base = i - k * s;
    if (k == 0 || (len % 2 == 0 && k == len / 2)) {
      full.v[i] = full.v[i].real();
    } else if (k > len / 2) {
      full.v[i] = std::conj(full.v[base + (len - k) * s]);
    }
  }
  CRef out = dft_axis(full, last, 1);
  double sc = norm_scale(norm, true, total);
  for (auto& x : out.v) x = x.real() * sc;
  return out;
}

// Keeps bins [0, n/2] of the last axis of a full spectrum.
CRef half(const CRef& r, int axis) {
  return fit(r, axis, r.shape[axis] / 2 + 1);
}

void expect_cclose(const array& got, const CRef& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape);
  auto g = cref_of(got);
  double scale = 1;
  for (auto& x : want.v) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < g.v.size(); ++i) {
    EXPECT_NEAR(g.v[i].real(), want.v[i].real(), tol * scale) << "real part at " << i;
    EXPECT_NEAR(g.v[i].imag(), want.v[i].imag(), tol * scale) << "imag part at " << i;
  }
}

array crandn(const Shape& shape) {
  return add(randn(shape, complex64), multiply(randn(shape, complex64), array(complex64_t(0, 1))));
}

// A complex64 array from two real float64 arrays (so check_grad can perturb both parts).
array make_complex(const array& re, const array& im) {
  return add(astype(re, complex64), multiply(astype(im, complex64), array(complex64_t(0, 1))));
}

// Real and imaginary parts side by side: a real function of a complex result. The
// imaginary part is taken as real(-i z): nuvec's Imag vjp (-i g, MLX's literal rule) has the
// opposite sign to the conjugate-derivative convention Multiply and Matmul follow, which
// would flip these gradients for reasons outside the FFT.
array parts(const array& z) {
  return concatenate({real(z), real(multiply(z, array(complex64_t(0, -1))))}, -1);
}

const FFTNorm kNorms[] = {FFTNorm::Backward, FFTNorm::Ortho, FFTNorm::Forward};
constexpr double kTol = 2e-5;

TEST(FFT, OneDimensionalEveryNorm) {
  for (int len : {1, 2, 7, 8, 31, 64}) {
    array x = crandn({3, len});
    for (FFTNorm norm : kNorms) {
      expect_cclose(fft::fft(x, -1, norm), ref_fftn(cref_of(x), {len}, {1}, false, norm), kTol);
      expect_cclose(fft::ifft(x, -1, norm), ref_fftn(cref_of(x), {len}, {1}, true, norm), kTol);
    }
  }
}

TEST(FFT, PaddingCroppingAndAxis) {
  array x = crandn({6, 5});
  for (int n : {3, 6, 10}) {
    expect_cclose(fft::fft(x, n, 0), ref_fftn(cref_of(x), {n}, {0}, false, FFTNorm::Backward), kTol);
    expect_cclose(fft::ifft(x, n, 1), ref_fftn(cref_of(x), {n}, {1}, true, FFTNorm::Backward), kTol);
  }
  // Transposed (non-contiguous) and negatively strided inputs.
  array t = transpose(x);
  expect_cclose(fft::fft(t, 0), ref_fftn(cref_of(t), {5}, {0}, false, FFTNorm::Backward), kTol);
  array r = slice(x, {5, 0}, {-7, 5}, {-2, 1});
  expect_cclose(fft::fft(r, 0), ref_fftn(cref_of(r), {3}, {0}, false, FFTNorm::Backward), kTol);
}

TEST(FFT, MultiDimensional) {
  array x = crandn({4, 3, 6});
  CRef rx = cref_of(x);
  for (FFTNorm norm : kNorms) {
    expect_cclose(fft::fft2(x, {-2, -1}, norm), ref_fftn(rx, {3, 6}, {1, 2}, false, norm), kTol);
    expect_cclose(fft::ifft2(x, {5, 4}, {0, 2}, norm), ref_fftn(rx, {5, 4}, {0, 2}, true, norm), kTol);
    expect_cclose(fft::fftn(x, norm), ref_fftn(rx, {4, 3, 6}, {0, 1, 2}, false, norm), kTol);
    expect_cclose(fft::ifftn(x, {2, 7}, {2, 0}, norm), ref_fftn(rx, {2, 7}, {2, 0}, true, norm), kTol);
  }
  // Round trips under every norm.
  for (FFTNorm norm : kNorms) {
    expect_cclose(fft::ifftn(fft::fftn(x, norm), norm), rx, kTol);
  }
}

TEST(FFT, RealTransformsOddAndEven) {
  for (int len : {1, 2, 5, 8, 9}) {
    array x = randn({2, len}, float32);
    CRef rx = cref_of(x);
    for (FFTNorm norm : kNorms) {
      expect_cclose(fft::rfft(x, -1, norm), half(ref_fftn(rx, {len}, {1}, false, norm), 1), kTol);
    }
    // rfft with n cropping and padding.
    expect_cclose(fft::rfft(x, len + 3, 1), half(ref_fftn(rx, {len + 3}, {1}, false, FFTNorm::Backward), 1), kTol);
    // irfft of an arbitrary (non-Hermitian) half spectrum, odd and even output lengths.
    array h = crandn({2, len / 2 + 1});
    for (int n : {2 * len, 2 * len - 1, len + 1}) {
      if (n <= 0) continue;
      for (FFTNorm norm : kNorms) {
        array y = fft::irfft(h, n, -1, norm);
        EXPECT_EQ(y.dtype(), float32);
        expect_cclose(y, ref_irfftn(cref_of(h), {n}, {1}, norm), kTol);
      }
    }
    // Round trip with the right n.
    expect_cclose(fft::irfft(fft::rfft(x), len, -1), rx, kTol);
  }
  // Default irfft length is 2 * (m - 1).
  EXPECT_EQ(fft::irfft(crandn({5})).shape(), Shape({8}));
}

TEST(FFT, RealMultiDimensional) {
  array x = randn({3, 4, 5}, float32);
  CRef rx = cref_of(x);
  for (FFTNorm norm : kNorms) {
    expect_cclose(fft::rfft2(x, {-2, -1}, norm), half(ref_fftn(rx, {4, 5}, {1, 2}, false, norm), 2), kTol);
    expect_cclose(fft::rfftn(x, {6, 3}, {2, 0}, norm), half(ref_fftn(rx, {6, 3}, {2, 0}, false, norm), 0), kTol);
  }
  array h = crandn({3, 4, 4});
  for (FFTNorm norm : kNorms) {
    expect_cclose(fft::irfft2(h, {4, 7}, {0, 2}, norm), ref_irfftn(cref_of(h), {4, 7}, {0, 2}, norm), kTol);
    expect_cclose(fft::irfftn(h, norm), ref_irfftn(cref_of(h), {3, 4, 6}, {0, 1, 2}, norm), kTol);
  }
  expect_cclose(fft::irfftn(fft::rfftn(x), {3, 4, 5}, {0, 1, 2}), rx, kTol);
}

TEST(FFT, Dtypes) {
  EXPECT_EQ(fft::fft(randn({4}, float64)).dtype(), complex64);
  EXPECT_EQ(fft::fft(randint({4}, -3, 3)).dtype(), complex64);
  EXPECT_EQ(fft::rfft(randn({4}, float64)).dtype(), complex64);
  EXPECT_EQ(fft::irfft(crandn({4})).dtype(), float32);
  array xi = randint({6}, -5, 5);
  expect_cclose(fft::fft(xi), ref_fftn(cref_of(xi), {6}, {0}, false, FFTNorm::Backward), kTol);
}

TEST(FFT, FreqAndShift) {
  for (int n : {1, 4, 5}) {
    double d = 0.3;
    std::vector<double> f, rf;
    for (int i = 0; i < n; ++i) f.push_back((i < (n + 1) / 2 ? i : i - n) / (d * n));
    for (int i = 0; i <= n / 2; ++i) rf.push_back(i / (d * n));
    array a = fft::fftfreq(n, d);
    EXPECT_EQ(a.dtype(), float32);
    expect_close(a, {n}, f);
    expect_close(fft::rfftfreq(n, d), {n / 2 + 1}, rf);
  }
  array x = randn({4, 5});
  auto v = to_vector(x);
  std::vector<double> sh(20), ish(20), sh1(20);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      sh[((i + 2) % 4) * 5 + (j + 2) % 5] = v[i * 5 + j];
      ish[((i + 2) % 4) * 5 + (j + 3) % 5] = v[i * 5 + j];
      sh1[i * 5 + (j + 2) % 5] = v[i * 5 + j];
    }
  }
  expect_close(fft::fftshift(x), {4, 5}, sh);
  expect_close(fft::ifftshift(x), {4, 5}, ish);
  expect_close(fft::fftshift(x, std::vector<int>{-1}), {4, 5}, sh1);
  expect_allclose(fft::ifftshift(fft::fftshift(x)), x);
}

GradCheckOptions grad_opts() {
  GradCheckOptions opts;
  // The functions below are linear or quadratic, so central differences are exact for any
  // step; a large one keeps float32 rounding in the loss from dominating the quotient.
  opts.eps = 0.25;
  opts.rtol = 2e-3;
  opts.atol = 2e-3;
  return opts;
}

TEST(FFT, GradComplexPlumbing) {
  array re = randn({3, 6}), im = randn({3, 6});
  check_grad([](const std::vector<array>& xs) { return parts(make_complex(xs[0], xs[1])); }, {re, im}, grad_opts());
}

TEST(FFT, GradComplexTransforms) {
  auto opts = grad_opts();
  array re = randn({3, 6}), im = randn({3, 6});
  for (FFTNorm norm : kNorms) {
    SCOPED_TRACE("norm " + std::to_string(static_cast<int>(norm)));
    check_grad([&](const std::vector<array>& xs) { return parts(fft::fft(make_complex(xs[0], xs[1]), 8, 1, norm)); }, {re, im}, opts);
    check_grad([&](const std::vector<array>& xs) { return parts(fft::ifft(make_complex(xs[0], xs[1]), 5, 0, norm)); }, {re, im}, opts);
  }
  check_grad([](const std::vector<array>& xs) { return parts(fft::fft2(xs[0])); }, {re}, opts);
  check_grad(
      [](const std::vector<array>& xs) {
        array y = fft::fftn(make_complex(xs[0], xs[1]));
        return sum(square(abs(y)));
      },
      {re, im}, opts);
}

TEST(FFT, GradRealForward) {
  auto opts = grad_opts();
  for (int len : {5, 6}) {
    SCOPED_TRACE("n " + std::to_string(len));
    array x = randn({2, len});
    check_grad([](const std::vector<array>& xs) { return parts(fft::rfft(xs[0])); }, {x}, opts);
    check_grad([](const std::vector<array>& xs) { return parts(fft::rfft2(xs[0], {-2, -1}, FFTNorm::Ortho)); }, {x}, opts);
  }
}

TEST(FFT, GradRealInverse) {
  auto opts = grad_opts();
  for (int len : {5, 6}) {
    SCOPED_TRACE("n " + std::to_string(len));
    array hr = randn({2, len / 2 + 1}), hi = randn({2, len / 2 + 1});
    check_grad([len](const std::vector<array>& xs) { return fft::irfft(make_complex(xs[0], xs[1]), len, -1); }, {hr, hi}, opts);
    check_grad(
        [len](const std::vector<array>& xs) { return fft::irfft2(make_complex(xs[0], xs[1]), {3, len}, {0, 1}, FFTNorm::Forward); },
        {hr, hi}, opts);
  }
}

TEST(FFT, Vmap) {
  array x = crandn({3, 4, 5});
  auto both = [](const array& z) { return std::vector<array>{real(z), imag(z)}; };
  check_vmap([&](const std::vector<array>& xs) { return both(fft::fft(xs[0], 0)); }, {x}, {1}, 1e-5, 1e-5);
  check_vmap([&](const std::vector<array>& xs) { return both(fft::ifft2(xs[0])); }, {x}, {2}, 1e-5, 1e-5);
  check_vmap([&](const std::vector<array>& xs) { return both(fft::fftn(xs[0], {6}, {-1})); }, {x}, {0}, 1e-5, 1e-5);
  array r = randn({3, 4, 5}, float32);
  check_vmap([&](const std::vector<array>& xs) { return both(fft::rfft(xs[0], 0)); }, {r}, {1}, 1e-5, 1e-5);
  check_vmap([&](const std::vector<array>& xs) { return std::vector<array>{fft::irfft(xs[0], 7, 0)}; }, {x}, {2}, 1e-5, 1e-5);
  check_vmap([&](const std::vector<array>& xs) { return std::vector<array>{fft::irfft2(xs[0])}; }, {x}, {0}, 1e-5, 1e-5);
}

TEST(FFT, MlxStreamOverloads) {
  // MLX's signatures pass the stream or device last, with no norm.
  array x = crandn({4, 6});
  CRef rx = cref_of(x);
  Device cpu(Device::cpu);
  expect_cclose(fft::fft(x, 8, 0, cpu), ref_fftn(rx, {8}, {0}, false, FFTNorm::Backward), kTol);
  expect_cclose(fft::ifft(x, 1, cpu), ref_fftn(rx, {6}, {1}, true, FFTNorm::Backward), kTol);
  expect_cclose(fft::fft2(x, {3, 5}, {0, 1}, cpu), ref_fftn(rx, {3, 5}, {0, 1}, false, FFTNorm::Backward), kTol);
  expect_cclose(fft::fftn(x, cpu), ref_fftn(rx, {4, 6}, {0, 1}, false, FFTNorm::Backward), kTol);
  expect_cclose(fft::ifftn(x, std::vector<int>{0}, cpu), ref_fftn(rx, {4}, {0}, true, FFTNorm::Backward), kTol);
  expect_allclose(fft::fftshift(real(x), std::vector<int>{0}, cpu), fft::fftshift(real(x), std::vector<int>{0}));
}

TEST(FFT, ConcurrentPlans) {
  // FFTW's planner is not thread-safe: transforms of many sizes planned from several threads
  // at once must still agree with the reference.
  std::vector<array> xs;
  for (int t = 0; t < 8; ++t) xs.push_back(crandn({2, 5 + t}));
  std::vector<array> ys = xs;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < xs.size(); ++t) {
    threads.emplace_back([&, t] {
      ys[t] = fft::ifft(fft::fft(xs[t], 3 * static_cast<int>(t) + 7, 1), 1);
      eval(ys[t]);
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < xs.size(); ++t) {
    int n = 3 * static_cast<int>(t) + 7;
    CRef want = fit(cref_of(xs[t]), 1, n);
    expect_cclose(ys[t], want, kTol);
  }
}

TEST(FFT, Errors) {
  array x = crandn({3, 4});
  expect_throws_naming<std::invalid_argument>([&] { fft::fft(x, 2); }, "[fft]");
  expect_throws_naming<std::invalid_argument>([&] { fft::fftn(x, std::vector<int>{0, -3}); }, "[fftn]");
  expect_throws_naming<std::invalid_argument>([&] { fft::fft2(x, std::vector<int>{1, 1}); }, "[fft2]");
  expect_throws_naming<std::invalid_argument>([&] { fft::fft(x, 0, 0); }, "[fft]");
  expect_throws_naming<std::invalid_argument>([&] { fft::ifftn(x, {4}, {0, 1}); }, "[ifftn]");
  expect_throws_naming<std::invalid_argument>([&] { fft::rfft(x); }, "[rfft]");
  expect_throws_naming<std::invalid_argument>([&] { fft::irfft(crandn({1})); }, "[irfft]");
  expect_throws_naming<std::invalid_argument>([&] { fft::fftfreq(0); }, "[fftfreq]");
  expect_throws_naming<std::invalid_argument>([&] { fft::fftshift(x, std::vector<int>{2}); }, "[fftshift]");
}

} // namespace
} // namespace nuvec::testing
