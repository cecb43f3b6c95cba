// KVCacheManager: the invariant checker and the state fingerprint. Both walk everything; they are
// for tests and debug builds, not for the serving hot path.
#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_cache_manager.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace rlt::kv {

Status KVCacheManager::check_invariants() const {
  RLT_RETURN_IF_ERROR(pool_.check());
  RLT_RETURN_IF_ERROR(cache_.check(pool_));
  const int32_t n = num_blocks();
  const int32_t bs = block_size();
  std::vector<int32_t> owners(n, 0);
  std::vector<int32_t> hit_owners(n, 0);
  std::vector<int32_t> users(cache_.capacity(), 0);
  std::vector<int32_t> seen(n, -1);  // slot that last touched a block: duplicates inside one table

  int32_t live = 0;
  for (int32_t slot = 0; slot < static_cast<int32_t>(slots_.size()); ++slot) {
    const Allocation& a = slots_[slot];
    if (!a.live) continue;
    ++live;
    auto it = index_.find(a.id);
    if (it == index_.end() || it->second != slot) {
      return internal_error(fmt::format("allocation of request {} is not indexed", a.id));
    }
    const auto max_pages = static_cast<int32_t>((int64_t{a.capacity_tokens} + bs - 1) / bs);
    if (a.max_pages != max_pages || a.pages < 0 || a.pages > a.max_pages ||
        a.tables.size() != static_cast<size_t>(planes_) * a.max_pages ||
        a.written.size() != static_cast<size_t>(planes_)) {
      return internal_error(fmt::format("request {}: table shape {} pages of {} (capacity {})",
                                        a.id, a.pages, a.max_pages, a.capacity_tokens));
    }
    const int32_t read_only = std::max(a.cached_pages, a.published_pages);
    if (a.cached_pages > a.pages || a.published_pages > a.publishable_pages() ||
        read_only > a.pages) {
      return internal_error(fmt::format("request {}: {} cached / {} published pages of {}", a.id,
                                        a.cached_pages, a.published_pages, a.pages));
    }
    for (int32_t plane = 0; plane < planes_; ++plane) {
      const BlockId* t = a.table(plane);
      for (int32_t page = 0; page < a.max_pages; ++page) {
        BlockId b = t[page];
        if (page >= a.pages) {
          if (b != -1) {
            return internal_error(
                fmt::format("request {} plane {}: page {} beyond the {} backed "
                            "pages holds block {}",
                            a.id, plane, page, a.pages, b));
          }
          continue;
        }
        if (b < 0 || b >= n) {
          return internal_error(fmt::format("request {} plane {} page {}: block {} outside pool",
                                            a.id, plane, page, b));
        }
        if (seen[b] == slot) {
          return internal_error(
              fmt::format("request {}: block {} appears twice in its tables", a.id, b));
        }
        seen[b] = slot;
        ++owners[b];
        if (page < a.cached_pages) ++hit_owners[b];
        int32_t e = cache_.entry_of_block(b);
        if (e != PrefixCache::kNone && page >= a.published_pages) {
          return internal_error(
              fmt::format("request {} page {}: block {} is a prefix entry it does not account for",
                          a.id, page, b));
        }
      }
    }
    // Held entries: exact page, every plane, and the whole root path (closure under ancestors).
    for (int32_t page = 0; page < a.published_pages; ++page) {
      int32_t e = cache_.entry_of_block(a.table(0)[page]);
      if (e == PrefixCache::kNone || cache_.depth(e) != page) {
        return internal_error(
            fmt::format("request {} page {} should be prefix entry at that depth", a.id, page));
      }
      std::span<const BlockId> eb = cache_.blocks(e);
      for (int32_t plane = 0; plane < planes_; ++plane) {
        if (eb[plane] != a.table(plane)[page]) {
          return internal_error(
              fmt::format("request {} page {} plane {}: table block {} differs from its entry's {}",
                          a.id, page, plane, a.table(plane)[page], eb[plane]));
        }
      }
      const int32_t expected_parent =
          page == 0 ? PrefixCache::kNone : cache_.entry_of_block(a.table(0)[page - 1]);
      if (cache_.parent(e) != expected_parent) {
        return internal_error(fmt::format(
            "request {} holds prefix entry {} without its parent at page {}", a.id, e, page - 1));
      }
      if (cache_.digest(e) != a.page_digests[page]) {
        return internal_error(fmt::format("request {} page {}: entry key differs", a.id, page));
      }
      ++users[e];
    }
    const int32_t backed = a.backed_tokens(bs);
    for (int32_t plane = 0; plane < planes_; ++plane) {
      const WrittenPlane& w = a.written[plane];
      if (w.capacity() != a.capacity_tokens || w.frontier() > backed) {
        return internal_error(
            fmt::format("request {} plane {}: written up to {} with {} backed tokens", a.id, plane,
                        w.frontier(), backed));
      }
      if ((w.prefix() < a.capacity_tokens && w.test(w.prefix())) ||
          (w.prefix() > 0 && !w.test(w.prefix() - 1))) {
        return internal_error(fmt::format("request {} plane {}: written prefix {} is stale", a.id,
                                          plane, w.prefix()));
      }
      if (w.prefix() < read_only * bs) {
        return internal_error(fmt::format(
            "request {} plane {}: shared pages end at {} but only {} tokens are written", a.id,
            plane, read_only * bs, w.prefix()));
      }
    }
    if (a.release_pending && a.leases.empty()) {
      return internal_error(fmt::format("request {} awaits release without a lease", a.id));
    }
    std::vector<TransferId> leases = a.leases;
    std::sort(leases.begin(), leases.end());
    if (std::adjacent_find(leases.begin(), leases.end()) != leases.end()) {
      return internal_error(fmt::format("request {} holds a duplicate lease", a.id));
    }
  }
  if (live != static_cast<int32_t>(index_.size())) {
    return internal_error(fmt::format("{} live allocations, {} indexed", live, index_.size()));
  }
  for (BlockId b = 0; b < n; ++b) {
    const bool cached = cache_.entry_of_block(b) != PrefixCache::kNone;
    const int32_t expected = owners[b] + (cached ? 1 : 0);
    if (pool_.refs(b) != expected) {
      return internal_error(fmt::format("block {} has {} references but {} owning allocations{}", b,
                                        pool_.refs(b), owners[b],
                                        cached ? " + 1 prefix entry" : ""));
    }
    // Requests share a block only through the prefix cache, or through hits taken before a cache
    // reset (then every owner but the publisher holds it as a hit page).
    if (owners[b] > 1 && !cached && hit_owners[b] < owners[b] - 1) {
      return internal_error(
          fmt::format("block {} is owned by {} requests without a prefix entry", b, owners[b]));
    }
  }
  for (int32_t e = 0; e < cache_.capacity(); ++e) {
    if (cache_.live(e) && cache_.users(e) != users[e]) {
      return internal_error(fmt::format("prefix entry {} counts {} users, {} requests hold it", e,
                                        cache_.users(e), users[e]));
    }
  }
  if (num_used_blocks() != n - num_free_blocks() - num_evictable_blocks() ||
      num_free_blocks() + num_evictable_blocks() > n) {
    return internal_error("block counts do not add up");
  }
  return {};
}

uint64_t KVCacheManager::state_fingerprint() const {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  auto put = [&state](int64_t v) { XXH3_64bits_update(&state, &v, sizeof v); };
  put(-100);
  for (BlockId b : pool_.free_list()) put(b);
  put(-101);
  for (BlockId b = 0; b < num_blocks(); ++b) put(pool_.refs(b));
  put(-102);
  cache_.visit_state(put);
  const PrefixCacheStats& s = cache_.stats();
  for (uint64_t v : {s.queries, s.query_pages, s.hit_pages, s.hit_tokens, s.published_entries,
                     s.evicted_entries, s.evicted_blocks}) {
    put(static_cast<int64_t>(v));
  }
  put(-103);
  std::vector<std::pair<RequestId, int32_t>> ids(index_.begin(), index_.end());
  std::sort(ids.begin(), ids.end());
  for (const auto& [id, slot] : ids) {
    const Allocation& a = slots_[slot];
    for (int64_t v :
         {static_cast<int64_t>(id), int64_t{a.capacity_tokens}, int64_t{a.pages},
          int64_t{a.cached_pages}, int64_t{a.published_pages}, int64_t{a.publish_stopped},
          int64_t{a.release_pending}, static_cast<int64_t>(a.page_digests.size())}) {
      put(v);
    }
    for (BlockId b : a.tables) put(b);
    for (const WrittenPlane& w : a.written) {
      for (uint64_t word : w.words()) put(static_cast<int64_t>(word));
    }
    for (TransferId t : a.leases) put(static_cast<int64_t>(t));
    put(-104);
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace rlt::kv
