// nuvec: eval_gpu of the quantized and gathered products (QuantizedMatmul, GatherQmm,
// GatherMm; their contracts: src/quantized/quantized.h). Each readies its operands
// (row-contiguous, 16-byte aligned; GatherMm's W may stay a transposed view: transposed_plain),
// describes the product as a cu::QmmArgs (qmm.h) and takes the first kernel that covers it:
// qmv (few rows), gemv_plain (GatherMm's few rows), qmm_dense (many rows: dequantize, then
// cuBLASLt), qmm (tensor cores), qmm_generic (the rest).
// Gathered indices past their operand raise std::out_of_range through index_errors.cuh.
#include "backend/common/gemm_problem.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/quantized/qmm.h"
#include "quantized/quantized.h"

namespace nuvec {
namespace {

/// `a` row-contiguous with its first element 16-byte aligned (the kernels' vector loads),
/// copied when it is not.
array operand(const array& in) {
  const array a = cu::as_row_contiguous(in);
  return cu::is_aligned(cu::device_ptr(a), 16) ? a : cu::contiguous_copy(a);
}

void run_product(const cu::QmmArgs& a) {
  if (cu::qmv_covers(a)) cu::qmv(a);
  // A sorted gather's entries share experts: the tiled kernel reads each expert's W once.
  else if (cu::gemv_plain_covers(a) && !(a.sorted && cu::qmm_covers(a))) cu::gemv_plain(a);
  else if (cu::qmm_dense_covers(a) && cu::qmm_dense(a)) return;
  else if (cu::qmm_covers(a)) cu::qmm(a);
  else cu::qmm_generic(a);
}

/// Whether GatherMm's w (E, K, N) is the swapaxes view of a row-contiguous (E, N, K) buffer (a
/// Linear's weights stacked, as mixture-of-experts layers pass them): read in place, as a
/// transposed plain W, rather than copied into (E, K, N) on every call.
/// The layout rule is matrix_layout's (the CPU kernel reads such a W in place by the same rule).
bool transposed_plain(const array& w) {
  if (w.ndim() != 3 || w.size() == 0) return false;
  const int64_t K = w.shape(1), N = w.shape(2);
  const auto& st = w.strides();
  const MatrixLayout l = matrix_layout(K, N, st[1], st[2]);
  return l.in_place && l.col_major && l.ld == K && (w.shape(0) == 1 || st[0] == N * K) &&
      cu::is_aligned(cu::device_ptr(w), 16);
}

/// The gathered products' shared body: inputs {x, w, [scales, [biases]], lhs, rhs} with x
/// (A, M, K), w (E, ...), lhs/rhs uint32 (B); `quantized` false is GatherMm (w plain (E, K, N),
/// or its transposed view: transposed_plain).
void run_gathered(
    const char* op,
    const std::vector<array>& inputs,
    array& out,
    const QuantSpec& spec,
    bool quantized,
    bool transpose,
    bool sorted) {
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  const size_t n = inputs.size();
  const bool plain_t = !quantized && transposed_plain(inputs[1]);
  const array x = operand(inputs[0]), w = plain_t ? inputs[1] : operand(inputs[1]);
  const array lhs = operand(inputs[n - 2]), rhs = operand(inputs[n - 1]);
  const array scales = quantized ? operand(inputs[2]) : w;
  const array biases = quantized && spec.has_biases() ? operand(inputs[3]) : scales;
  cu::QmmArgs a;
  a.spec = spec;
  a.transpose = quantized ? transpose : plain_t;
  a.dtype = out.dtype();
  a.batch = static_cast<int64_t>(lhs.size());
  a.M = x.shape(1), a.K = x.shape(2), a.N = out.shape(-1);
  a.x_count = x.shape(0), a.w_count = w.shape(0);
  a.x = cu::device_ptr(x);
  if (quantized) {
    a.w = cu::device_ptr<uint32_t>(w);
    a.scales = cu::device_ptr(scales);
    a.biases = spec.has_biases() ? cu::device_ptr(biases) : nullptr;
  } else {
    a.w_plain = cu::device_ptr(w);
  }
  a.out = dst;
  a.lhs = cu::device_ptr<uint32_t>(lhs);
  a.rhs = cu::device_ptr<uint32_t>(rhs);
  a.sorted = sorted;
  cu::IndexErrorCheck check(op, true);
  a.err = check.device();
  run_product(a);
  check.finish(dst, out.nbytes());
}

} // namespace

void QuantizedMatmul::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  const int64_t K = inputs[0].shape(-1);
  if (K == 0) {
    NUVEC_CUDA_CHECK(cudaMemsetAsync(dst, 0, out.nbytes(), cu::stream()));
    return;
  }
  const array x = operand(inputs[0]), w = operand(inputs[1]), scales = operand(inputs[2]);
  const array biases = spec_.has_biases() ? operand(inputs[3]) : scales;
  cu::QmmArgs a;
  a.spec = spec_;
  a.transpose = transpose_;
  a.dtype = out.dtype();
  a.M = static_cast<int64_t>(x.size()) / K, a.K = K, a.N = out.shape(-1);
  a.x = cu::device_ptr(x);
  a.w = cu::device_ptr<uint32_t>(w);
  a.scales = cu::device_ptr(scales);
  a.biases = spec_.has_biases() ? cu::device_ptr(biases) : nullptr;
  a.out = dst;
  run_product(a);
}

void GatherQmm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_gathered("gather_qmm", inputs, outputs[0], spec_, true, transpose_, sorted_);
}

void GatherMm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_gathered("gather_mm", inputs, outputs[0], QuantSpec{}, false, false, sorted_);
}

} // namespace nuvec
