// nuvec bench: what the standalone quantized-product benches (qmm_bench.cu, qmv_bench.cu)
// share: the few runtime functions the kernel files call (src/backend/cuda/runtime/runtime.h:
// stream, scratch, checks), host-side weights of every format with their dequantized values,
// the product check against a host float64 sum, event timing and random fills. The including
// bench first includes its kernel file, then this header, then defines (anonymous namespace)
//   bool bench_covers(const nuvec::cu::QmmArgs&);  void bench_run(const nuvec::cu::QmmArgs&);
// the dispatch check_product tests when no launcher is given.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// ---- the runtime functions qmm.cu calls (src/backend/cuda/runtime/runtime.h) ----
namespace nuvec::cu {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::printf("CUDA error %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}
void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}
cudaStream_t stream() {
  return nullptr;
}
const cudaDeviceProp& device_props() {
  static cudaDeviceProp p = [] {
    cudaDeviceProp q;
    check(cudaGetDeviceProperties(&q, 0), "props");
    return q;
  }();
  return p;
}
// One growing buffer: the bench runs one product at a time on the default stream.
void* scratch(size_t bytes) {
  static void* buf = nullptr;
  static size_t cap = 0;
  if (bytes > cap) {
    if (buf) check(cudaFree(buf), "free");
    check(cudaMalloc(&buf, bytes), "scratch");
    cap = bytes;
  }
  return buf;
}
} // namespace nuvec::cu

using namespace nuvec;

namespace {

// Defined by the including bench (see the header comment).
bool bench_covers(const cu::QmmArgs& a);
void bench_run(const cu::QmmArgs& a);

#define CK(e) ::nuvec::cu::check((e), #e)

uint16_t f2h(float f, bool bf) {
  if (bf) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  __half h = __float2half_rn(f);
  uint16_t r;
  std::memcpy(&r, &h, 2);
  return r;
}
float h2f(uint16_t v, bool bf) {
  if (bf) {
    uint32_t u = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half h;
  std::memcpy(&h, &v, 2);
  return __half2float(h);
}
float round_t(float f, bool bf) {
  return h2f(f2h(f, bf), bf);
}

template <typename V>
V* to_dev(const std::vector<V>& v) {
  V* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(V)));
  if (!v.empty()) CK(cudaMemcpy(p, v.data(), v.size() * sizeof(V), cudaMemcpyHostToDevice));
  return p;
}

struct Weights {
  QuantSpec spec;
  int64_t E, N, K;
  std::vector<uint32_t> w;
  std::vector<uint16_t> s16, b16; // affine scales / biases in T
  std::vector<uint8_t> s8;        // fp scale codes
  std::vector<float> deq;         // (E, N, K) dequantized, rounded to T
};

Weights make_weights(std::mt19937& g, QuantSpec sp, int64_t E, int64_t N, int64_t K, bool bf) {
  Weights W{sp, E, N, K};
  const int64_t kw = K * sp.bits / 32, kg = K / sp.group_size;
  W.w.resize(E * N * kw);
  std::uniform_int_distribution<uint32_t> bits32;
  for (auto& x : W.w) x = bits32(g);
  if (sp.mode == QuantMode::Mxfp8) { // no NaN codes
    for (int64_t i = 0; i < E * N * K; ++i) {
      const int64_t bit = i * 8;
      uint32_t& word = W.w[bit / 32];
      if (((word >> (bit % 32)) & 0x7Fu) == 0x7Fu) word &= ~(1u << (bit % 32));
    }
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  if (sp.mode == QuantMode::Affine) {
    W.s16.resize(E * N * kg), W.b16.resize(E * N * kg);
    const float qmax = float((1 << sp.bits) - 1);
    for (size_t i = 0; i < W.s16.size(); ++i) {
      W.s16[i] = f2h((0.5f + std::fabs(nd(g))) * 2.0f / qmax, bf);
      W.b16[i] = f2h(nd(g), bf);
    }
  } else {
    const bool nv = sp.mode == QuantMode::Nvfp4;
    std::uniform_int_distribution<int> sd(nv ? 0x30 : 122, nv ? 0x40 : 130);
    W.s8.resize(E * N * kg);
    for (auto& s : W.s8) s = static_cast<uint8_t>(sd(g));
  }
  W.deq.resize(E * N * K);
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t* row = W.w.data() + (e * N + n) * kw;
      for (int64_t k = 0; k < K; ++k) {
        const uint32_t q = math::quant_code(row, k, sp.bits);
        const int64_t gi = (e * N + n) * kg + k / sp.group_size;
        float v;
        if (sp.mode == QuantMode::Affine) {
          v = h2f(W.s16[gi], bf) * float(q) + h2f(W.b16[gi], bf);
        } else {
          v = math::fp_code_value(sp.bits, q) * math::fp_scale_value(sp.mode, W.s8[gi]);
        }
        W.deq[(e * N + n) * K + k] = round_t(v, bf);
      }
    }
  }
  return W;
}

// One product checked against the host: out[b] = x[lhs[b]] . deq(W[rhs[b]])^T.
bool check_product(const char* what, std::mt19937& g, QuantSpec sp, bool bf, int64_t M, int64_t N, int64_t K,
                   int64_t batch, int64_t A, int64_t E, std::vector<uint32_t> lhs, std::vector<uint32_t> rhs,
                   bool sorted, bool expect_error = false,
                   const std::function<void(const cu::QmmArgs&)>& launch = nullptr) {
  Weights W = make_weights(g, sp, E, N, K, bf);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> x(A * M * K);
  for (auto& v : x) v = f2h(nd(g), bf);
  auto* dx = to_dev(x);
  auto* dw = to_dev(W.w);
  void* ds = sp.mode == QuantMode::Affine ? static_cast<void*>(to_dev(W.s16)) : static_cast<void*>(to_dev(W.s8));
  void* db = sp.mode == QuantMode::Affine ? static_cast<void*>(to_dev(W.b16)) : nullptr;
  uint16_t* dout = nullptr;
  CK(cudaMalloc(&dout, batch * M * N * 2));
  CK(cudaMemset(dout, 0xFF, batch * M * N * 2)); // NaN in both types
  uint32_t* dl = lhs.empty() ? nullptr : to_dev(lhs);
  uint32_t* dr = rhs.empty() ? nullptr : to_dev(rhs);
  cu::IndexError* derr = nullptr;
  CK(cudaMalloc(&derr, sizeof(cu::IndexError)));
  CK(cudaMemset(derr, 0, sizeof(cu::IndexError)));

  cu::QmmArgs a;
  a.spec = sp;
  a.dtype = bf ? bfloat16 : float16;
  a.batch = batch, a.M = M, a.N = N, a.K = K, a.x_count = A, a.w_count = E;
  a.x = dx, a.w = dw, a.scales = ds, a.biases = db, a.out = dout;
  a.lhs = dl, a.rhs = dr, a.sorted = sorted, a.err = derr;
  bool ok = true;
  if (!bench_covers(a)) {
    std::printf("FAIL %s: not covered\n", what);
    return false;
  }
  if (launch) {
    launch(a);
  } else {
    bench_run(a);
  }
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(batch * M * N);
  CK(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
  cu::IndexError herr;
  CK(cudaMemcpy(&herr, derr, sizeof(herr), cudaMemcpyDeviceToHost));
  if (expect_error != (herr.flag != 0)) {
    std::printf("FAIL %s: error flag %d (expected %d)\n", what, herr.flag, int(expect_error));
    ok = false;
  }
  double num = 0, den = 0, worst = 0;
  int64_t bad = 0, checked = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t l = lhs.empty() ? 0 : lhs[b], e = rhs.empty() ? 0 : rhs[b];
    if (l >= A || e >= E) continue; // skipped rows: the caller zeroes the output
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(h2f(x[(l * M + m) * K + k], bf)) * W.deq[(e * N + n) * K + k];
          ref += p;
          mag += p * p;
        }
        const double got = h2f(out[(b * M + m) * N + n], bf);
        // A float16 sum past the type's range is an infinity of its sign (mxfp8 weights reach
        // 448 * 2^3: K = 4096 sums overflow), which the float64 reference does not round to.
        if (!bf && std::fabs(ref) > 65504.0 * (1.0 + 1e-3)) {
          if (!(std::isinf(got) && (got > 0) == (ref > 0))) {
            if (bad < 3) std::printf("  %s b=%lld m=%lld n=%lld: got %g want an infinity (%g)\n", what, (long long)b, (long long)m, (long long)n, got, ref);
            ++bad;
          }
          ++checked;
          continue;
        }
        const double d = std::fabs(got - ref);
        // Output rounding (2^-8 / 2^-11 relative) plus float32 summation of K terms.
        const double tol = (bf ? 8e-3 : 1e-3) * std::fabs(ref) + 1e-5 * std::sqrt(mag * K) + 1e-6;
        if (!(d <= tol)) {
          if (bad < 3) std::printf("  %s b=%lld m=%lld n=%lld: got %g want %g\n", what, (long long)b, (long long)m, (long long)n, got, ref);
          ++bad;
        }
        num += (got - ref) * (got - ref);
        den += ref * ref;
        worst = std::max(worst, d / (std::sqrt(mag) + 1e-30));
        ++checked;
      }
    }
  }
  const double rel = std::sqrt(num / std::max(den, 1e-300));
  if (bad > 0 || !(rel < (bf ? 5e-3 : 1e-3))) ok = false;
  std::printf("%s %-48s rel %.2e  bad %lld / %lld\n", ok ? "ok  " : "FAIL", what, rel, (long long)bad, (long long)checked);
  cudaFree(dx), cudaFree(dw), cudaFree(ds), cudaFree(db), cudaFree(dout), cudaFree(dl), cudaFree(dr), cudaFree(derr);
  return ok;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Fn>
float time_us(Fn&& fn, int rot) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3 * rot; ++i) fn(i % rot);
  std::vector<float> t;
  for (int rep = 0; rep < 7; ++rep) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 20; ++i) fn(i % rot);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.0f / 20);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return median(t);
}

__global__ void fill_random(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = h;
  }
}
// bf16 values in [-1, 1) from random bits (sign, exponent 126 or 125, random mantissa).
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = static_cast<uint16_t>((h & 0x807Fu) | ((125u + ((h >> 8) & 1u)) << 7));
  }
}

// The formats the checks cover (the first affine 4 bits g64, the fourth affine 8 bits g64).
struct NamedFormat {
  const char* name;
  QuantSpec sp;
};
inline const NamedFormat kFormats[] = {
    {"affine4 g64", {QuantMode::Affine, 64, 4}}, {"affine4 g32", {QuantMode::Affine, 32, 4}},
    {"affine4 g128", {QuantMode::Affine, 128, 4}}, {"affine8 g64", {QuantMode::Affine, 64, 8}},
    {"affine8 g32", {QuantMode::Affine, 32, 8}},   {"affine8 g128", {QuantMode::Affine, 128, 8}},
    {"affine2 g64", {QuantMode::Affine, 64, 2}},   {"affine3 g64", {QuantMode::Affine, 64, 3}},
    {"mxfp4", {QuantMode::Mxfp4, 32, 4}},          {"mxfp8", {QuantMode::Mxfp8, 32, 8}},
    {"nvfp4", {QuantMode::Nvfp4, 16, 4}}};

// Copies of an N x K weight, enough to exceed `cap` bytes (at least 2), rotated over by the
// timings so that each launch reads from device memory (not the 50 MB L2): bf16 dense
// matrices, or affine g64 packed words with bf16 scales and biases, random.
struct DenseCopies {
  std::vector<uint16_t*> w;
  DenseCopies(int64_t N, int64_t K, int64_t cap) {
    w.resize(std::max<int64_t>(2, cap / (N * K * 2) + 1));
    for (auto& p : w) {
      CK(cudaMalloc(&p, N * K * 2));
      fill_bf16<<<1024, 256>>>(p, N * K, 7);
    }
  }
  ~DenseCopies() {
    for (auto p : w) cudaFree(p);
  }
  int count() const { return static_cast<int>(w.size()); }
};

struct QuantCopies {
  std::vector<uint32_t*> w;
  std::vector<uint16_t*> s, b;
  QuantCopies(int64_t N, int64_t K, int bits, int64_t cap) {
    const int64_t bytes = N * K * bits / 8 + N * (K / 64) * 4;
    const size_t n = static_cast<size_t>(std::max<int64_t>(2, cap / bytes + 1));
    w.resize(n), s.resize(n), b.resize(n);
    for (size_t r = 0; r < n; ++r) {
      CK(cudaMalloc(&w[r], N * K * bits / 8));
      CK(cudaMalloc(&s[r], N * (K / 64) * 2));
      CK(cudaMalloc(&b[r], N * (K / 64) * 2));
      fill_random<<<1024, 256>>>(w[r], N * K * bits / 32, 11 + uint32_t(r));
      fill_bf16<<<256, 256>>>(s[r], N * (K / 64), 5 + uint32_t(r));
      fill_bf16<<<256, 256>>>(b[r], N * (K / 64), 13 + uint32_t(r));
    }
  }
  ~QuantCopies() {
    for (size_t r = 0; r < w.size(); ++r) cudaFree(w[r]), cudaFree(s[r]), cudaFree(b[r]);
  }
  int count() const { return static_cast<int>(w.size()); }
};

} // namespace
