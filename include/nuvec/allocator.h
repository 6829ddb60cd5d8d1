// nuvec: the buffer allocator interface (MLX's allocator.h API). The CPU implementation is a
// caching allocator over malloc with memory accounting (src/core/allocator.cpp).
#pragma once

#include <cstddef>

namespace nuvec::allocator {

/// An opaque handle to a block of memory.
class Buffer {
 public:
  explicit Buffer(void* ptr) : ptr_(ptr) {}
  /// The address of the data (host memory for CPU buffers).
  void* raw_ptr() const { return ptr_; }
  /// The allocator's handle (the same pointer for host memory).
  void* ptr() const { return ptr_; }

 private:
  void* ptr_;
};

/// Allocates size bytes (64-byte aligned). Throws std::runtime_error when out of memory.
Buffer malloc(size_t size);

/// Returns a buffer from malloc to the allocator (to its cache while under the cache limit).
void free(Buffer buffer);

/// The usable size of a buffer from malloc.
size_t size(Buffer buffer);

} // namespace nuvec::allocator
