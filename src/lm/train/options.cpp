// TrainOptions (include/nuvec/lm/train.h): its checks, its JSON in trainer_state.json, and
// the rule of which options a resumed run may change.
#include <cmath>
#include <fstream>

#include "state.h"

namespace nuvec::lm {

using train_detail::invalid;
using train_detail::json;
using train_detail::runtime;

void TrainOptions::validate() const {
  auto positive = [](const char* name, int64_t v) {
    if (v <= 0) invalid(name, " must be positive; got ", v, ".");
  };
  positive("layers", layers);
  positive("hidden", hidden);
  positive("heads", heads);
  positive("kv_heads", kv_heads);
  positive("intermediate", intermediate);
  positive("steps", steps);
  positive("batch", batch);
  if (hidden % heads != 0) invalid("heads must divide hidden; got hidden ", hidden, " and heads ", heads, ".");
  if (heads % kv_heads != 0) invalid("kv_heads must divide heads; got heads ", heads, " and kv_heads ", kv_heads, ".");
  if ((hidden / heads) % 2 != 0) {
    invalid("hidden / heads (head_dim) must be even for rope; got ", hidden, " / ", heads, " = ", hidden / heads, ".");
  }
  if (context < 2) invalid("context must be >= 2; got ", context, ".");
  if (vocab < 257) invalid("vocab must be >= 257 (the 256 bytes and <|endoftext|>); got ", vocab, ".");
  if (!(lr > 0) || !std::isfinite(lr)) invalid("lr must be positive; got ", lr, ".");
  if (!(min_lr >= 0 && min_lr <= lr)) invalid("min_lr must be in [0, lr = ", lr, "]; got ", min_lr, ".");
  if (warmup < 0 || warmup >= steps) invalid("warmup must be in [0, steps = ", steps, "); got ", warmup, ".");
  if (!(weight_decay >= 0)) invalid("weight_decay must be >= 0; got ", weight_decay, ".");
  if (!(grad_clip >= 0)) invalid("grad_clip must be >= 0; got ", grad_clip, ".");
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) {
    invalid("beta1 and beta2 must be in [0, 1); got ", beta1, " and ", beta2, ".");
  }
  if (dtype != float32 && dtype != bfloat16 && dtype != float16) {
    invalid("dtype must be float32, bfloat16 or float16; got ", dtype_name(dtype), ".");
  }
  if (!(eval_fraction >= 0 && eval_fraction <= 0.5)) {
    invalid("eval_fraction must be in [0, 0.5]; got ", eval_fraction, ".");
  }
  if (eval_every < 0) invalid("eval_every must be >= 0; got ", eval_every, ".");
  if (eval_tokens < 0) invalid("eval_tokens must be >= 0; got ", eval_tokens, ".");
  if (save_every < 0) invalid("save_every must be >= 0; got ", save_every, ".");
  if (out.empty()) invalid("out must be a directory name; got an empty string.");
}

TrainOptions read_train_options(const std::string& dir) {
  const auto file = std::filesystem::path(dir) / train_detail::kStateFile;
  json j = train_detail::read_json_file(file);
  if (!j.contains("options") || !j["options"].is_object()) runtime(file.string(), " has no \"options\" object.");
  try {
    return train_detail::options_from_json(j["options"]);
  } catch (const json::exception& e) {
    runtime(file.string(), ": malformed options: ", e.what());
  }
}

namespace train_detail {

json options_json(const TrainOptions& o) {
  return {{"layers", o.layers},
          {"hidden", o.hidden},
          {"heads", o.heads},
          {"kv_heads", o.kv_heads},
          {"intermediate", o.intermediate},
          {"context", o.context},
          {"vocab", o.vocab},
          {"steps", o.steps},
          {"batch", o.batch},
          {"lr", o.lr},
          {"min_lr", o.min_lr},
          {"warmup", o.warmup},
          {"weight_decay", o.weight_decay},
          {"grad_clip", o.grad_clip},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"dtype", dtype_name(o.dtype)},
          {"seed", o.seed},
          {"eval_fraction", o.eval_fraction},
          {"eval_every", o.eval_every},
          {"eval_tokens", o.eval_tokens},
          {"out", o.out},
          {"save_every", o.save_every},
          {"data", o.data}};
}

TrainOptions options_from_json(const json& j) {
  TrainOptions o;
  auto get = [&](const char* key, auto& field) {
    if (j.contains(key)) field = j.at(key).get<std::remove_reference_t<decltype(field)>>();
  };
  get("layers", o.layers);
  get("hidden", o.hidden);
  get("heads", o.heads);
  get("kv_heads", o.kv_heads);
  get("intermediate", o.intermediate);
  get("context", o.context);
  get("vocab", o.vocab);
  get("steps", o.steps);
  get("batch", o.batch);
  get("lr", o.lr);
  get("min_lr", o.min_lr);
  get("warmup", o.warmup);
  get("weight_decay", o.weight_decay);
  get("grad_clip", o.grad_clip);
  get("beta1", o.beta1);
  get("beta2", o.beta2);
  if (j.contains("dtype")) {
    const auto name = j.at("dtype").get<std::string>();
    if (name == "float32") {
      o.dtype = float32;
    } else if (name == "bfloat16") {
      o.dtype = bfloat16;
    } else if (name == "float16") {
      o.dtype = float16;
    } else {
      runtime("dtype must be float32, bfloat16 or float16; got '", name, "'.");
    }
  }
  get("seed", o.seed);
  get("eval_fraction", o.eval_fraction);
  get("eval_every", o.eval_every);
  get("eval_tokens", o.eval_tokens);
  get("out", o.out);
  get("save_every", o.save_every);
  get("data", o.data);
  return o;
}

void check_same_run(const TrainOptions& saved, const TrainOptions& given, const std::string& dir) {
  json a = options_json(saved), b = options_json(given);
  for (const char* free : {"steps", "eval_every", "save_every", "out", "data"}) {
    a.erase(free);
    b.erase(free);
  }
  for (auto& [key, value] : a.items()) {
    if (b[key] != value) {
      invalid("resume: option ", key, " must be the checkpoint's (", dir, "/", kStateFile, "): ", value.dump(),
              "; got ", b[key].dump(), ".");
    }
  }
}

json read_json_file(const std::filesystem::path& file) {
  std::ifstream f(file);
  if (!f) runtime("cannot read ", file.string(), ".");
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) runtime(file.string(), " is not a JSON object.");
  return j;
}

} // namespace train_detail

} // namespace nuvec::lm
