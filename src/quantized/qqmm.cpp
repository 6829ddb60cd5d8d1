// nuvec: qqmm and gather_qqmm (MLX's products with both operands in an fp mode) and the rules
// of QQMatmul. Contract: src/quantized/quantized.h.
#include "ops/ops_common.h"
#include "quantized/operands.h"
#include "quantized/quantized.h"

namespace nuvec {

namespace {

// fq(x): x's value after quantizing along its last axis to the fp mode and back, float32.
array fp_rounded(const QuantSpec& spec, const array& x, const std::optional<array>& global_scale, StreamOrDevice s) {
  const char* mode = quant_mode_name(spec.mode);
  auto q = quantize(x, spec.group_size, spec.bits, mode, global_scale, s);
  return dequantize(q[0], q[1], std::nullopt, spec.group_size, spec.bits, mode, global_scale, float32, s);
}

// fq(x) with the straight-through gradient: x + stop_gradient(fq(x) - x). The value is fq(x)
// exactly: fq(x) and x are within a factor of two of each other (or fq(x) is 0), so the
// difference and the sum are exact in float32 (Sterbenz).
array fp_rounded_ste(const QuantSpec& spec, const array& x, const std::optional<array>& global_scale, StreamOrDevice s) {
  // The rounding reads a gradient-free copy of x: its bit views (to_fp8's) then never meet a
  // tangent in forward mode, which refuses derivatives through bit reinterpretations.
  array xf = astype(x, float32, s);
  array xc = stop_gradient(xf, s);
  return add(xf, subtract(fp_rounded(spec, xc, global_scale, s), xc, s), s);
}

// The weight of a qqmm: packed (uint32 with scales) as given, or a floating w quantized here.
struct QQWeight {
  array w;
  array scales;
};

QQWeight qq_weight(
    const char* op,
    const QuantSpec& spec,
    const array& w,
    const std::optional<array>& w_scales,
    const std::optional<array>& global_scale_w,
    StreamOrDevice s) {
  if (w.dtype() == uint32) {
    if (!w_scales) throw_invalid_argument(op, "w_scales must be given with a quantized (uint32) w.");
    quant::check_weight(op, spec, w, *w_scales, std::nullopt);
    return {w, *w_scales};
  }
  if (!issubdtype(w.dtype(), floating)) {
    throw_invalid_argument(op, "w must be floating or quantized (uint32); got ", w.dtype(), ".");
  }
  if (w_scales) throw_invalid_argument(op, "w_scales must be absent when w is not quantized (dtype ", w.dtype(), ").");
  if (w.shape(-1) % spec.group_size != 0) {
    throw_invalid_argument(op, "w's last axis must be divisible by the group size ", spec.group_size, "; got shape ", w.shape(), ".");
  }
  auto q = quantize(w, spec.group_size, spec.bits, quant_mode_name(spec.mode), global_scale_w, s);
  return {q[0], q[1]};
}

QuantSpec qq_spec(const char* op, const std::string& mode, std::optional<int> group_size, std::optional<int> bits) {
  QuantSpec spec = resolve_quant_spec(mode, group_size, bits, op);
  if (spec.mode == QuantMode::Affine) {
    throw_invalid_argument(op, "the 'affine' mode is not supported; use 'mxfp4', 'mxfp8' or 'nvfp4'.");
  }
  return spec;
}

void check_global_scales(
    const char* op,
    const QuantSpec& spec,
    const std::optional<array>& gx,
    const std::optional<array>& gw) {
  if (gx.has_value() != gw.has_value()) {
    throw_invalid_argument(op, "global_scale_x and global_scale_w must be given together.");
  }
  if (gx && spec.mode != QuantMode::Nvfp4) {
    throw_invalid_argument(op, "global scales are only supported for the 'nvfp4' mode; got '", quant_mode_name(spec.mode), "'.");
  }
}

void check_x(const char* op, const array& x, int min_ndim) {
  if (!issubdtype(x.dtype(), floating)) {
    throw_invalid_argument(op, "x must have a real floating dtype; got ", x.dtype(), ".");
  }
  if (static_cast<int>(x.ndim()) < min_ndim) {
    throw_invalid_argument(op, "x must have at least ", min_ndim, " dimension(s); got shape ", x.shape(), ".");
  }
}

} // namespace

QQMatmul::QQMatmul(Stream stream, QuantSpec spec)
    : FastPrimitive(
          stream,
          [stream, spec](const std::vector<array>& in) {
            const auto s = stream;
            array wd = quant::dequantized(spec, in[1], in[2], std::nullopt, float32, s);
            // Straight-through in x, so that the fallback's jvp and vjp are the op's rules.
            array out = matmul(fp_rounded_ste(spec, in[0], std::nullopt, s), transpose(wd, s), s);
            return std::vector<array>{astype(out, in[0].dtype(), s)};
          }),
      spec_(spec) {}

const char* QQMatmul::name() const {
  return "QQMatmul";
}

std::vector<Shape> QQMatmul::output_shapes(const std::vector<array>& inputs) {
  return {{inputs[0].shape(0), inputs[1].shape(0)}};
}

bool QQMatmul::is_equivalent(const Primitive& other) const {
  auto* o = same_type<QQMatmul>(other);
  return o && o->spec_ == spec_;
}

std::vector<array> QQMatmul::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg != 0) {
      throw_invalid_argument("qqmm", "there is no gradient with respect to the quantized weight or its scales.");
    }
    // Straight-through: d(fq(x) W^T)/dx taken as g W, W the dequantized weight.
    out.push_back(quantized_matmul(
        cotangents[0], primals[1], primals[2], std::nullopt, false, spec_.group_size, spec_.bits,
        quant_mode_name(spec_.mode), stream()));
  }
  return out;
}

array qqmm(
    array x,
    array w,
    const std::optional<array> w_scales,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    const std::optional<array> global_scale_x,
    const std::optional<array> global_scale_w,
    StreamOrDevice s) {
  const char* op = "qqmm";
  QuantSpec spec = qq_spec(op, mode, group_size, bits);
  check_x(op, x, 1);
  check_global_scales(op, spec, global_scale_x, global_scale_w);
  if (w.ndim() != 2) throw_invalid_argument(op, "w must be a matrix; got shape ", w.shape(), ".");
  auto qw = qq_weight(op, spec, w, w_scales, global_scale_w, s);
  const int K = qw.w.shape(1) * 32 / spec.bits;
  const int N = qw.w.shape(0);
  if (x.shape(-1) != K) {
    throw_invalid_argument(op, "x's last axis must be ", K, " (w holds ", N, " rows of ", K, "); got x of shape ", x.shape(), ".");
  }
  if (K % spec.group_size != 0) {
    throw_invalid_argument(op, "K = ", K, " must be divisible by the group size ", spec.group_size, ".");
  }
  const Dtype dt = x.dtype() == float64 ? float32 : x.dtype();
  Shape shape = x.shape();
  shape.back() = N;
  array out = x;
  if (global_scale_x) {
    // Per-tensor scales: the graph (the node's kernels take the codes' own scales only).
    array wd = dequantize(qw.w, qw.scales, std::nullopt, spec.group_size, spec.bits, mode, global_scale_w, float32, s);
    out = astype(matmul(fp_rounded_ste(spec, x, global_scale_x, s), transpose(wd, s), s), dt, s);
  } else if (x.size() == 0 || N == 0) {
    out = zeros(shape, dt, s);
  } else {
    std::vector<array> in{reshape(astype(x, dt, s), {-1, K}, s), qw.w, qw.scales};
    auto node = std::make_shared<QQMatmul>(to_stream(s), spec);
    out = reshape(array(node->output_shapes(in)[0], dt, node, in), shape, s);
  }
  return x.dtype() == float64 ? astype(out, float64, s) : out;
}

array gather_qqmm(
    const array& x,
    const array& w,
    const std::optional<array>& w_scales,
    std::optional<array> lhs_indices,
    std::optional<array> rhs_indices,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    const std::optional<array>& global_scale_x,
    const std::optional<array>& global_scale_w,
    bool sorted_indices,
    StreamOrDevice s) {
  (void)sorted_indices; // a hint; the graph below reads every gathered weight
  const char* op = "gather_qqmm";
  QuantSpec spec = qq_spec(op, mode, group_size, bits);
  check_x(op, x, 2);
  check_global_scales(op, spec, global_scale_x, global_scale_w);
  if (w.ndim() < 2) throw_invalid_argument(op, "w must have at least 2 dimensions; got shape ", w.shape(), ".");
  auto qw = qq_weight(op, spec, w, w_scales, global_scale_w, s);
  const int K = qw.w.shape(-1) * 32 / spec.bits;
  if (x.shape(-1) != K) {
    throw_invalid_argument(op, "x's last axis must be ", K, "; got x of shape ", x.shape(), " and w of shape ", w.shape(), ".");
  }
  auto idx = quant::gather_indices(op, x, qw.w, lhs_indices, rhs_indices, s);
  const Dtype dt = x.dtype() == float64 ? float32 : x.dtype();
  array xg = detail::take(quant::flat_batches(x, s), idx.lhs, 0, op, s);
  array wd = dequantize(
      detail::take(quant::flat_batches(qw.w, s), idx.rhs, 0, op, s),
      detail::take(quant::flat_batches(qw.scales, s), idx.rhs, 0, op, s),
      std::nullopt, spec.group_size, spec.bits, mode, global_scale_w, float32, s);
  array out = astype(matmul(fp_rounded_ste(spec, xg, global_scale_x, s), swapaxes(wd, -1, -2, s), s), dt, s);
  Shape shape = idx.batch;
  shape.push_back(x.shape(-2));
  shape.push_back(qw.w.shape(-2));
  out = reshape(out, shape, s);
  return x.dtype() == float64 ? astype(out, float64, s) : out;
}

} // namespace nuvec
