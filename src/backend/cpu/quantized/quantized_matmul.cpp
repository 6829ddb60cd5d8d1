// nuvec: CPU kernels of QuantizedMatmul and GatherQmm (meaning and input contract:
// src/quantized/quantized.h; MLX's mlx/backend/cpu/quantized.cpp computes the same). Both
// run qdot::qmm (cpu/quantized/qdot.h): x read as float32 rows, the weight dequantized a
// group at a time in registers, float32 sums. GatherQmm groups its batch entries by weight
// index, so that each w[e] is decoded once for all the rows that use it.
#include <vector>

#include "backend/cpu/quantized/qdot.h"
#include "quantized/quantized.h"

namespace nuvec {

namespace {

/// The weight operands {w, scales[, biases]} of a quantized node's inputs.
cpu::qdot::QWeights weights_of(const QuantSpec& spec, const std::vector<array>& inputs) {
  return cpu::qdot::QWeights(spec, inputs[1], inputs[2], spec.has_biases() ? &inputs[3] : nullptr);
}

/// The unpacked extent of the product's N: out's last axis.
int64_t out_cols(const array& out) {
  return out.shape(-1);
}

} // namespace

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  if (!cpu::qdot::allocate_output(out)) return;
  const int64_t K = inputs[0].shape(-1), N = out_cols(out), R = static_cast<int64_t>(out.size()) / N;
  const cpu::qdot::FloatRows x(inputs[0]);
  const auto w = weights_of(spec_, inputs);
  cpu::qdot::dispatch_qmm(out.dtype(), spec_, "quantized_matmul", [&]<typename T, typename S>() {
    cpu::qdot::RowSet<T> rows;
    T* o = static_cast<T*>(out.raw_data());
    for (int64_t r = 0; r < R; ++r) {
      rows.x.push_back(x.p + r * K);
      rows.out.push_back(o + r * N);
    }
    cpu::qdot::qmm<T, S>(w.matrix(0), transpose_, N, K, rows);
  });
}

void GatherQmm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  const size_t n_in = inputs.size();
  const array& x_in = inputs[0];
  const int64_t A = x_in.shape(0), M = x_in.shape(-2), K = x_in.shape(-1);
  const auto w = weights_of(spec_, inputs);
  // Indices are checked even when the output is empty of rows, before any allocation.
  const auto plan = cpu::qdot::plan_gather(inputs[n_in - 2], inputs[n_in - 1], A, w.count, "gather_qmm");
  if (!cpu::qdot::allocate_output(out)) return;
  const int64_t N = out_cols(out);
  const cpu::qdot::FloatRows x(x_in);
  cpu::qdot::dispatch_qmm(out.dtype(), spec_, "gather_qmm", [&]<typename T, typename S>() {
    T* o = static_cast<T*>(out.raw_data());
    cpu::qdot::RowSet<T> rows;
    for (size_t i = 0; i + 1 < plan.runs.size(); ++i) {
      rows.x.clear();
      rows.out.clear();
      for (int64_t j = plan.runs[i]; j < plan.runs[i + 1]; ++j) {
        const int64_t b = plan.order[j];
        for (int64_t m = 0; m < M; ++m) {
          rows.x.push_back(x.p + (plan.lhs[b] * M + m) * K);
          rows.out.push_back(o + (b * M + m) * N);
        }
      }
      cpu::qdot::qmm<T, S>(w.matrix(plan.rhs[plan.order[plan.runs[i]]]), transpose_, N, K, rows);
    }
  });
}

} // namespace nuvec
