// nuvec: the quantized product for many rows (qmm.h's qmm_dense): W dequantized once into a
// scratch matrix of the activation dtype, then cuBLASLt's GEMM. Above a few hundred rows the
// product is compute-bound, and cuBLAS's GEMM beats the register-dequantizing tensor-core
// kernels (qmm.cu) by 3-4x there (H200, bench group "quantized"), so one extra pass over W
// (about 2.6 bytes per weight for 4 bits in bf16) costs less than it saves. The half types
// dequantize through the chunk decoders the other kernels multiply with. Below ~256 rows
// the route loses (measured on the H200 with every M >= 16 forced through it: 4096 x 4096
// W4 41 us at M 16-64 against 19-29 us in qmm.cu): writing and re-reading the bf16 matrix
// costs twice the dense GEMM's own weight traffic.
#include "backend/common/gemm_problem.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/quantized/dequant.cuh"
#include "backend/cuda/quantized/qmm.h"

namespace nuvec::cu {
namespace {

/// Rows of W in the packed layout (N rows when transposed, else K) and their values.
struct DenseShape {
  int64_t rows;
  int64_t cols;
};

DenseShape dense_shape(const QmmArgs& a) {
  return a.transpose ? DenseShape{a.N, a.K} : DenseShape{a.K, a.N};
}

constexpr int kValuesPerThread = 8;

/// wd[r, j] = dequantized code j of packed row r, 8 consecutive values a thread (cols is a
/// multiple of the group size, itself a multiple of 16).
template <typename T>
__global__ void __launch_bounds__(256) dequantize_rows_kernel(
    const uint32_t* w, const void* scales, const void* biases, T* wd, int64_t rows, int64_t cols,
    int64_t row_words, int bits, int group_shift, QuantMode mode) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_row = cols / kValuesPerThread;
  if (t >= rows * per_row) return;
  const int64_t r = t / per_row;
  const int64_t j0 = (t - r * per_row) * kValuesPerThread;
  const uint32_t* row = w + r * row_words;
  const int64_t groups = cols >> group_shift;
  const quant::GroupParams g = quant::group_params<T>(mode, scales, biases, r * groups + (j0 >> group_shift));
  T v[kValuesPerThread];
#pragma unroll
  for (int i = 0; i < kValuesPerThread; ++i) {
    v[i] = static_cast<T>(quant::code_value(mode, bits, math::quant_code(row, j0 + i, bits), g));
  }
  T* dst = wd + r * cols + j0;
#pragma unroll
  for (int i = 0; i < kValuesPerThread; ++i) dst[i] = v[i];
}

/// The half types' dequantization: one chunk of 32 codes a thread (BITS words, 16-byte
/// loads where the width allows), decoded by the chunk decoders of qmv/qmm (so the matrix
/// holds the values those kernels multiply) and stored in natural order as four 16-byte
/// writes. The per-code kernel above, with 2-byte stores, ran at ~0.3 of the copy bandwidth
/// on the H200 (30 us for 4096 x 4096 W4), which made this route lose to the tensor-core
/// kernels up to 512 rows. Needs cols % 32 == 0 (row_words = cols / 32 * BITS).
template <typename T, bool kAffine, int BITS>
__global__ void __launch_bounds__(256) dequantize_chunks_kernel(
    const uint32_t* w, const void* scales, const void* biases, T* wd, int64_t rows, int64_t row_chunks,
    int64_t groups, int group_shift, bool two_groups, QuantMode mode) {
  using Dec = quant::ChunkDecoder<T, kAffine, BITS>;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= rows * row_chunks) return;
  const int64_t r = c / row_chunks, q = c - r * row_chunks;
  uint32_t words[BITS];
  quant::load_chunk<BITS>(words, w + c * BITS, true);
  const int64_t gi = r * groups + ((q * quant::kChunkCodes) >> group_shift);
  uint32_t raw[2];
  raw[0] = quant::group_raw<T>(mode, scales, biases, gi);
  raw[1] = two_groups ? quant::group_raw<T>(mode, scales, biases, gi + 1) : raw[0];
  uint32_t pairs[16], out[16];
  Dec::decode(words, raw, mode, pairs);
  Dec::natural(pairs, out);
  uint4* dst = reinterpret_cast<uint4*>(wd + c * quant::kChunkCodes);
#pragma unroll
  for (int k = 0; k < 4; ++k) dst[k] = make_uint4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]);
}

} // namespace

bool qmm_dense_covers(const QmmArgs& a) {
  const bool gathered = a.lhs != nullptr || a.rhs != nullptr || a.batch != 1 || a.w_plain != nullptr;
  if (gathered || a.w == nullptr) return false;
  if (a.dtype != float16 && a.dtype != bfloat16 && a.dtype != float32) return false;
  // The tensor-core kernels win up to a few hundred rows (transposed half types); float32 and
  // untransposed weights have only the CUDA-core kernel there, which this beats from ~16 rows.
  const bool tensor_kernels = a.transpose && a.dtype != float32;
  return a.M > (tensor_kernels ? kDenseRows : 8);
}

bool qmm_dense(const QmmArgs& a) {
  const DenseShape d = dense_shape(a);
  const size_t bytes = static_cast<size_t>(d.rows * d.cols) * size_of(a.dtype);
  void* wd = scratch(bytes);
  int group_shift = 0;
  while ((1 << group_shift) < a.spec.group_size) ++group_shift;
  const int64_t row_words = d.cols * a.spec.bits / 32;
  const bool chunked = a.dtype != float32 && d.cols % quant::kChunkCodes == 0 &&
      is_aligned(a.w, 16) && row_words % (a.spec.bits % 4 == 0 ? 4 : a.spec.bits % 2 == 0 ? 2 : 1) == 0;
  dispatch_device_float_types(a.dtype, "quantized_matmul", [&]<typename T>() {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      if (chunked) {
        const int64_t chunks = d.rows * (d.cols / quant::kChunkCodes);
        const unsigned blocks = static_cast<unsigned>((chunks + 255) / 256);
        quant::dispatch_format(a.spec, [&]<bool kAffine, int BITS>() {
          dequantize_chunks_kernel<T, kAffine, BITS><<<blocks, 256, 0, stream()>>>(
              a.w, a.scales, a.biases, static_cast<T*>(wd), d.rows, d.cols / quant::kChunkCodes,
              d.cols >> group_shift, group_shift, a.spec.group_size == 16, a.spec.mode);
        });
        return;
      }
    }
    if constexpr (!std::is_same_v<T, double>) {
      const int64_t threads = d.rows * (d.cols / kValuesPerThread);
      const unsigned blocks = static_cast<unsigned>((threads + 255) / 256);
      dequantize_rows_kernel<T><<<blocks, 256, 0, stream()>>>(
          a.w, a.scales, a.biases, static_cast<T*>(wd), d.rows, d.cols, row_words, a.spec.bits, group_shift,
          a.spec.mode);
    }
  });
  NUVEC_CUDA_CHECK(cudaGetLastError());
  // out (M x N) = x (M x K) @ Wd^T (Wd N x K, read column-major as K x N) or @ Wd (K x N).
  const GemmOperand lhs{a.x, false, a.K, 0};
  const GemmOperand rhs = a.transpose ? GemmOperand{wd, true, a.K, 0} : GemmOperand{wd, false, a.N, 0};
  const GemmOutput out{a.out, nullptr, a.N, 0};
  const GemmProblem p{a.dtype, a.M, a.N, a.K, 1, lhs, rhs, out};
  return gemm(p);
}

} // namespace nuvec::cu
