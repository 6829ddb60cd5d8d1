// nuvec: rules of the matrix-product families Matmul and AddMM (shapes, vjp, jvp, vmap,
// equivalence). Derivatives follow MLX's primitives.cpp as given in shared/seeds/000_*.txt:
// reverse mode multiplies by the conjugate transpose of the other operand.
#include <optional>
#include <typeinfo>

#include "core/errors.h"
#include "primitives/batching.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Both families see operands of equal rank >= 2 with identical batch shapes (the ops
// broadcast before recording), so each cotangent already has its operand's shape.

array swap_last(const array& a) {
  return swapaxes(a, -1, -2);
}

// The conjugate transpose of the last two axes; conjugation is skipped for real dtypes so
// the graphs of real products carry no identity nodes.
array adjoint(const array& a) {
  array t = swap_last(a);
  return a.dtype() == complex64 ? conjugate(t) : t;
}

// Whether x is recorded as a swap of its last two axes (Linear's `x @ W^T`).
bool is_swap_last(const array& x) {
  if (!x.has_primitive() || typeid(x.primitive()) != typeid(Transpose)) return false;
  const auto& axes = static_cast<const Transpose&>(x.primitive()).axes();
  int n = static_cast<int>(axes.size());
  for (int i = 0; i < n - 2; ++i) {
    if (axes[i] != i) return false;
  }
  return n >= 2 && axes[n - 2] == n - 1 && axes[n - 1] == n - 2;
}

// The cotangents of a @ b: g @ b^H and a^H @ g. When an operand is a transposed view, its
// cotangent is computed as the transpose of the mirrored product, so that once the
// Transpose rule flips it back it has the untransposed array's row-major layout: a weight
// and its gradient then share a layout, and element-wise updates (optimizers) stay on their
// contiguous fast path instead of a strided one.
array product_cotangent(const std::vector<array>& primals, const array& g, int arg) {
  const array &a = primals[0], &b = primals[1];
  if (arg == 0) {
    if (is_swap_last(a)) {
      array bc = b.dtype() == complex64 ? conjugate(b) : b;
      return swap_last(matmul(bc, swap_last(g)));
    }
    return matmul(g, adjoint(b));
  }
  if (is_swap_last(b)) {
    array ac = a.dtype() == complex64 ? conjugate(a) : a;
    return swap_last(matmul(swap_last(g), ac));
  }
  return matmul(adjoint(a), g);
}

// x * s with s a real scalar in x's dtype (a float32 scalar would promote half types).
array scale(const array& x, float s) {
  if (s == 1.0f) return x;
  return multiply(x, array(s, x.dtype()));
}

Shape product_shape(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[1].shape().back();
  return out;
}

// The tangent of a @ b from the tangents given for the inputs in argnums (a: 0, b: 1);
// other argnums (AddMM's c) are skipped.
std::optional<array> product_tangent(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::optional<array> total;
  for (size_t i = 0; i < argnums.size(); ++i) {
    std::optional<array> term;
    if (argnums[i] == 0) term = matmul(tangents[i], primals[1]);
    if (argnums[i] == 1) term = matmul(primals[0], tangents[i]);
    if (!term) continue;
    total = total ? add(*total, *term) : *term;
  }
  return total;
}

} // namespace

// ---------------------------------------------------------------------------------------
// Matmul: inputs (a, b) of shapes (..., M, K) and (..., K, N).

const char* Matmul::name() const {
  return "Matmul";
}

std::vector<Shape> Matmul::output_shapes(const std::vector<array>& inputs) {
  return {product_shape(inputs)};
}

std::vector<array> Matmul::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& g = cotangents[0];
  std::vector<array> grads;
  for (int arg : argnums) {
    if (arg == 0) {
      grads.push_back(product_cotangent(primals, g, 0));
    } else {
      grads.push_back(product_cotangent(primals, g, 1));
    }
  }
  return grads;
}

std::vector<array> Matmul::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  auto t = product_tangent(primals, tangents, argnums);
  return {t ? *t : zeros(product_shape(primals), primals[0].dtype())};
}

std::pair<std::vector<array>, std::vector<int>> Matmul::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (!any_batched(axes)) return {{matmul(inputs[0], inputs[1], stream())}, {-1}};
  // The public op broadcasts the unbatched operand's batch dimensions (and folds an
  // unbatched matrix's partner into one large product).
  auto in = batch_first(inputs, axes, false);
  return {{matmul(in[0], in[1], stream())}, {0}};
}

bool Matmul::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(Matmul);
}

// ---------------------------------------------------------------------------------------
// AddMM: inputs (a, b, c), c already broadcast to the product's shape.

const char* AddMM::name() const {
  return "AddMM";
}

std::vector<Shape> AddMM::output_shapes(const std::vector<array>& inputs) {
  return {product_shape(inputs)};
}

std::vector<array> AddMM::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& g = cotangents[0];
  std::vector<array> grads;
  for (int arg : argnums) {
    switch (arg) {
      case 0: grads.push_back(scale(product_cotangent(primals, g, 0), alpha_)); break;
      case 1: grads.push_back(scale(product_cotangent(primals, g, 1), alpha_)); break;
      default: grads.push_back(scale(g, beta_)); break;
    }
  }
  return grads;
}

std::vector<array> AddMM::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  auto t = product_tangent(primals, tangents, argnums);
  std::optional<array> total;
  if (t) total = scale(*t, alpha_);
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] != 2) continue;
    array tc = scale(tangents[i], beta_);
    total = total ? add(*total, tc) : tc;
  }
  return {total ? *total : zeros(product_shape(primals), primals[0].dtype())};
}

std::pair<std::vector<array>, std::vector<int>> AddMM::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (!any_batched(axes)) {
    return {{addmm(inputs[2], inputs[0], inputs[1], alpha_, beta_, stream())}, {-1}};
  }
  // Every operand gets the same leading batch axis (unbatched ones as a stride-0 view), so
  // the node keeps its invariant: equal batch shapes, c shaped like the output.
  auto in = batch_first(inputs, axes, true);
  Shape shape = product_shape(in);
  auto out = array(
      shape,
      in[0].dtype(),
      std::make_shared<AddMM>(stream(), alpha_, beta_),
      {in[0], in[1], in[2]});
  return {{out}, {0}};
}

bool AddMM::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AddMM*>(&other);
  return o && o->alpha_ == alpha_ && o->beta_ == beta_;
}

} // namespace nuvec
