// Prefill and decode loop (include/nuvec/lm/generate.h).
#include "nuvec/lm/generate.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>

#include "core/host_profile.h"
#include "layers.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/stop_strings.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec::lm {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[lm.generate] " + what);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void eval_cache(Cache& cache) {
  std::vector<array> arrays;
  for (auto& layer : cache.layers) {
    // A Gated DeltaNet layer's state chains every chunk too.
    for (array* a : {&layer.keys, &layer.values, &layer.conv_state, &layer.recurrent_state}) arrays.push_back(*a);
  }
  eval(arrays);
}

} // namespace

namespace {

// The request through a one-request Engine over a paged KV cache just large enough: its
// prefill chunks and decode steps are compiled and, on a GPU, replayed as CUDA graphs.
GenerationResult generate_paged(const Model& model, const std::vector<int>& prompt, const GenerationOptions& options,
                                int max_new, const TokenCallback& on_token) {
  EngineOptions eo;
  eo.num_blocks = int((prompt.size() + max_new + eo.block_size - 1) / eo.block_size);
  eo.max_batch_tokens = std::max(options.prefill_step, 1);
  eo.max_running = 1;
  eo.prefix_sharing = false;
  Engine engine(model, eo);
  EngineRequest request;
  request.prompt = prompt;
  request.sampling = options.sampling;
  request.max_tokens = max_new;
  request.stop_at_eos = options.stop_at_eos;
  GenerationResult result;
  result.prompt_tokens = int(prompt.size());
  const auto t0 = std::chrono::steady_clock::now();
  auto t_decode = t0;
  std::exception_ptr thrown; // the caller's callback's own exception, rethrown as it was
  engine.submit(
      request,
      [&](int token) {
        if (result.tokens.empty()) {
          result.prefill_seconds = seconds_since(t0);
          t_decode = std::chrono::steady_clock::now();
        }
        result.tokens.push_back(token);
        try {
          return on_token ? on_token(token) : true;
        } catch (...) {
          thrown = std::current_exception();
          return false;
        }
      },
      [&](const EngineResult& r) { result.finish_reason = r.finish_reason; });
  engine.run_until_idle();
  result.decode_seconds = seconds_since(t_decode);
  if (thrown) std::rethrow_exception(thrown);
  if (result.finish_reason.rfind("error: ", 0) == 0) {
    throw std::runtime_error("[lm.generate] " + result.finish_reason.substr(7));
  }
  return result;
}

} // namespace

GenerationResult generate_tokens(const Model& model, const std::vector<int>& prompt, const GenerationOptions& options,
                                 const TokenCallback& on_token) {
  const ModelConfig& config = model.config();
  const int n = int(prompt.size());
  if (n == 0) {
    fail("the prompt is empty");
  }
  if (n >= config.max_position_embeddings) {
    fail("the prompt has " + std::to_string(n) + " tokens; the model's context (max_position_embeddings) is " +
         std::to_string(config.max_position_embeddings) + ", which leaves no room to generate");
  }
  for (int id : prompt) {
    if (id < 0 || id >= config.vocab_size) {
      fail("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(config.vocab_size));
    }
  }
  Sampler sampler(options.sampling);
  const int max_new = std::min(options.max_tokens, config.max_position_embeddings - n);
  GenerationResult result;
  result.prompt_tokens = n;
  result.finish_reason = "length";
  if (max_new <= 0) {
    return result;
  }
  if (options.cuda_graphs && n <= options.prefill_step && default_device().type == Device::gpu) {
    return generate_paged(model, prompt, options, max_new, on_token);
  }
  const bool penalise = options.sampling.repetition_penalty != 1.0f;
  std::vector<int> context = prompt;
  auto t0 = std::chrono::steady_clock::now();

  Cache cache = model.make_cache(1, n + max_new);
  array logits = array(0.0f);
  const int step = std::max(options.prefill_step, 1);
  for (int start = 0; start < n; start += step) {
    int len = std::min(step, n - start);
    array chunk(prompt.begin() + start, {1, len}, int32);
    logits = model(chunk, &cache);
    if (start + len < n) {
      eval_cache(cache); // keep the graph of a long prompt bounded
    }
  }
  auto last_row = [](const array& l) {
    int L = l.shape(1), V = l.shape(2);
    return reshape(slice(l, {0, L - 1, 0}, {1, L, V}), {1, V});
  };
  auto t_decode = t0;
  auto context_array = [&]() -> std::optional<array> {
    if (!penalise) {
      return std::nullopt;
    }
    return array(context.begin(), {1, int(context.size())}, int32);
  };
  // Without a repetition penalty the next step needs nothing from the host: it is built and
  // queued (async_eval) before this step's token is read, so the host prepares step i + 1
  // while the device runs step i (mlx-lm's generate_step does the same). A stop waits for the
  // step queued ahead, then discards it: nothing this call queued is still running when it
  // returns (a step left running raced the process's exit, OpenBLAS torn down under a stream
  // worker's matmul: a crash in 1 of ~150 runs of a test that stops at a stop string). With
  // the penalty each step waits for the token it penalises.
  const bool pipelined = !penalise;
  array next = sampler(last_row(logits), context_array());
  if (pipelined) {
    async_eval({next});
  }
  for (int i = 0; i < max_new; ++i) {
    std::optional<array> ahead;
    const double tp = host_profile::enabled() ? host_profile::now() : 0;
    if (pipelined && i + 1 < max_new) {
      ahead = sampler(last_row(model(reshape(next, {1, 1}), &cache)), std::nullopt);
      const double tp1 = tp ? host_profile::now() : 0;
      async_eval({*ahead});
      if (tp) {
        host_profile::add("lm step build", tp1 - tp);
        host_profile::add("lm step async_eval", host_profile::now() - tp1);
      }
    }
    const double tp2 = tp ? host_profile::now() : 0;
    eval(next);
    if (tp) host_profile::add("lm step wait", host_profile::now() - tp2);
    int token = next.item<int>();
    if (i == 0) {
      result.prefill_seconds = seconds_since(t0);
      t_decode = std::chrono::steady_clock::now();
    }
    result.tokens.push_back(token);
    context.push_back(token);
    bool eos = options.stop_at_eos &&
        std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), token) != config.eos_token_ids.end();
    bool go_on = on_token ? on_token(token) : true;
    if (eos || !go_on) {
      result.finish_reason = "stop";
      if (ahead) eval(*ahead);
      break;
    }
    if (ahead) {
      next = *ahead;
    } else if (!pipelined && i + 1 < max_new) {
      logits = model(array({token}, {1, 1}, int32), &cache);
      next = sampler(last_row(logits), context_array());
    }
  }
  result.decode_seconds = seconds_since(t_decode);
  return result;
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, const std::vector<int>& prompt,
                          const GenerationOptions& options, const TextCallback& on_text) {
  StopStringDecoder decoder(tokenizer, options.stop_strings);
  std::string text; // everything final so far
  bool user_stop = false;
  auto emit = [&](const std::string& piece) {
    text += piece;
    if (on_text && !piece.empty() && !on_text(piece)) {
      user_stop = true;
    }
  };
  GenerationResult result = generate_tokens(model, prompt, options, [&](int token) {
    emit(decoder.push(token));
    return !decoder.stopped() && !user_stop;
  });
  emit(decoder.finish());
  if (decoder.stopped()) {
    result.finish_reason = "stop";
  }
  result.text = text;
  return result;
}

} // namespace nuvec::lm
