// nuvec: the view families' evals (views.h).
#include "backend/common/views.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "backend/common/reshape.h"
#include "backend/common/strided.h"

namespace nuvec {

array::Flags layout_flags(const Shape& shape, const Strides& strides, bool contiguous) {
  bool row = true, col = true;
  int64_t expect = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    row &= strides[i] == expect;
    expect *= shape[i];
  }
  expect = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    col &= strides[i] == expect;
    expect *= shape[i];
  }
  array::Flags f{};
  f.row_contiguous = row;
  f.col_contiguous = col;
  f.contiguous = contiguous || row || col;
  return f;
}

ViewLayout view_layout(const Shape& shape, const Strides& strides) {
  size_t size = 1;
  for (auto d : shape) size *= d;
  if (size == 0) return {{true, true, true}, 0};
  std::vector<int> dims; // the dimensions that move through memory
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] != 1 && strides[i] != 0) dims.push_back(i);
  }
  auto dense_in_order = [&](auto first, auto last) {
    int64_t expect = 1;
    for (auto it = first; it != last; ++it) {
      if (strides[*it] != expect) return false; // a negative stride runs backwards: not dense
      expect *= shape[*it];
    }
    return true;
  };
  auto flags_in_order = [&](auto first, auto last) { // every size > 1 dimension, in order
    int64_t expect = 1;
    for (auto it = first; it != last; ++it) {
      if (shape[*it] == 1) continue;
      if (strides[*it] != expect) return false;
      expect *= shape[*it];
    }
    return true;
  };
  std::vector<int> all(shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  bool row = flags_in_order(all.rbegin(), all.rend());
  bool col = flags_in_order(all.begin(), all.end());
  std::vector<int> by_stride = dims;
  std::stable_sort(by_stride.begin(), by_stride.end(), [&](int a, int b) {
    return strides[a] < strides[b];
  });
  bool dense = dense_in_order(by_stride.begin(), by_stride.end());
  size_t distinct = 1;
  int64_t span = 1;
  for (int i : dims) {
    distinct *= shape[i];
    span += (shape[i] - 1) * std::abs(strides[i]);
  }
  return {{dense, row, col}, dense ? distinct : static_cast<size_t>(span)};
}

namespace {

// Makes out a view of in with `strides`, flags recomputed from them.
void share_view(const array& in, array& out, const Strides& strides) {
  auto flags = layout_flags(out.shape(), strides, in.flags().contiguous);
  size_t data_size =
      (flags.row_contiguous || flags.col_contiguous) ? out.size() : in.data_size();
  out.copy_shared_buffer(in, strides, flags, data_size);
}

} // namespace

namespace views {

void share(const array& in, array& out) {
  out.copy_shared_buffer(in);
}

void reshape(const array& in, array& out, const ViewCopies& copies) {
  if (in.flags().row_contiguous) {
    share_view(in, out, row_strides(out.shape()));
  } else if (auto strides = reshape_strides(in, out.shape())) {
    share_view(in, out, *strides);
  } else {
    copies.copy_strided(in, out);
  }
}

void transpose(const array& in, array& out, const std::vector<int>& axes) {
  Strides strides(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) strides[i] = in.strides()[axes[i]];
  share_view(in, out, strides);
}

void broadcast(const array& in, array& out) {
  Strides strides = broadcast_strides(in, out.shape());
  if (out.size() == 0) {
    out.copy_shared_buffer(in, strides, array::Flags{true, true, true}, 0);
  } else if (out.size() > in.size()) {
    // Repeated elements are never row or column contiguous; the distinct ones still fill
    // the input's block when they did (MLX's broadcast flags).
    array::Flags flags = in.flags();
    flags.row_contiguous = false;
    flags.col_contiguous = false;
    out.copy_shared_buffer(in, strides, flags, in.data_size());
  } else {
    share_view(in, out, strides);
  }
}

void squeeze(const array& in, array& out, const std::vector<int>& axes) {
  Strides strides;
  size_t j = 0;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (j < axes.size() && axes[j] == static_cast<int>(i)) {
      ++j;
    } else {
      strides.push_back(in.strides()[i]);
    }
  }
  // Removing size-1 dimensions changes no element's address: the flags carry over.
  out.copy_shared_buffer(in, strides, in.flags(), in.data_size());
}

void expand_dims(const array& in, array& out, const std::vector<int>& axes) {
  const int nd = static_cast<int>(out.ndim());
  Strides strides(nd, 1);
  std::vector<bool> inserted(nd, false);
  for (int a : axes) inserted[a] = true;
  int src = static_cast<int>(in.ndim()) - 1;
  for (int i = nd - 1; i >= 0; --i) {
    if (inserted[i]) {
      // Any stride is valid for a size-1 axis; the row-major one keeps layouts readable.
      strides[i] = i + 1 < nd ? strides[i + 1] * out.shape()[i + 1] : 1;
    } else {
      strides[i] = in.strides()[src--];
    }
  }
  out.copy_shared_buffer(in, strides, in.flags(), in.data_size());
}

void bits(const array& in, array& out, const ViewCopies& copies) {
  // Bits are reinterpreted in place only for a dense row-major input starting at its
  // buffer (offsets are counted in the input's elements); anything else is copied first.
  array src = (in.flags().row_contiguous && in.offset() == 0) ? in : copies.contiguous_copy(in);
  auto flags = layout_flags(out.shape(), row_strides(out.shape()), true);
  out.copy_shared_buffer(src, row_strides(out.shape()), flags, out.size());
}

void as_strided(
    const array& in, array& out, const Strides& strides, size_t offset, const ViewCopies& copies) {
  // Strides and offset address the input's row-major element order.
  array src = in.flags().row_contiguous ? in : copies.contiguous_copy(in);
  auto layout = view_layout(out.shape(), strides);
  out.copy_shared_buffer(
      src, strides, layout.flags, out.size() == 0 ? 0 : layout.data_size, static_cast<int64_t>(offset));
}

void contiguous(const array& in, array& out, bool allow_col_major, const ViewCopies& copies) {
  const bool keep = in.flags().row_contiguous || (allow_col_major && in.flags().col_contiguous);
  if (keep) {
    out.copy_shared_buffer(in);
  } else {
    copies.copy_strided(in, out);
  }
}

} // namespace views

} // namespace nuvec
