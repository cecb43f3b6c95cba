#include "kv/prefix_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace rlt::kv {

PrefixCache::PrefixCache(int32_t num_blocks, int32_t planes, int32_t block_size)
    : planes_(planes), block_size_(block_size) {
  // Each live entry holds `planes` blocks no other entry holds, so this many slots always suffice
  // and publication never allocates slot storage.
  int32_t slots = num_blocks / planes;
  entries_.resize(slots);
  blocks_.assign(static_cast<size_t>(slots) * planes, -1);
  tokens_.assign(static_cast<size_t>(slots) * block_size, 0);
  block_entry_.assign(num_blocks, kNone);
  free_slots_.reserve(slots);
  for (int32_t e = slots - 1; e >= 0; --e) free_slots_.push_back(e);
  index_.reserve(slots);
}

int32_t PrefixCache::find(const Digest& digest, const Digest& parent_digest, int32_t parent,
                          std::span<const TokenId> tokens) const {
  auto it = index_.find(digest);
  if (it == index_.end()) return kNone;
  int32_t e = it->second;
  const Entry& x = entries_[e];
  // Exact check: a 128-bit collision (or a crafted one) turns into a miss, never a wrong hit.
  if (x.parent != parent || x.parent_digest != parent_digest) return kNone;
  std::span<const TokenId> mine = this->tokens(e);
  if (!std::equal(mine.begin(), mine.end(), tokens.begin(), tokens.end())) return kNone;
  return e;
}

int32_t PrefixCache::insert(const Digest& digest, const Digest& parent_digest, int32_t parent,
                            std::span<const TokenId> tokens, std::span<const BlockId> blocks,
                            BlockPool& pool) {
  assert(!free_slots_.empty());
  assert(static_cast<int32_t>(tokens.size()) == block_size_);
  assert(static_cast<int32_t>(blocks.size()) == planes_);
  int32_t e = free_slots_.back();
  free_slots_.pop_back();
  Entry& x = entries_[e];
  x.digest = digest;
  x.parent_digest = parent_digest;
  x.parent = parent;
  x.depth = parent == kNone ? 0 : entries_[parent].depth + 1;
  x.children = 0;
  x.users = 1;
  x.prev = x.next = kNone;
  x.live = true;
  ++x.generation;
  if (parent != kNone) ++entries_[parent].children;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<size_t>(e) * block_size_);
  for (int32_t p = 0; p < planes_; ++p) {
    BlockId b = blocks[p];
    assert(block_entry_[b] == kNone);
    blocks_[static_cast<size_t>(e) * planes_ + p] = b;
    block_entry_[b] = e;
    pool.add_ref(b);
  }
  index_.emplace(digest, e);
  ++num_live_;
  ++stats_.published_entries;
  return e;
}

void PrefixCache::acquire(int32_t e) {
  Entry& x = entries_[e];
  if (x.users++ == 0) {
    list_unlink(e);
    --num_unused_;
  }
}

void PrefixCache::release(int32_t e) {
  Entry& x = entries_[e];
  assert(x.users > 0);
  if (--x.users == 0) {
    list_push_back(e);
    ++num_unused_;
  }
}

int32_t PrefixCache::evict_one(BlockPool& pool) {
  if (head_ == kNone) return 0;
  int32_t e = head_;
  assert(entries_[e].children == 0 && "evictable list front must be a leaf");
  list_unlink(e);
  --num_unused_;
  remove(e, pool);
  ++stats_.evicted_entries;
  stats_.evicted_blocks += static_cast<uint64_t>(planes_);
  return planes_;
}

void PrefixCache::clear(BlockPool& pool) {
  for (int32_t e = 0; e < capacity(); ++e) {
    if (!entries_[e].live) continue;
    if (entries_[e].users == 0) {
      list_unlink(e);
      --num_unused_;
    }
    remove(e, pool);
  }
  assert(head_ == kNone && num_live_ == 0 && num_unused_ == 0);
}

void PrefixCache::remove(int32_t e, BlockPool& pool) {
  Entry& x = entries_[e];
  if (x.parent != kNone && entries_[x.parent].live) --entries_[x.parent].children;
  for (int32_t p = 0; p < planes_; ++p) {
    BlockId b = blocks_[static_cast<size_t>(e) * planes_ + p];
    block_entry_[b] = kNone;
    pool.release(b);
  }
  index_.erase(x.digest);
  x.live = false;
  x.users = 0;
  x.children = 0;
  ++x.generation;  // outstanding PrefixMatch references to this slot go stale
  free_slots_.push_back(e);
  --num_live_;
}

void PrefixCache::list_push_back(int32_t e) {
  Entry& x = entries_[e];
  x.prev = tail_;
  x.next = kNone;
  if (tail_ != kNone)
    entries_[tail_].next = e;
  else
    head_ = e;
  tail_ = e;
}

void PrefixCache::list_unlink(int32_t e) {
  Entry& x = entries_[e];
  if (x.prev != kNone)
    entries_[x.prev].next = x.next;
  else
    head_ = x.next;
  if (x.next != kNone)
    entries_[x.next].prev = x.prev;
  else
    tail_ = x.prev;
  x.prev = x.next = kNone;
}

Status PrefixCache::check(const BlockPool& pool) const {
  std::vector<int32_t> children(entries_.size(), 0);
  int32_t num_live = 0, unused = 0;
  for (int32_t e = 0; e < capacity(); ++e) {
    const Entry& x = entries_[e];
    if (!x.live) continue;
    ++num_live;
    if (x.users == 0) ++unused;
    if (x.users < 0) return internal_error(fmt::format("prefix entry {} has {} users", e, x.users));
    auto it = index_.find(x.digest);
    if (it == index_.end() || it->second != e) {
      return internal_error(fmt::format("prefix entry {} is not indexed under its key", e));
    }
    // Reachability: the parent chain must end at a root through live entries, depth by depth.
    int32_t cur = e, steps = 0;
    while (entries_[cur].parent != kNone) {
      int32_t par = entries_[cur].parent;
      if (!live(par)) {
        return internal_error(
            fmt::format("prefix entry {} is orphaned: ancestor {} is not cached", e, par));
      }
      if (entries_[par].depth + 1 != entries_[cur].depth ||
          entries_[cur].parent_digest != entries_[par].digest) {
        return internal_error(
            fmt::format("prefix entry {} disagrees with its parent {}", cur, par));
      }
      cur = par;
      if (++steps > capacity()) return internal_error("prefix parent chain has a cycle");
    }
    if (entries_[cur].depth != 0) {
      return internal_error(fmt::format("prefix root {} has depth {}", cur, entries_[cur].depth));
    }
    if (x.parent != kNone) {
      ++children[x.parent];
      // Holders of an entry hold its parent too.
      if (entries_[x.parent].users < x.users) {
        return internal_error(fmt::format("prefix entry {} has {} users, its parent {} only {}", e,
                                          x.users, x.parent, entries_[x.parent].users));
      }
    }
    for (int32_t p = 0; p < planes_; ++p) {
      BlockId b = blocks_[static_cast<size_t>(e) * planes_ + p];
      if (b < 0 || b >= pool.num_blocks() || block_entry_[b] != e) {
        return internal_error(
            fmt::format("prefix entry {} plane {} block {} not mapped back", e, p, b));
      }
      if (pool.refs(b) < 1 + x.users) {
        return internal_error(fmt::format("prefix entry {} block {} has {} references, needs {}", e,
                                          b, pool.refs(b), 1 + x.users));
      }
    }
  }
  if (num_live != num_live_ || unused != num_unused_ ||
      static_cast<int32_t>(index_.size()) != num_live) {
    return internal_error(
        fmt::format("prefix counts: {} live ({} counted, {} indexed), {} unused "
                    "({} counted)",
                    num_live, num_live_, index_.size(), unused, num_unused_));
  }
  for (int32_t e = 0; e < capacity(); ++e) {
    if (entries_[e].live && entries_[e].children != children[e]) {
      return internal_error(fmt::format("prefix entry {} counts {} children, has {}", e,
                                        entries_[e].children, children[e]));
    }
  }
  for (BlockId b = 0; b < pool.num_blocks(); ++b) {
    int32_t e = block_entry_[b];
    if (e == kNone) continue;
    std::span<const BlockId> bs = blocks(e);
    if (!live(e) || std::find(bs.begin(), bs.end(), b) == bs.end()) {
      return internal_error(fmt::format("block {} maps to prefix entry {} that lacks it", b, e));
    }
  }
  // Evictable list: exactly the unused entries, each after its descendants (so the front is a
  // leaf); equivalently, an unused entry's unused parent comes later in the list.
  std::vector<int32_t> position(entries_.size(), -1);
  int32_t n = 0, prev = kNone;
  for (int32_t e = head_; e != kNone; e = entries_[e].next) {
    if (!live(e) || entries_[e].users != 0) {
      return internal_error(fmt::format("evictable list holds entry {} that is in use", e));
    }
    if (entries_[e].prev != prev) return internal_error("evictable list links are broken");
    if (position[e] != -1 || n > num_unused_) return internal_error("evictable list has a cycle");
    position[e] = n++;
    prev = e;
  }
  if (prev != tail_ || n != num_unused_) {
    return internal_error(
        fmt::format("evictable list holds {} entries, {} are unused", n, num_unused_));
  }
  for (int32_t e = 0; e < capacity(); ++e) {
    if (!entries_[e].live || entries_[e].users != 0) continue;
    int32_t par = entries_[e].parent;
    if (par == kNone) continue;
    if (entries_[par].users == 0 && position[par] < position[e]) {
      return internal_error(fmt::format(
          "evictable entry {} would be evicted before its child {} (orphaning)", par, e));
    }
  }
  return {};
}

}  // namespace rlt::kv
