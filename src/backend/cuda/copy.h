// nuvec: the GPU copy/cast kernels every other CUDA kernel can reuse to materialise an input
// of any layout as a row-contiguous device buffer of any dtype (the counterparts of
// src/backend/cpu/copy.h, with the same contracts). Implemented in copy.cu.
#pragma once

#include "backend/common/strided.h"
#include "backend/common/views.h"
#include "nuvec/array.h"

namespace nuvec::cu {

/// Copies a `shape`-shaped region from src (element strides src_strides, dtype src_dtype)
/// to dst (dst_strides, dst_dtype), both device pointers to the region's first element,
/// converting with cast_to's rules (NumPy's), on the current stream.
void copy_elements(
    const void* src,
    Dtype src_dtype,
    const Strides& src_strides,
    void* dst,
    Dtype dst_dtype,
    const Strides& dst_strides,
    const Shape& shape);

/// Writes `in` (any strides and dtype) converted to out's dtype into out as a fresh
/// row-contiguous device buffer (allocated here when out has none). out has in's size; its
/// shape may differ (elements in in's row-major order, so this also materialises reshapes).
void copy_strided(const array& in, array& out);

/// Writes `in` broadcast to out's shape into out, as copy_strided does.
void copy_broadcast(const array& in, array& out);

/// Copies over a merged strided plan (strides[0] the source's, strides[1] the
/// destination's, in elements) from src to dst, device pointers, converting with cast_to's
/// rules: cudaMemcpyAsync when both are dense and of one dtype, else a kernel.
void copy_plan(const void* src, Dtype src_dtype, void* dst, Dtype dst_dtype, const StridedPlan& plan);

/// The GPU's copies for the shared view evals (backend/common/views.h).
const ViewCopies& view_copies();

/// A row-contiguous device copy of `in` with dtype `dtype` (an evaluated, detached array).
array contiguous_copy(const array& in, Dtype dtype);
array contiguous_copy(const array& in);

/// `in` itself when it is row-contiguous, else contiguous_copy(in) (kept alive until the
/// node's kernels have run).
inline array as_row_contiguous(const array& in) {
  return in.flags().row_contiguous ? in : contiguous_copy(in);
}

} // namespace nuvec::cu
