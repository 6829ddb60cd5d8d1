// nuvec: the GPU kernels of the Unary family: the op's functor (the math layer,
// backend/common/math/unary.h, shared with the CPU) over the layout plan of elementwise.cuh.
// Paths: a dense input (any dimension order) runs one contiguous pass with 16-byte vector
// loads and stores and the output in the input's layout; anything else (broadcast, sliced
// with steps, negative strides, misaligned) walks a strided plan into a row-contiguous
// output. Ops that are the identity for a dtype (floor of an integer, conj of a real, ...)
// share the input's buffer instead of launching. Half types compute in float.
#include <type_traits>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/common/math/cast.h"
#include "backend/common/math/elementwise.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

using cu::kEwThreads;
using cu::kEwUnroll;

/// out[i] = op(in[i]) over n dense elements: kEwUnroll vectors of N elements per thread and
/// grid-stride step, then the n % N tail one element per thread. in and out are aligned to
/// their vectors' widths.
template <typename Op, typename T, typename O, int N>
__global__ void unary_vec_kernel(Op op, const T* in, O* out, int64_t n) {
  const int64_t nvec = n / N;
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kEwUnroll;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x * kEwUnroll + threadIdx.x; base < nvec;
       base += step) {
    cu::Vec<T, N> x[kEwUnroll];
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) x[u] = cu::load_vec<N>(in + j * N);
    }
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) {
        cu::Vec<O, N> y;
#pragma unroll
        for (int e = 0; e < N; ++e) y.v[e] = cu::store_as<O>(op(cu::to_acc(x[u].v[e])));
        cu::store_vec<N>(out + j * N, y);
      }
    }
  }
  int64_t t = nvec * N + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) out[t] = cu::store_as<O>(op(cu::to_acc(in[t])));
}

/// out[i] = op(in[offset(i)]) for the row-contiguous output's i in [0, n).
template <typename Op, typename T, typename O>
__global__ void unary_strided_kernel(
    Op op,
    const T* in,
    O* out,
    int64_t n,
    cu::StridedIndexer<1> ix) {
  const bool small = cu::small_index_space(n);
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    int64_t off[1];
    cu::strided_offsets(ix, i, small, off);
    out[i] = cu::store_as<O>(op(cu::to_acc(in[off[0]])));
  }
}

/// Whether op returns its input unchanged for element type T (so no kernel is needed).
template <typename Op, typename T>
constexpr bool is_identity() {
  namespace ew = math;
  if constexpr (std::is_same_v<Op, ew::Conjugate>) {
    return !cu::is_complex_device_v<T>;
  } else if constexpr (
      std::is_same_v<Op, ew::Floor> || std::is_same_v<Op, ew::Ceil> ||
      std::is_same_v<Op, ew::Round>) {
    return std::is_integral_v<T>;
  } else if constexpr (std::is_same_v<Op, ew::Abs>) {
    return std::is_unsigned_v<T>; // bool included
  } else if constexpr (
      std::is_same_v<Op, ew::Sign> || std::is_same_v<Op, ew::Negative> ||
      std::is_same_v<Op, ew::Square>) {
    return std::is_same_v<T, bool>;
  } else {
    return false;
  }
}

/// Evaluates op on `in` (element type T) into out: rejects dtypes the functor does not take
/// (the CPU kernel's error), shares the input for identities, else plans and launches.
template <typename T, typename Op>
void unary_gpu(Op op, const array& in, array& out, const char* name) {
  if constexpr (!std::is_invocable_v<Op, cu::device_acc_t<T>>) {
    throw_invalid_argument(name, "input dtype must be supported; got ", in.dtype(), ".");
  } else if constexpr (is_identity<Op, T>()) {
    out.copy_shared_buffer(in); // arrays are immutable: a view is the result
  } else {
    using K = math::kernel_elem_t<Op, T>; // same bits as T
    using O = math::result_elem_t<Op, K, 1>;
    std::vector<array> outs{out};
    auto plan = cu::plan_elementwise({in}, outs);
    if (plan.n == 0) return;
    O* dst = cu::output_ptr<O>(out);
    if (plan.flat) {
      const K* src = cu::device_ptr<K>(in);
      const bool scalar = plan.scalar[0];
      const int64_t n = scalar ? plan.n : static_cast<int64_t>(out.data_size());
      constexpr int N = cu::vec_elems<K, O>();
      if (!scalar && cu::is_aligned(src, N * sizeof(K)) && cu::is_aligned(dst, N * sizeof(O))) {
        unary_vec_kernel<Op, K, O, N>
            <<<cu::vec_grid(n, N), kEwThreads, 0, cu::stream()>>>(op, src, dst, n);
      } else {
        int64_t strides[1] = {scalar ? 0 : 1};
        unary_strided_kernel<Op, K, O>
            <<<cu::grid_for(size_t(n), kEwThreads), kEwThreads, 0, cu::stream()>>>(
                op, src, dst, n, cu::flat_indexer<1>(n, strides));
      }
      cu::check_launch(name);
      return;
    }
    auto ins = cu::fit_dims({in}, out.shape());
    auto ix = cu::make_indexer<1>(cu::input_plan(ins, out.shape()), name);
    unary_strided_kernel<Op, K, O>
        <<<cu::grid_for(size_t(plan.n), kEwThreads), kEwThreads, 0, cu::stream()>>>(
            op, cu::device_ptr<K>(ins[0]), dst, plan.n, ix);
    cu::check_launch(name);
  }
}

} // namespace

/// Unary on the GPU: every UnaryOp on the dtypes its CPU kernel supports.
void Unary::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  math::visit(op_, [&](auto op) {
    cu::dispatch_device_types(inputs[0].dtype(), [&]<typename T>() {
      unary_gpu<T>(op, inputs[0], outputs[0], name());
    });
  });
}

} // namespace nuvec
