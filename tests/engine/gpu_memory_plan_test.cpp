// The GPU KV-cache sizing arithmetic (--gpu-memory-utilization), on the CPU: the cache gets the
// allowed share of the device minus what is in use and what the run needs, and an impossible
// request is a clear error naming the numbers and the ways out.
#include "engine/gpu_memory_plan.h"

#include <gtest/gtest.h>

namespace rlt::engine {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

io::ModelConfig ouro_1_4b() {
  io::ModelConfig c;
  c.vocab_size = 49152;
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_layers = 24;
  c.num_heads = 16;
  c.num_kv_heads = 16;
  c.head_dim = 128;
  c.total_ut_steps = 4;
  return c;
}

TEST(GpuMemoryPlan, NeedsScaleWithTheLargestBatches) {
  const io::ModelConfig c = ouro_1_4b();
  const GpuMemoryNeeds small = estimate_gpu_memory_needs(c, 3 * kGiB, 128, 8, false);
  const GpuMemoryNeeds large = estimate_gpu_memory_needs(c, 3 * kGiB, 8192, 256, false);
  EXPECT_EQ(small.weights, 3 * kGiB);
  // Per row: 33,281 f32 values and an 11,264-byte 16-bit scratch, twice.
  EXPECT_EQ(small.activations, 2 * 128 * (4 * 33281 + 11264));
  EXPECT_EQ(large.activations, 64 * small.activations);
  EXPECT_EQ(large.sampling, 32 * small.sampling);
  EXPECT_EQ(small.sampling, 2 * 8 * 49152 * 44);
  EXPECT_EQ(estimate_gpu_memory_needs(c, 0, 128, 8, true).workspaces - small.workspaces, 2 * kGiB);
  EXPECT_EQ(small.total(), small.weights + small.activations + small.sampling + small.workspaces);
  // Ouro-1.4B at 8,192 batched tokens: about 2.2 GiB of activations, 1.0 GiB for 256 samplers.
  EXPECT_NEAR(static_cast<double>(large.activations) / kGiB, 2.20, 0.01);
  EXPECT_NEAR(static_cast<double>(large.sampling) / kGiB, 1.03, 0.01);
}

TEST(GpuMemoryPlan, TheCacheGetsWhatTheShareLeaves) {
  GpuMemoryNeeds needs;
  needs.weights = 3 * kGiB;
  needs.activations = 2 * kGiB;
  needs.sampling = kGiB;
  needs.workspaces = kGiB / 2;
  const int64_t total = 140 * kGiB, free = 139 * kGiB;
  auto plan = plan_gpu_kv_cache("cuda:0", total, free, 0.9, needs, 3 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const auto allowed = static_cast<int64_t>(0.9 * static_cast<double>(total));
  EXPECT_EQ(plan->kv_bytes, allowed - kGiB - needs.total());
  EXPECT_NE(plan->summary.find("0.90 x 140.0 GiB on cuda:0"), std::string::npos) << plan->summary;
  EXPECT_NE(plan->summary.find("weights 3.0 GiB"), std::string::npos) << plan->summary;
  // Memory another process holds counts against the share.
  auto shared = plan_gpu_kv_cache("cuda:0", total, free - 40 * kGiB, 0.9, needs, 3 << 20);
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(plan->kv_bytes - shared->kv_bytes, 40 * kGiB);
}

TEST(GpuMemoryPlan, ImpossibleRequestsAreClearErrors) {
  GpuMemoryNeeds needs;
  needs.weights = 20 * kGiB;
  const auto tight = plan_gpu_kv_cache("cuda:1", 24 * kGiB, 23 * kGiB, 0.8, needs, 1 << 20);
  ASSERT_FALSE(tight.ok());
  EXPECT_EQ(tight.status().code(), ErrorCode::kResourceExhausted);
  for (const char* part : {"cuda:1", "weights 20.0 GiB", "--gpu-memory-utilization",
                           "--kv-cache-gib", "--max-num-batched-tokens"}) {
    EXPECT_NE(tight.status().message().find(part), std::string::npos)
        << part << " in " << tight.status().message();
  }
  for (double bad : {0.0, -0.5, 1.5}) {
    const auto refused = plan_gpu_kv_cache("cuda:0", 24 * kGiB, 23 * kGiB, bad, {}, 1 << 20);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  }
  // Exactly one block for the cache and one for the device pools' padding block: accepted; a
  // byte less: refused.
  GpuMemoryNeeds none;
  const auto two = plan_gpu_kv_cache("cuda:0", 200, 200, 1.0, none, 100);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->kv_bytes, 200);
  const auto short_one = plan_gpu_kv_cache("cuda:0", 199, 199, 1.0, none, 100);
  ASSERT_FALSE(short_one.ok());
  EXPECT_EQ(short_one.status().code(), ErrorCode::kResourceExhausted);
}

}  // namespace
}  // namespace rlt::engine
