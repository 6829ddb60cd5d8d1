// Stop strings over streamed text (include/nuvec/lm/stop_strings.h).
#include "nuvec/lm/stop_strings.h"

#include <algorithm>

namespace nuvec::lm {

StopStringDecoder::StopStringDecoder(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : decoder_(tokenizer, /*skip_special_tokens=*/true) {
  for (auto& s : stop_strings) {
    if (!s.empty()) {
      stops_.push_back(std::move(s));
    }
  }
}

std::string StopStringDecoder::push(int token) {
  if (stopped_) {
    return {};
  }
  pending_ += decoder_.push(token);
  return release(false);
}

std::string StopStringDecoder::finish() {
  if (stopped_) {
    return {};
  }
  pending_ += decoder_.finish();
  return release(true);
}

std::string StopStringDecoder::release(bool final) {
  // A stop string completed: keep what precedes it and end.
  size_t cut = std::string::npos;
  for (auto& s : stops_) {
    size_t at = pending_.find(s);
    if (at != std::string::npos) {
      cut = std::min(cut, at);
    }
  }
  if (cut != std::string::npos) {
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
    return out;
  }
  size_t keep = 0;
  if (!final) {
    // The longest suffix of pending that is a proper prefix of a stop string.
    for (auto& s : stops_) {
      for (size_t len = std::min(s.size() - 1, pending_.size()); len > keep; --len) {
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

} // namespace nuvec::lm
