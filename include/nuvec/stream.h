// nuvec: streams (MLX's stream.h API). Each stream owns a worker that executes its
// nodes in order; streams synchronise through events (src/core/scheduler.cpp).
#pragma once

#include <ostream>
#include <variant>

#include "nuvec/device.h"

namespace nuvec {

/// An ordered queue of work on one device. Cheap to copy: it is an index and a device.
struct Stream {
  int index;
  Device device;
  explicit Stream(int index, Device device) : index(index), device(device) {}
};

/// Ops take a stream, a device (its default stream) or nothing (the default device).
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;

/// The default stream of device d (each thread sees the same default streams).
Stream default_stream(Device d);

/// Makes s the default stream of its device.
void set_default_stream(Stream s);

/// A new stream on device d with its own worker.
Stream new_stream(Device d);

/// Blocks until all work submitted to s (default: the default device's stream) is done.
void synchronize();
void synchronize(Stream s);

/// Resolves a StreamOrDevice to a stream: the given one, the device's default, or the
/// default device's default.
Stream to_stream(StreamOrDevice s);
Stream to_stream(StreamOrDevice s, Device default_);

inline bool operator==(const Stream& lhs, const Stream& rhs) {
  return lhs.index == rhs.index;
}
inline bool operator!=(const Stream& lhs, const Stream& rhs) {
  return !(lhs == rhs);
}

std::ostream& operator<<(std::ostream& os, const Stream& s);

} // namespace nuvec
