// nuvec: argument checks, gather indices and fallback graphs shared by the quantized and
// gathered products (see operands.h).
#include "quantized/operands.h"

#include <cstdint>

#include "ops/ops_common.h"

namespace nuvec::quant {

WeightDims check_weight(
    const char* op,
    const QuantSpec& spec,
    const array& w,
    const array& scales,
    const std::optional<array>& biases) {
  if (w.dtype() != uint32) {
    throw_invalid_argument(op, "the quantized weight w must have dtype uint32; got ", w.dtype(), ".");
  }
  if (w.ndim() < 2) {
    throw_invalid_argument(op, "w must have at least 2 dimensions; got shape ", w.shape(), ".");
  }
  const char* mode = quant_mode_name(spec.mode);
  if (spec.has_biases() && !biases) {
    throw_invalid_argument(op, "biases must be given for the 'affine' mode.");
  }
  if (!spec.has_biases() && biases) {
    throw_invalid_argument(op, "biases must be absent for the '", mode, "' mode.");
  }
  auto same_batch = [&](const array& a) {
    return a.ndim() == w.ndim() && std::equal(w.shape().begin(), w.shape().end() - 1, a.shape().begin());
  };
  if (!same_batch(scales) || (biases && biases->shape() != scales.shape())) {
    throw_invalid_argument(
        op, "scales", biases ? " and biases" : "", " must match w's shape ", w.shape(),
        " but for the last axis; got scales ", scales.shape(), biases ? " and biases " : "",
        biases ? biases->shape() : Shape{}, ".");
  }
  const int64_t values = static_cast<int64_t>(w.shape(-1)) * 32;
  if (values % spec.bits != 0 || values / spec.bits != static_cast<int64_t>(scales.shape(-1)) * spec.group_size) {
    throw_invalid_argument(
        op, "scales must have one entry per group of ", spec.group_size, " values (w of shape ", w.shape(),
        " holds ", values / spec.bits, " values of ", spec.bits, " bits per row); got scales of shape ",
        scales.shape(), ".");
  }
  if (spec.has_biases()) {
    if (!issubdtype(scales.dtype(), floating) || !issubdtype(biases->dtype(), floating)) {
      throw_invalid_argument(
          op, "affine scales and biases must have real floating dtypes; got ", scales.dtype(), " and ",
          biases->dtype(), ".");
    }
  } else if (scales.dtype() != uint8) {
    throw_invalid_argument(op, "scales must have dtype uint8 (codes) for the '", mode, "' mode; got ", scales.dtype(), ".");
  }
  return {w.shape(-2), static_cast<int>(values / spec.bits)};
}

Dtype product_dtype(
    const char* op,
    const QuantSpec& spec,
    const array& x,
    const array& scales,
    const std::optional<array>& biases) {
  Dtype t = x.dtype();
  if (spec.has_biases()) {
    t = promote_types(t, scales.dtype());
    if (biases) t = promote_types(t, biases->dtype());
  }
  if (!issubdtype(t, floating)) {
    throw_invalid_argument(op, "x must have a real floating dtype; got ", x.dtype(), ".");
  }
  return t == float64 ? float32 : t;
}

GatherIndices gather_indices(
    const char* op,
    const array& a,
    const array& b,
    const std::optional<array>& lhs_indices,
    const std::optional<array>& rhs_indices,
    StreamOrDevice s) {
  auto own_positions = [&](const array& x) {
    Shape batch(x.shape().begin(), x.shape().end() - 2);
    int count = 1;
    for (int d : batch) count *= d;
    return reshape(arange(count, uint32, s), batch, s);
  };
  array li = lhs_indices ? *lhs_indices : own_positions(a);
  array ri = rhs_indices ? *rhs_indices : own_positions(b);
  for (auto [name, idx] : {std::pair{"lhs_indices", &li}, std::pair{"rhs_indices", &ri}}) {
    if (!issubdtype(idx->dtype(), integer) || idx->dtype() == bool_) {
      throw_invalid_argument(op, name, " must have an integer dtype; got ", idx->dtype(), ".");
    }
  }
  Shape batch;
  try {
    batch = broadcast_shapes(li.shape(), ri.shape());
  } catch (const std::invalid_argument&) {
    if (!lhs_indices && !rhs_indices) {
      throw_invalid_argument(
          op, "the batch axes of the operands must broadcast; got shapes ", a.shape(), " and ", b.shape(), ".");
    }
    throw_invalid_argument(
        op, "lhs_indices and rhs_indices must broadcast; got shapes ", li.shape(), " and ", ri.shape(), ".");
  }
  int64_t count = 1;
  for (int d : batch) count *= d;
  const int n = static_cast<int>(count);
  // Negative indices become values past the end (uint32), which the kernels report as out
  // of range: MLX's gathers take no negative indices either. 64-bit indices outside uint32's
  // range would wrap onto valid rows when cast, so they become the largest uint32 first.
  auto to_u32 = [&](const array& idx) {
    if (size_of(idx.dtype()) < 8) return astype(idx, uint32, s);
    array bad = logical_or(less(idx, array(0, idx.dtype()), s), greater(idx, array(int64_t{0xFFFFFFFF}, idx.dtype()), s), s);
    return astype(where(bad, array(int64_t{0xFFFFFFFF}, idx.dtype()), idx, s), uint32, s);
  };
  auto flat = [&](const array& idx) { return reshape(to_u32(broadcast_to(idx, batch, s)), {n}, s); };
  return GatherIndices{flat(li), flat(ri), batch, n};
}

array flat_batches(const array& x, StreamOrDevice s) {
  int64_t batch = 1;
  for (int i = 0; i + 2 < static_cast<int>(x.ndim()); ++i) batch *= x.shape(i);
  return reshape(x, {static_cast<int>(batch), x.shape(-2), x.shape(-1)}, s);
}

array dequantized(
    const QuantSpec& spec,
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    Dtype dtype,
    StreamOrDevice s) {
  return dequantize(w, scales, biases, spec.group_size, spec.bits, quant_mode_name(spec.mode), std::nullopt, dtype, s);
}

array quantized_product_graph(
    const QuantSpec& spec,
    bool transpose,
    const array& x,
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    StreamOrDevice s) {
  array wd = dequantized(spec, w, scales, biases, x.dtype(), s);
  return matmul(x, transpose ? swapaxes(wd, -1, -2, s) : wd, s);
}

} // namespace nuvec::quant
