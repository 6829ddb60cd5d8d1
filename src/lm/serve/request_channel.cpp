// A request's text from the engine to its HTTP handler (src/lm/serve/request_channel.h).
#include "lm/serve/request_channel.h"

#include <stdexcept>

namespace nuvec::lm::serve {

RequestChannel::RequestChannel(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : decoder_(tokenizer, std::move(stop_strings)) {}

std::shared_ptr<RequestChannel> RequestChannel::submit(Engine& engine, const Tokenizer& tokenizer,
                                                       EngineRequest request, std::vector<std::string> stop_strings) {
  auto channel = std::make_shared<RequestChannel>(tokenizer, std::move(stop_strings));
  // The callbacks hold the channel: it outlives a handler that has gone.
  channel->id_ = engine.submit(
      std::move(request), [channel](int token) { return channel->on_token(token); },
      [channel](const EngineResult& result) { channel->on_finish(result); });
  return channel;
}

bool RequestChannel::on_token(int token) {
  std::string piece;
  try {
    piece = decoder_.push(token);
  } catch (const std::out_of_range&) {
    // An id the model has and the tokenizer lacks decodes to nothing (generate() throws;
    // a server must not, and this runs on the engine's thread).
  }
  if (!piece.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    text_ += piece;
    changed_.notify_all();
  }
  return !decoder_.stopped();
}

void RequestChannel::on_finish(const EngineResult& result) {
  std::string piece = decoder_.finish();
  std::lock_guard<std::mutex> lock(mutex_);
  text_ += piece;
  result_ = result;
  stop_string_ = decoder_.stopped();
  finished_ = true;
  changed_.notify_all();
}

ChannelUpdate RequestChannel::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return finished_ || !text_.empty(); });
  ChannelUpdate u;
  u.text.swap(text_);
  u.finished = finished_;
  if (finished_) {
    u.result = result_;
    u.stop_string = stop_string_;
  }
  return u;
}

} // namespace nuvec::lm::serve
