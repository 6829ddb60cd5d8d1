// nuvec::lm, the language-model runtime: everything a program needs to load a Hugging Face
// model directory and generate from it (config, weights, model, tokenizer, sampler,
// generation, conversion).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "nuvec/lm/config.h"
#include "nuvec/lm/convert.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/generate.h"
#include "nuvec/lm/model.h"
#include "nuvec/lm/sampler.h"
#include "nuvec/lm/serve.h"
#include "nuvec/lm/stop_strings.h"
#include "nuvec/lm/tokenizer.h"
#include "nuvec/lm/weights.h"

namespace nuvec::lm {

/// The model and tokenizer of the directory `dir` (mlx-lm's `load`): Model::load and
/// Tokenizer::from_file(dir/tokenizer.json). Throws as those do, and std::invalid_argument
/// ("[lm.load] ...") when the tokenizer has more tokens than the model's vocabulary (the
/// embedding could not look them up).
std::pair<Model, Tokenizer> load(const std::string& dir, std::optional<Dtype> dtype = std::nullopt);

} // namespace nuvec::lm
