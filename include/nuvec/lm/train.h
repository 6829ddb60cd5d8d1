// Training a small Llama-style language model from scratch on a text corpus (`nuvec-lm train`):
// a byte-level BPE tokenizer trained on the corpus (bpe_trainer.h), next-token cross entropy
// over random windows of the concatenated documents, AdamW with warm-up and cosine decay,
// global-norm gradient clipping, and checkpoints in the Hugging Face layout that Model::load,
// lm::load and transformers' LlamaForCausalLM read.
//
// The recipe is nanoGPT's / the GPT-3 paper's (Brown et al., 2020, appendix B): AdamW betas
// (0.9, 0.95), weight decay 0.1 on matrices only, linear warm-up then cosine decay to a tenth
// of the peak rate, gradients clipped to global norm 1, documents joined by <|endoftext|>.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "nuvec/dtype.h"
#include "nuvec/lm/config.h"
#include "nuvec/lm/model.h"
#include "nuvec/lm/tokenizer.h"
#include "nuvec/lm/weights.h"

namespace nuvec::lm {

/// Where Debian's `fortunes` and `fortunes-min` packages put the fortune cookies (the default
/// corpus of `nuvec-lm train`).
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

/// The special token that separates documents; it is also the BOS, EOS and padding token of
/// the trained model (GPT-2's convention).
inline constexpr const char* kEndOfText = "<|endoftext|>";

/// The documents of a directory of text files (read_corpus).
struct Corpus {
  std::vector<std::string> documents; ///< In file order, then order within each file.
  std::vector<std::string> files;     ///< The files read (paths, sorted).
  std::vector<std::string> skipped;   ///< Files left out: not UTF-8 text (NUL bytes, invalid UTF-8).
};

/// Reads every regular file under `dir` (recursively; symbolic links and strfile's "*.dat"
/// indexes are skipped, so /usr/share/games/fortunes is read once) in sorted path order and
/// splits each at lines holding only "%" (the fortune/strfile format; a file without such
/// lines is one document). Trailing newlines of each document are dropped; documents that
/// are empty or only whitespace are left out. Throws std::runtime_error
/// ("[lm.train] read_corpus: ...") when `dir` is not a readable directory or yields no
/// document.
Corpus read_corpus(const std::string& dir);

/// The settings of a training run; nuvec-lm train's flags have the same names
/// (--layers, --hidden, ...). The defaults are nuvec-lm train's: on 2 CPU cores (float32,
/// about 4300 tokens/s) the whole run takes about 5 minutes and the held-out loss of the
/// fortunes falls from 7.65 to 4.38.
struct TrainOptions {
  // Model: ModelConfig with model_type "llama", head_dim = hidden / heads, untied embeddings.
  int layers = 4;          ///< num_hidden_layers.
  int hidden = 128;        ///< hidden_size.
  int heads = 4;           ///< num_attention_heads (must divide hidden).
  int kv_heads = 4;        ///< num_key_value_heads (must divide heads).
  int intermediate = 384;  ///< intermediate_size of the SwiGLU MLP.
  int context = 128;       ///< Tokens per training sequence, and max_position_embeddings.
  int vocab = 2048;        ///< Tokenizer vocabulary (an upper bound: a small corpus may give fewer).

  // Optimisation.
  int64_t steps = 1200;       ///< Total optimizer updates (counting those before a resume).
  int batch = 8;              ///< Sequences per update.
  double lr = 3e-3;           ///< Peak learning rate (after warm-up).
  double min_lr = 3e-4;       ///< Learning rate at the end of the cosine decay.
  int64_t warmup = 50;        ///< Linear warm-up steps, lr / warmup up to lr (0: none).
  double weight_decay = 0.1;  ///< AdamW decoupled weight decay, on 2-d weights only.
  double grad_clip = 1.0;     ///< Global gradient-norm bound (0: no clipping).
  double beta1 = 0.9;         ///< AdamW betas.
  double beta2 = 0.95;
  Dtype dtype = float32;      ///< Compute dtype: float32, bfloat16 or float16 (master weights stay float32).
  uint64_t seed = 0;          ///< Initialisation, the held-out split and the batches.

  // Evaluation.
  double eval_fraction = 0.05; ///< Share of the documents held out (0: no evaluation).
  int eval_every = 100;        ///< Evaluate every this many steps, and after the last (0: only after the last).
  int eval_tokens = 16384;     ///< Held-out target tokens per evaluation at most (the first ones).

  // Checkpoints.
  std::string out = "lm-run"; ///< Checkpoint directory.
  int save_every = 300;       ///< Save every this many steps (0: only at the end).
  bool resume = false;        ///< Continue the run saved in `out` (Trainer's constructor).
  std::string data;           ///< Where the documents came from (saved in trainer_state.json; not read here).

  /// Throws std::invalid_argument ("[lm.train] <option> must ...; got ...") for a size that
  /// is not positive, heads not dividing hidden or kv_heads not dividing heads, an odd
  /// head_dim (rope needs pairs), context < 2, vocab < 257 (the 256 bytes and <|endoftext|>),
  /// lr <= 0, min_lr < 0 or > lr, warmup < 0 or >= steps, weight_decay < 0, grad_clip < 0,
  /// betas outside [0, 1), a dtype other than float32/bfloat16/float16, eval_fraction outside
  /// [0, 0.5], eval_every, eval_tokens or save_every < 0, or an empty out.
  void validate() const;
};

/// The saved options of the run in `dir` (its trainer_state.json), for resuming with the
/// same settings (nuvec-lm train --resume takes them as the defaults of its flags).
/// Throws std::runtime_error ("[lm.train] ...") when the file is missing or malformed.
TrainOptions read_train_options(const std::string& dir);

/// One optimizer update, as the loss curve (loss.csv) records it.
struct TrainRecord {
  int64_t step = 0;             ///< 1-based number of the update.
  double loss = 0;              ///< Training loss of the update's batch (mean over its targets).
  double eval_loss = std::numeric_limits<double>::quiet_NaN(); ///< Held-out loss after it; NaN if not evaluated.
  double learning_rate = 0;     ///< The rate the update used.
  double grad_norm = 0;         ///< Global gradient norm before clipping.
  double tokens_per_second = 0; ///< Target tokens per second of update time, this session so far.
  double seconds = 0;           ///< Update time so far, all sessions together (evaluations and saves excluded).
};

/// What train()'s callback sees after each update.
struct TrainProgress {
  TrainRecord record;
  int64_t total_steps = 0;
  std::string checkpoint; ///< The directory saved after this update, or empty.
};

/// Called after every update; return false to stop (train() then saves a checkpoint, so that
/// --resume continues from there).
using TrainCallback = std::function<bool(const TrainProgress&)>;

/// The sizes of the tokenized corpus.
struct TrainDataInfo {
  int train_documents = 0;
  int eval_documents = 0;
  int64_t train_tokens = 0; ///< Including one <|endoftext|> before each document and after the last.
  int64_t eval_tokens = 0;
};

/// A training run: the tokenizer, the model's float32 master weights, the AdamW state and
/// the data, with one method per stage so that programs can report between them.
///
/// Data: documents are split into a held-out share (eval_fraction, chosen by a seeded
/// shuffle) and the rest; each is encoded without special tokens and concatenated as
/// [eot] doc [eot] doc ... [eot]. Update s draws `batch` windows of context + 1 tokens at
/// offsets that depend only on (seed, s) (SplitMix64), so the batches need no saved
/// generator state and a resumed run sees the batches the uninterrupted run would. A stream
/// shorter than a window is padded with eot and the padded targets are masked out.
/// Loss: fast::cross_entropy of Model::forward's logits [B, L, V] against the next tokens,
/// summed over the unmasked targets and divided by their count. Gradients: value_and_grad
/// over the weights (in WeightMap order). Update: the float32 gradients clipped to global
/// norm grad_clip (optimizers::clip_grad_norm), then AdamW (bias-corrected, eps 1e-8; decay
/// only on weights with 2 or more axes, i.e. not on the RMSNorm scales) with the rate
/// join_schedules({linear_schedule(lr / warmup, lr, warmup - 1), cosine_decay(lr, steps -
/// warmup, min_lr)}, {warmup}): update s (from 0) uses lr (s + 1) / warmup during the warm-up
/// (nanoGPT's), then the cosine from lr towards min_lr (reached after the last update). Mixed precision: with dtype bfloat16 or float16 the forward and backward pass
/// run on weights cast to that dtype, the gradients come back float32 through the casts, and
/// the update is applied to float32 master weights.
class Trainer {
 public:
  /// A new run (options.resume false): trains the tokenizer on the training documents
  /// (train_bpe_tokenizer_json, special token <|endoftext|> at id 0), builds the config and
  /// initialises the weights (init_weights, normal(0, 0.02), key random::key(seed)).
  /// A resumed run (options.resume true): reads options.out (trainer_state.json,
  /// tokenizer.json, config.json, the weights and optimizer.safetensors) and continues at its
  /// step. Throws std::invalid_argument as TrainOptions::validate, for no non-empty document,
  /// and on resume when an option that shapes the run differs from the saved one (all but
  /// steps, eval_every, save_every, out, resume and data; the message names it) or the
  /// documents differ from the saved run's (their fingerprint); std::runtime_error when the
  /// checkpoint cannot be read; as train_bpe_tokenizer_json (e.g. invalid UTF-8).
  Trainer(TrainOptions options, const std::vector<std::string>& documents);
  ~Trainer();
  Trainer(Trainer&&) noexcept;
  Trainer& operator=(Trainer&&) noexcept;

  const TrainOptions& options() const;
  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  /// The tokenizer.json text of tokenizer().
  const std::string& tokenizer_json() const;
  /// The float32 master weights (evaluated).
  const WeightMap& weights() const;
  const TrainDataInfo& data_info() const;
  /// The number of weights (scalars) of the model.
  int64_t parameter_count() const;
  /// Updates done so far (0 for a new run; the saved step after a resume).
  int64_t step() const;
  /// The learning rate of the next update.
  double learning_rate() const;
  /// The loss curve so far (a resumed run starts with the saved loss.csv rows).
  const std::vector<TrainRecord>& history() const;

  /// One update on the batch of step() + 1; appends its record to history() and returns it
  /// (eval_loss NaN). Evaluates the new weights and optimizer state before returning.
  TrainRecord train_step();

  /// The mean cross entropy over the first eval_tokens targets of the held-out stream (in
  /// non-overlapping windows of `context` positions), with the compute-dtype weights; NaN
  /// when nothing is held out. Sets the eval_loss of the last history() record when there
  /// is one.
  double evaluate();

  /// Writes a checkpoint to `dir` (created if needed; each file written to a temporary name
  /// and renamed): config.json (ModelConfig::to_json_string), model.safetensors
  /// (save_weights, in the compute dtype), tokenizer.json, tokenizer_config.json,
  /// generation_config.json, optimizer.safetensors (the AdamW state, "step", and with a
  /// compute dtype other than float32 the master weights as "master.<name>"),
  /// trainer_state.json (step, options, data fingerprint, seconds; written last) and
  /// loss.csv. Throws std::runtime_error when a file cannot be written.
  void save(const std::string& dir) const;

  /// The model with the current weights in the compute dtype (for evaluation or generate()).
  Model model() const;

  /// Updates up to options().steps, evaluating every eval_every steps and after the last,
  /// saving to options().out every save_every steps and after the last (or when `callback`
  /// returns false: then it stops there), calling `callback` after every update (after that
  /// update's evaluation and save). Nothing happens when step() >= options().steps.
  /// Throws as save does.
  void run(const TrainCallback& callback = {});

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Trainer(options, documents).run(callback): a new or resumed run up to options.steps.
/// Returns the trainer, whose model() and tokenizer() are ready for generate().
/// Throws as Trainer's constructor and save do.
Trainer train(const TrainOptions& options, const std::vector<std::string>& documents,
              const TrainCallback& callback = {});

} // namespace nuvec::lm
