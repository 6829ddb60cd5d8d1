// nuvec: CPU kernels of Matmul and AddMM. float32/float64/complex64 go through OpenBLAS gemm,
// reading transposed operands in place; float16/bfloat16 are widened to float32 around sgemm;
// integers and bool use a blocked i-k-j loop with wrap-around (NumPy's) arithmetic.
#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/gemm_problem.h"
#include "backend/cpu/blas.h"
#include "backend/common/strided.h"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// The matrix problem shared by both families: out[b] = alpha * a[b] @ b[b] (+ beta * c[b]).
struct ProductPlan {
  int m, n, k;
  int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs; // strides of the last two axes
  // Element offsets of each batch's matrix in a, b and c (row-major batch order).
  std::vector<std::array<int64_t, 3>> batches;
};

ProductPlan plan_product(const array& a, const array& b, const array* c, const array& out) {
  int nd = static_cast<int>(out.ndim());
  ProductPlan p;
  p.m = out.shape(-2);
  p.n = out.shape(-1);
  p.k = a.shape(-1);
  p.a_rs = a.strides()[nd - 2];
  p.a_cs = a.strides()[nd - 1];
  p.b_rs = b.strides()[nd - 2];
  p.b_cs = b.strides()[nd - 1];
  p.c_rs = c ? c->strides()[nd - 2] : 0;
  p.c_cs = c ? c->strides()[nd - 1] : 0;
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  auto batch_strides = [&](const array& x) {
    Strides s(batch.size(), 0);
    for (size_t i = 0; i < batch.size(); ++i) s[i] = x.shape()[i] == 1 ? 0 : x.strides()[i];
    return s;
  };
  std::vector<Strides> strides = {
      batch_strides(a), batch_strides(b), c ? batch_strides(*c) : Strides(batch.size(), 0)};
  auto plan = collapse_dims(batch, strides);
  for_each_run<3>(plan, [&](const int64_t* offs, int64_t len, const int64_t* inner) {
    for (int64_t j = 0; j < len; ++j) {
      p.batches.push_back({offs[0] + j * inner[0], offs[1] + j * inner[1], offs[2] + j * inner[2]});
    }
  });
  return p;
}

// Copies a strided rows x cols matrix into a dense row-major buffer, converting elements.
template <typename To, typename From>
void pack(const From* src, int rows, int cols, int64_t rs, int64_t cs, std::vector<To>& dst) {
  dst.resize(static_cast<size_t>(rows) * cols);
  To* d = dst.data();
  for (int i = 0; i < rows; ++i) {
    const From* row = src + i * rs;
    for (int j = 0; j < cols; ++j) d[static_cast<size_t>(i) * cols + j] = cast_to<To>(row[j * cs]);
  }
}

// v * s, spelled out for complex64_t (whose operators would also match ops.h's templates).
template <typename T>
T scaled(T v, float s) {
  if constexpr (is_complex_v<T>) {
    return T(v.real() * s, v.imag() * s);
  } else {
    return static_cast<T>(v * s);
  }
}

// One operand of a gemm call (batch 1): the input's memory, or a packed row-major copy
// when its layout cannot be read in place (or E must be widened to T).
template <typename T, typename E>
GemmOperand gemm_operand(
    const E* src, int rows, int cols, int64_t rs, int64_t cs, const MatrixLayout& layout,
    std::vector<T>& scratch) {
  if constexpr (std::is_same_v<T, E>) {
    if (cpu::blas_fits(layout)) return {src, layout.col_major, layout.ld, 0};
  }
  pack<T>(src, rows, cols, rs, cs, scratch);
  return {scratch.data(), false, std::max(cols, 1), 0};
}

// Floating products through BLAS; E is the element type, T the type gemm runs in (float
// for the half types, which are widened per batch and narrowed back).
template <typename E>
void blas_product(
    const ProductPlan& p, const E* a, const E* b, const E* c, E* out, float alpha, float beta) {
  using T = std::conditional_t<is_half_v<E>, float, E>;
  constexpr bool widen = !std::is_same_v<T, E>;
  const size_t mn = static_cast<size_t>(p.m) * p.n;
  const auto la = matrix_layout(p.m, p.k, p.a_rs, p.a_cs);
  const auto lb = matrix_layout(p.k, p.n, p.b_rs, p.b_cs);
  std::vector<T> pa, pb, pc;
  for (size_t bi = 0; bi < p.batches.size(); ++bi) {
    const auto& offs = p.batches[bi];
    E* o = out + bi * mn;
    T* dst;
    if constexpr (widen) {
      pc.resize(mn);
      dst = pc.data();
    } else {
      dst = o;
    }
    // c is broadcast to the output; BLAS's beta == 0 never reads it (so NaNs in c vanish).
    bool use_c = c && beta != 0.0f;
    if (use_c) {
      const E* cb = c + offs[2];
      for (int i = 0; i < p.m; ++i) {
        for (int j = 0; j < p.n; ++j) {
          dst[static_cast<size_t>(i) * p.n + j] = cast_to<T>(cb[i * p.c_rs + j * p.c_cs]);
        }
      }
    }
    if (p.k == 0) {
      // An empty sum: the product is zero, so the result is beta * c.
      for (size_t i = 0; i < mn; ++i) dst[i] = use_c ? scaled(dst[i], beta) : T(0);
    } else {
      GemmProblem g{cpu::blas_dtype<T>(), p.m, p.n, p.k, 1, {}, {}, {}, alpha, use_c ? beta : 0.0f};
      g.a = gemm_operand<T>(a + offs[0], p.m, p.k, p.a_rs, p.a_cs, la, pa);
      g.b = gemm_operand<T>(b + offs[1], p.k, p.n, p.b_rs, p.b_cs, lb, pb);
      g.out = {dst, use_c ? dst : nullptr, std::max(p.n, 1), 0};
      cpu::blas_gemm(g);
    }
    if constexpr (widen) {
      for (size_t i = 0; i < mn; ++i) o[i] = E(pc[i]);
    }
  }
}

// Integer and bool products: sums of products modulo 2^64 (unsigned, so overflow is
// defined), then truncated to E, which is NumPy's wrap-around; bool is "any a && b".
template <typename E>
void integer_product(const ProductPlan& p, const E* a, const E* b, E* out) {
  constexpr int kBlockK = 128, kBlockN = 512;
  const size_t mn = static_cast<size_t>(p.m) * p.n;
  std::vector<uint64_t> pa, pb, acc(mn);
  for (size_t bi = 0; bi < p.batches.size(); ++bi) {
    const auto& offs = p.batches[bi];
    pack<uint64_t>(a + offs[0], p.m, p.k, p.a_rs, p.a_cs, pa);
    pack<uint64_t>(b + offs[1], p.k, p.n, p.b_rs, p.b_cs, pb);
    std::fill(acc.begin(), acc.end(), 0);
    for (int j0 = 0; j0 < p.n; j0 += kBlockN) {
      int j1 = std::min(p.n, j0 + kBlockN);
      for (int k0 = 0; k0 < p.k; k0 += kBlockK) {
        int k1 = std::min(p.k, k0 + kBlockK);
        for (int i = 0; i < p.m; ++i) {
          uint64_t* row = acc.data() + static_cast<size_t>(i) * p.n;
          for (int kk = k0; kk < k1; ++kk) {
            uint64_t aik = pa[static_cast<size_t>(i) * p.k + kk];
            if (aik == 0) continue;
            const uint64_t* brow = pb.data() + static_cast<size_t>(kk) * p.n;
            for (int j = j0; j < j1; ++j) row[j] += aik * brow[j];
          }
        }
      }
    }
    E* o = out + bi * mn;
    for (size_t i = 0; i < mn; ++i) {
      if constexpr (std::is_same_v<E, bool>) {
        o[i] = acc[i] != 0;
      } else {
        o[i] = static_cast<E>(acc[i]);
      }
    }
  }
}

void eval_product(
    const char* op, const array& a, const array& b, const array* c, array& out, float alpha,
    float beta) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  auto p = plan_product(a, b, c, out);
  dispatch_all_types(out.dtype(), [&]<typename E>() {
    const E* pa = static_cast<const E*>(a.raw_data());
    const E* pb = static_cast<const E*>(b.raw_data());
    E* po = static_cast<E*>(out.raw_data());
    if constexpr (is_float_v<E> || is_complex_v<E>) {
      const E* pc = c ? static_cast<const E*>(c->raw_data()) : nullptr;
      blas_product<E>(p, pa, pb, pc, po, alpha, beta);
    } else {
      if (c) {
        throw_invalid_argument(op, "the dtype must be floating or complex; got ", out.dtype(), ".");
      }
      integer_product<E>(p, pa, pb, po);
    }
  });
}

} // namespace

void Matmul::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_product("matmul", inputs[0], inputs[1], nullptr, outputs[0], 1.0f, 0.0f);
}

void AddMM::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_product("addmm", inputs[0], inputs[1], &inputs[2], outputs[0], alpha_, beta_);
}

} // namespace nuvec
