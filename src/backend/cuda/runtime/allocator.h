// nuvec: the caching allocator of device memory (plain cudaMalloc, never managed memory).
#pragma once

#include <cstddef>

namespace nuvec::cu {

struct CapturedResources;

/// size bytes of device memory (256-byte aligned), from the cache when a block fits; on
/// cudaMalloc failure the cache is emptied and the call retried once, then it throws
/// std::runtime_error naming the size.
void* device_malloc(size_t size);

/// Returns a block from device_malloc (size as requested) to the cache.
void device_free(void* ptr, size_t size);

/// While r is set on this thread (a CUDA graph capture, StreamState::begin_capture), blocks
/// device_malloc hands out are recorded in r, and freeing one of them on this thread hands it
/// to r instead of the cache: a replay of the graph writes it again.
void set_capture_allocations(CapturedResources* r);

/// size bytes of pinned (page-locked) host memory, cached like device blocks: the staging
/// area of host-to-device copies that must not stall the stream (a copy from pageable
/// memory waits for the stream's earlier work first).
void* pinned_malloc(size_t size);
void pinned_free(void* ptr, size_t size);

} // namespace nuvec::cu
