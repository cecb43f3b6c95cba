// Admission, growth, release and the views of KVCacheManager (no prefix cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "kv_test_util.h"

namespace rlt::kv {
namespace {

using testing::make_config;
using testing::make_manager;
using testing::request;

TEST(KvAllocation, AllocatesOneTablePerPlaneAndFreesEverything) {
  KVCacheManager m = make_manager(make_config(16, 2, 3));  // B 2, R 3
  auto adm = m.allocate(request(7, 3));                    // 3 tokens -> 2 pages x 3 planes
  ASSERT_TRUE(adm.ok()) << adm.status().to_string();
  EXPECT_EQ(adm->pages, 2);
  EXPECT_EQ(adm->new_blocks, 6);
  EXPECT_EQ(adm->cached_tokens, 0);
  EXPECT_TRUE(m.has_allocation(7));
  EXPECT_EQ(*m.allocated_blocks(7), 6);
  EXPECT_EQ(m.num_used_blocks(), 6);
  EXPECT_EQ(m.num_free_blocks(), 10);
  auto tables = m.plane_block_tables(7);
  ASSERT_TRUE(tables.ok());
  ASSERT_EQ(tables->size(), 3u);
  std::set<BlockId> distinct;
  for (auto t : *tables) {
    EXPECT_EQ(t.size(), 2u);
    distinct.insert(t.begin(), t.end());
  }
  EXPECT_EQ(distinct.size(), 6u);
  // block_table is indexed by depth; under last_exited depth d reads plane d.
  for (int32_t d = 0; d < 3; ++d) {
    auto t = m.block_table(7, d);
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(std::equal(t->begin(), t->end(), (*tables)[d].begin()));
  }
  KV_ASSERT_OK(m.check_invariants());
  EXPECT_EQ(m.free(7), ReleaseOutcome::kReleased);
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_EQ(m.num_free_blocks(), 16);
  EXPECT_FALSE(m.has_allocation(7));
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvAllocation, OuterPlanesFollowTheLoopPlanesAndNeverTakeAnExitCopy) {
  for (KVLayout layout : {KVLayout::kLastExited, KVLayout::kShared}) {
    KVCacheConfig c = make_config(32, 2, 3, layout);  // B 2, R 3
    c.outer_planes = 2;
    KVCacheManager m = make_manager(c);
    const int32_t loop_planes = layout == KVLayout::kLastExited ? 3 : 1;
    EXPECT_EQ(m.num_planes(), loop_planes + 2);
    EXPECT_EQ(*m.required_blocks(3, 1), 2 * (loop_planes + 2));  // 3 tokens: 2 pages
    ASSERT_TRUE(m.allocate(request(1, 3)).ok());
    EXPECT_EQ(*m.allocated_blocks(1), 2 * (loop_planes + 2));
    EXPECT_EQ(*m.plane_of_depth(3), loop_planes);  // depth R + i: outer plane i
    EXPECT_EQ(*m.plane_of_depth(4), loop_planes + 1);
    EXPECT_EQ(m.plane_of_depth(5).status().code(), ErrorCode::kOutOfRange);
    auto tables = *m.plane_block_tables(1);
    EXPECT_TRUE(std::ranges::equal(*m.block_table(1, 4), tables[static_cast<size_t>(loop_planes + 1)]));
    KV_ASSERT_OK(m.record_written_all_depths(1, 0, 2));
    EXPECT_TRUE(*m.token_written(1, 1, 4));
    // The token at 2 exits after loop 1 (depth 0): its copies go to the deeper loop planes only.
    KV_ASSERT_OK(m.record_written(1, 0, 2, 1));
    KV_ASSERT_OK(m.record_written(1, 3, 2, 1));
    std::vector<SlotCopy> copies;
    KV_ASSERT_OK(m.plan_finalize(1, 2, 0, &copies));
    EXPECT_EQ(copies.size(), layout == KVLayout::kLastExited ? 2u : 0u);
    for (const SlotCopy& copy : copies) EXPECT_LT(copy.dst_plane, 3);
    EXPECT_EQ(m.plan_finalize(1, 2, 3, &copies).code(), ErrorCode::kInvalidArgument);
    KV_ASSERT_OK(m.mark_finalized(1, 2, 0));
    EXPECT_FALSE(*m.token_written(1, 2, 4));
    KV_ASSERT_OK(m.check_invariants());
  }
}

TEST(KvAllocation, FirstBlocksComeFromTheBottomOfThePool) {
  KVCacheManager m = make_manager(make_config(8, 4, 2));
  ASSERT_TRUE(m.allocate(request(1, 4)).ok());
  EXPECT_EQ((*m.block_table(1, 0))[0], 0);
  EXPECT_EQ((*m.block_table(1, 1))[0], 1);
}

TEST(KvAllocation, SharedLayoutHoldsOnePlaneSeenAtEveryDepth) {
  KVCacheManager m = make_manager(make_config(16, 4, 4, KVLayout::kShared));
  ASSERT_TRUE(m.allocate(request(1, 10)).ok());
  EXPECT_EQ(m.num_planes(), 1);
  EXPECT_EQ(*m.allocated_blocks(1), 3);  // ceil(10 / 4)
  auto t0 = *m.block_table(1, 0);
  for (int32_t d = 1; d < 4; ++d) {
    auto t = *m.block_table(1, d);
    EXPECT_TRUE(std::equal(t.begin(), t.end(), t0.begin(), t0.end()));
  }
  EXPECT_EQ(m.plane_block_tables(1)->size(), 1u);
  EXPECT_EQ(*m.plane_of_depth(3), 0);
}

TEST(KvAllocation, ErrorsForBadInput) {
  KVCacheManager m = make_manager(make_config(16, 2, 3));
  ASSERT_TRUE(m.allocate(request(1, 2)).ok());
  EXPECT_EQ(m.allocate(request(1, 2)).status().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(m.allocate(request(2, 0)).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(m.allocate(request(2, 4, {}, 5)).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(m.allocate(request(2, 4, {}, -1)).status().code(), ErrorCode::kInvalidArgument);
  AllocateRequest neg = request(2, 4);
  neg.reserved_blocks = -1;
  EXPECT_EQ(m.allocate(neg).status().code(), ErrorCode::kInvalidArgument);
  std::vector<TokenId> long_prompt = testing::iota_tokens(5);
  EXPECT_EQ(m.allocate(request(2, 4, long_prompt)).status().code(), ErrorCode::kInvalidArgument);
  // Views of unknown ids.
  EXPECT_EQ(m.allocated_blocks(9).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(testing::contains(m.allocated_blocks(9).status().message(),
                                "request 9 has no KV allocation"));
  EXPECT_EQ(m.block_table(9, 0).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(m.plane_block_tables(9).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(m.allocation_info(9).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(m.block_table(1, 3).status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(m.block_table(1, -1).status().code(), ErrorCode::kOutOfRange);
  EXPECT_FALSE(m.has_transfer_lease(9));
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvAllocation, NeverFittingRequestIsInvalidNotExhausted) {
  KVCacheManager m = make_manager(make_config(12, 4, 4));
  // 13 tokens -> 4 pages x 4 planes = 16 > 12: rejected outright, with the numbers.
  auto r = m.can_allocate(request(1, 13));
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(testing::contains(r.status().message(), "need 16 blocks"));
  EXPECT_TRUE(testing::contains(r.status().message(), "the pool has 12"));
  EXPECT_EQ(m.allocate(request(1, 13)).status().code(), ErrorCode::kInvalidArgument);
  // Huge capacities are priced without overflow.
  EXPECT_EQ(m.can_allocate(request(1, std::numeric_limits<int32_t>::max())).status().code(),
            ErrorCode::kInvalidArgument);
  // Exactly the pool fits.
  EXPECT_TRUE(m.allocate(request(1, 12)).ok());
  EXPECT_EQ(m.num_available_blocks(), 0);
}

TEST(KvAllocation, RefusalCarriesTheNumbersAndChangesNothing) {
  KVCacheManager m = make_manager(make_config(16, 4, 4));
  ASSERT_TRUE(m.allocate(request(1, 8)).ok());  // 8 blocks used, 8 free
  const uint64_t before = m.state_fingerprint();
  auto plan = m.can_allocate(request(2, 12));  // needs 12
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->fits);
  EXPECT_EQ(plan->cost_blocks, 12);
  EXPECT_EQ(plan->free_blocks, 8);
  auto r = m.allocate(request(2, 12));
  EXPECT_EQ(r.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(testing::contains(r.status().message(), "need 12 blocks"));
  EXPECT_TRUE(testing::contains(r.status().message(), "8 free, 0 evictable cached"));
  EXPECT_EQ(m.state_fingerprint(), before);
  EXPECT_FALSE(m.has_allocation(2));
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvAllocation, CanAllocateIsPureAndAgreesWithAllocate) {
  KVCacheManager m = make_manager(make_config(16, 4, 2));
  const uint64_t before = m.state_fingerprint();
  auto plan = m.can_allocate(request(3, 9, {}, 5));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(m.state_fingerprint(), before);
  EXPECT_TRUE(plan->fits);
  EXPECT_EQ(plan->pages, 2);  // ceil(5 / 4)
  EXPECT_EQ(plan->new_blocks, 4);
  auto adm = m.allocate(request(3, 9, {}, 5));
  ASSERT_TRUE(adm.ok());
  EXPECT_EQ(adm->pages, plan->pages);
  EXPECT_EQ(adm->new_blocks, plan->new_blocks);
}

TEST(KvAllocation, WatermarkAppliesOnlyWhenOthersAreLive) {
  KVCacheConfig c = make_config(16, 4, 1);
  c.watermark_ratio = 0.25;  // 4 blocks
  KVCacheManager m = make_manager(c);
  // Alone, a request may take the whole pool.
  auto alone = m.can_allocate(request(1, 64));
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(alone->fits);
  EXPECT_EQ(alone->watermark_blocks, 0);
  ASSERT_TRUE(m.allocate(request(1, 48, {}, 32)).ok());  // 8 blocks, 8 free
  auto plan = m.can_allocate(request(2, 20));            // 5 blocks + 4 watermark > 8
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->watermark_blocks, 4);
  EXPECT_FALSE(plan->fits);
  auto r = m.allocate(request(2, 20));
  EXPECT_EQ(r.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(testing::contains(r.status().message(), "4 watermark"));
  EXPECT_TRUE(m.allocate(request(2, 16)).ok());  // 4 + 4 = 8 fits
  // Growth ignores the watermark: it is what the watermark is kept for.
  KV_ASSERT_OK(m.ensure_capacity(1, 48));  // +4 blocks, uses the headroom
  EXPECT_EQ(m.num_available_blocks(), 0);
}

TEST(KvAllocation, ReservedBlocksAreHeldBack) {
  KVCacheManager m = make_manager(make_config(16, 4, 1));
  AllocateRequest r = request(1, 16);  // 4 blocks
  r.reserved_blocks = 12;
  EXPECT_TRUE(m.can_allocate(r)->fits);
  r.reserved_blocks = 13;
  EXPECT_FALSE(m.can_allocate(r)->fits);
  auto refused = m.allocate(r);
  EXPECT_TRUE(testing::contains(refused.status().message(), "13 reserved"));
}

TEST(KvAllocation, IncrementalGrowthClaimsAllPlanesTogether) {
  KVCacheManager m = make_manager(make_config(20, 2, 3));
  ASSERT_TRUE(m.allocate(request(1, 9, {}, 2)).ok());  // 1 page x 3
  EXPECT_EQ(*m.allocated_blocks(1), 3);
  EXPECT_EQ(*m.growth_blocks(1, 2), 0);
  EXPECT_EQ(*m.growth_blocks(1, 6), 6);
  KV_ASSERT_OK(m.ensure_capacity(1, 2));  // already backed
  KV_ASSERT_OK(m.ensure_capacity(1, 6));  // 3 pages
  EXPECT_EQ(*m.allocated_blocks(1), 9);
  for (int32_t d = 0; d < 3; ++d) EXPECT_EQ(m.block_table(1, d)->size(), 3u);
  KV_ASSERT_OK(m.check_invariants());
  // Capacity bounds.
  KV_EXPECT_CODE(m.ensure_capacity(1, 10), ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.ensure_capacity(1, 0), ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.ensure_capacity(2, 1), ErrorCode::kNotFound);
}

TEST(KvAllocation, FailedGrowthIsAtomicAndReportsNumbers) {
  KVCacheManager m = make_manager(make_config(12, 2, 3));
  ASSERT_TRUE(m.allocate(request(1, 8, {}, 2)).ok());  // 3 blocks
  ASSERT_TRUE(m.allocate(request(2, 6)).ok());         // 9 blocks, pool full
  const uint64_t before = m.state_fingerprint();
  Status s = m.ensure_capacity(1, 4);  // +3 blocks, 0 free
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(testing::contains(s.message(), "needs 3 blocks, 0 free, 0 evictable cached"));
  EXPECT_EQ(m.state_fingerprint(), before);
  EXPECT_EQ(*m.allocated_blocks(1), 3);
}

TEST(KvAllocation, FreeIsIdempotentAndUnknownIdsAreIgnored) {
  KVCacheManager m = make_manager(make_config(8, 2, 2));
  EXPECT_EQ(m.free(42), ReleaseOutcome::kNotAllocated);
  ASSERT_TRUE(m.allocate(request(1, 4)).ok());
  EXPECT_EQ(m.free(1), ReleaseOutcome::kReleased);
  EXPECT_EQ(m.free(1), ReleaseOutcome::kNotAllocated);
  EXPECT_EQ(m.num_free_blocks(), 8);
  // The id is reusable at once.
  EXPECT_TRUE(m.allocate(request(1, 4)).ok());
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvAllocation, AllocateThenFreeRestoresTheFreeListExactly) {
  KVCacheManager m = make_manager(make_config(32, 2, 3));
  ASSERT_TRUE(m.allocate(request(1, 5)).ok());
  const uint64_t before = m.state_fingerprint();
  ASSERT_TRUE(m.allocate(request(2, 7)).ok());
  EXPECT_NE(m.state_fingerprint(), before);
  m.free(2);
  EXPECT_EQ(m.state_fingerprint(), before);
}

TEST(KvAllocation, AllocationInfoReportsTheFacts) {
  KVCacheManager m = make_manager(make_config(16, 4, 2));
  ASSERT_TRUE(m.allocate(request(5, 10, {}, 4)).ok());
  auto info = m.allocation_info(5);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->capacity_tokens, 10);
  EXPECT_EQ(info->pages, 1);
  EXPECT_EQ(info->planes, 2);
  EXPECT_EQ(info->cached_tokens, 0);
  EXPECT_EQ(info->num_leases, 0);
  EXPECT_FALSE(info->release_pending);
  EXPECT_EQ(m.num_allocations(), 1);
}

TEST(KvAllocation, ManagerRequiredBlocksUsesItsLayout) {
  KVCacheManager last = make_manager(make_config(400, 16, 4));
  KVCacheManager shared = make_manager(make_config(400, 16, 4, KVLayout::kShared));
  EXPECT_EQ(*last.required_blocks(1024, 128), 288);
  EXPECT_EQ(*shared.required_blocks(1024, 128), 72);
  EXPECT_EQ(last.required_blocks(0, 1).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace rlt::kv
