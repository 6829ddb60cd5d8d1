// nuvec: GPU kernels of Scan (cumsum, cumprod, cummax, cummin, logcumsumexp along one axis;
// reverse and exclusive variants). Semantics are the CPU kernel's (src/backend/cpu/scan.cpp):
// the input already has the output dtype, half types accumulate in float, integers wrap,
// max/min keep the first NaN they meet, an exclusive scan starts from the op's identity.
//
// The input, of any strides, is seen as (outer, len, inner) around the axis (the dims before
// and after it merged where they walk like one); the output is row-contiguous. Two kernels:
//  - scan_rows_kernel, the last axis (inner == 1): a block scans a row tile by tile (2048
//    elements: coalesced loads through shared memory, 8 consecutive elements per thread,
//    warp shuffles, a carry from tile to tile).
//  - scan_columns_kernel, any other axis (and very short rows): one thread per (outer, inner)
//    column walks the axis; neighbouring threads read neighbouring columns (coalesced).
// When the rows or columns alone cannot fill the GPU, the axis is cut into chunks scanned in
// three passes: each chunk's total (the same kernel, writing no output), an exclusive scan
// of the totals (the same kernel on the totals), then each chunk again starting from its
// carry. Deterministic: no atomics, no look-back.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/common/math/scan.h"
#include "backend/common/scan_plan.h"
#include "primitives/primitives.h"
#include "primitives/scan.h"

namespace nuvec {

namespace {

using cu::device_acc_t;
using cu::kReduceThreads;
using cu::StridedIndexer;

/// One scan op on the accumulator type A: the math layer's (init() the identity, f(acc, x)
/// extends the prefix acc by x, also with x the total of a later block), shared with the
/// CPU kernel (backend/common/math/scan.h).
template <ScanOp op, typename A>
using ScanFn = math::ScanCombine<op, A>;

/// Which (op, device element type) pairs have GPU kernels: those the ops produce (cumsum and
/// cumprod run in sum_dtype, cummax/cummin on real dtypes, logcumsumexp on float dtypes).
/// Anything else (a Scan built by hand) runs on the host, which also raises the CPU's
/// errors (complex cummax).
template <ScanOp op, typename T>
constexpr bool kHasKernel() {
  constexpr bool small_int = std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
      std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>;
  switch (op) {
    case ScanOp::Sum:
    case ScanOp::Prod: return !std::is_same_v<T, bool> && !small_int;
    case ScanOp::Max:
    case ScanOp::Min: return !cu::is_complex_device_v<T>;
    case ScanOp::LogAddExp: return cu::is_float_device_v<T>;
  }
  return false;
}

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// ---------------------------------------------------------------------------------------
// Rows (last axis).

constexpr int kItems = 8; // consecutive elements per thread in a tile
constexpr int kTile = kReduceThreads * kItems; // elements per block tile

/// Shared-memory slot of tile element q: one pad slot per 32 elements, so that the
/// per-thread reads of 8 consecutive elements hit distinct banks.
__device__ __forceinline__ int pad(int q) {
  return q + q / 32;
}

/// Launch parameters of scan_rows_kernel: n_rows rows of len elements, each cut into
/// n_chunks chunks of `chunk` elements (a multiple of kTile unless n_chunks == 1) in logical
/// order (from the end when reverse); segment (row, c) is number row * n_chunks + c. Element
/// i of row r is read at rows(r) + i * stride and written at r * len + i.
struct RowScanParams {
  int64_t n_rows;
  int64_t len;
  int64_t chunk;
  int64_t n_chunks;
  bool reverse;
  bool inclusive;
  const void* carry; // A per segment: the prefix it starts from (nullptr: the identity)
  void* agg; // A per segment: carry combined with the segment's total (nullptr: none)
  int64_t stride;
  StridedIndexer<1> rows;
};

/// Scans segments of rows (see RowScanParams) of in (row-contiguous) into out; out ==
/// nullptr only computes the totals (agg). One block per segment at a time; grid-stride
/// over segments.
template <ScanOp op, typename T>
__global__ void __launch_bounds__(kReduceThreads)
    scan_rows_kernel(const T* __restrict__ in, T* __restrict__ out, const __grid_constant__ RowScanParams p) {
  using A = device_acc_t<T>;
  ScanFn<op, A> f;
  __shared__ __align__(16) unsigned char tile_raw[(kTile + kTile / 32) * sizeof(A)];
  __shared__ __align__(16) unsigned char warp_raw[(kReduceThreads / 32) * sizeof(A)];
  A* tile = reinterpret_cast<A*>(tile_raw);
  A* wsum = reinterpret_cast<A*>(warp_raw);
  constexpr int kWarps = kReduceThreads / 32;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t n_seg = p.n_rows * p.n_chunks;
  for (int64_t seg = blockIdx.x; seg < n_seg; seg += gridDim.x) {
    const int64_t row = seg / p.n_chunks, c = seg - row * p.n_chunks;
    const int64_t k0 = c * p.chunk, k1 = imin(p.len, k0 + p.chunk);
    const T* src = in + cu::offset_of(p.rows, row);
    T* dst = out ? out + row * p.len : nullptr;
    A carry = p.carry ? static_cast<const A*>(p.carry)[seg] : f.init();
    for (int64_t t0 = k0; t0 < k1; t0 += kTile) {
      const int cnt = static_cast<int>(imin(kTile, k1 - t0));
      // Coalesced loads in logical order (a reverse scan reads the row backwards); the
      // slots past the end hold the identity.
      for (int q = tid; q < kTile; q += kReduceThreads) {
        A x = f.init();
        if (q < cnt) {
          const int64_t k = t0 + q;
          x = cu::to_acc(src[(p.reverse ? p.len - 1 - k : k) * p.stride]);
        }
        tile[pad(q)] = x;
      }
      __syncthreads();
      // This thread's 8 elements: a sequential inclusive scan.
      A items[kItems];
#pragma unroll
      for (int m = 0; m < kItems; ++m) items[m] = tile[pad(tid * kItems + m)];
#pragma unroll
      for (int m = 1; m < kItems; ++m) items[m] = f(items[m - 1], items[m]);
      // Inclusive scan of the thread totals within the warp, then across the warps.
      A v = items[kItems - 1];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const A y = cu::shfl_up(v, o);
        if (lane >= o) v = f(y, v);
      }
      const A before_lane = cu::shfl_up(v, 1); // the lane's exclusive prefix (lane > 0)
      if (lane == 31) wsum[warp] = v;
      __syncthreads();
      A prefix = carry;
      for (int w = 0; w < warp; ++w) prefix = f(prefix, wsum[w]);
      if (lane > 0) prefix = f(prefix, before_lane);
      A total = carry;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total = f(total, wsum[w]);
      if (dst) {
        // Results into this thread's own slots (only it reads them before the barrier).
#pragma unroll
        for (int m = 0; m < kItems; ++m) {
          const A excl = m == 0 ? prefix : f(prefix, items[m - 1]);
          tile[pad(tid * kItems + m)] = p.inclusive ? f(prefix, items[m]) : excl;
        }
        __syncthreads();
        for (int q = tid; q < cnt; q += kReduceThreads) {
          const int64_t k = t0 + q;
          dst[p.reverse ? p.len - 1 - k : k] = cu::store_as<T>(tile[pad(q)]);
        }
      }
      carry = total;
      __syncthreads(); // the next tile overwrites tile and wsum
    }
    if (p.agg && tid == 0) static_cast<A*>(p.agg)[seg] = carry;
  }
}

// ---------------------------------------------------------------------------------------
// Columns (any axis but the last, and short rows).

/// Launch parameters of scan_columns_kernel: the input is (outer, len, inner), element
/// (o, i, j) read at outer_ix(o) + i * stride + inner_ix(j) and written at (o * len + i) *
/// inner + j; the axis is cut into n_chunks chunks of `chunk` elements in logical order.
/// Thread t = (o * n_chunks + c) * inner + j scans column (o, j) over chunk c.
struct ColScanParams {
  int64_t outer;
  int64_t len;
  int64_t inner;
  int64_t chunk;
  int64_t n_chunks;
  bool reverse;
  bool inclusive;
  const void* carry; // A per thread t: the prefix it starts from (nullptr: the identity)
  void* agg; // A per thread t: carry combined with its chunk's total (nullptr: none)
  int64_t stride;
  StridedIndexer<1> outer_ix;
  StridedIndexer<1> inner_ix;
};

/// Scans the columns of in (see ColScanParams) into out; out == nullptr only computes the
/// totals (agg).
template <ScanOp op, typename T>
__global__ void __launch_bounds__(kReduceThreads)
    scan_columns_kernel(const T* __restrict__ in, T* __restrict__ out, const __grid_constant__ ColScanParams p) {
  using A = device_acc_t<T>;
  ScanFn<op, A> f;
  NUVEC_CUDA_KERNEL_LOOP(t, p.outer * p.n_chunks * p.inner) {
    const int64_t j = t % p.inner, rest = t / p.inner;
    const int64_t c = rest % p.n_chunks, o = rest / p.n_chunks;
    A acc = p.carry ? static_cast<const A*>(p.carry)[t] : f.init();
    const int64_t k0 = c * p.chunk, k1 = imin(p.len, k0 + p.chunk);
    const T* src = in + cu::offset_of(p.outer_ix, o) + cu::offset_of(p.inner_ix, j);
    if (out) {
      T* dst = out + o * p.len * p.inner + j;
#pragma unroll 4
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t i = p.reverse ? p.len - 1 - k : k;
        const A x = cu::to_acc(src[i * p.stride]);
        if (p.inclusive) {
          acc = f(acc, x);
          dst[i * p.inner] = cu::store_as<T>(acc);
        } else {
          dst[i * p.inner] = cu::store_as<T>(acc);
          acc = f(acc, x);
        }
      }
    } else {
#pragma unroll 4
      for (int64_t k = k0; k < k1; ++k) {
        acc = f(acc, cu::to_acc(src[(p.reverse ? p.len - 1 - k : k) * p.stride]));
      }
    }
    if (p.agg) static_cast<A*>(p.agg)[t] = acc;
  }
}

// ---------------------------------------------------------------------------------------
// Host side.

template <ScanOp op, typename T>
void launch_rows(const T* in, T* out, const RowScanParams& p) {
  static const int resident = cu::resident_blocks(scan_rows_kernel<op, T>, kReduceThreads);
  const int64_t segs = p.n_rows * p.n_chunks;
  const unsigned grid = cu::grid_blocks(segs, resident);
  scan_rows_kernel<op, T><<<grid, kReduceThreads, 0, cu::stream()>>>(in, out, p);
  cu::check_launch("scan_rows_kernel");
}

template <ScanOp op, typename T>
void launch_columns(const T* in, T* out, const ColScanParams& p) {
  const int64_t n = p.outer * p.n_chunks * p.inner;
  scan_columns_kernel<op, T><<<cu::grid_for(size_t(n), kReduceThreads), kReduceThreads, 0, cu::stream()>>>(in, out, p);
  cu::check_launch("scan_columns_kernel");
}

/// Last-axis scan (inner == 1) of outer rows of len elements; rows too few to fill the GPU
/// are chunked (three passes, see the file comment).
template <ScanOp op, typename T>
void scan_rows(const T* in, T* out, const ScanLayout& l, bool reverse, bool inclusive) {
  using A = device_acc_t<T>;
  static const int resident = cu::resident_blocks(scan_rows_kernel<op, T>, kReduceThreads);
  RowScanParams p{};
  p.n_rows = l.outer;
  p.len = l.len;
  p.chunk = l.len;
  p.n_chunks = 1;
  p.reverse = reverse;
  p.inclusive = inclusive;
  p.stride = l.stride;
  p.rows = cu::make_indexer1(l.outer_shape, l.outer_strides);
  if (p.n_rows < resident && p.len > 4 * int64_t(kTile)) {
    // Chunks of at least 4 tiles, about one per resident block.
    const int64_t want = std::min(cu::ceil_div(resident, p.n_rows), cu::ceil_div(p.len, 4 * int64_t(kTile)));
    if (want > 1) {
      p.chunk = cu::ceil_div(cu::ceil_div(p.len, want), kTile) * kTile;
      p.n_chunks = cu::ceil_div(p.len, p.chunk);
    }
  }
  if (p.n_chunks == 1) {
    launch_rows<op, T>(in, out, p);
    return;
  }
  const size_t n_seg = size_t(p.n_rows * p.n_chunks);
  A* totals = static_cast<A*>(cu::scratch(n_seg * sizeof(A)));
  A* carries = static_cast<A*>(cu::scratch(n_seg * sizeof(A)));
  RowScanParams pass1 = p;
  pass1.agg = totals;
  launch_rows<op, T>(in, nullptr, pass1);
  // Exclusive scan of each row's chunk totals ([row][chunk], contiguous), in logical order.
  RowScanParams pass2{};
  pass2.n_rows = p.n_rows;
  pass2.len = p.n_chunks;
  pass2.chunk = p.n_chunks;
  pass2.n_chunks = 1;
  pass2.reverse = false;
  pass2.inclusive = false;
  pass2.stride = 1;
  pass2.rows = cu::make_indexer1({p.n_rows}, {p.n_chunks});
  launch_rows<op, A>(totals, carries, pass2);
  RowScanParams pass3 = p;
  pass3.carry = carries;
  launch_rows<op, T>(in, out, pass3);
}

/// Scan along the middle axis of (outer, len, inner) (also inner == 1 with short rows);
/// too few columns to fill the GPU chunk the axis (three passes).
template <ScanOp op, typename T>
void scan_columns(const T* in, T* out, const ScanLayout& l, bool reverse, bool inclusive) {
  using A = device_acc_t<T>;
  static const int resident = cu::resident_blocks(scan_columns_kernel<op, T>, kReduceThreads);
  const int64_t target_threads = int64_t(resident) * kReduceThreads;
  const int64_t columns = l.outer * l.inner;
  ColScanParams p{};
  p.outer = l.outer;
  p.len = l.len;
  p.inner = l.inner;
  p.chunk = l.len;
  p.n_chunks = 1;
  p.reverse = reverse;
  p.inclusive = inclusive;
  p.stride = l.stride;
  p.outer_ix = cu::make_indexer1(l.outer_shape, l.outer_strides);
  p.inner_ix = cu::make_indexer1(l.inner_shape, l.inner_strides);
  if (columns < target_threads && l.len >= 64) {
    // Chunks of at least 32 elements, enough to occupy the resident threads.
    const int64_t want = std::min(cu::ceil_div(target_threads, columns), cu::ceil_div(l.len, 32));
    if (want > 1) {
      p.chunk = cu::ceil_div(l.len, want);
      p.n_chunks = cu::ceil_div(l.len, p.chunk);
    }
  }
  if (p.n_chunks == 1) {
    launch_columns<op, T>(in, out, p);
    return;
  }
  const size_t n_part = size_t(p.outer * p.n_chunks * p.inner);
  A* totals = static_cast<A*>(cu::scratch(n_part * sizeof(A)));
  A* carries = static_cast<A*>(cu::scratch(n_part * sizeof(A)));
  ColScanParams pass1 = p;
  pass1.agg = totals;
  launch_columns<op, T>(in, nullptr, pass1);
  // Totals are (outer, n_chunks, inner) row-contiguous: an exclusive scan along the chunks.
  ColScanParams pass2{};
  pass2.outer = p.outer;
  pass2.len = p.n_chunks;
  pass2.inner = p.inner;
  pass2.chunk = p.n_chunks;
  pass2.n_chunks = 1;
  pass2.reverse = false;
  pass2.inclusive = false;
  pass2.stride = p.inner;
  pass2.outer_ix = cu::make_indexer1({p.outer}, {p.n_chunks * p.inner});
  pass2.inner_ix = cu::make_indexer1({p.inner}, {1});
  launch_columns<op, A>(totals, carries, pass2);
  ColScanParams pass3 = p;
  pass3.carry = carries;
  launch_columns<op, T>(in, out, pass3);
}

template <ScanOp op, typename T>
void scan_gpu(const T* in, T* out, const ScanLayout& l, bool reverse, bool inclusive) {
  if (l.inner == 1 && l.len > 32) {
    scan_rows<op, T>(in, out, l, reverse, inclusive);
  } else {
    scan_columns<op, T>(in, out, l, reverse, inclusive);
  }
}

} // namespace

void Scan::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (out.size() == 0) {
    cu::alloc_output(out);
    return;
  }
  const ScanLayout layout = scan_layout(in.shape(), in.strides(), axis_);
  bool supported = layout.outer_shape.size() <= size_t(cu::kMaxDims) &&
      layout.inner_shape.size() <= size_t(cu::kMaxDims);
  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    switch (op_) {
      case ScanOp::Sum: supported = supported && kHasKernel<ScanOp::Sum, T>(); break;
      case ScanOp::Prod: supported = supported && kHasKernel<ScanOp::Prod, T>(); break;
      case ScanOp::Max: supported = supported && kHasKernel<ScanOp::Max, T>(); break;
      case ScanOp::Min: supported = supported && kHasKernel<ScanOp::Min, T>(); break;
      case ScanOp::LogAddExp: supported = supported && kHasKernel<ScanOp::LogAddExp, T>(); break;
    }
  });
  if (!supported) {
    // Pairs the ops never form, and more unmergeable dims than the indexers walk.
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  void* dst = cu::alloc_output(out);
  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    const T* src = cu::device_ptr<T>(in);
    T* o = static_cast<T*>(dst);
    auto run = [&]<ScanOp kOp>() {
      if constexpr (kHasKernel<kOp, T>()) scan_gpu<kOp, T>(src, o, layout, reverse_, inclusive_);
    };
    switch (op_) {
      case ScanOp::Sum: run.template operator()<ScanOp::Sum>(); break;
      case ScanOp::Prod: run.template operator()<ScanOp::Prod>(); break;
      case ScanOp::Max: run.template operator()<ScanOp::Max>(); break;
      case ScanOp::Min: run.template operator()<ScanOp::Min>(); break;
      case ScanOp::LogAddExp: run.template operator()<ScanOp::LogAddExp>(); break;
    }
  });
}

} // namespace nuvec
