// nuvec: cu::gemm (gemm.h) through cuBLASLt. cuBLASLt is column-major, so the row-major
// product D = A @ B is issued as its transpose D^T = B^T @ A^T: a row-major matrix is its
// column-major transpose in the same memory, and a column-major operand becomes a transpose
// flag, so no operand is ever copied here. One handle per device, one 32 MiB workspace per
// (device, stream) (work on one stream is ordered, so its workspace is never used twice at
// once), and a cache of descriptors + heuristic algorithm per problem.
#include "backend/cuda/gemm.h"

#include <cublasLt.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/runtime/runtime.h"

namespace nuvec::cu {

namespace {

/// Throws std::runtime_error "[cublasLt] <call>: <status>" unless st is CUBLAS_STATUS_SUCCESS.
void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(
        std::string("[cublasLt] ") + what + ": " + cublasLtGetStatusString(st));
  }
}
#define NUVEC_CUBLASLT_CHECK(expr) check_lt((expr), #expr)

// The workspace cuBLASLt recommends on Hopper (its heuristic picks faster kernels, such as
// split-K and stream-K ones, when it may use one).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Cached plans beyond this count are dropped all at once (plans in use stay alive through
// their shared_ptr); real programs use a handful of shapes.
constexpr size_t kMaxCachedPlans = 1024;

/// The current CUDA device of the calling (worker) thread.
int current_device() {
  int dev = 0;
  NUVEC_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

/// The cuBLASLt handle of `device` (created on first use, kept for the process).
cublasLtHandle_t handle_for(int device) {
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t h = nullptr;
  NUVEC_CUBLASLT_CHECK(cublasLtCreate(&h));
  handles.emplace(device, h);
  return h;
}

/// The workspace of (device, stream): kWorkspaceBytes of device memory, allocated on first use
/// and kept for the process (streams are few and long-lived).
void* workspace_for(int device, cudaStream_t stream) {
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, void*> spaces;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(device, stream);
  auto it = spaces.find(key);
  if (it != spaces.end()) return it->second;
  void* p = nullptr;
  NUVEC_CUDA_CHECK(cudaMalloc(&p, kWorkspaceBytes));
  spaces.emplace(key, p);
  return p;
}

/// Whether NUVEC_TF32=1 allows TF32 tensor cores for float32 (read once). Off by default, so
/// float32 products round like the CPU's sgemm (to float32, not to TF32's 10-bit mantissa).
bool tf32_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("NUVEC_TF32");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return allowed;
}

/// cuBLASLt's element, compute and scale types for a nuvec dtype.
struct TypeInfo {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
  size_t size;
};

/// The cuBLASLt types of dtype; throws std::invalid_argument naming matmul for dtypes
/// cuBLASLt does not multiply here (integers, bool).
TypeInfo type_info(Dtype dtype) {
  switch (dtype.val()) {
    case Dtype::Val::float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F, 2};
    case Dtype::Val::bfloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F, 2};
    case Dtype::Val::float32:
      return {
          CUDA_R_32F, tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
          CUDA_R_32F, 4};
    case Dtype::Val::float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F, 8};
    case Dtype::Val::complex64: return {CUDA_C_32F, CUBLAS_COMPUTE_32F, CUDA_C_32F, 8};
    default: break;
  }
  throw std::invalid_argument("[matmul] the GPU gemm takes floating or complex dtypes only.");
}

/// The largest power of two (<= 256, cuBLASLt's default requirement) dividing the byte
/// address of ptr and every given byte offset, the alignment cuBLASLt may assume for a matrix
/// whose rows or batches start at those offsets.
uint32_t alignment_of(const void* ptr, std::initializer_list<int64_t> byte_offsets) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr);
  for (int64_t off : byte_offsets) bits |= static_cast<uint64_t>(off < 0 ? -off : off);
  uint32_t a = 256;
  while (a > 1 && (bits % a) != 0) a >>= 1;
  return a;
}

/// The descriptors and chosen algorithm of one problem. Read-only once built, so calls from
/// several worker threads may share it.
struct Plan {
  cublasLtMatmulDesc_t desc{nullptr};
  cublasLtMatrixLayout_t a{nullptr}, b{nullptr}, d{nullptr};
  cublasLtMatmulAlgo_t algo{};
  size_t workspace{0};
  bool found{false};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

/// A column-major layout descriptor (rows x cols, ld) of `batch` matrices `stride` apart.
cublasLtMatrixLayout_t make_layout(
    cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  NUVEC_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(
      &layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  int32_t count = static_cast<int32_t>(batch);
  NUVEC_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  NUVEC_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  return layout;
}

/// Everything a plan depends on, as the cache key.
using PlanKey = std::vector<int64_t>;

/// Builds the plan of a column-major problem D' (M x N) = op(A') (M x K) @ op(B') (K x N),
/// where A' is our B and B' is our A (see the file comment). Queries the heuristic once.
std::shared_ptr<Plan> build_plan(
    cublasLtHandle_t handle,
    const TypeInfo& t,
    int64_t m,
    int64_t n,
    int64_t k,
    int64_t batch,
    const GemmOperand& a,
    const GemmOperand& b,
    const GemmOutput& out,
    const uint32_t (&align)[4]) {
  auto plan = std::make_shared<Plan>();
  NUVEC_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&plan->desc, t.compute, t.scale));
  // cuBLASLt's A is our B (k x n): a row-major B is the column-major n x k matrix B^T, which
  // is what we need (no transpose); a column-major B is stored as k x n and is transposed.
  cublasOperation_t ta = b.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLASLt's B is our A (m x k), needed as A^T (k x m), by the same reasoning.
  cublasOperation_t tb = a.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  NUVEC_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  NUVEC_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  plan->a = b.col_major ? make_layout(t.data, k, n, b.ld, batch, b.batch_stride)
                        : make_layout(t.data, n, k, b.ld, batch, b.batch_stride);
  plan->b = a.col_major ? make_layout(t.data, m, k, a.ld, batch, a.batch_stride)
                        : make_layout(t.data, k, m, a.ld, batch, a.batch_stride);
  // D^T is column-major n x m with our row stride as its leading dimension; C shares it.
  plan->d = make_layout(t.data, n, m, out.ld, batch, out.batch_stride);

  cublasLtMatmulPreference_t pref = nullptr;
  NUVEC_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  // The preference is destroyed on every path out of here.
  std::unique_ptr<void, void (*)(void*)> pref_guard(
      pref, [](void* p) { cublasLtMatmulPreferenceDestroy(static_cast<cublasLtMatmulPreference_t>(p)); });
  uint64_t ws = kWorkspaceBytes;
  NUVEC_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // Split-K partial sums only in the compute type (float32 for the half types): the schemes
  // that reduce in the output's type (INPLACE, OUTPUT_TYPE) round every partial sum to
  // bfloat16 / float16, which for a bf16 product of 9 x 1000 x 300 moved results by 5 ulps
  // (6.0 for 6.156), against the one rounding at the end this file promises.
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  NUVEC_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)));
  // Swapped as the operands are: cuBLASLt's A is our B.
  const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  const uint32_t values[4] = {align[1], align[0], align[2], align[3]};
  for (int i = 0; i < 4; ++i) {
    NUVEC_CUBLASLT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &values[i], sizeof(values[i])));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
    plan->found = false; // cached too, so the caller's retry path does not ask again
    return plan;
  }
  NUVEC_CUBLASLT_CHECK(st);
  if (result.state != CUBLAS_STATUS_SUCCESS) {
    plan->found = false;
    return plan;
  }
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  plan->found = true;
  return plan;
}

/// The cached plan of a problem, building it on first use.
std::shared_ptr<Plan> get_plan(
    cublasLtHandle_t handle,
    int device,
    Dtype dtype,
    const TypeInfo& t,
    int64_t m,
    int64_t n,
    int64_t k,
    int64_t batch,
    const GemmOperand& a,
    const GemmOperand& b,
    const GemmOutput& out,
    const uint32_t (&align)[4]) {
  static std::mutex mu;
  static std::map<PlanKey, std::shared_ptr<Plan>> cache;
  // Batch strides only matter when there is more than one batch.
  int64_t sa = batch > 1 ? a.batch_stride : 0, sb = batch > 1 ? b.batch_stride : 0;
  int64_t sd = batch > 1 ? out.batch_stride : 0;
  PlanKey key = {
      device, static_cast<int64_t>(dtype.val()), static_cast<int64_t>(t.compute),
      m, n, k, batch,
      a.col_major, a.ld, sa, b.col_major, b.ld, sb, out.ld, sd,
      align[0], align[1], align[2], align[3]};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  // Built outside the lock (the heuristic takes tens of microseconds); two threads building
  // the same plan at once both succeed and one result is kept.
  GemmOperand ka = a, kb = b;
  ka.batch_stride = sa;
  kb.batch_stride = sb;
  GemmOutput kout = out;
  kout.batch_stride = sd;
  auto plan = build_plan(handle, t, m, n, k, batch, ka, kb, kout, align);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMaxCachedPlans) cache.clear();
  return cache.emplace(std::move(key), plan).first->second;
}

} // namespace

bool gemm(const GemmProblem& p) {
  const Dtype dtype = p.dtype;
  const int64_t m = p.m, n = p.n, k = p.k, batch = p.batch;
  const GemmOperand& a = p.a;
  const GemmOperand& b = p.b;
  const GemmOutput& out = p.out;
  const double alpha = p.alpha, beta = p.beta;
  if (m < 1 || n < 1 || k < 1 || batch < 1 || batch > INT32_MAX) {
    throw std::invalid_argument(
        "[matmul] cu::gemm needs m, n, k >= 1 and 1 <= batch <= 2^31 - 1.");
  }
  TypeInfo t = type_info(dtype);
  const int64_t es = static_cast<int64_t>(t.size);
  const bool has_c = out.c != nullptr && beta != 0.0;
  const void* c = has_c ? out.c : out.ptr;
  // Alignments in our operand order (A, B, C, D). Leading dimensions and batch strides are
  // included because every row/column and batch must start as aligned as the first.
  uint32_t align[4] = {
      alignment_of(a.ptr, {a.ld * es, batch > 1 ? a.batch_stride * es : 0}),
      alignment_of(b.ptr, {b.ld * es, batch > 1 ? b.batch_stride * es : 0}),
      alignment_of(c, {out.ld * es, batch > 1 ? out.batch_stride * es : 0}),
      alignment_of(out.ptr, {out.ld * es, batch > 1 ? out.batch_stride * es : 0})};
  int device = current_device();
  cublasLtHandle_t handle = handle_for(device);
  auto plan = get_plan(handle, device, dtype, t, m, n, k, batch, a, b, out, align);
  if (!plan->found) return false;

  cudaStream_t s = stream();
  void* ws = plan->workspace > 0 ? workspace_for(device, s) : nullptr;
  // Scale factors in the scale type: float for the float32-compute types, double for
  // float64, (re, im) floats for complex64.
  float fa[2] = {static_cast<float>(alpha), 0.0f};
  float fb[2] = {has_c ? static_cast<float>(beta) : 0.0f, 0.0f};
  double da = alpha, db = has_c ? beta : 0.0;
  const void* pa = t.scale == CUDA_R_64F ? static_cast<const void*>(&da) : fa;
  const void* pb = t.scale == CUDA_R_64F ? static_cast<const void*>(&db) : fb;
  NUVEC_CUBLASLT_CHECK(cublasLtMatmul(
      handle, plan->desc, pa, b.ptr, plan->a, a.ptr, plan->b, pb, c, plan->d, out.ptr, plan->d,
      &plan->algo, ws, plan->workspace, s));
  return true;
}

} // namespace nuvec::cu
