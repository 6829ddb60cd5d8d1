// One request's way from the engine's stepping thread to the HTTP thread that answers it:
// the engine's callbacks decode tokens into final text (StopStringDecoder) and queue it, the
// HTTP thread takes what is queued and, at the end, the result.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nuvec/lm/engine.h"
#include "nuvec/lm/stop_strings.h"

namespace nuvec::lm::serve {

/// What the engine has produced for a request since the last take().
struct ChannelUpdate {
  std::string text;      ///< Newly final text (possibly empty).
  bool finished = false; ///< The request has ended; `result` and `stop_string` are set.
  EngineResult result;
  bool stop_string = false; ///< It ended at a stop string.
};

/// The state shared by a request's engine callbacks and its HTTP handler.
class RequestChannel {
 public:
  /// Submits `request` to `engine` with callbacks that decode with `tokenizer` and stop at
  /// `stop_strings`; returns the channel, whose id() is the engine's. Throws what
  /// Engine::submit throws (std::invalid_argument for a request the engine refuses).
  static std::shared_ptr<RequestChannel> submit(Engine& engine, const Tokenizer& tokenizer, EngineRequest request,
                                                std::vector<std::string> stop_strings);

  /// Waits up to `timeout` for new text or the end, and takes what is there.
  ChannelUpdate take(std::chrono::milliseconds timeout);

  int64_t id() const { return id_; }

  RequestChannel(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

 private:
  bool on_token(int token);
  void on_finish(const EngineResult& result);

  StopStringDecoder decoder_; // touched only by the engine's callbacks
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  bool finished_ = false;
  EngineResult result_;
  bool stop_string_ = false;
  int64_t id_ = -1;
};

} // namespace nuvec::lm::serve
