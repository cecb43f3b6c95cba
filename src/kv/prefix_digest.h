// Chained 128-bit XXH3 keys for prefix-cache pages.
//   root            = XXH3-128("rlt.kv.prefix.v1" | model salt | dtype | layout | geometry | depth)
//   salted root     = XXH3-128(root | request cache salt)       (only when a request has a salt)
//   digest(page i)  = XXH3-128(digest(page i-1) | page i token ids as little-endian int32)
// A key thus names the whole token prefix up to the end of its page under one model, dtype and
// layout. The cache additionally stores each page's tokens and parent, and compares them on
// lookup, so a digest collision can cause a miss but never a wrong hit.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kv/kv_types.h"

namespace rlt::kv {

struct Digest {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Digest&) const = default;
};

struct DigestHash {
  size_t operator()(const Digest& d) const { return static_cast<size_t>(d.lo ^ (d.hi >> 1)); }
};

// The chain start for a manager: covers everything that changes what K/V a prompt produces.
Digest model_root_digest(const KVCacheConfig& config);
// The chain start for one request: the model root, further keyed by a per-request cache salt
// (tenant, adapter) when one is given; an empty salt returns `root` unchanged.
Digest salted_root_digest(const Digest& root, std::string_view cache_salt);
// The key of one full page given its parent's key (or the root for page 0).
Digest page_digest(const Digest& parent, std::span<const TokenId> page_tokens);

}  // namespace rlt::kv
