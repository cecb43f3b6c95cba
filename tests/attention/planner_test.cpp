#include "attention/metadata_planner.h"

#include <gtest/gtest.h>

#include <map>

namespace rlt::attention {
namespace {

// Tables per (request, depth).
struct Tables {
  std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> t;
  TableSource source() {
    return [this](uint64_t r, int32_t d) { return std::span<const int32_t>(t.at({r, d})); };
  }
};

TEST(MetadataPlanner, WorkedPackedExample) {
  // Positions [2, 3, 1], keys [a0, a0, b1], page 2 -> tables [[4,7],[2,-1]], lengths [4,2],
  // cu [0,2,3], max_q 2.
  Tables tables;
  tables.t[{1, 0}] = {4, 7};
  tables.t[{2, 1}] = {2};
  const std::vector<PlannedRow> rows = {{1, 0, 2}, {1, 0, 3}, {2, 1, 1}};
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(rows, tables.source(), {2, true, -1}, plan).ok());
  EXPECT_EQ(plan.block_tables[0], (std::vector<int32_t>{4, 7, 2, -1}));
  EXPECT_EQ(plan.context_lengths, (std::vector<int32_t>{4, 2}));
  EXPECT_EQ(plan.cu_seqlens_q, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(plan.max_seqlen_q, 2);
  EXPECT_EQ(plan.table_width, 2);
  AttentionParams p;
  plan.bind(p);
  EXPECT_EQ(p.num_seqs, 2);
  EXPECT_EQ(p.cu_seqlens_q, plan.cu_seqlens_q.data());
}

TEST(MetadataPlanner, MixedDepthDecodeRowsReadTheirOwnPlanes) {
  Tables tables;
  tables.t[{7, 0}] = {10, 11, 12};
  tables.t[{7, 2}] = {20, 21, 22};
  tables.t[{8, 1}] = {30};
  const std::vector<PlannedRow> rows = {{7, 2, 8}, {8, 1, 0}, {7, 0, 5}};
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(rows, tables.source(), {4, false, 0}, plan).ok());
  EXPECT_EQ(plan.table_width, 3);
  EXPECT_EQ(plan.block_tables[0], (std::vector<int32_t>{20, 21, 22, 30, 0, 0, 10, 11, 0}));
  EXPECT_EQ(plan.context_lengths, (std::vector<int32_t>{9, 1, 6}));
  EXPECT_TRUE(plan.cu_seqlens_q.empty());
  AttentionParams p;
  plan.bind(p);
  EXPECT_EQ(p.cu_seqlens_q, nullptr);
}

TEST(MetadataPlanner, DepthsShareLengthsAndGroupingOnlyTablesDiffer) {
  Tables tables;
  for (int32_t d = 0; d < 4; ++d) tables.t[{3, d}] = {100 + d, 200 + d};
  const std::vector<PlannedRow> rows = {{3, 0, 4}, {3, 0, 5}, {3, 0, 6}};
  const std::vector<int32_t> depths = {0, 1, 2, 3};
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention_depths(rows, depths, tables.source(), {4, true, -1}, plan).ok());
  ASSERT_EQ(plan.block_tables.size(), 4u);
  EXPECT_EQ(plan.context_lengths, (std::vector<int32_t>{7}));
  EXPECT_EQ(plan.cu_seqlens_q, (std::vector<int32_t>{0, 3}));
  for (int32_t d = 0; d < 4; ++d) EXPECT_EQ(plan.block_tables[static_cast<size_t>(d)], (std::vector<int32_t>{100 + d, 200 + d}));
  AttentionParams a, b;
  plan.bind(a, 1);
  plan.bind(b, 3);
  EXPECT_EQ(a.context_lengths, b.context_lengths) << "one lengths buffer serves every depth";
  EXPECT_NE(a.block_tables, b.block_tables);
}

TEST(MetadataPlanner, RefusesBrokenRowSets) {
  Tables tables;
  tables.t[{1, 0}] = {0, 1};
  tables.t[{2, 0}] = {2};
  AttentionPlan plan;
  const std::vector<PlannedRow> gap = {{1, 0, 2}, {1, 0, 4}};
  EXPECT_NE(plan_attention(gap, tables.source(), {2, true, -1}, plan).message().find("contiguous positions"),
            std::string::npos);
  const std::vector<PlannedRow> split = {{1, 0, 0}, {2, 0, 0}, {1, 0, 1}};
  EXPECT_NE(plan_attention(split, tables.source(), {2, true, -1}, plan).message().find("two separate runs"),
            std::string::npos);
  const std::vector<PlannedRow> too_far = {{2, 0, 5}};
  EXPECT_NE(plan_attention(too_far, tables.source(), {2, false, -1}, plan).message().find("has 1 blocks but position 5 needs 3"),
            std::string::npos);
  EXPECT_TRUE(plan_attention({}, tables.source(), {2, false, -1}, plan).ok());
  EXPECT_EQ(plan.num_seqs, 0);
  EXPECT_EQ(plan.table_width, 0);
}

TEST(MetadataPlanner, StagingAlternatesBetweenTwoPlans) {
  PlanStaging staging;
  AttentionPlan* a = &staging.next();
  AttentionPlan* b = &staging.next();
  EXPECT_NE(a, b);
  EXPECT_EQ(&staging.next(), a);
  EXPECT_EQ(&staging.current(), a);
}

}  // namespace
}  // namespace rlt::attention
