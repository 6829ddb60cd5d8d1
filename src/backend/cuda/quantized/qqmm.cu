// nuvec: QQMatmul::eval_gpu (meaning and input contract: src/quantized/quantized.h; MLX's
// qqmm). Two routes, both rounding x on the GPU exactly as the CPU kernel does (kernels:
// fp8_gemm.cuh):
//   fp8:  x to E4M3 codes with one scale per 32 slots, w_q's codes as E4M3 where needed, the
//         product on Hopper's FP8 tensor cores with per-group promotion;
//   bf16: fq(x) and fq(w) written as bfloat16 (exact: at most 4 significant bits), then the
//         bfloat16 GEMM of cuBLASLt (gemm.h), float32 accumulation.
// On the H200 the promotion at every 32 codes bounds the fp8 route far below cuBLAS's bf16
// rate (bench/qqmm_bench.cu), so bfloat16 x takes the bf16 route; float16 and
// float32 x take the fp8 route (gemm.h has no bf16 x bf16 -> float16/float32 product).
// NUVEC_QQMM_ROUTE=fp8 forces the fp8 route for bfloat16 x too (tests, timing).
// Other devices than sm_90 run the CPU kernel.
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "backend/cuda/copy.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/quantized/fp8_gemm.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "quantized/quantized.h"

namespace nuvec {

namespace {

/// Whether a bfloat16 qqmm takes the bf16 route: always, unless NUVEC_QQMM_ROUTE=fp8 (it was
/// measured faster from 16 to 8192 rows on the H200, bench/qqmm_bench.cu).
bool bf16_route() {
  const char* r = std::getenv("NUVEC_QQMM_ROUTE");
  return r == nullptr || std::strcmp(r, "fp8") != 0;
}

/// The bf16 route; false (nothing launched) when cuBLASLt has no algorithm for the layout.
bool qqmm_bf16(
    const __nv_bfloat16* x, const uint32_t* w, const uint8_t* scales, __nv_bfloat16* out, int64_t R, int64_t N,
    int64_t K, QuantSpec spec) {
  const cu::qq::Plan pl = cu::qq::make_plan(R, N, K, spec, w);
  auto* xb = static_cast<__nv_bfloat16*>(cu::scratch(static_cast<size_t>(R * K) * 2));
  auto* wb = static_cast<__nv_bfloat16*>(cu::scratch(static_cast<size_t>(N * K) * 2));
  cu::qq::dequantize_bf16(x, w, scales, pl, spec, xb, wb, cu::stream());
  const GemmProblem p{
      bfloat16, R, N, K, 1,
      {xb, false, K, 0}, // R x K row-major
      {wb, true, K, 0},  // K x N read column-major: w's rows are its columns
      {out, nullptr, N, 0}};
  return cu::gemm(p);
}

} // namespace

void QQMatmul::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  // The kernels are built for sm_90a (wgmma); anything else takes the CPU kernel.
  if (cu::device_props().major != 9) {
    cu::eval_on_host(*this, inputs, outputs);
    return;
  }
  array& out = outputs[0];
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  const array x = cu::as_row_contiguous(inputs[0]);
  const array w = cu::as_row_contiguous(inputs[1]);
  const array scales = cu::as_row_contiguous(inputs[2]);
  const int64_t K = x.shape(-1);
  const int64_t N = out.shape(-1);
  const int64_t R = static_cast<int64_t>(out.size()) / N;
  const auto* wp = cu::device_ptr<uint32_t>(w);
  const auto* sp = cu::device_ptr<uint8_t>(scales);
  auto alloc = [](size_t bytes) { return cu::scratch(bytes); };
  auto fp8 = [&]<typename T>() {
    cu::qq::qqmm<T>(cu::device_ptr<T>(x), wp, sp, static_cast<T*>(dst), R, N, K, spec_, cu::stream(), alloc);
  };
  if (x.dtype() == bfloat16) {
    const auto* xp = cu::device_ptr<__nv_bfloat16>(x);
    if (K > 0 && bf16_route() && qqmm_bf16(xp, wp, sp, static_cast<__nv_bfloat16*>(dst), R, N, K, spec_)) return;
    fp8.template operator()<__nv_bfloat16>();
  } else if (x.dtype() == float16) {
    fp8.template operator()<__half>();
  } else if (x.dtype() == float32) {
    fp8.template operator()<float>();
  } else {
    throw std::invalid_argument("[qqmm] x must have dtype float32, float16 or bfloat16.");
  }
}

} // namespace nuvec
