// nuvec: Convolution on the GPU, as the CPU kernel (src/backend/cpu/conv.cpp) computes it:
// im2col (one row per output position, one column per kernel tap and input channel of a
// group) into a bounded scratch buffer, then one strided-batched cu::gemm (gemm.h, cuBLASLt)
// per row chunk with the groups as the batch. The weight is packed to (C_out, taps * C_in /
// groups) rows (reversed along every spatial axis when flip is set) unless it already is that
// matrix; a 1x1 convolution that reads every input position once in order uses the input as
// its own im2col matrix. float16, bfloat16, float32, float64; the kernels only move elements,
// so they are instantiated per element size (2, 4, 8 bytes), not per dtype.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/common/conv_geometry.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_utils.cuh"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Bound of the im2col scratch of one row chunk, in bytes.
constexpr int64_t kColBytes = int64_t{256} << 20;

/// Fills rows [r0, r0 + mr) of every group's im2col matrix: col holds `groups` blocks of
/// mr x kc (row-major), element (g, r, tap, c) at ((g * mr + r) * taps + tap) * cig + c, the
/// input element that output position r0 + r reads through that tap for channel g * cig + c
/// (zero where it reads padding). One thread per element, consecutive threads on consecutive
/// channels so that writes (and channel-contiguous reads) coalesce.
template <typename T>
__global__ void im2col_kernel(const T* in, T* col, ConvGeometry g, int64_t r0, int64_t mr) {
  const int64_t total = g.groups * mr * g.kc;
  NUVEC_CUDA_KERNEL_LOOP(idx, total) {
    const int64_t c = idx % g.cig;
    int64_t t = idx / g.cig;
    int64_t tap = t % g.taps;
    t /= g.taps;
    const int64_t r = t % mr;
    const int64_t grp = t / mr;
    const int64_t row = r0 + r;
    const int64_t nb = row / g.positions;
    int64_t pos = row - nb * g.positions;
    int64_t off = nb * g.in_n_stride + (grp * g.cig + c) * g.in_c_stride;
    bool hit = true;
    for (int d = g.spatial - 1; d >= 0; --d) {
      const int64_t o = pos % g.out_size[d];
      pos /= g.out_size[d];
      const int64_t k = tap % g.k_size[d];
      tap /= g.k_size[d];
      const int64_t i = tap_index(g, d, o, k);
      if (i < 0) {
        hit = false;
        break;
      }
      off += i * g.in_sp_stride[d];
    }
    col[idx] = hit ? in[off] : T(0);
  }
}

/// packed (c_out x kc, row-major) = the weight as gemm's right operand: element
/// (co, tap, c) at (co * taps + tap) * cig + c reads weight[co, k..., c] with every spatial
/// tap index k reversed when flip is set (the CPU's pack_weight).
template <typename T>
__global__ void pack_weight_kernel(const T* w, T* packed, ConvGeometry g, bool flip) {
  const int64_t total = g.c_out * g.kc;
  NUVEC_CUDA_KERNEL_LOOP(idx, total) {
    const int64_t c = idx % g.cig;
    int64_t t = idx / g.cig;
    int64_t tap = t % g.taps;
    const int64_t co = t / g.taps;
    int64_t off = co * g.w_co_stride + c * g.w_c_stride;
    for (int d = g.spatial - 1; d >= 0; --d) {
      int64_t k = tap % g.k_size[d];
      tap /= g.k_size[d];
      if (flip) k = g.k_size[d] - 1 - k;
      off += k * g.w_sp_stride[d];
    }
    packed[idx] = w[off];
  }
}

/// Calls Launch<T>::run(args...) with T the unsigned storage type of `bytes`-sized elements
/// (the kernels only copy elements, so float16/bfloat16 share one instantiation, etc.).
template <template <typename> class Launch, typename... Args>
void by_element_size(size_t bytes, Args&&... args) {
  switch (bytes) {
    case 2: Launch<uint16_t>::run(args...); break;
    case 4: Launch<uint32_t>::run(args...); break;
    case 8: Launch<uint64_t>::run(args...); break;
    default: throw std::invalid_argument("[conv_general] unsupported element size.");
  }
}

/// Host launcher of im2col_kernel<T> (see by_element_size).
template <typename T>
struct Im2Col {
  static void run(const void* in, void* col, const ConvGeometry& g, int64_t r0, int64_t mr) {
    constexpr unsigned kThreads = 256;
    const size_t total = static_cast<size_t>(g.groups * mr * g.kc);
    im2col_kernel<T><<<cu::grid_for(total, kThreads), kThreads, 0, cu::stream()>>>(
        static_cast<const T*>(in), static_cast<T*>(col), g, r0, mr);
    cu::check_launch("im2col_kernel");
  }
};

/// Host launcher of pack_weight_kernel<T> (see by_element_size).
template <typename T>
struct PackWeight {
  static void run(const void* w, void* packed, const ConvGeometry& g, bool flip) {
    constexpr unsigned kThreads = 256;
    const size_t total = static_cast<size_t>(g.c_out * g.kc);
    pack_weight_kernel<T><<<cu::grid_for(total, kThreads), kThreads, 0, cu::stream()>>>(
        static_cast<const T*>(w), static_cast<T*>(packed), g, flip);
    cu::check_launch("pack_weight_kernel");
  }
};

} // namespace

/// Convolution::eval_cpu's result on the GPU: weight packing, im2col per row chunk, and one
/// cuBLASLt product per chunk batched over the groups (see the file comment).
void Convolution::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  const array& wt = inputs[1];
  array& out = outputs[0];
  void* po = cu::alloc_output(out);
  if (out.size() == 0) return;
  const Dtype dtype = out.dtype();
  if (!(dtype == float16 || dtype == bfloat16 || dtype == float32 || dtype == float64)) {
    throw_invalid_argument("conv_general", "the dtype must be floating; got ", dtype, ".");
  }
  const ConvGeometry g = conv_geometry(
      in, wt, out, strides_, padding_lo_, kernel_dilation_, input_dilation_, groups_);
  if (g.kc == 0) {
    // Empty sums: every output is zero.
    NUVEC_CUDA_CHECK(cudaMemsetAsync(po, 0, out.nbytes(), cu::stream()));
    return;
  }
  const int64_t es = static_cast<int64_t>(size_of(dtype));

  // The weight as a dense (C_out, taps * cig) matrix; a row-contiguous unflipped weight
  // already is one.
  const void* w = cu::device_ptr(wt);
  if (flip_ || !wt.flags().row_contiguous) {
    void* packed = cu::scratch(static_cast<size_t>(g.c_out * g.kc * es));
    by_element_size<PackWeight>(static_cast<size_t>(es), w, packed, g, flip_);
    w = packed;
  }
  // Group g's right operand is W_g^T (kc x cog): its element (l, j) is packed[(g * cog + j)
  // * kc + l], a column-major matrix with leading dimension kc; groups are cog * kc apart.
  const GemmOperand wb{w, true, g.kc, g.cog * g.kc};
  const char* x = static_cast<const char*>(cu::device_ptr(in));
  char* o = static_cast<char*>(po);

  if (input_is_im2col(g, in)) {
    // Group g's left operand: rows of c_in channels from channel g * cig on.
    GemmOperand xa{x, false, g.c_in, g.cig};
    GemmOutput od{o, nullptr, g.c_out, g.cog};
    if (cu::gemm({dtype, g.rows, g.cog, g.kc, g.groups, xa, wb, od, 1.0, 0.0})) return;
    // No algorithm for the input's alignment: fall through to the im2col copy.
  }
  const int64_t row_bytes = g.groups * g.kc * es;
  const int64_t chunk = std::clamp<int64_t>(kColBytes / row_bytes, 1, g.rows);
  void* col = cu::scratch(static_cast<size_t>(chunk * row_bytes));
  for (int64_t r0 = 0; r0 < g.rows; r0 += chunk) {
    const int64_t mr = std::min(chunk, g.rows - r0);
    by_element_size<Im2Col>(static_cast<size_t>(es), x, col, g, r0, mr);
    // Group g: col block g (mr x kc) times W_g^T into output columns g * cog.., so the
    // groups' outputs interleave along each output row (batch stride cog, ld c_out).
    GemmOperand ca{col, false, g.kc, mr * g.kc};
    GemmOutput od{o + r0 * g.c_out * es, nullptr, g.c_out, g.cog};
    if (!cu::gemm({dtype, mr, g.cog, g.kc, g.groups, ca, wb, od, 1.0, 0.0})) {
      throw std::runtime_error("[conv_general] cuBLASLt found no algorithm for the product.");
    }
  }
}

} // namespace nuvec
