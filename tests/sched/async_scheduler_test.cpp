// Asynchronous scheduling (one-step lookahead): the next batch is scheduled before the previous
// one's results are applied. Driven by a simulated runner whose results arrive one submission
// late; the exit depths must equal the synchronous scheduler's on the same gate signals.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <random>

#include "sched/scheduler.h"

namespace rlt::sched {
namespace {

kv::KVCacheManager make_kv(int32_t blocks, kv::KVLayout layout) {
  kv::KVCacheConfig c;
  c.geometry = {blocks, 1, 4, 1, 2, DType::kF32};
  c.depth = 4;
  c.layout = layout;
  return std::move(kv::KVCacheManager::create(c)).value();
}

// The gate logit of loop `depth` (0-based) of output token `token` of request `id`: a fixed
// function, so that sync and async runs see the same signals whatever the batch composition.
float gate_of(RequestId id, size_t token, int32_t depth, uint32_t salt) {
  std::mt19937 g(
      static_cast<uint32_t>(id * 7919 + token * 131 + static_cast<size_t>(depth) * 17 + salt));
  return std::uniform_real_distribution<float>(-3.0f, 1.5f)(g);
}

struct Workload {
  int requests = 6;
  uint32_t salt = 1;
  BatchMode mode = BatchMode::kRefill;
  ExitMode exit = ExitMode::kOuroDelayed;
  kv::KVLayout layout = kv::KVLayout::kLastExited;
  int32_t blocks = 256;
};

struct RunResult {
  std::map<RequestId, std::vector<int32_t>> depths, tokens;
  int lookahead_recurrent = 0;  // RECURRENT rows scheduled while the request had a batch in flight
  int32_t used_blocks_after = -1;
};

// Runs the workload to completion. `lookahead` = 0 is the synchronous loop; 1 keeps one submitted
// batch in flight while the next is scheduled.
void run(const Workload& w, int lookahead, RunResult& result) {
  auto kv = make_kv(w.blocks, w.layout);
  SchedulerConfig cfg;
  cfg.max_num_seqs = 4;
  cfg.max_num_batched_tokens = 16;
  cfg.prefill_chunk_size = 5;
  cfg.mode = w.mode;
  cfg.exit_mode = w.exit;
  cfg.async_scheduling = lookahead > 0;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  std::mt19937 rng(w.salt);
  for (int i = 1; i <= w.requests; ++i) {
    Request r;
    r.id = static_cast<RequestId>(i);
    const int prompt = 1 + static_cast<int>(rng() % 12);
    for (int t = 0; t < prompt; ++t) r.prompt.push_back(3 + t);
    r.params.max_tokens = 1 + static_cast<int>(rng() % 5);
    r.params.ignore_eos = true;
    r.exit = *model::resolve_exit_params(
        {1 + static_cast<int>(rng() % 2), 0, 0.4 + 0.1 * (rng() % 5)}, 4);
    for (int t = 0; t < r.params.max_tokens; ++t)
      r.exit_trace.push_back(t == 0 ? 4 : 1 + static_cast<int>(rng() % 4));
    if (w.exit == ExitMode::kTrace) {
      for (auto& d : r.exit_trace) d = std::max<int32_t>(d, static_cast<int32_t>(r.exit.min_loops));
    }
    EXPECT_TRUE(s.add_request(std::move(r)).ok());
  }
  struct Submitted {
    SchedulerOutput batch;
    RunnerOutput out;
  };
  std::deque<Submitted> in_flight;
  std::map<RequestId, int> pending;  // submitted, unapplied batches per request
  auto apply_oldest = [&] {
    Submitted sub = std::move(in_flight.front());
    in_flight.pop_front();
    for (const auto& item : sub.batch.items) --pending[item.id];
    auto u = s.update_from_output(sub.batch, sub.out);
    ASSERT_TRUE(u.ok()) << u.status().to_string();
    ASSERT_TRUE(s.confirm_finalized(u->exited).ok());
    for (RequestId id : u->finished) {
      auto r = s.take_finished(id);
      ASSERT_TRUE(r.has_value());
      result.depths[id] = r->exit_depths;
      result.tokens[id] = r->output_tokens;
    }
  };
  for (int step = 0; step < 4000 && (s.has_unfinished() || !in_flight.empty()); ++step) {
    auto b = s.schedule();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    if (b->has_value()) {
      Submitted sub{**b, {}};
      sub.out.seq = sub.batch.seq;
      sub.out.stage = sub.batch.stage;
      for (const auto& item : sub.batch.items) {
        const Request* r = s.find(item.id);
        ASSERT_NE(r, nullptr);
        if (sub.batch.stage == Stage::kRecurrent && pending[item.id] > 0)
          ++result.lookahead_recurrent;
        ++pending[item.id];
        sub.out.gate_logits.push_back(
            gate_of(item.id, r->output_tokens.size(), item.depth, w.salt));
        // A token that depends on what came before: equal tokens mean equal histories.
        sub.out.sampled.push_back(
            static_cast<int32_t>(1 + (r->output_tokens.size() * 5 + r->loops_done) % 50));
      }
      if (lookahead > 0) {
        auto u = s.on_submitted(sub.batch);
        ASSERT_TRUE(u.ok()) << u.status().to_string();
        ASSERT_TRUE(s.confirm_finalized(u->exited).ok());
      }
      in_flight.push_back(std::move(sub));
    }
    while (!in_flight.empty() &&
           static_cast<int>(in_flight.size()) > (b->has_value() ? lookahead : 0)) {
      apply_oldest();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_FALSE(s.has_unfinished()) << "the workload did not finish";
  result.used_blocks_after = kv.num_used_blocks();
}

TEST(AsyncScheduler, RefusesTheUndelayedExitPolicy) {
  SchedulerConfig cfg;
  cfg.async_scheduling = true;
  const Status s = cfg.validate();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--exit-policy ouro_delayed"), std::string::npos) << s.message();
  cfg.exit_mode = ExitMode::kOuroDelayed;
  EXPECT_TRUE(cfg.validate().ok());
  cfg.exit_mode = ExitMode::kTrace;
  EXPECT_TRUE(cfg.validate().ok());
}

TEST(AsyncScheduler, WorkedExampleMatchesTheSynchronousDepths) {
  // Hazard 0.3 every loop, threshold 0.5: the delayed exit happens after loop 3 (upstream's
  // worked example, outputs [4, 3, 3]), whether signals arrive at once or one batch late.
  const float g = static_cast<float>(std::log(0.3 / 0.7));
  for (int lookahead : {0, 1}) {
    auto kv = make_kv(64, kv::KVLayout::kLastExited);
    SchedulerConfig cfg;
    cfg.exit_mode = ExitMode::kOuroDelayed;
    cfg.async_scheduling = lookahead > 0;
    Scheduler s(cfg, kv, 4, {0}, nullptr);
    Request r;
    r.id = 1;
    r.prompt = {5, 6};
    r.params.max_tokens = 3;
    r.params.ignore_eos = true;
    r.exit = *model::resolve_exit_params({1, 0, 0.5}, 4);
    ASSERT_TRUE(s.add_request(std::move(r)).ok());
    std::deque<SchedulerOutput> in_flight;
    int recurrent_batches = 0;
    for (int i = 0; i < 60 && (s.has_unfinished() || !in_flight.empty()); ++i) {
      auto b = s.schedule();
      ASSERT_TRUE(b.ok());
      if (b->has_value()) {
        recurrent_batches += (*b)->stage == Stage::kRecurrent;
        if (lookahead) {
          ASSERT_TRUE(s.on_submitted(**b).ok());
        }
        in_flight.push_back(**b);
      }
      while (!in_flight.empty() &&
             static_cast<int>(in_flight.size()) > (b->has_value() ? lookahead : 0)) {
        const SchedulerOutput& done = in_flight.front();
        RunnerOutput out{done.seq, done.stage, std::vector<float>(done.items.size(), g),
                         std::vector<int32_t>(done.items.size(), 7), {}};
        auto u = s.update_from_output(done, out);
        ASSERT_TRUE(u.ok()) << u.status().to_string();
        ASSERT_TRUE(s.confirm_finalized(u->exited).ok());
        in_flight.pop_front();
      }
    }
    auto done = s.take_finished(1);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->exit_depths, (std::vector<int32_t>{4, 3, 3})) << "lookahead " << lookahead;
    EXPECT_EQ(recurrent_batches, 6) << "no loop is launched that the exit rule does not need";
    EXPECT_EQ(kv.num_used_blocks(), 0);
  }
}

TEST(AsyncScheduler, RandomWorkloadsExitAtTheSynchronousDepths) {
  int lookahead_rows = 0;
  for (uint32_t salt = 1; salt <= 24; ++salt) {
    Workload w;
    w.salt = salt;
    w.requests = 3 + static_cast<int>(salt % 6);
    w.mode = salt % 3 == 0 ? BatchMode::kNoRefill : BatchMode::kRefill;
    w.exit = salt % 4 == 0 ? ExitMode::kTrace : ExitMode::kOuroDelayed;
    w.layout = salt % 5 == 0 ? kv::KVLayout::kShared : kv::KVLayout::kLastExited;
    // Some pools hold only a few requests' whole lives: admission must keep the rest waiting
    // instead of letting everyone start and stall (no preemption here).
    if (salt % 3 == 1) w.blocks = 18 + static_cast<int32_t>(salt);
    RunResult sync, async;
    run(w, 0, sync);
    if (HasFatalFailure()) return;
    run(w, 1, async);
    if (HasFatalFailure()) return;
    EXPECT_EQ(async.depths, sync.depths) << "salt " << salt;
    EXPECT_EQ(async.tokens, sync.tokens) << "salt " << salt;
    EXPECT_EQ(async.depths.size(), static_cast<size_t>(w.requests));
    EXPECT_EQ(async.used_blocks_after, 0) << "salt " << salt;
    EXPECT_EQ(sync.lookahead_recurrent, 0);
    lookahead_rows += async.lookahead_recurrent;
  }
  EXPECT_GT(lookahead_rows, 0)
      << "async runs must schedule loops while the previous one is in flight";
}

TEST(AsyncScheduler, AbortWhileInFlightIsIgnoredOnArrival) {
  auto kv = make_kv(64, kv::KVLayout::kLastExited);
  SchedulerConfig cfg;
  cfg.exit_mode = ExitMode::kOuroDelayed;
  cfg.async_scheduling = true;
  Scheduler s(cfg, kv, 4, {0}, nullptr);
  Request r;
  r.id = 1;
  r.prompt = {5, 6, 7};
  r.params.max_tokens = 4;
  r.exit = *model::resolve_exit_params({1, 0, 0.5}, 4);
  ASSERT_TRUE(s.add_request(std::move(r)).ok());
  auto b = s.schedule();
  ASSERT_TRUE(b.ok() && b->has_value());
  ASSERT_TRUE(s.on_submitted(**b).ok());
  ASSERT_TRUE(s.abort(1).ok());
  EXPECT_EQ(kv.num_used_blocks(), 0);
  RunnerOutput out{(*b)->seq, (*b)->stage, {}, {}, {}};
  EXPECT_TRUE(s.update_from_output(**b, out).ok());
  EXPECT_FALSE(s.has_unfinished());
}

}  // namespace
}  // namespace rlt::sched
