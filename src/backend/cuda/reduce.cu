// nuvec: GPU kernels of Reduce (and, or, sum, prod, max, min over any set of axes, any input
// layout). Semantics are the CPU kernel's (src/backend/cpu/reduce.cpp): the op has already
// cast the input to the output dtype, half types accumulate in float, integers wrap, max/min
// let a NaN win, an empty reduction gives the identity.
//
// The input is planned as the CPU plans it (backend/common/reduce_plan.h, ReduceOrder::Any:
// kept dims in output order, reduced dims flipped, ordered and merged, so a transposed or
// reversed input whose reduced part is dense still reduces as one contiguous run). Then:
//  - Row (each output reduces one contiguous run; includes the all-reduce): groups of
//    `lanes` threads per output with 16-byte vector loads; long runs with few outputs are
//    split across blocks and the per-block partials combined by a second, tiny pass
//    (deterministic: no atomics).
//  - Column (the innermost kept dim is contiguous, reduced dims outer): a block tile of
//    columns x rows, whole rows read coalesced (vectorised when aligned), rows combined in
//    shared memory; few columns split the reduced rows across blocks, with a second pass.
//  - General: the Row kernel with each lane walking the reduced dims through their strides.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/common/math/reduce.h"
#include "backend/common/reduce_plan.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

using cu::device_acc_t;
using cu::kReduceThreads;
using cu::kVec;
using cu::StridedIndexer;

// The ops on the accumulator type A: the math layer's combiners (init() is the identity),
// shared with the CPU kernel (backend/common/math/reduce.h).
template <ReduceOp op, typename A>
using DevCombine = math::Combine<op, A>;

/// Which (op, device element type) pairs have GPU kernels: those the ops can produce (sum
/// and prod run in sum_dtype, and/or on bool, max/min on every dtype, bool max/min being
/// or/and). Anything else (a Reduce built by hand) runs on the host.
template <ReduceOp op, typename T>
constexpr bool kHasKernel() {
  constexpr bool small_int = std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
      std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>;
  switch (op) {
    case ReduceOp::And:
    case ReduceOp::Or: return std::is_same_v<T, bool>;
    case ReduceOp::Sum:
    case ReduceOp::Prod: return !std::is_same_v<T, bool> && !small_int;
    case ReduceOp::Max:
    case ReduceOp::Min: return !std::is_same_v<T, bool>;
  }
  return false;
}

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// ---------------------------------------------------------------------------------------
// Block-level pieces (the group reduction is the device library's, device/warp.cuh).

/// Reduces p[0, n) into one accumulator per lane (lane in [0, L)): the elements before the
/// first 16-byte boundary one by one, then 16-byte vectors (four in flight per lane), then
/// the tail.
template <ReduceOp op, typename T, typename A>
__device__ __forceinline__ A reduce_run_contiguous(const T* p, int64_t n, int lane, int L) {
  DevCombine<op, A> f;
  constexpr int V = kVec<T>;
  A acc = f.init();
  int64_t head = int64_t((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / int64_t(sizeof(T));
  if (head > n) head = n;
  for (int64_t i = lane; i < head; i += L) acc = f(acc, cu::to_acc(p[i]));
  const T* q = p + head;
  const int64_t nv = (n - head) / V;
  int64_t v = lane;
  for (; v + 3 * int64_t(L) < nv; v += 4 * int64_t(L)) {
    const auto x0 = cu::load_vec<V, cu::Load::ReadOnly>(q + v * V);
    const auto x1 = cu::load_vec<V, cu::Load::ReadOnly>(q + (v + L) * V);
    const auto x2 = cu::load_vec<V, cu::Load::ReadOnly>(q + (v + 2 * int64_t(L)) * V);
    const auto x3 = cu::load_vec<V, cu::Load::ReadOnly>(q + (v + 3 * int64_t(L)) * V);
#pragma unroll
    for (int k = 0; k < V; ++k) acc = f(acc, cu::to_acc(x0[k]));
#pragma unroll
    for (int k = 0; k < V; ++k) acc = f(acc, cu::to_acc(x1[k]));
#pragma unroll
    for (int k = 0; k < V; ++k) acc = f(acc, cu::to_acc(x2[k]));
#pragma unroll
    for (int k = 0; k < V; ++k) acc = f(acc, cu::to_acc(x3[k]));
  }
  for (; v < nv; v += L) {
    const auto x = cu::load_vec<V, cu::Load::ReadOnly>(q + v * V);
#pragma unroll
    for (int k = 0; k < V; ++k) acc = f(acc, cu::to_acc(x[k]));
  }
  for (int64_t i = head + nv * V + lane; i < n; i += L) acc = f(acc, cu::to_acc(p[i]));
  return acc;
}

// ---------------------------------------------------------------------------------------
// Lines: each output reduces `len` elements (a contiguous run, or strided through `red`).

/// Launch parameters of reduce_lines_kernel. Line l starts at element offset kept(l); its
/// elements are [0, len), split into `splits` segments of `chunk` elements, segment s of line
/// l being number l * splits + s. Each segment is reduced by a group of `lanes` threads.
struct LinesParams {
  int64_t n_lines;
  int64_t len;
  int64_t chunk;
  int64_t splits;
  int lanes; // power of two in [1, kReduceThreads]
  bool contiguous; // element i of a line at offset i (vector loads); else at red(i)
  bool write_acc; // write each segment's accumulator (type A) at out[segment]; else
                  // TOut at out[line] (then splits == 1)
  StridedIndexer<1> kept;
  StridedIndexer<1> red;
};

/// Reduces segments of lines (see LinesParams). in: elements of type T; out: TOut (the final
/// output, row-contiguous) or A partials. Grid-stride over segments, uniform per block (the
/// group reduction needs every thread).
template <ReduceOp op, typename T, typename TOut>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_lines_kernel(const T* in, void* out, const __grid_constant__ LinesParams p) {
  using A = device_acc_t<T>;
  DevCombine<op, A> f;
  __shared__ __align__(16) unsigned char smem_raw[(kReduceThreads / 32) * sizeof(A)];
  A* smem = reinterpret_cast<A*>(smem_raw);
  const int L = p.lanes;
  const int groups = kReduceThreads / L;
  const int g = threadIdx.x / L, lane = threadIdx.x % L;
  const int64_t n_seg = p.n_lines * p.splits;
  for (int64_t first = int64_t(blockIdx.x) * groups; first < n_seg;
       first += int64_t(gridDim.x) * groups) {
    const int64_t seg = first + g;
    A acc = f.init();
    int64_t line = 0;
    if (seg < n_seg) {
      line = seg / p.splits;
      const int64_t b = (seg - line * p.splits) * p.chunk;
      const int64_t e = imin(p.len, b + p.chunk);
      const T* row = in + cu::offset_of(p.kept, line);
      if (b < e) {
        if (p.contiguous) {
          acc = reduce_run_contiguous<op, T, A>(row + b, e - b, lane, L);
        } else {
          for (int64_t i = b + lane; i < e; i += L) {
            acc = f(acc, cu::to_acc(row[cu::offset_of(p.red, i)]));
          }
        }
      }
    }
    acc = cu::group_reduce(acc, L, f, smem);
    if (lane == 0 && seg < n_seg) {
      if (p.write_acc) static_cast<A*>(out)[seg] = acc;
      else static_cast<TOut*>(out)[line] = cu::store_as<TOut>(acc);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Columns: the innermost kept dim (`inner` outputs) is contiguous in the input.

/// Launch parameters of reduce_columns_kernel. Output (o, j), o over the outer kept dims and
/// j in [0, inner), reduces the elements at outer(o) + red(r) + j for r in [0, n_red). A
/// block of bx x by threads (bx * by == kReduceThreads) takes a tile of bx * vec columns and
/// `chunk` reduced rows; tiles are numbered ((o * col_tiles + tile) * splits + split).
struct ColumnsParams {
  int64_t n_outer;
  int64_t inner;
  int64_t n_red;
  int64_t chunk;
  int64_t splits;
  int bx; // power of two <= 32
  int vec; // columns per thread: kVec<T> (16-byte loads, checked aligned) or 1
  bool write_acc; // write A partials at out[split * n_outer * inner + o * inner + j]
  StridedIndexer<1> outer;
  StridedIndexer<1> red;
};

template <ReduceOp op, typename T>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_columns_kernel(const T* in, void* out, const __grid_constant__ ColumnsParams p) {
  using A = device_acc_t<T>;
  constexpr int V = kVec<T>;
  DevCombine<op, A> f;
  __shared__ __align__(16) unsigned char smem_raw[kReduceThreads * V * sizeof(A)];
  A* smem = reinterpret_cast<A*>(smem_raw);
  const int bx = p.bx, by = kReduceThreads / bx;
  const int tx = threadIdx.x % bx, ty = threadIdx.x / bx;
  const int64_t width = int64_t(bx) * p.vec;
  const int64_t col_tiles = (p.inner + width - 1) / width;
  const int64_t n_seg = p.n_outer * col_tiles * p.splits;
  const int64_t out_size = p.n_outer * p.inner;
  for (int64_t seg = blockIdx.x; seg < n_seg; seg += gridDim.x) {
    const int64_t s = seg % p.splits;
    const int64_t rest = seg / p.splits;
    const int64_t tile = rest % col_tiles, o = rest / col_tiles;
    const int64_t j0 = tile * width + int64_t(tx) * p.vec;
    const int64_t r0 = s * p.chunk, r1 = imin(p.n_red, r0 + p.chunk);
    A acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = f.init();
    if (j0 < p.inner) {
      const T* base = in + cu::offset_of(p.outer, o) + j0;
      if (V > 1 && p.vec == V) {
        // inner % V == 0 and every stride is a multiple of V (checked by the launcher), so
        // j0 + V <= inner and each row address is 16-byte aligned.
        int64_t r = r0 + ty;
        for (; r + 3 * by < r1; r += 4 * by) {
          const auto x0 = cu::load_vec<V, cu::Load::ReadOnly>(base + cu::offset_of(p.red, r));
          const auto x1 = cu::load_vec<V, cu::Load::ReadOnly>(base + cu::offset_of(p.red, r + by));
          const auto x2 = cu::load_vec<V, cu::Load::ReadOnly>(base + cu::offset_of(p.red, r + 2 * by));
          const auto x3 = cu::load_vec<V, cu::Load::ReadOnly>(base + cu::offset_of(p.red, r + 3 * by));
#pragma unroll
          for (int k = 0; k < V; ++k) {
            acc[k] = f(acc[k], cu::to_acc(x0[k]));
            acc[k] = f(acc[k], cu::to_acc(x1[k]));
            acc[k] = f(acc[k], cu::to_acc(x2[k]));
            acc[k] = f(acc[k], cu::to_acc(x3[k]));
          }
        }
        for (; r < r1; r += by) {
          const auto x = cu::load_vec<V, cu::Load::ReadOnly>(base + cu::offset_of(p.red, r));
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] = f(acc[k], cu::to_acc(x[k]));
        }
      } else {
        int64_t r = r0 + ty;
        for (; r + 3 * by < r1; r += 4 * by) {
          T x0 = base[cu::offset_of(p.red, r)];
          T x1 = base[cu::offset_of(p.red, r + by)];
          T x2 = base[cu::offset_of(p.red, r + 2 * by)];
          T x3 = base[cu::offset_of(p.red, r + 3 * by)];
          acc[0] = f(acc[0], cu::to_acc(x0));
          acc[0] = f(acc[0], cu::to_acc(x1));
          acc[0] = f(acc[0], cu::to_acc(x2));
          acc[0] = f(acc[0], cu::to_acc(x3));
        }
        for (; r < r1; r += by) acc[0] = f(acc[0], cu::to_acc(base[cu::offset_of(p.red, r)]));
      }
    }
    // Combine the by rows of the tile: a tree over ty in shared memory (slot of thread t,
    // column k: t * V + k), a fixed order.
    __syncthreads(); // the previous tile's readers are done
#pragma unroll
    for (int k = 0; k < V; ++k) smem[threadIdx.x * V + k] = acc[k];
    __syncthreads();
    for (int h = by / 2; h > 0; h >>= 1) {
      if (ty < h) {
        const int other = ((ty + h) * bx + tx) * V;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          acc[k] = f(acc[k], smem[other + k]);
          smem[threadIdx.x * V + k] = acc[k];
        }
      }
      __syncthreads();
    }
    if (ty == 0 && j0 < p.inner) {
      const int64_t idx = o * p.inner + j0;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (k < p.vec) {
          if (p.write_acc) static_cast<A*>(out)[s * out_size + idx + k] = acc[k];
          else static_cast<T*>(out)[idx + k] = cu::store_as<T>(acc[k]);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Planning (host).

/// Segments per line (or column tile) for `units` independent units of work over `resident`
/// concurrently resident blocks: the count s in [1, max_splits] minimising the number of
/// block waves per unit of work, ceil(units * s / resident) / s (smallest s on ties).
int64_t pick_splits(int64_t units, int64_t resident, int64_t max_splits) {
  if (units >= resident || max_splits <= 1) return 1;
  max_splits = std::min<int64_t>(max_splits, 4 * resident);
  int64_t best = 1;
  double best_cost = static_cast<double>(cu::ceil_div(units, resident));
  for (int64_t s = 2; s <= max_splits; ++s) {
    double cost = static_cast<double>(cu::ceil_div(units * s, resident)) / static_cast<double>(s);
    if (cost < best_cost - 1e-12) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

/// Launches reduce_lines_kernel<op, T, TOut> over every segment of p.
template <ReduceOp op, typename T, typename TOut>
void launch_lines(const T* in, void* out, const LinesParams& p) {
  static const int resident = cu::resident_blocks(reduce_lines_kernel<op, T, TOut>, kReduceThreads);
  const int64_t groups = kReduceThreads / p.lanes;
  const int64_t blocks = cu::ceil_div(p.n_lines * p.splits, groups);
  const unsigned grid = cu::grid_blocks(blocks, resident);
  reduce_lines_kernel<op, T, TOut><<<grid, kReduceThreads, 0, cu::stream()>>>(in, out, p);
  cu::check_launch("reduce_lines_kernel");
}

/// Threads per line: enough that each lane reads about 8 vectors (contiguous) or 16
/// elements (strided), at most one block.
int lanes_for(int64_t len, bool contiguous, int vec) {
  const int64_t per_lane = contiguous ? 8 * int64_t(vec) : 16;
  return cu::pow2_at_least(cu::ceil_div(std::max<int64_t>(len, 1), per_lane), kReduceThreads);
}

/// Row and General plans (and empty reductions): one group of lanes per line, long lines
/// split across blocks with a second pass over the partials.
template <ReduceOp op, typename T>
void reduce_lines(const ReducePlan& plan, const T* in, T* out) {
  using A = device_acc_t<T>;
  const bool contiguous = plan.kind == ReduceKind::Row || plan.reduce_size == 0;
  LinesParams p{};
  p.n_lines = plan.out_size;
  p.len = plan.reduce_size;
  p.contiguous = contiguous;
  p.lanes = lanes_for(p.len, contiguous, contiguous ? kVec<T> : 1);
  p.kept = cu::make_indexer1(plan.kept_shape, plan.kept_strides);
  if (!contiguous) p.red = cu::make_indexer1(plan.reduced_shape, plan.reduced_strides);
  p.splits = 1;
  p.chunk = std::max<int64_t>(p.len, 1);
  if (p.lanes == kReduceThreads) {
    static const int resident =
        cu::resident_blocks(reduce_lines_kernel<op, T, T>, kReduceThreads);
    // Each block-sized segment keeps at least 4 vectors per lane.
    const int64_t min_chunk = int64_t(kReduceThreads) * (contiguous ? 4 * kVec<T> : 16);
    int64_t splits = pick_splits(p.n_lines, resident, cu::ceil_div(p.len, min_chunk));
    if (splits > 1) {
      // Segments start on whole vectors so that every segment of an aligned line is aligned.
      const int64_t v = kVec<T>;
      p.chunk = cu::ceil_div(cu::ceil_div(p.len, splits), v) * v;
      p.splits = cu::ceil_div(p.len, p.chunk);
    }
  }
  if (p.splits == 1) {
    p.write_acc = false;
    launch_lines<op, T, T>(in, out, p);
    return;
  }
  // Pass 1: A partials, line-major ([line][split]); pass 2 reduces each line's partials.
  A* partial = static_cast<A*>(cu::scratch(sizeof(A) * size_t(p.n_lines * p.splits)));
  p.write_acc = true;
  launch_lines<op, T, T>(in, partial, p);
  LinesParams q{};
  q.n_lines = p.n_lines;
  q.len = p.splits;
  q.chunk = p.splits;
  q.splits = 1;
  q.contiguous = true;
  q.write_acc = false;
  q.lanes = lanes_for(q.len, true, kVec<A>);
  q.kept = cu::make_indexer1({p.n_lines}, {p.splits});
  launch_lines<op, A, T>(partial, out, q);
}

/// Column plans: tiles of columns x reduced rows; few tiles split the rows across blocks,
/// with a second pass (reduce_lines_kernel, one thread per output) over the partials.
template <ReduceOp op, typename T>
void reduce_columns(const ReducePlan& plan, const T* in, T* out, int bx, int vec) {
  using A = device_acc_t<T>;
  ColumnsParams p{};
  p.inner = plan.kept_shape.back();
  p.n_outer = plan.out_size / p.inner;
  p.n_red = plan.reduce_size;
  p.bx = bx;
  p.vec = vec;
  p.outer = cu::make_indexer1(
      std::vector<int64_t>(plan.kept_shape.begin(), plan.kept_shape.end() - 1),
      std::vector<int64_t>(plan.kept_strides.begin(), plan.kept_strides.end() - 1));
  p.red = cu::make_indexer1(plan.reduced_shape, plan.reduced_strides);
  const int by = kReduceThreads / bx;
  const int64_t width = int64_t(bx) * vec;
  const int64_t tiles = p.n_outer * cu::ceil_div(p.inner, width);
  static const int resident = cu::resident_blocks(reduce_columns_kernel<op, T>, kReduceThreads);
  // Each split keeps at least 8 rows per thread.
  p.splits = pick_splits(tiles, resident, cu::ceil_div(p.n_red, int64_t(by) * 8));
  p.chunk = cu::ceil_div(p.n_red, p.splits);
  p.splits = cu::ceil_div(p.n_red, p.chunk);
  p.write_acc = p.splits > 1;
  A* partial = nullptr;
  if (p.write_acc) partial = static_cast<A*>(cu::scratch(sizeof(A) * size_t(plan.out_size * p.splits)));
  const int64_t blocks = tiles * p.splits;
  const unsigned grid = cu::grid_blocks(blocks, resident);
  reduce_columns_kernel<op, T><<<grid, kReduceThreads, 0, cu::stream()>>>(
      in, p.write_acc ? static_cast<void*>(partial) : static_cast<void*>(out), p);
  cu::check_launch("reduce_columns_kernel");
  if (!p.write_acc) return;
  // Partials are [split][output]: a group of lanes per output, each walking a few splits,
  // then a tree (one thread walking ~1000 partials in sequence lost float32 accuracy).
  LinesParams q{};
  q.n_lines = plan.out_size;
  q.len = p.splits;
  q.chunk = p.splits;
  q.splits = 1;
  q.lanes = lanes_for(q.len, false, 1);
  q.contiguous = false;
  q.write_acc = false;
  q.kept = cu::make_indexer1({plan.out_size}, {1});
  q.red = cu::make_indexer1({p.splits}, {plan.out_size});
  launch_lines<op, A, T>(partial, out, q);
}

/// Runs the plan for one (op, T): picks the column kernel when the innermost kept dim is
/// contiguous and there are enough reduced rows to fill its tile, else the line kernel.
template <ReduceOp op, typename T>
void reduce_gpu(const ReducePlan& plan, const T* in, T* out) {
  if (plan.kind == ReduceKind::Column && plan.reduce_size > 0) {
    constexpr int V = kVec<T>;
    const int64_t inner = plan.kept_shape.back();
    bool aligned = V > 1 && inner % V == 0 && reinterpret_cast<uintptr_t>(in) % 16 == 0;
    for (size_t d = 0; aligned && d + 1 < plan.kept_strides.size(); ++d) aligned = plan.kept_strides[d] % V == 0;
    for (size_t d = 0; aligned && d < plan.reduced_strides.size(); ++d) aligned = plan.reduced_strides[d] % V == 0;
    const int vec = aligned ? V : 1;
    const int bx = cu::pow2_at_least(cu::ceil_div(inner, vec), 32);
    if (plan.reduce_size >= kReduceThreads / bx) {
      reduce_columns<op, T>(plan, in, out, bx, vec);
      return;
    }
  }
  reduce_lines<op, T>(plan, in, out);
}

} // namespace

void Reduce::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (out.size() == 0) {
    cu::alloc_output(out);
    return;
  }
  const ReducePlan plan = make_reduce_plan(in.shape(), in.strides(), axes_, ReduceOrder::Any);
  // Max/min over bool are or/and.
  ReduceOp op = op_;
  if (in.dtype() == bool_ && op == ReduceOp::Max) op = ReduceOp::Or;
  if (in.dtype() == bool_ && op == ReduceOp::Min) op = ReduceOp::And;
  bool on_device = plan.kept_shape.size() <= size_t(cu::kMaxDims) &&
      plan.reduced_shape.size() <= size_t(cu::kMaxDims);
  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    switch (op) {
      case ReduceOp::And: on_device = on_device && kHasKernel<ReduceOp::And, T>(); break;
      case ReduceOp::Or: on_device = on_device && kHasKernel<ReduceOp::Or, T>(); break;
      case ReduceOp::Sum: on_device = on_device && kHasKernel<ReduceOp::Sum, T>(); break;
      case ReduceOp::Prod: on_device = on_device && kHasKernel<ReduceOp::Prod, T>(); break;
      case ReduceOp::Max: on_device = on_device && kHasKernel<ReduceOp::Max, T>(); break;
      case ReduceOp::Min: on_device = on_device && kHasKernel<ReduceOp::Min, T>(); break;
    }
  });
  if (!on_device) {
    // Combinations the ops never produce (and more than kMaxDims unmergeable dims): the
    // CPU kernel, which handles everything.
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  void* dst = cu::alloc_output(out);
  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    // An empty reduction reads nothing (its input may have no buffer worth copying).
    const T* src = plan.reduce_size == 0 ? nullptr : cu::device_ptr<T>(in) + plan.base;
    T* o = static_cast<T*>(dst);
    auto run = [&]<ReduceOp kOp>() {
      if constexpr (kHasKernel<kOp, T>()) reduce_gpu<kOp, T>(plan, src, o);
    };
    switch (op) {
      case ReduceOp::And: run.template operator()<ReduceOp::And>(); break;
      case ReduceOp::Or: run.template operator()<ReduceOp::Or>(); break;
      case ReduceOp::Sum: run.template operator()<ReduceOp::Sum>(); break;
      case ReduceOp::Prod: run.template operator()<ReduceOp::Prod>(); break;
      case ReduceOp::Max: run.template operator()<ReduceOp::Max>(); break;
      case ReduceOp::Min: run.template operator()<ReduceOp::Min>(); break;
    }
  });
}

} // namespace nuvec
