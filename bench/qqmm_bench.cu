// nuvec bench: qqmm's GPU kernels (src/backend/cuda/quantized/fp8_gemm.cuh) alone, against
// cuBLAS's bf16 GEMM of the same shape. Standalone (links cuBLAS only, none of nuvec), so
// the numbers can be taken before the library builds. First checks, on odd sizes for the
// three modes: x's codes and scales bit for bit against a host copy of the graph's
// rounding (src/ops/quantized.cpp), and the product against a float64 host sum over the
// same codes (fp8 route within 1e-3 of Σ|fq(x)||fq(w)|: the FP8 tensor core's accumulation;
// bf16 route within 1e-5). Then times, with events (median of 20 after warm-up), x bf16:
//   bf16 cuBLAS    cublasGemmEx bf16 x bf16 -> bf16, float32 compute, random data: the peer;
//   fp8 qqmm       the fp8 route's whole call (x quantized, w's scales decoded, the FP8
//                  product), with its FP8 product alone for 2 and 3 warpgroups, and x's
//                  quantization alone;
//   bf16 route     fq(x), fq(w) written as bfloat16 then cublasGemmEx (the library uses
//                  cuBLASLt through gemm.h), and its dequantization alone.
// Build (from the repository root):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr --extended-lambda \
//     -Iinclude -Isrc bench/qqmm_bench.cu -lcublas -o build/bench/qqmm_bench
// Run: qqmm_bench [M N K ...] (default: 4096 4096 4096, 4096 8192 8192, 8192 8192 8192).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/quantized/fp8_gemm.cuh"

using namespace nuvec;
namespace qq = nuvec::cu::qq;

#define CK(e)                                                                              \
  do {                                                                                     \
    cudaError_t err_ = (e);                                                                \
    if (err_ != cudaSuccess) {                                                             \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

// ---- host copy of the graph's rounding (src/ops/quantized.cpp) ----
uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t h_e4m3(float x) {
  uint32_t bits = fbits(x), sign = bits & 0x80000000u, mag = bits ^ sign, code;
  if (mag < (121u << 23)) code = fbits(bitsf(mag) + bitsf(141u << 23)) - (141u << 23);
  else code = (mag + ((static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFFu) + ((mag >> 20) & 1u)) >> 20;
  if (mag >= (543u << 21)) code = 0x7E;
  return (code | (sign >> 24)) & 0xFF;
}
uint32_t h_e2m1(float x) {
  float a = std::fabs(x);
  uint32_t c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  if (std::isnan(x)) return 7;
  return c | ((fbits(x) >> 31) << 3);
}
float h_e4m3_val(uint32_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  if (e == 15 && m == 7) mag = NAN;
  return (c & 0x80) ? -mag : mag;
}
float h_e2m1_val(uint32_t c) {
  static const float v[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  return (c & 8) ? -v[c & 7] : v[c & 7];
}
float h_scale_val(bool nv, uint32_t c) {
  return nv ? h_e4m3_val(c) : (c == 0 ? bitsf(0x00400000u) : bitsf(c << 23));
}


struct Mode {
  const char* name;
  QuantSpec spec;
};
const Mode kModes[] = {{"mxfp8", {QuantMode::Mxfp8, 32, 8}},
                       {"mxfp4", {QuantMode::Mxfp4, 32, 4}},
                       {"nvfp4", {QuantMode::Nvfp4, 16, 4}}};

// Random packed weights: codes of `bits` bits (E4M3 codes avoid NaN) and scale codes near 1.
void random_w(std::mt19937& g, const QuantSpec& sp, int64_t N, int64_t K, std::vector<uint32_t>& w,
              std::vector<uint8_t>& sc) {
  w.assign(N * K * sp.bits / 32, 0);
  std::uniform_int_distribution<int> code(0, (1 << sp.bits) - 1);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      uint32_t c = code(g);
      if (sp.bits == 8 && (c & 0x7F) == 0x7F) c = 0x7E;
      int64_t bit = (n * K + k) * sp.bits;
      w[bit / 32] |= c << (bit % 32);
    }
  }
  sc.assign(N * K / sp.group_size, 0);
  bool nv = sp.mode == QuantMode::Nvfp4;
  std::uniform_int_distribution<int> sd(nv ? 0x30 : 120, nv ? 0x40 : 130);
  for (auto& s : sc) s = static_cast<uint8_t>(sd(g));
}

// Checks one odd-sized case of a mode: x's codes and scales bit for bit, then the product.
bool check_case(const Mode& md, int64_t R, int64_t N, int64_t K, std::mt19937& g, int offset = 0) {
  const QuantSpec sp = md.spec;
  const bool nv = sp.mode == QuantMode::Nvfp4;
  std::vector<float> hx(R * K);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(-6.0f, 6.0f);
  for (int64_t r = 0; r < R; ++r) {
    float row_scale = std::ldexp(1.0f, static_cast<int>(ud(g) * 3)); // groups of many magnitudes
    for (int64_t k = 0; k < K; ++k) hx[r * K + k] = nd(g) * row_scale;
  }
  // Some zero groups and some huge / tiny values.
  for (int64_t k = 0; k < sp.group_size && k < K; ++k) hx[k] = 0.0f;
  if (R > 2) hx[2 * K + 1] = 1e30f, hx[2 * K + 3] = -1e-30f;
  std::vector<uint32_t> hw;
  std::vector<uint8_t> hs;
  random_w(g, sp, N, K, hw, hs);

  float *dx, *dout;
  uint32_t* dw;
  uint8_t* ds;
  CK(cudaMalloc(&dx, R * K * 4 + 64));
  float* dx_base = dx;
  dx += offset; // offset 2: x 8-byte aligned only, the quantizer's scalar loads
  CK(cudaMalloc(&dout, R * N * 4));
  CK(cudaMalloc(&dw, hw.size() * 4));
  CK(cudaMalloc(&ds, hs.size()));
  CK(cudaMemcpy(dx, hx.data(), R * K * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ds, hs.data(), hs.size(), cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xFF, R * N * 4)); // NaN poison: every element must be written
  std::vector<void*> bufs;
  auto alloc = [&](size_t n) {
    void* p;
    CK(cudaMalloc(&p, n));
    bufs.push_back(p);
    return p;
  };
  // Run the stages by hand to read the intermediates back.
  const qq::Plan pl = qq::make_plan(R, N, K, sp, dw);
  auto* xq = static_cast<uint8_t*>(alloc(pl.x_bytes));
  auto* sx = static_cast<float*>(alloc(pl.sx_bytes));
  auto* sw = static_cast<float*>(alloc(pl.sw_bytes));
  uint8_t* wq = pl.w_direct ? nullptr : static_cast<uint8_t*>(alloc(pl.w_bytes));
  qq::quantize_x<float>(dx, pl, sp, xq, sx, 0);
  qq::prepare_w(dw, ds, pl, sp, wq, sw, 0);
  qq::GemmArgs a{xq, pl.w_direct ? reinterpret_cast<const uint8_t*>(dw) : wq, sx, sw, dout, R, N, pl.Kp,
                 pl.Kp, pl.Kp, pl.lds_x, pl.lds_w};
  // The FP8 product's variants: [0] 2 warpgroups, scale products before the wait (kPre);
  // [1] 2 warpgroups; [2] 3 warpgroups (the library's two launches are [1] and [2]).
  std::vector<float> gv[3];
  for (int v = 0; v < 3; ++v) {
    CK(cudaMemset(dout, 0xFF, R * N * 4));
    if (v == 0) qq::fp8_gemm<float, 2, true>(a, 0);
    else if (v == 1) qq::fp8_gemm<float, 2, false>(a, 0);
    else qq::fp8_gemm<float, 3, false>(a, 0);
    CK(cudaDeviceSynchronize());
    gv[v].resize(R * N);
    CK(cudaMemcpy(gv[v].data(), dout, R * N * 4, cudaMemcpyDeviceToHost));
  }
  // The bf16 route: fq(x), fq(w) as bfloat16, cuBLAS with float32 output.
  std::vector<float> gout3(R * N);
  {
    __nv_bfloat16 *xb = static_cast<__nv_bfloat16*>(alloc(R * K * 2 + 16)), *wb = static_cast<__nv_bfloat16*>(alloc(N * K * 2 + 16));
    qq::dequantize_bf16<float>(dx, dw, ds, pl, sp, xb, wb, 0);
    cublasHandle_t h;
    cublasCreate(&h);
    const float one = 1.0f, zero = 0.0f;
    CK(cudaMemset(dout, 0xFF, R * N * 4));
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(R), int(K), &one, wb, CUDA_R_16BF, int(K), xb, CUDA_R_16BF,
                 int(K), &zero, dout, CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    CK(cudaDeviceSynchronize());
    cublasDestroy(h);
    CK(cudaMemcpy(gout3.data(), dout, R * N * 4, cudaMemcpyDeviceToHost));
  }
  std::vector<uint8_t> gxq(pl.x_bytes);
  std::vector<float> gsx(pl.sx_bytes / 4);
  CK(cudaMemcpy(gxq.data(), xq, pl.x_bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gsx.data(), sx, pl.sx_bytes, cudaMemcpyDeviceToHost));

  // Host rounding of x, and fq(x) values.
  const int gs = sp.group_size;
  std::vector<float> fx(R * K);
  int64_t code_bad = 0, scale_bad = 0;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t gi = 0; gi < K / gs; ++gi) {
      float amax = 0;
      for (int i = 0; i < gs; ++i) amax = std::max(amax, std::fabs(hx[r * K + gi * gs + i]));
      float scale = amax / (sp.bits == 4 ? 6.0f : 448.0f);
      uint32_t scode;
      if (nv) scode = h_e4m3(scale);
      else scode = scale == 0 ? 127u : uint32_t(std::clamp(std::rint(std::log2(scale)), -127.0f, 127.0f) + 127.0f);
      float dec = h_scale_val(nv, scode);
      if (fbits(gsx[gi * pl.lds_x + r]) != fbits(dec)) ++scale_bad;
      for (int i = 0; i < gs; ++i) {
        float s = dec == 0 ? 0.0f : hx[r * K + gi * gs + i] / dec;
        uint32_t c = sp.bits == 4 ? h_e2m1(s) : h_e4m3(s);
        float val = sp.bits == 4 ? h_e2m1_val(c) : h_e4m3_val(c);
        fx[r * K + gi * gs + i] = val * dec;
        uint8_t gb = gxq[r * pl.Kp + gi * 32 + i];
        float gval = h_e4m3_val(gb);
        if (fbits(gval) != fbits(val) && !(std::isnan(gval) && std::isnan(val))) ++code_bad;
      }
    }
  }
  // Product: float64 over fq(x) and fq(w).
  std::vector<float> fw(N * K);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t bit = (n * K + k) * sp.bits;
      uint32_t c = (hw[bit / 32] >> (bit % 32)) & ((1u << sp.bits) - 1);
      fw[n * K + k] = (sp.bits == 4 ? h_e2m1_val(c) : h_e4m3_val(c)) * h_scale_val(nv, hs[n * (K / gs) + k / gs]);
    }
  }
  // Outputs: the three FP8 variants (within 1e-3 of the bound: the FP8 tensor core's
  // accumulation), then the bf16 route (within 1e-5).
  const std::vector<float>* outs[4] = {&gv[0], &gv[1], &gv[2], &gout3};
  double max_rel[4] = {0, 0, 0, 0};
  int64_t bad[4] = {0, 0, 0, 0};
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, bound = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += double(fx[r * K + k]) * fw[n * K + k];
        bound += std::fabs(double(fx[r * K + k]) * fw[n * K + k]);
      }
      for (int v = 0; v < 4; ++v) {
        double e = std::fabs((*outs[v])[r * N + n] - ref);
        double rel = bound > 0 ? e / bound : e;
        bad[v] += !(rel <= (v == 3 ? 1e-5 : 1e-3));
        if (!(rel <= max_rel[v])) max_rel[v] = std::isnan(rel) ? INFINITY : std::max(max_rel[v], rel);
      }
    }
  }
  const bool fail = code_bad || scale_bad || bad[0] || bad[1] || bad[2] || bad[3];
  std::printf("check %-5s%s R=%lld N=%lld K=%lld: x codes wrong %lld, scales wrong %lld; err/bound max (bad): "
              "fp8 2wg-pre %.3g (%lld), 2wg %.3g (%lld), 3wg %.3g (%lld), bf16 route %.3g (%lld)  %s\n",
              md.name, offset ? " (unaligned x)" : "", (long long)R, (long long)N, (long long)K, (long long)code_bad,
              (long long)scale_bad, max_rel[0], (long long)bad[0], max_rel[1], (long long)bad[1], max_rel[2],
              (long long)bad[2], max_rel[3], (long long)bad[3], fail ? "FAIL" : "ok");
  for (void* p : bufs) CK(cudaFree(p));
  CK(cudaFree(dx_base));
  CK(cudaFree(dout));
  CK(cudaFree(dw));
  CK(cudaFree(ds));
  return !fail;
}

template <typename F>
float median_ms(F&& f, int reps = 20) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f(i);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    f(i);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__global__ void fill_bf16(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16((int(h & 0xFFFF) - 32768) / 16384.0f);
  }
}
__global__ void fill_bytes(uint8_t* p, int64_t n, uint32_t seed, bool fp8) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    uint8_t c = uint8_t(h);
    if (fp8 && (c & 0x7F) == 0x7F) c = 0x7E;
    p[i] = c;
  }
}

void time_shape(int64_t M, int64_t N, int64_t K, cublasHandle_t h) {
  const double flops = 2.0 * M * N * K;
  // Two input sets, alternated, so repeated runs do not read one set from L2.
  __nv_bfloat16 *x[2], *wb, *ob;
  CK(cudaMalloc(&x[0], M * K * 2));
  CK(cudaMalloc(&x[1], M * K * 2));
  CK(cudaMalloc(&wb, N * K * 2));
  CK(cudaMalloc(&ob, M * N * 2));
  fill_bf16<<<1024, 256>>>(x[0], M * K, 1);
  fill_bf16<<<1024, 256>>>(x[1], M * K, 2);
  fill_bf16<<<1024, 256>>>(wb, N * K, 3);
  CK(cudaDeviceSynchronize());
  const float one = 1.0f, zero = 0.0f;
  float t_bf16 = median_ms([&](int i) {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, wb, CUDA_R_16BF, int(K), x[i & 1],
                 CUDA_R_16BF, int(K), &zero, ob, CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  std::printf("%lld x %lld x %lld  bf16 cuBLAS      %8.3f ms  %7.1f TFLOP/s\n", (long long)M, (long long)N,
              (long long)K, t_bf16, flops / t_bf16 / 1e9);
  for (const Mode& md : kModes) {
    const QuantSpec sp = md.spec;
    uint8_t *w, *sc;
    CK(cudaMalloc(&w, N * K * sp.bits / 8));
    CK(cudaMalloc(&sc, N * K / sp.group_size));
    fill_bytes<<<1024, 256>>>(w, N * K * sp.bits / 8, 4, sp.bits == 8);
    fill_bytes<<<1024, 256>>>(sc, N * K / sp.group_size, 5, false);
    // Scale codes near 1 (E8M0 120..135, E4M3 0x30..0x3f).
    CK(cudaDeviceSynchronize());
    {
      std::vector<uint8_t> hs(N * K / sp.group_size);
      CK(cudaMemcpy(hs.data(), sc, hs.size(), cudaMemcpyDeviceToHost));
      for (auto& s : hs) s = sp.mode == QuantMode::Nvfp4 ? uint8_t(0x30 + (s & 15)) : uint8_t(120 + (s & 15));
      CK(cudaMemcpy(sc, hs.data(), hs.size(), cudaMemcpyHostToDevice));
    }
    const qq::Plan pl = qq::make_plan(M, N, K, sp, w);
    std::vector<void*> pool;
    size_t used = 0;
    auto get = [&](size_t n) {
      if (used < pool.size()) return pool[used++];
      void* p;
      CK(cudaMalloc(&p, n));
      pool.push_back(p);
      ++used;
      return p;
    };
    auto* wq32 = reinterpret_cast<const uint32_t*>(w);
    float t_all = median_ms([&](int i) {
      used = 0;
      qq::qqmm<__nv_bfloat16>(x[i & 1], wq32, sc, ob, M, N, K, sp, 0, get);
    });
    // The stages alone, on buffers prepared once.
    auto* xq = static_cast<uint8_t*>(get(pl.x_bytes));
    auto* sx = static_cast<float*>(get(pl.sx_bytes));
    auto* sw = static_cast<float*>(get(pl.sw_bytes));
    uint8_t* wq = pl.w_direct ? nullptr : static_cast<uint8_t*>(get(pl.w_bytes));
    qq::quantize_x<__nv_bfloat16>(x[0], pl, sp, xq, sx, 0);
    qq::prepare_w(wq32, sc, pl, sp, wq, sw, 0);
    qq::GemmArgs a{xq, pl.w_direct ? w : wq, sx, sw, ob, M, N, pl.Kp, pl.Kp, pl.Kp, pl.lds_x, pl.lds_w};
    float t_gemm = median_ms([&](int) { qq::fp8_gemm<__nv_bfloat16, 2, true>(a, 0); });
    float t_gemm2n = median_ms([&](int) { qq::fp8_gemm<__nv_bfloat16, 2, false>(a, 0); });
    float t_gemm3 = median_ms([&](int) { qq::fp8_gemm<__nv_bfloat16, 3>(a, 0); });
    float t_quant = median_ms([&](int i) { qq::quantize_x<__nv_bfloat16>(x[i & 1], pl, sp, xq, sx, 0); });
    // The alternative: fq(x), fq(w) as bfloat16 (exact), then cuBLAS's bfloat16 GEMM.
    __nv_bfloat16 *xd, *wd;
    CK(cudaMalloc(&xd, M * K * 2));
    CK(cudaMalloc(&wd, N * K * 2));
    float t_deq_only = median_ms([&](int i) { qq::dequantize_bf16<__nv_bfloat16>(x[i & 1], wq32, sc, pl, sp, xd, wd, 0); });
    float t_deq = median_ms([&](int i) {
      qq::dequantize_bf16<__nv_bfloat16>(x[i & 1], wq32, sc, pl, sp, xd, wd, 0);
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, wd, CUDA_R_16BF, int(K), xd,
                   CUDA_R_16BF, int(K), &zero, ob, CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    CK(cudaFree(xd));
    CK(cudaFree(wd));
    std::printf("%lld x %lld x %lld  %-5s fp8 qqmm %8.3f ms %6.1f TFLOP/s %.2fx bf16 | fp8 gemm 2wg-pre %6.1f, 2wg %6.1f, 3wg %6.1f TFLOP/s | quant %.3f ms"
                " || bf16 route %8.3f ms %6.1f TFLOP/s %.2fx bf16 (dequant %.3f ms)\n",
                (long long)M, (long long)N, (long long)K, md.name, t_all, flops / t_all / 1e9, t_bf16 / t_all,
                flops / t_gemm / 1e9, flops / t_gemm2n / 1e9, flops / t_gemm3 / 1e9, t_quant, t_deq, flops / t_deq / 1e9, t_bf16 / t_deq, t_deq_only);
    for (void* p : pool) CK(cudaFree(p));
    CK(cudaFree(w));
    CK(cudaFree(sc));
  }
  CK(cudaFree(x[0]));
  CK(cudaFree(x[1]));
  CK(cudaFree(wb));
  CK(cudaFree(ob));
}

} // namespace

int main(int argc, char** argv) {
  std::mt19937 g(7);
  bool ok = true;
  for (const Mode& md : kModes) {
    ok &= check_case(md, 3, 5, 4 * md.spec.group_size, g);
    ok &= check_case(md, 197, 131, 384, g);
    ok &= check_case(md, 129, 255, 96, g);
    ok &= check_case(md, 260, 384, 1024, g);
    ok &= check_case(md, 65, 70, 512, g, 2);
  }
  std::printf("checks: %s\n", ok ? "all ok" : "FAILURES");
  cublasHandle_t h;
  cublasCreate(&h);
  std::vector<int64_t> shapes;
  for (int i = 1; i < argc; ++i) shapes.push_back(std::atoll(argv[i]));
  if (shapes.empty()) shapes = {4096, 4096, 4096, 4096, 8192, 8192, 8192, 8192, 8192};
  for (size_t i = 0; i + 2 < shapes.size(); i += 3) time_shape(shapes[i], shapes[i + 1], shapes[i + 2], h);
  cublasDestroy(h);
  return ok ? 0 : 1;
}
