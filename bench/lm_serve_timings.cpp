// nuvec-lm-serve-timings: the serving engine (include/nuvec/lm/engine.h) under load, on a
// random-initialised model of a real shape (bench/lm_shapes.h). For each concurrency C, C
// requests of P random prompt tokens and O new tokens (greedy, eos ignored) are submitted at
// once; printed per C as one JSON line:
//   {"shape", "bits", "concurrency", "prompt", "output", "output_tok_s", "ttft_p50_ms",
//    "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "steps", "preemptions", "graphs",
//    "weight_bytes", "kv_bytes_per_token"}
// output_tok_s: all new tokens over the wall time; ttft: submit to first token; itl: the gaps
// between a request's tokens. Before each C is timed, the same requests with 3 new tokens
// run once, so that the step buckets it meets are compiled and captured (CUDA graphs) before
// the clock starts. --no-graphs runs the steps uncompiled (EngineOptions::compiled_steps).
// bench/lm_serve_compare.py runs it beside transformers.
// Usage: nuvec-lm-serve-timings SHAPE [--bits 4] [--concurrency 1,8,64,256] [--prompt 512]
//        [--output 256] [--block-size 16] [--num-blocks N] [--max-batch-tokens 2048] [--no-graphs]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "lm_shapes.h"
#include "nuvec/device.h"
#include "nuvec/lm/engine.h"

namespace nx = nuvec;
namespace lm = nuvec::lm;

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * (v.size() - 1) + 0.5))];
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');) out.push_back(std::stoi(part));
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nuvec-lm-serve-timings SHAPE [--bits 4] [--concurrency 1,8,64,256] [--prompt 512] "
                         "[--output 256] [--block-size 16] [--num-blocks N] [--max-batch-tokens 2048] "
                         "[--no-graphs]\n");
    return 1;
  }
  const std::string shape = argv[1];
  int bits = 0, prompt_len = 512, output_len = 256;
  std::vector<int> concurrency = {1, 8, 64, 256};
  lm::EngineOptions options;
  options.max_batch_tokens = 2048;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--no-graphs") {
      options.compiled_steps = false;
      --i; // no value
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string value = argv[i + 1];
    if (flag == "--bits") bits = std::stoi(value);
    else if (flag == "--concurrency") concurrency = int_list(value);
    else if (flag == "--prompt") prompt_len = std::stoi(value);
    else if (flag == "--output") output_len = std::stoi(value);
    else if (flag == "--block-size") options.block_size = std::stoi(value);
    else if (flag == "--num-blocks") options.num_blocks = std::stoi(value);
    else if (flag == "--max-batch-tokens") options.max_batch_tokens = std::stoi(value);
  }
  nx::set_default_device(nx::Device(nx::is_available(nx::Device(nx::Device::gpu)) ? nx::Device::gpu : nx::Device::cpu));
  lm::Model model = nx::bench::random_model(shape, bits);
  const int vocab = model.config().vocab_size;
  const int max_c = *std::max_element(concurrency.begin(), concurrency.end());
  if (options.num_blocks == 0) {
    // Room for every request of the largest concurrency at once.
    options.num_blocks = max_c * ((prompt_len + output_len + options.block_size - 1) / options.block_size) + 1;
  }
  lm::Engine engine(model, options);
  uint32_t state = 12345;
  auto next_id = [&] {
    state = state * 1664525u + 1013904223u;
    return int((state >> 8) % uint32_t(vocab));
  };
  // A warm-up request (plans, allocations).
  {
    lm::EngineRequest r;
    r.prompt.resize(std::min(prompt_len, 64));
    for (auto& t : r.prompt) t = next_id();
    r.max_tokens = 4;
    r.stop_at_eos = false;
    engine.submit(r);
    engine.run_until_idle();
  }
  for (int c : concurrency) {
    // The same requests with 3 new tokens: the buckets of this concurrency are compiled and
    // captured before the clock starts.
    for (int i = 0; i < c; ++i) {
      lm::EngineRequest r;
      r.prompt.resize(prompt_len);
      for (auto& t : r.prompt) t = next_id();
      r.max_tokens = 3;
      r.stop_at_eos = false;
      engine.submit(r);
    }
    engine.run_until_idle();
    struct Timing {
      Clock::time_point submitted;
      std::vector<Clock::time_point> tokens;
    };
    std::vector<Timing> timings(c);
    const lm::EngineStats before = engine.stats();
    const auto t0 = Clock::now();
    for (int i = 0; i < c; ++i) {
      lm::EngineRequest r;
      r.prompt.resize(prompt_len);
      for (auto& t : r.prompt) t = next_id();
      r.max_tokens = output_len;
      r.stop_at_eos = false;
      timings[i].submitted = Clock::now();
      engine.submit(r, [&timings, i](int) {
        timings[i].tokens.push_back(Clock::now());
        return true;
      });
    }
    engine.run_until_idle();
    const double wall_ms = ms_between(t0, Clock::now());
    std::vector<double> ttft, itl;
    size_t tokens = 0;
    for (auto& t : timings) {
      tokens += t.tokens.size();
      if (!t.tokens.empty()) ttft.push_back(ms_between(t.submitted, t.tokens.front()));
      for (size_t k = 1; k < t.tokens.size(); ++k) itl.push_back(ms_between(t.tokens[k - 1], t.tokens[k]));
    }
    const lm::EngineStats after = engine.stats();
    std::printf("{\"shape\": \"%s\", \"bits\": %d, \"concurrency\": %d, \"prompt\": %d, \"output\": %d, "
                "\"output_tok_s\": %.1f, \"ttft_p50_ms\": %.2f, \"ttft_p99_ms\": %.2f, \"itl_p50_ms\": %.3f, "
                "\"itl_p99_ms\": %.3f, \"steps\": %lld, \"preemptions\": %lld, \"graphs\": %s, "
                "\"weight_bytes\": %zu, \"kv_bytes_per_token\": %zu}\n",
                shape.c_str(), bits, c, prompt_len, output_len, tokens / (wall_ms / 1e3), percentile(ttft, 0.5),
                percentile(ttft, 0.99), percentile(itl, 0.5), percentile(itl, 0.99),
                static_cast<long long>(after.steps - before.steps),
                static_cast<long long>(after.preemptions - before.preemptions),
                options.compiled_steps ? "true" : "false", nx::bench::decode_weight_bytes(model),
                nx::bench::kv_bytes_per_token(model.config()));
    std::fflush(stdout);
  }
  return 0;
}
