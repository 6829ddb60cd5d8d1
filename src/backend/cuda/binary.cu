// nuvec: the GPU kernels of the Binary and DivMod families: the op's functor
// (the math layer, backend/common/math/binary.h, shared with the CPU) over the layout
// plan of elementwise.cuh. Paths: inputs sharing one dense layout, or broadcast scalars
// (0-d operands, which Binary keeps unbroadcast, or stride-0 broadcasts), run one contiguous
// pass with 16-byte vector loads and stores, a scalar operand read once per thread; anything
// else (transposed against each other, broadcast along some axes, sliced with steps,
// misaligned) walks a strided plan into a row-contiguous output. Half types compute in float.
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

/// The Binary element rule: out = op(a, b), stored as O.
template <typename Op, typename O>
struct BinaryBody {
  Op op;
  template <typename C>
  __device__ __forceinline__ void operator()(C a, C b, O& out) const {
    out = cu::store_as<O>(op(a, b));
  }
};

/// The DivMod element rule: q = floor_divide(a, b), r = remainder(a, b), both stored as O.
template <typename O>
struct DivModBody {
  template <typename C>
  __device__ __forceinline__ void operator()(C a, C b, O& q, O& r) const {
    q = cu::store_as<O>(math::FloorDivide{}(a, b));
    r = cu::store_as<O>(math::Remainder{}(a, b));
  }
};

/// Output pointers of a binary kernel: one (Binary) or two (DivMod) arrays of O.
template <typename O, int M>
struct Outs {
  O* p[M];
};

/// Applies body to compute values a, b and stores its M results at element i of outs.
template <typename Body, typename O, typename C>
__device__ __forceinline__ void apply_at(const Body& body, C a, C b, const Outs<O, 1>& o, int64_t i) {
  body(a, b, o.p[0][i]);
}
template <typename Body, typename O, typename C>
__device__ __forceinline__ void apply_at(const Body& body, C a, C b, const Outs<O, 2>& o, int64_t i) {
  body(a, b, o.p[0][i], o.p[1][i]);
}

/// Dense pass over n elements: kEwUnroll vectors of N per thread and grid-stride step, then
/// the n % N tail. A scalar operand (sa / sb) is read once; the others and the outputs are
/// aligned to their vector widths.
template <typename Body, typename T, typename O, int M, int N>
__global__ void binary_vec_kernel(
    Body body,
    const T* a,
    const T* b,
    Outs<O, M> outs,
    int64_t n,
    bool sa,
    bool sb) {
  using C = cu::device_acc_t<T>;
  const int64_t nvec = n / N;
  const C a0 = sa ? cu::to_acc(a[0]) : C{};
  const C b0 = sb ? cu::to_acc(b[0]) : C{};
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kEwUnroll;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x * kEwUnroll + threadIdx.x; base < nvec;
       base += step) {
    cu::Vec<T, N> va[kEwUnroll], vb[kEwUnroll];
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) {
        if (!sa) va[u] = cu::load_vec<N>(a + j * N);
        if (!sb) vb[u] = cu::load_vec<N>(b + j * N);
      }
    }
#pragma unroll
    for (int u = 0; u < kEwUnroll; ++u) {
      int64_t j = base + int64_t(u) * blockDim.x;
      if (j < nvec) {
        cu::Vec<O, N> r[M];
#pragma unroll
        for (int e = 0; e < N; ++e) {
          C x = sa ? a0 : cu::to_acc(va[u].v[e]);
          C y = sb ? b0 : cu::to_acc(vb[u].v[e]);
          if constexpr (M == 1) body(x, y, r[0].v[e]);
          else body(x, y, r[0].v[e], r[1].v[e]);
        }
#pragma unroll
        for (int m = 0; m < M; ++m) cu::store_vec<N>(outs.p[m] + j * N, r[m]);
      }
    }
  }
  int64_t t = nvec * N + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) apply_at(body, sa ? a0 : cu::to_acc(a[t]), sb ? b0 : cu::to_acc(b[t]), outs, t);
}

/// Strided pass: element i of the (row-contiguous, or flat) outputs from the inputs at the
/// indexer's offsets.
template <typename Body, typename T, typename O, int M>
__global__ void binary_strided_kernel(
    Body body,
    const T* a,
    const T* b,
    Outs<O, M> outs,
    int64_t n,
    cu::StridedIndexer<2> ix) {
  const bool small = cu::small_index_space(n);
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    int64_t off[2];
    cu::strided_offsets(ix, i, small, off);
    apply_at(body, cu::to_acc(a[off[0]]), cu::to_acc(b[off[1]]), outs, i);
  }
}

/// Plans the node (allocating its outputs), picks the path and launches. T is the kernel
/// element type of the inputs, O of the M outputs.
template <typename T, typename O, int M, typename Body>
void launch_binary(
    const Body& body,
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    const char* name) {
  auto plan = cu::plan_elementwise(inputs, outputs);
  if (plan.n == 0) return;
  Outs<O, M> outs;
  for (int m = 0; m < M; ++m) outs.p[m] = cu::output_ptr<O>(outputs[m]);
  if (plan.flat) {
    const T* a = cu::device_ptr<T>(inputs[0]);
    const T* b = cu::device_ptr<T>(inputs[1]);
    const bool sa = plan.scalar[0], sb = plan.scalar[1];
    const int64_t n = sa && sb ? plan.n : static_cast<int64_t>(outputs[0].data_size());
    constexpr int N = cu::vec_elems<T, O>();
    bool aligned = !(sa && sb);
    aligned = aligned && (sa || cu::is_aligned(a, N * sizeof(T)));
    aligned = aligned && (sb || cu::is_aligned(b, N * sizeof(T)));
    for (int m = 0; m < M; ++m) aligned = aligned && cu::is_aligned(outs.p[m], N * sizeof(O));
    if (aligned) {
      binary_vec_kernel<Body, T, O, M, N>
          <<<cu::vec_grid(n, N), kEwThreads, 0, cu::stream()>>>(body, a, b, outs, n, sa, sb);
    } else {
      int64_t strides[2] = {sa ? 0 : 1, sb ? 0 : 1};
      binary_strided_kernel<Body, T, O, M>
          <<<cu::grid_for(size_t(n), kEwThreads), kEwThreads, 0, cu::stream()>>>(
              body, a, b, outs, n, cu::flat_indexer<2>(n, strides));
    }
    cu::check_launch(name);
    return;
  }
  auto ins = cu::fit_dims(inputs, outputs[0].shape());
  auto ix = cu::make_indexer<2>(cu::input_plan(ins, outputs[0].shape()), name);
  binary_strided_kernel<Body, T, O, M>
      <<<cu::grid_for(size_t(plan.n), kEwThreads), kEwThreads, 0, cu::stream()>>>(
          body, cu::device_ptr<T>(ins[0]), cu::device_ptr<T>(ins[1]), outs, plan.n, ix);
  cu::check_launch(name);
}

/// Evaluates op on inputs of element type T into out, or rejects the dtype as the CPU
/// kernel does. Signed integers run on the unsigned kernel when the op is sign-free.
template <typename T, typename Op>
void binary_gpu(Op op, const std::vector<array>& inputs, array& out, const char* name) {
  using C = cu::device_acc_t<T>;
  if constexpr (!std::is_invocable_v<Op, C, C>) {
    throw_invalid_argument(name, "input dtype must be supported; got ", inputs[0].dtype(), ".");
  } else {
    using K = math::kernel_elem_t<Op, T>; // same bits as T
    using O = math::result_elem_t<Op, K, 2>;
    std::vector<array> outs{out};
    launch_binary<K, O, 1>(BinaryBody<Op, O>{op}, inputs, outs, name);
  }
}

} // namespace

/// Binary on the GPU: every BinaryOp on the dtypes its CPU kernel supports; 0-d operands
/// are read as scalars.
void Binary::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  math::visit(op_, [&](auto op) {
    cu::dispatch_device_types(inputs[0].dtype(), [&]<typename T>() {
      binary_gpu<T>(op, inputs, outputs[0], name());
    });
  });
}

/// DivMod on the GPU: floor_divide and remainder of real inputs in one pass, two outputs.
void DivMod::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cu::dispatch_device_types(inputs[0].dtype(), [&]<typename T>() {
    using C = cu::device_acc_t<T>;
    if constexpr (!std::is_invocable_v<math::FloorDivide, C, C>) {
      throw_invalid_argument("divmod", "input dtype must be real; got ", inputs[0].dtype(), ".");
    } else {
      launch_binary<T, T, 2>(DivModBody<T>{}, inputs, outputs, "divmod");
    }
  });
}

} // namespace nuvec
