// KVCacheManager: prefix-cache lookup, publication, trimming and reset.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kv/kv_cache_manager.h"

namespace rlt::kv {

int32_t KVCacheManager::cacheable_pages(size_t prompt_len) const {
  // The last prompt token is never cached: the cache holds K/V, while the request still needs
  // that token's final hidden state to sample, so prefill must run it.
  if (prompt_len == 0) return 0;
  return static_cast<int32_t>((prompt_len - 1) / static_cast<size_t>(block_size()));
}

Digest KVCacheManager::request_root(std::string_view cache_salt) const {
  return salted_root_digest(model_root_, cache_salt);
}

int32_t KVCacheManager::match_prefix(std::span<const TokenId> prompt, const Digest& root,
                                     int32_t max_pages, std::span<const Digest> digests,
                                     std::vector<int32_t>* hits, int32_t* exclusive_blocks) const {
  const int32_t bs = block_size();
  const int32_t limit = std::min(cacheable_pages(prompt.size()), max_pages);
  Digest parent = root;
  int32_t parent_entry = PrefixCache::kNone;
  int32_t pages = 0;
  for (; pages < limit; ++pages) {
    std::span<const TokenId> tokens = prompt.subspan(static_cast<size_t>(pages) * bs, bs);
    Digest d = digests.empty() ? page_digest(parent, tokens) : digests[pages];
    int32_t e = cache_.find(d, parent, parent_entry, tokens);
    if (e == PrefixCache::kNone) break;  // chained keys: nothing after a miss can match
    if (hits != nullptr) hits->push_back(e);
    if (exclusive_blocks != nullptr && cache_.users(e) == 0) *exclusive_blocks += planes_;
    parent = d;
    parent_entry = e;
  }
  return pages;
}

std::vector<Digest> KVCacheManager::prompt_page_digests(std::span<const TokenId> prompt,
                                                        std::string_view cache_salt) const {
  std::vector<Digest> digests;
  if (config_.enable_prefix_caching) {
    chain_page_digests(prompt, request_root(cache_salt), cacheable_pages(prompt.size()), digests);
  }
  return digests;
}

void KVCacheManager::chain_page_digests(std::span<const TokenId> prompt, const Digest& root,
                                        int32_t pages, std::vector<Digest>& out) const {
  const int32_t bs = block_size();
  out.reserve(out.size() + static_cast<size_t>(pages));
  Digest parent = root;
  for (int32_t page = 0; page < pages; ++page) {
    parent = page_digest(parent, prompt.subspan(static_cast<size_t>(page) * bs, bs));
    out.push_back(parent);
  }
}

PrefixMatch KVCacheManager::lookup_prefix(std::span<const TokenId> prompt,
                                          std::string_view cache_salt,
                                          std::span<const Digest> page_digests) const {
  PrefixMatch match;
  if (!config_.enable_prefix_caching || prompt.empty()) return match;
  std::vector<int32_t> hits;
  // Given digests must cover every cacheable page, or they are not used.
  if (page_digests.size() < static_cast<size_t>(cacheable_pages(prompt.size()))) page_digests = {};
  match.pages = match_prefix(prompt, request_root(cache_salt), std::numeric_limits<int32_t>::max(),
                             page_digests, &hits, nullptr);
  match.cached_tokens = match.pages * block_size();
  match.entries.reserve(hits.size());
  for (int32_t e : hits) match.entries.push_back({e, cache_.generation(e)});
  return match;
}

Result<int32_t> KVCacheManager::exclusive_prefix_blocks(const PrefixMatch& match) const {
  int32_t blocks = 0;
  for (const PrefixMatch::Ref& ref : match.entries) {
    if (!cache_.live(ref.entry) || cache_.generation(ref.entry) != ref.generation) {
      return failed_precondition(fmt::format(
          "prefix match is stale: entry {} was evicted; look the prompt up again", ref.entry));
    }
    if (cache_.users(ref.entry) == 0) blocks += planes_;
  }
  return blocks;
}

int32_t KVCacheManager::trim_prefix_cache(int32_t blocks) {
  int32_t freed = 0;
  while (freed < blocks) {
    int32_t got = cache_.evict_one(pool_);
    if (got == 0) break;
    freed += got;
  }
  return freed;
}

void KVCacheManager::reset_prefix_cache() {
  cache_.clear(pool_);
  // Pages written before the reset may hold K/V of the old weights: their requests never publish
  // again. Shared pages stay shared (by reference count) until their requests finish.
  for (Allocation& a : slots_) {
    if (!a.live) continue;
    a.published_pages = 0;
    a.publish_stopped = true;
  }
}

void KVCacheManager::publish_ready_pages(Allocation& a) {
  if (a.publish_stopped || a.published_pages >= a.publishable_pages()) return;
  const int32_t bs = block_size();
  int32_t written = a.capacity_tokens;
  for (const WrittenPlane& w : a.written) written = std::min(written, w.prefix());
  // Only pages whose every plane is written get published: entries must never expose unwritten
  // K/V to another request.
  const int32_t ready = std::min(written / bs, a.publishable_pages());
  claim_scratch_.resize(planes_);
  for (int32_t page = a.published_pages; page < ready; ++page) {
    const Digest& d = a.page_digests[page];
    if (cache_.contains(d)) {
      // Another request published an identical page first. Publishing our later pages under its
      // entry would let us hold a child without its parent, which is what keeps eviction exact;
      // so this request stops here (the other one publishes the same pages anyway).
      a.publish_stopped = true;
      return;
    }
    const Digest& parent_digest = page == 0 ? a.prefix_root : a.page_digests[page - 1];
    const int32_t parent =
        page == 0 ? PrefixCache::kNone : cache_.entry_of_block(a.table(0)[page - 1]);
    for (int32_t plane = 0; plane < planes_; ++plane) claim_scratch_[plane] = a.table(plane)[page];
    cache_.insert(
        d, parent_digest, parent,
        std::span<const TokenId>(a.publishable_tokens).subspan(static_cast<size_t>(page) * bs, bs),
        std::span<const BlockId>(claim_scratch_.data(), planes_), pool_);
    a.published_pages = page + 1;
  }
}

}  // namespace rlt::kv
