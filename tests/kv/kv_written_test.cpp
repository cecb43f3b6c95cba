// The written-state and finalize contract: record_written, token_written, written_prefix,
// plan_finalize, mark_finalized, mark_imported_prefix.
#include <gtest/gtest.h>

#include <limits>

#include "kv_test_util.h"

namespace rlt::kv {
namespace {

using testing::make_config;
using testing::make_manager;
using testing::request;

TEST(KvWritten, RecordedPositionsArePerPlane) {
  KVCacheManager m = make_manager(make_config(16, 4, 3));
  ASSERT_TRUE(m.allocate(request(1, 10)).ok());
  KV_ASSERT_OK(m.record_written(1, 1, 0, 3));
  EXPECT_TRUE(*m.token_written(1, 2, 1));
  EXPECT_FALSE(*m.token_written(1, 2, 0));
  EXPECT_FALSE(*m.token_written(1, 3, 1));
  EXPECT_EQ(*m.written_prefix(1, 1), 3);
  EXPECT_EQ(*m.written_prefix(1, 0), 0);
  KV_ASSERT_OK(m.record_written(1, 1, 5, 2));  // out of order: prefix stays
  EXPECT_TRUE(*m.token_written(1, 6, 1));
  EXPECT_EQ(*m.written_prefix(1, 1), 3);
  KV_ASSERT_OK(m.record_written(1, 1, 3, 2));
  EXPECT_EQ(*m.written_prefix(1, 1), 7);
  KV_ASSERT_OK(m.record_written(1, 1, 3, 0));  // empty range is fine
  KV_ASSERT_OK(m.record_written_all_depths(1, 0, 2));
  EXPECT_EQ(*m.written_prefix(1, 2), 2);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvWritten, SharedLayoutRecordsEveryDepthOnOnePlane) {
  KVCacheManager m = make_manager(make_config(16, 4, 3, KVLayout::kShared));
  ASSERT_TRUE(m.allocate(request(1, 10)).ok());
  KV_ASSERT_OK(m.record_written(1, 2, 0, 4));
  for (int32_t d = 0; d < 3; ++d) EXPECT_EQ(*m.written_prefix(1, d), 4);
}

TEST(KvWritten, ErrorsNameTheBounds) {
  KVCacheManager m = make_manager(make_config(16, 4, 3));
  ASSERT_TRUE(m.allocate(request(1, 10, {}, 4)).ok());  // 1 page backed
  Status s = m.record_written(1, 0, 2, 3);              // [2, 5) beyond 4 backed tokens
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(testing::contains(s.message(), "[2, 5)"));
  EXPECT_TRUE(testing::contains(s.message(), "4 backed tokens"));
  KV_EXPECT_CODE(m.record_written(1, 0, -1, 1), ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.record_written(1, 0, 0, -1), ErrorCode::kInvalidArgument);
  KV_EXPECT_CODE(m.record_written(1, 3, 0, 1), ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.record_written(2, 0, 0, 1), ErrorCode::kNotFound);
  KV_EXPECT_CODE(m.record_written_all_depths(1, 3, 2), ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.record_written_all_depths(2, 0, 1), ErrorCode::kNotFound);
  EXPECT_EQ(m.token_written(1, 10, 0).status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(m.token_written(1, -1, 0).status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(m.token_written(1, 0, 3).status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(m.token_written(2, 0, 0).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(m.written_prefix(2, 0).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(m.written_prefix(1, 5).status().code(), ErrorCode::kOutOfRange);
  // start + count beyond int32: refused, not wrapped (UBSan watches this in the asan preset).
  KV_EXPECT_CODE(m.record_written(1, 0, std::numeric_limits<int32_t>::max() - 1, 10),
                 ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.record_written_all_depths(1, std::numeric_limits<int32_t>::max(), 1),
                 ErrorCode::kOutOfRange);
  // Positions past the backed pages but within capacity read as unwritten.
  EXPECT_FALSE(*m.token_written(1, 9, 0));
  // The capacity bound applies even when the last page has spare slots.
  KV_ASSERT_OK(m.ensure_capacity(1, 10));  // 3 pages = 12 slots, capacity 10
  KV_EXPECT_CODE(m.record_written(1, 0, 9, 2), ErrorCode::kOutOfRange);
}

TEST(KvFinalize, EarlyExitPlansSlotCopiesIntoEveryDeeperPlane) {
  KVCacheManager m = make_manager(make_config(32, 4, 4, KVLayout::kLastExited, false, 3));
  ASSERT_TRUE(m.allocate(request(1, 12)).ok());
  // Token at position 6 ran depths 0 and 1 and exits at depth 1.
  KV_ASSERT_OK(m.record_written(1, 0, 6, 1));
  KV_ASSERT_OK(m.record_written(1, 1, 6, 1));
  std::vector<SlotCopy> plan;
  KV_ASSERT_OK(m.plan_finalize(1, 6, 1, &plan));
  ASSERT_EQ(plan.size(), 2u);
  const auto t1 = *m.block_table(1, 1);
  for (size_t i = 0; i < plan.size(); ++i) {
    const int32_t d = 2 + static_cast<int32_t>(i);
    EXPECT_EQ(plan[i].src_block, t1[1]);
    EXPECT_EQ(plan[i].src_slot, 2);
    EXPECT_EQ(plan[i].dst_block, (*m.block_table(1, d))[1]);
    EXPECT_EQ(plan[i].dst_slot, 2);
    EXPECT_EQ(plan[i].dst_plane, d);
    EXPECT_EQ(plan[i].layer_begin, 0);
    EXPECT_EQ(plan[i].layer_end, 3);
  }
  // Planning is pure: nothing is marked until mark_finalized.
  EXPECT_FALSE(*m.token_written(1, 6, 2));
  KV_ASSERT_OK(m.mark_finalized(1, 6, 1));
  EXPECT_TRUE(*m.token_written(1, 6, 2));
  EXPECT_TRUE(*m.token_written(1, 6, 3));
  EXPECT_FALSE(*m.token_written(1, 5, 3));  // only this token
  // A token exits once.
  EXPECT_EQ(m.mark_finalized(1, 6, 1).code(), ErrorCode::kFailedPrecondition);
  std::vector<SlotCopy> again;
  EXPECT_EQ(m.plan_finalize(1, 6, 0, &again).code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(again.empty());
}

TEST(KvFinalize, FullDepthTokensNeedNoCopies) {
  KVCacheManager m = make_manager(make_config(32, 4, 4));
  ASSERT_TRUE(m.allocate(request(1, 12)).ok());
  KV_ASSERT_OK(m.record_written_all_depths(1, 0, 1));
  std::vector<SlotCopy> plan;
  KV_ASSERT_OK(m.plan_finalize(1, 0, 3, &plan));
  EXPECT_TRUE(plan.empty());
  KV_ASSERT_OK(m.mark_finalized(1, 0, 3));  // nothing new at the deepest depth
}

TEST(KvFinalize, RefusesUnwrittenTokensAndBadArguments) {
  KVCacheManager m = make_manager(make_config(32, 4, 4));
  ASSERT_TRUE(m.allocate(request(1, 12, {}, 4)).ok());
  std::vector<SlotCopy> plan;
  Status s = m.plan_finalize(1, 2, 1, &plan);
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(testing::contains(s.message(), "position 2 is not written at exit depth 1"));
  KV_EXPECT_CODE(m.mark_finalized(1, 2, 1), ErrorCode::kFailedPrecondition);
  KV_EXPECT_CODE(m.plan_finalize(1, 5, 0, &plan), ErrorCode::kOutOfRange);  // not backed
  KV_EXPECT_CODE(m.plan_finalize(1, 0, 4, &plan), ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(m.plan_finalize(2, 0, 0, &plan), ErrorCode::kNotFound);
  KV_EXPECT_CODE(m.mark_finalized(2, 0, 0), ErrorCode::kNotFound);
  EXPECT_TRUE(plan.empty());
}

TEST(KvFinalize, SharedLayoutValidatesAndCopiesNothing) {
  KVCacheManager m = make_manager(make_config(32, 4, 4, KVLayout::kShared));
  ASSERT_TRUE(m.allocate(request(1, 12)).ok());
  std::vector<SlotCopy> plan;
  EXPECT_EQ(m.plan_finalize(1, 3, 1, &plan).code(), ErrorCode::kFailedPrecondition);
  KV_ASSERT_OK(m.record_written(1, 1, 3, 1));
  KV_ASSERT_OK(m.plan_finalize(1, 3, 1, &plan));
  EXPECT_TRUE(plan.empty());
  const uint64_t before = m.state_fingerprint();
  KV_ASSERT_OK(m.mark_finalized(1, 3, 1));
  EXPECT_EQ(m.state_fingerprint(), before);  // a no-op
}

TEST(KvImport, MarksEveryPlaneFromStart) {
  KVCacheManager m = make_manager(make_config(32, 4, 3));
  ASSERT_TRUE(m.allocate(request(1, 12)).ok());
  KV_ASSERT_OK(m.mark_imported_prefix(1, 9));
  for (int32_t d = 0; d < 3; ++d) EXPECT_EQ(*m.written_prefix(1, d), 9);
  // Re-import refused: the planes are no longer at `start`.
  Status again = m.mark_imported_prefix(1, 10);
  EXPECT_EQ(again.code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(testing::contains(again.message(), "9 tokens written"));
  KV_ASSERT_OK(m.mark_imported_prefix(1, 11, 9));  // continues from start = 9
  EXPECT_EQ(*m.written_prefix(1, 2), 11);
}

TEST(KvImport, RejectsBadRangesAndPendingWrites) {
  KVCacheManager m = make_manager(make_config(32, 4, 3));
  ASSERT_TRUE(m.allocate(request(1, 12, {}, 8)).ok());
  KV_EXPECT_CODE(m.mark_imported_prefix(1, 0), ErrorCode::kInvalidArgument);
  KV_EXPECT_CODE(m.mark_imported_prefix(1, 3, 3), ErrorCode::kInvalidArgument);
  KV_EXPECT_CODE(m.mark_imported_prefix(1, 9), ErrorCode::kOutOfRange);  // 8 backed
  KV_EXPECT_CODE(m.mark_imported_prefix(2, 4), ErrorCode::kNotFound);
  KV_ASSERT_OK(m.record_written(1, 2, 5, 1));  // a stray write beyond the prefix
  KV_EXPECT_CODE(m.mark_imported_prefix(1, 4), ErrorCode::kFailedPrecondition);
}

TEST(KvImport, ImportedPromptPagesArePublished) {
  KVCacheManager m = make_manager(make_config(32, 2, 3, KVLayout::kLastExited, true));
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  ASSERT_TRUE(m.allocate(request(1, 6, prompt)).ok());
  KV_ASSERT_OK(m.mark_imported_prefix(1, 5));
  EXPECT_EQ(m.num_prefix_entries(), 2);
  KV_ASSERT_OK(m.check_invariants());
}

}  // namespace
}  // namespace rlt::kv
