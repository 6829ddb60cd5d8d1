// nuvec: CPU kernels of nuvec::random: RandomBits (Threefry-2x32 in MLX's counter layout,
// src/backend/common/threefry.h) and CovarianceSqrt (U sqrt(S) V^T through LAPACKE's SVD).
#include <lapacke.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "backend/common/threefry.h"
#include "core/errors.h"
#include "nuvec/allocator.h"
#include "primitives/random.h"

namespace nuvec {

namespace {

// Element offset of the row-major index `flat` of an array with this shape and strides.
int64_t strided_offset(int64_t flat, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    int64_t n = shape[d];
    if (n == 0) return 0;
    off += (flat % n) * strides[d];
    flat /= n;
  }
  return off;
}

} // namespace

void RandomBits::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& keys = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const int64_t num_keys = keys.size() / 2;
  if (out.size() == 0 || num_keys == 0) return;
  const size_t bytes_per_key = out.nbytes() / num_keys;
  const auto* k = static_cast<const uint32_t*>(keys.raw_data());
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  for (int64_t i = 0; i < num_keys; ++i) {
    threefry::Words key{
        k[strided_offset(2 * i, keys.shape(), keys.strides())],
        k[strided_offset(2 * i + 1, keys.shape(), keys.strides())]};
    threefry::fill_bits(key, dst + i * bytes_per_key, bytes_per_key);
  }
}

void CovarianceSqrt::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int n = in.shape().back();
  const int64_t nn = static_cast<int64_t>(n) * n;
  const int64_t batch = in.size() / nn;
  std::vector<double> a(nn), u(nn), vt(nn), s(n), superb(std::max(n - 1, 1)), r(nn);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t e = 0; e < nn; ++e) {
      int64_t off = strided_offset(b * nn + e, in.shape(), in.strides());
      a[e] = in.dtype() == float64 ? static_cast<const double*>(in.raw_data())[off]
                                   : static_cast<const float*>(in.raw_data())[off];
    }
    int info = LAPACKE_dgesvd(
        LAPACK_ROW_MAJOR, 'A', 'A', n, n, a.data(), n, s.data(), u.data(), n, vt.data(), n,
        superb.data());
    if (info != 0) {
      throw std::runtime_error(error_message(
          "multivariate_normal", "the SVD of cov must converge; got LAPACK info ", info, "."));
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int q = 0; q < n; ++q) acc += u[i * n + q] * std::sqrt(s[q]) * vt[q * n + j];
        r[i * n + j] = acc;
      }
    }
    for (int64_t e = 0; e < nn; ++e) {
      if (out.dtype() == float64) {
        static_cast<double*>(out.raw_data())[b * nn + e] = r[e];
      } else {
        static_cast<float*>(out.raw_data())[b * nn + e] = static_cast<float>(r[e]);
      }
    }
  }
}

} // namespace nuvec
