// nuvec: the buffer allocator interface (MLX's allocator.h API). The CPU implementation is a
// caching allocator over aligned_alloc with memory accounting (src/core/allocator.cpp).
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

/// A memory allocator (MLX's abstract interface; allocator() returns nuvec's).
class Allocator {
 public:
  /// Allocates size bytes (64-byte aligned; 0 gives a valid minimal block). Throws
  /// std::runtime_error when out of memory.
  virtual Buffer malloc(size_t size) = 0;
  /// Returns a buffer from malloc (a null buffer is ignored).
  virtual void free(Buffer buffer) = 0;
  /// The usable size of a buffer from malloc: at least what was asked, more when a larger
  /// cached block was reused (its whole capacity), 0 for a null buffer.
  virtual size_t size(Buffer buffer) const = 0;
  /// Wraps existing memory without a copy when the allocator can; otherwise returns a buffer
  /// whose ptr() is null (nuvec's host allocator never can, as MLX's CPU allocator).
  virtual Buffer make_buffer(void* ptr, size_t size) {
    (void)ptr;
    (void)size;
    return Buffer{nullptr};
  }
  /// Releases a buffer from make_buffer.
  virtual void release(Buffer buffer) { (void)buffer; }

  Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  virtual ~Allocator() = default;
};

/// The process's host allocator (lives until the process ends).
Allocator& allocator();

/// allocator().malloc(size): size bytes, 64-byte aligned. Throws std::runtime_error when out
/// of memory.
Buffer malloc(size_t size);

/// allocator().free(buffer): back to the allocator (to its cache while under the cache limit).
void free(Buffer buffer);

/// allocator().size(buffer): the usable size of a buffer from malloc.
size_t size(Buffer buffer);

/// allocator().make_buffer(ptr, size) and allocator().release(buffer).
Buffer make_buffer(void* ptr, size_t size);
void release(Buffer buffer);

} // namespace nuvec::allocator
