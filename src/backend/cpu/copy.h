// nuvec: the CPU copy/cast kernel every other kernel can reuse to materialise an input of any
// layout (broadcast, transposed, negatively strided) as a row-contiguous buffer of any dtype,
// and those copies as the shared view evals take them.
#pragma once

#include "backend/common/views.h"
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

/// `in` itself when it is row-contiguous, else contiguous_copy(in): the rows a kernel that
/// addresses element i at i reads.
inline array as_row_contiguous(const array& in) {
  return in.flags().row_contiguous ? in : contiguous_copy(in);
}

/// Makes out share in's buffer when in can be donated (backend/common/donation.h) and the
/// buffer has no GPU copy that a host write would leave stale; returns whether it did. Ops
/// that rewrite part of their input call it before copying the input into a new buffer.
bool donate(const array& in, array& out);

/// The CPU's copies for the shared view evals (backend/common/views.h).
const ViewCopies& view_copies();

} // namespace nuvec::cpu
