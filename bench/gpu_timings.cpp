// nuvec: GPU timings for bench/gpu_compare.py, which runs PyTorch on the same workloads in
// the same process tree and prints the ratios. Prints one line per workload:
//   <name> <median milliseconds> <runs>
// Each workload is run once to warm up, then timed on the host around eval (which waits for
// the GPU) over a batch of independent copies; median over the runs.
// Inputs are random and evaluated on the GPU before timing; outputs are fresh each run.
// NUVEC_BENCH_PROFILE=1 runs each workload twice with a batch of one (a warm-up and one
// timed run): a short trace for a profiler (ncu) of every kernel the workloads launch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

namespace {

// Median over `runs` of the time per op of `batch` independent copies of the workload
// launched back to back and evaluated together (the launch and sync cost is spread as in
// PyTorch's measurement, which brackets `batch` ops with CUDA events).
double median_ms(int runs, int batch, const std::function<std::vector<nx::array>()>& make) {
  static const bool profile = std::getenv("NUVEC_BENCH_PROFILE") != nullptr;
  if (profile) runs = batch = 1;
  auto once = [&] {
    std::vector<nx::array> ys;
    for (int b = 0; b < batch; ++b) {
      for (auto& y : make()) ys.push_back(y);
    }
    auto t0 = std::chrono::steady_clock::now();
    nx::eval(ys);
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count() / batch;
  };
  once(); // warm-up: allocator cache, cuBLASLt heuristics, cuFFT plans
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(once());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Reports a workload whose result is all of `make()`'s arrays (a forward and its gradients).
void report_all(const char* name, int runs, const std::function<std::vector<nx::array>()>& make, int batch = 10) {
  std::printf("%s %.6f %d\n", name, median_ms(runs, batch, make), runs);
  std::fflush(stdout);
}

void report(const char* name, int runs, const std::function<nx::array()>& make, int batch = 10) {
  report_all(name, runs, [&] { return std::vector<nx::array>{make()}; }, batch);
}

// The forward outputs of f and the gradients of its inputs for cotangent g, as one workload.
std::vector<nx::array> forward_backward(
    const std::function<nx::array(const std::vector<nx::array>&)>& f,
    const std::vector<nx::array>& inputs,
    const nx::array& g) {
  auto [outs, grads] = nx::vjp(
      [&](const std::vector<nx::array>& in) { return std::vector<nx::array>{f(in)}; }, inputs, {g});
  grads.push_back(outs[0]);
  return grads;
}

nx::array rand_gpu(const nx::Shape& shape, nx::Dtype dtype) {
  nx::array x = nx::astype(nx::random::normal(shape, nx::float32), dtype);
  nx::eval(x);
  return x;
}

} // namespace

int main(int argc, char** argv) {
  if (!nx::is_available(nx::Device::gpu)) {
    std::fprintf(stderr, "nuvec-gpu-timings: no GPU available\n");
    return 1;
  }
  std::string only = argc > 1 ? argv[1] : "";
  if (only == "gated_delta_check" && argc == 4) {
    // bench/gpu_compare.py's check against transformers: q, k, v, g, beta, state from
    // argv[2] (safetensors) through gated_delta on the GPU, {y, state} written to argv[3].
    auto in = nx::load_safetensors(argv[2]).first;
    auto [y, s] = nx::fast::gated_delta(in.at("q"), in.at("k"), in.at("v"), in.at("g"), in.at("beta"), in.at("state"),
                                        nx::Device::gpu);
    nx::save_safetensors(argv[3], {{"y", y}, {"state", s}});
    return 0;
  }
  auto want = [&](const char* group) { return only.empty() || only == group; };
  nx::set_default_device(nx::Device::gpu);

  if (want("elementwise")) {
    const int n = 1 << 28;
    nx::array x = rand_gpu({n}, nx::float32);
    nx::array y = rand_gpu({n}, nx::float32);
    report("copy_cast_f32_i32_2^28", 20, [&] { return nx::astype(x, nx::int32); });
    report("add_f32_2^28", 20, [&] { return nx::add(x, y); });
    report("exp_f32_2^28", 20, [&] { return nx::exp(x); });
  }
  if (want("reduce")) {
    const int n = 1 << 28;
    nx::array x = rand_gpu({n}, nx::float32);
    nx::array x2 = nx::reshape(x, {1 << 14, 1 << 14});
    report("sum_all_f32_2^28", 20, [&] { return nx::sum(x); });
    report("max_all_f32_2^28", 20, [&] { return nx::max(x); });
    report("sum_last_f32_16384x16384", 20, [&] { return nx::sum(x2, -1); });
    report("max_last_f32_16384x16384", 20, [&] { return nx::max(x2, -1); });
  }
  if (want("softmax")) {
    nx::array s = rand_gpu({16384, 4096}, nx::bfloat16);
    report("softmax_last_bf16_16384x4096", 20, [&] { return nx::softmax(s, -1); });
  }
  if (want("norms")) {
    // The fused row ops of a transformer block on bf16 16384 x 4096, forward and forward plus
    // backward (bench/gpu_compare.py gives the bytes each must move).
    const int rows = 16384, d = 4096;
    const float eps = 1e-5f;
    nx::array x = rand_gpu({rows, d}, nx::bfloat16);
    nx::array r = rand_gpu({rows, d}, nx::bfloat16);
    nx::array g = rand_gpu({rows, d}, nx::bfloat16);
    nx::array w = rand_gpu({d}, nx::bfloat16);
    nx::array b = rand_gpu({d}, nx::bfloat16);
    nx::array gl = rand_gpu({rows, 1}, nx::bfloat16);
    auto rms = [&](const std::vector<nx::array>& in) { return nx::fast::rms_norm(in[0], in[1], eps); };
    auto add_rms = [&](const std::vector<nx::array>& in) {
      return nx::fast::add_rms_norm(in[0], in[1], in[2], eps).second;
    };
    auto ln = [&](const std::vector<nx::array>& in) { return nx::fast::layer_norm(in[0], in[1], in[2], eps); };
    auto sm = [&](const std::vector<nx::array>& in) { return nx::softmax(in[0], -1); };
    auto lse = [&](const std::vector<nx::array>& in) { return nx::logsumexp(in[0], -1, true); };
    report("rms_norm_bf16_16384x4096", 20, [&] { return rms({x, w}); });
    report_all("add_rms_norm_bf16_16384x4096", 20, [&] {
      auto [h, y] = nx::fast::add_rms_norm(x, r, w, eps);
      return std::vector<nx::array>{h, y};
    });
    report("layer_norm_bf16_16384x4096", 20, [&] { return ln({x, w, b}); });
    report("logsumexp_last_bf16_16384x4096", 20, [&] { return lse({x}); });
    report_all("rms_norm_fwd_bwd_bf16_16384x4096", 10, [&] { return forward_backward(rms, {x, w}, g); });
    report_all("add_rms_norm_fwd_bwd_bf16_16384x4096", 10, [&] { return forward_backward(add_rms, {x, r, w}, g); });
    report_all("layer_norm_fwd_bwd_bf16_16384x4096", 10, [&] { return forward_backward(ln, {x, w, b}, g); });
    report_all("softmax_fwd_bwd_bf16_16384x4096", 10, [&] { return forward_backward(sm, {x}, g); });
    report_all("logsumexp_fwd_bwd_bf16_16384x4096", 10, [&] { return forward_backward(lse, {x}, gl); });
  }
  if (want("cross_entropy")) {
    // An LLM's loss: bf16 logits over a 151936-token vocabulary, 8192 positions.
    const int rows = 8192, vocab = 151936;
    nx::array x = rand_gpu({rows, vocab}, nx::bfloat16);
    nx::array t = nx::astype(nx::random::randint(0, vocab, {rows}, nx::int32), nx::int32);
    nx::array g = rand_gpu({rows}, nx::float32);
    nx::eval(t);
    auto ce = [&](const std::vector<nx::array>& in) { return nx::fast::cross_entropy(in[0], t); };
    report("cross_entropy_bf16_8192x151936", 10, [&] { return ce({x}); }, 3);
    report_all("cross_entropy_fwd_bwd_bf16_8192x151936", 10, [&] { return forward_backward(ce, {x}, g); }, 3);
  }
  if (want("rope")) {
    // Prefill [1, 32, 16384, 128] and decode [32, 32, 1, 128] in bf16, all 128 features.
    nx::array q = rand_gpu({1, 32, 16384, 128}, nx::bfloat16);
    nx::array qd = rand_gpu({32, 32, 1, 128}, nx::bfloat16);
    report("rope_bf16_1x32x16384x128", 20, [&] { return nx::fast::rope(q, 128, false, 10000.0f, 1.0f, 0); });
    report("rope_decode_bf16_32x32x1x128", 20, [&] { return nx::fast::rope(qd, 128, false, 10000.0f, 1.0f, 4096); });
    // The queries' preparation in one pass: RMS-normalised with a weight, rotated and written
    // into a cache of the prefill's length at position 0 (each run returns the updated cache;
    // the rows cover all of it, so none of the old cache is copied; PyTorch writes its cache
    // in place).
    nx::array w = rand_gpu({128}, nx::bfloat16);
    nx::array cache = rand_gpu({1, 32, 16384, 128}, nx::bfloat16);
    const nx::fast::Rotation rotation{128, false, 10000.0f, 1.0f, std::nullopt};
    report("norm_rope_cache_bf16_1x32x16384x128", 20,
           [&] { return nx::fast::norm_rope(q, w, 1e-6f, rotation, 0, cache); });
  }
  if (want("conv1d")) {
    // Qwen3-Next-80B's short convolution (conv dim 2·16·128 + 32·128 = 8192, K 4) in bf16:
    // decode steps of N sequences through causal_conv1d_step (y and the new state), and a
    // prefill of 8192 positions through conv1d with padding K − 1 (the causal outputs are its
    // first L; bench/gpu_compare.py gives the bytes each must move).
    const int c = 8192, k = 4;
    nx::array w = rand_gpu({c, k, 1}, nx::bfloat16);
    for (int n : {1, 32, 256}) {
      nx::array x = rand_gpu({n, 1, c}, nx::bfloat16), state = rand_gpu({n, k - 1, c}, nx::bfloat16);
      const std::string label = "causal_conv1d_step_bf16_n" + std::to_string(n) + "_c8192_k4";
      report_all(label.c_str(), 20, [&] {
        auto [y, next] = nx::fast::causal_conv1d_step(x, w, state);
        return std::vector<nx::array>{y, next};
      });
    }
    nx::array x = rand_gpu({1, 8192, c}, nx::bfloat16);
    report("conv1d_depthwise_bf16_n1_l8192_c8192_k4", 20, [&] { return nx::conv1d(x, w, 1, k - 1, 1, c); });
  }
  if (want("attention")) {
    // Decode: one query per sequence over a long and a short context, 32 query heads on 8
    // key heads (GQA), D 128, bf16; the same through the paged cache with blocks of 16; and
    // prefill B 4, H 32, L 4096, D 128, causal and not, forward and forward plus backward.
    for (int lk : {8192, 512}) {
      nx::array q = rand_gpu({32, 32, 1, 128}, nx::bfloat16);
      nx::array k = rand_gpu({32, 8, lk, 128}, nx::bfloat16);
      nx::array v = rand_gpu({32, 8, lk, 128}, nx::bfloat16);
      std::string label = "sdpa_decode_bf16_b32_hq32_hkv8_lk" + std::to_string(lk) + "_d128";
      report(label.c_str(), 20, [&] { return nx::fast::scaled_dot_product_attention(q, k, v, 0.088f); });
    }
    {
      const int b = 32, hkv = 8, ctx = 8192, bs = 16, per_seq = ctx / bs;
      nx::array q = rand_gpu({b, 32, 1, 128}, nx::bfloat16);
      nx::array kc = rand_gpu({b * per_seq, hkv, bs, 128}, nx::bfloat16);
      nx::array vc = rand_gpu({b * per_seq, hkv, bs, 128}, nx::bfloat16);
      // Each sequence's blocks in a random order over the pool (as an allocator leaves them).
      nx::array tables = nx::reshape(
          nx::astype(nx::random::permutation(b * per_seq), nx::int32), {b, per_seq});
      nx::array lengths = nx::full({b}, ctx, nx::int32);
      nx::eval({tables, lengths});
      report("paged_decode_bf16_b32_hq32_hkv8_ctx8192_bs16_d128", 20,
             [&] { return nx::fast::paged_attention(q, kc, vc, tables, lengths, 0.088f); });
    }
    {
      // Paged prefill: 2048 new queries a sequence at the end of a 4096-position context
      // (on the Hopper kernel; NUVEC_ATTENTION_HOPPER=0 runs the CUDA-core paged one).
      const int b = 4, hkv = 8, l = 2048, ctx = 4096, bs = 16, per_seq = ctx / bs;
      nx::array q = rand_gpu({b, 32, l, 128}, nx::bfloat16);
      nx::array kc = rand_gpu({b * per_seq, hkv, bs, 128}, nx::bfloat16);
      nx::array vc = rand_gpu({b * per_seq, hkv, bs, 128}, nx::bfloat16);
      nx::array tables = nx::reshape(nx::astype(nx::random::permutation(b * per_seq), nx::int32), {b, per_seq});
      nx::array lengths = nx::full({b}, ctx, nx::int32);
      nx::eval({tables, lengths});
      report("paged_prefill_bf16_b4_hq32_hkv8_l2048_ctx4096_bs16_d128", 10,
             [&] { return nx::fast::paged_attention(q, kc, vc, tables, lengths, 0.088f); }, 3);
    }
    // Issue 15's prefill shapes: B 4 and L 4096 at D 128 (H 32), 64 (H 64) and 256 (H 16),
    // forward and forward plus backward; D 128 at L 1024 and 16384, forward.
    struct Prefill {
      int b, h, l, d;
      bool backward;
    };
    for (const Prefill& s : {Prefill{4, 32, 4096, 128, true}, Prefill{4, 64, 4096, 64, true}, Prefill{4, 16, 4096, 256, true},
                             Prefill{4, 32, 1024, 128, false}, Prefill{4, 32, 16384, 128, false}}) {
      nx::array q = rand_gpu({s.b, s.h, s.l, s.d}, nx::bfloat16);
      nx::array k = rand_gpu({s.b, s.h, s.l, s.d}, nx::bfloat16);
      nx::array v = rand_gpu({s.b, s.h, s.l, s.d}, nx::bfloat16);
      nx::array g = rand_gpu({s.b, s.h, s.l, s.d}, nx::bfloat16);
      const std::string shape = "bf16_b" + std::to_string(s.b) + "_h" + std::to_string(s.h) + "_l" + std::to_string(s.l) +
          "_d" + std::to_string(s.d);
      for (bool causal : {false, true}) {
        const std::string mode = causal ? "causal" : "";
        const std::string tag = causal ? "_causal" : "";
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
        auto f = [&](const std::vector<nx::array>& in) {
          return nx::fast::scaled_dot_product_attention(in[0], in[1], in[2], scale, mode);
        };
        report(("sdpa_prefill_" + shape + tag).c_str(), 10, [&] { return f({q, k, v}); }, 3);
        if (s.backward) {
          report_all(("sdpa_prefill_fwd_bwd_" + shape + tag).c_str(), 10, [&] { return forward_backward(f, {q, k, v}, g); }, 3);
        }
      }
    }
  }
  if (want("matmul")) {
    for (int n : {4096, 8192}) {
      for (auto [dt, name] : {std::pair{nx::bfloat16, "bf16"}, std::pair{nx::float16, "f16"},
                              std::pair{nx::float32, "f32"}}) {
        nx::array a = rand_gpu({n, n}, dt);
        nx::array b = rand_gpu({n, n}, dt);
        std::string label = std::string("matmul_") + name + "_" + std::to_string(n);
        report(label.c_str(), n == 8192 && dt == nx::float32 ? 5 : 10,
               [&] { return nx::matmul(a, b); });
      }
    }
  }
  if (want("quantized")) {
    // Quantized products (issue 13): affine W4 and W8, group 64, bf16 activations, M rows
    // against N x K weights (transposed, as a linear layer), beside nuvec's dense bf16 matmul
    // (cuBLAS) of the same shape; then mixture-of-experts decode through gather_qmm (128
    // experts, 8 active per token, W4 g64, sorted indices). Each op reads a different copy of
    // the weights (copies enough to exceed 256 MB, four times the L2), so that the weight
    // read comes from device memory as in a model. bench/gpu_compare.py prints the ratios and
    // the fraction of the weight-read floor.
    const std::vector<int> rows = {1, 2, 4, 8, 16, 32, 64, 128, 512};
    const std::vector<std::pair<int, int>> shapes = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}};
    const double rotate_bytes = 256.0 * (1 << 20);
    auto copies = [&](double bytes) { return std::max(2, static_cast<int>(std::ceil(rotate_bytes / bytes))); };
    for (auto [N, K] : shapes) {
      const std::string shape = std::to_string(N) + "x" + std::to_string(K);
      for (int bits : {4, 8}) {
        const double qbytes = double(N) * K * bits / 8 + double(N) * (K / 64) * 2 * 2;
        std::vector<std::vector<nx::array>> qw;
        for (int c = 0, n = copies(qbytes); c < n; ++c) {
          qw.push_back(nx::quantize(rand_gpu({N, K}, nx::bfloat16), 64, bits));
          nx::eval(qw.back());
        }
        for (int m : rows) {
          nx::array x = rand_gpu({m, K}, nx::bfloat16);
          size_t i = 0;
          const std::string label = "qmm_w" + std::to_string(bits) + "g64_bf16_m" + std::to_string(m) + "_" + shape;
          report(label.c_str(), m <= 64 ? 20 : 10, [&] {
            const auto& q = qw[i++ % qw.size()];
            return nx::quantized_matmul(x, q[0], q[1], q[2], true, 64, bits);
          });
        }
      }
      std::vector<nx::array> dense;
      for (int c = 0, n = copies(double(N) * K * 2); c < n; ++c) dense.push_back(rand_gpu({N, K}, nx::bfloat16));
      for (int m : rows) {
        nx::array x = rand_gpu({m, K}, nx::bfloat16);
        size_t i = 0;
        const std::string label = "dense_bf16_m" + std::to_string(m) + "_" + shape;
        report(label.c_str(), m <= 64 ? 20 : 10, [&] {
          return nx::matmul(x, nx::transpose(dense[i++ % dense.size()]));
        });
      }
    }
    // MoE decode: each token picks 8 distinct experts at random; the (expert, token) pairs
    // sorted by expert give rhs (sorted) and lhs (the token). 16 index sets and 4 copies of
    // the 128 experts rotate per op. Prints the mean number of experts an op touches as
    // "info_touched_<label> <count> 0" for the floor.
    const int experts = 128, top = 8;
    for (auto [N, K] : std::vector<std::pair<int, int>>{{768, 2048}, {2048, 768}}) {
      std::vector<std::vector<nx::array>> ws;
      for (int c = 0; c < 4; ++c) {
        ws.push_back(nx::quantize(rand_gpu({experts, N, K}, nx::bfloat16), 64, 4));
        nx::eval(ws.back());
      }
      for (int tokens : {1, 32}) {
        std::mt19937 gen(1234 + tokens);
        std::vector<nx::array> lhs, rhs;
        double touched = 0;
        for (int r = 0; r < 16; ++r) {
          std::vector<std::pair<uint32_t, uint32_t>> pairs; // (expert, token)
          for (int t = 0; t < tokens; ++t) {
            std::vector<uint32_t> e(experts);
            for (int k = 0; k < experts; ++k) e[k] = k;
            std::shuffle(e.begin(), e.end(), gen);
            for (int k = 0; k < top; ++k) pairs.emplace_back(e[k], t);
          }
          std::sort(pairs.begin(), pairs.end());
          std::vector<uint32_t> l, h;
          for (auto [e, t] : pairs) h.push_back(e), l.push_back(t);
          touched += static_cast<double>(std::unique(h.begin(), h.end()) - h.begin());
          for (size_t k = 0; k < pairs.size(); ++k) h[k] = pairs[k].first;
          const int n = static_cast<int>(pairs.size());
          lhs.push_back(nx::array(l.begin(), {n}, nx::uint32));
          rhs.push_back(nx::array(h.begin(), {n}, nx::uint32));
        }
        nx::eval(lhs);
        nx::eval(rhs);
        nx::array x = rand_gpu({tokens, 1, K}, nx::bfloat16);
        size_t i = 0;
        const std::string label = "gather_qmm_w4g64_bf16_e128_top8_t" + std::to_string(tokens) + "_" +
            std::to_string(N) + "x" + std::to_string(K);
        report(label.c_str(), 20, [&] {
          const size_t k = i++;
          const auto& q = ws[k % ws.size()];
          return nx::gather_qmm(x, q[0], q[1], q[2], lhs[k % lhs.size()], rhs[k % rhs.size()], true, 64, 4,
                                "affine", true);
        });
        std::printf("info_touched_%s %.3f 0\n", label.c_str(), touched / 16);
        std::fflush(stdout);
      }
    }
    // The decode MoE's bytes as one QuantizedMatmul (8 experts' rows stacked, no indices and
    // no index check): what gather_qmm's batch-1 rows would cost without the gathering.
    {
      std::vector<std::vector<nx::array>> qw;
      for (int c = 0; c < 36; ++c) {
        qw.push_back(nx::quantize(rand_gpu({8 * 768, 2048}, nx::bfloat16), 64, 4));
        nx::eval(qw.back());
      }
      nx::array x = rand_gpu({1, 2048}, nx::bfloat16);
      size_t i = 0;
      report("gather_qmm_equiv_qmm_w4g64_bf16_m1_6144x2048", 20, [&] {
        const auto& q = qw[i++ % qw.size()];
        return nx::quantized_matmul(x, q[0], q[1], q[2], true, 64, 4);
      });
    }
  }
  if (want("gated_delta")) {
    // Qwen3-Next-80B's Gated DeltaNet layers: 16 key heads, 32 value heads, head dims 128,
    // bf16 activations, float32 states; q and k L2-normalised, decays in (0.5, 1), beta in
    // (0, 1) (bench/gpu_compare.py runs transformers' torch reference on the same shapes).
    const int hk = 16, hv = 32, d = 128;
    auto unit_rows = [](const nx::Shape& shape) {
      nx::array x = nx::random::normal(shape, nx::float32);
      x = nx::astype(nx::divide(x, nx::sqrt(nx::sum(nx::square(x), -1, true))), nx::bfloat16);
      nx::eval(x);
      return x;
    };
    auto in_range = [](const nx::Shape& shape, float lo, float hi) {
      nx::array x = nx::astype(nx::random::uniform(lo, hi, shape, nx::float32), nx::bfloat16);
      nx::eval(x);
      return x;
    };
    // Decode: one step of B sequences (the floor: the states read and written once).
    for (int b : {1, 32, 256}) {
      nx::array q = unit_rows({b, 1, hk, d}), k = unit_rows({b, 1, hk, d});
      nx::array v = rand_gpu({b, 1, hv, d}, nx::bfloat16);
      nx::array g = in_range({b, 1, hv}, 0.5f, 1.0f), beta = in_range({b, 1, hv}, 0.0f, 1.0f);
      nx::array state = rand_gpu({b, hv, d, d}, nx::float32);
      const std::string name = "gated_delta_decode_bf16_b" + std::to_string(b) + "_hk16_hv32_d128";
      report_all(name.c_str(), 20, [&] {
        auto [y, s] = nx::fast::gated_delta(q, k, v, g, beta, state);
        return std::vector<nx::array>{y, s};
      });
    }
    // Prefill of one sequence, 16 heads (Hk = Hv), from a zero state.
    for (int t : {8192, 65536}) {
      const int h = 16;
      nx::array q = unit_rows({1, t, h, d}), k = unit_rows({1, t, h, d});
      nx::array v = rand_gpu({1, t, h, d}, nx::bfloat16);
      nx::array g = in_range({1, t, h}, 0.5f, 1.0f), beta = in_range({1, t, h}, 0.0f, 1.0f);
      nx::array state = nx::zeros({1, h, d, d}, nx::float32);
      const std::string name = "gated_delta_prefill_bf16_b1_t" + std::to_string(t) + "_h16_d128";
      report_all(name.c_str(), 5, [&] {
        auto [y, s] = nx::fast::gated_delta(q, k, v, g, beta, state);
        return std::vector<nx::array>{y, s};
      }, 2);
    }
  }
  if (want("chain")) {
    // 10,000 small dependent ops built and evaluated as one graph: the per-op cost of graph
    // building, scheduling and launching (nothing to fuse: compile is not used).
    nx::array x = rand_gpu({1024}, nx::float32);
    const int ops = 10000;
    double ms = median_ms(5, 1, [&] {
      nx::array y = x;
      for (int i = 0; i < ops; ++i) y = nx::add(y, x);
      return std::vector<nx::array>{y};
    });
    std::printf("chain_10000_small_ops_per_op_us %.6f 5\n", ms * 1000.0 / ops);
  }
  return 0;
}
