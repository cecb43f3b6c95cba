// One request's logical KV state inside the manager. Private to src/kv: other modules see it only
// through the manager's views. Slots are recycled, so the vectors keep their storage between
// requests and steady-state admission does not allocate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "kv/prefix_digest.h"
#include "kv/written_state.h"

namespace rlt::kv {

struct Allocation {
  RequestId id = 0;
  bool live = false;
  int32_t capacity_tokens = 0;
  int32_t max_pages = 0;              // ceil(capacity_tokens / block_size): the table stride
  int32_t pages = 0;                  // pages backed in every plane
  int32_t cached_pages = 0;           // leading pages that came from prefix-cache hits at admission
  std::vector<BlockId> tables;        // [plane][max_pages]; -1 beyond `pages`
  std::vector<WrittenPlane> written;  // per plane

  // Prefix publication: keys and tokens of the full prompt pages before the last prompt token.
  Digest prefix_root;
  std::vector<Digest> page_digests;
  std::vector<TokenId> publishable_tokens;
  int32_t published_pages = 0;   // leading pages that are cache entries this allocation holds
  bool publish_stopped = false;  // another request cached an identical page first

  std::vector<TransferId> leases;
  bool release_pending = false;  // freed while leased: released by the last unpin

  // Tokens the backed pages can hold, capped at the capacity (the last page may be partly unused).
  int32_t backed_tokens(int32_t block_size) const {
    return static_cast<int32_t>(
        std::min<int64_t>(int64_t{pages} * block_size, int64_t{capacity_tokens}));
  }
  int32_t publishable_pages() const { return static_cast<int32_t>(page_digests.size()); }
  BlockId* table(int32_t plane) { return tables.data() + static_cast<size_t>(plane) * max_pages; }
  const BlockId* table(int32_t plane) const {
    return tables.data() + static_cast<size_t>(plane) * max_pages;
  }
  std::span<const BlockId> backed(int32_t plane) const {
    return {table(plane), static_cast<size_t>(pages)};
  }
};

}  // namespace rlt::kv
