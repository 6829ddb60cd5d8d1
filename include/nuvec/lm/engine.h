// The serving engine of nuvec-lm: many requests at once over one paged KV cache (vLLM's
// design, Kwon et al. 2023, "Efficient Memory Management for Large Language Model Serving
// with PagedAttention").
//
// Every layer's keys and values live in a pool of fixed-size blocks ([blocks, Hkv,
// block_size, D], fast::paged_write stores, fast::paged_attention reads); a sequence owns the
// blocks listed in its block table. Each step() runs one forward pass over a ragged batch:
// one token of every decoding sequence plus chunks of prompts being prefilled (chunked
// prefill beside the decodes), each token attending to its own sequence's blocks up to its
// position. Requests are admitted while blocks allow; when a decode needs a block and none is
// free, the most recently admitted sequence is preempted (its blocks freed, its prompt and
// the tokens it made so far recomputed later) rather than failing. Full prompt blocks with
// the same tokens are shared between sequences (prefix sharing, reference-counted).
// Finished and cancelled sequences free their blocks at once.
//
// Hybrid models (Qwen3-Next: Gated DeltaNet layers beside attention layers) keep, per running
// sequence, one row of each Gated DeltaNet layer's state pools (its conv inputs, read by
// causal_conv1d_step or the conv and stored by paged_write; its recurrent state, read and
// written by fast::gated_delta_slots), as vLLM's Mamba cache; the row is taken at admission
// and freed with the blocks. Their decodes run together; each prompt
// chunk runs its conv and recurrence alone. A preempted sequence recomputes its state from
// its tokens (or restores a kept snapshot of its prefix). Prefix sharing needs the Gated DeltaNet states at the prefix's end, which the
// blocks do not hold: the engine keeps them in snapshot rows of the state pools (vLLM's
// prefix caching of Mamba states, at block boundaries). A sequence that finds another's
// published prefix without a snapshot computes it and stops a chunk at the prefix's end to
// keep one, for the next sequence with that prefix; each sequence also keeps the state at its
// last full prompt block (a later request extending it, a chat's next turn, starts there).
// Those stops move chunk boundaries, and so float rounding: a near-tie (an MoE router's,
// say) may then resolve otherwise than without sharing, as it may under another
// max_batch_tokens.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nuvec/lm/model.h"
#include "nuvec/lm/sampler.h"

namespace nuvec::lm {

/// The engine's sizes.
struct EngineOptions {
  int block_size = 16;          ///< Positions per KV block.
  /// KV blocks in the pool. 0: on a GPU, gpu_memory_fraction of the device memory free when
  /// the engine starts (the allocator's cache counted as free), less the Gated DeltaNet state
  /// pools of hybrid models (max_running rows, bucket(N) − N spare rows for the padding of
  /// bucketed steps, N the smaller of max_running and max_batch_tokens, and the
  /// prefix_state_rows snapshot rows); on the CPU, at
  /// most 8192; either way at most 16 sequences of the full context.
  int num_blocks = 0;
  float gpu_memory_fraction = 0.5f; ///< In (0, 1]: the pools' share of free GPU memory (num_blocks 0).
  int max_batch_tokens = 512;   ///< Tokens one step computes (decodes first, then prefill chunks).
  /// Sequences admitted at once; in a hybrid model also the rows of every Gated DeltaNet
  /// layer's state pools (with the spare rows of num_blocks' note), allocated when the engine
  /// starts (Qwen3-Next-80B: about 74 MiB a row).
  int max_running = 256;
  /// Share full prompt blocks with equal tokens. In a hybrid model a prefix is shared only
  /// where its Gated DeltaNet states were kept (prefix_state_rows).
  bool prefix_sharing = true;
  /// Hybrid models with prefix_sharing: rows of every Gated DeltaNet layer's state pools that
  /// keep the states at the end of a shared prefix (a block's keys and values do not give
  /// them), least recently used first out; a snapshot lives as long as its prefix's blocks.
  /// -1: max(1, max_running / 8) (Qwen3-Next-80B at max_running 256: 32 rows, about 2.3 GiB
  /// taken before the KV blocks); 0: no prefix sharing in hybrid models.
  int prefix_state_rows = -1;
  /// Pad each step to a bucket (tokens, sampled rows and block-table width each to a power of
  /// two) and run its forward pass through compile_graph: on a GPU each bucket is captured once
  /// as a CUDA graph and replayed (GraphReplay in compile.h); on the CPU compile replays the trace.
  /// Steps with a sequence's first chunk of 2 tokens or more, or (hybrid models) any range
  /// but one-token continuations, run uncompiled.
  /// Off: each step's graph is built and run as it is.
  bool compiled_steps = true;
};

/// One generation request (token ids in, token ids out; text is the caller's).
struct EngineRequest {
  std::vector<int> prompt;      ///< At least one token, all inside the vocabulary.
  SamplingOptions sampling;     ///< Greedy by default; a seed makes the request reproducible.
  int max_tokens = 256;         ///< New tokens at most (also bounded by the context).
  bool stop_at_eos = true;      ///< Stop at the config's eos_token_id(s).
};

/// How a request ended.
struct EngineResult {
  std::vector<int> tokens;      ///< The new tokens (an eos that stopped it included).
  std::string finish_reason;    ///< "stop", "length", "cancelled", or "error: <what>".
  int prompt_tokens = 0;
};

/// Called on the stepping thread with each new token; return false to stop the request
/// (it then finishes with "stop").
using EngineTokenCallback = std::function<bool(int token)>;
/// Called on the stepping thread once the request has ended and its blocks are free.
using EngineFinishCallback = std::function<void(const EngineResult&)>;

/// Counters for tests and monitoring.
struct EngineStats {
  int total_blocks = 0;
  int free_blocks = 0;
  int running = 0;              ///< Sequences holding blocks.
  int waiting = 0;              ///< Submitted (or preempted) and not yet admitted.
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t shared_block_hits = 0; ///< Prompt blocks taken from another sequence instead of computed.
  /// Gated DeltaNet state rows that sequences can hold (max_running; 0 without such layers).
  int state_slots = 0;
  int free_state_slots = 0;     ///< Of them, held by no sequence.
  int prefix_states = 0;        ///< Hybrid prefix sharing: state snapshots kept.
};

/// A continuous-batching engine over a Model of any supported architecture (GPT-OSS's sinks
/// and sliding windows go through paged_attention: on a GPU its tensor-core decode kernel for
/// the engine's one-token rows, elsewhere its fallback graph).
/// submit() and cancel() may be called from any thread; steps run on the thread that calls
/// step()/run_until_idle(), or on the engine's own thread after start().
class Engine {
 public:
  /// Throws std::invalid_argument ("[lm.Engine] ...") for bad options (max_batch_tokens,
  /// max_running and (num_blocks + 1) · block_size at most 2^30; prefix_state_rows in
  /// [-1, 2^30]; a hybrid model's state rows, at most 2 · max_running plus the snapshot rows,
  /// at most 2^30), or on a GPU with num_blocks 0 for state pools (hybrid models) larger than
  /// gpu_memory_fraction of the free memory;
  /// std::runtime_error
  /// ("[lm.Engine] cannot allocate the pools ...") when the pools do not fit in memory.
  explicit Engine(const Model& model, EngineOptions options = {});
  /// Stops the background thread; requests still pending end with "cancelled": their
  /// on_finish is called here, so whatever the callbacks touch must outlive the engine (and
  /// a submit() from one of them is refused).
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a request and returns its id. Throws std::invalid_argument ("[lm.Engine] ...")
  /// for an empty prompt, a token outside the vocabulary, a prompt that leaves no room in the
  /// context, one that could never fit the pool, or bad sampling options.
  int64_t submit(EngineRequest request, EngineTokenCallback on_token = {}, EngineFinishCallback on_finish = {});
  /// Ends a request (finish reason "cancelled"); its blocks are freed by the next step. An
  /// unknown or finished id is ignored.
  void cancel(int64_t id);

  /// One step: admits what fits, runs a forward pass over the scheduled tokens, samples the
  /// sequences that reached the end of what they know, finishes and frees. Returns whether
  /// any request is still unfinished.
  bool step();
  /// Steps until every submitted request has finished.
  void run_until_idle();

  /// Steps on a background thread, sleeping while idle, until stop() (or destruction).
  void start();
  /// Ends the background thread after its current step and waits for it; from one of the
  /// engine's own callbacks (on that thread) it does not wait: the thread ends after the step
  /// (call stop() again from another thread to wait for it before stepping by hand), and a
  /// start() in a later callback of the same step keeps it running. start() and stop() may
  /// be called from any threads at once.
  void stop();

  /// A snapshot of the counters (thread-safe).
  EngineStats stats() const;
  /// The model served (the one given to the constructor, which must outlive the engine).
  const Model& model() const { return model_; }
  /// The options in force (num_blocks resolved when it was 0).
  const EngineOptions& options() const { return options_; }

 private:
  struct Impl;
  const Model& model_;
  EngineOptions options_;
  std::unique_ptr<Impl> impl_;
};

/// Runs `requests` through one engine (continuous batching) and returns their results in
/// order: nuvec-lm generate --batch.
std::vector<EngineResult> generate_batch(const Model& model, const std::vector<EngineRequest>& requests,
                                         EngineOptions options = {});

} // namespace nuvec::lm
