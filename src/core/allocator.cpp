// nuvec: the CPU caching allocator and the memory API (MLX's memory.h semantics). Freed
// blocks are cached by size and reused for requests up to twice smaller; active and peak
// memory count live blocks.
#include "nuvec/allocator.h"

#include <unistd.h>

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
#include "nuvec/memory.h"

namespace nuvec {

namespace {

// Each block carries its size in a header, so free() needs no lookup. 64 bytes keep the
// data 64-byte aligned (a cache line; AVX-512 loads).
constexpr size_t kHeader = 64;
constexpr size_t kAlign = 64;

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  return (pages > 0 && page > 0) ? size_t(pages) * size_t(page) : size_t(1) << 34;
}

class CachingAllocator {
 public:
  allocator::Buffer malloc(size_t size) {
    size_t rounded = round(size);
    std::unique_lock<std::mutex> lk(mtx_);
    void* block = nullptr;
    if (rounded < kSmallLimit) {
      // Small blocks: exact size classes with vector free lists, so the hot path of tiny
      // graphs allocates nothing besides the block itself.
      auto& bin = small_[rounded / kAlign];
      if (!bin.empty()) {
        block = bin.back();
        bin.pop_back();
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

  void free(allocator::Buffer buf) {
    if (!buf.ptr()) return;
    void* block = static_cast<char*>(buf.ptr()) - kHeader;
    size_t size = *static_cast<size_t*>(block);
    std::lock_guard<std::mutex> lk(mtx_);
    active_memory_ -= size;
    if (cache_memory_ + size <= cache_limit_) {
      if (size < kSmallLimit) {
        small_[size / kAlign].push_back(block);
      } else {
        cache_.emplace(size, block);
      }
      cache_memory_ += size;
    } else {
      std::free(block);
    }
  }

  size_t size(allocator::Buffer buf) const {
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
    cache_memory_ = 0;
  }
  static constexpr size_t kSmallLimit = size_t(1) << 16;
  std::vector<void*> small_[kSmallLimit / kAlign];
  std::multimap<size_t, void*> cache_;
};

CachingAllocator& alloc() {
  // Leaked on purpose: arrays may be freed during static destruction.
  static CachingAllocator* a = new CachingAllocator();
  return *a;
}

} // namespace

namespace allocator {
Buffer malloc(size_t size) {
  return alloc().malloc(size);
}
void free(Buffer buffer) {
  alloc().free(buffer);
}
size_t size(Buffer buffer) {
  return alloc().size(buffer);
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
  gpu::clear_cache();
  alloc().clear();
}

} // namespace nuvec
