// nuvec: CPU kernels of GatherAxis (take_along_axis) and ScatterAxis (put_along_axis,
// scatter_add_axis). Negative indices count from the end; an index outside [-n, n) throws
// std::out_of_range naming the op (index_range.h).
#include <stdexcept>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "backend/cpu/index_range.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Calls f(offsets) for every position of the dims other than axis of `shape`, with one
// element offset per operand (strides given for all dims of `shape`).
template <size_t N, typename F>
void for_each_line(const Shape& shape, int axis, const std::vector<Strides>& strides, F&& f) {
  Shape s;
  std::vector<Strides> st(N);
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d == axis) continue;
    s.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
  }
  auto plan = collapse_dims(s, st);
  for_each_run<N>(plan, [&](const int64_t* off, int64_t n, const int64_t* inner) {
    int64_t o[N];
    for (int64_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < N; ++k) o[k] = off[k] + i * inner[k];
      f(static_cast<const int64_t*>(o));
    }
  });
}

// Calls f.template operator()<I>() for an integer index dtype.
template <typename F>
void dispatch_index_type(Dtype dtype, F&& f) {
  dispatch_all_types(dtype, [&]<typename I>() {
    if constexpr (is_integral_v<I>) {
      f.template operator()<I>();
    } else {
      throw std::invalid_argument("[GatherAxis/ScatterAxis] indices must have an integer dtype.");
    }
  });
}

// A copy of `in` (any layout) into row-contiguous out of the same shape and dtype.
void copy_to_row_contiguous(const array& in, array& out) {
  if (out.size() == 0) return;
  auto plan = collapse_dims(in.shape(), {in.strides(), row_strides(in.shape())});
  dispatch_all_types(in.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(in.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    for_each_run<2>(plan, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) dst[off[1] + i * st[1]] = src[off[0] + i * st[0]];
    });
  });
}

} // namespace

void GatherAxis::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = a.shape()[axis_];
  const int64_t m = idx.shape()[axis_];
  const int64_t a_st = a.strides()[axis_], i_st = idx.strides()[axis_];
  auto out_strides = row_strides(out.shape());
  const int64_t o_st = out_strides[axis_];
  dispatch_all_types(a.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(a.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    dispatch_index_type(idx.dtype(), [&]<typename I>() {
      const I* ip = static_cast<const I*>(idx.raw_data());
      for_each_line<3>(
          out.shape(), axis_, {a.strides(), idx.strides(), out_strides}, [&](const int64_t* off) {
            for (int64_t j = 0; j < m; ++j) {
              int64_t k = cpu::checked_index(
                  cpu::index_value(ip[off[1] + j * i_st]), n, axis_, "take_along_axis");
              dst[off[2] + j * o_st] = src[off[0] + k * a_st];
            }
          });
    });
  });
}

void ScatterAxis::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  copy_to_row_contiguous(a, out);
  if (idx.size() == 0) return;
  const int64_t n = a.shape()[axis_];
  const int64_t m = idx.shape()[axis_];
  auto out_strides = row_strides(out.shape());
  // Lines are walked over the updates' shape; out's stride along axis is applied per index.
  Strides o_lines = out_strides;
  const int64_t o_st = out_strides[axis_];
  const int64_t i_st = idx.strides()[axis_], u_st = upd.strides()[axis_];
  const char* op = reduce_ == ScatterReduce::None ? "put_along_axis" : "scatter_add_axis";
  dispatch_all_types(a.dtype(), [&]<typename T>() {
    T* dst = static_cast<T*>(out.raw_data());
    const T* up = static_cast<const T*>(upd.raw_data());
    dispatch_index_type(idx.dtype(), [&]<typename I>() {
      const I* ip = static_cast<const I*>(idx.raw_data());
      for_each_line<3>(
          idx.shape(), axis_, {idx.strides(), upd.strides(), o_lines}, [&](const int64_t* off) {
            // In order along the axis, so the last of duplicate indices wins for None.
            for (int64_t j = 0; j < m; ++j) {
              int64_t k =
                  cpu::checked_index(cpu::index_value(ip[off[0] + j * i_st]), n, axis_, op);
              T& slot = dst[off[2] + k * o_st];
              switch (reduce_) {
                case ScatterReduce::None: slot = up[off[1] + j * u_st]; break;
                case ScatterReduce::Sum:
                  if constexpr (std::is_same_v<T, bool>) {
                    slot = slot || up[off[1] + j * u_st];
                  } else {
                    slot = static_cast<T>(slot + up[off[1] + j * u_st]);
                  }
                  break;
              }
            }
          });
    });
  });
}

} // namespace nuvec
