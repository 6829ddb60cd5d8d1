// nuvec bench: the tensor-core quantized products (src/backend/cuda/quantized/qmm.cu) alone,
// against cuBLAS's bf16 GEMM of the same shape. Standalone: qmm.cu is compiled into this
// file with the few runtime functions it calls defined below (stream, scratch, checks), so
// it runs before the library links. First checks every covered format (affine 2/4/8 bits,
// groups 32/64/128; mxfp4, mxfp8, nvfp4), float16 and bfloat16, odd sizes (M 9, 17, 64,
// 130, N not a multiple of 128), gathered entries (unsorted, M > 8 each), the sorted
// one-row-per-entry grouping and out-of-range indices, against a host float64 sum over the
// dequantized weights, each rounded once to T (s * q + b in float32, as the kernels do); the
// output is poisoned first, so unwritten elements fail. The swapped kernel (M <= 256,
// affine 4/8 bits) gets its own cases: groups per row odd (scales starting mid-word), every
// token tile, M = 256, forced split counts, and each configuration launched directly (the
// dispatch uses some of them), with its own and a forced split count. Then times (events,
// median of 7 loops of 20 after warm-up, weights rotated over buffers larger than L2, random
// data):
//   qmm    the product as dispatched (the split-K reduction included),
//   tiled  H3's dequantize-to-shared kernel, where qmm now takes the swapped one (M <= 256),
//   bf16   cublasGemmEx bf16 x bf16 -> bf16, float32 compute.
// Build (from the repository root):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
//     --extended-lambda -DNUVEC_WITH_CUDA=1 -Iinclude -Isrc bench/qmm_bench.cu -lcublas \
//     -o build/bench/qmm_bench
// Run: qmm_bench [check | few] [time | variants | prof]  (check and time by default; few: a
// subset of the checks, for the sanitizers; variants: also time the swapped kernel's
// configurations at split counts 1..16; prof: a few launches (M 16 and 256) for ncu). A
// summary table (ratios to cuBLAS) comes last.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/quantized/qmm.cu"

#include "quant_bench_common.cuh"

namespace {

bool bench_covers(const cu::QmmArgs& a) {
  return cu::qmm_covers(a);
}
void bench_run(const cu::QmmArgs& a) {
  cu::qmm(a);
}


// few: one format and type (for the slow sanitizer tools).
int run_checks(bool few) {
  std::mt19937 g(1234);
  int fails = 0;
  for (const NamedFormat& f : kFormats) {
    if (f.sp.mode == QuantMode::Affine && f.sp.bits == 3) continue; // qmm_generic's (not covered)
    // few: affine 4 bits g64 in bfloat16 and affine 8 bits g64 in float16 (both kernels' paths).
    if (few && &f != kFormats && &f != kFormats + 3) continue;
    for (bool bf : {true, false}) {
      if (few && bf != (&f == kFormats)) continue;
      for (int64_t M : {9, 17, 64, 130}) {
        const int64_t N = M == 130 ? 136 : 200, K = M == 64 ? 1024 : 384;
        const std::string what = std::string(f.name) + (bf ? " bf16" : " f16") + " M=" + std::to_string(M) +
            " N=" + std::to_string(N) + " K=" + std::to_string(K);
        fails += !check_product(what.c_str(), g, f.sp, bf, M, N, K, 1, 1, 1, {}, {}, false);
      }
    }
  }
  const QuantSpec a4{QuantMode::Affine, 64, 4};
  // The swapped kernel (affine 4/8 bits, 8 < M <= 256): every token tile shape (16, 32, 64,
  // 128 tokens), partial token and row tiles, rows whose first scale is the upper half of a
  // 4-byte word (groups per row odd: K 448 g64, K 2368 g64), split K with 2..16 splits.
  for (int bits : {4, 8}) {
    for (bool bf : {true, false}) {
      const QuantSpec sp{QuantMode::Affine, 64, bits};
      const char* tn = bf ? "bf16" : "f16";
      const std::string b = "swap affine" + std::to_string(bits) + " " + tn;
      fails += !check_product((b + " M=40 N=264 K=448 (odd groups/row)").c_str(), g, sp, bf, 40, 264, 448, 1, 1, 1, {}, {}, false);
      fails += !check_product((b + " M=256 N=136 K=320").c_str(), g, sp, bf, 256, 136, 320, 1, 1, 1, {}, {}, false);
      fails += !check_product((b + " M=33 N=128 K=2368 (split, odd)").c_str(), g, sp, bf, 33, 128, 2368, 1, 1, 1, {}, {}, false);
      if (few) continue;
      fails += !check_product((b + " M=200 N=392 K=1024 g128").c_str(), g, {QuantMode::Affine, 128, bits}, bf, 200, 392, 1024, 1, 1, 1, {}, {}, false);
      fails += !check_product((b + " M=12 N=1024 K=2048 g32 (split)").c_str(), g, {QuantMode::Affine, 32, bits}, bf, 12, 1024, 2048, 1, 1, 1, {}, {}, false);
    }
  }
  // Every swapped configuration directly (the dispatch picks one per M), with and without
  // split K: both K-slice layouts (KW 1 and 2) of the 16/32/64-token tiles, and 128.
  {
    using namespace cu::swap;
    using Cfg16kw1 = Cfg<2, 1, 1, 6, 4>;
    using Cfg32kw1 = Cfg<4, 1, 1, 6, 4>;
    using Cfg64kw1 = Cfg<8, 1, 1, 4, 3>;
    using Cfg128b = Cfg<8, 2, 1, 3, 2>;
    struct L {
      const char* name;
      std::function<void(const cu::QmmArgs&)> bf4, bf8, h4, h8;
    };
#define NUVEC_L(name, C)                                                                                  \
  L { name, launch<__nv_bfloat16, 4, C>, launch<__nv_bfloat16, 8, C>, launch<__half, 4, C>, launch<__half, 8, C> }
    const L ls[] = {NUVEC_L("t16kw2", Cfg16), NUVEC_L("t16kw1", Cfg16kw1), NUVEC_L("t32kw2", Cfg32),
                    NUVEC_L("t32kw1", Cfg32kw1), NUVEC_L("t64kw2", Cfg64), NUVEC_L("t64kw1", Cfg64kw1),
                    NUVEC_L("t128", Cfg128), NUVEC_L("t128b", Cfg128b)};
#undef NUVEC_L
    for (const L& l : ls) {
      for (int bits : {4, 8}) {
        for (bool bf : {true, false}) {
          const auto& fn = bits == 4 ? (bf ? l.bf4 : l.h4) : (bf ? l.bf8 : l.h8);
          for (int s : {0, 5}) {
            if (few && !bf) continue;
            force_splits = s;
            const std::string what = std::string("cfg ") + l.name + " affine" + std::to_string(bits) + (bf ? " bf16" : " f16") +
                " M=75 N=264 K=1472 splits=" + (s ? "5" : "auto");
            fails += !check_product(what.c_str(), g, {QuantMode::Affine, 64, bits}, bf, 75, 264, 1472, 1, 1, 1, {}, {}, false,
                                    false, fn);
          }
          force_splits = 0;
        }
      }
    }
  }
  // Forced split counts (the test hook), one above the default's choice.
  for (int s : {2, 3, 16}) {
    cu::swap::force_splits = s;
    fails += !check_product(("swap forced splits=" + std::to_string(s) + " M=100 N=256 K=1024").c_str(), g, a4, true, 100, 256, 1024, 1, 1, 1, {}, {}, false);
  }
  cu::swap::force_splits = 0;
  // M over 256: the tiled kernel.
  fails += !check_product("tiled affine4 bf16 M=300 N=136 K=256", g, a4, true, 300, 136, 256, 1, 1, 1, {}, {}, false);
  // Gathered, unsorted, 20 rows per entry.
  fails += !check_product("gather unsorted M=20 B=5 A=3 E=4", g, a4, true, 20, 136, 256, 5, 3, 4, {2, 0, 1, 1, 2},
                          {3, 1, 0, 3, 2}, false);
  // Sorted, one row per entry (MoE prefill), grouped tiles; and one row per entry unsorted.
  {
    std::vector<uint32_t> l(70), r(70);
    for (int i = 0; i < 70; ++i) l[i] = (i * 7) % 40, r[i] = (i * 6) / 70;
    fails += !check_product("gather sorted M=1 B=70 A=40 E=6", g, a4, true, 1, 264, 512, 70, 40, 6, l, r, true);
    fails += !check_product("gather sorted M=3 B=70 A=40 E=6 f16", g, {QuantMode::Affine, 32, 8}, false, 3, 200, 256, 70,
                            40, 6, l, r, true);
    // Out of range: an lhs and an rhs past their axes (recorded, rows skipped).
    l[5] = 40, r[69] = 6;
    fails += !check_product("gather sorted, bad lhs and rhs", g, a4, true, 1, 136, 256, 70, 40, 6, l, r, true, true);
  }
  {
    std::vector<uint32_t> l = {0, 1}, r = {0, 5};
    fails += !check_product("gather M=16, rhs past E", g, a4, false, 16, 136, 256, 2, 2, 3, l, r, false, true);
  }
  // K split (few tiles, long K).
  fails += !check_product("affine4 bf16 M=17 N=256 K=4096 (split K)", g, a4, true, 17, 256, 4096, 1, 1, 1, {}, {}, false);
  std::printf("checks: %d failed\n", fails);
  return fails;
}


struct Row {
  int64_t N, K, M;
  int bits;
  float qmm, tiled, bf16;
};
std::vector<Row> summary;

void run_timings(bool variants) {
  cublasHandle_t h;
  cublasCreate(&h);
  const int64_t NK[4][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}};
  const int64_t Ms[] = {16, 32, 64, 128, 256, 512, 1024, 4096};
  std::printf("\n%-6s %-6s %-6s %5s %10s %10s %10s %10s %8s %8s\n", "N", "K", "M", "bits", "qmm_us", "tiled_us", "bf16_us",
              "ratio", "qmm_TF", "bf16_TF");
  for (auto& nk : NK) {
    const int64_t N = nk[0], K = nk[1];
    DenseCopies dense(N, K, 200ll << 20);
    uint16_t *x, *out;
    CK(cudaMalloc(&x, 4096 * K * 2));
    CK(cudaMalloc(&out, 4096 * N * 2));
    fill_bf16<<<1024, 256>>>(x, 4096 * K, 3);
    for (int bits : {4, 8}) {
      const QuantSpec sp{QuantMode::Affine, 64, bits};
      QuantCopies q(N, K, bits, 200ll << 20);
      const int rotq = q.count();
      CK(cudaDeviceSynchronize());
      for (int64_t M : Ms) {
        cu::QmmArgs a;
        a.spec = sp;
        a.dtype = bfloat16;
        a.M = M, a.N = N, a.K = K;
        a.x = x, a.out = out;
        float tq = time_us([&](int r) {
          a.w = q.w[r], a.scales = q.s[r], a.biases = q.b[r];
          cu::qmm(a);
        }, rotq);
        CK(cudaGetLastError());
        // H3's tiled kernel (what qmm ran before the swapped kernel), where qmm now differs.
        const float tt = cu::swap::covers(a) ? time_us([&](int r) {
          a.w = q.w[r], a.scales = q.s[r], a.biases = q.b[r];
          cu::launch_for_format<__nv_bfloat16>(a);
        }, rotq) : tq;
        const float one = 1.0f, zero = 0.0f;
        float tb = time_us([&](int r) {
          cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, dense.w[r], CUDA_R_16BF, int(K), x,
                       CUDA_R_16BF, int(K), &zero, out, CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }, dense.count());
        const double fl = 2.0 * M * N * K;
        std::printf("%-6lld %-6lld %-6lld %5d %10.2f %10.2f %10.2f %10.2f %8.1f %8.1f\n", (long long)N, (long long)K,
                    (long long)M, bits, tq, tt, tb, tq / tb, fl / tq * 1e-6, fl / tb * 1e-6);
        summary.push_back({N, K, M, bits, tq, tt, tb});
        std::fflush(stdout);
      }
      if (variants) { // the swapped kernel's split counts and token tiles (same TU), M <= 256
        for (int64_t M : {16, 32, 64, 128, 256}) {
          cu::QmmArgs a;
          a.spec = sp;
          a.dtype = bfloat16;
          a.M = M, a.N = N, a.K = K;
          a.x = x, a.out = out;
          auto t = [&](auto launch_fn, int splits) {
            cu::swap::force_splits = splits;
            const float us = time_us([&](int r) {
              a.w = q.w[r], a.scales = q.s[r], a.biases = q.b[r];
              launch_fn(a);
            }, rotq);
            cu::swap::force_splits = 0;
            return us;
          };
          using namespace cu::swap;
          std::printf("variants N=%lld K=%lld M=%lld bits=%d:", (long long)N, (long long)K, (long long)M, bits);
          for (int sp_ : {1, 2, 4, 8, 16}) {
            if (bits == 4) {
              if (M <= 16) std::printf(" t16/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg16>, sp_));
              if (M <= 16) std::printf(" t16kw1/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg<2, 1, 1, 6, 4>>, sp_));
              if (M == 32) std::printf(" t32/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg32>, sp_));
              if (M == 32) std::printf(" t32kw1/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg<4, 1, 1, 6, 4>>, sp_));
              std::printf(" t64/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg64>, sp_));
              if (M <= 64) std::printf(" t64kw1/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg<8, 1, 1, 4, 3>>, sp_));
              if (M > 32) std::printf(" t128/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg128>, sp_));
              if (M > 64) std::printf(" t128b/s%d %.2f", sp_, t(launch<__nv_bfloat16, 4, Cfg<8, 2, 1, 3, 2>>, sp_));
            } else {
              if (M <= 16) std::printf(" t16/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg16>, sp_));
              if (M <= 16) std::printf(" t16kw1/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg<2, 1, 1, 6, 4>>, sp_));
              if (M == 32) std::printf(" t32/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg32>, sp_));
              if (M == 32) std::printf(" t32kw1/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg<4, 1, 1, 6, 4>>, sp_));
              std::printf(" t64/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg64>, sp_));
              if (M <= 64) std::printf(" t64kw1/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg<8, 1, 1, 4, 3>>, sp_));
              if (M > 32) std::printf(" t128/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg128>, sp_));
              if (M > 64) std::printf(" t128b/s%d %.2f", sp_, t(launch<__nv_bfloat16, 8, Cfg<8, 2, 1, 3, 2>>, sp_));
            }
          }
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
    cudaFree(x), cudaFree(out);
  }
  cublasDestroy(h);
  // The short table last: qmm / cuBLAS bf16 per shape and M (W4 | W8), and the tiled kernel's.
  std::printf("\nsummary: qmm_us / bf16_us (ratio; < 1 is faster than cuBLAS), tiled kernel's ratio in ()\n");
  std::printf("%-12s %5s %26s %26s\n", "NxK", "M", "W4 g64", "W8 g64");
  for (size_t i = 0; i < summary.size(); ++i) {
    const Row& r = summary[i];
    if (r.bits != 4) continue;
    for (const Row& q : summary) {
      if (q.bits != 8 || q.N != r.N || q.K != r.K || q.M != r.M) continue;
      std::printf("%5lldx%-6lld %5lld %7.1f/%-6.1f %4.2f (%4.2f) %7.1f/%-6.1f %4.2f (%4.2f)\n", (long long)r.N, (long long)r.K,
                  (long long)r.M, r.qmm, r.bf16, r.qmm / r.bf16, r.tiled / r.bf16, q.qmm, q.bf16, q.qmm / q.bf16,
                  q.tiled / q.bf16);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  bool check = argc < 2, timing = argc < 2, few = false, variants = false;
  for (int i = 1; i < argc; ++i) {
    check |= std::string(argv[i]) == "check";
    few |= std::string(argv[i]) == "few";
    variants |= std::string(argv[i]) == "variants";
    timing |= variants;
    check |= few;
    timing |= std::string(argv[i]) == "time";
  }
  if (argc > 1 && std::string(argv[1]) == "prof") { // a few launches for a profiler: M 16 and 256, 4096^2, 4 bits
    const int64_t N = 4096, K = 4096;
    void *x, *w, *sc, *out;
    CK(cudaMalloc(&x, 4096 * K * 2));
    CK(cudaMalloc(&w, N * K / 2));
    CK(cudaMalloc(&sc, N * K / 64 * 2));
    CK(cudaMalloc(&out, 4096 * N * 2));
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(x), 4096 * K, 3);
    fill_random<<<1024, 256>>>(static_cast<uint32_t*>(w), N * K / 8, 5);
    fill_bf16<<<256, 256>>>(static_cast<uint16_t*>(sc), N * K / 64, 7);
    for (int64_t M : {16, 256}) {
      cu::QmmArgs a;
      a.spec = {QuantMode::Affine, 64, 4};
      a.dtype = bfloat16;
      a.M = M, a.N = N, a.K = K;
      a.x = x, a.w = static_cast<uint32_t*>(w), a.scales = sc, a.biases = sc, a.out = out;
      for (int i = 0; i < 2; ++i) cu::qmm(a);
    }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  int fails = 0;
  if (check) fails = run_checks(few);
  if (timing) run_timings(variants);
  return fails == 0 ? 0 : 1;
}
