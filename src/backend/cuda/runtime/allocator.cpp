// nuvec: the device caching allocator. cudaMalloc and cudaFree synchronise the device and
// cost tens of microseconds, so freed blocks are kept by size and reused: small blocks in
// exact size classes, large ones for requests up to twice smaller (the host allocator's
// policy). The memory API adds these figures to the host's (backend/gpu.h).
#include "backend/cuda/runtime/allocator.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/runtime/stream.h"
#include "backend/gpu.h"

namespace nuvec::cu {

namespace {

constexpr size_t kSmallLimit = size_t(1) << 20;

// Small requests round to 256 bytes (the alignment cudaMalloc gives), then to powers of
// two from 4 KiB up, large ones to 2 MiB pages: few distinct sizes, so the cache hits.
size_t round_size(size_t n) {
  if (n == 0) n = 1;
  if (n <= 4096) return (n + 255) & ~size_t(255);
  if (n < kSmallLimit) {
    size_t p = 8192;
    while (p < n) p <<= 1;
    return p;
  }
  constexpr size_t page = size_t(2) << 20;
  return (n + page - 1) / page * page;
}

struct DeviceAllocator {
  std::mutex mtx;
  std::multimap<size_t, void*> cache; // rounded size -> free block
  std::unordered_map<void*, size_t> sizes; // live and cached blocks -> rounded size
  size_t active{0}, peak{0}, cached{0};
  size_t cache_limit{~size_t(0)};

  void* malloc(size_t n) {
    size_t r = round_size(n);
    {
      std::lock_guard<std::mutex> lk(mtx);
      auto it = cache.lower_bound(r);
      size_t limit = r < kSmallLimit ? r : 2 * r;
      if (it != cache.end() && it->first <= limit) {
        void* p = it->second;
        cached -= it->first;
        active += it->first;
        peak = std::max(peak, active);
        cache.erase(it);
        return p;
      }
    }
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, r);
    if (err != cudaSuccess) {
      cudaGetLastError();
      // Blocks of finished nodes may still be held by this stream (released in batches):
      // wait for the device, release them into the cache, then empty the cache and retry.
      if (StreamState* st = current_state()) st->reclaim();
      clear();
      err = cudaMalloc(&p, r);
      if (err != cudaSuccess) {
        cudaGetLastError();
        throw std::runtime_error(
            "[malloc] cannot allocate " + std::to_string(r) + " bytes of GPU memory: " +
            cudaGetErrorString(err));
      }
    }
    std::lock_guard<std::mutex> lk(mtx);
    sizes[p] = r;
    active += r;
    peak = std::max(peak, active);
    return p;
  }

  void free(void* p) {
    {
      std::lock_guard<std::mutex> lk(mtx);
      auto it = sizes.find(p);
      if (it == sizes.end()) return; // not ours (cannot happen through array::Data)
      active -= it->second;
      if (cached + it->second <= cache_limit) {
        cached += it->second;
        cache.emplace(it->second, p);
        return;
      }
      sizes.erase(it);
    }
    // Over the cache limit: give the block back. Blocks reach free() only once the device
    // has run every kernel using them (stream.cpp), so this cannot pull memory from under
    // a running kernel.
    cudaFree(p);
  }

  void clear() {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lk(mtx);
      for (auto& [size, p] : cache) {
        blocks.push_back(p);
        sizes.erase(p);
      }
      cache.clear();
      cached = 0;
    }
    for (void* p : blocks) cudaFree(p);
  }
};

DeviceAllocator& allocator() {
  // Leaked on purpose: arrays freed during static destruction still return their blocks.
  static auto* a = new DeviceAllocator();
  return *a;
}

// Pinned staging blocks for small uploads, by rounded size. Not counted as device memory.
struct PinnedPool {
  std::mutex mtx;
  std::unordered_map<size_t, std::vector<void*>> free;
};

PinnedPool& pinned_pool() {
  static auto* p = new PinnedPool();
  return *p;
}

thread_local CapturedResources* tl_capture = nullptr;

} // namespace

void set_capture_allocations(CapturedResources* r) {
  tl_capture = r;
}

void* pinned_malloc(size_t size) {
  size_t r = round_size(size);
  auto& pool = pinned_pool();
  {
    std::lock_guard<std::mutex> lk(pool.mtx);
    auto& v = pool.free[r];
    if (!v.empty()) {
      void* p = v.back();
      v.pop_back();
      return p;
    }
  }
  void* p = nullptr;
  check(cudaMallocHost(&p, r), "cudaMallocHost");
  return p;
}

void pinned_free(void* ptr, size_t size) {
  auto& pool = pinned_pool();
  std::lock_guard<std::mutex> lk(pool.mtx);
  pool.free[round_size(size)].push_back(ptr);
}

void* device_malloc(size_t size) {
  void* p = allocator().malloc(size);
  if (tl_capture) tl_capture->allocated.insert(p);
  return p;
}

void device_free(void* ptr, size_t size) {
  if (tl_capture && tl_capture->allocated.count(ptr)) {
    tl_capture->device_blocks.emplace_back(ptr, size);
    return;
  }
  allocator().free(ptr);
}

} // namespace nuvec::cu

namespace nuvec::gpu {

void free_device(void* ptr, size_t nbytes) {
  cu::device_free(ptr, nbytes);
}

size_t active_memory() {
  auto& a = cu::allocator();
  std::lock_guard<std::mutex> lk(a.mtx);
  return a.active;
}

size_t peak_memory() {
  auto& a = cu::allocator();
  std::lock_guard<std::mutex> lk(a.mtx);
  return a.peak;
}

void reset_peak_memory() {
  auto& a = cu::allocator();
  std::lock_guard<std::mutex> lk(a.mtx);
  a.peak = a.active;
}

size_t cache_memory() {
  auto& a = cu::allocator();
  std::lock_guard<std::mutex> lk(a.mtx);
  return a.cached;
}

void clear_cache() {
  if (is_available()) cu::allocator().clear();
}

void set_cache_limit(size_t limit) {
  auto& a = cu::allocator();
  size_t old;
  {
    std::lock_guard<std::mutex> lk(a.mtx);
    old = std::exchange(a.cache_limit, limit);
  }
  if (limit < old && is_available()) a.clear();
}

} // namespace nuvec::gpu
