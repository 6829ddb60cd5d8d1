// nuvec: Matmul and AddMM on the GPU. Floating and complex products go through cu::gemm
// (gemm.h, cuBLASLt): operands whose last two axes are row- or column-major are read in
// place, batches become strided-batched calls (one per run of uniformly strided batches),
// and AddMM's c is either read in place (dense) or copied into the output first (broadcast
// or strided) so that cuBLASLt adds it in place. Products of at most 8 rows with a
// transposed row-major matrix (a Linear layer's weight in decode) take the GEMV kernel of
// gemv.cu instead of cuBLASLt. Integer and bool products use the tiled
// wrap-around kernel of int_matmul.cu. Semantics: src/backend/cpu/matmul.cpp.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/int_matmul.h"
#include "backend/cuda/scale.h"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Most strided-batched calls one product may issue before its operands are copied to dense
// form (which merges every batch axis into one call).
constexpr int64_t kMaxBatchCalls = 64;

// Largest batch count of one cuBLASLt call (its batch count is an int32).
constexpr int64_t kMaxBatchPerCall = int64_t{1} << 30;

/// Whether dtype goes through cuBLASLt (the CPU's BLAS dtypes plus the half types).
bool is_gemm_dtype(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64 || t == complex64;
}

/// Strides of x's batch axes (all but the last two) for iterating out's batch shape: 0 on
/// size-1 (broadcast) axes, as the CPU's plan_product.
Strides batch_strides(const array& x, size_t nbatch) {
  Strides s(nbatch, 0);
  for (size_t i = 0; i < nbatch; ++i) s[i] = x.shape(static_cast<int>(i)) == 1 ? 0 : x.strides()[i];
  return s;
}

/// Whether x's last two axes (rows x cols) can be read in place and no batch stride is
/// negative (cuBLASLt batch offsets must be >= 0).
bool gemm_readable(const array& x, size_t nbatch) {
  int nd = static_cast<int>(x.ndim());
  if (!matrix_layout(x.shape(-2), x.shape(-1), x.strides()[nd - 2], x.strides()[nd - 1])
           .in_place) {
    return false;
  }
  for (int64_t s : batch_strides(x, nbatch)) {
    if (s < 0) return false;
  }
  return true;
}

/// A row-contiguous device copy of x kept alive until the node's kernels have run.
array dense_copy(const array& x) {
  array c = cu::contiguous_copy(x);
  cu::retain(c);
  return c;
}

/// One pass of the floating product over every batch: the batch axes are merged where all
/// operands allow, each remaining run of uniformly strided batches is one strided-batched
/// cu::gemm call. Returns false, having issued nothing useful, when that would take more than
/// kMaxBatchCalls calls or cuBLASLt has no algorithm for a call (calls already issued wrote
/// their batches correctly; the retry rewrites them). a and b are readable in place
/// (gemm_readable); po is out's row-contiguous buffer and c_dense (or null) c's data in that
/// same layout.
bool run_product(
    const array& a,
    const array& b,
    const void* c_dense,
    void* po,
    const array& out,
    int64_t k,
    float alpha,
    float beta) {
  const size_t nbatch = out.ndim() - 2;
  const int nd = static_cast<int>(out.ndim());
  const int64_t m = out.shape(-2), n = out.shape(-1);
  const Dtype dtype = out.dtype();
  const int64_t es = static_cast<int64_t>(size_of(dtype));
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Strides out_strides = row_strides(out.shape());
  out_strides.resize(nbatch);
  StridedPlan plan =
      collapse_dims(batch, {batch_strides(a, nbatch), batch_strides(b, nbatch), out_strides});
  int64_t calls = 1;
  for (size_t d = 0; d + 1 < plan.shape.size(); ++d) calls *= plan.shape[d];
  if (calls > kMaxBatchCalls) return false;
  auto la = matrix_layout(m, k, a.strides()[nd - 2], a.strides()[nd - 1]);
  auto lb = matrix_layout(k, n, b.strides()[nd - 2], b.strides()[nd - 1]);
  const char* pa = static_cast<const char*>(cu::device_ptr(a));
  const char* pb = static_cast<const char*>(cu::device_ptr(b));
  char* pd = static_cast<char*>(po);
  const char* pc = static_cast<const char*>(c_dense);
  bool ok = true;
  for_each_run<3>(plan, [&](const int64_t* offs, int64_t len, const int64_t* inner) {
    for (int64_t j0 = 0; ok && j0 < len; j0 += kMaxBatchPerCall) {
      int64_t count = std::min(kMaxBatchPerCall, len - j0);
      GemmOperand ga{pa + (offs[0] + j0 * inner[0]) * es, la.col_major, la.ld, inner[0]};
      GemmOperand gb{pb + (offs[1] + j0 * inner[1]) * es, lb.col_major, lb.ld, inner[1]};
      int64_t o = (offs[2] + j0 * inner[2]) * es;
      GemmOutput go{pd + o, pc ? pc + o : nullptr, n, inner[2]};
      ok = cu::gemm({dtype, m, n, k, count, ga, gb, go, alpha, beta});
    }
  });
  return ok;
}

/// The shared body of Matmul and AddMM: out = alpha * a @ b (+ beta * c when c is given and
/// beta != 0; as the CPU's BLAS path, c is then never read, so NaNs in it vanish). a, b (and
/// c) have out's ndim with batches broadcast.
void eval_product(
    const char* op, const array& a, const array& b, const array* c, array& out, float alpha,
    float beta) {
  const Dtype dtype = out.dtype();
  if (!is_gemm_dtype(dtype) && !c) {
    cu::integer_matmul(a, b, out); // allocates out itself
    return;
  }
  void* po = cu::alloc_output(out);
  if (out.size() == 0) return;
  if (!is_gemm_dtype(dtype)) {
    throw_invalid_argument(op, "the dtype must be floating or complex; got ", dtype, ".");
  }
  const size_t nbatch = out.ndim() - 2;
  const int64_t k = a.shape(-1);
  const bool use_c = c != nullptr && beta != 0.0f;
  const void* c_dense = nullptr;
  // Broadcast or strided c is written into out, which cuBLASLt then updates in place.
  auto load_c_into_out = [&] {
    cu::copy_elements(
        cu::device_ptr(*c), c->dtype(), c->strides(), po, dtype, row_strides(out.shape()),
        out.shape());
  };
  if (use_c) {
    if (c->flags().row_contiguous && c->dtype() == dtype && c->shape() == out.shape()) {
      c_dense = cu::device_ptr(*c);
    } else {
      load_c_into_out();
      c_dense = po;
    }
  }
  if (k == 0) {
    // An empty sum: the product is zero, so the result is beta * c (or zero).
    if (!use_c) {
      NUVEC_CUDA_CHECK(cudaMemsetAsync(po, 0, out.nbytes(), cu::stream()));
      return;
    }
    if (c_dense != po) {
      NUVEC_CUDA_CHECK(cudaMemcpyAsync(
          po, c_dense, out.nbytes(), cudaMemcpyDeviceToDevice, cu::stream()));
    }
    cu::scale_in_place(po, dtype, static_cast<int64_t>(out.size()), beta);
    return;
  }
  // A few rows times a Linear layer's transposed weight (decode): the GEMV kernel.
  if (!use_c && alpha == 1.0f && cu::gemv(a, b, out, po)) return;
  array a2 = gemm_readable(a, nbatch) ? a : dense_copy(a);
  array b2 = gemm_readable(b, nbatch) ? b : dense_copy(b);
  if (run_product(a2, b2, c_dense, po, out, k, alpha, use_c ? beta : 0.0f)) return;
  // Too many batch runs, or no algorithm for these alignments: dense copies merge every
  // batch axis into one run and start 256-byte aligned.
  bool recopied = false;
  if (!a2.flags().row_contiguous) {
    a2 = dense_copy(a);
    recopied = true;
  }
  if (!b2.flags().row_contiguous) {
    b2 = dense_copy(b);
    recopied = true;
  }
  // Batches a failed pass already computed in place overwrote their share of c.
  if (recopied && c_dense == po) load_c_into_out();
  if (recopied && run_product(a2, b2, c_dense, po, out, k, alpha, use_c ? beta : 0.0f)) return;
  throw std::runtime_error(
      std::string("[") + op + "] cuBLASLt found no algorithm for this product.");
}

} // namespace

/// out = a @ b for every dtype (the CPU's Matmul::eval_cpu on the GPU).
void Matmul::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_product("matmul", inputs[0], inputs[1], nullptr, outputs[0], 1.0f, 0.0f);
}

/// out = alpha * a @ b + beta * c for the floating and complex dtypes (AddMM::eval_cpu).
void AddMM::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_product("addmm", inputs[0], inputs[1], &inputs[2], outputs[0], alpha_, beta_);
}

} // namespace nuvec
