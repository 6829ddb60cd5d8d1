// Text generation with a KV cache: the prompt is run once (in chunks of prefill_step tokens),
// then one token per step is sampled and fed back, as transformers' generate and mlx-lm's
// generate_step do.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nuvec/lm/model.h"
#include "nuvec/lm/sampler.h"
#include "nuvec/lm/tokenizer.h"

namespace nuvec::lm {

/// What to generate and when to stop.
struct GenerationOptions {
  int max_tokens = 256;                  ///< New tokens at most (also bounded by the context).
  SamplingOptions sampling;              ///< Greedy by default.
  std::vector<std::string> stop_strings; ///< Text that ends generation (excluded from the text).
  bool stop_at_eos = true;               ///< Stop at the config's eos_token_id(s).
  int prefill_step = 2048;               ///< Prompt tokens per forward call during prefill.
  /// On a GPU, for prompts that fit one prefill step (every architecture): run the request
  /// through a one-request Engine, whose decode steps are replayed CUDA graphs
  /// (compile_graph), so that decode is not bound by the host (its prefill, one fresh chunk,
  /// runs the tiled attention kernel as the dense path's does).
  /// Longer prompts take the dense path: a later chunk through the paged kernel would re-read
  /// the keys for every query row. Off, or elsewhere: the dense KV cache's loop.
  bool cuda_graphs = true;
};

/// What generation produced.
struct GenerationResult {
  std::vector<int> tokens;    ///< The new tokens (an eos token that stopped it included).
  std::string text;           ///< Their text, cut before a stop string (generate() only).
  std::string finish_reason;  ///< "stop" (eos or stop string), "length" (max_tokens or context).
  int prompt_tokens = 0;
  double prefill_seconds = 0; ///< Time to the first token.
  double decode_seconds = 0;  ///< Time of the remaining tokens.
};

/// Called with each new token as it is produced; return false to stop.
using TokenCallback = std::function<bool(int token)>;
/// Called with each piece of text as it becomes final (complete UTF-8, not part of a possible
/// stop string); return false to stop.
using TextCallback = std::function<bool(const std::string& text)>;

/// Generates up to options.max_tokens tokens after `prompt` (token ids, batch 1).
/// finish_reason "stop" when an eos token came (if stop_at_eos) or on_token returned false.
/// Throws std::invalid_argument ("[lm.generate] ...") for an empty prompt, a prompt that
/// does not fit the context (max_position_embeddings) with room for one new token, or an id
/// outside the vocabulary; as Sampler's constructor for bad sampling options.
GenerationResult generate_tokens(const Model& model, const std::vector<int>& prompt,
                                 const GenerationOptions& options, const TokenCallback& on_token = {});

/// generate_tokens with the text: tokens decoded with a StopStringDecoder (stop strings looked
/// for in the decoded text; generation ends at the first one, which is left out), and every
/// final piece of text passed to on_text as it is produced.
GenerationResult generate(const Model& model, const Tokenizer& tokenizer, const std::vector<int>& prompt,
                          const GenerationOptions& options, const TextCallback& on_text = {});

} // namespace nuvec::lm
