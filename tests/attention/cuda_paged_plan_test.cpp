// The cuda_paged partition rule is host code shared with the kernels: checked here in every
// build, GPU or not.
#include "attention/cuda_paged_plan.h"

#include <gtest/gtest.h>

namespace rlt::attention::cuda_paged {
namespace {

TEST(CudaPagedPlan, PartitionsCoverEveryRowWithinTheGrid) {
  for (int32_t capacity : {1, 127, 128, 129, 1024, 8192, 8193, 40000, 131072}) {
    const int32_t grid = max_partitions(capacity);
    EXPECT_GE(grid, 1);
    EXPECT_LE(grid, kMaxPartitions);
    for (int32_t visible = 1; visible <= capacity; visible += (visible < 300 ? 1 : 97)) {
      const int32_t size = partition_tokens(visible), parts = num_partitions(visible);
      ASSERT_EQ(size % kPartitionQuantum, 0);
      ASSERT_LE(parts, grid) << "capacity " << capacity << " visible " << visible;
      ASSERT_GE(int64_t{parts} * size, visible) << "the partitions cover the row";
      ASSERT_LT(int64_t{parts - 1} * size, visible) << "no empty partition";
    }
  }
}

TEST(CudaPagedPlan, ShortRowsUseTheSmallestPartitionsLongRowsAtMostSixtyFour) {
  EXPECT_EQ(partition_tokens(1), 128);
  EXPECT_EQ(num_partitions(1024), 8);
  EXPECT_EQ(num_partitions(8192), 64);
  EXPECT_EQ(partition_tokens(8193), 256);
  EXPECT_EQ(num_partitions(131072), 64);
  EXPECT_LE(num_partitions(100000), 64);
}

TEST(CudaPagedPlan, HeadDimRule) {
  EXPECT_TRUE(head_dim_supported(8));
  EXPECT_TRUE(head_dim_supported(96));
  EXPECT_TRUE(head_dim_supported(256));
  EXPECT_FALSE(head_dim_supported(4));
  EXPECT_FALSE(head_dim_supported(100));
  EXPECT_FALSE(head_dim_supported(264));
}

}  // namespace
}  // namespace rlt::attention::cuda_paged
