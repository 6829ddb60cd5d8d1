// nuvec: quantized_matmul and gather_qmm, and the rules of their primitives QuantizedMatmul
// and GatherQmm (shared/seeds/000's QuantizedMatmul rules, seeds/001's GatherQmm; MLX's
// QuantizedMatmul::vjp for the scales and biases). Contracts: src/quantized/quantized.h.
#include <typeinfo>

#include "ops/ops_common.h"
#include "quantized/operands.h"
#include "quantized/quantized.h"

namespace nuvec {

namespace {

[[noreturn]] void no_weight_gradient(const char* op) {
  throw_invalid_argument(op, "there is no gradient with respect to the packed (quantized) weights.");
}
[[noreturn]] void no_scale_gradient(const char* op, const QuantSpec& spec) {
  throw_invalid_argument(
      op, "there is no gradient with respect to the '", quant_mode_name(spec.mode), "' scales (uint8 codes).");
}

// a with its leading axes flattened, keeping the last `keep`: (..., P, Q) -> (-1, P, Q) etc.
array flatten_front(const array& a, int keep, StreamOrDevice s) {
  Shape shape{-1};
  shape.insert(shape.end(), a.shape().end() - keep, a.shape().end());
  return reshape(a, shape, s);
}

// The gradients of affine scales and biases from dw, the gradient of the dequantized weight
// (MLX's rule): per group sum(dw * q) and sum(dw), q the integer codes.
std::pair<array, array> scale_bias_grads(
    const QuantSpec& spec,
    const array& dw,
    const array& w,
    const array& scales,
    const array& biases,
    StreamOrDevice s) {
  auto grouped = [&](const array& a) {
    Shape shape = a.shape();
    shape.back() /= spec.group_size;
    shape.push_back(spec.group_size);
    return reshape(a, shape, s);
  };
  array codes = quant::dequantized(spec, w, ones_like(scales, s), zeros_like(biases, s), dw.dtype(), s);
  array dwg = grouped(dw);
  array ds = astype(sum(multiply(dwg, grouped(codes), s), -1, false, s), scales.dtype(), s);
  array db = astype(sum(dwg, -1, false, s), biases.dtype(), s);
  return {ds, db};
}

} // namespace

// ---- QuantizedMatmul ---------------------------------------------------------------------

QuantizedMatmul::QuantizedMatmul(Stream stream, QuantSpec spec, bool transpose)
    : FastPrimitive(
          stream,
          [stream, spec, transpose](const std::vector<array>& in) {
            std::optional<array> biases;
            if (in.size() > 3) biases = in[3];
            return std::vector<array>{quant::quantized_product_graph(spec, transpose, in[0], in[1], in[2], biases, stream)};
          }),
      spec_(spec),
      transpose_(transpose) {}

const char* QuantizedMatmul::name() const {
  return "QuantizedMatmul";
}

std::vector<Shape> QuantizedMatmul::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  const array& w = inputs[1];
  shape.back() = transpose_ ? w.shape(0) : w.shape(1) * 32 / spec_.bits;
  return {shape};
}

bool QuantizedMatmul::is_equivalent(const Primitive& other) const {
  auto* o = same_type<QuantizedMatmul>(other);
  return o && o->spec_ == spec_ && o->transpose_ == transpose_;
}

std::vector<array> QuantizedMatmul::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const char* op = "quantized_matmul";
  const auto s = stream();
  const array& x = primals[0];
  const array& g = cotangents[0];
  std::vector<array> out;
  std::optional<array> dw;
  for (int arg : argnums) {
    if (arg == 0) {
      // d(x W^T)/dx = g W: the product with the other transpose, on the same packed weight.
      auto node = std::make_shared<QuantizedMatmul>(s, spec_, !transpose_);
      std::vector<array> in(primals.begin() + 1, primals.end());
      in.insert(in.begin(), astype(g, x.dtype(), s));
      out.push_back(array(node->output_shapes(in)[0], x.dtype(), node, in));
    } else if (arg == 1) {
      no_weight_gradient(op);
    } else {
      if (!spec_.has_biases()) no_scale_gradient(op, spec_);
      if (!dw) {
        // The gradient of the dequantized weight, in the packed layout, summed over rows.
        array fg = flatten_front(astype(g, float32, s), 1, s), fx = flatten_front(astype(x, float32, s), 1, s);
        dw = transpose_ ? matmul(nuvec::transpose(fg, s), fx, s) : matmul(nuvec::transpose(fx, s), fg, s);
      }
      auto [ds, db] = scale_bias_grads(spec_, *dw, primals[1], primals[2], primals[3], s);
      out.push_back(arg == 2 ? ds : db);
    }
  }
  return out;
}

std::vector<array> QuantizedMatmul::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  // The product is linear in x and (affine) jointly linear in (scales, biases): the tangent is
  // the product of x's tangent with the weight plus x with the weight made of the scales' and
  // biases' tangents.
  const char* op = "quantized_matmul";
  const auto s = stream();
  std::optional<array> tx, ts, tb;
  for (size_t i = 0; i < argnums.size(); ++i) {
    switch (argnums[i]) {
      case 0: tx = tangents[i]; break;
      case 1: no_weight_gradient(op);
      case 2: ts = tangents[i]; break;
      default: tb = tangents[i]; break;
    }
  }
  if ((ts || tb) && !spec_.has_biases()) no_scale_gradient(op, spec_);
  const Dtype dt = primals[0].dtype();
  auto product = [&](const array& x, const array& sc, const std::optional<array>& bi) {
    auto node = std::make_shared<QuantizedMatmul>(s, spec_, transpose_);
    std::vector<array> in{astype(x, dt, s), primals[1], sc};
    if (bi) in.push_back(*bi);
    return array(node->output_shapes(in)[0], dt, node, in);
  };
  std::optional<array> t;
  if (tx) {
    std::optional<array> b;
    if (spec_.has_biases()) b = primals[3];
    t = product(*tx, primals[2], b);
  }
  if (ts || tb) {
    array sc = ts ? astype(*ts, dt, s) : zeros_like(primals[2], s);
    array bi = tb ? astype(*tb, dt, s) : zeros_like(primals[3], s);
    array term = product(primals[0], sc, bi);
    t = t ? add(*t, term, s) : term;
  }
  return {*t};
}

std::pair<std::vector<array>, std::vector<int>> QuantizedMatmul::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // Only x batched: the node maps its leading axes row by row, so the batch axis moves to
  // the front and the kernel stays. A batched weight, scales or biases use the fallback.
  for (size_t i = 1; i < axes.size(); ++i) {
    if (axes[i] >= 0) return FastPrimitive::vmap(inputs, axes);
  }
  std::vector<array> in = inputs;
  in[0] = moveaxis(inputs[0], axes[0], 0, stream());
  auto node = std::make_shared<QuantizedMatmul>(stream(), spec_, transpose_);
  return {{array(node->output_shapes(in)[0], in[0].dtype(), node, in)}, {0}};
}

// ---- GatherQmm ---------------------------------------------------------------------------

GatherQmm::GatherQmm(Stream stream, QuantSpec spec, bool transpose, bool sorted)
    : FastPrimitive(
          stream,
          [stream, spec, transpose](const std::vector<array>& in) {
            const auto s = stream;
            const bool affine = spec.has_biases();
            const array& lhs = in[affine ? 4 : 3];
            const array& rhs = in[affine ? 5 : 4];
            std::optional<array> biases;
            const char* op = "gather_qmm";
            if (affine) biases = detail::take(in[3], rhs, 0, op, s);
            return std::vector<array>{quant::quantized_product_graph(
                spec, transpose, detail::take(in[0], lhs, 0, op, s), detail::take(in[1], rhs, 0, op, s),
                detail::take(in[2], rhs, 0, op, s), biases, s)};
          }),
      spec_(spec),
      transpose_(transpose),
      sorted_(sorted) {}

const char* GatherQmm::name() const {
  return "GatherQmm";
}

std::vector<Shape> GatherQmm::output_shapes(const std::vector<array>& inputs) {
  const array& w = inputs[1];
  const array& lhs = inputs[spec_.has_biases() ? 4 : 3];
  return {{lhs.shape(0), inputs[0].shape(1), transpose_ ? w.shape(1) : w.shape(2) * 32 / spec_.bits}};
}

bool GatherQmm::is_equivalent(const Primitive& other) const {
  auto* o = same_type<GatherQmm>(other);
  return o && o->spec_ == spec_ && o->transpose_ == transpose_ && o->sorted_ == sorted_;
}

std::vector<array> GatherQmm::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const int lhs_at = spec_.has_biases() ? 4 : 3;
  for (int arg : argnums) {
    if (arg == 1) no_weight_gradient("gather_qmm");
    if (arg >= lhs_at) throw_invalid_argument("gather_qmm", "there is no gradient with respect to the indices.");
    if (arg == 2 && !spec_.has_biases()) no_scale_gradient("gather_qmm", spec_);
  }
  return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
}

// ---- the ops -----------------------------------------------------------------------------

namespace {

// The checked operands of a quantized product: the format, the product dtype, x (and the
// affine scales and biases) cast to it, and the dimensions of the dequantized weight.
struct Product {
  QuantSpec spec;
  Dtype dtype;
  array x;
  array scales;
  std::optional<array> biases;
  int N = 0;
  int K = 0;
};

Product check_product(
    const char* op,
    const array& x,
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    bool transpose,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    int min_x_ndim,
    StreamOrDevice s) {
  QuantSpec spec = resolve_quant_spec(mode, group_size, bits, op);
  auto dims = quant::check_weight(op, spec, w, scales, biases);
  if (static_cast<int>(x.ndim()) < min_x_ndim) {
    throw_invalid_argument(op, "x must have at least ", min_x_ndim, " dimension(s); got shape ", x.shape(), ".");
  }
  Dtype dt = quant::product_dtype(op, spec, x, scales, biases);
  const int K = transpose ? dims.cols : dims.rows;
  const int N = transpose ? dims.rows : dims.cols;
  if (x.shape(-1) != K) {
    throw_invalid_argument(
        op, "x's last axis must be ", K, " (the weight of shape ", w.shape(), " dequantizes to ",
        Shape{dims.rows, dims.cols}, (transpose ? ", used transposed" : ""), "); got x of shape ", x.shape(), ".");
  }
  Product p{spec, dt, astype(x, dt, s), scales, std::nullopt, N, K};
  if (spec.has_biases()) {
    p.scales = astype(scales, dt, s);
    p.biases = astype(*biases, dt, s);
  }
  return p;
}

array gathered_product(
    const char* op,
    const Product& p,
    const array& w,
    const std::optional<array>& lhs_indices,
    const std::optional<array>& rhs_indices,
    bool transpose,
    bool sorted_indices,
    StreamOrDevice s) {
  auto idx = quant::gather_indices(op, p.x, w, lhs_indices, rhs_indices, s);
  const int M = p.x.shape(-2);
  Shape shape = idx.batch;
  shape.push_back(M);
  shape.push_back(p.N);
  if (idx.count == 0 || M == 0 || p.N == 0) return zeros(shape, p.dtype, s);
  std::vector<array> in{quant::flat_batches(p.x, s), quant::flat_batches(w, s), quant::flat_batches(p.scales, s)};
  if (p.biases) in.push_back(quant::flat_batches(*p.biases, s));
  in.push_back(idx.lhs);
  in.push_back(idx.rhs);
  auto node = std::make_shared<GatherQmm>(to_stream(s), p.spec, transpose, sorted_indices);
  array out(node->output_shapes(in)[0], p.dtype, node, in);
  return reshape(out, shape, s);
}

} // namespace

array quantized_matmul(
    array x,
    array w,
    array scales,
    std::optional<array> biases,
    bool transpose,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    StreamOrDevice s) {
  const char* op = "quantized_matmul";
  const Dtype x_dtype = x.dtype();
  auto p = check_product(op, x, w, scales, biases, transpose, group_size, bits, mode, 1, s);
  // float64 runs in float32 (MLX's kernels have no float64) and is cast back.
  const Dtype result = x_dtype == float64 || (p.spec.has_biases() && promote_types(x_dtype, scales.dtype()) == float64)
      ? float64
      : p.dtype;
  array out = p.x;
  if (w.ndim() > 2) {
    // A batched weight: batch axes broadcast against x's (1-D x is one row).
    if (p.x.ndim() == 1) p.x = reshape(p.x, {1, p.K}, s);
    out = gathered_product(op, p, w, std::nullopt, std::nullopt, transpose, false, s);
    if (x.ndim() == 1) out = squeeze(out, -2, s);
  } else {
    Shape shape = p.x.shape();
    shape.back() = p.N;
    if (p.x.size() == 0 || p.N == 0) {
      out = zeros(shape, p.dtype, s);
    } else {
      std::vector<array> in{p.x, w, p.scales};
      if (p.biases) in.push_back(*p.biases);
      out = array(shape, p.dtype, std::make_shared<QuantizedMatmul>(to_stream(s), p.spec, transpose), in);
    }
  }
  return result != p.dtype ? astype(out, result, s) : out;
}

array gather_qmm(
    const array& x,
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    std::optional<array> lhs_indices,
    std::optional<array> rhs_indices,
    bool transpose,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    bool sorted_indices,
    StreamOrDevice s) {
  const char* op = "gather_qmm";
  auto p = check_product(op, x, w, scales, biases, transpose, group_size, bits, mode, 2, s);
  array out = gathered_product(op, p, w, lhs_indices, rhs_indices, transpose, sorted_indices, s);
  return x.dtype() == float64 ? astype(out, float64, s) : out;
}

} // namespace nuvec
