// nuvec-lm-timings: prefill and batch-1 decode (lm::generate_tokens, greedy) of random-initialised language models shaped
// like real ones, on the GPU (bench/lm_compare.py runs it beside transformers and prints the
// table). One JSON line per measurement on stdout:
//   {"shape": ..., "bits": 0|4, "prefill": L, "prefill_tok_s": ..., "decode_tok_s": ...,
//    "step_ms": ..., "build_ms": ... (building one step's graph), "nodes": ... (in it),
//    "weight_bytes": ..., "kv_bytes_per_token": ...}
// Usage: nuvec-lm-timings SHAPE [--bits 4] [--prefill 1024,8192] [--decode 64]
//   SHAPE: llama-3.2-1b, qwen3-0.6b or qwen3-8b (their config.json sizes), or qwen3-tiny
//   (Qwen3-0.6B's 28 layers at tiny widths: the host's cost per decode step).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "nuvec/device.h"
#include "nuvec/lm/lm.h"
#include "nuvec/ops.h"
#include "nuvec/random.h"
#include "nuvec/transforms.h"

#include "lm_shapes.h"

namespace nx = nuvec;
using nuvec::bench::random_model;
namespace lm = nuvec::lm;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The nodes a decode step's graph holds (unevaluated arrays with a primitive, siblings once).
size_t count_nodes(const nx::array& out) {
  std::unordered_set<std::uintptr_t> seen;
  std::vector<nx::array> stack = {out};
  size_t n = 0;
  while (!stack.empty()) {
    nx::array a = stack.back();
    stack.pop_back();
    if (!a.has_primitive() || a.status() != nx::array::Status::unscheduled || !seen.insert(a.primitive_id()).second) {
      continue;
    }
    ++n;
    for (auto& in : a.inputs()) stack.push_back(in);
  }
  return n;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: nuvec-lm-timings SHAPE [--bits 4] [--prefill 1024,8192] [--decode 64]\n";
    return 1;
  }
  std::string shape = argv[1];
  int bits = 0, decode = 64;
  std::vector<int> prefills = {1024, 8192};
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--bits") {
      bits = std::stoi(value);
    } else if (flag == "--decode") {
      decode = std::stoi(value);
    } else if (flag == "--prefill") {
      prefills.clear();
      std::stringstream ss(value);
      for (std::string part; std::getline(ss, part, ',');) prefills.push_back(std::stoi(part));
    }
  }
  nx::set_default_device(nx::Device(nx::is_available(nx::Device(nx::Device::gpu)) ? nx::Device::gpu : nx::Device::cpu));
  lm::Model model = random_model(shape, bits);
  const lm::ModelConfig& config = model.config();
  const size_t weight_bytes = nx::bench::decode_weight_bytes(model);
  const size_t kv_per_token = nx::bench::kv_bytes_per_token(config);

  for (int L : prefills) {
    std::vector<int> prompt(L);
    {
      nx::array ids = nx::random::randint(0, config.vocab_size, {L}, nx::int32, nx::random::key(1));
      for (int i = 0; i < L; ++i) prompt[i] = ids.data<int32_t>()[i];
    }
    lm::GenerationOptions options; // greedy, nuvec-lm generate's loop (pipelined decode)
    options.max_tokens = decode + 1;
    options.stop_at_eos = false;
    options.prefill_step = L;
    // Prefill through the dense path (the one long prompts take); decode as nuvec-lm generate
    // runs it (on a GPU: a one-request Engine replaying CUDA graphs, GenerationOptions).
    lm::GenerationOptions dense = options;
    dense.cuda_graphs = false;
    dense.max_tokens = 1;
    double prefill_s = 1e30, decode_s = 1e30;
    for (int rep = 0; rep < 3; ++rep) { // the first round warms up (allocations, plans)
      lm::GenerationResult p = lm::generate_tokens(model, prompt, dense);
      lm::GenerationResult r = lm::generate_tokens(model, prompt, options);
      if (rep > 0) {
        prefill_s = std::min(prefill_s, p.prefill_seconds);
        decode_s = std::min(decode_s, r.decode_seconds);
      }
    }
    // The host's share: building one decode step's graph (not evaluated), and its size.
    double build_s = 0;
    size_t nodes = 0;
    {
      lm::Cache cache = model.make_cache(1, L + 2);
      nx::eval(model(nx::array(prompt.begin(), {1, L}, nx::int32), &cache));
      const int reps = 20;
      double t0 = now();
      for (int i = 0; i < reps; ++i) {
        lm::Cache scratch = cache; // the step's graph reassigns the copy's arrays only
        nx::array next = nx::argmax(model(nx::array({1}, {1, 1}, nx::int32), &scratch), -1);
        if (i == 0) nodes = count_nodes(next);
      }
      build_s = (now() - t0) / reps;
    }
    std::printf("{\"shape\": \"%s\", \"bits\": %d, \"prefill\": %d, \"prefill_tok_s\": %.1f, \"decode\": %d, "
                "\"decode_tok_s\": %.2f, \"step_ms\": %.3f, \"build_ms\": %.3f, \"nodes\": %zu, \"weight_bytes\": %zu, "
                "\"kv_bytes_per_token\": %zu}\n",
                shape.c_str(), bits, L, L / prefill_s, decode, decode / decode_s, 1e3 * decode_s / decode,
                1e3 * build_s, nodes, weight_bytes, kv_per_token);
    std::fflush(stdout);
  }
  return 0;
}
