// nuvec: the CPU copy/cast kernel every other kernel can reuse to materialise an input of any
// layout (broadcast, transposed, negatively strided) as a row-contiguous buffer of any dtype,
// and the layout-flag helper the view kernels share.
#pragma once

#include "nuvec/array.h"

namespace nuvec::cpu {

/// Copies the elements of a `shape`-shaped region from src (element strides src_strides,
/// dtype src_dtype) to dst (strides dst_strides, dtype dst_dtype), converting with
/// cast_to's rules. Both pointers address the region's first element.
void copy_elements(
    const void* src,
    Dtype src_dtype,
    const Strides& src_strides,
    void* dst,
    Dtype dst_dtype,
    const Strides& dst_strides,
    const Shape& shape);

/// Writes `in` (any strides, any dtype; evaluated) converted to out's dtype into out as a
/// fresh row-contiguous buffer (allocated here when out has none). out has in's size; its
/// shape may differ (elements go in in's row-major order, so this also materialises a
/// reshape).
void copy_strided(const array& in, array& out);

/// Writes `in` broadcast to out's shape (NumPy rules, already validated) into out, as
/// copy_strided does.
void copy_broadcast(const array& in, array& out);

/// A row-contiguous copy of `in` with dtype `dtype` (an evaluated, detached array).
array contiguous_copy(const array& in, Dtype dtype);
array contiguous_copy(const array& in);

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

} // namespace nuvec::cpu
