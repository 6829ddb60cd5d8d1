// nuvec: events, the synchronisation points between streams and the host (MLX's event.h).
#pragma once

#include <cstdint>
#include <memory>

#include "nuvec/stream.h"

namespace nuvec {

/// A counter a stream signals and the host or another stream waits on. An event with value
/// v is signaled once its stream has executed everything submitted before signal().
class Event {
 public:
  Event() = default;
  explicit Event(Stream stream);

  /// Blocks the calling thread until the event reaches its value.
  void wait();
  /// Makes `stream` wait (without blocking the caller) until the event reaches its value.
  void wait(Stream stream);
  /// Signals the event from `stream` once the work submitted before this call is done.
  void signal(Stream stream);
  /// Whether the event has reached its value.
  bool is_signaled() const;

  bool valid() const { return event_ != nullptr; }
  uint64_t value() const { return value_; }
  void set_value(uint64_t v) { value_ = v; }
  const Stream& stream() const { return stream_; }

 private:
  uint64_t value_{0};
  Stream stream_{0, Device::cpu};
  std::shared_ptr<void> event_;
};

} // namespace nuvec
