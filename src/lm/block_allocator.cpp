// KV block bookkeeping of the serving engine (src/lm/block_allocator.h).
#include "block_allocator.h"

#include <stdexcept>
#include <string>

namespace nuvec::lm::detail {

BlockAllocator::BlockAllocator(int num_blocks) : refs_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) {
    free_.push_back(b); // handed out from the back: block 0 first
  }
}

std::optional<int> BlockAllocator::allocate() {
  if (free_.empty()) {
    return std::nullopt;
  }
  int b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  return b;
}

void BlockAllocator::retain(int b) {
  if (refs_.at(b) <= 0) {
    throw std::logic_error("[lm.Engine] retaining free KV block " + std::to_string(b));
  }
  ++refs_[b];
}

void BlockAllocator::release(int b) {
  if (refs_.at(b) <= 0) {
    throw std::logic_error("[lm.Engine] releasing free KV block " + std::to_string(b));
  }
  if (--refs_[b] > 0) {
    return;
  }
  if (auto it = published_.find(b); it != published_.end()) {
    const uint64_t key = key_of(it->second.parent, it->second.tokens);
    auto range = index_.equal_range(key);
    for (auto i = range.first; i != range.second; ++i) {
      if (i->second == b) {
        index_.erase(i);
        break;
      }
    }
    published_.erase(it);
  }
  free_.push_back(b);
}

uint64_t BlockAllocator::key_of(int parent, const std::vector<int>& tokens) {
  // FNV-1a over the parent and the tokens; collisions are resolved by comparing them.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (16 * i)) & 0xffff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(static_cast<int64_t>(parent)));
  for (int t : tokens) {
    mix(static_cast<uint64_t>(static_cast<uint32_t>(t)));
  }
  return h;
}

std::optional<int> BlockAllocator::find_prefix(int parent, const std::vector<int>& tokens) const {
  auto range = index_.equal_range(key_of(parent, tokens));
  for (auto i = range.first; i != range.second; ++i) {
    const Published& p = published_.at(i->second);
    if (p.parent == parent && p.tokens == tokens) {
      return i->second;
    }
  }
  return std::nullopt;
}

void BlockAllocator::publish(int b, int parent, std::vector<int> tokens) {
  if (published_.count(b) || find_prefix(parent, tokens)) {
    return; // already published, or an equal block is (the first stays the shared one)
  }
  index_.emplace(key_of(parent, tokens), b);
  published_.emplace(b, Published{parent, std::move(tokens)});
}

} // namespace nuvec::lm::detail
