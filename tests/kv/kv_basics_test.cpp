// Page math, configuration checks, the block pool, written-state tracking and prefix digests.
#include <gtest/gtest.h>

#include "kv/block_pool.h"
#include "kv/prefix_digest.h"
#include "kv/written_state.h"
#include "kv_test_util.h"

namespace rlt::kv {
namespace {

using testing::make_config;

TEST(KvPageMath, RequiredBlocksMatchesUpstreamWorkedExamples) {
  // T 3, B 2, R 3 -> 6 (prompt 2 + 2 new - 1 = 3 tokens).
  EXPECT_EQ(*required_blocks(2, 2, KVLayout::kLastExited, 3, 2), 6);
  // 33-token prompt, max_tokens 1024, 4 loops, block 16 -> 264 blocks.
  EXPECT_EQ(*required_blocks(33, 1024, KVLayout::kLastExited, 4, 16), 264);
  // prompt 128 + output 64 -> 48 blocks.
  EXPECT_EQ(*required_blocks(128, 64, KVLayout::kLastExited, 4, 16), 48);
  // Ouro-1.4B: 1024 + 128 -> T 1151 -> 72 pages; 288 blocks last_exited, 72 shared.
  EXPECT_EQ(*required_blocks(1024, 128, KVLayout::kLastExited, 4, 16), 288);
  EXPECT_EQ(*required_blocks(1024, 128, KVLayout::kShared, 4, 16), 72);
  EXPECT_EQ(capacity_tokens(1024, 128), 1151);
}

TEST(KvPageMath, RequiredBlocksRejectsNonPositiveSizes) {
  for (auto r : {required_blocks(0, 1, KVLayout::kShared, 1, 16),
                 required_blocks(1, 0, KVLayout::kShared, 1, 16),
                 required_blocks(1, 1, KVLayout::kShared, 0, 16),
                 required_blocks(1, 1, KVLayout::kShared, 1, 0)}) {
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(KvPageMath, OuroBytesPerBlockIsThreeMiB) {
  KVGeometry g{.num_blocks = 1,
               .num_layers = 24,
               .block_size = 16,
               .num_kv_heads = 16,
               .head_dim = 128,
               .dtype = DType::kBF16};
  EXPECT_EQ(g.bytes_per_block(), 3 * 1024 * 1024);
  // 196,608 bytes per token per depth.
  EXPECT_EQ(g.bytes_per_block() / g.block_size, 196608);
  // Q8_0: 34 bytes per 32 values, 53 % of bf16's; a head of 128 values is 136 bytes.
  g.dtype = DType::kQ8_0;
  EXPECT_EQ(g.head_units(), 136);
  EXPECT_EQ(g.bytes_per_block() / g.block_size, 196608 / 2 / 32 * 34);
  EXPECT_TRUE(g.validate().ok());
  g.head_dim = 80;  // not whole blocks of 32: refused with what to use instead
  EXPECT_TRUE(testing::contains(g.validate().message(), "--kv-dtype bf16"));
}

TEST(KvConfig, LayoutNamesRoundTrip) {
  EXPECT_EQ(name(KVLayout::kLastExited), "last_exited");
  EXPECT_EQ(name(KVLayout::kShared), "shared");
  EXPECT_EQ(*parse_kv_layout("shared"), KVLayout::kShared);
  EXPECT_EQ(*parse_kv_layout("last_exited"), KVLayout::kLastExited);
  EXPECT_NE(parse_kv_layout("alias").status().message().find("accepted: last_exited, shared"),
            std::string::npos);
}

TEST(KvConfig, ValidationNamesTheOffendingValue) {
  KVCacheConfig c = make_config(16, 4, 4);
  EXPECT_TRUE(c.validate().ok());
  EXPECT_EQ(c.planes(), 4);

  KVCacheConfig bad = c;
  bad.geometry.head_dim = 0;
  EXPECT_TRUE(testing::contains(bad.validate().message(), "head_dim 0"));
  bad = c;
  bad.geometry.dtype = DType::kI32;
  EXPECT_EQ(bad.validate().code(), ErrorCode::kInvalidArgument);
  bad = c;
  bad.depth = 0;
  EXPECT_EQ(bad.validate().code(), ErrorCode::kInvalidArgument);
  bad = c;
  bad.watermark_ratio = 1.0;
  EXPECT_TRUE(testing::contains(bad.validate().message(), "watermark_ratio"));
  bad = c;
  bad.geometry.num_blocks = 3;  // fewer blocks than one page of 4 planes
  EXPECT_TRUE(testing::contains(bad.validate().message(), "3 blocks"));
  // Prefix caching requires last_exited (config and manager).
  KVCacheConfig shared = make_config(16, 4, 4, KVLayout::kShared, /*prefix=*/true);
  EXPECT_EQ(shared.validate().code(), ErrorCode::kUnimplemented);
  EXPECT_EQ(KVCacheManager::create(shared).status().code(), ErrorCode::kUnimplemented);
  EXPECT_EQ(make_config(16, 4, 4, KVLayout::kShared).planes(), 1);
}

TEST(KvConfig, WatermarkIsFloorOfRatioTimesBlocks) {
  KVCacheConfig c = make_config(10, 4, 1);
  c.watermark_ratio = 0.25;
  EXPECT_EQ(c.watermark_blocks(), 2);
}

TEST(KvBlockPool, HandsOutBlockZeroFirstAndReusesLastFreed) {
  BlockPool pool(4);
  BlockId got[3];
  pool.take(2, got);
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], 1);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.release(got[0]));
  pool.take(1, got + 2);
  EXPECT_EQ(got[2], 0);  // LIFO
  EXPECT_TRUE(pool.check().ok());
}

TEST(KvBlockPool, SharedBlockReturnsOnLastRelease) {
  BlockPool pool(2);
  BlockId b;
  pool.take(1, &b);
  pool.add_ref(b);
  EXPECT_EQ(pool.refs(b), 2);
  EXPECT_FALSE(pool.release(b));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_TRUE(pool.release(b));
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.check().ok());
}

TEST(KvWrittenPlane, OutOfOrderWritesExposeOnlyTheContiguousPrefix) {
  WrittenPlane w;
  w.reset(200);
  w.set_range(3, 5);
  EXPECT_EQ(w.prefix(), 0);
  EXPECT_TRUE(w.has_pending());
  EXPECT_EQ(w.frontier(), 5);
  w.set_range(0, 3);
  EXPECT_EQ(w.prefix(), 5);
  EXPECT_FALSE(w.has_pending());
  // Across word boundaries.
  w.set_range(70, 130);
  EXPECT_EQ(w.prefix(), 5);
  w.set_range(5, 70);
  EXPECT_EQ(w.prefix(), 130);
  w.set_range(130, 200);
  EXPECT_EQ(w.prefix(), 200);
  EXPECT_TRUE(w.test(199));
}

TEST(KvWrittenPlane, AssignRecomputesThePrefix) {
  WrittenPlane w;
  w.reset(70);
  w.set_range(0, 66);
  WrittenPlane copy;
  copy.assign(70, w.words());
  EXPECT_EQ(copy.prefix(), 66);
  EXPECT_EQ(copy.frontier(), 66);
  copy.reset(70);
  EXPECT_EQ(copy.prefix(), 0);
  EXPECT_EQ(copy.frontier(), 0);
}

TEST(KvPrefixDigest, ChainsOverParentAndTokens) {
  KVCacheConfig c = make_config(16, 2, 2, KVLayout::kLastExited, true);
  Digest root = model_root_digest(c);
  std::vector<TokenId> a = {1, 2}, b = {1, 3};
  Digest da = page_digest(root, a);
  EXPECT_EQ(da, page_digest(root, a));  // deterministic
  EXPECT_NE(da, page_digest(root, b));  // any token changes it
  // The same page under a different parent is a different key (the chain covers the prefix).
  EXPECT_NE(page_digest(da, a), page_digest(page_digest(root, b), a));
}

TEST(KvPrefixDigest, RootCoversModelDtypeLayoutAndSalt) {
  KVCacheConfig c = make_config(16, 2, 2, KVLayout::kLastExited, true);
  Digest root = model_root_digest(c);
  KVCacheConfig other = c;
  other.model_salt = "test-model@v2";
  EXPECT_NE(root, model_root_digest(other));
  other = c;
  other.geometry.dtype = DType::kBF16;
  EXPECT_NE(root, model_root_digest(other));
  other = c;
  other.layout = KVLayout::kShared;
  EXPECT_NE(root, model_root_digest(other));
  other = c;
  other.geometry.num_blocks = 999;  // pool size does not change K/V
  EXPECT_EQ(root, model_root_digest(other));
  EXPECT_EQ(salted_root_digest(root, ""), root);
  EXPECT_NE(salted_root_digest(root, "tenant-a"), salted_root_digest(root, "tenant-b"));
}

}  // namespace
}  // namespace rlt::kv
