// nuvec: memory accounting and limits (MLX's memory.h API). Buffers come from a caching
// allocator (src/core/allocator.cpp); "active" counts live buffers, "cache" freed ones kept
// for reuse. With the CUDA backend, every figure is the host allocator's plus the device
// allocator's (GPU memory is plain device memory, never managed memory), so the peak is an
// upper bound of the true combined peak.
#pragma once

#include <cstddef>

namespace nuvec {

/// Bytes in live buffers (arrays' data and temporaries of running kernels).
size_t get_active_memory();

/// The largest active memory since the start or the last reset_peak_memory.
size_t get_peak_memory();

/// Sets the peak to the current active memory.
void reset_peak_memory();

/// Bytes held in the allocator's cache (freed, kept for reuse).
size_t get_cache_memory();

/// Sets the memory limit in bytes and returns the previous one. While active memory is over
/// it, eval waits for in-flight work before scheduling more. Default: 1.5x the machine's RAM
/// guidance (the physical memory).
size_t set_memory_limit(size_t limit);
/// The current memory limit in bytes.
size_t get_memory_limit();

/// Sets the cache limit in bytes (0 disables the cache) and returns the previous one.
size_t set_cache_limit(size_t limit);

/// Sets a limit for wired memory (kept for API compatibility; no effect on Linux).
size_t set_wired_limit(size_t limit);

/// Frees every cached buffer.
void clear_cache();

} // namespace nuvec
