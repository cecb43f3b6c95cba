// The physical page pool: a LIFO free list and one reference count per block. A block's owners
// are the allocations whose tables contain it plus at most one prefix-cache entry; it is free
// exactly when its count is 0. No policy lives here (no eviction, no admission).
// Not thread-safe: owned by one KVCacheManager, used from the scheduler thread.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_types.h"
#include "rlt/status.h"

namespace rlt::kv {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t refs(BlockId block) const { return refs_[block]; }

  // Pops `count` blocks (precondition: count <= num_free()) into out[0..count), each with one
  // reference. First pop of a fresh pool is block 0; freed blocks are reused last-in first-out.
  void take(int32_t count, BlockId* out);
  void add_ref(BlockId block) { ++refs_[block]; }
  // Drops one reference; returns true when the block went back to the free list.
  bool release(BlockId block);

  // Free list without duplicates, every listed block at 0 references and every unlisted one above.
  Status check() const;
  // Free-list order matters for reuse; the manager's fingerprint hashes it.
  const std::vector<BlockId>& free_list() const { return free_; }

 private:
  std::vector<BlockId> free_;  // stack: back() is the next block handed out
  std::vector<int32_t> refs_;
};

}  // namespace rlt::kv
