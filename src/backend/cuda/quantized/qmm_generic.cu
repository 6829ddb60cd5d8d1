// nuvec: the GPU's reference path of the quantized and gathered products (qmm.h's
// qmm_generic): a tiled CUDA-core kernel that dequantizes W while staging its tiles, for
// every case the fast kernels leave (W not transposed, many rows, GatherMm's plain W in any
// floating dtype, float64 included). Accumulates in float32 (float64 for float64).
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/quantized/dequant.cuh"
#include "backend/cuda/quantized/qmm.h"

namespace nuvec::cu {
namespace {

constexpr int kTile = 64;  ///< output rows and columns per block
constexpr int kTileK = 16; ///< depth of a staged tile
constexpr int kThreads = 256;

struct GenericParams {
  const void* x;
  const uint32_t* w;
  const void* w_plain;
  const void* scales;
  const void* biases;
  void* out;
  const uint32_t* lhs;
  const uint32_t* rhs;
  int64_t batch, M, N, K, x_count, w_count;
  int64_t w_rows, w_row_words; ///< rows of one W and packed words per row (N, K) or (K, N)
  int64_t groups;              ///< groups per row of W
  int bits, group_shift; ///< group_shift: log2(group_size)
  QuantMode mode;
  bool transpose;
  IndexError* err;
};

/// Element (k, n) of the right operand of batch entry e as Acc: the plain matrix's (K, N)
/// element (its (N, K) element when transposed), or the dequantized code n of row k (not
/// transposed) or k of row n (transposed).
template <typename T, typename Acc, bool kPlain>
__device__ __forceinline__ Acc rhs_value(const GenericParams& p, int64_t e, int64_t k, int64_t n) {
  if constexpr (kPlain) {
    const int64_t i = p.transpose ? (e * p.N + n) * p.K + k : (e * p.K + k) * p.N + n;
    return static_cast<Acc>(to_acc(static_cast<const T*>(p.w_plain)[i]));
  } else {
    const int64_t row = p.transpose ? n : k, col = p.transpose ? k : n;
    const int64_t r = e * p.w_rows + row;
    const uint32_t q = math::quant_code(p.w + r * p.w_row_words, col, p.bits);
    const quant::GroupParams g = quant::group_params<T>(p.mode, p.scales, p.biases, r * p.groups + (col >> p.group_shift));
    return static_cast<Acc>(quant::code_value(p.mode, p.bits, q, g));
  }
}

/// One 64 x 64 tile of out[b] per block (grid (N tiles, M tiles, batch), both grid-strided
/// in y and z); each thread accumulates a 4 x 4 block over K in steps of 16, the x tile and
/// the dequantized W tile staged in shared memory in Acc.
template <typename T, typename Acc, bool kPlain>
__global__ void __launch_bounds__(kThreads) qmm_generic_kernel(const GenericParams p) {
  __shared__ Acc xs[kTileK][kTile + 1];
  __shared__ Acc ws[kTileK][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t n0 = int64_t(blockIdx.x) * kTile;
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  for (int64_t b = blockIdx.z; b < p.batch; b += gridDim.z) {
    const int64_t xi = p.lhs ? p.lhs[b] : 0, wi = p.rhs ? p.rhs[b] : 0;
    // Every thread of the block sees a bad entry and skips it together.
    if (!gathered_entry_ok(p.err, xi, p.x_count, wi, p.w_count, threadIdx.x == 0)) continue;
    for (int64_t m0 = int64_t(blockIdx.y) * kTile; m0 < p.M; m0 += int64_t(gridDim.y) * kTile) {
      Acc acc[4][4] = {};
      for (int64_t k0 = 0; k0 < p.K; k0 += kTileK) {
        __syncthreads();
        for (int i = threadIdx.x; i < kTile * kTileK; i += kThreads) {
          const int kk = i % kTileK, mm = i / kTileK; // consecutive threads along K of x
          const int64_t m = m0 + mm, k = k0 + kk;
          xs[kk][mm] = (m < p.M && k < p.K) ? static_cast<Acc>(to_acc(x[(xi * p.M + m) * p.K + k])) : Acc(0);
          // Consecutive threads along W's rows: K when transposed, else N.
          const int nn = p.transpose ? i / kTileK : i % kTile;
          const int kw = p.transpose ? i % kTileK : i / kTile;
          const int64_t n = n0 + nn, kq = k0 + kw;
          ws[kw][nn] = (n < p.N && kq < p.K) ? rhs_value<T, Acc, kPlain>(p, wi, kq, n) : Acc(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTileK; ++kk) {
          Acc a[4], c[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = xs[kk][ty + 16 * i], c[i] = ws[kk][tx + 16 * i];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * c[j];
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t m = m0 + ty + 16 * i;
        if (m >= p.M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t n = n0 + tx + 16 * j;
          if (n < p.N) out[(b * p.M + m) * p.N + n] = store_as<T>(acc[i][j]);
        }
      }
    }
  }
}

} // namespace

void qmm_generic(const QmmArgs& a) {
  GenericParams p{};
  p.x = a.x, p.w = a.w, p.w_plain = a.w_plain, p.scales = a.scales, p.biases = a.biases, p.out = a.out;
  p.lhs = a.lhs, p.rhs = a.rhs;
  p.batch = a.batch, p.M = a.M, p.N = a.N, p.K = a.K, p.x_count = a.x_count, p.w_count = a.w_count;
  p.bits = a.spec.bits, p.group_shift = __builtin_ctz(static_cast<unsigned>(a.spec.group_size));
  p.mode = a.spec.mode;
  p.transpose = a.transpose;
  p.w_rows = a.transpose ? a.N : a.K;
  p.w_row_words = (a.transpose ? a.K : a.N) * a.spec.bits / 32;
  p.groups = (a.transpose ? a.K : a.N) / a.spec.group_size;
  p.err = a.err;
  if (a.batch == 0 || a.M == 0 || a.N == 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.N, kTile)),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div(a.M, kTile), 65535)),
                  static_cast<unsigned>(std::min<int64_t>(a.batch, 65535)));
  dispatch_device_float_types(a.dtype, "gather_mm", [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if (a.w_plain != nullptr) {
      qmm_generic_kernel<T, Acc, true><<<grid, kThreads, 0, stream()>>>(p);
    } else if constexpr (!std::is_same_v<T, double>) {
      qmm_generic_kernel<T, Acc, false><<<grid, kThreads, 0, stream()>>>(p);
    }
    check_launch("qmm_generic_kernel");
  });
}

} // namespace nuvec::cu
