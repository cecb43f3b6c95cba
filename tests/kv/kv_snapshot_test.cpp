// Snapshots (preemption), transfer leases, and the finalize plan executed on real storage.
#include <gtest/gtest.h>

#include <cstring>

#include "kv/cpu_kv_storage.h"
#include "kv_test_util.h"

namespace rlt::kv {
namespace {

using testing::make_config;
using testing::make_manager;
using testing::request;

// Writes a recognizable value into every element of (block, layer, slot) of both pools.
void stamp(CpuKVStorage& s, BlockId block, int32_t layer, int32_t slot, float value) {
  const KVGeometry& g = s.geometry();
  for (KVPool pool : {KVPool::kKey, KVPool::kValue}) {
    std::byte* p = s.slot_data(pool, block, layer, slot);
    for (int32_t i = 0; i < g.num_kv_heads * g.head_dim; ++i) {
      float v = pool == KVPool::kKey ? value : -value;
      std::memcpy(p + i * sizeof(float), &v, sizeof v);
    }
  }
}

float key_at(const CpuKVStorage& s, BlockId block, int32_t layer, int32_t slot) {
  float v;
  std::memcpy(&v, s.slot_data(KVPool::kKey, block, layer, slot), sizeof v);
  return v;
}

struct Fixture {
  explicit Fixture(KVCacheConfig c) : m(make_manager(c)) {
    storage = std::move(CpuKVStorage::create(c.geometry)).value();
  }
  KVCacheManager m;
  std::unique_ptr<CpuKVStorage> storage;

  // "Runs" request `id` at `depth` for positions [start, end): stamps every layer, records.
  void run(RequestId id, int32_t depth, int32_t start, int32_t end) {
    auto table = *m.block_table(id, depth);
    const int32_t bs = m.block_size();
    for (int32_t pos = start; pos < end; ++pos) {
      for (int32_t layer = 0; layer < m.config().geometry.num_layers; ++layer) {
        stamp(*storage, table[pos / bs], layer, pos % bs, value(id, depth, pos, layer));
      }
    }
    ASSERT_TRUE(m.record_written(id, depth, start, end - start).ok());
  }
  static float value(RequestId id, int32_t depth, int32_t pos, int32_t layer) {
    return static_cast<float>(id * 10000 + depth * 1000 + pos * 10 + layer);
  }
};

TEST(KvFinalizeStorage, DeeperDepthsReadTheExitDepthVersion) {
  Fixture f(make_config(32, 4, 4, KVLayout::kLastExited, false, 2));
  ASSERT_TRUE(f.m.allocate(request(1, 8)).ok());
  for (int32_t d = 0; d < 4; ++d) f.run(1, d, 0, 5);  // prompt positions 0..4 at full depth
  f.run(1, 0, 5, 6);                                  // position 5: depths 0, 1, then exit at 1
  f.run(1, 1, 5, 6);
  std::vector<SlotCopy> plan;
  KV_ASSERT_OK(f.m.plan_finalize(1, 5, 1, &plan));
  KV_ASSERT_OK(f.storage->copy_slots(plan));
  KV_ASSERT_OK(f.m.mark_finalized(1, 5, 1));
  for (int32_t d = 0; d < 4; ++d) {
    auto table = *f.m.block_table(1, d);
    EXPECT_EQ(*f.m.written_prefix(1, d), 6);
    for (int32_t layer = 0; layer < 2; ++layer) {
      // Read rule: version min(d, exit) for the exited token, own depth for prompt tokens.
      EXPECT_EQ(key_at(*f.storage, table[1], layer, 1),
                Fixture::value(1, std::min(d, 1), 5, layer));
      EXPECT_EQ(key_at(*f.storage, table[1], layer, 0), Fixture::value(1, d, 4, layer));
    }
  }
}

TEST(KvSnapshot, RoundTripsPagesAndWrittenStateWithoutAliasing) {
  for (KVLayout layout : {KVLayout::kLastExited, KVLayout::kShared}) {
    Fixture f(make_config(40, 4, 3, layout));
    ASSERT_TRUE(f.m.allocate(request(1, 11, {}, 8)).ok());
    for (int32_t d = 0; d < 3; ++d) f.run(1, d, 0, 6);
    f.run(1, 0, 7, 8);  // a pending (out-of-order) write survives too
    auto snap = f.m.snapshot(1, *f.storage);
    ASSERT_TRUE(snap.ok()) << snap.status().to_string();
    EXPECT_EQ(snap->pages, 2);
    EXPECT_EQ(snap->planes, f.m.num_planes());
    EXPECT_EQ(snap->host_bytes(),
              static_cast<size_t>(2 * f.m.num_planes()) * f.m.config().geometry.bytes_per_block());
    EXPECT_EQ(f.m.free(1), ReleaseOutcome::kReleased);
    // Disturb: another request takes (and scribbles over) the freed pages.
    ASSERT_TRUE(f.m.allocate(request(2, 8)).ok());
    for (int32_t d = 0; d < 3; ++d) f.run(2, d, 0, 8);
    KV_ASSERT_OK(f.m.resume(1, *snap, *f.storage));
    KV_ASSERT_OK(f.m.check_invariants());
    for (int32_t d = 0; d < 3; ++d) {
      const int32_t writer = layout == KVLayout::kShared ? 2 : d;  // shared: last depth run wins
      EXPECT_EQ(*f.m.written_prefix(1, d), 6);
      EXPECT_EQ(*f.m.token_written(1, 7, 0), true);
      auto table = *f.m.block_table(1, d);
      for (int32_t pos = 0; pos < 6; ++pos) {
        EXPECT_EQ(key_at(*f.storage, table[pos / 4], 1, pos % 4),
                  Fixture::value(1, writer, pos, 1));
      }
    }
    // No aliasing: request 2's pages still hold request 2's values.
    auto t2 = *f.m.block_table(2, 0);
    EXPECT_EQ(key_at(*f.storage, t2[0], 0, 0),
              Fixture::value(2, layout == KVLayout::kShared ? 2 : 0, 0, 0));
  }
}

TEST(KvSnapshot, SnapshotLeavesTheAllocationUnchanged) {
  Fixture f(make_config(16, 4, 2));
  ASSERT_TRUE(f.m.allocate(request(1, 8)).ok());
  f.run(1, 0, 0, 3);
  const uint64_t before = f.m.state_fingerprint();
  ASSERT_TRUE(f.m.snapshot(1, *f.storage).ok());
  EXPECT_EQ(f.m.state_fingerprint(), before);
  EXPECT_EQ(f.m.snapshot(9, *f.storage).status().code(), ErrorCode::kNotFound);
}

TEST(KvSnapshot, RestoreValidatesEverythingAndFailsWithoutSideEffects) {
  Fixture f(make_config(64, 4, 3));
  ASSERT_TRUE(f.m.allocate(request(1, 8)).ok());
  for (int32_t d = 0; d < 3; ++d) f.run(1, d, 0, 5);
  KVSnapshot snap = std::move(f.m.snapshot(1, *f.storage)).value();

  auto expect_refused = [&](RequestId target, const KVSnapshot& s, ErrorCode code,
                            const std::string& needle) {
    const uint64_t before = f.m.state_fingerprint();
    Status st = f.m.restore(target, s, *f.storage);
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_TRUE(testing::contains(st.message(), needle)) << st.message();
    EXPECT_EQ(f.m.state_fingerprint(), before);
  };
  ASSERT_TRUE(f.m.allocate(request(2, 8)).ok());  // a fresh, matching target
  ASSERT_TRUE(f.m.allocate(request(3, 12)).ok());
  ASSERT_TRUE(f.m.allocate(request(4, 8, {}, 4)).ok());
  expect_refused(1, snap, ErrorCode::kFailedPrecondition, "already holds written tokens");
  expect_refused(3, snap, ErrorCode::kInvalidArgument, "capacity");
  expect_refused(4, snap, ErrorCode::kInvalidArgument, "page count");
  expect_refused(9, snap, ErrorCode::kNotFound, "no KV allocation");
  KVSnapshot bad = snap;
  bad.layout = KVLayout::kShared;
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "layout");
  bad = snap;
  bad.planes = 1;
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "plane count");
  bad = snap;
  bad.geometry.head_dim = 8;
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "block shape");
  bad = snap;
  bad.model_root.lo ^= 1;
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "another model");
  bad = snap;
  bad.keys.pop_back();
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "page data");
  bad = snap;
  bad.written_words.push_back(0);
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "written state");
  bad = snap;
  bad.written_words[0] |= uint64_t{1} << 8;  // position 8: beyond the 8 backed tokens? (= capacity)
  bad.written_words[0] |= uint64_t{1} << 7;
  bad.pages = 1;
  expect_refused(2, bad, ErrorCode::kInvalidArgument, "beyond its 4 backed tokens");
  // Leased target.
  KV_ASSERT_OK(f.m.pin_transfer(2, 77));
  expect_refused(2, snap, ErrorCode::kFailedPrecondition, "leased");
  KV_ASSERT_OK(f.m.unpin_transfer(2, 77));
  // Storage of another shape.
  KVGeometry other = f.m.config().geometry;
  other.num_blocks = 8;
  auto small = std::move(CpuKVStorage::create(other)).value();
  const uint64_t before = f.m.state_fingerprint();
  EXPECT_EQ(f.m.restore(2, snap, *small).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(f.m.snapshot(1, *small).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(f.m.state_fingerprint(), before);
  // And finally the good restore.
  KV_ASSERT_OK(f.m.restore(2, snap, *f.storage));
  EXPECT_EQ(*f.m.written_prefix(2, 2), 5);
  KV_ASSERT_OK(f.m.check_invariants());
}

TEST(KvSnapshot, ResumeRefusesWhenFullAndChangesNothing) {
  Fixture f(make_config(12, 4, 3));
  ASSERT_TRUE(f.m.allocate(request(1, 8)).ok());  // 6 blocks
  f.run(1, 0, 0, 2);
  KVSnapshot snap = std::move(f.m.snapshot(1, *f.storage)).value();
  ASSERT_TRUE(f.m.allocate(request(2, 8)).ok());  // 6 more: full
  const uint64_t before = f.m.state_fingerprint();
  Status s = f.m.resume(3, snap, *f.storage);
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(testing::contains(s.message(), "need 6 blocks"));
  EXPECT_EQ(f.m.state_fingerprint(), before);
  EXPECT_FALSE(f.m.has_allocation(3));
  EXPECT_EQ(f.m.resume(1, snap, *f.storage).code(), ErrorCode::kAlreadyExists);
}

TEST(KvSnapshot, RestoredPromptPagesMayBePublishedAgain) {
  Fixture f(make_config(40, 2, 3, KVLayout::kLastExited, true));
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  ASSERT_TRUE(f.m.allocate(request(1, 6, prompt)).ok());
  KV_ASSERT_OK(f.m.record_written_all_depths(1, 0, 5));
  ASSERT_EQ(f.m.num_prefix_entries(), 2);
  KVSnapshot snap = std::move(f.m.snapshot(1, *f.storage)).value();
  f.m.free(1);
  f.m.reset_prefix_cache();
  KV_ASSERT_OK(f.m.resume(1, snap, *f.storage));
  EXPECT_EQ(f.m.num_prefix_entries(), 2);  // republished from the restored private pages
  EXPECT_EQ(f.m.lookup_prefix(prompt).pages, 2);
  KV_ASSERT_OK(f.m.check_invariants());
}

TEST(KvLease, FreeWhileLeasedIsDeferredUntilTheLastUnpin) {
  KVCacheManager m = make_manager(make_config(16, 4, 2));
  ASSERT_TRUE(m.allocate(request(1, 8)).ok());
  KV_ASSERT_OK(m.pin_transfer(1, 100));
  KV_ASSERT_OK(m.pin_transfer(1, 101));
  EXPECT_TRUE(m.has_transfer_lease(1));
  EXPECT_EQ(m.free(1), ReleaseOutcome::kDeferred);
  EXPECT_EQ(m.free(1), ReleaseOutcome::kDeferred);
  EXPECT_TRUE(m.has_allocation(1));  // still there while release is pending
  EXPECT_TRUE(m.allocation_info(1)->release_pending);
  EXPECT_EQ(m.num_used_blocks(), 4);  // pages not handed to anyone else
  KV_ASSERT_OK(m.check_invariants());
  // Release requested: no new transfer, no writes, no growth, no snapshot.
  EXPECT_EQ(m.pin_transfer(1, 102).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(m.record_written(1, 0, 0, 1).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(m.record_written_all_depths(1, 0, 1).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(m.mark_finalized(1, 0, 0).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(m.ensure_capacity(1, 8).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(m.mark_imported_prefix(1, 4).code(), ErrorCode::kFailedPrecondition);
  KV_ASSERT_OK(m.unpin_transfer(1, 100));
  EXPECT_TRUE(m.has_allocation(1));
  KV_ASSERT_OK(m.unpin_transfer(1, 101));
  EXPECT_FALSE(m.has_allocation(1));  // the deferred free ran, exactly once
  EXPECT_EQ(m.num_free_blocks(), 16);
  KV_ASSERT_OK(m.check_invariants());
}

TEST(KvLease, UnpinWithoutReleaseKeepsTheAllocation) {
  KVCacheManager m = make_manager(make_config(16, 4, 2));
  ASSERT_TRUE(m.allocate(request(1, 8)).ok());
  KV_ASSERT_OK(m.pin_transfer(1, 5));
  KV_ASSERT_OK(m.unpin_transfer(1, 5));
  EXPECT_TRUE(m.has_allocation(1));
  EXPECT_FALSE(m.has_transfer_lease(1));
  EXPECT_EQ(m.free(1), ReleaseOutcome::kReleased);
}

TEST(KvLease, Errors) {
  KVCacheManager m = make_manager(make_config(16, 4, 2));
  KV_EXPECT_CODE(m.pin_transfer(1, 5), ErrorCode::kNotFound);
  KV_EXPECT_CODE(m.unpin_transfer(1, 5), ErrorCode::kNotFound);
  ASSERT_TRUE(m.allocate(request(1, 8)).ok());
  KV_ASSERT_OK(m.pin_transfer(1, 5));
  KV_EXPECT_CODE(m.pin_transfer(1, 5), ErrorCode::kAlreadyExists);
  KV_EXPECT_CODE(m.unpin_transfer(1, 6), ErrorCode::kNotFound);
}

TEST(KvLease, LeasedAllocationsRefuseSnapshot) {
  Fixture f(make_config(16, 4, 2));
  ASSERT_TRUE(f.m.allocate(request(1, 8)).ok());
  KV_ASSERT_OK(f.m.pin_transfer(1, 5));
  auto snap = f.m.snapshot(1, *f.storage);
  EXPECT_EQ(snap.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(testing::contains(snap.status().message(), "during a transfer"));
}

TEST(KvLease, ReserveForTransferAllocatesAndPins) {
  KVCacheManager m = make_manager(make_config(16, 4, 2, KVLayout::kLastExited, true));
  std::vector<TokenId> prompt = testing::iota_tokens(9);
  auto adm = m.reserve_for_transfer(request(1, 12, prompt), 42);
  ASSERT_TRUE(adm.ok());
  EXPECT_TRUE(m.has_transfer_lease(1));
  // The receiver imports the prompt on the sender's word, then ends the lease and publishes.
  KV_ASSERT_OK(m.mark_imported_prefix(1, 9, adm->cached_tokens));
  EXPECT_EQ(m.num_prefix_entries(), 2);
  KV_ASSERT_OK(m.unpin_transfer(1, 42));
  // Refused reservations change nothing.
  const uint64_t before = m.state_fingerprint();
  EXPECT_EQ(m.reserve_for_transfer(request(2, 32), 43).status().code(),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(m.state_fingerprint(), before);
  KV_ASSERT_OK(m.check_invariants());
}

}  // namespace
}  // namespace rlt::kv
