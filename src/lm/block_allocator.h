// The KV block pool's bookkeeping for the serving engine (include/nuvec/lm/engine.h): free
// blocks, reference counts (a block shared by sequences with the same prompt prefix is freed
// with its last user), and the index of full prompt blocks by content for prefix sharing.
// Internal to src/lm.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace nuvec::lm::detail {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int total() const { return static_cast<int>(refs_.size()); }
  int free_count() const { return static_cast<int>(free_.size()); }
  /// Users of block b (0: free).
  int refs(int b) const { return refs_.at(b); }

  /// A free block with one reference, or nullopt when none is free.
  std::optional<int> allocate();
  /// One more user of block b.
  void retain(int b);
  /// One user less; at zero the block is free again and leaves the prefix index.
  void release(int b);

  /// The block holding `tokens` (block_size of them) after the block `parent` (-1 for the
  /// first block of a sequence), if one was published and is still alive. Exact: the tokens
  /// and the parent are compared, not only their hash.
  std::optional<int> find_prefix(int parent, const std::vector<int>& tokens) const;
  /// Publishes block b (its keys and values computed) as holding `tokens` after `parent`.
  void publish(int b, int parent, std::vector<int> tokens);

 private:
  struct Published {
    int parent;
    std::vector<int> tokens;
  };
  static uint64_t key_of(int parent, const std::vector<int>& tokens);

  std::vector<int> refs_;
  std::vector<int> free_;
  std::unordered_multimap<uint64_t, int> index_; // content hash -> block
  std::unordered_map<int, Published> published_; // block -> what it holds
};

} // namespace nuvec::lm::detail
