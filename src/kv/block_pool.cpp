#include "kv/block_pool.h"

#include <fmt/format.h>

#include <cassert>

namespace rlt::kv {

BlockPool::BlockPool(int32_t num_blocks) : refs_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void BlockPool::take(int32_t count, BlockId* out) {
  assert(count <= num_free());
  for (int32_t i = 0; i < count; ++i) {
    BlockId b = free_.back();
    free_.pop_back();
    assert(refs_[b] == 0);
    refs_[b] = 1;
    out[i] = b;
  }
}

bool BlockPool::release(BlockId block) {
  assert(refs_[block] > 0);
  if (--refs_[block] != 0) return false;
  free_.push_back(block);
  return true;
}

Status BlockPool::check() const {
  std::vector<uint8_t> listed(refs_.size(), 0);
  for (BlockId b : free_) {
    if (b < 0 || b >= num_blocks()) {
      return internal_error(
          fmt::format("free list holds block {} outside [0, {})", b, num_blocks()));
    }
    if (listed[b]) return internal_error(fmt::format("block {} is on the free list twice", b));
    listed[b] = 1;
    if (refs_[b] != 0) {
      return internal_error(fmt::format("block {} is free but has {} references", b, refs_[b]));
    }
  }
  for (BlockId b = 0; b < num_blocks(); ++b) {
    if (refs_[b] < 0) return internal_error(fmt::format("block {} has {} references", b, refs_[b]));
    if (!listed[b] && refs_[b] == 0) {
      return internal_error(fmt::format("block {} has no owner and is not free (leaked)", b));
    }
  }
  return {};
}

}  // namespace rlt::kv
