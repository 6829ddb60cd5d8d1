// nuvec: the CPU copy/cast kernel (copy_strided and friends) and the eval_cpu of the copy
// family (AsType, View, Copy, Contiguous, StopGradient, Depends, AsStrided, Full, Arange).
// Semantics follow MLX's copy primitives; the loop is a collapsed strided walk.
#include "backend/cpu/copy.h"

#include "backend/common/donation.h"

#include <cmath>
#include <cstring>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "primitives/primitives.h"

namespace nuvec::cpu {

namespace {

template <typename In, typename Out>
void copy_loop(const In* src, const Strides& ss, Out* dst, const Strides& ds, const Shape& shape) {
  StridedPlan plan = collapse_dims(shape, {ss, ds});
  for_each_run<2>(plan, [&](const int64_t* off, int64_t n, const int64_t* inner) {
    const In* s = src + off[0];
    Out* d = dst + off[1];
    if constexpr (std::is_same_v<In, Out>) {
      if (inner[0] == 1 && inner[1] == 1) {
        std::memcpy(d, s, n * sizeof(In));
        return;
      }
    }
    if (inner[0] == 1 && inner[1] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = cast_to<Out>(s[i]);
    } else if (inner[0] == 0) {
      Out v = cast_to<Out>(s[0]);
      for (int64_t i = 0; i < n; ++i) d[i * inner[1]] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * inner[1]] = cast_to<Out>(s[i * inner[0]]);
    }
  });
}

size_t shape_size(const Shape& shape) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return n;
}

void ensure_buffer(array& out) {
  if (!out.data_shared_ptr()) out.set_data(allocator::malloc(out.nbytes()));
}

} // namespace

void copy_elements(
    const void* src,
    Dtype src_dtype,
    const Strides& src_strides,
    void* dst,
    Dtype dst_dtype,
    const Strides& dst_strides,
    const Shape& shape) {
  if (shape_size(shape) == 0) return;
  dispatch_all_types(src_dtype, [&]<typename In>() {
    dispatch_all_types(dst_dtype, [&]<typename Out>() {
      copy_loop(
          static_cast<const In*>(src), src_strides, static_cast<Out*>(dst), dst_strides, shape);
    });
  });
}

void copy_strided(const array& in, array& out) {
  ensure_buffer(out);
  // Written in in's row-major order, so out may be a reshape of in.
  copy_elements(
      in.raw_data(), in.dtype(), in.strides(), out.raw_data(), out.dtype(),
      row_strides(in.shape()), in.shape());
}

void copy_broadcast(const array& in, array& out) {
  ensure_buffer(out);
  copy_elements(
      in.raw_data(), in.dtype(), broadcast_strides(in, out.shape()), out.raw_data(),
      out.dtype(), row_strides(out.shape()), out.shape());
}

array contiguous_copy(const array& in, Dtype dtype) {
  array out(allocator::malloc(in.size() * size_of(dtype)), in.shape(), dtype);
  copy_strided(in, out);
  return out;
}

bool donate(const array& in, array& out) {
  {
    auto data = in.data_shared_ptr(); // released before is_donatable counts the owners
    if (!data || !data->buffer.ptr() || data->device.load()) return false;
  }
  if (!donation_layout_ok(in, out) || !in.is_donatable()) return false;
  out.copy_shared_buffer(in);
  return true;
}

array contiguous_copy(const array& in) {
  return contiguous_copy(in, in.dtype());
}

const ViewCopies& view_copies() {
  static const ViewCopies copies{
      static_cast<array (*)(const array&)>(&contiguous_copy), &copy_strided};
  return copies;
}

} // namespace nuvec::cpu

