// nuvec: the CUDA quantized and gathered products' entry points (one file each), called from
// the primitives' eval_gpu (src/backend/cuda/quantized/quantized_matmul.cu). Every launcher
// runs on cu::stream() and reads row-contiguous operands. Meaning:
// src/quantized/quantized.h; the number formats: src/backend/common/math/quant.h.
#pragma once

#include <cstdint>

#include "nuvec/dtype.h"
#include "quantized/quant_spec.h"

namespace nuvec::cu {

struct IndexError;

/// One (possibly gathered) product: out[b] (M x N) = x[lhs[b]] (M x K) . W[rhs[b]]^T
/// (transpose; W[e] is N x K packed along K) or . W[rhs[b]] (W[e] K x N packed along N), for
/// b < batch. A QuantizedMatmul is batch 1, x_count 1, w_count 1, lhs and rhs null (every x
/// row against the one W). For GatherMm the operand W is a plain matrix of `dtype` (w_plain):
/// K x N (transpose false), or N x K row-major (transpose true: a Linear's [out, in] weight
/// that gather_mm received through swapaxes, read in place).
struct QmmArgs {
  QuantSpec spec;
  bool transpose = true;
  Dtype dtype = float32; ///< x, out, w_plain and affine scales/biases
  int64_t batch = 1;
  int64_t M = 0, N = 0, K = 0;
  int64_t x_count = 1, w_count = 1; ///< the extents of x's and W's first axes (range checks)
  const void* x = nullptr;          ///< (x_count, M, K)
  const uint32_t* w = nullptr;      ///< quantized W, (w_count, N, K*bits/32) or (w_count, K, N*bits/32)
  const void* w_plain = nullptr;    ///< GatherMm's W, (w_count, K, N) or transposed (w_count, N, K)
  const void* scales = nullptr;     ///< (w_count, N, K/gs) or (w_count, K, N/gs): dtype or uint8
  const void* biases = nullptr;     ///< affine only, like scales
  void* out = nullptr;              ///< (batch, M, N)
  const uint32_t* lhs = nullptr;    ///< device, batch entries (null: 0 for every b)
  const uint32_t* rhs = nullptr;    ///< device, batch entries (null: 0 for every b)
  bool sorted = false;              ///< rhs non-decreasing
  IndexError* err = nullptr;        ///< where a kernel records an index past x_count / w_count
};

/// Few rows (M <= 8 per batch entry, the decode case), transpose true (qmv.cu): bound by the
/// weight read; every mode and bit width, float32/float16/bfloat16.
bool qmv_covers(const QmmArgs& a);
void qmv(const QmmArgs& a);

/// Rows per batch entry up to which GatherMm's transposed plain W takes gemv_plain.
inline constexpr int64_t kPlainGemvRows = 8;

/// GatherMm's few rows (M <= kPlainGemvRows per batch entry: mixture-of-experts decode) on a
/// transposed plain W (gemv_plain.cu): a warp per output column reading W's row once in
/// 16-byte vectors; float32/float16/bfloat16, K a whole number of vectors, x and W aligned.
bool gemv_plain_covers(const QmmArgs& a);
void gemv_plain(const QmmArgs& a);

/// More rows on tensor cores (qmm.cu): for one W with affine 4/8-bit codes and 8 < M <= 256,
/// W dequantized in registers as mma.sync's A operand (out transposed; split K over blocks
/// when the tiles are few); otherwise dequantized tiles of W in shared memory, mma.sync;
/// gathered operands, grouped by weight batch when sorted; GatherMm's transposed plain W
/// (copied, not dequantized) with NUVEC_GATHER_MM_TENSOR_CORES=1 until it has run on a GPU.
bool qmm_covers(const QmmArgs& a);
void qmm(const QmmArgs& a);

/// Rows above which a transposed half-type product takes qmm_dense over the tensor-core
/// kernels (measured on the H200: at 512 rows those ran 3-4x slower than cuBLAS's GEMM).
inline constexpr int64_t kDenseRows = 256;

/// Many rows of one weight (qmm_dense.cu): W dequantized into a scratch matrix of the dtype,
/// then cuBLASLt's GEMM. qmm_dense returns false (after dequantizing) when cuBLASLt has no
/// algorithm for the layout, so the caller takes another kernel.
bool qmm_dense_covers(const QmmArgs& a);
bool qmm_dense(const QmmArgs& a);

/// Anything else (qmm_generic.cu): a tiled CUDA-core kernel dequantizing W on the fly; slow
/// but correct for every case (any mode, transpose or not, gathered, plain W), the GPU's
/// reference path.
void qmm_generic(const QmmArgs& a);

} // namespace nuvec::cu
