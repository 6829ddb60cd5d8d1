// nuvec: CPU kernel of QQMatmul (meaning and input contract: src/quantized/quantized.h;
// MLX's qqmm). x is quantized per group of K to the fp mode as quantize's fp_quantize does
// (src/ops/quantized.cpp: scale amax / 6 or / 448 stored as an E8M0 or E4M3 code, values
// rounded to E2M1 or E4M3), kept as the float32 values it then stands for (exact), and
// multiplied with the dequantized w_q by the core of the quantized products (qdot.h).
#include <cmath>
#include <vector>

#include "backend/cpu/quantized/qdot.h"
#include "quantized/quantized.h"

namespace nuvec {

namespace {

/// Replaces every group of `gs` values of the R x K float32 rows at x by its value after
/// the round trip through the fp format `spec` (no global scale).
void fake_quantize_rows(const QuantSpec& spec, float* x, int64_t R, int64_t K) {
  const int gs = spec.group_size;
  const float range = spec.bits == 4 ? 6.0f : 448.0f;
  cpu::qdot::split_work(R, R * K * 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < K / gs; ++g) {
        float* v = x + r * K + g * gs;
        // The graph's max: NaN anywhere in the group makes the scale NaN (E8M0's NaN code).
        float amax = 0.0f;
        for (int e = 0; e < gs; ++e) amax = std::isnan(v[e]) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(v[e]));
        const uint32_t code = math::fp_scale_code(spec.mode, amax / range);
        const float dec = math::fp_scale_value(spec.mode, code);
        for (int e = 0; e < gs; ++e) v[e] = math::fp_requantize(spec.bits, v[e], dec);
      }
    }
  });
}

} // namespace

void QQMatmul::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  if (!cpu::qdot::allocate_output(out)) return;
  const array& x_in = inputs[0];
  const int64_t K = x_in.shape(-1), N = out.shape(-1), R = static_cast<int64_t>(out.size()) / N;
  // A fresh float32 copy: the rounding is written over it.
  array xq = cpu::contiguous_copy(x_in, float32);
  float* xp = static_cast<float*>(xq.raw_data());
  fake_quantize_rows(spec_, xp, R, K);
  const cpu::qdot::QWeights w(spec_, inputs[1], inputs[2], nullptr);
  cpu::qdot::dispatch_qmm(out.dtype(), spec_, "qqmm", [&]<typename T, typename S>() {
    cpu::qdot::RowSet<T> rows;
    T* o = static_cast<T*>(out.raw_data());
    for (int64_t r = 0; r < R; ++r) {
      rows.x.push_back(xp + r * K);
      rows.out.push_back(o + r * N);
    }
    cpu::qdot::qmm<T, S>(w.matrix(0), true, N, K, rows);
  });
}

} // namespace nuvec
