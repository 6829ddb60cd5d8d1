// nuvec: streams (MLX 0.32's stream.h API, and StreamContext from its utils.h). A stream is an
// ordered queue of work on one device, run by a worker thread (src/core/scheduler.cpp).
// Streams belong to threads, as in MLX 0.32: each thread has its own default streams, and
// clear_streams() ends the calling thread's streams. One deliberate difference: work recorded
// on a thread's default stream may be evaluated from another thread (MLX throws), so graphs
// built lazily on one thread can be consumed on another, as nuvec always allowed.
#pragma once

#include <ostream>
#include <tuple>
#include <variant>
#include <vector>

#include "nuvec/device.h"

namespace nuvec {

/// A handle to an ordered queue of work on one device: an index (unique in the process,
/// never reused) and the device. Cheap to copy.
struct Stream {
  int index;
  Device device;
  explicit Stream(int index, Device device) : index(index), device(device) {}

  /// Streams are equal when index and device are.
  bool operator==(const Stream&) const = default;
  /// A strict weak order consistent with ==: by device, then index (so std::set<Stream> and
  /// std::map work).
  bool operator<(const Stream& rhs) const {
    return std::tie(device, index) < std::tie(rhs.device, rhs.index);
  }
};

/// A stream that stands for a different stream in each thread: ops given it (it converts to
/// Stream) run on the calling thread's own stream for it, made on first use.
struct ThreadLocalStream : public Stream {
  using Stream::Stream;
};

/// Ops take a stream, a device (its default stream) or nothing (the default device).
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;

/// The calling thread's default stream on device d, made on first use (each thread has its
/// own). Any thread may evaluate work recorded on it. Throws std::invalid_argument when d is
/// not available.
Stream default_stream(Device d);

/// Makes s the calling thread's default stream for its device (a ThreadLocalStream: this
/// thread's stream for it). Throws std::invalid_argument for a GPU stream without a GPU.
void set_default_stream(Stream s);

/// A new stream on device d, for use on the calling thread only: evaluating work on it from
/// another thread throws std::runtime_error (MLX 0.32's rule). Throws std::invalid_argument
/// when d is not available.
Stream new_stream(Device d);

/// A new stream on device d that any thread may use (MLX 0.32); clear_streams() does not end
/// it. Work that threads submit to it concurrently runs in submission order: keeping it free
/// of races is the caller's job. Throws std::invalid_argument when d is not available.
Stream new_thread_unsafe_stream(Device d);

/// A new thread-local stream on device d: each thread that uses it gets its own stream.
/// Throws std::invalid_argument when d is not available.
ThreadLocalStream new_thread_local_stream(Device d);

/// The calling thread's stream for tls (made on first use). Throws std::invalid_argument
/// when tls was not made by new_thread_local_stream.
Stream stream_from_thread_local_stream(ThreadLocalStream tls);

/// Every stream made so far, in the order made (index order), including those cleared since;
/// thread-local streams appear through the per-thread streams made for them.
std::vector<Stream> get_streams();

/// Blocks until all work submitted to the stream (default: the default device's default
/// stream; a ThreadLocalStream: the calling thread's stream for it) is done.
void synchronize();
void synchronize(Stream s);
void synchronize(ThreadLocalStream s);

/// Ends every stream the calling thread made (its default streams, new_stream streams and
/// thread-local streams' per-thread streams) once their queued work has run; the next use of
/// a default or thread-local stream makes a new one. A thread that exits does the same.
/// new_thread_unsafe_stream streams are not affected.
void clear_streams();

/// Resolves a StreamOrDevice to a stream: the given one (a ThreadLocalStream: the calling
/// thread's stream for it), the device's default, or the default device's default.
Stream to_stream(StreamOrDevice s);
Stream to_stream(StreamOrDevice s, Device default_);

/// While alive, makes a stream (or a device's default stream) the calling thread's default
/// stream and its device the default device; the destructor restores the previous default
/// device and that device's previous default stream, also when the scope is left by an
/// exception. Throws std::runtime_error for an empty StreamOrDevice, std::invalid_argument
/// for an unavailable device (nothing is changed then). Source: MLX's utils.h.
class StreamContext {
 public:
  explicit StreamContext(StreamOrDevice s);
  ~StreamContext();
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

 private:
  Device previous_device_;
  Stream previous_stream_;
};

/// Prints `Stream(Device(cpu, 0), 1)`.
std::ostream& operator<<(std::ostream& os, const Stream& s);

} // namespace nuvec
