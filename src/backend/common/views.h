// nuvec: the view families' evals, one text for both backends. A view only rewrites the
// layout of its input's buffer, wherever that buffer lives (host or device), so the CPU and
// CUDA evals of Reshape, Transpose, Broadcast, Squeeze, ExpandDims, View, AsStrided, Copy,
// StopGradient, Depends and Contiguous are these functions; where a layout cannot be
// expressed with strides they copy through the node's backend (ViewCopies: cpu:: or cu::).
// Also the layout rules every view uses (layout_flags, view_layout: MLX's check_contiguity).
#pragma once

#include <cstddef>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// Row/column contiguity of a dense layout, read from its strides (size-1 dimensions are
/// ignored); `contiguous` is passed through, since permuting or regrouping dimensions does
/// not change whether the elements fill their buffer region.
array::Flags layout_flags(const Shape& shape, const Strides& strides, bool contiguous);

/// Flags and data size of a view with this shape and strides (MLX's check_contiguity):
/// row/column contiguity, and "contiguous" when the distinct elements fill a gap-free block
/// from the first one, broadcast (stride-0) dimensions ignored; data_size is that block's
/// length, or the span the view addresses when there are gaps.
struct ViewLayout {
  array::Flags flags;
  size_t data_size;
};
ViewLayout view_layout(const Shape& shape, const Strides& strides);

/// The copies a view falls back on, made by the node's backend (cpu::contiguous_copy and
/// cpu::copy_strided, or their cu:: counterparts).
struct ViewCopies {
  /// A row-contiguous copy of `in` (kept alive as long as the node needs it).
  array (*contiguous_copy)(const array& in);
  /// `in` written into out as a fresh row-contiguous buffer (in's row-major order).
  void (*copy_strided)(const array& in, array& out);
};

namespace views {

/// out shares in's buffer with its layout (Copy, StopGradient, each output of Depends).
void share(const array& in, array& out);
/// Reshape: a view when the layout allows (NumPy's no-copy test, reshape.h), else a copy.
void reshape(const array& in, array& out, const ViewCopies& copies);
/// Transpose by `axes`.
void transpose(const array& in, array& out, const std::vector<int>& axes);
/// Broadcast to out's shape (MLX's broadcast flags).
void broadcast(const array& in, array& out);
/// Squeeze the (sorted) `axes`.
void squeeze(const array& in, array& out, const std::vector<int>& axes);
/// ExpandDims at the (sorted, output) `axes`.
void expand_dims(const array& in, array& out, const std::vector<int>& axes);
/// View (bit reinterpretation): in place for a dense row-major input at its buffer's start.
void bits(const array& in, array& out, const ViewCopies& copies);
/// AsStrided: (shape, strides, offset) over the input's row-major element order.
void as_strided(
    const array& in, array& out, const Strides& strides, size_t offset, const ViewCopies& copies);
/// Contiguous: shares a row-contiguous (or, when allowed, column-contiguous) input, else copies.
void contiguous(const array& in, array& out, bool allow_col_major, const ViewCopies& copies);

} // namespace views

} // namespace nuvec
