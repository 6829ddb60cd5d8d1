// nuvec: GPU kernels of SoftmaxVjp and LogSumExpVjp, the backwards of Softmax and LogSumExp
// (rules and fallbacks in src/fast/softmax.cpp and src/fast/logsumexp.cpp; semantics are the
// CPU kernels', src/backend/cpu/fast/softmax.cpp and logsumexp.cpp): arithmetic in float for
// the half types (double for float64), the output rounded once.
//
// Both are a row reduction followed by an element-wise write, so each is written once as a
// policy (SoftmaxVjpOp, LogSumExpVjpOp) over a row that offers reduce() and write(), and two
// kernels supply the row:
//  - row_vjp_regs_kernel: rows 16-byte aligned with n a multiple of the vector width, up to
//    1024 x VPT vectors. One block per row (grid-stride over rows), BLOCK the smallest power of
//    two from 32 to 1024 that holds the row in VPT vectors a thread; every thread loads its
//    vectors of each input up front as packed elements (device/register_row.cuh), the block
//    reduces, and the output is written from the registers: one read and one write of every
//    element. Four vectors a thread in all (VPT 2 for SoftmaxVjp's y and d, 4 for
//    LogSumExpVjp's x), in 32 registers, so that 2048 threads fill an SM (the H200
//    measurements of the norm kernels, src/backend/cuda/fast/norms.cu); float64's exp needs
//    more (see LogSumExpVjpOp).
//  - row_vjp_looped_kernel: other rows. One block per row streams it once per reduction and
//    once for the write (16-byte vectors where aligned, else elements).
// Inputs whose rows are not dense and row-major are copied to that form first.
#include <array>
#include <cstdint>
#include <vector>

#include "backend/common/lse_shift.h"
#include "backend/common/math/functions.h"
#include "backend/common/math/reduce.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/register_row.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/logsumexp.h"
#include "fast/softmax.h"

namespace nuvec {

namespace {

/// Threads per block of the streaming kernel.
constexpr int kLoopedBlock = 512;

/// K row inputs of rows x n elements, row r at r * n, and the output alike.
template <typename T, int K>
struct Rows {
  std::array<const T*, K> in;
  T* out;
  int64_t rows;
  int n;
};

/// The row combiners (the Reduce family's, math/reduce.h; Max lets a NaN win).
template <typename A>
using Sum = math::Combine<ReduceOp::Sum, A>;
template <typename A>
using Max = math::Combine<ReduceOp::Max, A>;

/// A row held in registers by a block of BLOCK threads: one cu::RegisterRow (VPT packed
/// vectors a thread, loaded when the row is made) for each of the K inputs.
template <typename T, int K, int BLOCK, int VPT>
struct RegsRow {
  using A = cu::device_acc_t<T>;
  static constexpr int W = cu::kVec<T>;
  cu::RegisterRow<T, BLOCK, VPT> in[K];
  T* dst;
  A* smem;

  __device__ __forceinline__ RegsRow(const Rows<T, K>& p, int64_t row, A* buf) : dst(p.out + row * p.n), smem(buf) {
#pragma unroll
    for (int q = 0; q < K; ++q) in[q].load(p.in[q] + row * p.n, p.n / W, threadIdx.x);
  }

  /// f of the K inputs' element j of slot k.
  template <typename F>
  __device__ __forceinline__ A at(const F& f, int k, int j) const {
    static_assert(K == 1 || K == 2, "one or two row inputs");
    if constexpr (K == 1) return f(in[0].at(k, j));
    else return f(in[0].at(k, j), in[1].at(k, j));
  }

  /// combine over the row of f(elements), given to every thread of the block.
  template <typename F, typename C>
  __device__ __forceinline__ A reduce(const F& f, const C& combine) const {
    A acc = C::init();
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (in[0].valid(k)) {
#pragma unroll
        for (int j = 0; j < W; ++j) acc = combine(acc, at(f, k, j));
      }
    }
    return cu::block_allreduce(acc, combine, smem);
  }

  /// Writes f(elements) rounded to T at every element of the row.
  template <typename F>
  __device__ __forceinline__ void write(const F& f) const {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (in[0].valid(k)) {
        cu::Vec<T, W> o;
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = cu::store_as<T>(at(f, k, j));
        cu::store_vec<W>(dst + in[0].index(k) * W, o);
      }
    }
  }
};

/// A row read from global memory at each pass, U elements at a time (a 16-byte vector, or one
/// element where the row is not aligned for vectors).
template <typename T, int K, int BLOCK, int U>
struct StreamRow {
  using A = cu::device_acc_t<T>;
  std::array<const T*, K> src;
  T* dst;
  unsigned units; // unsigned: i + BLOCK cannot overflow for rows up to 2^31 - 1 elements
  A* smem;

  __device__ __forceinline__ StreamRow(const Rows<T, K>& p, int64_t row, A* buf)
      : dst(p.out + row * p.n), units(p.n / U), smem(buf) {
#pragma unroll
    for (int q = 0; q < K; ++q) src[q] = p.in[q] + row * p.n;
  }

  __device__ __forceinline__ void load(unsigned i, cu::Packed<T, U> (&v)[K]) const {
#pragma unroll
    for (int q = 0; q < K; ++q) v[q] = cu::load_packed<U, cu::Load::ReadOnly>(src[q] + i * U);
  }

  /// f of the K loaded vectors' element j.
  template <typename F>
  __device__ __forceinline__ A at(const F& f, const cu::Packed<T, U> (&v)[K], int j) const {
    if constexpr (K == 1) return f(cu::acc_at(v[0], j));
    else return f(cu::acc_at(v[0], j), cu::acc_at(v[1], j));
  }

  template <typename F, typename C>
  __device__ __forceinline__ A reduce(const F& f, const C& combine) const {
    A acc = C::init();
    for (unsigned i = threadIdx.x; i < units; i += BLOCK) {
      cu::Packed<T, U> v[K];
      load(i, v);
#pragma unroll
      for (int j = 0; j < U; ++j) acc = combine(acc, at(f, v, j));
    }
    return cu::block_allreduce(acc, combine, smem);
  }

  template <typename F>
  __device__ __forceinline__ void write(const F& f) const {
    for (unsigned i = threadIdx.x; i < units; i += BLOCK) {
      cu::Packed<T, U> v[K];
      cu::Vec<T, U> o;
      load(i, v);
#pragma unroll
      for (int j = 0; j < U; ++j) o[j] = cu::store_as<T>(at(f, v, j));
      cu::store_vec<U>(dst + i * U, o);
    }
  }
};

/// SoftmaxVjp: rows (y, d), dx = y · (d − sum(d · y)).
template <typename T>
struct SoftmaxVjpOp {
  static constexpr int kInputs = 2;
  static constexpr int kVpt = 2;          // y and d: four 16-byte vectors a thread
  static constexpr int kSmThreads = 2048; // threads an SM: 32 registers a thread
  template <typename Row>
  __device__ __forceinline__ void operator()(const Row& row, int64_t) const {
    using A = cu::device_acc_t<T>;
    const A dot = row.reduce([](A y, A d) { return d * y; }, Sum<A>{});
    row.write([dot](A y, A d) { return y * (d - dot); });
  }
};

/// LogSumExpVjp: row x, per-row lse and g; dx = exp(x − c) · (g / sum(exp(x − c))) with c the
/// shift of backend/common/lse_shift.h (lse; 0 where it is infinite; the row's max where lse is
/// too coarse to shift by).
template <typename T>
struct LogSumExpVjpOp {
  static constexpr int kInputs = 1;
  // float64's exp takes many registers of its own (four vectors a thread spill even within
  // 64): float64 rows hold two vectors a thread in 64 registers (1024 threads an SM).
  static constexpr int kVpt = sizeof(T) == 8 ? 2 : 4;
  static constexpr int kSmThreads = sizeof(T) == 8 ? 1024 : 2048;
  const T* lse;
  const T* g;
  template <typename Row>
  __device__ __forceinline__ void operator()(const Row& row, int64_t r) const {
    using A = cu::device_acc_t<T>;
    const A l = cu::to_acc(lse[r]);
    A c = math::lse_shift(l);
    A s = row.reduce([c](A x) { return math::exp(x - c); }, Sum<A>{});
    if (!math::lse_shift_holds(l, s)) { // the same branch for the whole block (s is the block's)
      c = math::lse_shift(row.reduce([](A x) { return x; }, Max<A>{}));
      s = row.reduce([c](A x) { return math::exp(x - c); }, Sum<A>{});
    }
    const A q = cu::to_acc(g[r]) / s;
    row.write([c, q](A x) { return math::exp(x - c) * q; });
  }
};

template <typename T, typename Op, int BLOCK, int VPT>
__global__ void __launch_bounds__(BLOCK, cu::min_blocks_for(Op::kSmThreads, BLOCK))
    row_vjp_regs_kernel(__grid_constant__ const Rows<T, Op::kInputs> p, __grid_constant__ const Op op) {
  __shared__ cu::device_acc_t<T> smem[BLOCK / 32];
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    op(RegsRow<T, Op::kInputs, BLOCK, VPT>(p, row, smem), row);
  }
}

template <typename T, typename Op, int BLOCK, bool kAligned>
__global__ void __launch_bounds__(BLOCK)
    row_vjp_looped_kernel(__grid_constant__ const Rows<T, Op::kInputs> p, __grid_constant__ const Op op) {
  __shared__ cu::device_acc_t<T> smem[BLOCK / 32];
  constexpr int U = kAligned ? cu::kVec<T> : 1;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    op(StreamRow<T, Op::kInputs, BLOCK, U>(p, row, smem), row);
  }
}

/// Launches `kernel` (BLOCK threads, one block a row) over the rows: at most 32 waves of its
/// `resident` blocks, which then loop over the rest.
template <int BLOCK, typename Kernel, typename P, typename Op>
void launch_rows(Kernel kernel, int resident, const P& p, const Op& op, const char* name) {
  kernel<<<cu::grid_blocks(p.rows, resident), BLOCK, 0, cu::stream()>>>(p, op);
  cu::check_launch(name);
}

/// Aligned rows of up to 1024 x VPT vectors: the register kernel with the smallest block
/// that holds the row. Other rows stream. Each kernel instance keeps its own resident-block
/// count (a static in each instance of the lambdas).
template <typename T, typename Op>
void launch_row_vjp(const Rows<T, Op::kInputs>& p, const Op& op, bool aligned) {
  constexpr int VPT = Op::kVpt;
  auto regs = [&]<int BLOCK>() {
    const auto kernel = row_vjp_regs_kernel<T, Op, BLOCK, VPT>;
    static const int resident = cu::resident_blocks(kernel, BLOCK);
    launch_rows<BLOCK>(kernel, resident, p, op, "row_vjp_regs_kernel");
  };
  auto looped = [&]<bool kAligned>() {
    const auto kernel = row_vjp_looped_kernel<T, Op, kLoopedBlock, kAligned>;
    static const int resident = cu::resident_blocks(kernel, kLoopedBlock);
    launch_rows<kLoopedBlock>(kernel, resident, p, op, "row_vjp_looped_kernel");
  };
  const int64_t vecs = p.n / cu::kVec<T>;
  if (!aligned) return looped.template operator()<false>();
  if (vecs <= 32 * VPT) return regs.template operator()<32>();
  if (vecs <= 64 * VPT) return regs.template operator()<64>();
  if (vecs <= 128 * VPT) return regs.template operator()<128>();
  if (vecs <= 256 * VPT) return regs.template operator()<256>();
  if (vecs <= 512 * VPT) return regs.template operator()<512>();
  if (vecs <= 1024 * VPT) return regs.template operator()<1024>();
  looped.template operator()<true>();
}

/// The output buffer, the row inputs made row-major, and the launch of op over them (dtype
/// dispatch included; nothing runs for an empty output). `extra(T)` gives the op its
/// per-row pointers.
template <template <typename> class Op, typename Extra>
void run_row_vjp(
    const char* name,
    const std::vector<array>& row_inputs,
    array& out,
    const Extra& extra) {
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  std::vector<array> dense;
  for (const auto& a : row_inputs) dense.push_back(cu::as_row_contiguous(a));
  const int n = out.shape(-1);
  cu::dispatch_device_float_types(out.dtype(), name, [&]<typename T>() {
    constexpr int K = Op<T>::kInputs;
    Rows<T, K> p{};
    bool aligned = n % cu::kVec<T> == 0 && cu::is_aligned(dst, 16);
    for (int q = 0; q < K; ++q) {
      p.in[q] = cu::device_ptr<T>(dense[q]);
      aligned = aligned && cu::is_aligned(p.in[q], 16);
    }
    p.out = static_cast<T*>(dst);
    p.n = n;
    p.rows = static_cast<int64_t>(out.size()) / n;
    launch_row_vjp<T>(p, extra.template operator()<T>(), aligned);
  });
}

} // namespace

void SoftmaxVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_row_vjp<SoftmaxVjpOp>("softmax", {inputs[0], inputs[1]}, outputs[0], [&]<typename T>() {
    return SoftmaxVjpOp<T>{};
  });
}

void LogSumExpVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  // lse and g hold one element per row; made dense, row r's is element r.
  const array lse = cu::as_row_contiguous(inputs[1]), g = cu::as_row_contiguous(inputs[2]);
  run_row_vjp<LogSumExpVjpOp>("logsumexp", {inputs[0]}, outputs[0], [&]<typename T>() {
    return LogSumExpVjpOp<T>{cu::device_ptr<T>(lse), cu::device_ptr<T>(g)};
  });
}

} // namespace nuvec
