// lm::load (include/nuvec/lm/lm.h).
#include "nuvec/lm/lm.h"

#include <stdexcept>

namespace nuvec::lm {

std::pair<Model, Tokenizer> load(const std::string& dir, std::optional<Dtype> dtype) {
  Tokenizer tokenizer = Tokenizer::from_file(dir + "/tokenizer.json");
  Model model = Model::load(dir, dtype);
  if (tokenizer.vocab_size() > model.config().vocab_size) {
    throw std::invalid_argument("[lm.load] the tokenizer of " + dir + " has " + std::to_string(tokenizer.vocab_size()) +
                                " tokens but the model's vocab_size is " + std::to_string(model.config().vocab_size));
  }
  return {std::move(model), std::move(tokenizer)};
}

} // namespace nuvec::lm
