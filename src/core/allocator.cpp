// nuvec: the CPU caching allocator and the memory API (MLX's allocator.h and memory.h
// semantics). Freed blocks are cached by size and reused for requests up to twice smaller
// (the reused block keeps its whole capacity, as MLX's buffer cache); active and peak memory
// count live blocks; clear_cache first lets the stream workers finish queued kernels.
#include "nuvec/allocator.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>
#include <algorithm>

#include "backend/gpu.h"
#include "core/sanitizers.h"
#include "core/scheduler.h"
#include "nuvec/memory.h"

namespace nuvec {

namespace {

// Each block carries its size in a header, so free() needs no lookup. 64 bytes keep the
// data 64-byte aligned (a cache line; AVX-512 loads).
constexpr size_t kHeader = 64;
constexpr size_t kAlign = 64;

// Under AddressSanitizer every buffer is an allocation of its exact size, never cached, so
// that a kernel reading or writing past a buffer's end meets ASan's redzone instead of a
// rounded-up or recycled block (scripts/asan_check.sh).
#if defined(NUVEC_ADDRESS_SANITIZER)
constexpr bool kExactBlocks = true;
#else
constexpr bool kExactBlocks = false;
#endif

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  return (pages > 0 && page > 0) ? size_t(pages) * size_t(page) : size_t(1) << 34;
}

class CachingAllocator : public allocator::Allocator {
 public:
  allocator::Buffer malloc(size_t size) override {
    if constexpr (kExactBlocks) return exact_block(size);
    size_t rounded = round(size);
    std::unique_lock<std::mutex> lk(mtx_);
    void* block = nullptr;
    if (rounded < kSmallLimit) {
      // Small blocks: size classes with vector free lists, so the hot path of tiny graphs
      // allocates nothing besides the block itself; the smallest cached class that fits
      // and is at most twice the request is taken.
      size_t bin = find_small(rounded / kAlign, std::min(2 * rounded / kAlign, kSmallBins - 1));
      if (bin != 0) {
        block = small_[bin].back();
        small_[bin].pop_back();
        if (small_[bin].empty()) small_used_[bin / 64] &= ~(uint64_t(1) << (bin % 64));
        rounded = bin * kAlign;
        cache_memory_ -= rounded;
      }
    } else {
      // Reuse a cached block no more than twice the request (bounds waste).
      auto it = cache_.lower_bound(rounded);
      if (it != cache_.end() && it->first <= 2 * rounded) {
        block = it->second;
        rounded = it->first;
        cache_memory_ -= rounded;
        cache_.erase(it);
      }
    }
    if (!block) {
      lk.unlock();
      block = std::aligned_alloc(kAlign, rounded + kHeader);
      if (!block) {
        lk.lock();
        clear_locked();
        lk.unlock();
        block = std::aligned_alloc(kAlign, rounded + kHeader);
      }
      if (!block) {
        std::ostringstream msg;
        msg << "[malloc] unable to allocate " << size << " bytes.";
        throw std::runtime_error(msg.str());
      }
      lk.lock();
    }
    *static_cast<size_t*>(block) = rounded;
    active_memory_ += rounded;
    peak_memory_ = std::max(peak_memory_, active_memory_);
    return allocator::Buffer(static_cast<char*>(block) + kHeader);
  }

  void free(allocator::Buffer buf) override {
    if (!buf.ptr()) return;
    void* block = static_cast<char*>(buf.ptr()) - kHeader;
    size_t size = *static_cast<size_t*>(block);
    std::lock_guard<std::mutex> lk(mtx_);
    active_memory_ -= size;
    if (!kExactBlocks && cache_memory_ + size <= cache_limit_) {
      if (size < kSmallLimit) {
        small_[size / kAlign].push_back(block);
        small_used_[size / kAlign / 64] |= uint64_t(1) << (size / kAlign % 64);
      } else {
        cache_.emplace(size, block);
      }
      cache_memory_ += size;
    } else {
      std::free(block);
    }
  }

  size_t size(allocator::Buffer buf) const override {
    if (!buf.ptr()) return 0;
    return *reinterpret_cast<size_t*>(static_cast<char*>(buf.ptr()) - kHeader);
  }

  void clear() {
    std::lock_guard<std::mutex> lk(mtx_);
    clear_locked();
  }

  std::mutex mtx_;
  size_t active_memory_{0};
  size_t peak_memory_{0};
  size_t cache_memory_{0};
  size_t cache_limit_{physical_memory() / 4};
  size_t memory_limit_{physical_memory() + physical_memory() / 2};

 private:
  // kExactBlocks' malloc: posix_memalign, as ASan's aligned_alloc wants a size that is a
  // multiple of the alignment.
  allocator::Buffer exact_block(size_t size) {
    void* block = nullptr;
    if (posix_memalign(&block, kAlign, kHeader + size) != 0) {
      std::ostringstream msg;
      msg << "[malloc] unable to allocate " << size << " bytes.";
      throw std::runtime_error(msg.str());
    }
    *static_cast<size_t*>(block) = size;
    std::lock_guard<std::mutex> lk(mtx_);
    active_memory_ += size;
    peak_memory_ = std::max(peak_memory_, active_memory_);
    return allocator::Buffer(static_cast<char*>(block) + kHeader);
  }
  static size_t round(size_t size) {
    if (size == 0) return kAlign;
    // Small blocks to 64 bytes; large ones to 4 KiB pages, so the cache matches well.
    size_t unit = size < (size_t(1) << 16) ? kAlign : 4096;
    return (size + unit - 1) / unit * unit;
  }
  void clear_locked() {
    for (auto& [_, p] : cache_) std::free(p);
    cache_.clear();
    for (auto& bin : small_) {
      for (void* p : bin) std::free(p);
      bin.clear();
    }
    for (auto& word : small_used_) word = 0;
    cache_memory_ = 0;
  }
  // The first size class in [lo, hi] with a cached block, or 0 (class 0 is never used).
  size_t find_small(size_t lo, size_t hi) const {
    for (size_t w = lo / 64; w <= hi / 64; ++w) {
      uint64_t bits = small_used_[w];
      if (w == lo / 64) bits &= ~uint64_t(0) << (lo % 64);
      if (w == hi / 64 && hi % 64 != 63) bits &= (uint64_t(1) << (hi % 64 + 1)) - 1;
      if (bits) return w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
    }
    return 0;
  }
  static constexpr size_t kSmallLimit = size_t(1) << 16;
  static constexpr size_t kSmallBins = kSmallLimit / kAlign;
  std::vector<void*> small_[kSmallBins];
  uint64_t small_used_[kSmallBins / 64] = {}; // bit per class: its free list is not empty
  std::multimap<size_t, void*> cache_;
};

CachingAllocator& alloc() {
  // Leaked on purpose: arrays may be freed during static destruction.
  static CachingAllocator* a = new CachingAllocator();
  return *a;
}

} // namespace

namespace allocator {
Allocator& allocator() {
  return alloc();
}
Buffer malloc(size_t size) {
  return alloc().malloc(size);
}
void free(Buffer buffer) {
  alloc().free(buffer);
}
size_t size(Buffer buffer) {
  return alloc().size(buffer);
}
Buffer make_buffer(void* ptr, size_t size) {
  return alloc().make_buffer(ptr, size);
}
void release(Buffer buffer) {
  alloc().release(buffer);
}
} // namespace allocator

size_t get_active_memory() {
  size_t device = gpu::active_memory();
  std::lock_guard<std::mutex> lk(alloc().mtx_);
  return alloc().active_memory_ + device;
}
size_t get_peak_memory() {
  size_t device = gpu::peak_memory();
  std::lock_guard<std::mutex> lk(alloc().mtx_);
  return alloc().peak_memory_ + device;
}
void reset_peak_memory() {
  gpu::reset_peak_memory();
  std::lock_guard<std::mutex> lk(alloc().mtx_);
  alloc().peak_memory_ = alloc().active_memory_;
}
size_t get_cache_memory() {
  size_t device = gpu::cache_memory();
  std::lock_guard<std::mutex> lk(alloc().mtx_);
  return alloc().cache_memory_ + device;
}
size_t set_memory_limit(size_t limit) {
  std::lock_guard<std::mutex> lk(alloc().mtx_);
  return std::exchange(alloc().memory_limit_, limit);
}
size_t get_memory_limit() {
  std::lock_guard<std::mutex> lk(alloc().mtx_);
  return alloc().memory_limit_;
}
size_t set_cache_limit(size_t limit) {
  size_t old;
  {
    std::lock_guard<std::mutex> lk(alloc().mtx_);
    old = std::exchange(alloc().cache_limit_, limit);
  }
  gpu::set_cache_limit(limit);
  if (limit < old) clear_cache();
  return old;
}
size_t set_wired_limit(size_t limit) {
  static size_t wired = 0;
  return std::exchange(wired, limit);
}
void clear_cache() {
  // Kernels still queued or running may hold buffers about to be freed into the cache: let
  // the stream workers finish them first (MLX's CPU behaviour).
  scheduler::wait_for_streams();
  gpu::clear_cache();
  alloc().clear();
}

} // namespace nuvec
