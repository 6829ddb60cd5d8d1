// Trainer's checkpoints (include/nuvec/lm/train.h): the Hugging Face files (config.json,
// model.safetensors, tokenizer.json, tokenizer_config.json, generation_config.json, as
// transformers' save_pretrained writes them), the AdamW state, trainer_state.json and the
// loss curve; and reading them back for --resume.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>

#include "nuvec/io.h"
#include "nuvec/ops.h"
#include "state.h"

namespace nuvec::lm {

namespace fs = std::filesystem;
using namespace train_detail;

namespace {

constexpr const char* kCurveHeader = "step,train_loss,eval_loss,learning_rate,grad_norm,tokens_per_second,seconds";

std::string curve_csv(const std::vector<TrainRecord>& rows) {
  std::ostringstream f;
  f << kCurveHeader << "\n" << std::setprecision(9); // 9 digits: a float loss reads back exactly
  for (const auto& r : rows) {
    f << r.step << "," << r.loss << ",";
    if (!std::isnan(r.eval_loss)) f << r.eval_loss;
    f << "," << r.learning_rate << "," << r.grad_norm << "," << r.tokens_per_second << "," << r.seconds << "\n";
  }
  return f.str();
}

// The rows of loss.csv up to step `up_to`; malformed rows (an interrupted write) are left out.
std::vector<TrainRecord> read_curve(const fs::path& file, int64_t up_to) {
  std::vector<TrainRecord> rows;
  std::ifstream f(file);
  std::string line;
  if (!std::getline(f, line) || line != kCurveHeader) return rows;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
    cells.resize(7);
    try {
      TrainRecord r;
      r.step = std::stoll(cells[0]);
      r.loss = static_cast<float>(std::stod(cells[1])); // the float the step computed
      r.eval_loss = cells[2].empty() ? std::numeric_limits<double>::quiet_NaN() : std::stod(cells[2]);
      r.learning_rate = std::stod(cells[3]);
      r.grad_norm = std::stod(cells[4]);
      r.tokens_per_second = std::stod(cells[5]);
      r.seconds = std::stod(cells[6]);
      if (r.step <= up_to) rows.push_back(r);
    } catch (const std::exception&) {
    }
  }
  return rows;
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) runtime("cannot write ", file.string(), ".");
}

} // namespace

WeightMap train_detail::cast_weights(const WeightMap& w, Dtype dtype) {
  WeightMap out;
  for (const auto& [name, a] : w) out.emplace_hint(out.end(), name, a.dtype() == dtype ? a : astype(a, dtype));
  return out;
}

void Trainer::State::write_checkpoint(const std::string& dir_name) const {
  const fs::path dir(dir_name), tmp = dir / ".partial";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) runtime("cannot create ", tmp.string(), ": ", ec.message(), ".");

  write_text(tmp / "config.json", config.to_json_string() + "\n");
  save_weights(tmp.string(), cast_weights(weights, opt.dtype));
  write_text(tmp / "tokenizer.json", tokenizer_json);
  const json special = {{"content", kEndOfText}, {"lstrip", false},      {"normalized", false},
                        {"rstrip", false},       {"single_word", false}, {"special", true}};
  const json tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                 {"bos_token", kEndOfText},
                                 {"eos_token", kEndOfText},
                                 {"pad_token", kEndOfText},
                                 {"model_max_length", opt.context},
                                 {"clean_up_tokenization_spaces", false},
                                 {"added_tokens_decoder", {{std::to_string(eot), special}}}};
  write_text(tmp / "tokenizer_config.json", tokenizer_config.dump(2) + "\n");
  const json generation_config = {{"bos_token_id", eot}, {"eos_token_id", eot}, {"pad_token_id", eot},
                                  {"do_sample", true},   {"temperature", 0.8},  {"top_p", 0.95}};
  write_text(tmp / "generation_config.json", generation_config.dump(2) + "\n");

  const int64_t step = optimizer->step();
  SafetensorsMap flat(optimizer->state().begin(), optimizer->state().end());
  flat.insert_or_assign("step", array(step, int64));
  if (opt.dtype != float32) {
    for (const auto& [name, a] : weights) flat.insert_or_assign(kMasterPrefix + name, a);
  }
  save_safetensors((tmp / kOptimizerFile).string(), std::move(flat),
                   {{"optimizer", optimizer->name()}, {"step", std::to_string(step)}});
  write_text(tmp / kCurveFile, curve_csv(history));
  const json state = {{"step", step},
                      {"seconds", history.empty() ? seconds_before : history.back().seconds},
                      {"documents", info.train_documents + info.eval_documents},
                      {"data_fingerprint", data_fingerprint},
                      {"batches", "windows drawn by SplitMix64 from (seed, step): no generator state"},
                      {"options", options_json(opt)}};
  write_text(tmp / kStateFile, state.dump(2) + "\n");

  // trainer_state.json moves last: the checkpoint is complete once it is there.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(tmp)) files.push_back(e.path().filename());
  std::stable_partition(files.begin(), files.end(), [](const fs::path& f) { return f != kStateFile; });
  for (const auto& f : files) {
    fs::rename(tmp / f, dir / f, ec);
    if (ec) runtime("cannot move ", (tmp / f).string(), " to ", (dir / f).string(), ": ", ec.message(), ".");
  }
  fs::remove_all(tmp, ec);
}

void Trainer::State::restore(const json& state) {
  const fs::path dir(opt.out), file = dir / kOptimizerFile;
  SafetensorsLoad loaded;
  try {
    loaded = load_safetensors(file.string());
  } catch (const std::exception& e) {
    runtime("resume: cannot read ", file.string(), ": ", e.what());
  }
  auto& flat = loaded.first;
  auto it = flat.find("step");
  if (it == flat.end() || it->second.size() != 1) runtime(file.string(), " has no scalar \"step\".");
  const auto step = astype(it->second, int64).item<int64_t>();
  flat.erase(it);
  const auto saved_step = state.value("step", int64_t(-1));
  if (step != saved_step) {
    runtime("resume: ", file.string(), " is at step ", step, " but ", kStateFile, " at step ", saved_step,
            " (an interrupted save?).");
  }
  WeightMap masters;
  optimizers::ParamMap slots;
  const std::string prefix = kMasterPrefix;
  for (auto& [name, a] : flat) {
    if (name.rfind(prefix, 0) == 0) {
      masters.emplace(name.substr(prefix.size()), a);
    } else {
      slots.emplace(name, a);
    }
  }
  WeightMap w = cast_weights(masters.empty() ? load_weights(opt.out) : masters, float32);
  Model check(config, w); // throws naming a missing or mis-shaped tensor
  weights = std::move(w);
  optimizer->set_state(std::move(slots), step);
  history = read_curve(dir / kCurveFile, step);
  seconds_before = state.value("seconds", 0.0);
}

void Trainer::save(const std::string& dir) const {
  s_->write_checkpoint(dir);
}

} // namespace nuvec::lm
