// nuvec: GPU kernels of ArgReduce (argmin/argmax along one axis, uint32 output), with the
// CPU kernel's rule (src/backend/cpu/arg_reduce.cpp): the first NaN wins over everything,
// otherwise the first extreme wins ties; complex values compare lexicographically.
//
// Each line (one output) is reduced by a group of `lanes` threads that each keep a
// candidate (value, index); candidates combine with an associative, commutative rule (NaN
// first, then the extreme, then the smaller index), so any split of the line gives the
// sequential CPU answer. A contiguous axis gets up to a block of lanes per line; a strided
// axis gets one thread per line (neighbouring lines are then usually neighbours in memory).
// Long lines with few outputs are split across blocks, and a second pass combines the
// per-segment candidates.
#include <algorithm>
#include <vector>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

using cu::device_acc_t;
using cu::kReduceThreads;
using cu::StridedIndexer;

/// Index of an empty candidate (a lane that saw no element); lines have < 2^31 elements.
constexpr uint32_t kNone = 0xffffffffu;

/// A candidate: value (in the accumulator type) and its index along the axis.
template <typename A>
struct Cand {
  A v;
  uint32_t i;
};

/// The winner of two candidates: a NaN beats every number (the smaller index among NaNs),
/// then the larger (is_max) or smaller value, then the smaller index. Associative and
/// commutative, so it agrees with the CPU's left-to-right scan whatever the grouping.
template <typename A>
__device__ __forceinline__ Cand<A> pick(const Cand<A>& a, const Cand<A>& b, bool is_max) {
  if (a.i == kNone) return b;
  if (b.i == kNone) return a;
  const bool an = math::is_nan(a.v), bn = math::is_nan(b.v);
  if (an || bn) {
    if (an && bn) return a.i < b.i ? a : b;
    return an ? a : b;
  }
  const bool b_wins = is_max ? math::less_than(a.v, b.v) : math::less_than(b.v, a.v);
  const bool a_wins = is_max ? math::less_than(b.v, a.v) : math::less_than(a.v, b.v);
  if (b_wins) return b;
  if (a_wins) return a;
  return a.i < b.i ? a : b;
}

/// Launch parameters of arg_reduce_kernel. Line l starts at element offset kept(l); its
/// element i (in [0, len)) lies at i * stride. The line is split into `splits` segments of
/// `chunk` elements, segment s of line l being number l * splits + s.
struct ArgParams {
  int64_t n_lines;
  int64_t len;
  int64_t stride;
  int64_t chunk;
  int64_t splits;
  int lanes; // power of two in [1, kReduceThreads]
  bool is_max;
  StridedIndexer<1> kept;
  /// Second pass: the candidate index of each input element (same offsets as the values);
  /// nullptr in the first pass, where an element's index is its position.
  const uint32_t* in_idx;
  /// Winning index per segment (the final output when splits == 1: then segment == line).
  uint32_t* out_idx;
  /// Winning value per segment (type A), written only for a split first pass; else nullptr.
  void* out_val;
};

/// Reduces segments of lines (see ArgParams) with a group of `lanes` threads per segment.
/// Grid-stride over segments, uniform per block (the group combine needs every thread).
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    arg_reduce_kernel(const T* in, const __grid_constant__ ArgParams p) {
  using A = device_acc_t<T>;
  __shared__ __align__(16) unsigned char cands_raw[(kReduceThreads / 32) * sizeof(Cand<A>)];
  Cand<A>* cands = reinterpret_cast<Cand<A>*>(cands_raw);
  const int L = p.lanes;
  const int groups = kReduceThreads / L;
  const int g = threadIdx.x / L, lane = threadIdx.x % L;
  const int64_t n_seg = p.n_lines * p.splits;
  for (int64_t first = int64_t(blockIdx.x) * groups; first < n_seg;
       first += int64_t(gridDim.x) * groups) {
    const int64_t seg = first + g;
    Cand<A> c{A(), kNone};
    if (seg < n_seg) {
      const int64_t line = seg / p.splits;
      const int64_t b = (seg - line * p.splits) * p.chunk;
      const int64_t e = b + p.chunk < p.len ? b + p.chunk : p.len;
      const int64_t base = cu::offset_of(p.kept, line);
      for (int64_t i = b + lane; i < e; i += L) {
        const int64_t off = base + i * p.stride;
        Cand<A> x{cu::to_acc(in[off]), p.in_idx ? p.in_idx[off] : static_cast<uint32_t>(i)};
        c = pick(c, x, p.is_max);
      }
    }
    // Combine the group's candidates into its first lane (fixed order).
    c = cu::group_reduce(c, L, [&](const Cand<A>& a, const Cand<A>& b) { return pick(a, b, p.is_max); }, cands);
    if (lane == 0 && seg < n_seg) {
      // An empty line (never produced by the ops) gives 0, as on the CPU.
      p.out_idx[seg] = c.i == kNone ? 0u : c.i;
      if (p.out_val) static_cast<A*>(p.out_val)[seg] = c.v;
    }
  }
}

/// Launches arg_reduce_kernel<T> over every segment of p.
template <typename T>
void launch_arg(const T* in, const ArgParams& p) {
  static const int resident = cu::resident_blocks(arg_reduce_kernel<T>, kReduceThreads);
  const int64_t groups = kReduceThreads / p.lanes;
  const int64_t blocks = cu::ceil_div(p.n_lines * p.splits, groups);
  const unsigned grid = cu::grid_blocks(blocks, resident);
  arg_reduce_kernel<T><<<grid, kReduceThreads, 0, cu::stream()>>>(in, p);
  cu::check_launch("arg_reduce_kernel");
}

/// Lanes per line: up to a block for a contiguous axis (about 8 elements per lane), one
/// thread per line for a strided one.
int arg_lanes(int64_t len, int64_t stride) {
  if (stride != 1 && len > 1) return 1;
  return cu::pow2_at_least(cu::ceil_div(std::max<int64_t>(len, 1), 8), kReduceThreads);
}

/// Arg-reduces n_lines lines of len elements (element i of line l at kept(l) + i * stride)
/// into out (uint32, one per line).
template <typename T>
void arg_reduce_gpu(const T* in, uint32_t* out, int64_t n_lines, int64_t len, int64_t stride,
    const StridedIndexer<1>& kept, bool is_max) {
  using A = device_acc_t<T>;
  ArgParams p{};
  p.n_lines = n_lines;
  p.len = len;
  p.stride = stride;
  p.lanes = arg_lanes(len, stride);
  p.is_max = is_max;
  p.kept = kept;
  p.splits = 1;
  p.chunk = std::max<int64_t>(len, 1);
  // Split long lines while the lines alone leave resident threads idle; every lane keeps
  // at least 32 elements.
  static const int resident = cu::resident_blocks(arg_reduce_kernel<T>, kReduceThreads);
  const int64_t target_threads = int64_t(resident) * kReduceThreads;
  const int64_t busy = n_lines * p.lanes;
  if (busy < target_threads) {
    const int64_t splits = std::min(cu::ceil_div(target_threads, busy), cu::ceil_div(len, int64_t(p.lanes) * 32));
    if (splits > 1) {
      p.chunk = cu::ceil_div(len, splits);
      p.splits = cu::ceil_div(len, p.chunk);
    }
  }
  if (p.splits == 1) {
    p.out_idx = out;
    launch_arg<T>(in, p);
    return;
  }
  // Pass 1: a candidate per segment, line-major ([line][split]); pass 2 picks per line.
  const size_t n_part = size_t(n_lines * p.splits);
  A* part_val = static_cast<A*>(cu::scratch(n_part * sizeof(A)));
  uint32_t* part_idx = static_cast<uint32_t*>(cu::scratch(n_part * sizeof(uint32_t)));
  p.out_idx = part_idx;
  p.out_val = part_val;
  launch_arg<T>(in, p);
  ArgParams q{};
  q.n_lines = n_lines;
  q.len = p.splits;
  q.stride = 1;
  q.chunk = p.splits;
  q.splits = 1;
  q.lanes = arg_lanes(q.len, 1);
  q.is_max = is_max;
  q.kept = cu::make_indexer1({n_lines}, {p.splits});
  q.in_idx = part_idx;
  q.out_idx = out;
  launch_arg<A>(part_val, q);
}

} // namespace

void ArgReduce::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (out.size() == 0) {
    cu::alloc_output(out);
    return;
  }
  // Kept dims merged where they walk like one (output order).
  std::vector<int64_t> kept_shape, kept_strides;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (d == axis_ || in.shape(d) == 1) continue;
    const int64_t n = in.shape(d), s = in.strides()[d];
    if (!kept_shape.empty() && kept_strides.back() == s * n) {
      kept_shape.back() *= n;
      kept_strides.back() = s;
    } else {
      kept_shape.push_back(n);
      kept_strides.push_back(s);
    }
  }
  if (kept_shape.size() > size_t(cu::kMaxDims)) {
    cu::eval_on_host(*this, inputs, outputs); // more unmergeable dims than the indexer walks
    return;
  }
  const int64_t len = in.shape(axis_);
  const int64_t stride = len > 1 ? in.strides()[axis_] : 1;
  auto* dst = cu::alloc_output<uint32_t>(out);
  const auto kept = cu::make_indexer1(kept_shape, kept_strides);
  const bool is_max = op_ == ArgReduceOp::ArgMax;
  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    arg_reduce_gpu<T>(cu::device_ptr<T>(in), dst, static_cast<int64_t>(out.size()), len, stride, kept, is_max);
  });
}

} // namespace nuvec
