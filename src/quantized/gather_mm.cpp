// nuvec: gather_mm and the rules of its primitive GatherMm (shared/seeds/001's GatherMm: the
// full-precision sibling of GatherQmm; MLX's gather_mm). Contract: src/quantized/quantized.h.
#include "ops/ops_common.h"
#include "quantized/operands.h"
#include "quantized/quantized.h"

namespace nuvec {

GatherMm::GatherMm(Stream stream, bool sorted)
    : FastPrimitive(
          stream,
          [stream](const std::vector<array>& in) {
            const char* op = "gather_mm";
            return std::vector<array>{
                matmul(detail::take(in[0], in[2], 0, op, stream), detail::take(in[1], in[3], 0, op, stream), stream)};
          }),
      sorted_(sorted) {}

const char* GatherMm::name() const {
  return "GatherMm";
}

std::vector<Shape> GatherMm::output_shapes(const std::vector<array>& inputs) {
  return {{inputs[2].shape(0), inputs[0].shape(1), inputs[1].shape(2)}};
}

bool GatherMm::is_equivalent(const Primitive& other) const {
  auto* o = same_type<GatherMm>(other);
  return o && o->sorted_ == sorted_;
}

std::vector<array> GatherMm::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  for (int arg : argnums) {
    if (arg >= 2) throw_invalid_argument("gather_mm", "there is no gradient with respect to the indices.");
  }
  return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
}

array gather_mm(
    array a,
    array b,
    std::optional<array> lhs_indices,
    std::optional<array> rhs_indices,
    bool sorted_indices,
    StreamOrDevice s) {
  const char* op = "gather_mm";
  if (a.ndim() < 2 || b.ndim() < 2) {
    throw_invalid_argument(op, "operands must have at least 2 dimensions; got shapes ", a.shape(), " and ", b.shape(), ".");
  }
  if (a.shape(-1) != b.shape(-2)) {
    throw_invalid_argument(op, "inner dimensions must match; got shapes ", a.shape(), " and ", b.shape(), ".");
  }
  auto idx = quant::gather_indices(op, a, b, lhs_indices, rhs_indices, s);
  const Dtype dt = promote_types(a.dtype(), b.dtype());
  Shape shape = idx.batch;
  shape.push_back(a.shape(-2));
  shape.push_back(b.shape(-1));
  std::vector<array> in{
      quant::flat_batches(astype(a, dt, s), s), quant::flat_batches(astype(b, dt, s), s), idx.lhs, idx.rhs};
  // The kernels take real floating dtypes; integer and complex products run the fallback
  // graph (matmul's kernels). An empty product is zeros (or empty) without a node.
  size_t out_size = 1;
  for (int d : shape) out_size *= static_cast<size_t>(d);
  if (out_size == 0 || a.shape(-1) == 0) return zeros(shape, dt, s);
  auto node = std::make_shared<GatherMm>(to_stream(s), sorted_indices);
  array out = fast::record_or_fallback(
      issubdtype(dt, floating), node, node->output_shapes(in), {dt}, in)[0];
  return reshape(out, shape, s);
}

} // namespace nuvec
