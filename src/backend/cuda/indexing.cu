// nuvec: GPU kernels of GatherAxis (take_along_axis) and ScatterAxis (put_along_axis,
// scatter_add_axis), as the CPU's src/backend/cpu/indexing.cpp: indices of any integer dtype
// and layout, negative ones counting from the end. An index outside [-n, n) is skipped (no
// memory outside the arrays is touched) and raised as the CPU raises it: std::out_of_range
// at the next eval, the output zeroed (index_errors.cuh).
#include <cstdint>
#include <optional>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/index_utils.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/scatter_updates.cuh"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

using cu::IndexType;
using cu::StridedIndexer;

constexpr unsigned kThreads = 256;

/// out[e] = a[a_off(e) + k * a_stride] with k = indices[idx_off(e)] (negative: from the
/// end), for out's row-major e; ix walks out's shape with a's strides (0 along axis) and the
/// indices' strides. An index outside [-n, n) is recorded in err and gives 0.
template <typename U>
__global__ void gather_axis_kernel(
    const U* a,
    const void* idx,
    IndexType itype,
    StridedIndexer<2> ix,
    int64_t n,
    int64_t a_stride,
    U* out,
    int64_t total,
    cu::IndexError* err,
    int axis) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t off[2];
    ix.offsets(e, off);
    int64_t k = cu::load_index(idx, off[1], itype);
    if (!cu::wrap_index(k, n)) {
      cu::record_index_error(err, k, n, axis);
      out[e] = U(0);
      continue;
    }
    out[e] = a[off[0] + k * a_stride];
  }
}

/// Where update e of put_along_axis / scatter_add_axis lands: ix walks the indices' shape
/// with the indices', updates' and output's strides (the output's 0 along axis); the index
/// value picks the output position along axis (outside [-n, n): recorded in err, skipped).
struct AxisScatterAddr {
  StridedIndexer<3> ix;
  const void* idx;
  IndexType itype;
  int64_t n;        // a's length along axis
  int64_t o_stride; // out's row-major stride along axis
  cu::IndexError* err;
  int axis;

  __device__ __forceinline__ bool locate(int64_t e, int64_t& o, int64_t& u) const {
    int64_t off[3];
    ix.offsets(e, off);
    int64_t k = cu::load_index(idx, off[0], itype);
    if (!cu::wrap_index(k, n)) {
      cu::record_index_error(err, k, n, axis);
      return false;
    }
    o = off[2] + k * o_stride;
    u = off[1];
    return true;
  }
};

} // namespace

/// take_along_axis: inputs (a, indices), a and indices equal outside axis; out has the
/// indices' shape and a's dtype.
void GatherAxis::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  array& out = outputs[0];
  const IndexType itype = cu::index_type(idx.dtype(), "take_along_axis");
  Strides a_strides = a.strides();
  const int64_t a_stride = a_strides[axis_];
  a_strides[axis_] = 0; // the index supplies the position along axis
  auto plan = collapse_dims(out.shape(), {a_strides, idx.strides()});
  if (plan.shape.size() > size_t(cu::kMaxDims)) {
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  void* dst = cu::alloc_output(out);
  const int64_t total = static_cast<int64_t>(out.size());
  if (total == 0) return;
  const int64_t n = a.shape(axis_);
  const auto ix = cu::make_indexer<2>(plan, "take_along_axis");
  cu::IndexErrorCheck check("take_along_axis", cu::index_may_be_out_of_range(idx.dtype(), n));
  cu::dispatch_bits(out.itemsize(), [&]<typename U>() {
    gather_axis_kernel<U><<<cu::grid_for(size_t(total), kThreads), kThreads, 0, cu::stream()>>>(
        cu::device_ptr<U>(a), cu::device_ptr(idx), itype, ix, n, a_stride, static_cast<U*>(dst),
        total, check.device(), axis_);
    cu::check_launch("gather_axis_kernel");
  });
  check.finish(dst, out.nbytes());
}

/// put_along_axis (None: the last of duplicate indices along the axis wins) and
/// scatter_add_axis (Sum: duplicates accumulate; bool: or): inputs (a, indices, updates),
/// indices and updates of one shape, a's outside axis; out has a's shape and dtype.
void ScatterAxis::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  array& out = outputs[0];
  const char* op = reduce_ == ScatterReduce::None ? "put_along_axis" : "scatter_add_axis";
  const IndexType itype = cu::index_type(idx.dtype(), op);
  const Strides rs = row_strides(a.shape());
  Strides o_lines = rs;
  o_lines[axis_] = 0; // the index supplies the position along axis
  auto plan = collapse_dims(idx.shape(), {idx.strides(), upd.strides(), o_lines});
  if (plan.shape.size() > size_t(cu::kMaxDims)) {
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  cu::copy_elements(cu::device_ptr(a), a.dtype(), a.strides(), dst, out.dtype(), rs, a.shape());
  if (idx.size() == 0) return;
  cu::IndexErrorCheck check(op, cu::index_may_be_out_of_range(idx.dtype(), a.shape(axis_)));
  AxisScatterAddr addr{
      cu::make_indexer<3>(plan, op), cu::device_ptr(idx), itype, a.shape(axis_), rs[axis_],
      check.device(), axis_};
  std::optional<cu::ScatterOp> combine;
  if (reduce_ == ScatterReduce::Sum) combine = cu::ScatterOp::Sum;
  // Two updates of one line can land on one position only when a line has several.
  const bool may_collide = idx.shape(axis_) > 1;
  cu::scatter_updates(
      addr, static_cast<int64_t>(idx.size()), cu::device_ptr(upd), dst, out.dtype(),
      static_cast<int64_t>(out.size()), combine, may_collide);
  check.finish(dst, out.nbytes());
}

} // namespace nuvec
