// The engine thread: tokens reach channels, limits, cancellation frees KV, stop fails what is left.
#include "server/engine_worker.h"

#include <gtest/gtest.h>

#include "common/log.h"
#include "demo_model.h"

namespace rlt::server {
namespace {

using namespace std::chrono_literals;

EngineWorker::Options options(int max_requests = 8, double step_delay_s = 0.0) {
  set_log_level(LogLevel::kWarn);
  EngineWorker::Options o;
  o.engine.model = testing::demo_dir();
  o.engine.num_kv_blocks = 256;
  o.engine.threads = 1;
  o.max_requests = max_requests;
  o.step_delay_s = step_delay_s;
  return o;
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Drains a channel until every choice finished (or an error, or 10 s).
std::vector<TokenBatch> collect(Channel& ch) {
  std::vector<TokenBatch> all(ch.choices());
  const auto deadline = Clock::now() + 10s;
  std::vector<TokenBatch> got;
  while (Clock::now() < deadline && !ch.error()) {
    ch.take(Clock::now() + 50ms, &got);
    bool done = true;
    for (size_t i = 0; i < got.size(); ++i) {
      auto& a = all[i];
      a.tokens.insert(a.tokens.end(), got[i].tokens.begin(), got[i].tokens.end());
      a.exit_depths.insert(a.exit_depths.end(), got[i].exit_depths.begin(), got[i].exit_depths.end());
      if (got[i].finished) {
        a.finished = true;
        a.finish_reason = got[i].finish_reason;
      }
      done = done && a.finished;
    }
    if (done) break;
  }
  return all;
}

void wait_for_zero_kv(const Metrics& m, const EngineWorker& w) {
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline && (w.in_flight() > 0 || m.engine().kv_used_blocks > 0)) std::this_thread::sleep_for(5ms);
}

TEST(EngineWorker, RefusesWhileLoadingThenServes) {
  Metrics metrics;
  auto o = options();
  o.load_delay_s = 0.3;
  EngineWorker w(o, &metrics);
  w.start();
  std::shared_ptr<Channel> ch;
  auto e = w.submit({{1, 2, 3}}, greedy(4), &ch);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 503);
  EXPECT_EQ(e->code, "not_ready");
  EXPECT_EQ(e->retry_after_s, 1);
  ASSERT_EQ(w.wait_loaded(10000ms), EngineWorker::State::kReady);
  EXPECT_NE(w.attention_info().find("selected"), std::string::npos);
  ASSERT_FALSE(w.submit({{1, 2, 3}, {4, 5}}, greedy(6), &ch).has_value());
  auto out = collect(*ch);
  for (const auto& b : out) {
    EXPECT_TRUE(b.finished);
    EXPECT_EQ(b.finish_reason, "length");
    EXPECT_EQ(b.tokens.size(), 6u);
    EXPECT_EQ(b.exit_depths.size(), 6u);
  }
  wait_for_zero_kv(metrics, w);
  EXPECT_EQ(w.in_flight(), 0);
}

TEST(EngineWorker, SameTokensAsTheEngineRunDirectly) {
  Metrics metrics;
  EngineWorker w(options(), &metrics);
  w.start();
  ASSERT_EQ(w.wait_loaded(10000ms), EngineWorker::State::kReady);
  SamplingParams p = greedy(12);
  p.temperature = 0.9;
  p.seed = 42;
  std::shared_ptr<Channel> ch;
  ASSERT_FALSE(w.submit({{7, 8, 9}}, p, &ch).has_value());
  auto served = collect(*ch)[0].tokens;

  auto engine = Engine::create(options().engine);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->add_request(1, {7, 8, 9}, p).ok());
  RequestResult direct;
  for (int i = 0; i < 1000 && (*engine)->has_unfinished(); ++i) {
    auto outputs = (*engine)->step();
    ASSERT_TRUE(outputs.ok());
    for (const auto& o : *outputs) direct.append(o);
  }
  EXPECT_TRUE(direct.finished);
  EXPECT_EQ(served, direct.token_ids);
}

TEST(EngineWorker, QueueLimitAnswers429) {
  Metrics metrics;
  EngineWorker w(options(/*max_requests=*/2, /*step_delay_s=*/0.01), &metrics);
  w.start();
  ASSERT_EQ(w.wait_loaded(10000ms), EngineWorker::State::kReady);
  std::shared_ptr<Channel> a, b;
  ASSERT_FALSE(w.submit({{1, 2}}, greedy(100), &a).has_value());
  auto e = w.submit({{1, 2}, {3, 4}}, greedy(100), &b);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 429);
  EXPECT_EQ(e->retry_after_s, 1);
  e = w.submit({{1}, {2}, {3}}, greedy(2), &b);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);  // could never fit
  w.cancel(a->request_ids());
  wait_for_zero_kv(metrics, w);
  EXPECT_FALSE(w.submit({{1, 2}, {3, 4}}, greedy(2), &b).has_value());
}

TEST(EngineWorker, CancelEndsTheRequestAndFreesItsKv) {
  Metrics metrics;
  EngineWorker w(options(8, 0.005), &metrics);
  w.start();
  ASSERT_EQ(w.wait_loaded(10000ms), EngineWorker::State::kReady);
  std::shared_ptr<Channel> ch;
  ASSERT_FALSE(w.submit({std::vector<int32_t>(40, 5)}, greedy(500), &ch).has_value());
  std::vector<TokenBatch> got;
  ASSERT_TRUE(ch->take(Clock::now() + 5s, &got));
  ASSERT_FALSE(ch->error().has_value()) << ch->error()->message;
  const auto deadline = Clock::now() + 2s;  // metrics are published right after the tokens
  while (metrics.engine().kv_used_blocks == 0 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_GT(metrics.engine().kv_used_blocks, 0);
  w.cancel(ch->request_ids());
  auto rest = collect(*ch);
  EXPECT_TRUE(rest[0].finished);
  EXPECT_EQ(rest[0].finish_reason, "abort");
  wait_for_zero_kv(metrics, w);
  EXPECT_EQ(metrics.engine().kv_used_blocks, 0);
  EXPECT_EQ(w.in_flight(), 0);
}

TEST(EngineWorker, AdmissionErrorsReachTheChannel) {
  Metrics metrics;
  EngineWorker w(options(), &metrics);
  w.start();
  ASSERT_EQ(w.wait_loaded(10000ms), EngineWorker::State::kReady);
  std::shared_ptr<Channel> ch;
  ASSERT_FALSE(w.submit({{1, 2}, {999}}, greedy(4), &ch).has_value());  // 999 is outside the vocabulary
  collect(*ch);
  ASSERT_TRUE(ch->error().has_value());
  EXPECT_EQ(ch->error()->status, 400);
  EXPECT_NE(ch->error()->message.find("999"), std::string::npos);
  wait_for_zero_kv(metrics, w);
  EXPECT_EQ(w.in_flight(), 0);
}

TEST(EngineWorker, StopFailsUnfinishedRequestsAndRefusesNewOnes) {
  Metrics metrics;
  EngineWorker w(options(8, 0.01), &metrics);
  w.start();
  ASSERT_EQ(w.wait_loaded(10000ms), EngineWorker::State::kReady);
  std::shared_ptr<Channel> ch;
  ASSERT_FALSE(w.submit({{1, 2, 3}}, greedy(500), &ch).has_value());
  std::vector<TokenBatch> got;
  ASSERT_TRUE(ch->take(Clock::now() + 5s, &got));
  ASSERT_FALSE(ch->error().has_value()) << ch->error()->message;
  w.stop();
  ASSERT_TRUE(ch->error().has_value());
  EXPECT_EQ(ch->error()->status, 503);
  EXPECT_EQ(ch->error()->code, "shutting_down");
  EXPECT_EQ(w.in_flight(), 0);
  EXPECT_EQ(metrics.engine().kv_used_blocks, 0);
  std::shared_ptr<Channel> late;
  auto e = w.submit({{1}}, greedy(1), &late);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 503);
}

}  // namespace
}  // namespace rlt::server
