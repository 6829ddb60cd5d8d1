// nuvec: CPU kernels of Rope and NormRope (rules and fallbacks in src/fast/rope.cpp and
// src/fast/norm_rope.cpp). One loop over the rows of the plan (src/backend/common/rope_plan.h),
// split over the thread pool: NormRope's statistic in double (as the RmsNorm kernel's), each
// element normalised, then each pair rotated by its angle, with the element rules the CUDA
// kernels share (src/backend/common/math/rope.h), rounding where the fallback graphs round.
// Non-contiguous inputs are copied first; NormRope's cache is copied around the rows it writes.
#include <cstdint>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math/rope.h"
#include "backend/common/rope_plan.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/fast/rows.h"
#include "fast/norm_rope.h"
#include "fast/rope.h"

namespace nuvec {

namespace {

/// Inputs of the loop beside x: the weight (null: none), the frequencies (null: from the
/// base) and the offsets (null: the plan's one offset), all row-contiguous.
struct RopeOperands {
  const void* w = nullptr;
  const float* freqs = nullptr;
  const int32_t* offsets = nullptr;
};

/// Writes the rows of the plan from x (row-contiguous) into y (the output's buffer).
void rope_rows(const RopePlan& p, const array& x, void* y, const RopeOperands& in) {
  // The inverse frequencies once (they depend on the pair only).
  std::vector<float> inv(static_cast<size_t>(p.half));
  for (int i = 0; i < p.half; ++i) inv[i] = math::rope_inv_freq(i, p.log_base_over_half, in.freqs);
  const int64_t step = p.traditional ? 2 : 1, second = p.traditional ? 1 : p.half;
  dispatch_float_types(x.dtype(), p.normalise ? "norm_rope" : "rope", [&]<typename T>() {
    using A = acc_t<T>;
    const T* src = static_cast<const T*>(x.raw_data());
    const T* w = static_cast<const T*>(in.w);
    T* dst = static_cast<T*>(y);
    const int64_t d = p.d;
    // Every head of a (batch, position) shares its angles: with several heads, cos and sin
    // of each (offset group, position, pair) are computed once into a table (1/heads of the
    // input's size) instead of once a row. The table's entries are the same rule's values.
    const int64_t groups = p.per_batch_offset ? p.batch : 1;
    const bool tabled = p.heads > 1;
    std::vector<math::RopeCosSin<T>> table;
    if (tabled) {
      table.resize(static_cast<size_t>(groups * p.t_len * p.half));
      cpu::parallel_rows(groups * p.t_len, p.half, [&](int64_t gt) {
        const int64_t g = gt / p.t_len, t = gt % p.t_len;
        const int32_t offset = in.offsets ? in.offsets[g] : p.offset;
        const float position = math::rope_position(t, offset, p.scale);
        for (int i = 0; i < p.half; ++i) table[gt * p.half + i] = math::rope_cos_sin<T>(position, inv[i]);
      });
    }
    cpu::parallel_rows(p.rows(), d, [&](int64_t r) {
      const int64_t t = r % p.t_len, bm = r / p.t_len;
      const T* xr = src + r * d;
      T* yr = dst + p.out_row(bm / p.heads, bm % p.heads, t) * d;
      A inv_rms = A(1);
      if (p.normalise) {
        const double ss = cpu::sum_of(d, [&](int64_t j) {
          return static_cast<double>(A(xr[j])) * static_cast<double>(A(xr[j]));
        });
        inv_rms = static_cast<A>(math::rms_inverse(ss, d, p.eps));
      }
      auto value = [&](int64_t j) {
        return p.normalise ? math::rms_normalised(xr[j], inv_rms, w ? w[j] : xr[j], w != nullptr) : xr[j];
      };
      for (int64_t j = p.dims; j < d; ++j) yr[j] = value(j);
      const int64_t b = bm / p.heads;
      const int32_t offset = in.offsets ? in.offsets[p.per_batch_offset ? b : 0] : p.offset;
      const float position = math::rope_position(t, offset, p.scale);
      const math::RopeCosSin<T>* angles = tabled ? &table[((p.per_batch_offset ? b : 0) * p.t_len + t) * p.half] : nullptr;
      for (int i = 0; i < p.half; ++i) {
        const int64_t j1 = i * step, j2 = second + i * step;
        T x1 = value(j1), x2 = value(j2);
        math::rope_rotate(x1, x2, tabled ? angles[i] : math::rope_cos_sin<T>(position, inv[i]), p.forward);
        yr[j1] = x1;
        yr[j2] = x2;
      }
    });
  });
}

} // namespace

void Rope::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::as_row_contiguous(inputs[0]), off = cpu::as_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (x.size() == 0) return; // no rows (a vmap over an empty batch records the node)
  RopePlan p = plan(x.shape());
  p.per_batch_offset = off.size() > 1;
  RopeOperands in;
  in.offsets = static_cast<const int32_t*>(off.raw_data());
  array freqs = inputs.size() > 2 ? cpu::as_row_contiguous(inputs[2]) : off;
  if (inputs.size() > 2) in.freqs = static_cast<const float*>(freqs.raw_data());
  rope_rows(p, x, out.raw_data(), in);
}

void NormRope::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::as_row_contiguous(inputs[0]), w = cpu::as_row_contiguous(inputs[1]);
  array& out = outputs[0];
  const array& cache = inputs.back();
  // A cache nothing else sees (the one this node replaces) is written in place.
  const bool donated = cache_ && x.size() > 0 && cpu::donate(cache, out);
  if (!donated) out.set_data(allocator::malloc(out.nbytes()));
  if (x.size() == 0) return;
  RopePlan p = plan(x.shape(), cache_ ? cache.shape(2) : 0);
  if (cache_ && !donated) copy_kept_cache(cache, cache.raw_data(), out.raw_data(), offset_, x.shape(2), cpu::copy_elements);
  RopeOperands in;
  if (w.ndim() == 1) in.w = w.raw_data();
  const array off = offsets_ ? cpu::as_row_contiguous(inputs.back()) : w;
  if (offsets_) {
    p.per_batch_offset = off.size() > 1;
    in.offsets = static_cast<const int32_t*>(off.raw_data());
  }
  const bool has_freqs = inputs.size() > size_t(2 + cache_ + offsets_);
  array freqs = has_freqs ? cpu::as_row_contiguous(inputs[2]) : w;
  if (has_freqs) in.freqs = static_cast<const float*>(freqs.raw_data());
  rope_rows(p, x, out.raw_data(), in);
}

} // namespace nuvec
