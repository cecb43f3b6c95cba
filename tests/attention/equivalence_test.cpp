// Every implemented CPU backend against cpu_reference on randomized paged batches (the GPU
// backends run the same suite in tests/cuda).
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include "attention/backend.h"
#include "attention/registry.h"
#include "equivalence_suite.h"

namespace rlt::attention {
namespace {

using testing::PagedPools;

class BackendEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendEquivalence, MatchesCpuReferenceOnRandomPagedBatches) {
  const BackendEntry* entry = find_backend(GetParam());
  ASSERT_NE(entry, nullptr);
  auto backend = entry->create();
  testing::check_random_batches(entry->caps, *backend);
}

// cpu_flash on every SIMD target compiled in and supported here (AVX-512, AVX2, SSE4, ...), not
// only the one dispatch picks: its blocked scores fold as many keys as the target has lanes.
TEST(CpuFlash, EveryCompiledTargetMatchesTheReference) {
  const BackendEntry* entry = find_backend("cpu_flash");
  ASSERT_NE(entry, nullptr);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    auto backend = entry->create();
    testing::check_random_batches(entry->caps, *backend);
    testing::check_packed_equals_per_row(*backend);
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_P(BackendEquivalence, LongPackedSequences) {
  testing::check_long_packed(*find_backend(GetParam())->create());
}

TEST_P(BackendEquivalence, PackedPrefillEqualsPerRowDecode) {
  testing::check_packed_equals_per_row(*find_backend(GetParam())->create());
}

TEST_P(BackendEquivalence, PackedRowsAreBitIdenticalToDecodedRowsAtAnyLength) {
  testing::check_packed_bit_equal_per_row(*find_backend(GetParam())->create());
}

TEST_P(BackendEquivalence, MaskedKeysContributeNothingWhateverTheirValues) {
  testing::check_masked_values_do_not_leak(*find_backend(GetParam())->create());
}

TEST_P(BackendEquivalence, RowOutputIsIndependentOfTheBatch) {
  testing::check_row_independent(*find_backend(GetParam())->create());
}

TEST_P(BackendEquivalence, CausalAndContextBoundariesAreExact) {
  auto backend = find_backend(GetParam())->create();
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
    testing::check_causal_boundaries(*backend, dtype, 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(ImplementedBackends, BackendEquivalence,
                         ::testing::Values("cpu_flash", "cpu_reference"),
                         [](const auto& info) { return info.param; });

// --kv-dtype q8_0: both CPU backends compute on the values the blocks hold, bit for bit as on an
// f32 pool of those values — single-query rows (one past 256 keys, split into ranges), a packed
// block of rows (prefill, verification), GQA, head_dim 32 to 128, at 1 and 2 threads (a lone
// short row is split by heads over idle threads); cpu_flash on every compiled SIMD target.
TEST(Q8_0KV, BackendsComputeExactlyOnTheDequantizedCache) {
  std::mt19937 rng(8080);
  struct Shape {
    int32_t q_heads, kv_heads, d;
  };
  for (const Shape sh : {Shape{4, 4, 32}, Shape{9, 3, 64}, Shape{16, 4, 128}}) {
    SCOPED_TRACE(::testing::Message() << sh.q_heads << " x " << sh.kv_heads << " x " << sh.d);
    const int32_t bs = 16, blocks = 48, width = 24;
    PagedPools pools(DType::kQ8_0, blocks, bs, sh.kv_heads, sh.d, rng);
    ASSERT_FALSE(pools.kf.empty());
    // Decode rows of 1, 37 and 300 keys, then a sequence of 5 packed rows at 70 keys.
    const std::vector<int32_t> lengths = {1, 37, 300, 70};
    const std::vector<int32_t> cu = {0, 1, 2, 3, 8};
    const int64_t rows = 8;
    const std::vector<int32_t> tables = testing::random_tables(lengths, bs, blocks, width, -1, rng);
    std::vector<float> q(static_cast<size_t>(rows * sh.q_heads * sh.d));
    std::normal_distribution<float> dist;
    for (float& x : q) x = dist(rng);
    std::vector<std::pair<std::string, int64_t>> runs = {{"cpu_reference", 0}};
    for (int64_t target : hwy::SupportedAndGeneratedTargets())
      runs.emplace_back("cpu_flash", target);
    for (const auto& [name, target] : runs) {
      SCOPED_TRACE(name + (target ? std::string(" ") + hwy::TargetName(target) : ""));
      hwy::SetSupportedTargetsForTest(target);
      auto backend = find_backend(name)->create();
      for (const int threads : {1, 2}) {
        testing::OmpThreads scoped(threads);
        std::vector<float> quantized(q.size()), dequantized(q.size());
        AttentionParams p =
            testing::paged_params(pools, q.data(), quantized.data(), rows, sh.q_heads,
                                  tables.data(), width, lengths.data(), 4);
        p.cu_seqlens_q = cu.data();
        p.max_seqlen_q = 5;
        ASSERT_TRUE(run_attention(*backend, p).ok());
        p.k = pools.k_dequantized;
        p.v = pools.v_dequantized;
        p.out = dequantized.data();
        ASSERT_TRUE(run_attention(*backend, p).ok());
        for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(quantized[i], dequantized[i]) << i;
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// One single-query row over a two-column table of `pools` (q and out left null).
AttentionParams one_row(const PagedPools& pools, const std::vector<int32_t>& table,
                        const std::vector<int32_t>& lengths) {
  AttentionParams p;
  p.rows = 1;
  p.num_q_heads = 1;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = table.data();
  p.table_width = 2;
  p.context_lengths = lengths.data();
  p.num_seqs = 1;
  return p;
}

TEST(AttentionContract, EmptyBatchIsValidAndBadInputIsRefused) {
  auto backend = make_cpu_flash_backend();
  AttentionParams empty;
  EXPECT_TRUE(run_attention(*backend, empty).ok());
  std::mt19937 rng(1);
  PagedPools pools(DType::kF32, 4, 4, 1, 8, rng);
  std::vector<float> q(8), out(8);
  std::vector<int32_t> table = {0, 9}, lengths = {6};
  AttentionParams p = one_row(pools, table, lengths);
  p.q = q.data();
  p.out = out.data();
  Status s = run_attention(*backend, p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reads block id 9 at table column 1, outside the pool's [0, 4)"),
            std::string::npos)
      << s.message();
  lengths[0] = 9;
  EXPECT_NE(run_attention(*backend, p).message().find("context length 9, outside [1, 8]"),
            std::string::npos);
  lengths[0] = 3;
  p.num_q_heads = 3;
  p.k.num_kv_heads = p.v.num_kv_heads = 2;
  EXPECT_NE(run_attention(*backend, p).message().find("not a multiple"), std::string::npos);
}

// Plan/run: a pass's metadata is checked once without q/out (the layers' buffers), and a checked
// call runs with the same result as run_attention.
TEST(AttentionContract, CheckedPassRunsAsRunAttention) {
  auto backend = make_cpu_flash_backend();
  std::mt19937 rng(2);
  PagedPools pools(DType::kF32, 4, 4, 1, 8, rng);
  std::vector<float> q(8, 0.5f), out_checked(8), out_direct(8);
  std::vector<int32_t> table = {2, 9}, lengths = {6};
  AttentionParams p = one_row(pools, table, lengths);
  // No q/out at planning; the bad block is still found.
  Status s = check_attention_pass(*backend, p);
  EXPECT_NE(s.message().find("reads block id 9"), std::string::npos) << s.message();
  table[1] = 3;
  ASSERT_TRUE(check_attention_pass(*backend, p).ok());
  EXPECT_FALSE(run_attention(*backend, p).ok());  // alone, a call needs q and out
  p.q = q.data();
  p.out = out_checked.data();
  ASSERT_TRUE(run_checked_attention(*backend, p).ok());
  p.out = out_direct.data();
  ASSERT_TRUE(run_attention(*backend, p).ok());
  EXPECT_EQ(out_checked, out_direct);
}

}  // namespace
}  // namespace rlt::attention
