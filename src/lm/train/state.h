// What the parts of nuvec::lm::Trainer (src/lm/train/*.cpp) share: the error helpers, the
// checkpoint's file names, the options' JSON, and the run's state (Trainer::State).
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nuvec/lm/train.h"
#include "nuvec/optimizers.h"
#include "nuvec/transforms.h"

namespace nuvec::lm {

namespace train_detail {

using json = nlohmann::json;

inline constexpr const char* kStateFile = "trainer_state.json";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kCurveFile = "loss.csv";
inline constexpr const char* kMasterPrefix = "master.";

template <class... Args>
[[noreturn]] void invalid(const Args&... parts) {
  std::ostringstream s;
  s << "[lm.train] ";
  (s << ... << parts);
  throw std::invalid_argument(s.str());
}

template <class... Args>
[[noreturn]] void runtime(const Args&... parts) {
  std::ostringstream s;
  s << "[lm.train] ";
  (s << ... << parts);
  throw std::runtime_error(s.str());
}

/// The options as trainer_state.json holds them (field names as keys, dtype by name).
json options_json(const TrainOptions& o);
/// The inverse; absent keys keep TrainOptions' defaults. Throws json::exception for a wrong
/// type, std::runtime_error for an unknown dtype.
TrainOptions options_from_json(const json& j);
/// Throws std::invalid_argument naming the first option that shapes the run (all but steps,
/// eval_every, save_every, out and data) whose value differs between `saved` and `given`.
void check_same_run(const TrainOptions& saved, const TrainOptions& given, const std::string& dir);
/// The JSON object in `file`; std::runtime_error when unreadable or not an object.
json read_json_file(const std::filesystem::path& file);

/// `w` with every array cast to `dtype` (the same arrays where they have it).
WeightMap cast_weights(const WeightMap& w, Dtype dtype);

/// AdamW whose weight decay skips weights with fewer than 2 axes (RMSNorm scales, biases),
/// as nanoGPT's configure_optimizers groups them; its state and name are AdamW's.
class MatrixDecayAdamW : public optimizers::AdamW {
 public:
  using AdamW::AdamW;

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr,
                     int64_t step) override {
    if (p.ndim() < 2) return Adam::apply_single(path, g, p, lr, step);
    return AdamW::apply_single(path, g, p, lr, step);
  }
};

} // namespace train_detail

struct Trainer::State {
  TrainOptions opt;
  ModelConfig config;
  std::string tokenizer_json;
  std::optional<Tokenizer> tokenizer;
  int32_t eot = 0;
  std::vector<int32_t> train_stream, eval_stream;
  TrainDataInfo info;
  std::string data_fingerprint; // hex FNV-1a of the documents
  std::vector<std::string> names; // the weights, in WeightMap order (value_and_grad's arguments)
  WeightMap weights;              // float32 masters
  std::unique_ptr<train_detail::MatrixDecayAdamW> optimizer;
  ValueAndGradFn loss_and_grad;
  std::vector<TrainRecord> history;
  double seconds_before = 0; // update time of earlier sessions
  double session_seconds = 0;
  int64_t session_tokens = 0;

  /// The summed weighted cross entropy of in = (weights in `names` order..., inputs,
  /// targets, target weights) (trainer.cpp).
  std::vector<array> loss(const std::vector<array>& in) const;

  /// Writes the checkpoint files into `dir` (checkpoint.cpp).
  void write_checkpoint(const std::string& dir) const;
  /// Reads the weights, optimizer state, loss curve and time of the checkpoint in opt.out,
  /// whose trainer_state.json is `state` (checkpoint.cpp). Needs config and optimizer.
  void restore(const train_detail::json& state);
};

} // namespace nuvec::lm
