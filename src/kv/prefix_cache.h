// The prefix-cache index: one entry per cached logical page, holding that page's block in every
// plane (one extra reference each), its tokens and its parent page. Entries form a forest whose
// roots are first pages.
//
// Invariants the manager keeps (checked by KVCacheManager::check_invariants):
//  - users(e) = live allocations whose table holds e's blocks at page depth(e);
//  - an allocation holding e also holds every ancestor of e (at the pages before), so entries with
//    users == 0 are closed under "descendant of";
//  - the evictable list holds exactly the entries with users == 0, in the order they last became
//    unused, each after all of its descendants. Its front is therefore always a leaf whose blocks
//    only the cache holds: evicting from the front frees memory every time and never orphans a
//    descendant (the upstream root-first flaw), and entries in use are never evicted for nothing.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_types.h"
#include "kv/prefix_digest.h"
#include "rlt/status.h"

namespace rlt::kv {

struct PrefixCacheStats {
  uint64_t queries = 0;      // allocations that asked the cache (with a prompt)
  uint64_t query_pages = 0;  // cacheable full pages those prompts had
  uint64_t hit_pages = 0;    // of which served from the cache
  uint64_t hit_tokens = 0;   // hit_pages * block_size
  uint64_t published_entries = 0;
  uint64_t evicted_entries = 0;
  uint64_t evicted_blocks = 0;  // blocks returned to the free list by eviction
  uint64_t miss_pages() const { return query_pages - hit_pages; }
};

class PrefixCache {
 public:
  static constexpr int32_t kNone = -1;

  PrefixCache(int32_t num_blocks, int32_t planes, int32_t block_size);

  // Entry whose key is `digest`, whose parent is `parent` (kNone for a root, then checked against
  // `parent_digest`) and whose tokens equal `tokens`; kNone otherwise.
  int32_t find(const Digest& digest, const Digest& parent_digest, int32_t parent,
               std::span<const TokenId> tokens) const;
  // An entry with this key exists (whatever its tokens).
  bool contains(const Digest& digest) const { return index_.count(digest) != 0; }

  // Publishes a page the caller's allocation holds: users = 1, one reference added to each block.
  // Preconditions: key absent; parent live and held by the same allocation; blocks in no entry.
  int32_t insert(const Digest& digest, const Digest& parent_digest, int32_t parent,
                 std::span<const TokenId> tokens, std::span<const BlockId> blocks, BlockPool& pool);

  // An allocation starts / stops holding an entry. Release deeper pages first: that order keeps
  // every entry behind its descendants in the evictable list.
  void acquire(int32_t entry);
  void release(int32_t entry);

  // Evicts the least recently released unused leaf; returns the blocks it gave back to the pool
  // (always `planes`), or 0 when nothing is evictable.
  int32_t evict_one(BlockPool& pool);
  // Drops every entry (weights changed, operator reset). Blocks still held by allocations stay
  // with them; the rest return to the pool.
  void clear(BlockPool& pool);

  int32_t entry_of_block(BlockId block) const { return block_entry_[block]; }
  std::span<const BlockId> blocks(int32_t e) const {
    return {blocks_.data() + static_cast<size_t>(e) * planes_, static_cast<size_t>(planes_)};
  }
  std::span<const TokenId> tokens(int32_t e) const {
    return {tokens_.data() + static_cast<size_t>(e) * block_size_,
            static_cast<size_t>(block_size_)};
  }
  bool live(int32_t e) const { return e >= 0 && e < capacity() && entries_[e].live; }
  uint32_t generation(int32_t e) const { return entries_[e].generation; }
  int32_t users(int32_t e) const { return entries_[e].users; }
  int32_t parent(int32_t e) const { return entries_[e].parent; }
  int32_t depth(int32_t e) const { return entries_[e].depth; }
  const Digest& digest(int32_t e) const { return entries_[e].digest; }

  int32_t capacity() const { return static_cast<int32_t>(entries_.size()); }
  int32_t num_entries() const { return num_live_; }
  int32_t cached_blocks() const { return num_live_ * planes_; }
  // Blocks only the cache holds: what eviction can return to the pool.
  int32_t evictable_blocks() const { return num_unused_ * planes_; }

  const PrefixCacheStats& stats() const { return stats_; }
  PrefixCacheStats& mutable_stats() { return stats_; }

  // Internal consistency (index, children counts, reachability from roots, evictable list order
  // and membership, block back-references). Users against allocations: the manager checks those.
  Status check(const BlockPool& pool) const;
  // Feeds the LRU order and every live entry to `sink` (the manager's state fingerprint).
  template <typename Sink>
  void visit_state(Sink&& sink) const;

 private:
  struct Entry {
    Digest digest;
    Digest parent_digest;
    int32_t parent = kNone;
    int32_t depth = 0;  // page index of this entry within its prompt
    int32_t children = 0;
    int32_t users = 0;
    int32_t prev = kNone;  // evictable list links (valid while users == 0)
    int32_t next = kNone;
    uint32_t generation = 0;
    bool live = false;
  };

  void list_push_back(int32_t e);
  void list_unlink(int32_t e);
  void remove(int32_t e, BlockPool& pool);

  int32_t planes_;
  int32_t block_size_;
  std::vector<Entry> entries_;  // slots; capacity num_blocks / planes (entries own disjoint blocks)
  std::vector<int32_t> free_slots_;
  std::vector<BlockId> blocks_;       // [slot][plane]
  std::vector<TokenId> tokens_;       // [slot][block_size]
  std::vector<int32_t> block_entry_;  // block -> entry slot or kNone
  std::unordered_map<Digest, int32_t, DigestHash> index_;
  int32_t head_ = kNone;  // least recently released unused entry (a leaf)
  int32_t tail_ = kNone;
  int32_t num_live_ = 0;
  int32_t num_unused_ = 0;
  PrefixCacheStats stats_;
};

template <typename Sink>
void PrefixCache::visit_state(Sink&& sink) const {
  for (int32_t e = head_; e != kNone; e = entries_[e].next) sink(e);
  sink(-2);  // separator between LRU order and entry contents
  for (int32_t e = 0; e < capacity(); ++e) {
    const Entry& x = entries_[e];
    if (!x.live) continue;
    sink(e);
    sink(x.parent);
    sink(x.users);
    sink(static_cast<int64_t>(x.digest.lo));
    for (BlockId b : blocks(e)) sink(b);
  }
}

}  // namespace rlt::kv
