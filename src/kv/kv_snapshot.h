// A request's KV state saved to host memory for lossless preemption: logical state (capacity,
// pages, written positions per plane, the prompt pages it may still publish) and the contents of
// every page, in table order, plane-major. Holds no blocks and no leases; restoring it needs a
// fresh allocation of the same capacity and page count (KVCacheManager::resume makes one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/kv_types.h"
#include "kv/prefix_digest.h"

namespace rlt::kv {

struct KVSnapshot {
  KVLayout layout = KVLayout::kLastExited;
  int32_t planes = 0;
  KVGeometry geometry;  // block shape of the source pool (num_blocks is not compared)
  Digest model_root;    // model, dtype, layout and geometry key: K/V of another model is refused
  int32_t capacity_tokens = 0;
  int32_t pages = 0;
  // Written positions per plane: bitsets of ceil(capacity_tokens / 64) words each, plane-major.
  std::vector<uint64_t> written_words;
  // Prompt pages the request may still publish once restored (empty without prefix caching).
  Digest prefix_root;
  std::vector<TokenId> publishable_tokens;
  // [pages * planes, num_layers, block_size, num_kv_heads, head_dim] per pool, plane-major.
  std::vector<std::byte> keys;
  std::vector<std::byte> values;

  size_t host_bytes() const { return keys.size() + values.size(); }
};

}  // namespace rlt::kv
