// nuvec: cu::integer_matmul (int_matmul.h). A shared-memory tiled product accumulating in
// uint64 (unsigned, so overflow is defined and equals the CPU's sum modulo 2^64); operands are
// read through their strides, so no layout needs a copy. Integer products are rare and small
// next to floating ones, so the kernel favours simplicity over tensor-core speed.
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/int_matmul.h"
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

namespace {

constexpr int kTile = 16;

/// E's value as the CPU's cast_to<uint64_t> gives it: sign-extended for signed types (a
/// two's-complement residue modulo 2^64), 0/1 for bool.
template <typename E>
__device__ __forceinline__ uint64_t widen(E v) {
  if constexpr (std::is_same_v<E, bool>) {
    return v ? 1u : 0u;
  } else if constexpr (std::is_signed_v<E>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

/// The sum modulo 2^64 truncated to E (NumPy's wrap-around); for bool, whether any term was 1.
template <typename E>
__device__ __forceinline__ E narrow(uint64_t acc) {
  if constexpr (std::is_same_v<E, bool>) {
    return acc != 0;
  } else {
    return static_cast<E>(acc);
  }
}

/// out[bi] (m x n, row-contiguous, batches m * n apart) = a[bi] @ b[bi], where batch bi's
/// matrices start at the offsets batch_ix gives and are read with strides (a_rs, a_cs) and
/// (b_rs, b_cs). Blocks of kTile x kTile threads each own one output tile and walk k in
/// tiles staged in shared memory; grid-stride loops over row tiles (x), column tiles (y) and
/// batches (z) lift the grid's size limits. Loop bounds depend on block indices only, so
/// every thread of a block reaches each __syncthreads.
template <typename E>
__global__ void int_matmul_kernel(
    const E* a,
    const E* b,
    E* out,
    int64_t m,
    int64_t n,
    int64_t k,
    int64_t a_rs,
    int64_t a_cs,
    int64_t b_rs,
    int64_t b_cs,
    StridedIndexer<2> batch_ix,
    int64_t batches) {
  __shared__ uint64_t ta[kTile][kTile + 1]; // ta[row][kk]; +1 avoids bank conflicts
  __shared__ uint64_t tb[kTile][kTile + 1]; // tb[kk][col]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row_tiles = (m + kTile - 1) / kTile, col_tiles = (n + kTile - 1) / kTile;
  for (int64_t bi = blockIdx.z; bi < batches; bi += gridDim.z) {
    int64_t off[2];
    batch_ix.offsets(bi, off);
    const E* pa = a + off[0];
    const E* pb = b + off[1];
    E* po = out + bi * m * n;
    for (int64_t rt = blockIdx.x; rt < row_tiles; rt += gridDim.x) {
      for (int64_t ct = blockIdx.y; ct < col_tiles; ct += gridDim.y) {
        const int64_t row = rt * kTile + ty, col = ct * kTile + tx;
        uint64_t acc = 0;
        for (int64_t k0 = 0; k0 < k; k0 += kTile) {
          const int64_t ka = k0 + tx, kb = k0 + ty;
          ta[ty][tx] = (row < m && ka < k) ? widen(pa[row * a_rs + ka * a_cs]) : 0;
          tb[ty][tx] = (kb < k && col < n) ? widen(pb[kb * b_rs + col * b_cs]) : 0;
          __syncthreads();
#pragma unroll
          for (int kk = 0; kk < kTile; ++kk) acc += ta[ty][kk] * tb[kk][tx];
          __syncthreads();
        }
        if (row < m && col < n) po[row * n + col] = narrow<E>(acc);
      }
    }
  }
}

/// Allocates out, plans the batches (merged where the operands allow; dense copies when more
/// than kMaxDims batch axes remain) and launches the kernel for element type E.
template <typename E>
void launch(const array& a_in, const array& b_in, array& out) {
  const int nd = static_cast<int>(out.ndim());
  const int64_t m = out.shape(-2), n = out.shape(-1), k = a_in.shape(-1);
  E* po = alloc_output<E>(out);
  if (out.size() == 0) return;
  if (k == 0) {
    // Empty sums: every element is zero (false for bool).
    NUVEC_CUDA_CHECK(cudaMemsetAsync(po, 0, out.nbytes(), stream()));
    return;
  }
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  auto batch_strides = [&](const array& x) {
    Strides s(batch.size(), 0);
    for (size_t i = 0; i < batch.size(); ++i) s[i] = x.shape(i) == 1 ? 0 : x.strides()[i];
    return s;
  };
  array a = a_in, b = b_in;
  StridedPlan plan = collapse_dims(batch, {batch_strides(a), batch_strides(b)});
  if (plan.shape.size() > size_t(kMaxDims)) {
    // Too many unmergeable batch axes for the indexer: dense copies merge into one.
    a = contiguous_copy(a_in);
    b = contiguous_copy(b_in);
    retain(a);
    retain(b);
    plan = collapse_dims(batch, {batch_strides(a), batch_strides(b)});
  }
  auto ix = make_indexer<2>(plan, "matmul");
  int64_t batches = 1;
  for (auto d : batch) batches *= d;
  const E* pa = device_ptr<E>(a);
  const E* pb = device_ptr<E>(b);
  const int64_t row_tiles = (m + kTile - 1) / kTile, col_tiles = (n + kTile - 1) / kTile;
  dim3 block(kTile, kTile);
  dim3 grid(
      static_cast<unsigned>(std::min<int64_t>(row_tiles, int64_t{1} << 20)),
      static_cast<unsigned>(std::min<int64_t>(col_tiles, 65535)),
      static_cast<unsigned>(std::min<int64_t>(batches, 65535)));
  int_matmul_kernel<E><<<grid, block, 0, stream()>>>(
      pa, pb, po, m, n, k, a.strides()[nd - 2], a.strides()[nd - 1], b.strides()[nd - 2],
      b.strides()[nd - 1], ix, batches);
  check_launch("int_matmul_kernel");
}

} // namespace

void integer_matmul(const array& a, const array& b, array& out) {
  switch (out.dtype().val()) {
    case Dtype::Val::bool_: return launch<bool>(a, b, out);
    case Dtype::Val::uint8: return launch<uint8_t>(a, b, out);
    case Dtype::Val::uint16: return launch<uint16_t>(a, b, out);
    case Dtype::Val::uint32: return launch<uint32_t>(a, b, out);
    case Dtype::Val::uint64: return launch<uint64_t>(a, b, out);
    case Dtype::Val::int8: return launch<int8_t>(a, b, out);
    case Dtype::Val::int16: return launch<int16_t>(a, b, out);
    case Dtype::Val::int32: return launch<int32_t>(a, b, out);
    case Dtype::Val::int64: return launch<int64_t>(a, b, out);
    default: break;
  }
  throw std::invalid_argument("[matmul] the integer GPU product takes integer or bool dtypes.");
}

} // namespace nuvec::cu
