// nuvec: a small open-addressing hash map from array ids to values, for the scheduler's
// per-eval bookkeeping. std::unordered_map allocates a node per entry, which was a large
// share of the cost of evaluating graphs of tiny ops.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace nuvec::detail {

/// Maps non-zero uintptr_t keys to V. Linear probing with backward-shift deletion (no
/// tombstones); the table doubles past 50% load.
template <typename V>
class IdMap {
 public:
  explicit IdMap(size_t expected = 64) {
    size_t cap = 16;
    while (cap < 2 * expected) cap <<= 1;
    slots_.resize(cap);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// The value of key, inserting `init` first when absent. Returns (value, inserted).
  std::pair<V*, bool> try_emplace(uintptr_t key, V init) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = find_slot(key);
    if (slots_[i].key == key) return {&slots_[i].value, false};
    slots_[i].key = key;
    slots_[i].value = std::move(init);
    ++size_;
    return {&slots_[i].value, true};
  }

  /// Pointer to the value of key, or nullptr.
  V* find(uintptr_t key) {
    size_t i = find_slot(key);
    return slots_[i].key == key ? &slots_[i].value : nullptr;
  }

  /// Removes key if present.
  void erase(uintptr_t key) {
    size_t i = find_slot(key);
    if (slots_[i].key != key) return;
    size_t mask = slots_.size() - 1;
    // Shift later members of the probe run back into the hole so lookups never stop early.
    for (size_t j = (i + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
      size_t home = hash(slots_[j].key) & mask;
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    slots_[i].key = 0;
    --size_;
  }

 private:
  struct Slot {
    uintptr_t key{0};
    V value{};
  };

  static size_t hash(uintptr_t k) {
    // Descriptor addresses are 16-byte aligned: mix the high bits down (Fibonacci hashing).
    return static_cast<size_t>((k >> 4) * 0x9E3779B97F4A7C15ull >> 7);
  }

  size_t find_slot(uintptr_t key) const {
    size_t mask = slots_.size() - 1;
    size_t i = hash(key) & mask;
    while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_ = 0;
    for (auto& s : old) {
      if (s.key != 0) try_emplace(s.key, std::move(s.value));
    }
  }

  std::vector<Slot> slots_;
  size_t size_{0};
};

} // namespace nuvec::detail
