// Scheduler behaviour with a real KV manager and no model: stage choice, budgets, admission,
// bypass limits, exit policies and cancellation, driven by hand-made runner outputs.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "kv/cpu_kv_storage.h"

namespace rlt::sched {
namespace {

kv::KVCacheManager make_kv(int32_t blocks, int32_t block_size, kv::KVLayout layout, int32_t depth = 4) {
  kv::KVCacheConfig c;
  c.geometry = {blocks, 1, block_size, 1, 2, DType::kF32};
  c.depth = depth;
  c.layout = layout;
  return std::move(kv::KVCacheManager::create(c)).value();
}

Request make_request(RequestId id, int32_t prompt_len, int64_t max_tokens, int priority = 0) {
  Request r;
  r.id = id;
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(10 + i);
  r.params.max_tokens = max_tokens;
  r.params.priority = priority;
  r.params.ignore_eos = true;
  r.exit = *model::resolve_exit_params({2, 0, 1.0}, 4);
  return r;
}

// Applies a batch as a runner would: RECURRENT rows get `gate`, CODA rows sample token 7.
StepUpdate apply(Scheduler& s, const SchedulerOutput& b, float gate = -10.0f) {
  RunnerOutput out;
  out.seq = b.seq;
  out.stage = b.stage;
  for (size_t i = 0; i < b.items.size(); ++i) {
    out.gate_logits.push_back(gate);
    out.sampled.push_back(7);
  }
  auto u = s.update_from_output(b, out);
  EXPECT_TRUE(u.ok()) << u.status().to_string();
  return u.ok() ? *u : StepUpdate{};
}

SchedulerOutput next(Scheduler& s) {
  auto b = s.schedule();
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_TRUE(b->has_value());
  return **b;
}

TEST(Scheduler, ChunkedPrefillFillsTheTokenBudget) {
  // Worked example: budget 6, chunk 4, queue [A (10 tokens, 4 done), B (3), C (2)] -> A[4, 8), B[0, 2).
  auto kv = make_kv(64, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 6;
  cfg.prefill_chunk_size = 4;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(1, 10, 4)).ok());
  SchedulerOutput first = next(s);
  ASSERT_EQ(first.items.size(), 1u);
  EXPECT_EQ(first.items[0].token_start, 0);
  EXPECT_EQ(first.items[0].token_count, 4);
  apply(s, first);
  ASSERT_TRUE(s.add_request(make_request(2, 3, 4)).ok());
  ASSERT_TRUE(s.add_request(make_request(3, 2, 4)).ok());
  SchedulerOutput b = next(s);
  EXPECT_EQ(b.stage, Stage::kPrefill);
  ASSERT_EQ(b.items.size(), 2u);
  EXPECT_EQ(b.items[0].id, 1u);
  EXPECT_EQ(b.items[0].token_start, 4);
  EXPECT_EQ(b.items[0].token_count, 4);
  EXPECT_EQ(b.items[1].id, 2u);
  EXPECT_EQ(b.items[1].token_start, 0);
  EXPECT_EQ(b.items[1].token_count, 2);
  EXPECT_EQ(first.seq + 1, b.seq) << "batch numbers have no gaps";
}

TEST(Scheduler, AdmissionDefersWhenClaimPlusReservedGrowthExceedsFreeBlocks) {
  // 16 blocks of 4 tokens, 4 planes. A (prompt 8, max_tokens 9: 16 tokens over its life) is
  // admitted with its first chunk (1 page x 4 planes = 4 blocks); the rest of its life
  // (4 pages x 4 planes - 4 = 12 blocks) is reserved. B's first chunk needs 4 blocks: 4 + 12 > 12
  // free, so B waits.
  auto kv = make_kv(16, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  cfg.prefill_chunk_size = 4;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(1, 8, 9)).ok());
  next(s);
  EXPECT_EQ(*kv.allocated_blocks(1), 4);
  EXPECT_EQ(kv.num_free_blocks(), 12);
  Request b = make_request(2, 8, 1);
  ASSERT_TRUE(s.add_request(std::move(b)).ok());
  auto out = s.schedule();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(s.find(2)->stage, Stage::kWaiting);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_GE(s.counters().admission_deferrals, 1);
}

TEST(Scheduler, BypassLimitStopsTheAdmissionScan) {
  // Worked example: 8 free blocks, waiting A (12), B (4), C (4), bypass limit 1 -> B admitted,
  // A's bypass count 1, scan stops, queue [A, C].
  auto kv = make_kv(12, 1, kv::KVLayout::kShared);
  SchedulerConfig cfg;
  cfg.incremental_kv = false;
  cfg.max_admission_bypasses = 1;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(9, 4, 1)).ok());  // D holds 4 blocks
  next(s);
  ASSERT_EQ(kv.num_free_blocks(), 8);
  ASSERT_TRUE(s.add_request(make_request(1, 12, 1)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, 4, 1)).ok());
  ASSERT_TRUE(s.add_request(make_request(3, 4, 1)).ok());
  ASSERT_TRUE(s.schedule().ok());
  EXPECT_EQ(s.find(2)->stage, Stage::kPrefill);
  EXPECT_EQ(s.find(1)->stage, Stage::kWaiting);
  EXPECT_EQ(s.find(3)->stage, Stage::kWaiting);
  EXPECT_EQ(s.find(1)->admission_bypasses, 1);
  EXPECT_EQ(s.num_waiting(), 2);
}

TEST(Scheduler, PriorityPolicyAdmitsLowerValuesFirstAndStably) {
  auto kv = make_kv(64, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  cfg.policy = QueuePolicy::kPriority;
  cfg.max_num_seqs = 1;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(1, 2, 1, 10)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, 2, 1, -5)).ok());
  ASSERT_TRUE(s.add_request(make_request(3, 2, 1, -5)).ok());
  SchedulerOutput b = next(s);
  ASSERT_EQ(b.items.size(), 1u);
  EXPECT_EQ(b.items[0].id, 2u) << "-5 beats 10; among equal priorities arrival order holds";
}

TEST(Scheduler, RowsAtDifferentDepthsShareARecurrentBatchAndRefill) {
  auto kv = make_kv(64, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(1, 3, 3)).ok());
  for (Stage expected : {Stage::kPrefill, Stage::kCoda, Stage::kPrelude, Stage::kRecurrent}) {
    SchedulerOutput step = next(s);
    ASSERT_EQ(step.stage, expected) << stage_name(step.stage);
    apply(s, step);
  }
  // Request 2 arrives while request 1 is in its second loop; it joins request 1's recurrent
  // batch at loop 1 (refill at the loop boundary), and never waits behind more than one prefill.
  ASSERT_TRUE(s.add_request(make_request(2, 3, 3)).ok());
  bool mixed_depths = false;
  int prefills_in_a_row = 0;
  for (int i = 0; i < 30 && s.has_unfinished(); ++i) {
    SchedulerOutput b = next(s);
    prefills_in_a_row = b.stage == Stage::kPrefill ? prefills_in_a_row + 1 : 0;
    EXPECT_LE(prefills_in_a_row, 1);
    if (b.stage == Stage::kRecurrent && b.items.size() == 2) mixed_depths |= b.items[0].depth != b.items[1].depth;
    apply(s, b);
  }
  EXPECT_TRUE(mixed_depths) << "rows at different loop depths must share a recurrent batch";
}

// Where a CODA costs a loop or more (Huginn: its readout and prelude attend), tokens that left the
// loop wait until they are as many as those still looping, then go out together: fewer CODA
// batches, the same depths. (The first token after a prompt never waits.)
TEST(Scheduler, ExpensiveReadoutsGatherExitedTokens) {
  std::map<bool, int64_t> coda_batches;
  std::map<bool, std::vector<std::vector<int32_t>>> depths;
  for (bool gather : {false, true}) {
    auto kv = make_kv(256, 4, kv::KVLayout::kLastExited, 8);
    SchedulerConfig cfg;
    cfg.exit_mode = ExitMode::kTrace;
    cfg.gather_exited_tokens = gather;
    Scheduler s(cfg, kv, 8, {0}, nullptr);
    const std::vector<std::vector<int32_t>> traces = {
        {8, 2, 2, 7}, {8, 3, 5, 3}, {8, 5, 6, 2}, {8, 6, 1, 4}, {8, 1, 8, 5}, {8, 7, 3, 6}};
    for (size_t i = 0; i < traces.size(); ++i) {
      Request r = make_request(1 + i, 3, 4);
      r.exit = *model::resolve_exit_params({1, 0, 1.0}, 8);
      r.exit_trace = traces[i];
      ASSERT_TRUE(s.add_request(std::move(r)).ok());
    }
    for (int i = 0; i < 400 && s.has_unfinished(); ++i) {
      auto b = s.schedule();
      ASSERT_TRUE(b.ok() && b->has_value());
      coda_batches[gather] += (**b).stage == Stage::kCoda;
      StepUpdate u = apply(s, **b);
      ASSERT_TRUE(s.confirm_finalized(u.exited).ok());
    }
    ASSERT_FALSE(s.has_unfinished());
    for (size_t i = 0; i < traces.size(); ++i) {
      depths[gather].push_back(s.take_finished(1 + i)->exit_depths);
      EXPECT_EQ(depths[gather].back(), traces[i]);
    }
  }
  EXPECT_LT(coda_batches[true], coda_batches[false]);
}

TEST(Scheduler, DelayedExitTriggersOneLoopLater) {
  // sigmoid(g) = 0.3 every loop; threshold 0.5 fires after loop 2: ouro exits at 2, ouro_delayed
  // at 3.
  const float g = static_cast<float>(std::log(0.3 / 0.7));
  for (ExitMode mode : {ExitMode::kOuro, ExitMode::kOuroDelayed}) {
    auto kv = make_kv(64, 4, kv::KVLayout::kLastExited);
    SchedulerConfig cfg;
    cfg.exit_mode = mode;
    Scheduler s(cfg, kv, 4, {0}, nullptr);
    Request r = make_request(1, 2, 3);
    r.exit = *model::resolve_exit_params({1, 0, 0.5}, 4);
    ASSERT_TRUE(s.add_request(std::move(r)).ok());
    for (int i = 0; i < 40 && s.has_unfinished(); ++i) {
      auto b = s.schedule();
      ASSERT_TRUE(b.ok() && b->has_value());
      StepUpdate u = apply(s, **b, g);
      ASSERT_TRUE(s.confirm_finalized(u.exited).ok());
    }
    auto done = s.take_finished(1);
    ASSERT_TRUE(done.has_value());
    const std::vector<int32_t> expected = mode == ExitMode::kOuro ? std::vector<int32_t>{4, 2, 2} : std::vector<int32_t>{4, 3, 3};
    EXPECT_EQ(done->exit_depths, expected);
    EXPECT_EQ(kv.num_used_blocks(), 0);
  }
}

TEST(Scheduler, TraceModeReplaysGivenDepthsAndValidatesThem) {
  auto kv = make_kv(64, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  cfg.exit_mode = ExitMode::kTrace;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  Request bad = make_request(1, 2, 3);
  bad.exit_trace = {3, 2, 2};
  EXPECT_NE(s.add_request(std::move(bad)).message().find("must start with the model depth 4"), std::string::npos);
  Request r = make_request(1, 2, 3);
  r.exit_trace = {4, 3, 2};
  ASSERT_TRUE(s.add_request(std::move(r)).ok());
  for (int i = 0; i < 40 && s.has_unfinished(); ++i) {
    auto b = s.schedule();
    ASSERT_TRUE(b.ok() && b->has_value());
    StepUpdate u = apply(s, **b, 5.0f);
    ASSERT_TRUE(s.confirm_finalized(u.exited).ok());
  }
  EXPECT_EQ(s.take_finished(1)->exit_depths, (std::vector<int32_t>{4, 3, 2}));
}

TEST(Scheduler, AbortInAnyStageReleasesEverything) {
  auto kv = make_kv(64, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(1, 6, 4)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, 6, 4)).ok());
  SchedulerOutput b = next(s);
  ASSERT_TRUE(s.abort(1).ok());
  apply(s, b);  // a late result for the aborted request is ignored
  EXPECT_TRUE(s.find(1)->finished());
  EXPECT_EQ(s.find(1)->finish, FinishReason::kAbort);
  EXPECT_FALSE(kv.has_allocation(1));
  EXPECT_EQ(s.abort(1).code(), ErrorCode::kNotFound);
  EXPECT_TRUE(s.add_request(make_request(1, 6, 4)).code() == ErrorCode::kAlreadyExists)
      << "the finished entry is still held until taken";
  ASSERT_TRUE(s.take_finished(1).has_value());
  EXPECT_TRUE(s.add_request(make_request(1, 6, 4)).ok()) << "an id may be reused once released";
}

TEST(Scheduler, IncrementalAdmissionPromisesEveryRequestItsWholeLife) {
  // 90 blocks of 4 tokens, 4 planes, no preemption. Each request needs 40, 32 or 28 blocks over
  // its life; each fits its first chunk of 3 tokens. Admitting all three on their first chunks
  // (reserving only the others' growth) would leave 100 blocks promised for 90: every request
  // would stall halfway. Admission must promise each request its own whole life too.
  auto kv = make_kv(90, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  cfg.max_num_seqs = 3;
  cfg.prefill_chunk_size = 3;
  cfg.max_num_batched_tokens = 16;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  ASSERT_TRUE(s.add_request(make_request(1, 29, 10)).ok());
  ASSERT_TRUE(s.add_request(make_request(2, 24, 8)).ok());
  ASSERT_TRUE(s.add_request(make_request(3, 18, 8)).ok());
  int finished = 0;
  for (int i = 0; i < 2000 && s.has_unfinished(); ++i) {
    auto b = s.schedule();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    ASSERT_TRUE(b->has_value()) << "stalled with " << s.num_running() << " running and "
                                << kv.num_available_blocks() << " blocks free";
    StepUpdate u = apply(s, **b);
    ASSERT_TRUE(s.confirm_finalized(u.exited).ok());
    for (RequestId id : u.finished) finished += s.take_finished(id).has_value();
  }
  EXPECT_EQ(finished, 3);
  EXPECT_EQ(kv.num_used_blocks(), 0);
}

// Preemption as the engine does it, over host storage.
class HostPreemption : public PreemptionHooks {
 public:
  HostPreemption(kv::KVCacheManager& kv, kv::CpuKVStorage& storage) : kv_(kv), storage_(storage) {}
  Result<kv::KVSnapshot> snapshot_kv(RequestId id) override { return kv_.snapshot(id, storage_); }
  Status resume_kv(RequestId id, const kv::KVSnapshot& s) override {
    return kv_.resume(id, s, storage_);
  }

 private:
  kv::KVCacheManager& kv_;
  kv::CpuKVStorage& storage_;
};

// The running count the admission loop reads is kept as stages change (admission, preemption,
// resumption, exits, finishing, aborts in any stage): it equals a walk over the requests.
TEST(Scheduler, RunningCountEqualsAWalkUnderRandomTraffic) {
  for (const bool preemption : {false, true}) {
    SCOPED_TRACE(preemption ? "preemption" : "no preemption");
    auto kv = make_kv(40, 4, kv::KVLayout::kLastExited);
    auto storage = std::move(kv::CpuKVStorage::create(kv.config().geometry)).value();
    HostPreemption hooks(kv, *storage);
    SchedulerConfig cfg;
    cfg.max_num_seqs = 3;
    cfg.prefill_chunk_size = 4;
    cfg.max_num_batched_tokens = 8;
    cfg.enable_preemption = preemption;
    cfg.policy = QueuePolicy::kPriority;
    Scheduler s(cfg, kv, 4, {0}, preemption ? &hooks : nullptr);
    std::mt19937 rng(5);
    std::vector<RequestId> ids;
    RequestId next_id = 1;
    for (int step = 0; step < 600; ++step) {
      if (rng() % 4 == 0 && next_id < 40) {
        ASSERT_TRUE(s.add_request(make_request(next_id, 1 + static_cast<int32_t>(rng() % 9),
                                               1 + rng() % 6, static_cast<int>(rng() % 3)))
                        .ok());
        ids.push_back(next_id++);
      }
      if (rng() % 9 == 0 && !ids.empty()) (void)s.abort(ids[rng() % ids.size()]);
      auto b = s.schedule();
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      if (b->has_value()) {
        StepUpdate u = apply(s, **b, rng() % 2 ? 10.0f : -10.0f);
        ASSERT_TRUE(s.confirm_finalized(u.exited).ok());
      }
      int32_t walked = 0;
      for (RequestId id : ids) {
        const Request* r = s.find(id);
        walked += r != nullptr && r->stage != Stage::kWaiting && !r->finished();
      }
      ASSERT_EQ(s.num_running(), walked) << "step " << step;
      for (RequestId id : ids)
        if (const Request* r = s.find(id); r && r->finished()) (void)s.take_finished(id);
    }
    EXPECT_GT(next_id, 30u);
    if (preemption) {
      EXPECT_GT(s.counters().preemptions, 0);
    }
  }
}

TEST(Scheduler, RefusesImpossibleRequests) {
  auto kv = make_kv(8, 4, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  Status big = s.add_request(make_request(1, 8, 10));  // 17 tokens -> 5 pages x 4 planes = 20 > 8
  EXPECT_EQ(big.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(big.message().find("needs 20 KV blocks"), std::string::npos) << big.message();
  EXPECT_NE(s.add_request(make_request(2, 0, 1)).message().find("empty"), std::string::npos);
  ASSERT_TRUE(s.add_request(make_request(3, 2, 1)).ok());
  EXPECT_EQ(s.add_request(make_request(3, 2, 1)).code(), ErrorCode::kAlreadyExists);
}

}  // namespace
}  // namespace rlt::sched
