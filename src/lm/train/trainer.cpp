// Trainer (include/nuvec/lm/train.h): the held-out split, the token streams, the batches, the
// update step, evaluation and the training loop. The recipe (AdamW (0.9, 0.95), decay 0.1 on
// matrices, warm-up then cosine, clipping at 1, documents joined by <|endoftext|>) is
// nanoGPT's (karpathy/nanoGPT train.py) after GPT-3 (Brown et al., 2020, appendix B).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>

#include "nuvec/fast.h"
#include "nuvec/lm/bpe_trainer.h"
#include "nuvec/ops.h"
#include "nuvec/random.h"
#include "state.h"

namespace nuvec::lm {

namespace fs = std::filesystem;
using namespace train_detail;

namespace {

// SplitMix64 (Steele, Lea & Flood, 2014): the same numbers on every platform.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() { return mix64(state += 0x9E3779B97F4A7C15ULL); }
  // Uniform in [0, n) for n > 0 (the modulo bias is below 2^-40 for the sizes used here).
  uint64_t below(uint64_t n) { return next() % n; }
};

// The generator of one purpose (`stream`: 1 the split, 2 the batches) and index. The start
// state is hashed from all three: states a multiple of SplitMix64's increment apart would
// give overlapping sequences (consecutive steps sharing windows).
SplitMix64 generator(uint64_t seed, uint64_t stream, uint64_t index) {
  return SplitMix64{mix64(mix64(mix64(seed) ^ (stream * 0xD1B54A32D192ED03ULL)) ^ mix64(index))};
}

// FNV-1a over the documents, each length-prefixed (a resumed run must see the same data).
std::string fingerprint(const std::vector<std::string>& docs) {
  uint64_t h = 0xCBF29CE484222325ULL;
  auto feed = [&](const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001B3ULL;
  };
  for (const auto& d : docs) {
    const uint64_t n = d.size();
    feed(reinterpret_cast<const char*>(&n), sizeof n);
    feed(d.data(), d.size());
  }
  std::ostringstream s;
  s << std::hex << h;
  return s.str();
}

// The documents to train on and the held-out ones: the first eval_fraction of a seeded
// shuffle (at least one when eval_fraction > 0, never all), each part in corpus order.
std::pair<std::vector<std::string>, std::vector<std::string>> split_documents(const std::vector<std::string>& docs,
                                                                              double eval_fraction, uint64_t seed) {
  const auto n = static_cast<int64_t>(docs.size());
  int64_t n_eval = eval_fraction > 0 ? std::max<int64_t>(1, std::llround(eval_fraction * double(n))) : 0;
  n_eval = std::min(n_eval, n - 1);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  SplitMix64 gen = generator(seed, 1, 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[gen.below(uint64_t(i) + 1)]);
  std::vector<bool> held_out(n, false);
  for (int64_t i = 0; i < n_eval; ++i) held_out[order[i]] = true;
  std::pair<std::vector<std::string>, std::vector<std::string>> parts;
  for (int64_t i = 0; i < n; ++i) (held_out[i] ? parts.second : parts.first).push_back(docs[i]);
  return parts;
}

ModelConfig make_config(const TrainOptions& o, int vocab_size, int eot) {
  ModelConfig c;
  c.model_type = "llama";
  c.vocab_size = vocab_size;
  c.hidden_size = o.hidden;
  c.intermediate_size = o.intermediate;
  c.num_hidden_layers = o.layers;
  c.num_attention_heads = o.heads;
  c.num_key_value_heads = o.kv_heads;
  c.head_dim = o.hidden / o.heads;
  c.rms_norm_eps = 1e-5f;
  c.max_position_embeddings = o.context;
  c.tie_word_embeddings = false;
  c.bos_token_id = eot;
  c.eos_token_ids = {eot};
  c.torch_dtype = dtype_name(o.dtype);
  return c;
}

optimizers::Schedule schedule(const TrainOptions& o) {
  auto cosine = optimizers::cosine_decay(o.lr, o.steps - o.warmup, o.min_lr);
  if (o.warmup == 0) return cosine;
  // nanoGPT's warm-up: lr · (s + 1) / warmup for update s = 0, 1, ...
  auto warm = optimizers::linear_schedule(o.lr / double(o.warmup), o.lr, std::max<int64_t>(o.warmup - 1, 1));
  return optimizers::join_schedules({warm, cosine}, {o.warmup});
}

// One batch: inputs and targets [B, L] int32, per-target weights [B, L] float32 (0 for
// padding), and the number of real targets.
struct Batch {
  array inputs = array(0);
  array targets = array(0);
  array weights = array(0.0f);
  int64_t count = 0;
};

// Rows of `context` inputs and their next tokens from `stream` at `starts`; positions past
// the stream are padded with `pad` and weigh 0, the batch keeps at most `limit` targets, and
// each kept target weighs 1 / count (`mean`) or 1.
Batch make_batch(const std::vector<int32_t>& stream, const std::vector<int64_t>& starts, int context, int32_t pad,
                 bool mean, int64_t limit = std::numeric_limits<int64_t>::max()) {
  const int B = static_cast<int>(starts.size()), L = context;
  const auto N = static_cast<int64_t>(stream.size());
  std::vector<int32_t> in(size_t(B) * L, pad), tg(size_t(B) * L, pad);
  std::vector<float> w(size_t(B) * L, 0.0f);
  Batch b;
  for (int r = 0; r < B; ++r) {
    for (int j = 0; j < L; ++j) {
      const int64_t p = starts[r] + j;
      const size_t at = size_t(r) * L + j;
      if (p < N) in[at] = stream[p];
      if (p + 1 < N && b.count < limit) {
        tg[at] = stream[p + 1];
        w[at] = 1.0f;
        ++b.count;
      }
    }
  }
  if (mean && b.count > 0) {
    for (float& x : w) x /= float(b.count);
  }
  b.inputs = array(in.begin(), {B, L}, int32);
  b.targets = array(tg.begin(), {B, L}, int32);
  b.weights = array(w.begin(), {B, L}, float32);
  return b;
}

} // namespace

std::vector<array> Trainer::State::loss(const std::vector<array>& in) const {
  const size_t n = names.size();
  WeightMap w;
  for (size_t i = 0; i < n; ++i) {
    w.emplace_hint(w.end(), names[i], in[i].dtype() == opt.dtype ? in[i] : astype(in[i], opt.dtype));
  }
  array logits = Model::forward(config, w, in[n], nullptr);
  return {sum(multiply(fast::cross_entropy(logits, in[n + 1]), in[n + 2]))};
}

Trainer::Trainer(TrainOptions options, const std::vector<std::string>& documents) : s_(std::make_unique<State>()) {
  options.validate();
  State& s = *s_;
  s.opt = std::move(options);
  const TrainOptions& o = s.opt;
  std::vector<std::string> docs;
  for (const auto& d : documents) {
    if (!d.empty()) docs.push_back(d);
  }
  if (docs.empty()) invalid("documents must hold at least one non-empty text; got none.");
  s.data_fingerprint = fingerprint(docs);
  auto [train_docs, eval_docs] = split_documents(docs, o.eval_fraction, o.seed);

  json state;
  if (o.resume) {
    const fs::path file = fs::path(o.out) / kStateFile;
    state = read_json_file(file);
    try {
      check_same_run(options_from_json(state.at("options")), o, o.out);
    } catch (const json::exception& e) {
      runtime(file.string(), ": malformed options: ", e.what());
    }
    const std::string saved = state.value("data_fingerprint", "");
    if (saved != s.data_fingerprint) {
      invalid("resume: the documents must be the checkpoint's (", state.value("documents", 0),
              " documents, fingerprint ", saved, "); got ", docs.size(), " documents, fingerprint ",
              s.data_fingerprint, ".");
    }
    std::ifstream f(fs::path(o.out) / "tokenizer.json");
    if (!f) runtime("resume: cannot read ", o.out, "/tokenizer.json.");
    std::stringstream text;
    text << f.rdbuf();
    s.tokenizer_json = text.str();
  } else {
    BpeTrainerOptions bpe;
    bpe.vocab_size = o.vocab;
    bpe.special_tokens = {kEndOfText};
    s.tokenizer_json = train_bpe_tokenizer_json(train_docs, bpe);
  }
  s.tokenizer = Tokenizer::from_json_string(s.tokenizer_json);
  const auto eot = s.tokenizer->token_to_id(kEndOfText);
  if (!eot) runtime("the tokenizer has no ", kEndOfText, " token.");
  s.eot = *eot;

  // [eot] doc [eot] doc ... [eot]
  auto stream = [&](const std::vector<std::string>& ds) {
    std::vector<int32_t> out{s.eot};
    for (const auto& d : ds) {
      for (int id : s.tokenizer->encode(d, false)) out.push_back(id);
      out.push_back(s.eot);
    }
    return out;
  };
  s.train_stream = stream(train_docs);
  if (!eval_docs.empty()) s.eval_stream = stream(eval_docs);
  s.info = {int(train_docs.size()), int(eval_docs.size()), int64_t(s.train_stream.size()),
            int64_t(s.eval_stream.size())};

  s.config = make_config(o, s.tokenizer->vocab_size(), s.eot);
  s.optimizer = std::make_unique<MatrixDecayAdamW>(
      schedule(o), std::pair<double, double>{o.beta1, o.beta2}, 1e-8, o.weight_decay, /*bias_correction=*/true);
  if (o.resume) {
    s.restore(state);
  } else {
    s.weights = init_weights(s.config, float32, 0.02f, random::key(o.seed));
  }
  std::vector<array> leaves;
  for (const auto& [name, a] : s.weights) {
    s.names.push_back(name);
    leaves.push_back(a);
  }
  eval(leaves);
  std::vector<int> argnums(s.names.size());
  for (size_t i = 0; i < argnums.size(); ++i) argnums[i] = int(i);
  const State* self = &s; // the State stays put when the Trainer moves
  std::function<std::vector<array>(const std::vector<array>&)> fn = [self](const std::vector<array>& in) {
    return self->loss(in);
  };
  s.loss_and_grad = value_and_grad(fn, argnums);
}

Trainer::~Trainer() = default;
Trainer::Trainer(Trainer&&) noexcept = default;
Trainer& Trainer::operator=(Trainer&&) noexcept = default;

const TrainOptions& Trainer::options() const { return s_->opt; }
const ModelConfig& Trainer::config() const { return s_->config; }
const Tokenizer& Trainer::tokenizer() const { return *s_->tokenizer; }
const std::string& Trainer::tokenizer_json() const { return s_->tokenizer_json; }
const WeightMap& Trainer::weights() const { return s_->weights; }
const TrainDataInfo& Trainer::data_info() const { return s_->info; }
int64_t Trainer::step() const { return s_->optimizer->step(); }
double Trainer::learning_rate() const { return s_->optimizer->learning_rate(); }
const std::vector<TrainRecord>& Trainer::history() const { return s_->history; }

int64_t Trainer::parameter_count() const {
  int64_t total = 0;
  for (const auto& [name, a] : s_->weights) total += int64_t(a.size());
  return total;
}

Model Trainer::model() const {
  return Model(s_->config, cast_weights(s_->weights, s_->opt.dtype));
}

TrainRecord Trainer::train_step() {
  State& s = *s_;
  const TrainOptions& o = s.opt;
  const auto t0 = std::chrono::steady_clock::now();
  TrainRecord r;
  r.step = s.optimizer->step() + 1;
  r.learning_rate = s.optimizer->learning_rate();

  // Window starts depend only on (seed, step): nothing to save for --resume.
  const auto N = static_cast<int64_t>(s.train_stream.size());
  const int64_t choices = std::max<int64_t>(N - o.context, 1);
  SplitMix64 gen = generator(o.seed, 2, uint64_t(r.step));
  std::vector<int64_t> starts(o.batch);
  for (auto& st : starts) st = int64_t(gen.below(uint64_t(choices)));
  Batch b = make_batch(s.train_stream, starts, o.context, s.eot, /*mean=*/true);

  std::vector<array> in;
  in.reserve(s.names.size() + 3);
  for (const auto& name : s.names) in.push_back(s.weights.at(name));
  in.insert(in.end(), {b.inputs, b.targets, b.weights});
  auto [outs, grads] = s.loss_and_grad(in);
  optimizers::ParamMap g;
  for (size_t i = 0; i < s.names.size(); ++i) g.emplace_hint(g.end(), s.names[i], grads[i]);
  const double bound = o.grad_clip > 0 ? o.grad_clip : std::numeric_limits<double>::infinity();
  auto [clipped, norm] = optimizers::clip_grad_norm(g, bound);
  s.weights = s.optimizer->apply_gradients(clipped, s.weights);

  std::vector<array> pending = nn::tree_leaves(s.weights);
  auto slots = s.optimizer->state_arrays();
  pending.insert(pending.end(), slots.begin(), slots.end());
  pending.insert(pending.end(), {outs[0], norm});
  eval(pending);
  r.loss = outs[0].item<float>();
  r.grad_norm = astype(norm, float32).item<float>();

  s.session_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.session_tokens += b.count;
  r.tokens_per_second = double(s.session_tokens) / std::max(s.session_seconds, 1e-9);
  r.seconds = s.seconds_before + s.session_seconds;
  s.history.push_back(r);
  return r;
}

double Trainer::evaluate() {
  State& s = *s_;
  const TrainOptions& o = s.opt;
  const auto N = static_cast<int64_t>(s.eval_stream.size());
  if (N < 2 || o.eval_tokens == 0) return std::numeric_limits<double>::quiet_NaN();
  const WeightMap w = cast_weights(s.weights, o.dtype);
  const int64_t limit = std::min<int64_t>(o.eval_tokens, N - 1);
  double total = 0;
  int64_t count = 0;
  for (int64_t start = 0; start < N - 1 && count < limit;) {
    std::vector<int64_t> starts;
    while (int(starts.size()) < o.batch && start < N - 1 && count + int64_t(starts.size()) * o.context < limit) {
      starts.push_back(start);
      start += o.context;
    }
    Batch b = make_batch(s.eval_stream, starts, o.context, s.eot, /*mean=*/false, limit - count);
    array logits = Model::forward(s.config, w, b.inputs, nullptr);
    total += sum(multiply(fast::cross_entropy(logits, b.targets), b.weights)).item<float>();
    count += b.count;
  }
  const double loss = total / double(count);
  if (!s.history.empty()) s.history.back().eval_loss = loss;
  return loss;
}

void Trainer::run(const TrainCallback& callback) {
  const TrainOptions& o = s_->opt;
  int64_t saved = step();
  while (step() < o.steps) {
    train_step();
    const int64_t s = step();
    const bool last = s == o.steps;
    TrainProgress p;
    p.total_steps = o.steps;
    if (last || (o.eval_every > 0 && s % o.eval_every == 0)) evaluate();
    if (last || (o.save_every > 0 && s % o.save_every == 0)) {
      save(o.out);
      saved = s;
      p.checkpoint = o.out;
    }
    p.record = s_->history.back();
    if (callback && !callback(p)) {
      if (saved != s) save(o.out);
      return;
    }
  }
}

Trainer train(const TrainOptions& options, const std::vector<std::string>& documents, const TrainCallback& callback) {
  Trainer t(options, documents);
  t.run(callback);
  return t;
}

} // namespace nuvec::lm
