// Randomized property test: thousands of seeded mixed operations against a KVCacheManager and a
// CpuKVStorage, with a shadow model of what the runner wrote. After every operation:
//  - check_invariants() (references = owners + entries, nothing both free and owned, per-plane
//    tables consistent, every entry reachable from its root, leaf-first LRU order, ...);
//  - every failed call left state_fingerprint() unchanged (a refused claim changes nothing);
//  - block accounting: an admission costs exactly new + cached-only prefix blocks, a release
//    returns exactly the blocks nobody else holds, growth costs exactly what growth_blocks said;
//  - every live request's written prefix per depth matches the shadow, and periodically every
//    written slot in storage holds the value the shadow expects (prefix hits included, so a wrong
//    shared page is caught; early exits included, so depth d reads version min(d, exit)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "kv/cpu_kv_storage.h"
#include "kv_test_util.h"

namespace rlt::kv {
namespace {

struct ShadowRequest {
  std::vector<TokenId> prompt;
  std::string salt;
  int32_t capacity = 0;
  int32_t prefilled = 0;   // prompt positions written at every depth
  int32_t decode_pos = 0;  // next decode position (valid once prefilled == prompt size)
  std::map<int32_t, int32_t> exit_depth;  // decode position -> exit depth
  std::set<TransferId> leases;
  bool release_pending = false;

  int32_t prompt_len() const { return static_cast<int32_t>(prompt.size()); }
  int32_t written() const { return prefilled < prompt_len() ? prefilled : decode_pos; }
};

class Harness {
 public:
  Harness(const KVCacheConfig& config, uint64_t seed)
      : config_(config), m_(testing::make_manager(config)), rng_(seed) {
    storage_ = std::move(CpuKVStorage::create(config.geometry)).value();
    // Prompt stems shared by many requests so that prefixes collide, diverge and chain.
    for (int32_t s = 0; s < 3; ++s) {
      std::vector<TokenId> stem;
      for (int32_t i = 0; i < 3 * config.geometry.block_size; ++i) stem.push_back(rnd(1, 3));
      stems_.push_back(stem);
    }
  }

  void step(int32_t index) {
    const int32_t op = rnd(0, 99);
    if (op < 20)
      op_allocate();
    else if (op < 38)
      op_prefill();
    else if (op < 58)
      op_decode();
    else if (op < 64)
      op_snapshot_free_resume();
    else if (op < 68)
      op_resume_preempted();
    else if (op < 74)
      op_pin();
    else if (op < 80)
      op_unpin();
    else if (op < 92)
      op_free();
    else if (op < 96)
      op_oversized_claim();
    else if (op < 99)
      op_trim();
    else
      op_reset();
    ASSERT_TRUE(m_.check_invariants().ok())
        << "after op " << op << " at step " << index << ": " << m_.check_invariants().to_string();
    check_views();
    if (index % 25 == 0) {
      for (const auto& [id, r] : live_) verify_contents(id);
    }
  }

  int32_t ops_that_refused() const { return refused_; }
  const KVCacheManager& manager() const { return m_; }
  int32_t prefix_hits() const { return hits_; }

 private:
  int32_t rnd(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  int32_t bs() const { return config_.geometry.block_size; }
  int32_t depth() const { return config_.depth; }

  // A failed call must leave the manager exactly as it was.
  void expect_unchanged_on_failure(const Status& s, uint64_t before) {
    if (s.ok()) return;
    ++refused_;
    ASSERT_EQ(m_.state_fingerprint(), before) << "failed call changed state: " << s.to_string();
  }

  template <typename Map>
  RequestId pick(const Map& map) {
    auto it = map.begin();
    std::advance(it, rnd(0, static_cast<int32_t>(map.size()) - 1));
    return it->first;
  }

  // Blocks of `id` that no other live allocation's table holds: what releasing it returns to the
  // available count (free list + cache-only).
  int32_t exclusive_blocks_of(RequestId id) {
    std::multiset<BlockId> others;
    std::vector<BlockId> mine;
    for (const auto& [other, r] : live_) {
      auto tables = m_.plane_block_tables(other);  // named: a range-for over *temporary dangles
      for (auto t : *tables) {
        if (other == id)
          mine.insert(mine.end(), t.begin(), t.end());
        else
          others.insert(t.begin(), t.end());
      }
    }
    return static_cast<int32_t>(
        std::count_if(mine.begin(), mine.end(), [&](BlockId b) { return others.count(b) == 0; }));
  }

  std::vector<TokenId> random_prompt() {
    std::vector<TokenId> p;
    if (rnd(0, 3) != 0) {
      const auto& stem = stems_[rnd(0, 2)];
      p.assign(stem.begin(), stem.begin() + rnd(0, static_cast<int32_t>(stem.size())));
    }
    const int32_t tail = rnd(1, 2 * bs());
    for (int32_t i = 0; i < tail; ++i) p.push_back(rnd(1, 4));
    return p;
  }

  // Value the runner writes for prompt position `pos` at `depth`: a function of the token prefix,
  // so every request with the same prefix (hence a prefix hit) expects the same bytes.
  static float prompt_value(const std::vector<TokenId>& prompt, int32_t pos, int32_t depth,
                            int32_t layer) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i <= pos; ++i)
      h = (h ^ static_cast<uint64_t>(prompt[i])) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(depth * 31 + layer)) * 1099511628211ull;
    return static_cast<float>(h % (1u << 20));
  }
  static float decode_value(RequestId id, int32_t pos, int32_t depth, int32_t layer) {
    return static_cast<float>((1u << 21) + (id % 512) * 4096 + pos * 16 + depth * 4 + layer);
  }

  float expected(RequestId id, const ShadowRequest& r, int32_t pos, int32_t depth, int32_t layer) {
    const bool shared = config_.layout == KVLayout::kShared;
    if (pos < r.prompt_len())
      return prompt_value(r.prompt, pos, shared ? depth_last() : depth, layer);
    const int32_t e = r.exit_depth.at(pos);
    return decode_value(id, pos, shared ? e : std::min(depth, e), layer);
  }
  int32_t depth_last() const { return depth() - 1; }

  void stamp(BlockId block, int32_t slot, int32_t layer, float v) {
    for (KVPool pool : {KVPool::kKey, KVPool::kValue}) {
      std::byte* p = storage_->slot_data(pool, block, layer, slot);
      const float x = pool == KVPool::kKey ? v : -v;
      for (int32_t i = 0; i < config_.geometry.num_kv_heads * config_.geometry.head_dim; ++i) {
        std::memcpy(p + i * sizeof(float), &x, sizeof x);
      }
    }
  }
  float read(BlockId block, int32_t slot, int32_t layer, KVPool pool = KVPool::kKey) {
    float v;
    std::memcpy(&v, storage_->slot_data(pool, block, layer, slot), sizeof v);
    return pool == KVPool::kKey ? v : -v;
  }

  void verify_contents(RequestId id) {
    const ShadowRequest& r = live_.at(id);
    for (int32_t d = 0; d < depth(); ++d) {
      auto table = *m_.block_table(id, d);
      for (int32_t pos = 0; pos < r.written(); ++pos) {
        for (int32_t layer = 0; layer < config_.geometry.num_layers; ++layer) {
          const float want = expected(id, r, pos, d, layer);
          ASSERT_EQ(read(table[pos / bs()], pos % bs(), layer), want)
              << "request " << id << " depth " << d << " pos " << pos << " layer " << layer;
          ASSERT_EQ(read(table[pos / bs()], pos % bs(), layer, KVPool::kValue), want);
        }
      }
    }
  }

  void check_views() {
    ASSERT_EQ(m_.num_allocations(), static_cast<int32_t>(live_.size()));
    for (const auto& [id, r] : live_) {
      ASSERT_TRUE(m_.has_allocation(id));
      ASSERT_EQ(m_.has_transfer_lease(id), !r.leases.empty());
      auto info = *m_.allocation_info(id);
      ASSERT_EQ(info.release_pending, r.release_pending);
      ASSERT_EQ(*m_.allocated_blocks(id), info.pages * m_.num_planes());
      for (int32_t d = 0; d < depth(); ++d) {
        ASSERT_EQ(*m_.written_prefix(id, d), r.written()) << "request " << id << " depth " << d;
        ASSERT_EQ(static_cast<int32_t>(m_.block_table(id, d)->size()), info.pages);
      }
    }
    for (const auto& [id, s] : preempted_) ASSERT_FALSE(m_.has_allocation(id));
  }

  // Grows `id` to back `tokens`, checking the price. Returns false when refused.
  bool grow(RequestId id, int32_t tokens) {
    const int32_t need = *m_.growth_blocks(id, tokens);
    const int32_t available = m_.num_available_blocks();
    const uint64_t before = m_.state_fingerprint();
    Status s = m_.ensure_capacity(id, tokens);
    expect_unchanged_on_failure(s, before);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted) << s.to_string();
      EXPECT_GT(need, available);
      return false;
    }
    EXPECT_EQ(available - m_.num_available_blocks(), need);
    return true;
  }

  void op_allocate() {
    RequestId id = next_id_++;
    ShadowRequest r;
    r.prompt = random_prompt();
    r.capacity = r.prompt_len() + rnd(1, 6) - 1;
    if (rnd(0, 9) == 0) r.salt = "tenant-" + std::to_string(rnd(0, 1));
    AllocateRequest req = testing::request(id, r.capacity, r.prompt);
    req.cache_salt = r.salt;
    if (rnd(0, 1) == 0) req.initial_tokens = rnd(1, r.capacity);  // incremental
    if (rnd(0, 9) == 0) req.reserved_blocks = rnd(0, 4);
    auto plan = m_.can_allocate(req);
    if (!plan.ok()) {
      ASSERT_EQ(plan.status().code(), ErrorCode::kInvalidArgument) << plan.status().to_string();
      return;  // can never fit the pool
    }
    const int32_t available = m_.num_available_blocks();
    const uint64_t before = m_.state_fingerprint();
    auto adm = m_.allocate(req);
    expect_unchanged_on_failure(adm.status(), before);
    if (!adm.ok()) {
      ASSERT_EQ(adm.status().code(), ErrorCode::kResourceExhausted);
      ASSERT_FALSE(plan->fits);
      return;
    }
    ASSERT_TRUE(plan->fits);
    ASSERT_EQ(adm->cached_tokens, plan->cached_tokens);
    ASSERT_EQ(adm->new_blocks, plan->new_blocks);
    ASSERT_EQ(available - m_.num_available_blocks(),
              plan->new_blocks + plan->exclusive_prefix_blocks);
    if (adm->cached_tokens > 0) ++hits_;
    r.prefilled = adm->cached_tokens;
    r.decode_pos = r.prompt_len();
    live_.emplace(id, std::move(r));
    verify_contents(id);  // hit pages must hold exactly this prompt's K/V
  }

  void op_prefill() {
    std::vector<RequestId> ids;
    for (const auto& [id, r] : live_) {
      if (!r.release_pending && r.prefilled < r.prompt_len()) ids.push_back(id);
    }
    if (ids.empty()) return;
    RequestId id = ids[rnd(0, static_cast<int32_t>(ids.size()) - 1)];
    ShadowRequest& r = live_.at(id);
    const int32_t end = std::min(r.prompt_len(), r.prefilled + rnd(1, 2 * bs()));
    if (!grow(id, end)) return;
    // Depth-major, like the runner: every position of the chunk through depth 0, then depth 1...
    for (int32_t d = 0; d < depth(); ++d) {
      auto table = *m_.block_table(id, d);
      for (int32_t pos = r.prefilled; pos < end; ++pos) {
        for (int32_t layer = 0; layer < config_.geometry.num_layers; ++layer) {
          stamp(table[pos / bs()], pos % bs(), layer, prompt_value(r.prompt, pos, d, layer));
        }
      }
    }
    Status s = rnd(0, 1) == 0 ? m_.record_written_all_depths(id, r.prefilled, end - r.prefilled)
                              : record_each_depth(id, r.prefilled, end);
    ASSERT_TRUE(s.ok()) << s.to_string();
    r.prefilled = end;
    verify_contents(id);
  }

  Status record_each_depth(RequestId id, int32_t start, int32_t end) {
    for (int32_t d = 0; d < depth(); ++d)
      RLT_RETURN_IF_ERROR(m_.record_written(id, d, start, end - start));
    return {};
  }

  void op_decode() {
    std::vector<RequestId> ids;
    for (const auto& [id, r] : live_) {
      if (!r.release_pending && r.prefilled == r.prompt_len() && r.decode_pos < r.capacity) {
        ids.push_back(id);
      }
    }
    if (ids.empty()) return;
    RequestId id = ids[rnd(0, static_cast<int32_t>(ids.size()) - 1)];
    ShadowRequest& r = live_.at(id);
    const int32_t pos = r.decode_pos;
    if (!grow(id, pos + 1)) return;
    const int32_t exit = rnd(0, depth() - 1);
    for (int32_t d = 0; d <= exit; ++d) {
      auto table = *m_.block_table(id, d);
      for (int32_t layer = 0; layer < config_.geometry.num_layers; ++layer) {
        stamp(table[pos / bs()], pos % bs(), layer, decode_value(id, pos, d, layer));
      }
      ASSERT_TRUE(m_.record_written(id, d, pos, 1).ok());
    }
    // Finalizing before writing is refused without side effects.
    if (exit + 1 < depth() && config_.layout == KVLayout::kLastExited) {
      std::vector<SlotCopy> none;
      const uint64_t before = m_.state_fingerprint();
      Status early = m_.mark_finalized(id, pos, exit + 1);
      ASSERT_EQ(early.code(), ErrorCode::kFailedPrecondition);
      expect_unchanged_on_failure(early, before);
    }
    std::vector<SlotCopy> plan;
    ASSERT_TRUE(m_.plan_finalize(id, pos, exit, &plan).ok());
    const int32_t copies = config_.layout == KVLayout::kShared ? 0 : depth() - 1 - exit;
    ASSERT_EQ(static_cast<int32_t>(plan.size()), copies);
    ASSERT_TRUE(storage_->copy_slots(plan).ok());
    ASSERT_TRUE(m_.mark_finalized(id, pos, exit).ok());
    r.exit_depth[pos] = exit;
    r.decode_pos = pos + 1;
    verify_contents(id);
  }

  void op_snapshot_free_resume() {
    std::vector<RequestId> ids;
    for (const auto& [id, r] : live_) {
      if (r.leases.empty()) ids.push_back(id);
    }
    if (ids.empty()) return;
    RequestId id = ids[rnd(0, static_cast<int32_t>(ids.size()) - 1)];
    auto snap = m_.snapshot(id, *storage_);
    ASSERT_TRUE(snap.ok()) << snap.status().to_string();
    release(id);
    preempted_.emplace(id, std::move(snap).value());
    if (rnd(0, 1) == 0) resume(id);  // sometimes at once, sometimes after other traffic
  }

  void op_resume_preempted() {
    if (preempted_.empty()) return;
    resume(pick(preempted_));
  }

  void resume(RequestId id) {
    const KVSnapshot& snap = preempted_.at(id);
    const uint64_t before = m_.state_fingerprint();
    Status s = m_.resume(id, snap, *storage_);
    expect_unchanged_on_failure(s, before);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), ErrorCode::kResourceExhausted) << s.to_string();
      return;
    }
    live_.emplace(id, std::move(shadow_of_preempted_.at(id)));
    shadow_of_preempted_.erase(id);
    preempted_.erase(id);
    verify_contents(id);
  }

  void op_pin() {
    if (live_.empty()) return;
    RequestId id = pick(live_);
    ShadowRequest& r = live_.at(id);
    TransferId t = next_transfer_++;
    const uint64_t before = m_.state_fingerprint();
    Status s = m_.pin_transfer(id, t);
    expect_unchanged_on_failure(s, before);
    ASSERT_EQ(s.ok(), !r.release_pending) << s.to_string();
    if (s.ok()) r.leases.insert(t);
  }

  void op_unpin() {
    std::vector<RequestId> ids;
    for (const auto& [id, r] : live_) {
      if (!r.leases.empty()) ids.push_back(id);
    }
    if (ids.empty()) {
      // Unknown lease: refused, nothing changes.
      if (!live_.empty()) {
        const uint64_t before = m_.state_fingerprint();
        Status s = m_.unpin_transfer(pick(live_), 999999);
        ASSERT_EQ(s.code(), ErrorCode::kNotFound);
        expect_unchanged_on_failure(s, before);
      }
      return;
    }
    RequestId id = ids[rnd(0, static_cast<int32_t>(ids.size()) - 1)];
    ShadowRequest& r = live_.at(id);
    TransferId t = *r.leases.begin();
    const bool frees = r.leases.size() == 1 && r.release_pending;
    const int32_t gain = frees ? exclusive_blocks_of(id) : 0;
    const int32_t available = m_.num_available_blocks();
    ASSERT_TRUE(m_.unpin_transfer(id, t).ok());
    r.leases.erase(t);
    ASSERT_EQ(m_.num_available_blocks() - available, gain);
    if (frees) {
      ASSERT_FALSE(m_.has_allocation(id));
      live_.erase(id);
    }
  }

  // Frees `id` (which must be unleased) and checks exactly its exclusive blocks came back.
  void release(RequestId id) {
    const int32_t gain = exclusive_blocks_of(id);
    const int32_t available = m_.num_available_blocks();
    ASSERT_EQ(m_.free(id), ReleaseOutcome::kReleased);
    ASSERT_EQ(m_.num_available_blocks() - available, gain);
    shadow_of_preempted_[id] = std::move(live_.at(id));
    live_.erase(id);
  }

  void op_free() {
    if (live_.empty()) {
      ASSERT_EQ(m_.free(next_id_ + 1000), ReleaseOutcome::kNotAllocated);
      return;
    }
    RequestId id = pick(live_);
    ShadowRequest& r = live_.at(id);
    if (!r.leases.empty()) {
      const int32_t available = m_.num_available_blocks();
      ASSERT_EQ(m_.free(id), ReleaseOutcome::kDeferred);
      ASSERT_EQ(m_.num_available_blocks(), available);  // deferred, never lost
      r.release_pending = true;
      return;
    }
    release(id);
    shadow_of_preempted_.erase(id);  // finished, not preempted
    ASSERT_EQ(m_.free(id), ReleaseOutcome::kNotAllocated);
  }

  void op_oversized_claim() {
    // A request that fits the pool but (usually) not the free space: refused without eviction.
    AllocateRequest req =
        testing::request(next_id_ + 5000, std::max(1, m_.num_blocks() / m_.num_planes() * bs()));
    auto plan = m_.can_allocate(req);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    if (plan->fits) return;
    const uint64_t before = m_.state_fingerprint();
    auto adm = m_.allocate(req);
    ASSERT_EQ(adm.status().code(), ErrorCode::kResourceExhausted);
    expect_unchanged_on_failure(adm.status(), before);
  }

  void op_trim() {
    const int32_t evictable = m_.num_evictable_blocks();
    const int32_t freed = m_.trim_prefix_cache(rnd(0, 2 * m_.num_planes()));
    ASSERT_LE(freed, evictable);
    ASSERT_EQ(m_.num_evictable_blocks(), evictable - freed);
  }

  void op_reset() {
    const int32_t available = m_.num_available_blocks();
    m_.reset_prefix_cache();
    ASSERT_EQ(m_.num_prefix_entries(), 0);
    ASSERT_EQ(m_.num_evictable_blocks(), 0);
    ASSERT_EQ(m_.num_available_blocks(), available);  // cache-only blocks simply become free
  }

  KVCacheConfig config_;
  KVCacheManager m_;
  std::unique_ptr<CpuKVStorage> storage_;
  std::mt19937_64 rng_;
  std::vector<std::vector<TokenId>> stems_;
  std::map<RequestId, ShadowRequest> live_;
  std::map<RequestId, KVSnapshot> preempted_;
  std::map<RequestId, ShadowRequest> shadow_of_preempted_;
  RequestId next_id_ = 1;
  TransferId next_transfer_ = 1;
  int32_t refused_ = 0;
  int32_t hits_ = 0;
};

struct PropertyCase {
  const char* name;
  KVCacheConfig config;
};

KVCacheConfig with_watermark(KVCacheConfig c, double ratio) {
  c.watermark_ratio = ratio;
  return c;
}

class KvProperty : public ::testing::TestWithParam<int> {};

TEST_P(KvProperty, RandomOperationsKeepEveryInvariant) {
  const std::vector<PropertyCase> cases = {
      {"last_exited_prefix",
       with_watermark(testing::make_config(60, 2, 3, KVLayout::kLastExited, true), 0.05)},
      {"last_exited_prefix_b4", testing::make_config(40, 4, 2, KVLayout::kLastExited, true)},
      {"shared", testing::make_config(24, 4, 3, KVLayout::kShared, false)},
  };
  constexpr int32_t kSteps = 3000;
  for (const PropertyCase& c : cases) {
    SCOPED_TRACE(c.name);
    const uint64_t seed = 0x5eed0000u + static_cast<uint64_t>(GetParam());
    Harness h(c.config, seed);
    for (int32_t i = 0; i < kSteps; ++i) {
      h.step(i);
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasFailure()) {
        FAIL() << c.name << " seed " << seed << " failed at step " << i;
      }
    }
    // The mix must actually exercise refusals and (with caching) prefix hits.
    EXPECT_GT(h.ops_that_refused(), 0) << c.name;
    if (c.config.enable_prefix_caching) {
      EXPECT_GT(h.prefix_hits(), 0) << c.name;
      EXPECT_GT(h.manager().prefix_stats().evicted_entries, 0u) << c.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvProperty, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace rlt::kv
