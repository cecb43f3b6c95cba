// Prefix cache: keys, publication, hits, pricing, LRU leaf-first eviction and the upstream
// regressions (F6 refuse-before-evict, root-first eviction orphaning descendants).
#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace rlt::kv {
namespace {

using testing::make_config;
using testing::make_manager;
using testing::request;

// B 2, R 3 planes, prefix caching on.
KVCacheManager cache_manager(int32_t blocks = 30) {
  return make_manager(make_config(blocks, 2, 3, KVLayout::kLastExited, /*prefix=*/true));
}

// Admits `prompt` with `extra` decode tokens of capacity and prefills it at every depth.
Admission admit_and_prefill(KVCacheManager& m, RequestId id, const std::vector<TokenId>& prompt,
                            int32_t extra = 1, std::string_view salt = {}) {
  AllocateRequest r = request(id, static_cast<int32_t>(prompt.size()) + extra, prompt);
  r.cache_salt = salt;
  auto adm = m.allocate(r);
  EXPECT_TRUE(adm.ok()) << adm.status().to_string();
  if (!adm.ok()) return {};
  const int32_t n = static_cast<int32_t>(prompt.size());
  Status s = m.record_written_all_depths(id, adm->cached_tokens, n - adm->cached_tokens);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().to_string();
  return *adm;
}

TEST(KvPrefixCache, SecondRequestReusesWrittenFullPages) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};  // 2 cacheable pages before the last token
  admit_and_prefill(m, 1, prompt);
  EXPECT_EQ(m.num_prefix_entries(), 2);
  EXPECT_EQ(m.num_cached_blocks(), 6);
  EXPECT_EQ(m.num_evictable_blocks(), 0);  // still held by request 1

  PrefixMatch match = m.lookup_prefix(prompt);
  EXPECT_EQ(match.pages, 2);
  EXPECT_EQ(match.cached_tokens, 4);
  Admission adm = admit_and_prefill(m, 2, prompt);
  EXPECT_EQ(adm.cached_tokens, 4);
  EXPECT_EQ(adm.new_blocks, 3);  // only the page holding token 5 (+ 1 decode slot)
  for (int32_t d = 0; d < 3; ++d) {
    auto a = *m.block_table(1, d);
    auto b = *m.block_table(2, d);
    EXPECT_EQ(a[0], b[0]);
    EXPECT_EQ(a[1], b[1]);
    EXPECT_NE(a[2], b[2]);
    EXPECT_EQ(*m.written_prefix(2, d), 5);
  }
  EXPECT_EQ(m.allocation_info(2)->cached_tokens, 4);
  const PrefixCacheStats& s = m.prefix_stats();
  EXPECT_EQ(s.queries, 2u);
  EXPECT_EQ(s.query_pages, 4u);
  EXPECT_EQ(s.hit_pages, 2u);
  EXPECT_EQ(s.hit_tokens, 4u);
  EXPECT_EQ(s.miss_pages(), 2u);
  EXPECT_EQ(s.published_entries, 2u);
}

TEST(KvPrefixCache, RefcountsCountOwnersPlusEntry) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);
  admit_and_prefill(m, 2, prompt);
  m.free(1);
  KV_ASSERT_OK(m.check_invariants());
  EXPECT_EQ(m.num_evictable_blocks(), 0);  // request 2 still holds both pages
  m.free(2);
  KV_ASSERT_OK(m.check_invariants());
  // Only the cache holds them now: counted available, not used.
  EXPECT_EQ(m.num_evictable_blocks(), 6);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_available_blocks(), 30);
  EXPECT_EQ(m.num_free_blocks(), 24);
}

TEST(KvPrefixCache, LastPromptTokenIsNeverCached) {
  KVCacheManager m = cache_manager();
  // Exactly k * B = 4 tokens: at most k - 1 = 1 page.
  std::vector<TokenId> prompt = {1, 2, 3, 4};
  admit_and_prefill(m, 1, prompt);
  EXPECT_EQ(m.num_prefix_entries(), 1);
  EXPECT_EQ(m.lookup_prefix(prompt).pages, 1);
  // A 1-token prompt caches nothing.
  std::vector<TokenId> one = {9};
  admit_and_prefill(m, 2, one);
  EXPECT_EQ(m.num_prefix_entries(), 1);
  EXPECT_EQ(m.lookup_prefix(one).pages, 0);
}

TEST(KvPrefixCache, LookupStopsAtTheFirstMissBecauseKeysChain) {
  KVCacheManager m = cache_manager();
  admit_and_prefill(m, 1, {1, 2, 3, 4, 5});
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{1, 2, 9, 4, 5}).pages, 1);
  // Page 2 content matches but its parent does not: no hit.
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{7, 7, 3, 4, 5}).pages, 0);
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{}).pages, 0);
}

TEST(KvPrefixCache, LookupIsPure) {
  KVCacheManager m = cache_manager();
  admit_and_prefill(m, 1, {1, 2, 3, 4, 5});
  m.free(1);
  const uint64_t before = m.state_fingerprint();
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{1, 2, 3, 4, 5}).pages, 2);
  EXPECT_TRUE(m.can_allocate(request(2, 6, std::vector<TokenId>{1, 2, 3, 4, 5})).ok());
  EXPECT_EQ(m.state_fingerprint(), before);
}

TEST(KvPrefixCache, CacheSaltIsolatesTenants) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt, 1, "tenant-a");
  EXPECT_EQ(m.lookup_prefix(prompt, "tenant-a").pages, 2);
  EXPECT_EQ(m.lookup_prefix(prompt, "tenant-b").pages, 0);
  EXPECT_EQ(m.lookup_prefix(prompt).pages, 0);
}

// A caller that hashes a prompt once and passes the keys back gets exactly the admissions,
// hits and publications of a caller that lets the manager hash every time.
TEST(KvPrefixCache, GivenPageDigestsActAsComputedOnes) {
  KVCacheManager hashing = cache_manager(200), given = cache_manager(200);
  EXPECT_TRUE(make_manager(make_config(30, 2, 3, KVLayout::kLastExited, /*prefix=*/false))
                  .prompt_page_digests(std::vector<TokenId>{1, 2, 3, 4, 5})
                  .empty());
  const std::vector<std::vector<TokenId>> prompts = {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 9, 9, 9},
                                                     {1, 2, 3, 4, 5}, {7, 7},
                                                     {1, 2, 8, 8, 8}, {1, 2, 3, 4, 9, 9, 9, 1}};
  RequestId id = 1;
  for (const auto& prompt : prompts) {
    SCOPED_TRACE(::testing::Message() << "request " << id);
    const std::vector<Digest> keys = given.prompt_page_digests(prompt, "salt");
    EXPECT_EQ(keys.size(), (prompt.size() - 1) / 2);
    EXPECT_EQ(given.lookup_prefix(prompt, "salt", keys).pages,
              hashing.lookup_prefix(prompt, "salt").pages);
    AllocateRequest a = request(id, static_cast<int32_t>(prompt.size()) + 2, prompt);
    a.cache_salt = "salt";
    AllocateRequest b = a;
    b.page_digests = keys;
    auto ha = hashing.allocate(a);
    auto gb = given.allocate(b);
    ASSERT_TRUE(ha.ok() && gb.ok());
    EXPECT_EQ(ha->cached_tokens, gb->cached_tokens);
    EXPECT_EQ(ha->new_blocks, gb->new_blocks);
    const auto n = static_cast<int32_t>(prompt.size());
    ASSERT_TRUE(
        hashing.record_written_all_depths(id, ha->cached_tokens, n - ha->cached_tokens).ok());
    ASSERT_TRUE(given.record_written_all_depths(id, gb->cached_tokens, n - gb->cached_tokens).ok());
    EXPECT_EQ(hashing.num_prefix_entries(), given.num_prefix_entries());
    ++id;
  }
  EXPECT_GT(given.prefix_stats().hit_pages, 0u);
  EXPECT_EQ(given.prefix_stats().hit_pages, hashing.prefix_stats().hit_pages);
}

TEST(KvPrefixCache, PagesArePublishedOnlyOnceWrittenInEveryPlane) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  ASSERT_TRUE(m.allocate(request(1, 6, prompt)).ok());
  KV_ASSERT_OK(m.record_written(1, 0, 0, 5));  // depth 0 only
  EXPECT_EQ(m.num_prefix_entries(), 0);
  KV_ASSERT_OK(m.record_written(1, 1, 0, 5));
  KV_ASSERT_OK(m.record_written(1, 2, 2, 3));  // out of order: page 0 of plane 2 missing
  EXPECT_EQ(m.num_prefix_entries(), 0);
  KV_ASSERT_OK(m.record_written(1, 2, 0, 1));  // still not the whole page
  EXPECT_EQ(m.num_prefix_entries(), 0);
  KV_ASSERT_OK(m.record_written(1, 2, 1, 1));
  EXPECT_EQ(m.num_prefix_entries(), 2);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, DisabledCacheNeverPublishesOrHits) {
  KVCacheManager m = make_manager(make_config(30, 2, 3));
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);
  EXPECT_EQ(m.num_prefix_entries(), 0);
  EXPECT_EQ(m.lookup_prefix(prompt).pages, 0);
  EXPECT_EQ(admit_and_prefill(m, 2, prompt).cached_tokens, 0);
  EXPECT_EQ(m.prefix_stats().queries, 0u);
}

TEST(KvPrefixCache, ExclusivePrefixBlocksWorkedExample) {
  // Upstream: 2 pages x 3 planes -> 6 after the owner freed, 0 while shared, 3 when a later
  // request holds only page 1.
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);
  PrefixMatch match = m.lookup_prefix(prompt);
  EXPECT_EQ(*m.exclusive_prefix_blocks(match), 0);
  m.free(1);
  EXPECT_EQ(*m.exclusive_prefix_blocks(match), 6);
  admit_and_prefill(m, 2, {1, 2, 8, 8, 8});  // hits page 1 only and holds it
  EXPECT_EQ(*m.exclusive_prefix_blocks(match), 3);
}

TEST(KvPrefixCache, AdmissionPaysForCachedOnlyPrefixBlocks) {
  // 8 new + 4 cached-only -> cost 12, not 8 (B 4, R 1 for round numbers).
  KVCacheManager m = make_manager(make_config(16, 4, 1, KVLayout::kLastExited, true));
  std::vector<TokenId> prompt = testing::iota_tokens(17);  // 4 cacheable pages
  ASSERT_TRUE(m.allocate(request(1, 17, prompt)).ok());
  KV_ASSERT_OK(m.record_written_all_depths(1, 0, 17));
  m.free(1);
  ASSERT_EQ(m.num_evictable_blocks(), 4);
  std::vector<TokenId> longer = testing::iota_tokens(48);
  auto plan = m.can_allocate(request(2, 48, longer));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->cached_pages, 4);
  EXPECT_EQ(plan->new_blocks, 8);
  EXPECT_EQ(plan->exclusive_prefix_blocks, 4);
  EXPECT_EQ(plan->cost_blocks, 12);
  EXPECT_TRUE(plan->fits);  // 12 new + 4 cached-only = all 16
  ASSERT_TRUE(m.allocate(request(2, 48, longer)).ok());
  EXPECT_EQ(m.num_available_blocks(), 4);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, F6RefusedClaimLeavesPrefixEntriesInPlace) {
  // Regression for upstream F6: before the fix eviction ran first, so a claim that then failed
  // had already discarded cache entries for nothing.
  KVCacheManager m = cache_manager(12);
  admit_and_prefill(m, 1, {1, 2, 3, 4, 5});  // 3 pages x 3 = 9 blocks, 2 pages published
  m.free(1);
  ASSERT_EQ(m.num_prefix_entries(), 2);
  ASSERT_EQ(m.num_evictable_blocks(), 6);
  ASSERT_TRUE(m.allocate(request(2, 4)).ok());  // 6 blocks: the free list is now empty
  ASSERT_EQ(m.num_free_blocks(), 0);
  const uint64_t before = m.state_fingerprint();
  auto r = m.allocate(request(3, 6));  // needs 9, only 6 could be freed
  EXPECT_EQ(r.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(testing::contains(r.status().message(), "need 9 blocks"));
  EXPECT_TRUE(testing::contains(r.status().message(), "0 free, 6 evictable cached"));
  EXPECT_EQ(m.state_fingerprint(), before);  // entries, LRU order, counters untouched
  EXPECT_EQ(m.num_prefix_entries(), 2);
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{1, 2, 3, 4, 5}).pages, 2);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, F6RefusedGrowthLeavesPrefixEntriesInPlace) {
  KVCacheManager m = cache_manager(12);
  admit_and_prefill(m, 1, {1, 2, 3, 4, 5});
  m.free(1);                                           // 6 free, 6 evictable
  ASSERT_TRUE(m.allocate(request(2, 8, {}, 2)).ok());  // 3 blocks
  ASSERT_TRUE(m.allocate(request(3, 2)).ok());         // 3 blocks: free list empty
  const uint64_t before = m.state_fingerprint();
  Status g = m.ensure_capacity(2, 8);  // +3 pages x 3 = 9 > 6
  EXPECT_EQ(g.code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(testing::contains(g.message(), "needs 9 blocks, 0 free, 6 evictable cached"));
  EXPECT_EQ(m.state_fingerprint(), before);
  // Growth that fits evicts only what it needs.
  KV_ASSERT_OK(m.ensure_capacity(2, 4));  // +3 blocks: one entry
  EXPECT_EQ(m.num_prefix_entries(), 1);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, EvictionTakesTheLeafNotTheRoot) {
  // Regression for the upstream root-first flaw: publication and lookup go root to leaf, so an
  // LRU over entries evicted the root first, leaving descendants indexed but unreachable.
  KVCacheManager m = cache_manager(12);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5, 6, 7};  // 3 cacheable pages
  admit_and_prefill(m, 1, prompt, 1);                   // 4 pages x 3 = 12 blocks
  m.free(1);
  ASSERT_EQ(m.num_prefix_entries(), 3);
  ASSERT_EQ(m.num_free_blocks(), 3);
  // Needs 6 blocks: exactly one entry (3 blocks) must go.
  ASSERT_TRUE(m.allocate(request(2, 4)).ok());
  EXPECT_EQ(m.num_prefix_entries(), 2);
  EXPECT_EQ(m.prefix_stats().evicted_entries, 1u);
  KV_ASSERT_OK(m.check_invariants());  // includes "every entry reachable from its root"
  // The surviving entries are the root path: the prompt still hits 2 pages.
  EXPECT_EQ(m.lookup_prefix(prompt).pages, 2);
}

TEST(KvPrefixCache, EvictionIsLeastRecentlyReleasedFirst) {
  KVCacheManager m = cache_manager(15);
  admit_and_prefill(m, 1, {1, 2, 3}, 1);  // 2 pages, 1 entry
  admit_and_prefill(m, 2, {5, 6, 7}, 1);  // 2 pages, 1 entry
  m.free(2);                              // released first: older
  m.free(1);
  ASSERT_EQ(m.num_prefix_entries(), 2);
  ASSERT_EQ(m.num_free_blocks(), 9);
  ASSERT_TRUE(m.allocate(request(3, 8)).ok());  // 12 blocks: evicts one entry
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{5, 6, 7}).pages, 0);
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{1, 2, 3}).pages, 1);
}

TEST(KvPrefixCache, EntriesInUseAreNeverEvictedForNoGain) {
  KVCacheManager m = cache_manager(18);
  admit_and_prefill(m, 1, {1, 2, 3, 4, 5}, 1);  // 9 blocks, 2 entries held by request 1
  admit_and_prefill(m, 2, {1, 2, 6, 6, 6}, 1);  // hits page 1, publishes its own page 2
  // Request 2 holds (1,2) [shared] and (6,6) [its own]; request 1 holds (1,2) and (3,4).
  m.free(1);  // (3,4) becomes unused; (1,2) is still used by request 2
  KV_ASSERT_OK(m.check_invariants());
  EXPECT_EQ(m.num_evictable_blocks(), 3);
  const int32_t available = m.num_available_blocks();
  // Ask for more than can be freed: refused, nothing evicted (no entry in use is touched).
  const uint64_t before = m.state_fingerprint();
  EXPECT_EQ(m.allocate(request(3, 2 * (available / 3 + 1))).status().code(),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(m.state_fingerprint(), before);
  // Ask for exactly what is available: only the unused leaf goes.
  ASSERT_TRUE(m.allocate(request(3, 2 * (available / 3))).ok());
  EXPECT_EQ(m.num_prefix_entries(), 2);
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{1, 2, 6, 6, 6}).pages, 2);
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{1, 2, 3, 4, 5}).pages, 1);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, AdmissionNeverEvictsItsOwnHit) {
  // The hit is referenced before fresh blocks are claimed: even when the hit's leaf is the least
  // recently released entry, eviction must pass it over.
  KVCacheManager m = cache_manager(15);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);     // 9 blocks, entries (1,2) -> (3,4)
  admit_and_prefill(m, 4, {7, 7, 7});  // 6 blocks, entry (7,7): pool full
  m.free(1);                           // released first: its leaf heads the LRU list
  m.free(4);
  ASSERT_EQ(m.num_free_blocks(), 6);
  ASSERT_EQ(m.num_evictable_blocks(), 9);
  // Hit 2 pages + 3 new pages (9 blocks) > 6 free: one entry must go, and it must be (7,7).
  auto adm = m.allocate(request(3, 10, prompt));
  ASSERT_TRUE(adm.ok()) << adm.status().to_string();
  EXPECT_EQ(adm->cached_tokens, 4);
  KV_ASSERT_OK(m.check_invariants());
  EXPECT_EQ(m.num_prefix_entries(), 2);
  EXPECT_EQ(m.lookup_prefix(std::vector<TokenId>{7, 7, 7}).pages, 0);
  EXPECT_EQ(m.lookup_prefix(prompt).pages, 2);
}

TEST(KvPrefixCache, IdenticalConcurrentPromptsPublishOnce) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  // Both admitted before either wrote anything: both miss.
  ASSERT_TRUE(m.allocate(request(1, 6, prompt)).ok());
  ASSERT_TRUE(m.allocate(request(2, 6, prompt)).ok());
  KV_ASSERT_OK(m.record_written_all_depths(1, 0, 5));
  KV_ASSERT_OK(m.record_written_all_depths(2, 0, 5));
  EXPECT_EQ(m.num_prefix_entries(), 2);
  EXPECT_EQ(m.allocation_info(1)->published_pages, 2);
  EXPECT_EQ(m.allocation_info(2)->published_pages, 0);
  KV_ASSERT_OK(m.check_invariants());
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_evictable_blocks(), 6);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, SharedPagesAreReadOnly) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);
  ASSERT_TRUE(m.allocate(request(2, 6, prompt)).ok());
  Status s = m.record_written(2, 0, 3, 2);  // position 3 lies on a cached page
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(testing::contains(s.message(), "shared through the prefix cache"));
  // The publisher may not rewrite its published pages either.
  EXPECT_EQ(m.record_written(1, 1, 0, 1).code(), ErrorCode::kFailedPrecondition);
  KV_ASSERT_OK(m.record_written(2, 0, 4, 1));
}

TEST(KvPrefixCache, StaleMatchIsDetected) {
  KVCacheManager m = cache_manager(12);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);
  m.free(1);
  PrefixMatch match = m.lookup_prefix(prompt);
  ASSERT_EQ(match.pages, 2);
  EXPECT_EQ(m.trim_prefix_cache(100), 6);
  auto r = m.exclusive_prefix_blocks(match);
  EXPECT_EQ(r.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(testing::contains(r.status().message(), "stale"));
}

TEST(KvPrefixCache, TrimEvictsLeafFirstAndReportsBlocks) {
  KVCacheManager m = cache_manager(12);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5, 6, 7};
  admit_and_prefill(m, 1, prompt);
  m.free(1);
  EXPECT_EQ(m.trim_prefix_cache(1), 3);  // whole entries only
  EXPECT_EQ(m.lookup_prefix(prompt).pages, 2);
  EXPECT_EQ(m.trim_prefix_cache(0), 0);
  EXPECT_EQ(m.trim_prefix_cache(100), 6);
  EXPECT_EQ(m.num_prefix_entries(), 0);
  EXPECT_EQ(m.prefix_stats().evicted_entries, 3u);
  EXPECT_EQ(m.prefix_stats().evicted_blocks, 9u);
  EXPECT_EQ(m.num_free_blocks(), 12);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvPrefixCache, ResetDropsEntriesAndStopsRepublication) {
  KVCacheManager m = cache_manager();
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  admit_and_prefill(m, 1, prompt);
  admit_and_prefill(m, 2, prompt);
  admit_and_prefill(m, 3, {7, 7, 7, 7, 7});
  m.free(3);
  m.reset_prefix_cache();
  KV_ASSERT_OK(m.check_invariants());
  EXPECT_EQ(m.num_prefix_entries(), 0);
  EXPECT_EQ(m.num_evictable_blocks(), 0);
  // Requests 1 and 2 still share their pages by reference count.
  EXPECT_EQ((*m.block_table(1, 0))[0], (*m.block_table(2, 0))[0]);
  // Live requests never publish again (their K/V may predate new weights).
  ASSERT_TRUE(m.allocate(request(4, 6, prompt)).ok());
  EXPECT_EQ(m.allocation_info(4)->cached_tokens, 0);
  KV_ASSERT_OK(m.record_written_all_depths(4, 0, 5));
  EXPECT_EQ(m.num_prefix_entries(), 2);  // the new request publishes
  m.free(1);
  m.free(2);
  m.free(4);
  KV_ASSERT_OK(m.check_invariants());
  EXPECT_EQ(m.num_used_blocks(), 0);
}

TEST(KvPrefixCache, AllocationAfterEvictionStillReturnsEveryBlock) {
  KVCacheManager m = cache_manager(12);
  admit_and_prefill(m, 1, {1, 2, 3, 4, 5, 6, 7});
  m.free(1);
  ASSERT_TRUE(m.allocate(request(2, 8)).ok());  // evicts everything
  EXPECT_EQ(m.num_prefix_entries(), 0);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 12);
  KV_ASSERT_OK(m.check_invariants());
}

}  // namespace
}  // namespace rlt::kv
