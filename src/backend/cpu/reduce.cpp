// nuvec: CPU kernel of the Reduce family (and, or, sum, prod, max, min) over any input
// layout, driven by the reduction plan. Sums are pairwise over contiguous runs (as NumPy),
// with independent accumulators so the loop vectorises; max/min propagate NaN (NumPy).
#include <cmath>
#include <algorithm>
#include <complex>
#include <limits>
#include <memory>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math/reduce.h"
#include "backend/common/reduce_plan.h"
#include "backend/cpu/thread_pool.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// The combiners and identities of the math layer (backend/common/math/reduce.h), shared
// with the CUDA kernels.
using math::Combine;

// Leaves of the pairwise sum: at most this many elements go through the lane loop, so each
// lane adds at most kPairwiseLeaf / kLanes values in sequence.
constexpr int64_t kPairwiseLeaf = 512;
constexpr int kLanes = 16;

// Reduces n elements at p (stride `stride`) into an accumulator of type A. Sums split the
// run in halves down to leaves (error O(log n) instead of O(n)); every op uses kLanes
// independent accumulators on contiguous runs, so the compiler vectorises the loop.
template <ReduceOp op, typename T, typename A>
A reduce_run(const T* p, int64_t n, int64_t stride) {
  Combine<op, A> f;
  if constexpr (op == ReduceOp::Sum) {
    if (n > kPairwiseLeaf) {
      int64_t half = (n / 2 + kLanes - 1) / kLanes * kLanes;
      // Sequenced so memory is walked forwards (argument order is unspecified, and a
      // backwards walk over the leaves defeats the hardware prefetcher).
      A left = reduce_run<op, T, A>(p, half, stride);
      A right = reduce_run<op, T, A>(p + half * stride, n - half, stride);
      return f(left, right);
    }
  }
  if constexpr ((op == ReduceOp::Max || op == ReduceOp::Min) && std::is_floating_point_v<A>) {
    if (stride == 1 && n >= kLanes) {
      // Branch-free lanes (a compare and a select each, so they vectorise); NaNs are
      // collected apart and win at the end.
      A acc[kLanes], nan[kLanes];
      for (int j = 0; j < kLanes; ++j) {
        acc[j] = Combine<op, A>::init();
        nan[j] = A(0);
      }
      int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) {
          A x = static_cast<A>(p[i + j]);
          if constexpr (op == ReduceOp::Max) acc[j] = x > acc[j] ? x : acc[j];
          else acc[j] = x < acc[j] ? x : acc[j];
          nan[j] = x != x ? x : nan[j];
        }
      }
      A r = Combine<op, A>::init();
      for (; i < n; ++i) r = f(r, static_cast<A>(p[i]));
      for (int j = 0; j < kLanes; ++j) {
        if (nan[j] != nan[j]) return nan[j];
        r = f(r, acc[j]);
      }
      return r;
    }
  }
  if (stride == 1 && n >= kLanes) {
    A acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = Combine<op, A>::init();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) acc[j] = f(acc[j], static_cast<A>(p[i + j]));
    }
    A r = Combine<op, A>::init();
    for (; i < n; ++i) r = f(r, static_cast<A>(p[i]));
    // Combine the lanes pairwise too.
    for (int w = kLanes / 2; w > 0; w /= 2) {
      for (int j = 0; j < w; ++j) acc[j] = f(acc[j], acc[j + w]);
    }
    return f(acc[0], r);
  }
  A r = Combine<op, A>::init();
  for (int64_t i = 0; i < n; ++i) r = f(r, static_cast<A>(p[i * stride]));
  return r;
}

// Rows of a column reduction are accumulated in blocks of this many; the block results are
// then combined pairwise (a binary counter of partial rows), so long columns lose precision
// only logarithmically, as a pairwise sum does.
constexpr int64_t kColumnBlock = 128;

// Partial row accumulators by level: level k holds the combination of 2^k blocks.
template <ReduceOp op, typename A>
class PairwiseRows {
 public:
  explicit PairwiseRows(int64_t inner) : inner_(inner) {}

  // A fresh buffer (filled with the identity) for the next block.
  A* next_block() {
    if (free_.empty()) free_.emplace_back(new A[inner_]);
    parts_.push_back({std::move(free_.back()), 0});
    free_.pop_back();
    std::fill(parts_.back().buf.get(), parts_.back().buf.get() + inner_, Combine<op, A>::init());
    return parts_.back().buf.get();
  }
  // Called after the block is filled: merges equal levels.
  void close_block() {
    while (parts_.size() >= 2 && parts_[parts_.size() - 1].level == parts_[parts_.size() - 2].level) {
      merge_top();
      parts_.back().level++;
    }
  }
  // Combines everything into out (converted to T) and resets.
  template <typename T>
  void finish(T* out) {
    while (parts_.size() >= 2) merge_top();
    for (int64_t j = 0; j < inner_; ++j) {
      out[j] = static_cast<T>(parts_.empty() ? Combine<op, A>::init() : parts_[0].buf[j]);
    }
    while (!parts_.empty()) {
      free_.push_back(std::move(parts_.back().buf));
      parts_.pop_back();
    }
  }

 private:
  struct Part {
    std::unique_ptr<A[]> buf;
    int level;
  };
  void merge_top() {
    Combine<op, A> f;
    A* dst = parts_[parts_.size() - 2].buf.get();
    const A* src = parts_.back().buf.get();
    for (int64_t j = 0; j < inner_; ++j) dst[j] = f(dst[j], src[j]);
    free_.push_back(std::move(parts_.back().buf));
    parts_.pop_back();
  }
  int64_t inner_;
  std::vector<Part> parts_;
  std::vector<std::unique_ptr<A[]>> free_;
};

// Work below this many input elements stays on the calling thread (a pool wake-up costs
// some microseconds).
constexpr int64_t kParallelReads = int64_t{1} << 17;

// Splits [0, n) items, each worth `per_item` input reads, over the thread pool.
template <typename F>
void split_items(int64_t n, int64_t per_item, F&& f) {
  int64_t chunks = std::min<int64_t>(cpu::num_threads(), n * per_item / kParallelReads);
  chunks = std::min(chunks, n);
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  cpu::run_tasks(static_cast<size_t>(chunks), [&](size_t c) {
    int64_t b = static_cast<int64_t>(c) * per;
    f(b, std::min(n, b + per));
  });
}

// One long contiguous run on the pool, with the same result as reduce_run on one thread:
// a sum splits at reduce_run's own pairwise halves (the top levels of its tree run as
// tasks and are combined in the same order); and/or and integer max/min are exact in any
// order. Other ops (prod rounds differently in another order, floating max/min break ties
// by position) stay on the calling thread.
template <ReduceOp op, typename T, typename A>
A reduce_long_run(const T* p, int64_t n) {
  // Floating max/min are not: their ties (+0 and -0, NaN payloads) go to the left operand,
  // so the split would pick another of two equal values.
  constexpr bool exact = op == ReduceOp::And || op == ReduceOp::Or ||
      ((op == ReduceOp::Max || op == ReduceOp::Min) && std::is_integral_v<A>);
  if (!(op == ReduceOp::Sum || exact) || n < 2 * kParallelReads || cpu::num_threads() < 2) {
    return reduce_run<op, T, A>(p, n, 1);
  }
  // Leaves of the top `levels` of the pairwise tree, left to right.
  int levels = 1;
  while ((1 << levels) < cpu::num_threads() && (n >> (levels + 1)) >= kParallelReads) ++levels;
  std::vector<std::pair<int64_t, int64_t>> leaves = {{0, n}};
  for (int l = 0; l < levels; ++l) {
    std::vector<std::pair<int64_t, int64_t>> next;
    for (auto [b, len] : leaves) {
      int64_t half = (len / 2 + kLanes - 1) / kLanes * kLanes; // reduce_run's split
      next.push_back({b, half});
      next.push_back({b + half, len - half});
    }
    leaves = std::move(next);
  }
  std::vector<A> part(leaves.size());
  cpu::run_tasks(leaves.size(), [&](size_t i) {
    part[i] = reduce_run<op, T, A>(p + leaves[i].first, leaves[i].second, 1);
  });
  Combine<op, A> f;
  for (size_t w = part.size() / 2; w > 0; w /= 2) { // the tree's own pairing, bottom up
    for (size_t i = 0; i < w; ++i) part[i] = f(part[2 * i], part[2 * i + 1]);
  }
  return part[0];
}

template <ReduceOp op, typename T>
void reduce_plan_loop(const ReducePlan& plan, const T* in, T* out) {
  using A = acc_t<T>;
  Combine<op, A> f;
  switch (plan.kind) {
    case ReduceKind::Row: {
      // Each output is one run; ranges of outputs go to the pool.
      int64_t n = plan.reduce_size;
      const int64_t outputs = index_count(plan.kept_shape);
      if (outputs < cpu::num_threads() && n >= 2 * kParallelReads) {
        // Fewer outputs than threads (a full reduction): each long run on the pool.
        int64_t o = 0;
        for_each_offset(plan.kept_shape, plan.kept_strides, [&](int64_t off) {
          out[o++] = static_cast<T>(reduce_long_run<op, T, A>(in + off, n));
        });
        return;
      }
      split_items(index_count(plan.kept_shape), n, [&](int64_t begin, int64_t end) {
        int64_t o = begin;
        for_each_offset_in(plan.kept_shape, plan.kept_strides, begin, end, [&](int64_t off) {
          out[o++] = static_cast<T>(reduce_run<op, T, A>(in + off, n, 1));
        });
      });
      return;
    }
    case ReduceKind::Column: {
      // Outer kept dims, then a contiguous inner run of `inner` outputs.
      std::vector<int64_t> outer_shape(plan.kept_shape.begin(), plan.kept_shape.end() - 1);
      Strides outer_strides(plan.kept_strides.begin(), plan.kept_strides.end() - 1);
      const int64_t inner = plan.kept_shape.back();
      const int64_t outer = index_count(outer_shape);
      // The reduced dims: the outermost one is split into blocks, the others walked whole.
      std::vector<int64_t> rest_shape(plan.reduced_shape.begin() + 1, plan.reduced_shape.end());
      Strides rest_strides(plan.reduced_strides.begin() + 1, plan.reduced_strides.end());
      const int64_t n0 = plan.reduced_shape[0], s0 = plan.reduced_strides[0];
      const int64_t reads_per_output = n0 * index_count(rest_shape);
      // Columns [j0, j1) of the outer rows [begin, end): the order of every column's
      // accumulation is the same however the work is split.
      auto columns = [&](int64_t begin, int64_t end, int64_t j0, int64_t j1) {
        PairwiseRows<op, A> rows(j1 - j0);
        int64_t o = begin * inner;
        for_each_offset_in(outer_shape, outer_strides, begin, end, [&](int64_t off) {
          for (int64_t b = 0; b < n0; b += kColumnBlock) {
            A* acc = rows.next_block();
            int64_t e = std::min(n0, b + kColumnBlock);
            for (int64_t r = b; r < e; ++r) {
              for_each_offset(rest_shape, rest_strides, [&](int64_t roff) {
                const T* p = in + off + r * s0 + roff + j0;
                for (int64_t j = 0; j < j1 - j0; ++j) acc[j] = f(acc[j], static_cast<A>(p[j]));
              });
            }
            rows.close_block();
          }
          rows.finish(out + o + j0);
          o += inner;
        });
      };
      const int64_t blocks = (n0 + kColumnBlock - 1) / kColumnBlock;
      if (outer == 1 && cpu::num_threads() > 1 && blocks >= 2 &&
          inner * reads_per_output >= 2 * kParallelReads) {
        // One set of columns (a 2-d column sum): split the rows. Each thread reads whole
        // rows (a column split would read strided half rows, no faster than one thread).
        // The chunks follow PairwiseRows' own tree, so the result is the one-thread result:
        // the block count's binary decomposition gives parts of 2^a blocks (combined right
        // to left at the end), and each part splits into 2^m equal halves-of-halves
        // (combined as a balanced tree).
        struct Chunk { int64_t first, count; int part; };
        std::vector<Chunk> chunks;
        std::vector<int64_t> part_size;
        for (int64_t left = blocks, first = 0; left > 0;) {
          int64_t size = int64_t{1} << (63 - __builtin_clzll(static_cast<uint64_t>(left)));
          part_size.push_back(size);
          left -= size;
          int64_t sub = size;
          while (sub > 1 && size / sub < cpu::num_threads()) sub /= 2;
          for (int64_t b = first; b < first + size; b += sub) {
            chunks.push_back({b, sub, static_cast<int>(part_size.size()) - 1});
          }
          first += size;
        }
        std::vector<std::unique_ptr<A[]>> partial(chunks.size());
        cpu::run_tasks(chunks.size(), [&](size_t c) {
          PairwiseRows<op, A> rows(inner);
          const int64_t r0 = chunks[c].first * kColumnBlock;
          const int64_t r_end = std::min(n0, (chunks[c].first + chunks[c].count) * kColumnBlock);
          for (int64_t b = r0; b < r_end; b += kColumnBlock) {
            A* acc = rows.next_block();
            for (int64_t r = b; r < std::min(r_end, b + kColumnBlock); ++r) {
              for_each_offset(rest_shape, rest_strides, [&](int64_t roff) {
                const T* p = in + r * s0 + roff;
                for (int64_t j = 0; j < inner; ++j) acc[j] = f(acc[j], static_cast<A>(p[j]));
              });
            }
            rows.close_block();
          }
          partial[c].reset(new A[inner]);
          rows.finish(partial[c].get());
        });
        auto combine = [&](A* dst, const A* src) {
          for (int64_t j = 0; j < inner; ++j) dst[j] = f(dst[j], src[j]);
        };
        // Within each part, a balanced tree over its chunks; then the parts, right to left.
        std::vector<A*> part_result;
        for (size_t c = 0; c < chunks.size();) {
          size_t e = c;
          while (e < chunks.size() && chunks[e].part == chunks[c].part) ++e;
          for (size_t w = 1; w < e - c; w *= 2) {
            for (size_t i = c; i + w < e; i += 2 * w) combine(partial[i].get(), partial[i + w].get());
          }
          part_result.push_back(partial[c].get());
          c = e;
        }
        for (size_t i = part_result.size() - 1; i > 0; --i) {
          combine(part_result[i - 1], part_result[i]);
        }
        for (int64_t j = 0; j < inner; ++j) out[j] = static_cast<T>(part_result[0][j]);
      } else {
        split_items(outer, inner * reads_per_output, [&](int64_t begin, int64_t end) {
          columns(begin, end, 0, inner);
        });
      }
      return;
    }
    case ReduceKind::General: {
      // Innermost reduced dim as a strided run, the others walked by offset.
      std::vector<int64_t> rest_shape(plan.reduced_shape.begin(), plan.reduced_shape.end() - 1);
      Strides rest_strides(plan.reduced_strides.begin(), plan.reduced_strides.end() - 1);
      const int64_t n = plan.reduced_shape.back(), s = plan.reduced_strides.back();
      const int64_t reads = n * index_count(rest_shape);
      split_items(index_count(plan.kept_shape), reads, [&](int64_t begin, int64_t end) {
        int64_t o = begin;
        for_each_offset_in(plan.kept_shape, plan.kept_strides, begin, end, [&](int64_t off) {
          A acc = Combine<op, A>::init();
          for_each_offset(rest_shape, rest_strides, [&](int64_t roff) {
            acc = f(acc, reduce_run<op, T, A>(in + off + roff, n, s));
          });
          out[o++] = static_cast<T>(acc);
        });
      });
      return;
    }
  }
}

template <ReduceOp op>
void reduce_dispatch(const ReducePlan& plan, const array& in, array& out) {
  dispatch_all_types(in.dtype(), [&]<typename T>() {
    reduce_plan_loop<op, T>(plan, static_cast<const T*>(in.raw_data()) + plan.base, static_cast<T*>(out.raw_data()));
  });
}

} // namespace

// The op casts the input to the output dtype first (bool and small integer sums, and/or
// over bool), so the kernel reads and writes one dtype.
void Reduce::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  // Every op is commutative: the plan may flip and reorder the reduced dims (plan.base).
  auto plan = make_reduce_plan(in.shape(), in.strides(), axes_, ReduceOrder::Any);
  switch (op_) {
    case ReduceOp::And: reduce_dispatch<ReduceOp::And>(plan, in, out); break;
    case ReduceOp::Or: reduce_dispatch<ReduceOp::Or>(plan, in, out); break;
    case ReduceOp::Sum: reduce_dispatch<ReduceOp::Sum>(plan, in, out); break;
    case ReduceOp::Prod: reduce_dispatch<ReduceOp::Prod>(plan, in, out); break;
    case ReduceOp::Max: reduce_dispatch<ReduceOp::Max>(plan, in, out); break;
    case ReduceOp::Min: reduce_dispatch<ReduceOp::Min>(plan, in, out); break;
  }
}

} // namespace nuvec
