// nuvec bench: the decode-shaped quantized products (src/backend/cuda/quantized/qmv.cu, at
// most 8 activation rows) alone, against cuBLAS's bf16 product of the same shape, timed with
// events (no framework overhead: what the kernel itself costs). Standalone like
// qmm_bench.cu: qmv.cu is compiled into this file. First checks M 1..8 for affine 4/8 bits
// (groups 32, 64, 128), mxfp4 and nvfp4, float16 and bfloat16, odd row counts and K, and a
// gathered batch, against a host float64 sum; then times W4/W8 g64 bf16 for M 1, 2, 4, 8 on
// the issue's shapes (weights rotated over more than the L2), at the launcher's split and
// at forced cluster splits 1..8, and prints the fraction of the weight-read floor at the
// copy bandwidth measured here.
// Build (from the repository root):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
//     --extended-lambda -DNUVEC_WITH_CUDA=1 -Iinclude -Isrc bench/qmv_bench.cu -lcublas \
//     -o build/bench/qmv_bench
// Run: qmv_bench [check] [time] [sweep] [prof]  (check and time by default; sweep: forced
// splits too; prof: two launches of W4 M=1 14336x4096 for ncu).
#include <cublas_v2.h>

#include "backend/cuda/quantized/qmv.cu"

#include "quant_bench_common.cuh"

// The dtype dispatch's error message prints a dtype (the library defines it).
std::ostream& nuvec::operator<<(std::ostream& os, const Dtype&) {
  return os << "dtype";
}

namespace {

bool bench_covers(const cu::QmmArgs& a) {
  return cu::qmv_covers(a);
}
void bench_run(const cu::QmmArgs& a) {
  cu::qmv(a);
}

int run_checks() {
  std::mt19937 g(4321);
  int fails = 0;
  for (const NamedFormat& f : kFormats) {
    for (bool bf : {true, false}) {
      for (int64_t M : {1, 3, 8}) {
        for (auto [N, K] : {std::pair<int64_t, int64_t>{200, 384}, {72, 2176}, {1000, 4096}}) {
          const std::string what = std::string(f.name) + (bf ? " bf16" : " f16") + " M=" + std::to_string(M) +
              " N=" + std::to_string(N) + " K=" + std::to_string(K);
          fails += !check_product(what.c_str(), g, f.sp, bf, M, N, K, 1, 1, 1, {}, {}, false);
        }
      }
    }
  }
  // Gathered: 9 entries over 5 experts, sorted and not, M 1 and 2.
  const QuantSpec a4{QuantMode::Affine, 64, 4};
  for (int64_t M : {1, 2}) {
    fails += !check_product(("gathered sorted M=" + std::to_string(M)).c_str(), g, a4, true, M, 136, 512, 9, 4, 5,
                            {0, 1, 2, 3, 0, 1, 2, 3, 0}, {0, 0, 1, 1, 1, 2, 3, 4, 4}, true);
    fails += !check_product(("gathered unsorted M=" + std::to_string(M)).c_str(), g, a4, false, M, 136, 512, 9, 4, 5,
                            {3, 1, 2, 0, 0, 1, 2, 3, 0}, {4, 0, 2, 1, 3, 0, 4, 1, 2}, false);
  }
  return fails;
}

// qmv_mma_kernel<bf16, affine, BITS, U, MinBlocks> in qmv's place (W4/W8 bf16 only).
template <int U, int MB>
void variant(const cu::QmmArgs& a, const cu::QmvParams& p, dim3 grid, size_t smem) {
  if (a.spec.bits == 4) cu::launch(cu::qmv_mma_kernel<__nv_bfloat16, true, 4, U, MB>, grid, smem, p.splits, p);
  else cu::launch(cu::qmv_mma_kernel<__nv_bfloat16, true, 8, U, MB>, grid, smem, p.splits, p);
}

// The weight read alone, in qmv's pattern (kQuad: lane (g, t) reads chunks t, t + 4, ... of
// rows g and g + 8 of its warp's 16, K split over `splits` blocks) or row-contiguous (each
// warp instruction reads 32 consecutive chunks of one row): what the access pattern allows,
// without decoding. Four loads in flight per lane and row pair.
template <bool kQuad>
__global__ void __launch_bounds__(128) read_pattern(const uint4* w, int64_t N, int row_chunks, int split_chunks,
                                                    int splits, uint32_t* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t nb = blockIdx.x / splits;
  const int split = blockIdx.x % splits;
  const int q0 = split * split_chunks, q1 = min(q0 + split_chunks, row_chunks);
  uint32_t acc = 0;
  if (kQuad) {
    const int64_t r0 = min(nb * 64 + warp * 16 + g, N - 1), r1 = min(r0 + 8, N - 1);
#pragma unroll 4
    for (int q = q0 + t; q < q1; q += 4) {
      const uint4 a = __ldg(w + r0 * row_chunks + q), b = __ldg(w + r1 * row_chunks + q);
      acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    }
  } else {
    for (int r = 0; r < 16; r += 2) {
      const int64_t r0 = min(nb * 64 + warp * 16 + r, N - 1), r1 = min(r0 + 1, N - 1);
#pragma unroll 4
      for (int q = q0 + lane; q < q1; q += 32) {
        const uint4 a = __ldg(w + r0 * row_chunks + q), b = __ldg(w + r1 * row_chunks + q);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
      }
    }
  }
  out[blockIdx.x * 128 + threadIdx.x] = acc;
}

struct Row {
  int64_t N, K, M;
  int bits;
  float qmv, bf16, floor;
};

// Device-to-device copy bandwidth in bytes per microsecond (the floor's denominator).
double copy_bytes_per_us() {
  const size_t n = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  const float us = time_us([&](int) { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 1);
  cudaFree(a), cudaFree(b);
  return 2.0 * n / us;
}

void run_timings(bool sweep) {
  cublasHandle_t h;
  cublasCreate(&h);
  const double bw = copy_bytes_per_us();
  std::printf("copy bandwidth %.2f TB/s\n", bw * 1e-6);
  std::vector<Row> rows;
  const int64_t NK[4][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}};
  for (auto& nk : NK) {
    const int64_t N = nk[0], K = nk[1];
    DenseCopies dense(N, K, 300ll << 20);
    uint16_t *x, *out;
    CK(cudaMalloc(&x, 8 * K * 2));
    CK(cudaMalloc(&out, 8 * N * 2));
    fill_bf16<<<64, 256>>>(x, 8 * K, 3);
    for (int bits : {4, 8}) {
      const int64_t qbytes = N * K * bits / 8 + N * (K / 64) * 4;
      QuantCopies q(N, K, bits, 300ll << 20);
      const int rotq = q.count();
      for (int64_t M : {1, 2, 4, 8}) {
        cu::QmmArgs a;
        a.spec = {QuantMode::Affine, 64, bits};
        a.dtype = bfloat16;
        a.M = M, a.N = N, a.K = K;
        a.x = x, a.out = out;
        auto t = [&] {
          return time_us([&](int r) {
            a.w = q.w[r], a.scales = q.s[r], a.biases = q.b[r];
            cu::qmv(a);
          }, rotq);
        };
        const float tq = t();
        const float one = 1.0f, zero = 0.0f;
        const float tb = time_us([&](int r) {
          cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, dense.w[r], CUDA_R_16BF, int(K), x,
                       CUDA_R_16BF, int(K), &zero, out, CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }, dense.count());
        const float fl = static_cast<float>(qbytes / bw);
        std::printf("N=%-6lld K=%-6lld M=%lld W%d  qmv %8.2f us  bf16 %8.2f us  x%5.2f  floor %5.2f",
                    (long long)N, (long long)K, (long long)M, bits, tq, tb, tb / tq, fl / tq);
        if (sweep && M == 1) {
          uint32_t* sink;
          CK(cudaMalloc(&sink, 1 << 24));
          const int row_chunks = static_cast<int>(K * bits / 8 / 16);
          std::printf("  read quad/contig by splits:");
          for (int sp : {1, 2, 4, 8}) {
            const int sc = (row_chunks + sp - 1) / sp;
            const unsigned blocks = static_cast<unsigned>((N + 63) / 64 * sp);
            const float tq4 = time_us([&](int r) {
              read_pattern<true><<<blocks, 128>>>(reinterpret_cast<const uint4*>(q.w[r]), N, row_chunks, sc, sp, sink);
            }, rotq);
            const float tc = time_us([&](int r) {
              read_pattern<false><<<blocks, 128>>>(reinterpret_cast<const uint4*>(q.w[r]), N, row_chunks, sc, sp, sink);
            }, rotq);
            std::printf(" s%d %.1f/%.1f", sp, tq4, tc);
          }
          cudaFree(sink);
        }
        if (sweep) {
          using V = void (*)(const cu::QmmArgs&, const cu::QmvParams&, dim3, size_t);
          const std::pair<const char*, V> vs[] = {{"u4b4", variant<4, 4>}, {"u2b4", variant<2, 4>},
                                                  {"u2b6", variant<2, 6>}, {"u4b5", variant<4, 5>},
                                                  {"u1b8", variant<1, 8>}};
          for (auto [name, v] : vs) {
            if (bits == 8 && name[1] == '4') continue;
            cu::launch_override = v;
            std::printf("  %s:", name);
            for (int sp : {1, 2, 4, 8}) {
              cu::force_splits = sp;
              std::printf(" %.1f", t());
              cu::force_splits = 0;
            }
            cu::launch_override = nullptr;
          }
        }
        std::printf("\n");
        std::fflush(stdout);
        rows.push_back({N, K, M, bits, tq, tb, fl});
      }
    }
    cudaFree(x), cudaFree(out);
  }
  cublasDestroy(h);
  std::printf("\nsummary: bf16_us / qmv_us (x faster than cuBLAS bf16) and floor_us / qmv_us\n");
  std::printf("%-12s %3s %18s %18s\n", "NxK", "M", "W4 g64", "W8 g64");
  for (const Row& r : rows) {
    if (r.bits != 4) continue;
    for (const Row& q : rows) {
      if (q.bits != 8 || q.N != r.N || q.K != r.K || q.M != r.M) continue;
      std::printf("%5lldx%-6lld %3lld  %6.2fx  f%5.2f   %6.2fx  f%5.2f\n", (long long)r.N, (long long)r.K,
                  (long long)r.M, r.bf16 / r.qmv, r.floor / r.qmv, q.bf16 / q.qmv, q.floor / q.qmv);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  bool check = argc == 1, timing = argc == 1, sweep = false, prof = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    check |= arg == "check";
    timing |= arg == "time" || arg == "sweep";
    sweep |= arg == "sweep";
    prof |= arg == "prof";
  }
  if (prof) { // W4 g64 bf16 M=1, 14336 x 4096, twice
    const int64_t N = 14336, K = 4096;
    void *x, *w, *sc, *out;
    CK(cudaMalloc(&x, 8 * K * 2));
    CK(cudaMalloc(&w, N * K / 2));
    CK(cudaMalloc(&sc, N * K / 64 * 2));
    CK(cudaMalloc(&out, 8 * N * 2));
    fill_bf16<<<64, 256>>>(static_cast<uint16_t*>(x), 8 * K, 3);
    fill_random<<<1024, 256>>>(static_cast<uint32_t*>(w), N * K / 8, 5);
    fill_bf16<<<256, 256>>>(static_cast<uint16_t*>(sc), N * K / 64, 7);
    cu::QmmArgs a;
    a.spec = {QuantMode::Affine, 64, 4};
    a.dtype = bfloat16;
    a.M = 1, a.N = N, a.K = K;
    a.x = x, a.w = static_cast<uint32_t*>(w), a.scales = sc, a.biases = sc, a.out = out;
    for (int i = 0; i < 2; ++i) cu::qmv(a);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  int fails = check ? run_checks() : 0;
  if (timing) run_timings(sweep);
  return fails == 0 ? 0 : 1;
}
