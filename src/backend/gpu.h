// nuvec: the GPU backend's entry points used by the core (implemented by src/backend/cuda,
// or by src/backend/no_gpu in a CPU-only build).
#pragma once

#include <cstddef>

#include "nuvec/array.h"
#include "nuvec/backend/gpu/device_info.h"

namespace nuvec::detail {
struct ReplayTape;
} // namespace nuvec::detail

namespace nuvec::gpu {

// is_available, device_count and device_info are public: nuvec/backend/gpu/device_info.h.

/// Runs arr's primitive on its GPU stream.
void eval(array& arr);
/// Makes a GPU stream release what it holds for running kernels once the device has run
/// them (eval calls it while memory is over the limit; counted as a task in flight).
void finalize(Stream s);
/// Blocks the calling thread until the GPU has executed everything `s` submitted (called on
/// s's worker before an event on s is signaled).
void synchronize(Stream s);

/// Evaluates a GraphReplay node on its GPU stream: the tape's nodes one by one, or its
/// captured CUDA graph (src/backend/cuda/runtime/graph_replay.cpp).
void run_tape(detail::ReplayTape& tape, const std::vector<array>& inputs, std::vector<array>& outputs);

/// Makes `data` readable on the host: copies its GPU-only bytes into a new host buffer.
/// The caller must know the GPU work that wrote them is done (an event or stream order).
void ensure_host(array::Data& data);
/// Returns a GPU allocation of `nbytes` to the backend's caching allocator.
void free_device(void* ptr, size_t nbytes);

/// Device-memory figures of the backend's allocator, in bytes (0 without a GPU); the memory
/// API adds them to the host allocator's.
size_t active_memory();
size_t peak_memory();
void reset_peak_memory();
size_t cache_memory();
void clear_cache();
/// The device cache keeps at most `limit` bytes of freed blocks (set with the host's).
void set_cache_limit(size_t limit);

} // namespace nuvec::gpu
